// The blob layout: a header that names what the payload is (key, kernel, params, backend, target,
// compiler, implementation) and checksums it, then the payload. Pure functions, no files: the
// fuzz target (fuzz/fuzz_blob_header.cpp) runs the parser alone.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "cache/artifact_meta.hpp"

namespace jit::detail {

// Layout of format 2 (docs/cache-format.md), little-endian as the machine writes it:
//   0  "JITKBLOB"  8  u32 format  12 u32 header_size  16 u64 payload_size  24 key (32 hex)
//   56 payload XXH3-128 (32 hex)  88 header XXH3-128 (32 hex, of the header with this field left out)
//   120 u32 field count  124 the fields, each u32 length + bytes: kernel, params, backend, arch,
//   compiler, implementation, implementation_version, compile_ms (numbers as decimal text)
inline constexpr std::size_t kBlobFixedHeader = 124;
inline constexpr std::size_t kBlobPayloadChecksumAt = 56, kBlobChecksumChars = 32;
inline constexpr std::size_t kMaxBlobHeader = kBlobFixedHeader + 64 * 1024;
// Larger than any kernel binary: a blob claiming more is damaged, never allocated.
inline constexpr std::uint64_t kMaxBlobPayload = std::uint64_t{1} << 31;

struct BlobHeader {
  std::string key;
  ArtifactMeta meta;
  std::uint64_t payload_size = 0;
  std::string payload_checksum;
  std::size_t header_size = 0;
};

enum class HeaderStatus { Ok, Outdated, Damaged };

// The header for payload, bound to key and meta.
std::string encode_blob_header(const std::string& key, const ArtifactMeta& meta, std::string_view payload);
// Parses the header at the start of data (which may hold more: the payload). Damaged: *problem
// says why; Outdated: a blob of an older (or newer) format, which is a miss, not damage.
HeaderStatus parse_blob_header(std::string_view data, BlobHeader* out, std::string* problem);
// Why a blob bound as h is not the artifact key + expect names, or "". compile_ms is not compared.
std::string binding_mismatch(const BlobHeader& h, const std::string& key, const ArtifactMeta* expect);
// A whole blob held in memory (a pack's entry): a whole, undamaged header, payload of the size and
// checksum it names, bound to expected_key. Returns "" and fills *h, or why not.
std::string check_blob_binding(std::string_view bytes, const std::string& expected_key, BlobHeader* h);
// The header checksum of a whole header (its bytes 88-119 left out): lets the fuzz target reach the
// field parsing behind it.
std::string blob_header_checksum(std::string_view header);
// Whether s is a cache key: 32 lowercase hex digits.
bool is_cache_key(std::string_view s);

}  // namespace jit::detail
