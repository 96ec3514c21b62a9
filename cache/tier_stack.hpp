// The tiers one get looks in, in lookup order, and the per-key lock that makes a compile single-flight.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/file_lock.hpp"
#include "cache/storage_tier.hpp"
#include "support/memo_store.hpp"

namespace jit::detail {

// A value handed to the get path (runtime/get_kernel.cpp): the process builds its own once
// (cache/process_tiers.hpp), tests and tools hand it others. Every tier call goes through here,
// so a tier that throws is logged once and skipped: a cache never fails a get.
class TierStack {
 public:
  // Held while one key compiles so the other threads and processes wait, then load; null when
  // there is nothing to lock with (no writable disk): threads of this process still share one build.
  using KeyLock = std::unique_ptr<FileLock>;
  using LockProvider = std::function<KeyLock(const std::string& key)>;

  TierStack() = default;  // no tiers: every get compiles
  explicit TierStack(std::vector<std::shared_ptr<StorageTier>> tiers, LockProvider lock = {});

  struct Hit {
    std::vector<char> payload;
    std::string tier;  // the name of the tier it came from
  };
  // The first verified payload in lookup order. A hit in a lower tier is written back to every
  // tier above it, so the next process finds it in the fastest.
  std::optional<Hit> get(const std::string& key, const ArtifactMeta& meta, Count count) const;
  // Puts in every tier; whether at least one kept it.
  bool put(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload, PutReason why) const;
  // Removes key from every tier (a hit is written back upwards, so it may be in several).
  void remove(const std::string& key) const;
  KeyLock lock(const std::string& key) const;
  // Fleet single flight after a miss (StorageTier::claim): the artifact another process compiled,
  // written back to the tiers above the one it came from, or the leases to hold while compiling.
  struct Claim {
    std::optional<Hit> hit;
    std::vector<std::unique_ptr<FlightLease>> leases;
  };
  Claim claim(const std::string& key, const ArtifactMeta& meta) const;

  const std::vector<std::shared_ptr<StorageTier>>& tiers() const { return tiers_; }

  // Where the key a request resolved to is remembered (runtime/request_key.hpp), so that a later
  // process's warm get finds its artifact without rendering the kernel text; null: nowhere.
  void set_request_keys(std::shared_ptr<const MemoStore> memos) { request_keys_ = std::move(memos); }
  const MemoStore* request_keys() const { return request_keys_.get(); }

 private:
  std::vector<std::shared_ptr<StorageTier>> tiers_;
  LockProvider lock_;
  std::shared_ptr<const MemoStore> request_keys_;
};

}  // namespace jit::detail
