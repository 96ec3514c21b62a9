// The SQLite index: schema, queries and repair of a damaged file.
#include "cache/sqlite_index.hpp"

#include <sqlite3.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "cache/cache_key.hpp"
#include "cache/file_lock.hpp"
#include "jit/error.hpp"

namespace jit::detail {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS artifacts(
  key TEXT PRIMARY KEY, kernel TEXT NOT NULL, params TEXT NOT NULL, backend TEXT NOT NULL,
  arch TEXT NOT NULL, compiler TEXT NOT NULL, size_bytes INTEGER NOT NULL, checksum TEXT NOT NULL,
  compile_ms REAL NOT NULL, created INTEGER NOT NULL, last_used INTEGER NOT NULL,
  hits INTEGER NOT NULL DEFAULT 0, implementation TEXT NOT NULL DEFAULT '',
  implementation_version INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters(name, value) VALUES ('hits', 0), ('misses', 0), ('compiles', 0);
)sql";

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class IndexFailure : public Error {
 public:
  IndexFailure(int rc, const std::string& msg) : Error(ErrorCode::CacheIo, msg), rc(rc) {}
  int rc;
};

// A busy index, waited on for the whole timeout, is CacheBusy (the tier goes to memory); the rest
// are IndexFailure (damage is repaired, anything else reported).
[[noreturn]] void fail(int rc, const std::string& msg) {
  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
    throw CacheBusy(msg + " (index.db is locked by another process past " + std::to_string(cache_lock_timeout().count()) +
                    " ms, JITK_CACHE_LOCK_TIMEOUT)");
  throw IndexFailure(rc, msg);
}

// The default VFS, except that a /proc/self/fd/N/... name is kept as it is: the default resolves
// symlinks in a name to text, which for that magic link would be the folder's path again, open to
// whatever is renamed there later. Kept as is, the kernel resolves it to the folder we hold open,
// for the database and for its -wal and -shm (named by appending to it). Locking is by inode, so
// other processes that open the same file by its path share its locks.
sqlite3_vfs* base_vfs = nullptr;

int pinned_full_pathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  static constexpr char kPrefix[] = "/proc/self/fd/";
  if (std::strncmp(name, kPrefix, sizeof kPrefix - 1) == 0) {
    const int len = static_cast<int>(std::strlen(name));
    if (len + 1 > n) return SQLITE_CANTOPEN;
    std::memcpy(out, name, static_cast<std::size_t>(len) + 1);
    return SQLITE_OK;
  }
  return base_vfs->xFullPathname(vfs, name, n, out);
}

const char* pinned_vfs_name() {
  static const char* name = []() -> const char* {
    base_vfs = sqlite3_vfs_find(nullptr);
    if (!base_vfs) return nullptr;
    static sqlite3_vfs pinned = *base_vfs;  // pAppData and the rest stay the default's
    pinned.zName = "jitk-pinned";
    pinned.xFullPathname = pinned_full_pathname;
    return sqlite3_vfs_register(&pinned, 0) == SQLITE_OK ? pinned.zName : nullptr;
  }();
  return name;
}

// A prepared statement, finalized when it goes out of scope.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
    if (rc != SQLITE_OK) fail(rc, std::string("index.db: ") + sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  bool step() {  // true while a row is available
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(rc, std::string("index.db: ") + sqlite3_errmsg(db_));
  }
  std::string text(int c) const {
    auto* p = sqlite3_column_text(stmt_, c);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  std::int64_t i64(int c) const { return sqlite3_column_int64(stmt_, c); }
  void reset() {  // to step it again with new bindings
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  double f64(int c) const { return sqlite3_column_double(stmt_, c); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

constexpr const char* kRowColumns =
    "key, kernel, params, backend, arch, compiler, size_bytes, checksum, compile_ms, created, last_used, hits, "
    "implementation, implementation_version";

IndexRow read_row(const Statement& s) {
  IndexRow r;
  r.key = s.text(0);
  r.kernel = s.text(1);
  r.params = s.text(2);
  r.backend = s.text(3);
  r.arch = s.text(4);
  r.compiler = s.text(5);
  r.size_bytes = s.i64(6);
  r.checksum = s.text(7);
  r.compile_ms = s.f64(8);
  r.created = s.i64(9);
  r.last_used = s.i64(10);
  r.hits = s.i64(11);
  r.implementation = s.text(12);
  r.implementation_version = s.i64(13);
  return r;
}

// One artifact row, inserted or replaced (the caller holds the transaction).
void insert_row(sqlite3* db, const IndexRow& r) {
  Statement s(db, (std::string("INSERT OR REPLACE INTO artifacts(") + kRowColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)").c_str());
  s.bind(1, r.key).bind(2, r.kernel).bind(3, r.params).bind(4, r.backend).bind(5, r.arch).bind(6, r.compiler);
  s.bind(7, r.size_bytes).bind(8, r.checksum).bind(9, r.compile_ms).bind(10, r.created).bind(11, r.last_used);
  s.bind(12, r.hits).bind(13, r.implementation).bind(14, r.implementation_version);
  s.step();
}

// A decision into the tuning table (below, with its columns).
void insert_tuning(sqlite3* db, const TuningRow& r, const char* verb);

bool is_damage(int rc) { return rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT; }

}  // namespace

SqliteIndex::SqliteIndex(const std::filesystem::path& file, std::string* repair_note) : file_(file), shown_(file.string()) {
  open_checked(file, repair_note);
}

SqliteIndex::SqliteIndex(const CacheRoot& root, std::string* repair_note) : shown_(root.shown("index.db").string()) {
  UniqueFd dir = root.open_dir("", /*create=*/false);
  // Opened by name by SQLite, so looked at first through the handle: a FIFO, device, folder or
  // symlink in the place of one of its files is refused before SQLite could block on it or follow it.
  for (const char* name : {"index.db", "index.db-wal", "index.db-shm"}) {
    struct stat st{};
    if (::fstatat(dir.get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      throw Error(ErrorCode::CacheIo, "cannot inspect " + root.shown(name).string() + ": " + std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
      throw Error(ErrorCode::CacheIo, root.shown(name).string() + " is " + kind_of_file(st.st_mode) +
                                          ", not a regular file; remove it and the index is made anew");
    if (!cache_shared_on_purpose() && st.st_uid != ::geteuid())
      throw Error(ErrorCode::CacheIo, root.shown(name).string() + " belongs to another user (uid " +
                                          std::to_string(st.st_uid) + "); set JITK_CACHE_TRUST_SHARED=1 if it is shared on purpose");
  }
  if (CacheRoot::can_pin()) vfs_ = pinned_vfs_name();
  file_ = vfs_ ? std::filesystem::path(root.pinned("index.db")) : root.shown("index.db");
  open_checked(file_, repair_note);
}

void SqliteIndex::open_checked(const std::filesystem::path& file, std::string* repair_note) {
  try {
    open_and_prepare(file);
  } catch (const IndexFailure& e) {
    if (!is_damage(e.rc)) throw;
    sqlite3_close(db_);
    db_ = nullptr;
    // time-pid-n: never the name of an earlier moved-aside file, even within one second.
    const std::string stem = file.string() + ".broken-" + std::to_string(now_seconds()) + "-" + std::to_string(::getpid());
    std::filesystem::path aside = stem;
    for (int n = 1; std::filesystem::exists(aside); ++n) aside = stem + "-" + std::to_string(n);
    std::error_code ec;
    std::filesystem::rename(file, aside, ec);
    for (const char* suffix : {"-wal", "-shm"}) {
      auto side = file;
      side += suffix;
      std::filesystem::remove(side, ec);
    }
    if (repair_note)
      *repair_note = shown_ + " was damaged (" + e.what() + "); moved aside to " +
                     (std::filesystem::path(shown_).parent_path() / aside.filename()).string() + " and started a new index";
    open_and_prepare(file);
  }
}

SqliteIndex::~SqliteIndex() { sqlite3_close(db_); }

void SqliteIndex::open_and_prepare(const std::filesystem::path& file) {
  int rc = sqlite3_open_v2(file.c_str(), &db_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, vfs_);
  if (rc != SQLITE_OK) fail(rc, "cannot open " + shown_ + ": " + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc)));
  sqlite3_busy_timeout(db_, static_cast<int>(std::min<std::int64_t>(cache_lock_timeout().count(), INT32_MAX)));
  exec("PRAGMA synchronous=NORMAL");  // per connection; WAL itself is persistent in the file
  std::int64_t version;
  {
    Statement s(db_, "PRAGMA user_version");
    s.step();
    version = s.i64(0);
  }
  if (version > kCacheFormatVersion)
    throw Error(ErrorCode::CacheIo, shown_ + " was written by a newer jitk (format " + std::to_string(version) +
                                        ", this one reads " + std::to_string(kCacheFormatVersion) +
                                        "); use another JITK_CACHE_DIR for this version");
  if (version == kCacheFormatVersion) return;  // already set up: opening stays read-only
  if (version == 1) {
    // Format 1 had no implementation columns. Its artifacts' keys are not made any more (the
    // implementation is in the key now); `jitk prune --stale` removes them.
    exec("BEGIN IMMEDIATE");
    try {
      Statement check(db_, "PRAGMA user_version");
      check.step();
      if (check.i64(0) == 1) {  // not migrated by another process meanwhile
        exec("ALTER TABLE artifacts ADD COLUMN implementation TEXT NOT NULL DEFAULT ''");
        exec("ALTER TABLE artifacts ADD COLUMN implementation_version INTEGER NOT NULL DEFAULT 0");
        exec(("PRAGMA user_version=" + std::to_string(kCacheFormatVersion)).c_str());
      }
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    return;
  }
  {
    // A version-0 file holding tables of its own is some other program's database: not ours to change.
    Statement s(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT IN ('artifacts', 'counters', 'tuning')");
    s.step();
    if (s.i64(0) > 0) throw IndexFailure(SQLITE_NOTADB, shown_ + " is another program's SQLite database, not a jitk index");
  }
  exec("PRAGMA journal_mode=WAL");
  exec("BEGIN IMMEDIATE");
  try {
    exec(kSchema);
    exec(("PRAGMA user_version=" + std::to_string(kCacheFormatVersion)).c_str());
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void SqliteIndex::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = "index.db: " + std::string(err ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    fail(rc, msg);
  }
}

std::optional<IndexRow> SqliteIndex::find(const std::string& key) {
  std::lock_guard lock(mutex_);
  Statement s(db_, (std::string("SELECT ") + kRowColumns + " FROM artifacts WHERE key = ?").c_str());
  s.bind(1, key);
  if (!s.step()) return std::nullopt;
  return read_row(s);
}

void SqliteIndex::insert(const IndexRow& r, bool count_compile) {
  std::lock_guard lock(mutex_);
  exec("BEGIN IMMEDIATE");
  try {
    insert_row(db_, r);
    if (count_compile) exec("UPDATE counters SET value = value + 1 WHERE name = 'compiles'");
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::int64_t SqliteIndex::record_hits(const std::vector<IndexRow>& hits, std::int64_t misses) {
  std::lock_guard lock(mutex_);
  std::int64_t restored = 0;
  exec("BEGIN IMMEDIATE");
  try {
    // Prepared once: a flush that takes the journals of many processes records many hits.
    Statement s(db_, "UPDATE artifacts SET hits = hits + 1, last_used = MAX(last_used, ?) WHERE key = ?");
    for (const auto& hit : hits) {
      s.reset();
      s.bind(1, hit.last_used).bind(2, hit.key);
      s.step();
      if (sqlite3_changes(db_) > 0) continue;
      Statement add(db_, (std::string("INSERT OR IGNORE INTO artifacts(") + kRowColumns +
                          ") VALUES (?,?,?,?,?,?,?,?,?,?,?,1,?,?)").c_str());
      add.bind(1, hit.key).bind(2, hit.kernel).bind(3, hit.params).bind(4, hit.backend).bind(5, hit.arch);
      add.bind(6, hit.compiler).bind(7, hit.size_bytes).bind(8, hit.checksum).bind(9, hit.compile_ms);
      add.bind(10, hit.created).bind(11, hit.last_used).bind(12, hit.implementation).bind(13, hit.implementation_version);
      add.step();
      restored += sqlite3_changes(db_);
    }
    Statement c(db_, "UPDATE counters SET value = value + ? WHERE name = 'hits'");
    c.bind(1, static_cast<std::int64_t>(hits.size()));
    c.step();
    Statement m(db_, "UPDATE counters SET value = value + ? WHERE name = 'misses'");
    m.bind(1, misses);
    m.step();
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  return restored;
}

std::int64_t SqliteIndex::insert_import(const std::vector<IndexRow>& rows, const std::vector<TuningRow>& decisions) {
  std::lock_guard lock(mutex_);
  if (!decisions.empty()) ensure_tuning_table();
  std::int64_t added = 0;
  exec("BEGIN IMMEDIATE");
  try {
    for (const auto& r : rows) insert_row(db_, r);
    for (const auto& t : decisions) {
      insert_tuning(db_, t, "INSERT OR IGNORE");
      added += sqlite3_changes(db_);
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  return added;
}

bool SqliteIndex::remove(const std::string& key) {
  std::lock_guard lock(mutex_);
  Statement s(db_, "DELETE FROM artifacts WHERE key = ?");
  s.bind(1, key);
  s.step();
  return sqlite3_changes(db_) > 0;
}

std::int64_t SqliteIndex::remove_all() {
  std::lock_guard lock(mutex_);
  exec("DELETE FROM artifacts");
  return sqlite3_changes(db_);
}

std::int64_t SqliteIndex::total_bytes() {
  std::lock_guard lock(mutex_);
  Statement s(db_, "SELECT coalesce(sum(size_bytes), 0) FROM artifacts");
  s.step();
  return s.i64(0);
}

std::vector<IndexRow> SqliteIndex::rows_by_last_use() {
  std::lock_guard lock(mutex_);
  Statement s(db_, (std::string("SELECT ") + kRowColumns + " FROM artifacts ORDER BY last_used, created").c_str());
  std::vector<IndexRow> out;
  while (s.step()) out.push_back(read_row(s));
  return out;
}

std::vector<IndexRow> SqliteIndex::rows() {
  std::lock_guard lock(mutex_);
  Statement s(db_, (std::string("SELECT ") + kRowColumns + " FROM artifacts ORDER BY kernel, params").c_str());
  std::vector<IndexRow> out;
  while (s.step()) out.push_back(read_row(s));
  return out;
}

void SqliteIndex::ensure_tuning_table() {
  if (tuning_table_ready_) return;
  exec("CREATE TABLE IF NOT EXISTS tuning(kernel TEXT NOT NULL, base_params TEXT NOT NULL, shape_class TEXT NOT NULL, "
       "device TEXT NOT NULL, choice TEXT NOT NULL, candidates INTEGER NOT NULL, best_ms REAL NOT NULL, "
       "default_ms REAL NOT NULL, tuning_ms REAL NOT NULL, created INTEGER NOT NULL, "
       "PRIMARY KEY(kernel, base_params, shape_class, device))");
  tuning_table_ready_ = true;
}

namespace {
constexpr const char* kTuningColumns =
    "kernel, base_params, shape_class, device, choice, candidates, best_ms, default_ms, tuning_ms, created";
// verb: "INSERT OR REPLACE" (a new measurement) or "INSERT OR IGNORE" (an import keeps what is here).
void insert_tuning(sqlite3* db, const TuningRow& r, const char* verb) {
  Statement s(db, (std::string(verb) + " INTO tuning(" + kTuningColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?)").c_str());
  s.bind(1, r.kernel).bind(2, r.base_params).bind(3, r.shape_class).bind(4, r.device).bind(5, r.choice);
  s.bind(6, r.candidates).bind(7, r.best_ms).bind(8, r.default_ms).bind(9, r.tuning_ms).bind(10, r.created);
  s.step();
}

TuningRow read_tuning(const Statement& s) {
  TuningRow r;
  r.kernel = s.text(0);
  r.base_params = s.text(1);
  r.shape_class = s.text(2);
  r.device = s.text(3);
  r.choice = s.text(4);
  r.candidates = s.i64(5);
  r.best_ms = s.f64(6);
  r.default_ms = s.f64(7);
  r.tuning_ms = s.f64(8);
  r.created = s.i64(9);
  return r;
}
}  // namespace

std::optional<TuningRow> SqliteIndex::find_tuning(const std::string& kernel, const std::string& base_params,
                                                  const std::string& shape_class, const std::string& device) {
  std::lock_guard lock(mutex_);
  ensure_tuning_table();
  Statement s(db_, (std::string("SELECT ") + kTuningColumns +
                    " FROM tuning WHERE kernel = ? AND base_params = ? AND shape_class = ? AND device = ?").c_str());
  s.bind(1, kernel).bind(2, base_params).bind(3, shape_class).bind(4, device);
  if (!s.step()) return std::nullopt;
  return read_tuning(s);
}

void SqliteIndex::store_tuning(const TuningRow& r) {
  std::lock_guard lock(mutex_);
  ensure_tuning_table();
  insert_tuning(db_, r, "INSERT OR REPLACE");
}

std::vector<TuningRow> SqliteIndex::tuning_rows() {
  std::lock_guard lock(mutex_);
  ensure_tuning_table();
  Statement s(db_, (std::string("SELECT ") + kTuningColumns + " FROM tuning ORDER BY kernel, base_params, shape_class").c_str());
  std::vector<TuningRow> out;
  while (s.step()) out.push_back(read_tuning(s));
  return out;
}

std::int64_t SqliteIndex::remove_tuning() {
  std::lock_guard lock(mutex_);
  ensure_tuning_table();
  exec("DELETE FROM tuning");
  return sqlite3_changes(db_);
}

IndexCounters SqliteIndex::counters() {
  std::lock_guard lock(mutex_);
  Statement s(db_, "SELECT name, value FROM counters");
  IndexCounters c;
  while (s.step()) {
    auto name = s.text(0);
    if (name == "hits") c.hits = s.i64(1);
    else if (name == "misses") c.misses = s.i64(1);
    else if (name == "compiles") c.compiles = s.i64(1);
  }
  return c;
}

}  // namespace jit::detail
