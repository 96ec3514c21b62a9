// index.db: one SQLite row per artifact plus persistent counters (WAL, busy timeout, self-repairing).
#pragma once
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace jit::detail {

struct IndexRow {
  std::string key, kernel, params, backend, arch, compiler;
  std::int64_t size_bytes = 0;
  std::string checksum;
  double compile_ms = 0;
  std::int64_t created = 0, last_used = 0, hits = 0;
  std::string implementation;  // "" in rows of format 1 (before implementations)
  std::int64_t implementation_version = 0;
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
  ~SqliteIndex();
  SqliteIndex(const SqliteIndex&) = delete;
  SqliteIndex& operator=(const SqliteIndex&) = delete;

  std::optional<IndexRow> find(const std::string& key);
  void insert(const IndexRow& row, bool count_compile = true);  // also counts one compile
  // One transaction for many hits (a key may repeat) and misses. A hit on a key with no row
  // (its blob verified, its row lost) puts the row back.
  // Returns how many rows it put back.
  std::int64_t record_hits(const std::vector<IndexRow>& hits, std::int64_t misses);
  bool remove(const std::string& key);
  std::int64_t remove_all();
  std::int64_t total_bytes();
  // Rows least recently used first: what eviction removes first.
  std::vector<IndexRow> rows_by_last_use();
  std::vector<IndexRow> rows();
  IndexCounters counters();

 private:
  void open_and_prepare(const std::filesystem::path& file);
  void exec(const char* sql);
  std::mutex mutex_;
  sqlite3* db_ = nullptr;
  std::filesystem::path file_;
};

}  // namespace jit::detail
