// libFuzzer target: any bytes as a warm manifest. Must end in items or a jit::Error, never a crash,
// a hang or another exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/shipping/manifest.hpp"

namespace jit {
// parse_manifest (the file wrapper) names the default target; the harness has no backends.
const Target& default_target() {
  static const Target cpu = Target::cpu();
  return cpu;
}
}  // namespace jit

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    jit::detail::parse_manifest_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml",
                                     jit::Target::cpu());
  } catch (const jit::Error&) {
  }
  return 0;
}
