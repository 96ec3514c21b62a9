// The storage-tier interface: one narrow class for each place artifacts are kept (the disk cache, a remote).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/artifact_meta.hpp"

namespace jit::detail {

// What a lookup counts in a tier's statistics. A get that may still find the artifact (in the
// same tier after waiting for another process's compile) is not a miss yet; a warm-up's check
// for presence is neither a hit nor a miss.
enum class Count { HitsAndMisses, Hits, Nothing };

// Why an artifact is put: a compile counts as one in the statistics; a copy (a hit written back
// from a lower tier, an imported pack) does not.
enum class PutReason { Compiled, Copied };

struct TierStats {
  std::int64_t entries = 0, bytes = 0, hits = 0, misses = 0, compiles = 0;
};

// Held by the one process of a fleet that compiles a key (a remote tier's lease); released when
// destroyed, after the artifact is stored.
class FlightLease {
 public:
  virtual ~FlightLease() = default;
};

// What a fleet-wide single flight gives a process that missed: the artifact another process
// compiled meanwhile (verified), or the lease to compile it, or neither (compile without one).
struct FlightClaim {
  std::optional<std::vector<char>> payload;
  std::unique_ptr<FlightLease> lease;
};

// A tier is a plain store keyed by the artifact's content key: ccache's storage/ shape. Lookup
// order, write-back and failure handling belong to TierStack, so a tier (disk, Redis, a test's
// map) only says how it keeps bytes. A tier may throw: the stack logs it once and goes on.
class StorageTier {
 public:
  virtual ~StorageTier() = default;

  // For logs: "disk", or the URL the tier was named by.
  virtual std::string name() const = 0;
  // The payload of key, verified against the key (whatever came from a file or the network is
  // untrusted), or nullopt when absent. A damaged entry is dropped, logged and reported absent,
  // so the caller rebuilds it.
  virtual std::optional<std::vector<char>> get(const std::string& key, const ArtifactMeta& meta, Count count) = 0;
  // Keeps the payload under key. False when this tier cannot keep it now (full, read-only, down),
  // having said why once; the caller keeps its artifact anyway.
  virtual bool put(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload,
                   PutReason why) = 0;
  // Forgets key: an artifact that verified but failed to load.
  virtual void remove(const std::string& key) = 0;
  // Throws Error{CacheIo} when the tier cannot say (not usable, unreachable).
  virtual TierStats stats() = 0;
  // After a miss: a tier shared by many machines makes one of them compile key while the others wait
  // (bounded) for its result. The default (a tier of one machine): neither, compile.
  virtual FlightClaim claim(const std::string& key, const ArtifactMeta& meta) { return {}; }
};

}  // namespace jit::detail
