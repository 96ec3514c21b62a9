// libFuzzer target: bytes as a CPU kernel's object code. libjitk's own loader must load them or refuse
// them with a reason, never crash (the loaded code is never run).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/cpu/object_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<char> bytes(data, data + size);
  const auto loaded = jit::detail::load_relocatable_object(bytes, "jitk_entry");
  if (!loaded.image && loaded.refused.empty()) __builtin_trap();  // a refusal always says why
  return 0;
}
