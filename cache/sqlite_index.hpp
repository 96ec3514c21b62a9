// index.db: one SQLite row per artifact plus persistent counters (WAL, busy timeout, self-repairing).
#pragma once
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/artifact_meta.hpp"
#include "cache/cache_root.hpp"

struct sqlite3;

namespace jit::detail {

// An artifact's row: what it is (ArtifactMeta's fields, inherited so none is copied by hand) and
// the bookkeeping about it.
struct IndexRow : ArtifactMeta {
  std::string key;
  std::int64_t size_bytes = 0;
  std::string checksum;
  std::int64_t created = 0, last_used = 0, hits = 0;
};

// An autotuning decision: for a kernel's base params, a class of shapes and a device, which
// candidate params won, measured how (times in ms).
struct TuningRow {
  std::string kernel, base_params, shape_class, device, choice;
  std::int64_t candidates = 0;
  double best_ms = 0, default_ms = 0, tuning_ms = 0;
  std::int64_t created = 0;
};

struct IndexCounters {
  std::int64_t hits = 0, misses = 0, compiles = 0;
};

class SqliteIndex {
 public:
  // Opens (creating if needed) the index. A file that is not a jitk index (garbage, damaged) is
  // moved aside and a fresh one made; `repair_note` says what happened. An index written by a
  // newer jitk throws Error{CacheIo}: it is not ours to change.
  explicit SqliteIndex(const std::filesystem::path& file, std::string* repair_note = nullptr);
  // The index.db of a cache root, opened through the root's handle (/proc/self/fd/N/index.db, with
  // SQLite's own symlink resolution of that name turned off) so that it, its -wal and its -shm are
  // the files in the folder opened, whatever happens to the root's path. Each that exists must be a
  // regular file of ours. A busy index waited on past cache_lock_timeout() throws CacheBusy.
  SqliteIndex(const CacheRoot& root, std::string* repair_note);
  ~SqliteIndex();
  SqliteIndex(const SqliteIndex&) = delete;
  SqliteIndex& operator=(const SqliteIndex&) = delete;

  std::optional<IndexRow> find(const std::string& key);
  void insert(const IndexRow& row, bool count_compile = true);  // also counts one compile
  // One transaction for many hits (a key may repeat) and misses. A hit on a key with no row
  // (its blob verified, its row lost) puts the row back.
  // Returns how many rows it put back.
  std::int64_t record_hits(const std::vector<IndexRow>& hits, std::int64_t misses);
  // An import in one transaction: every row (no compile counted), and each decision whose key
  // has no row yet. Returns how many decisions were added.
  std::int64_t insert_import(const std::vector<IndexRow>& rows, const std::vector<TuningRow>& decisions);
  bool remove(const std::string& key);
  std::int64_t remove_all();
  std::int64_t total_bytes();
  // Rows least recently used first: what eviction removes first.
  std::vector<IndexRow> rows_by_last_use();
  std::vector<IndexRow> rows();
  IndexCounters counters();

  // Autotuning decisions, in their own table (made on first use, so older jitks keep reading the
  // index). `jitk clear` removes them with the artifacts.
  std::optional<TuningRow> find_tuning(const std::string& kernel, const std::string& base_params,
                                       const std::string& shape_class, const std::string& device);
  void store_tuning(const TuningRow& row);
  std::vector<TuningRow> tuning_rows();
  std::int64_t remove_tuning();

 private:
  void open_and_prepare(const std::filesystem::path& file);
  void open_checked(const std::filesystem::path& file, std::string* repair_note);
  void exec(const char* sql);
  void ensure_tuning_table();  // under mutex_; creates it once per connection
  bool tuning_table_ready_ = false;
  std::mutex mutex_;
  sqlite3* db_ = nullptr;
  std::filesystem::path file_;
  std::string shown_;           // for messages: the path a person knows
  const char* vfs_ = nullptr;   // SQLite's default, or the one that keeps /proc/self/fd/N names as they are
};

}  // namespace jit::detail
