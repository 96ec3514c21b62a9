// The disk tier: blobs + index + per-key locks under one root, degrading to memory-only when the disk says no.
#pragma once
#include <atomic>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/blob_store.hpp"
#include "cache/cache_root.hpp"
#include "cache/file_lock.hpp"
#include "cache/sqlite_index.hpp"
#include "support/memo_store.hpp"
#include "cache/storage_tier.hpp"

namespace jit::detail {

class TakenMemos;  // cache/memo_folder.hpp

struct CacheProblem {
  std::string key;
  std::string what;
};

// Everything under the root goes through one verified handle on it (cache_root.hpp); a root moved
// or replaced under the running process, and a lock or index busy past JITK_CACHE_LOCK_TIMEOUT,
// turn the tier off for the rest of the process (one WARN), which then keeps kernels in memory.
// Blobs verify themselves (their header names the key, kernel, params, backend, target and holds an
// XXH3-128 of the payload), so a disk hit reads the blob alone; the index is bookkeeping (listing, counters, eviction) opened on another
// at its first use (never on a disk hit) and written lazily. A verified blob whose row is missing gets its row back.
class DiskTier final : public StorageTier {
 public:
  // Never throws: a root that cannot be used makes a tier that keeps nothing, with one WARN saying
  // why. size_limit: evict least recently used artifacts past it (bytes). name: for logs.
  // access: the cache mode's (ReadOnly: used, never written; None: memory only, said at INFO, not WARN).
  explicit DiskTier(std::filesystem::path root, std::optional<std::int64_t> size_limit = std::nullopt,
                    std::string name = "disk", CacheRoot::Access access = CacheRoot::Access::ReadWrite);
  ~DiskTier() override;  // writes the hits and misses still pending
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  const std::filesystem::path& root() const { return root_; }
  bool on_disk();                   // opens the index
  // Whether artifacts can be written under root() (without opening the index).
  bool writable() const { return root_ok_ && !read_only_; }
  std::string unavailable_reason();  // "" when on disk

  // The tier (storage_tier.hpp). get: a verified blob whose index row was lost gets its row back
  // from meta. put: atomic, then indexed; a failure (disk full, read-only) is logged once.
  std::string name() const override { return name_; }
  std::optional<std::vector<char>> get(const std::string& key, const ArtifactMeta& meta, Count count) override;
  bool put(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload, PutReason why) override;
  void remove(const std::string& key) override;
  TierStats stats() override;  // throws Error{CacheIo} when not on disk

  // Whether a blob for key is present and verifies (no counters touched).
  bool has_valid_blob(const std::string& key);
  // The verified payload of key, touching no counters; nullopt when absent or damaged.
  std::optional<std::vector<char>> read_verified(const std::string& key);
  // The verified blob file of key as it is, header and payload (what a pack carries: jitk export).
  std::optional<std::vector<char>> read_blob(const std::string& key);
  // A path to rel inside the root that goes through the root's handle (for what opens by name).
  std::string pinned(const std::string& rel) const { return handle_->pinned(rel); }
  // Memos kept in `folder` beneath the root ("" for the root), through its handle; null when the
  // root cannot be used. Read-only cache: readable, never written.
  std::shared_ptr<const MemoStore> memos(const std::string& folder) const;
  // Held while compiling `key` so that one process compiles and the others wait, then load.
  std::unique_ptr<FileLock> lock(const std::string& key);

  // Maintenance (the jitk tool). Throw Error{CacheIo} when the cache is not on disk.
  std::vector<IndexRow> rows();
  IndexCounters counters();
  std::int64_t bytes();
  struct Cleared {
    std::int64_t entries = 0, bytes = 0;
  };
  // Removes every artifact (the decisions beside them are the TuningStore's to clear).
  Cleared clear();
  // Removes the artifacts of one kernel.
  Cleared clear_kernel(const std::string& kernel);
  // Removes every artifact whose row `doomed` picks.
  Cleared clear_where(const std::function<bool(const IndexRow&)>& doomed);
  // Evicts least recently used artifacts until the cache holds at most max_bytes (when given), and
  // every artifact not used for older_than_seconds (when given).
  // `keep` (a key) is never evicted: the artifact a store just wrote.
  Cleared prune(std::optional<std::int64_t> max_bytes, std::optional<std::int64_t> older_than_seconds,
                const std::string& keep = "");
  // The size limit given (from $JITK_CACHE_MAX_SIZE in the process's tiers).
  std::optional<std::int64_t> size_limit() const { return size_limit_; }
  std::vector<CacheProblem> verify(bool fix);

  // An import (jitk import): artifacts staged one by one (their blobs written), then indexed
  // together with the autotuning decisions that came with them in one transaction. Destroyed
  // without a commit, or when commit throws, it removes the blobs it wrote: the cache is as it was.
  class Import {
   public:
    ~Import();
    Import(const Import&) = delete;
    Import& operator=(const Import&) = delete;
    // Writes the blob: `blob` is a whole bound blob (header and payload, as a pack of version 2
    // carries it), stored as it is after checking it is bound to key and meta. Throws Error{CacheIo}.
    void stage(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& blob);
    // Indexes every staged artifact and each decision the index has no row for yet (one it has
    // was measured here and stays); returns how many decisions were added. Throws Error{CacheIo}.
    std::int64_t commit(const std::vector<TuningRow>& decisions);

   private:
    friend class DiskTier;
    explicit Import(DiskTier& tier);
    DiskTier& tier_;
    std::unique_ptr<FileLock> shared_;  // no clear, prune or verify sees it half done
    std::vector<IndexRow> rows_;
    bool committed_ = false;
  };
  // Throws Error{CacheIo} when the cache is not on disk or is read-only.
  std::unique_ptr<Import> begin_import();

  // The index, for what is kept beside the artifacts in the same file (tuning_store.hpp). It opens
  // at its first use; index() throws Error{CacheIo} when the cache is not on disk.
  SqliteIndex& index();
  // A lock or the index was busy past the timeout (what: why): off for good, one WARN, so that no
  // later kernel waits again. Called by the tier itself, and by what uses its index (tuning).
  void give_up_busy(const std::string& what);

 private:
  SqliteIndex* index_or_null();
  // Writes the pending hits and misses, with those other processes left in hits/, to the index.
  // at_exit: a process that never opened its index leaves its own in hits/ instead (one small file,
  // no SQLite), unless hits/ already holds kJournalsBeforeFold of them.
  void flush_pending(bool at_exit = false);
  // Leaves hits and misses in a journal file in hits/; false when it cannot (then they go to the index).
  bool journal_hits(const std::vector<IndexRow>& hits, std::int64_t misses);
  // Takes the journals in hits/ (each taken by one process only): their hits, as rows to record.
  TakenMemos take_journals(SqliteIndex& idx, std::vector<IndexRow>* hits, std::int64_t* misses);
  // A dropped artifact's pending hits would otherwise put its row back at the next flush.
  void forget_pending_hits(const std::string& key);
  // Off for good, one WARN: the problem, then what a person can do (the default: disk, ownership).
  void disable(const std::string& problem, const std::string& advice = "");
  // Whether the root still is the folder opened; when not, the tier is off for good.
  bool in_place();

  // Removes one artifact (blob, row, pending hits); returns the bytes freed.
  std::int64_t evict(const IndexRow& row);
  // Writers of a blob+row pair hold it shared; clear, prune and verify hold it exclusive, so they
  // never see (or make) a blob without its row halfway through another process's store.
  std::unique_ptr<FileLock> maintenance_lock(FileLock::Mode mode);

  std::filesystem::path root_;
  std::string name_;
  std::shared_ptr<CacheRoot> handle_;
  BlobStore blobs_;
  std::optional<std::int64_t> size_limit_;
  std::atomic<bool> root_ok_{false};  // blobs can be read
  bool read_only_ = false;             // ... but nothing written: no index, no stores, no locks
  std::once_flag index_opened_;       // the index opens at its first use, not on a disk hit
  std::atomic<bool> index_tried_{false};  // index_or_null has opened (or tried to open) it
  std::unique_ptr<SqliteIndex> index_;
  mutable std::mutex state_mutex_;
  std::string unavailable_;  // under state_mutex_
  // Hits and misses are counted in memory and written with the next write or at exit: a write
  // transaction would double the cost of a disk hit.
  std::mutex pending_mutex_;
  std::vector<IndexRow> pending_hits_;
  std::int64_t pending_misses_ = 0;
};

}  // namespace jit::detail
