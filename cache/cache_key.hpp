// CacheKey: the XXH3-128 hash of everything that changes a compiled binary, and checksums of blobs.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace jit::detail {

// Bumped whenever the index schema or the key recipe changes (2: implementations, name and
// version, in the key and the index; format-1 indexes are migrated in place).
inline constexpr int kCacheFormatVersion = 2;
// Bumped whenever the blob layout changes (a blob of another layout reads as damaged).
inline constexpr int kBlobFormatVersion = 1;

struct CacheKey {
  std::uint64_t high = 0, low = 0;
  std::string hex() const;  // 32 lowercase hex digits
  bool operator==(const CacheKey&) const = default;
};

// Hashes named fields; each field is length-prefixed so ("ab","c") and ("a","bc") differ.
class KeyBuilder {
 public:
  KeyBuilder();
  ~KeyBuilder();
  KeyBuilder(const KeyBuilder&) = delete;
  KeyBuilder& operator=(const KeyBuilder&) = delete;
  KeyBuilder& add(std::string_view field, std::string_view value);
  CacheKey finish() const;

 private:
  void* state_;  // XXH3_state_t
};

// XXH3-128 of a byte range, as hex: the checksum stored with every blob.
std::string checksum_hex(const void* data, std::size_t size);

}  // namespace jit::detail
