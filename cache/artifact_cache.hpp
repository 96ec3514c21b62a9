// The disk tier: blobs + index + per-key locks under one root, degrading to memory-only when the disk says no.
#pragma once
#include <filesystem>
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
};

struct CacheProblem {
  std::string key;
  std::string what;
};

class ArtifactCache {
 public:
  // Never throws: a root that cannot be used makes a memory-only cache, with one WARN saying why.
  explicit ArtifactCache(std::filesystem::path root);
  ~ArtifactCache();  // writes the hit counts still pending
  // The cache of this process, rooted where the environment says, made at first use.
  static ArtifactCache& process_cache();

  const std::filesystem::path& root() const { return root_; }
  bool on_disk() const { return index_ != nullptr; }
  const std::string& unavailable_reason() const { return unavailable_; }

  // The verified payload, or nullopt when absent. A damaged blob or a row without its blob is
  // logged, dropped, and reported absent so the caller rebuilds it.
  // count_miss: whether an absent artifact counts as a miss in the index's counters.
  std::optional<std::vector<char>> load(const std::string& key, bool count_miss = true);
  // Whether an indexed blob exists (not verified; no counters touched).
  bool contains(const std::string& key);
  // Removes an artifact that failed to load after passing its checksum.
  void drop(const std::string& key);
  // Stores atomically and indexes. A failure (disk full, read-only) is logged once; the caller
  // keeps its artifact in memory.
  void store(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload);
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
  std::vector<CacheProblem> verify(bool fix);

 private:
  SqliteIndex& index();
  // Disk hits are counted in memory and written with the next write or at exit: a write
  // transaction would double the cost of a disk hit.
  void flush_hits();
  std::mutex hits_mutex_;
  std::vector<std::string> pending_hits_;
  std::filesystem::path root_;
  BlobStore blobs_;
  std::unique_ptr<SqliteIndex> index_;
  std::string unavailable_;
};

}  // namespace jit::detail
