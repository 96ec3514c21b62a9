// Hashing: XXH3-128 of named fields (keys, fingerprints) and of byte ranges (blob checksums).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace jit::detail {

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

// checksum_hex of bytes given in parts (a file read a piece at a time): the same hex.
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;
  void add(const void* data, std::size_t size);
  std::string hex() const;

 private:
  void* state_;  // XXH3_state_t
};

}  // namespace jit::detail
