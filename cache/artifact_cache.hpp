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
#include "cache/file_lock.hpp"
#include "cache/sqlite_index.hpp"

namespace jit::detail {

struct ArtifactMeta {
  std::string kernel, params, backend, arch, compiler;
  double compile_ms = 0;
  std::string implementation;
  int implementation_version = 0;
};

struct CacheProblem {
  std::string key;
  std::string what;
};

// Blobs verify themselves (their header holds the key and an XXH3-128 of the payload), so a disk
// hit reads the blob alone; the index is bookkeeping (listing, counters, eviction) opened on another
// at its first use (never on a disk hit) and written lazily. A verified blob whose row is missing gets its row back.
class ArtifactCache {
 public:
  // Never throws: a root that cannot be used makes a memory-only cache, with one WARN saying why.
  explicit ArtifactCache(std::filesystem::path root);
  ~ArtifactCache();  // writes the hits and misses still pending
  ArtifactCache(const ArtifactCache&) = delete;
  ArtifactCache& operator=(const ArtifactCache&) = delete;
  // The cache of this process, rooted where the environment says, made at first use.
  static ArtifactCache& process_cache();

  const std::filesystem::path& root() const { return root_; }
  bool on_disk();                   // opens the index
  // Whether artifacts can be written under root() (without opening the index).
  bool writable() const { return root_ok_ && !read_only_; }
  std::string unavailable_reason();  // "" when on disk

  // The verified payload, or nullopt when absent. A damaged blob is logged, dropped, and reported
  // absent so the caller rebuilds it. count_miss: whether absence counts as a miss.
  std::optional<std::vector<char>> load(const std::string& key, const ArtifactMeta& meta, bool count_miss = true);
  // Whether a blob for key is present and verifies (no counters touched).
  bool has_valid_blob(const std::string& key);
  // Removes an artifact that failed to load after passing its checksum.
  void drop(const std::string& key);
  // Stores atomically and indexes. A failure (disk full, read-only) is logged once; the caller
  // keeps its artifact in memory. Returns whether it is on disk now.
  // imported: from a pack (jitk import), not counted as a compile.
  bool store(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload, bool imported = false);
  // The verified payload of key, touching no counters (jitk export); nullopt when absent or damaged.
  std::optional<std::vector<char>> read_verified(const std::string& key);
  // Held while compiling `key` so that one process compiles and the others wait, then load.
  std::unique_ptr<FileLock> lock(const std::string& key);

  // Maintenance (the jitk tool). Throw Error{CacheIo} when the cache is not on disk.
  std::vector<IndexRow> rows();
  IndexCounters counters();
  std::int64_t bytes();
  struct Cleared {
    std::int64_t entries = 0, bytes = 0;
  };
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
  // The size limit from $JITK_CACHE_MAX_SIZE ("2G", "500M", "64K", bytes), if set and valid.
  std::optional<std::int64_t> size_limit() const { return size_limit_; }
  std::vector<CacheProblem> verify(bool fix);

  // Autotuning decisions in the index (nullopt / false / empty when the cache is not on disk).
  std::optional<TuningRow> find_tuning(const std::string& kernel, const std::string& base_params,
                                       const std::string& shape_class, const std::string& device);
  bool store_tuning(const TuningRow& row);
  std::vector<TuningRow> tuning_rows();

 private:
  SqliteIndex* index_or_null();  // waits for the background open
  SqliteIndex& index();          // throws when not on disk
  void flush_pending();
  // A dropped artifact's pending hits would otherwise put its row back at the next flush.
  void forget_pending_hits(const std::string& key);
  void disable(const std::string& problem);

  // Removes one artifact (blob, row, pending hits); returns the bytes freed.
  std::int64_t evict(const IndexRow& row);
  // Writers of a blob+row pair hold it shared; clear, prune and verify hold it exclusive, so they
  // never see (or make) a blob without its row halfway through another process's store.
  std::unique_ptr<FileLock> maintenance_lock(FileLock::Mode mode);

  std::filesystem::path root_;
  BlobStore blobs_;
  std::optional<std::int64_t> size_limit_;
  std::atomic<bool> root_ok_{false};  // blobs can be read
  bool read_only_ = false;             // ... but nothing written: no index, no stores, no locks
  std::once_flag index_opened_;       // the index opens at its first use, not on a disk hit
  std::unique_ptr<SqliteIndex> index_;
  std::string unavailable_;
  // Hits and misses are counted in memory and written with the next write or at exit: a write
  // transaction would double the cost of a disk hit.
  std::mutex pending_mutex_;
  std::vector<IndexRow> pending_hits_;
  std::int64_t pending_misses_ = 0;
};

}  // namespace jit::detail
