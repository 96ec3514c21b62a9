// libFuzzer target: any bytes as a jitk pack. Must end in the pack's contents or a jit::Error, never
// a crash, a hang, an allocation past the pack's limits, or another exception.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "jit/error.hpp"
#include "runtime/shipping/pack_reader.hpp"

namespace {
class FuzzPack final : public jit::detail::PackBytes {
 public:
  FuzzPack(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::int64_t size() const override { return static_cast<std::int64_t>(size_); }
  bool read_at(void* out, std::size_t n, std::int64_t offset) const override {
    if (offset < 0 || static_cast<std::uint64_t>(offset) > size_ || n > size_ - static_cast<std::size_t>(offset)) return false;
    if (n) std::memcpy(out, data_ + offset, n);
    return true;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const FuzzPack pack(data, size);
  try {
    const auto contents = jit::detail::read_pack(pack, "fuzz.jitkpack", 1'800'000'000);
    for (const auto& a : contents.artifacts) {
      (void)a.describe();
      (void)jit::detail::read_pack_payload(pack, a, "fuzz.jitkpack");
    }
  } catch (const jit::Error&) {
  }
  return 0;
}
