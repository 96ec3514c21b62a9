// Reading a jitk pack (what `jitk export` writes) without trusting a byte of it: no cache, no
// backend, so it can be fuzzed on its own (fuzz/fuzz_pack.cpp).
//
// Layout: "JITKPACK", u32 pack version, u32 cache format, u64 JSON length, the JSON (jitk version,
// "artifacts": key, kernel, params, backend, arch, compiler, implementation, implementation_version,
// compile_ms, size, checksum; "tuning": the autotuning decisions, optional), the payloads in row
// order, then the XXH3-128 (32 hex digits) of everything before it. A payload is the artifact's
// blob as the cache keeps it (pack version 2, cache/blob_format.hpp): its header binds it to its
// key, kernel, params, backend, target, compiler and implementation, and the reader checks that
// binding against the entry it sits in (size and checksum are the whole blob's).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cache/artifact_meta.hpp"
#include "cache/sqlite_index.hpp"

namespace jit::detail {

inline constexpr char kPackMagic[8] = {'J', 'I', 'T', 'K', 'P', 'A', 'C', 'K'};
inline constexpr std::uint32_t kPackVersion = 2;  // 2: payloads are bound blobs
inline constexpr std::int64_t kPackHeaderBytes = 8 + 4 + 4 + 8, kPackTrailerBytes = 32;

// Limits, checked before what they limit is read: a whole pack, its table of contents, one
// artifact's payload (a pack of a whole fleet's kernels is a few hundred MB).
inline constexpr std::int64_t kMaxPackBytes = 16LL << 30;
inline constexpr std::int64_t kMaxPackIndexBytes = 64LL << 20;
inline constexpr std::int64_t kMaxPackPayloadBytes = 1LL << 30;
// Entries of each list: each artifact is a blob written and synced, so a pack of a million empty
// ones would take hours; a warmed fleet has a few thousand.
inline constexpr std::size_t kMaxPackEntries = 1 << 16;

struct PackArtifact {
  std::string key, checksum;
  ArtifactMeta meta;
  std::int64_t offset = 0, size = 0;  // of its payload in the pack
  int number = 0;                     // 1-based, in the pack's order
  // "artifact #3 (saxpy (dtype=f32) cpu znver3)", escaped for a terminal.
  std::string describe() const;
};

struct PackContents {
  std::vector<PackArtifact> artifacts;
  std::vector<TuningRow> tuning;
};

// The bytes of a pack: a file, or memory (the fuzz target).
class PackBytes {
 public:
  virtual ~PackBytes() = default;
  virtual std::int64_t size() const = 0;
  // Exactly n bytes at offset; false when they cannot be read.
  virtual bool read_at(void* out, std::size_t n, std::int64_t offset) const = 0;
};

// Reads and checks a whole pack, in this order: its size against kMaxPackBytes, its header, its
// table of contents (size, JSON, then every field of every entry for its type and range), the
// payload sizes against the file's, then each payload's checksum and the whole file's, read a
// piece at a time, then each payload's blob binding (one payload in memory at a time): a payload
// that is not the artifact its entry names (swapped, relabelled) refuses the whole pack. Throws Error{CacheIo} naming the pack (by `name`), the entry and the field, and
// ending "nothing imported". `now` (seconds since the epoch) bounds creation dates.
PackContents read_pack(const PackBytes& bytes, const std::string& name, std::int64_t now);

// The payload of one artifact of a pack read_pack accepted (the whole bound blob, stored as it
// is), read again and checked again, checksum and binding (the file may have changed since):
// Error{CacheIo} when it does not match.
std::vector<char> read_pack_payload(const PackBytes& bytes, const PackArtifact& artifact, const std::string& name);

// Why an artifact's fields would not be accepted in a pack ("" when they would): export leaves
// out a row of its index that import would refuse.
std::string artifact_problem(const std::string& key, const ArtifactMeta& meta);

}  // namespace jit::detail
