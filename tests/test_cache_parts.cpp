// The cache's parts on their own: keys, blobs, the SQLite index, the root, locks.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <sqlite3.h>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "support/units.hpp"
#include "cache/disk_tier.hpp"
#include "jit/error.hpp"
#include "cache/blob_store.hpp"
#include "cache/cache_key.hpp"
#include "cache/cache_root.hpp"
#include "cache/file_lock.hpp"
#include "cache/hits_journal.hpp"
#include "cache/memo_folder.hpp"
#include "cache/sqlite_index.hpp"
#include "support/memo_store.hpp"
#include "jit/cuda/include_scan.hpp"
#include "test_support.hpp"

using namespace jit::detail;
using jitk_test::TempDir;

namespace {
std::vector<char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

IndexRow row_for(const std::string& key, const std::string& checksum) {
  IndexRow r;
  r.key = key;
  r.kernel = "saxpy";
  r.params = "dtype=f32";
  r.backend = "cpu";
  r.arch = "test";
  r.compiler = "test";
  r.size_bytes = 3;
  r.checksum = checksum;
  return r;
}
}  // namespace

TEST_CASE("keys separate fields: moving a character between fields changes the key", "[cache]") {
  KeyBuilder a, b, c;
  a.add("x", "ab").add("y", "c");
  b.add("x", "a").add("y", "bc");
  c.add("x", "ab").add("y", "c");
  CHECK(a.finish().hex() != b.finish().hex());
  CHECK(a.finish() == c.finish());
  CHECK(a.finish().hex().size() == 32);
}

TEST_CASE("a blob reads back exactly as written", "[cache]") {
  TempDir dir;
  prepare_cache_root(dir.path());
  BlobStore store(dir.path());
  std::string key(32, 'a');
  auto payload = bytes_of("object code \x01\x02\x00 with zeros");
  auto sum = store.write(key, {"saxpy", "dtype=f32", "cpu", "x", "c", 1.0}, payload);
  auto r = store.read(key);
  REQUIRE(r.status == BlobRead::Status::Ok);
  CHECK(r.payload == payload);
  CHECK(r.checksum == sum);
  CHECK(store.keys() == std::vector<std::string>{key});
}

TEST_CASE("a blob with a flipped byte, a truncated blob and a blob under the wrong name are damaged", "[cache]") {
  TempDir dir;
  prepare_cache_root(dir.path());
  BlobStore store(dir.path());
  std::string key(32, 'b');
  store.write(key, {"saxpy", "dtype=f32", "cpu", "x", "c", 1.0}, bytes_of(std::string(1000, 'x')));
  auto path = store.path_for(key);
  std::string original = jitk_test::read_file(path);

  std::string flipped = original;
  flipped[500] ^= 0x01;
  jitk_test::write_file(path, flipped);
  auto r = store.read(key);
  CHECK(r.status == BlobRead::Status::Damaged);
  CHECK_THAT(r.problem, Catch::Matchers::Contains("checksum"));

  jitk_test::write_file(path, original.substr(0, original.size() - 10));
  CHECK(store.read(key).status == BlobRead::Status::Damaged);
  jitk_test::write_file(path, original.substr(0, 20));
  CHECK(store.read(key).status == BlobRead::Status::Damaged);

  std::string other(32, 'c');
  std::filesystem::create_directories(store.path_for(other).parent_path());
  jitk_test::write_file(store.path_for(other), original);
  CHECK(store.read(other).status == BlobRead::Status::Damaged);
  CHECK(store.read(std::string(32, 'd')).status == BlobRead::Status::Missing);
}

TEST_CASE("nothing outside hex keys can name a blob path", "[cache]") {
  TempDir dir;
  BlobStore store(dir.path());
  CHECK_THROWS_AS(store.path_for("../../etc/passwd"), jit::Error);
  CHECK_THROWS_AS(store.path_for(std::string(32, 'G')), jit::Error);
}

TEST_CASE("the index keeps rows and counters across connections", "[cache]") {
  TempDir dir;
  std::string key(32, 'e');
  {
    SqliteIndex index(dir.path() / "index.db");
    index.insert(row_for(key, "sum"));
    index.record_hits({row_for(key, "sum"), row_for(key, "sum")}, 1);
  }
  SqliteIndex index(dir.path() / "index.db");
  auto row = index.find(key);
  REQUIRE(row);
  CHECK(row->hits == 2);
  CHECK(row->kernel == "saxpy");
  auto c = index.counters();
  CHECK(c.compiles == 1);
  CHECK(c.hits == 2);
  CHECK(c.misses == 1);
  CHECK(index.remove(key));
  CHECK_FALSE(index.find(key));
}

TEST_CASE("an index.db full of garbage is moved aside and a new one made", "[cache]") {
  TempDir dir;
  std::string garbage(8192, '\0');
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 7919 % 251);
  jitk_test::write_file(dir.path() / "index.db", garbage);
  std::string note;
  SqliteIndex index(dir.path() / "index.db", &note);
  CHECK_THAT(note, Catch::Matchers::Contains("moved aside"));
  index.insert(row_for(std::string(32, 'f'), "sum"));
  CHECK(index.rows().size() == 1);
  bool aside = false;
  for (auto& e : std::filesystem::directory_iterator(dir.path()))
    aside |= e.path().filename().string().rfind("index.db.broken-", 0) == 0;
  CHECK(aside);
}

TEST_CASE("an index from a newer format is left alone and the cache runs from memory", "[cache]") {
  TempDir dir;
  prepare_cache_root(dir.path());
  { SqliteIndex index(dir.path() / "index.db"); }
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() / "index.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  CHECK_THROWS_WITH(SqliteIndex(dir.path() / "index.db"), Catch::Matchers::Contains("newer jitk"));
  DiskTier cache(dir.path());
  CHECK_FALSE(cache.on_disk());
  CHECK_THAT(cache.unavailable_reason(), Catch::Matchers::Contains("newer jitk"));
}

TEST_CASE("a root that cannot be created leaves a memory-only cache that says why", "[cache]") {
  TempDir dir;
  jitk_test::write_file(dir.path() / "a-file", "x");
  DiskTier cache(dir.path() / "a-file" / "jitk");
  CHECK_FALSE(cache.on_disk());
  CHECK_THAT(cache.unavailable_reason(), Catch::Matchers::Contains("cannot create"));
  CHECK_FALSE(cache.get(std::string(32, 'a'), {}, Count::HitsAndMisses));
  CHECK_FALSE(cache.put(std::string(32, 'a'), {}, bytes_of("abc"), PutReason::Compiled));  // no throw, nothing written
}

TEST_CASE("the root is created with mode 0700", "[cache]") {
  TempDir dir;
  auto root = dir.path() / "nested" / "jitk";
  REQUIRE(prepare_cache_root(root).empty());
  struct stat st{};
  REQUIRE(::stat(root.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("a stored artifact loads back verified, and a damaged one is dropped", "[cache]") {
  TempDir dir;
  DiskTier cache(dir.path());
  REQUIRE(cache.on_disk());
  std::string key(32, '1');
  ArtifactMeta meta{"saxpy", "dtype=f32", "cpu", "x", "c", 1.0};
  REQUIRE(cache.put(key, meta, bytes_of("payload"), PutReason::Compiled));
  auto loaded = cache.get(key, meta, Count::HitsAndMisses);
  REQUIRE(loaded);
  CHECK(std::string(loaded->begin(), loaded->end()) == "payload");

  auto path = BlobStore(dir.path()).path_for(key);
  auto text = jitk_test::read_file(path);
  text.back() ^= 0x40;
  jitk_test::write_file(path, text);
  CHECK_FALSE(cache.get(key, meta, Count::HitsAndMisses));
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(cache.rows().empty());
}

TEST_CASE("a verified blob whose index row was lost loads and gets its row back", "[cache]") {
  TempDir dir;
  std::string key(32, '3');
  ArtifactMeta meta{"softmax", "dtype=f32,hidden=8", "cpu", "x", "c", 2.0};
  {
    DiskTier cache(dir.path());
    REQUIRE(cache.put(key, meta, bytes_of("object"), PutReason::Compiled));
  }
  { SqliteIndex(dir.path() / "index.db").remove(key); }
  DiskTier cache(dir.path());
  REQUIRE(cache.get(key, meta, Count::HitsAndMisses));
  auto rows = cache.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kernel == "softmax");
  CHECK(rows[0].hits == 1);
  CHECK(cache.verify(false).empty());
}

TEST_CASE("a file lock excludes another process and is released when its holder dies", "[cache]") {
  TempDir dir;
  auto lock_path = dir.path() / "k.lock";
  pid_t child = ::fork();
  if (child == 0) {
    FileLock held(lock_path);
    ::sleep(30);  // killed long before
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto t0 = std::chrono::steady_clock::now();
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(child, SIGKILL);
  });
  { FileLock mine(lock_path); }
  auto waited = std::chrono::steady_clock::now() - t0;
  killer.join();
  ::waitpid(child, nullptr, 0);
  CHECK(waited >= std::chrono::milliseconds(250));
  CHECK(waited < std::chrono::seconds(10));
}

TEST_CASE("another program's SQLite database in place of index.db is moved aside, not taken over", "[cache]") {
  TempDir dir;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() / "index.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "CREATE TABLE photos(id INTEGER)", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  std::string note;
  SqliteIndex index(dir.path() / "index.db", &note);
  CHECK_THAT(note, Catch::Matchers::Contains("another program") && Catch::Matchers::Contains("moved aside"));
  index.insert(row_for(std::string(32, '2'), "sum"));
  CHECK(index.rows().size() == 1);
}

TEST_CASE("a cache root others can write to is not used unless trusted on purpose", "[cache]") {
  TempDir dir;
  auto root = dir.path() / "shared";
  REQUIRE(prepare_cache_root(root).empty());
  REQUIRE(::chmod(root.c_str(), 0777) == 0);
  ::unsetenv("JITK_CACHE_TRUST_SHARED");
  CHECK_THAT(prepare_cache_root(root), Catch::Matchers::Contains("writable by group or others"));
  ::setenv("JITK_CACHE_TRUST_SHARED", "1", 1);
  CHECK(prepare_cache_root(root).empty());
  ::unsetenv("JITK_CACHE_TRUST_SHARED");
}

TEST_CASE("toolkit headers reachable from a kernel text are hashed by content", "[cache]") {
  TempDir inc;
  std::filesystem::create_directories(inc.path() / "sub");
  jitk_test::write_file(inc.path() / "top.h", "#pragma once\n  #  include \"sub/mid.h\"\n");
  jitk_test::write_file(inc.path() / "sub" / "mid.h", "#if 0\n#include <leaf.h>\n#endif\n");
  jitk_test::write_file(inc.path() / "sub" / "leaf.h", "int leaf = 1;\n");
  std::vector<jit::detail::SourceFile> own = {{"jitk_gpu.h", "#include <top.h>\n"}};
  std::vector<std::string> roots = {"#include \"jitk_gpu.h\"\n#include <top.h>\n// include <not_a_directive.h>\n"};
  auto before = jit::detail::fingerprint_includes(roots, inc.str(), own);
  CHECK_THAT(before, Catch::Matchers::Contains("(3 toolkit headers)"));
  CHECK(jit::detail::fingerprint_includes(roots, inc.str(), own) == before);
  jitk_test::write_file(inc.path() / "sub" / "leaf.h", "int leaf = 2;\n");  // a toolkit upgrade, 2 levels down
  CHECK(jit::detail::fingerprint_includes(roots, inc.str(), own) != before);
  CHECK(jit::detail::included_names("#include <a.h>\nx #include <b.h>\n#define include\n") == std::vector<std::string>{"a.h"});
}

TEST_CASE("the header fingerprint memo is reused while headers are unchanged and redone when one changes", "[cache]") {
  TempDir inc, memo_dir;
  jitk_test::write_file(inc.path() / "a.h", "#include <b.h>\n");
  jitk_test::write_file(inc.path() / "b.h", "int b = 1;\n");
  std::vector<std::string> roots = {"#include <a.h>\n"};
  const jit::detail::MemoFolder memos(std::make_shared<jit::detail::CacheRoot>(memo_dir.path()), "toolkit-headers", true);
  const auto memo = memo_dir.path() / "toolkit-headers" / "memo";
  auto first = jit::detail::fingerprint_includes_memoized(roots, inc.str(), {}, memos, "memo");
  CHECK(first == jit::detail::fingerprint_includes(roots, inc.str(), {}));
  CHECK(std::filesystem::exists(memo));
  CHECK(jit::detail::fingerprint_includes_memoized(roots, inc.str(), {}, memos, "memo") == first);
  jitk_test::write_file(inc.path() / "b.h", "int b = 22;\n");  // new size and mtime
  auto changed = jit::detail::fingerprint_includes_memoized(roots, inc.str(), {}, memos, "memo");
  CHECK(changed != first);
  CHECK(changed == jit::detail::fingerprint_includes(roots, inc.str(), {}));

  SECTION("a header added beside them (which could shadow one) redoes it") {
    const auto before = jitk_test::read_file(memo);
    jitk_test::write_file(inc.path() / "new.h", "int n;\n");
    CHECK(jit::detail::fingerprint_includes_memoized(roots, inc.str(), {}, memos, "memo") == changed);
    CHECK(jitk_test::read_file(memo) != before);  // rescanned, stamped again
  }
  SECTION("a damaged, forged or hostile memo is never trusted: the headers are hashed again") {
    const std::string good = jitk_test::read_file(memo);
    const std::string forged_fingerprint = [&] {
      std::string t = good;
      const auto at = t.find("fingerprint ") + 12;
      t[at] = t[at] == '0' ? '1' : '0';  // a lie about the fingerprint, its checksum line left as it was
      return t;
    }();
    std::string other_stamp = good;
    other_stamp.replace(other_stamp.find("stamp ") + 6, 4, "ffff");
    const std::vector<std::string> hostile = {"", "garbage\n", good.substr(0, good.size() / 2), good + "path /etc/passwd\n",
                                              forged_fingerprint, other_stamp, std::string(300 * 1024, 'x')};
    for (const auto& bytes : hostile) {
      jitk_test::write_file(memo, bytes);
      CHECK(jit::detail::fingerprint_includes_memoized(roots, inc.str(), {}, memos, "memo") == changed);
      CHECK(jitk_test::read_file(memo) == good);  // written again whole
    }
    std::filesystem::remove(memo);
    REQUIRE(::mkfifo(memo.c_str(), 0600) == 0);  // read, it would block
    CHECK(jit::detail::fingerprint_includes_memoized(roots, inc.str(), {}, memos, "memo") == changed);
    std::filesystem::remove(memo);
    jitk_test::write_file(memo_dir.path() / "elsewhere", good);
    std::filesystem::create_symlink(memo_dir.path() / "elsewhere", memo);  // never followed
    jitk_test::write_file(inc.path() / "b.h", "int b = 333;\n");
    CHECK(jit::detail::fingerprint_includes_memoized(roots, inc.str(), {}, memos, "memo") == jit::detail::fingerprint_includes(roots, inc.str(), {}));
    CHECK(jitk_test::read_file(memo_dir.path() / "elsewhere") == good);  // the file it pointed at is untouched
  }
}

TEST_CASE("the header fingerprint memo notices a change in any folder the headers are in, nested or beside the include folder", "[cache]") {
  // The stamp stats every header and folder relative to the one folder that holds them all: here
  // the temp folder, above inc/ (a header reached as "../other/o.h").
  TempDir top, memo_dir;
  const auto inc = top.path() / "inc";
  std::filesystem::create_directories(inc / "sub" / "deeper");
  std::filesystem::create_directories(top.path() / "other");
  jitk_test::write_file(inc / "a.h", "#include <sub/s.h>\n#include \"../other/o.h\"\n");
  jitk_test::write_file(inc / "sub" / "s.h", "#include \"deeper/d.h\"\n");
  jitk_test::write_file(inc / "sub" / "deeper" / "d.h", "int d = 1;\n");
  jitk_test::write_file(top.path() / "other" / "o.h", "int o = 1;\n");
  const std::vector<std::string> roots = {"#include <a.h>\n"};
  const jit::detail::MemoFolder memos(std::make_shared<jit::detail::CacheRoot>(memo_dir.path()), "toolkit-headers", true);
  const auto memo = memo_dir.path() / "toolkit-headers" / "memo";
  auto fingerprint = [&] { return jit::detail::fingerprint_includes_memoized(roots, inc.string(), {}, memos, "memo"); };
  auto memo_inode = [&] {
    struct stat st{};
    REQUIRE(::stat(memo.c_str(), &st) == 0);
    return st.st_ino;  // a memo written again is a new file renamed into place
  };
  std::string now = fingerprint();
  CHECK(now.find("(4 toolkit headers)") != std::string::npos);
  CHECK(now == jit::detail::fingerprint_includes(roots, inc.string(), {}));
  auto ino = memo_inode();
  CHECK(fingerprint() == now);
  CHECK(memo_inode() == ino);  // unchanged headers: the memo is used, not written again

  const std::vector<std::pair<const char*, std::function<void()>>> changes{
      {"a header two folders down, rewritten in place", [&] { jitk_test::write_file(inc / "sub" / "deeper" / "d.h", "int d = 22;\n"); }},
      {"a header in a folder beside the include folder", [&] { jitk_test::write_file(top.path() / "other" / "o.h", "int o = 22;\n"); }},
      {"a file added two folders down", [&] { jitk_test::write_file(inc / "sub" / "deeper" / "new.h", "int n;\n"); }},
      {"a file added beside the include folder's headers", [&] { jitk_test::write_file(top.path() / "other" / "new.h", "int n;\n"); }},
  };
  for (const auto& [what, change] : changes) {
    INFO(what);
    change();
    const std::string after = fingerprint();
    CHECK(after == jit::detail::fingerprint_includes(roots, inc.string(), {}));
    CHECK(memo_inode() != ino);  // stamped again
    ino = memo_inode();
    CHECK(fingerprint() == after);
    CHECK(memo_inode() == ino);
  }
  // A header gone: scanned again, never an error.
  std::filesystem::remove(top.path() / "other" / "o.h");
  CHECK(fingerprint() == jit::detail::fingerprint_includes(roots, inc.string(), {}));
}

TEST_CASE("sizes parse as people write them", "[cache]") {
  CHECK(parse_size("2G") == 2LL << 30);
  CHECK(parse_size("500M") == 500LL << 20);
  CHECK(parse_size("64k") == 64LL << 10);
  CHECK(parse_size("1.5G") == 3LL << 29);
  CHECK(parse_size("4096") == 4096);
  CHECK(parse_size("10MB") == 10LL << 20);
  CHECK_FALSE(parse_size("lots"));
  CHECK_FALSE(parse_size("5X"));
  CHECK_FALSE(parse_size("-1G"));
}

TEST_CASE("over JITK_CACHE_MAX_SIZE the least recently used artifacts are evicted", "[cache][eviction]") {
  TempDir dir;
  DiskTier cache(dir.path(), 3000);
  REQUIRE(cache.size_limit() == 3000);
  auto key = [](int i) { return std::string(31, 'a') + static_cast<char>('0' + i); };
  ArtifactMeta meta{"saxpy", "dtype=f32", "cpu", "x", "c", 1.0};
  std::vector<char> payload(900, 'p');
  for (int i = 0; i < 3; ++i) REQUIRE(cache.put(key(i), meta, payload, PutReason::Compiled));
  // make artifact 0 the most recently used, then add two more: 1 and 2 must go first
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // last_used has 1 s resolution
  {
    SqliteIndex index(dir.path() / "index.db");
    auto r0 = row_for(key(0), "s");
    r0.last_used = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    index.record_hits({r0}, 0);
  }
  for (int i = 3; i < 5; ++i) REQUIRE(cache.put(key(i), meta, payload, PutReason::Compiled));
  std::set<std::string> left;
  std::int64_t total = 0;
  for (const auto& r : cache.rows()) {
    left.insert(r.key);
    total += r.size_bytes;
  }
  CHECK(total <= 3000);
  CHECK(left.count(key(0)));  // recently used: kept
  CHECK(left.count(key(4)));  // just stored: kept
  CHECK_FALSE(left.count(key(1)));
  CHECK(BlobStore(dir.path()).keys().size() == left.size());  // no blob outlives its row
}

TEST_CASE("prune removes what was not used for a while, and clear_kernel one kernel's artifacts", "[cache][eviction]") {
  TempDir dir;
  DiskTier cache(dir.path());
  ArtifactMeta saxpy{"saxpy", "dtype=f32", "cpu", "x", "c", 1.0}, softmax{"softmax", "dtype=f32,hidden=8", "cpu", "x", "c", 1.0};
  REQUIRE(cache.put(std::string(32, '4'), saxpy, bytes_of("a"), PutReason::Compiled));
  REQUIRE(cache.put(std::string(32, '5'), softmax, bytes_of("b"), PutReason::Compiled));
  REQUIRE(cache.put(std::string(32, '6'), softmax, bytes_of("c"), PutReason::Compiled));
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() / "index.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, ("UPDATE artifacts SET last_used = last_used - 40 * 86400 WHERE key = '" + std::string(32, '5') + "'").c_str(),
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto pruned = cache.prune(std::nullopt, 30 * 86400);
  CHECK(pruned.entries == 1);
  CHECK(cache.rows().size() == 2);
  auto cleared = cache.clear_kernel("softmax");
  CHECK(cleared.entries == 1);
  auto rows = cache.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kernel == "saxpy");
}

TEST_CASE("a size limit smaller than one artifact still keeps the artifact just stored", "[cache][eviction]") {
  TempDir dir;
  DiskTier cache(dir.path(), 100);
  ArtifactMeta meta{"saxpy", "dtype=f32", "cpu", "x", "c", 1.0};
  REQUIRE(cache.put(std::string(32, '7'), meta, std::vector<char>(1000, 'a'), PutReason::Compiled));
  REQUIRE(cache.put(std::string(32, '8'), meta, std::vector<char>(1000, 'b'), PutReason::Compiled));
  auto rows = cache.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].key == std::string(32, '8'));
}

TEST_CASE("two damaged indexes moved aside in the same second both stay", "[cache]") {
  TempDir dir;
  for (int i = 0; i < 2; ++i) {
    jitk_test::write_file(dir.path() / "index.db", std::string(4096, static_cast<char>('x' + i)));
    std::string note;
    SqliteIndex index(dir.path() / "index.db", &note);
    CHECK_THAT(note, Catch::Matchers::Contains("moved aside"));
  }
  int aside = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path()))
    aside += e.path().filename().string().rfind("index.db.broken-", 0) == 0;
  CHECK(aside == 2);
}

TEST_CASE("an index of format 1 (before implementations) is migrated in place and its rows kept", "[cache]") {
  TempDir dir;
  const std::string key(32, 'a');
  {
    IndexRow row = row_for(key, "sum");
    row.implementation = "cpu";
    row.implementation_version = 1;
    SqliteIndex index(dir.path() / "index.db");
    index.insert(row);
  }
  {
    // What format 1 looked like: no implementation columns, user_version 1.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() / "index.db").c_str(), &db) == SQLITE_OK);
    for (const char* sql : {"ALTER TABLE artifacts DROP COLUMN implementation",
                            "ALTER TABLE artifacts DROP COLUMN implementation_version", "PRAGMA user_version=1"})
      CHECK(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  SqliteIndex index(dir.path() / "index.db");
  auto row = index.find(key);
  REQUIRE(row);
  CHECK(row->kernel == "saxpy");
  CHECK(row->implementation.empty());
  CHECK(row->implementation_version == 0);
  IndexRow fresh = row_for(std::string(32, 'b'), "sum2");
  fresh.implementation = "cuda-sm90";
  fresh.implementation_version = 3;
  index.insert(fresh);
  CHECK(index.find(fresh.key)->implementation == "cuda-sm90");
  CHECK(index.find(fresh.key)->implementation_version == 3);
}

namespace {
// The hits journals a process left beneath the root (plain names; temp and taken files start with '.').
std::vector<std::string> journals_in(const std::filesystem::path& root) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(root / "hits", ec))
    if (e.path().filename().string()[0] != '.') names.push_back(e.path().filename().string());
  return names;
}

std::string journal(const std::string& body) { return seal_memo("jitk-hits 1\n" + body); }

std::int64_t last_used_in_index(const std::filesystem::path& root, const std::string& key) {
  auto row = SqliteIndex(root / "index.db").find(key);
  return row ? row->last_used : -1;
}

// The journal tests' start: a cache root (the temp folder, or `sub` in it) holding one artifact, put as
// a compile puts it; hit_once() is a process that hits it once and exits.
struct OneArtifactRoot {
  TempDir dir;
  std::filesystem::path root;
  std::string key;
  ArtifactMeta meta{"saxpy", "dtype=f32", "cpu", "x", "c", 1.0};
  explicit OneArtifactRoot(char key_char, const std::string& sub = "")
      : root(sub.empty() ? dir.path() : dir.path() / sub), key(32, key_char) {
    DiskTier writer(root);
    REQUIRE(writer.put(key, meta, bytes_of("object"), PutReason::Compiled));
  }
  const std::filesystem::path& path() const { return dir.path(); }  // the temp folder (the root unless `sub`)
  void hit_once(CacheRoot::Access access = CacheRoot::Access::ReadWrite) const {
    DiskTier reader(root, std::nullopt, "disk", access);
    REQUIRE(reader.get(key, meta, Count::HitsAndMisses));
  }
};
}  // namespace

TEST_CASE("a hits journal's text: written and read back exactly, anything else refused", "[cache][journal][parse]") {
  const std::string a(32, 'a'), b = "0123456789abcdef0123456789abcdef";
  const std::vector<std::pair<std::string, std::int64_t>> hits{{a, 1700000000}, {b, 0}, {a, kMaxJournalNumber}};
  const std::string text = journal_text(hits, 7);
  CHECK(text == "jitk-hits 1\nmisses 7\nhit " + a + " 1700000000\nhit " + b + " 0\nhit " + a + " 1000000000000\n");
  auto back = parse_journal(text);
  REQUIRE(back);
  CHECK(back->misses == 7);
  CHECK(back->hits == hits);
  auto none = parse_journal(journal_text({}, 0));
  REQUIRE(none);
  CHECK(none->hits.empty());
  CHECK(none->misses == 0);

  // Numbers: digits only, at most 13 of them, at most 10^12.
  CHECK(small_number("0") == 0);
  CHECK(small_number("1000000000000") == kMaxJournalNumber);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1000000000001", "9999999999999", "00000000000000", "1e3", "0x10", "12a"})
    CHECK_FALSE(small_number(bad));

  const std::string head = "jitk-hits 1\nmisses 1\n";
  const std::string hit_a = "hit " + a + " 5\n";
  for (const std::string& bad : {
           std::string(),                                               // empty
           std::string("jitk-hits 1\n"),                                // no misses line
           std::string("jitk-hits 2\nmisses 1\n"),                     // another format
           std::string("jitk-hits 1 \nmisses 1\n"),                    // header not exact
           std::string("jitk-hits 1\nmisses 1"),                        // last line unterminated
           std::string("jitk-hits 1\nmisses -1\n"),                    // negative
           std::string("jitk-hits 1\nmisses 99999999999999999999\n"),  // 20 digits
           std::string("jitk-hits 1\nmisses  1\n"),                    // two spaces
           std::string("jitk-hits 1\nhit " + a + " 5\nmisses 1\n"),  // misses not first
           head + "misses 1\n",                                         // a second misses line
           head + "hit " + a + " 5",                                     // unterminated hit
           head + "hit " + std::string(32, 'A') + " 5\n",              // not a cache key (upper case)
           head + "hit " + std::string(31, 'a') + " 5\n",              // short key
           head + "hit " + std::string(33, 'a') + " 5\n",              // long key
           head + "hit ../../../../index.db/xxxxxxxxxxx 5\n",           // a path, 32 characters
           head + "hit " + a + " \n",                                   // no time
           head + "hit " + a + " 5 6\n",                                // extra field
           head + "hit " + a + "  5\n",                                 // two spaces
           head + "hit " + a + " 1000000000001\n",                      // time too large
           head + hit_a + "\n",                                          // an empty line
           head + hit_a + "# comment\n",                                 // anything else
           head + std::string("hit ") + std::string(32, '\0') + " 5\n",  // NULs
       })
    CHECK_FALSE(parse_journal(bad));

  // At most kMaxJournalHits hits: one more is refused whole.
  std::string many = head;
  for (std::size_t i = 0; i < kMaxJournalHits; ++i) many += hit_a;
  auto most = parse_journal(many);
  REQUIRE(most);
  CHECK(most->hits.size() == kMaxJournalHits);
  CHECK_FALSE(parse_journal(many + hit_a));
}

TEST_CASE("a disk hit in a process that never opened the index is left in hits/ and counted by the next process that opens it", "[cache][journal]") {
  OneArtifactRoot dir('a');
  const std::string& key = dir.key;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() / "index.db").c_str(), &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, ("UPDATE artifacts SET last_used = 1000 WHERE key = '" + key + "'").c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  const auto before = SqliteIndex(dir.path() / "index.db").counters();
  dir.hit_once();  // exits: its hit goes to a journal, not to index.db
  CHECK(journals_in(dir.path()).size() == 1);
  CHECK(SqliteIndex(dir.path() / "index.db").counters().hits == before.hits);
  CHECK(last_used_in_index(dir.path(), key) == 1000);

  DiskTier next(dir.path());
  const auto rows = next.rows();  // opens the index: takes the journal
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].hits == 1);
  CHECK(rows[0].last_used > 1000);
  CHECK(next.counters().hits == before.hits + 1);
  CHECK(journals_in(dir.path()).empty());
}

TEST_CASE("journals taken by a process that cannot record them (index locked) go back to hits/ and are counted later, and stale taken files are removed",
          "[cache][journal][busy]") {
  OneArtifactRoot dir('e');
  dir.hit_once();
  REQUIRE(journals_in(dir.path()).size() == 1);
  // What a taker that died left: one an hour old (removed), one just made (another taker's: kept).
  const auto hits_dir = dir.path() / "hits";
  jitk_test::write_file(hits_dir / ".old.taken.1.2", "x");
  jitk_test::write_file(hits_dir / ".new.taken.1.3", "x");
  const struct timespec old_times[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
  REQUIRE(::utimensat(AT_FDCWD, (hits_dir / ".old.taken.1.2").c_str(), old_times, 0) == 0);
  {
    ::setenv("JITK_CACHE_LOCK_TIMEOUT", "0.3", 1);
    struct Unset {
      ~Unset() { ::unsetenv("JITK_CACHE_LOCK_TIMEOUT"); }
    } unset;
    sqlite3* other = nullptr;
    REQUIRE(sqlite3_open((dir.path() / "index.db").c_str(), &other) == SQLITE_OK);
    REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
    {
      DiskTier busy(dir.path());
      // takes the journal, cannot write the index (busy: one clear error), puts it back
      CHECK_THROWS_WITH(busy.rows(), Catch::Matchers::Contains("locked by another process"));
    }
    sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(other);
  }
  CHECK(journals_in(dir.path()).size() == 1);
  CHECK(!std::filesystem::exists(hits_dir / ".old.taken.1.2"));
  CHECK(std::filesystem::exists(hits_dir / ".new.taken.1.3"));
  DiskTier next(dir.path());
  const auto rows = next.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].hits == 1);
  CHECK(journals_in(dir.path()).empty());
}

TEST_CASE("a process that opened its index writes its hits there, and a full hits/ is folded by the next exit", "[cache][journal]") {
  OneArtifactRoot dir('b');
  const std::string& key = dir.key;
  {
    DiskTier writer(dir.path());
    REQUIRE(writer.put(std::string(32, 'c'), dir.meta, bytes_of("other"), PutReason::Compiled));  // opens its index
    REQUIRE(writer.get(key, dir.meta, Count::HitsAndMisses));
  }  // its index is open: written there
  CHECK(journals_in(dir.path()).empty());
  CHECK(SqliteIndex(dir.path() / "index.db").counters().hits == 1);

  // 64 journals waiting (processes that only hit): the next exit writes the index, all of them in.
  std::filesystem::create_directory(dir.path() / "hits");
  for (int i = 0; i < 64; ++i)
    jitk_test::write_file(dir.path() / "hits" / ("j" + std::to_string(i)), journal("misses 1\nhit " + key + " 2000\n"));
  dir.hit_once();
  CHECK(journals_in(dir.path()).empty());
  const auto c = SqliteIndex(dir.path() / "index.db").counters();
  CHECK(c.hits == 1 + 64 + 1);
  CHECK(c.misses == 64);

  // clear forgets journals with the artifacts.
  dir.hit_once();
  REQUIRE(journals_in(dir.path()).size() == 1);
  DiskTier(dir.path()).clear();
  CHECK(journals_in(dir.path()).empty());
}

TEST_CASE("a damaged, forged or hostile hits journal is dropped, never trusted, and never stops the cache", "[cache][journal][hostile]") {
  TempDir dir;
  TempDir outside;
  const std::string good(32, 'c'), damaged(32, 'd'), absent(32, 'e'), counted(32, 'f');
  ArtifactMeta meta{"softmax", "dtype=f32,hidden=8", "cpu", "x", "c", 2.0};
  {
    DiskTier writer(dir.path());
    for (const auto& k : {good, damaged, counted}) REQUIRE(writer.put(k, meta, bytes_of("object " + k), PutReason::Compiled));
  }
  {
    SqliteIndex index(dir.path() / "index.db");
    index.remove(good);     // its blob verifies: a journaled hit puts its row back, from the blob's header
    index.remove(damaged);  // its blob is damaged below: no row comes back
  }
  auto blob = BlobStore(dir.path()).path_for(damaged);
  auto text = jitk_test::read_file(blob);
  text.back() ^= 0x20;
  jitk_test::write_file(blob, text);
  const auto before = SqliteIndex(dir.path() / "index.db").counters();

  const auto hits = dir.path() / "hits";
  std::filesystem::create_directory(hits);
  const std::string whole = journal("misses 2\nhit " + good + " 3000\nhit " + damaged + " 3000\nhit " + absent + " 3000\nhit " + counted + " 3000\n");
  jitk_test::write_file(hits / "whole", whole);
  jitk_test::write_file(hits / "garbage", std::string(500, '\x7f'));
  jitk_test::write_file(hits / "empty", "");
  jitk_test::write_file(hits / "torn", whole.substr(0, whole.size() - 9));
  jitk_test::write_file(hits / "unsealed", "jitk-hits 1\nmisses 5\nhit " + counted + " 3000\n");
  jitk_test::write_file(hits / "bad-key", journal("misses 0\nhit ../../index.db 3000\n"));
  jitk_test::write_file(hits / "upper-key", journal("misses 0\nhit " + std::string(32, 'C') + " 3000\n"));
  jitk_test::write_file(hits / "huge", journal("misses 99999999999999999999\n"));
  jitk_test::write_file(hits / "negative", journal("misses -5\n"));
  jitk_test::write_file(hits / "other-format", seal_memo("jitk-hits 2\nmisses 7\n"));
  jitk_test::write_file(hits / "no-newline", journal("misses 3\nhit " + counted + " 3000"));
  jitk_test::write_file(hits / "oversized", journal("misses 1\n" + std::string(300 * 1024, '#') + "\n"));
  REQUIRE(::mkfifo((hits / "fifo").c_str(), 0600) == 0);
  std::filesystem::create_directory(hits / "a-folder");
  jitk_test::write_file(outside.path() / "target", journal("misses 9\n"));
  std::filesystem::create_symlink(outside.path() / "target", hits / "symlink");

  DiskTier next(dir.path());
  const auto c = next.counters();  // must return: no hang on the FIFO
  CHECK(c.hits == before.hits + 2);  // good and counted: the damaged and absent blobs' hits are not counted
  CHECK(c.misses == before.misses + 2);
  std::map<std::string, IndexRow> rows;
  for (auto& r : next.rows()) rows[r.key] = r;
  REQUIRE(rows.count(good));
  CHECK(rows[good].kernel == "softmax");
  CHECK(rows[good].params == "dtype=f32,hidden=8");
  CHECK(rows[good].hits == 1);
  CHECK_FALSE(rows.count(damaged));
  CHECK_FALSE(rows.count(absent));
  REQUIRE(rows.count(counted));
  CHECK(rows[counted].hits == 1);
  CHECK(rows[counted].last_used > 3000);  // a journal's older time never moves last_used back
  // Only the folder stays (never a journal); the symlink went, its target is untouched.
  CHECK(journals_in(dir.path()) == std::vector<std::string>{"a-folder"});
  CHECK(jitk_test::read_file(outside.path() / "target") == journal("misses 9\n"));
}

TEST_CASE("a read-only cache, or a root moved away while the process ran, gets no hits journal", "[cache][journal]") {
  OneArtifactRoot dir('9', "c");
  dir.hit_once(CacheRoot::Access::ReadOnly);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "c" / "hits"));
  {
    DiskTier reader(dir.root);
    REQUIRE(reader.get(dir.key, dir.meta, Count::HitsAndMisses));
    std::filesystem::rename(dir.path() / "c", dir.path() / "moved");
    std::filesystem::create_directory(dir.path() / "c");
    std::filesystem::permissions(dir.path() / "c", std::filesystem::perms::owner_all);
  }  // its exit writes nothing, in the folder it opened or in the one now at its path
  CHECK_FALSE(std::filesystem::exists(dir.path() / "moved" / "hits"));
  CHECK(std::filesystem::is_empty(dir.path() / "c"));
}

TEST_CASE("a hits/ that is a symlink or a file is never written through: the exit writes the index instead", "[cache][journal][hostile]") {
  OneArtifactRoot dir('8');
  TempDir outside;
  std::filesystem::create_symlink(outside.path(), dir.path() / "hits");
  dir.hit_once();
  CHECK(std::filesystem::is_empty(outside.path()));
  CHECK(SqliteIndex(dir.path() / "index.db").counters().hits == 1);

  std::filesystem::remove(dir.path() / "hits");
  jitk_test::write_file(dir.path() / "hits", "not a folder");
  dir.hit_once();
  CHECK(jitk_test::read_file(dir.path() / "hits") == "not a folder");
  CHECK(SqliteIndex(dir.path() / "index.db").counters().hits == 2);
  DiskTier next(dir.path());
  CHECK(next.counters().hits == 2);  // the taking side copes with it too
}
