// The cache across processes: a second process compiles nothing, damage is rebuilt, concurrent processes compile once.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <chrono>
#include <future>
#include <random>

#include <sys/stat.h>
#include <unistd.h>

#include "test_support.hpp"

using Catch::Matchers::Contains;
using jitk_test::run;
using jitk_test::TempDir;
namespace fs = std::filesystem;

namespace {

using jitk_test::kClient;
using jitk_test::kTool;

nlohmann::json stats(const TempDir& cache) {
  auto r = run(kTool + " stats --json", jitk_test::cache_env(cache));
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

void exec_sql(const std::filesystem::path& db_path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(db_path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

// Populates a cache, damages it, and runs the client again: every kernel must come back right,
// rebuilt ("compiled") or loaded from a verified blob ("disk"), and the cache must verify after.
template <class Damage>
void check_recovers_after(Damage&& damage, const std::string& expected_origin, const std::string& expect_in_log) {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy rms_norm", env).exit_code == 0);
  damage(cache.path());
  auto r = run(kClient + " saxpy rms_norm", env);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(jitk_test::count_lines_with(r.output, " " + expected_origin + " ok") == 2);
  // A process that only hit the cache leaves its hits for the next one that opens index.db (here
  // jitk stats): the index's own repairs are said there.
  auto next = run(kTool + " stats", env);
  INFO(next.output);
  CHECK(next.exit_code == 0);
  if (!expect_in_log.empty()) CHECK_THAT(r.output + next.output, Contains(expect_in_log));
  auto again = run(kClient + " saxpy rms_norm", env);
  CHECK(jitk_test::count_lines_with(again.output, " disk ok") == 2);
  CHECK(stats(cache)["entries"].get<int>() == 2);
  CHECK(run(kTool + " verify", env).exit_code == 0);
}

}  // namespace

TEST_CASE("a second process finds every kernel on disk and compiles nothing", "[cache][process]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  auto first = run(kClient, env);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK(jitk_test::count_lines_with(first.output, " compiled ok") == 4);
  auto compiles = stats(cache)["compiles"].get<int>();
  CHECK(compiles == 4);

  const auto index_written = fs::last_write_time(cache.path() / "index.db");
  auto second = run(kClient, env);
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  CHECK(jitk_test::count_lines_with(second.output, " disk ok") == 4);
  // It only hit the cache: its hits wait in one journal, index.db was not written.
  std::vector<fs::path> journals;
  for (auto& e : fs::directory_iterator(cache.path() / "hits")) journals.push_back(e.path());
  CHECK(journals.size() == 1);
  CHECK_FALSE(fs::exists(cache.path() / "index.db-wal"));
  CHECK(fs::last_write_time(cache.path() / "index.db") == index_written);
  auto s = stats(cache);
  CHECK(fs::is_empty(cache.path() / "hits"));
  CHECK(s["compiles"].get<int>() == compiles);
  CHECK(s["hits"].get<int>() == 4);
  CHECK(s["entries"].get<int>() == 4);
}

TEST_CASE("a blob with one flipped byte is rebuilt, not loaded", "[cache][process][damage]") {
  check_recovers_after([](const std::filesystem::path& root) {
    for (const auto& blob : jitk_test::blob_files(root)) {
      auto bytes = jitk_test::read_file(blob);
      bytes[bytes.size() / 2] ^= 0x10;
      jitk_test::write_file(blob, bytes);
    }
  }, "compiled", "checksum mismatch");
}

TEST_CASE("a truncated blob is rebuilt", "[cache][process][damage]") {
  check_recovers_after([](const std::filesystem::path& root) {
    for (const auto& blob : jitk_test::blob_files(root)) {
      auto bytes = jitk_test::read_file(blob);
      jitk_test::write_file(blob, bytes.substr(0, bytes.size() / 3));
    }
  }, "compiled", "damaged");
}

// Issue 26: a FIFO in a blob's place hung the quickstart and `jitk verify` forever.
TEST_CASE("a FIFO in the place of a blob is rebuilt, not waited on", "[cache][process][damage]") {
  check_recovers_after([](const std::filesystem::path& root) {
    for (const auto& blob : jitk_test::blob_files(root)) {
      std::filesystem::remove(blob);
      REQUIRE(::mkfifo(blob.c_str(), 0600) == 0);
    }
  }, "compiled", "FIFO");
}

TEST_CASE("a missing blob whose row is present is rebuilt", "[cache][process][damage]") {
  check_recovers_after([](const std::filesystem::path& root) {
    for (const auto& blob : jitk_test::blob_files(root)) std::filesystem::remove(blob);
  }, "compiled", "blob is missing");
}

// Blobs verify themselves (key + XXH3-128 in their header), so losing the index loses no kernel:
// the blobs load and their rows come back.
TEST_CASE("a verified blob with no index row is loaded and its row restored", "[cache][process][damage]") {
  check_recovers_after([](const std::filesystem::path& root) { exec_sql(root / "index.db", "DELETE FROM artifacts"); },
                       "disk", "rows are restored");
}

TEST_CASE("an index.db of garbage bytes is moved aside and rebuilt from the blobs in use", "[cache][process][damage]") {
  check_recovers_after([](const std::filesystem::path& root) {
    std::filesystem::remove(root / "index.db-wal");
    std::filesystem::remove(root / "index.db-shm");
    jitk_test::write_file(root / "index.db", std::string(4096, '\x5a'));
  }, "disk", "moved aside");
}

TEST_CASE("a stale -wal file of garbage does not stop the cache", "[cache][process][damage]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy", env).exit_code == 0);
  jitk_test::write_file(cache.path() / "index.db-wal", std::string(10000, '\x33'));
  auto r = run(kClient + " saxpy", env);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("saxpy"));
  CHECK_THAT(r.output, Contains(" ok"));
}

TEST_CASE("JITK_KERNEL_DIR text is used, is part of the key, and unsetting it returns to the shipped text", "[cache][process]") {
  TempDir cache, kernels;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy", env).exit_code == 0);
  // A deliberately different saxpy: y = a*x + y + 1. The client's reference check must then fail,
  // which proves the override's text was compiled rather than the cached shipped one.
  auto text = jitk_test::read_file(std::string(JITK_SOURCE_DIR) + "/kernel_sources/saxpy/saxpy.cpp");
  auto pos = text.find("y[i] = a * x[i] + y[i];");
  REQUIRE(pos != std::string::npos);
  text.replace(pos, 23, "y[i] = a * x[i] + y[i] + T(1);");
  jitk_test::write_file(kernels.path() / "saxpy/saxpy.cpp", text);

  auto changed = run(kClient + " saxpy", env + " JITK_KERNEL_DIR='" + kernels.str() + "'");
  CHECK_THAT(changed.output, Contains("saxpy compiled WRONG"));
  auto back = run(kClient + " saxpy", env);
  CHECK_THAT(back.output, Contains("saxpy disk ok"));
  CHECK(stats(cache)["entries"].get<int>() == 2);
}

TEST_CASE("a warm get in a new process finds its artifact by the key remembered for the request, and an edit in JITK_KERNEL_DIR still recompiles", "[cache][process][warm]") {
  TempDir cache, kernels;
  const auto env = jitk_test::cache_env(cache) + " JITK_LOG_LEVEL=info";
  const std::string remembered = "(key remembered)";
  auto first = run(kClient + " saxpy", env);
  INFO(first.output);
  CHECK_THAT(first.output, Contains("saxpy compiled ok"));
  CHECK_THAT(first.output, !Contains(remembered));
  REQUIRE(fs::is_directory(cache.path() / "keys"));

  auto warm = run(kClient + " saxpy", env);
  INFO(warm.output);
  CHECK_THAT(warm.output, Contains("saxpy disk ok"));
  CHECK_THAT(warm.output, Contains(remembered));  // the fast path: no text rendered

  // The override differs from the shipped text: y = a*x + y + 1 (the client's check then fails, which
  // proves the override was compiled, not the cached shipped artifact loaded by a remembered key).
  auto text = jitk_test::read_file(std::string(JITK_SOURCE_DIR) + "/kernel_sources/saxpy/saxpy.cpp");
  auto pos = text.find("y[i] = a * x[i] + y[i];");
  REQUIRE(pos != std::string::npos);
  text.replace(pos, 23, "y[i] = a * x[i] + y[i] + T(1);");
  const auto file = kernels.path() / "saxpy/saxpy.cpp";
  jitk_test::write_file(file, text);
  const std::string with_dir = env + " JITK_KERNEL_DIR='" + kernels.str() + "'";
  auto edited = run(kClient + " saxpy", with_dir);
  INFO(edited.output);
  CHECK_THAT(edited.output, Contains("saxpy compiled WRONG"));
  auto edited_warm = run(kClient + " saxpy", with_dir);
  INFO(edited_warm.output);
  CHECK_THAT(edited_warm.output, Contains("saxpy disk WRONG"));
  CHECK_THAT(edited_warm.output, Contains(remembered));

  // Edited again in place: same size, same mtime; only the content says it changed.
  const auto mtime = fs::last_write_time(file);
  text.replace(text.find("T(1)"), 4, "T(2)");
  jitk_test::write_file(file, text);
  fs::last_write_time(file, mtime);
  auto again = run(kClient + " saxpy", with_dir);
  INFO(again.output);
  CHECK_THAT(again.output, Contains("saxpy compiled WRONG"));
  CHECK_THAT(again.output, !Contains(remembered));

  auto back = run(kClient + " saxpy", env);
  INFO(back.output);
  CHECK_THAT(back.output, Contains("saxpy disk ok"));
  CHECK_THAT(back.output, Contains(remembered));
  CHECK(stats(cache)["entries"].get<int>() == 3);
}

TEST_CASE("a damaged, forged or misplaced remembered key is never trusted: the request is resolved whole", "[cache][process][warm][hostile]") {
  TempDir cache, elsewhere;
  const auto env = jitk_test::cache_env(cache) + " JITK_LOG_LEVEL=info";
  REQUIRE(run(kClient + " saxpy rms_norm", env).exit_code == 0);
  std::vector<fs::path> memos;
  for (const auto& e : fs::directory_iterator(cache.path() / "keys"))
    if (e.path().filename().string()[0] != '.') memos.push_back(e.path());
  REQUIRE(memos.size() == 2);
  const std::string good = jitk_test::read_file(memos[0]), other = jitk_test::read_file(memos[1]);
  // other's memo names rms_norm's key (or saxpy's): a memo moved to another request's name.
  std::string flipped = good;
  flipped[flipped.find("key ") + 5] ^= 1;
  const std::vector<std::string> hostile = {"", "garbage", good.substr(0, good.size() - 3), good + "key 0\n", flipped, other,
                                            std::string(8192, 'k')};
  for (const auto& bytes : hostile) {
    jitk_test::write_file(memos[0], bytes);
    auto r = run(kClient + " saxpy rms_norm", env);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(jitk_test::count_lines_with(r.output, " disk ok") == 2);  // resolved whole: the right artifacts
    CHECK(jitk_test::count_lines_with(r.output, "(key remembered)") == 1);  // only the intact memo was used
    CHECK(jitk_test::read_file(memos[0]) == good);  // remembered again, whole
  }
  SECTION("a memo that is a symlink or a FIFO is not followed or opened") {
    fs::rename(memos[0], elsewhere.path() / "memo");
    fs::create_symlink(elsewhere.path() / "memo", memos[0]);
    auto r = run(kClient + " saxpy rms_norm", env);
    CHECK(jitk_test::count_lines_with(r.output, "(key remembered)") == 1);
    fs::remove(memos[0]);
    REQUIRE(::mkfifo(memos[0].c_str(), 0600) == 0);
    auto f = run("timeout 60 " + kClient + " saxpy rms_norm", env);
    INFO(f.output);
    CHECK(f.exit_code == 0);
    CHECK(jitk_test::count_lines_with(f.output, " disk ok") == 2);
  }
  SECTION("a memo pointing at an artifact that is gone is a miss, compiled again") {
    jitk_test::write_file(memos[0], good);
    for (const auto& e : fs::recursive_directory_iterator(cache.path() / "blobs"))
      if (e.is_regular_file() && good.find(e.path().filename().string()) != std::string::npos) fs::remove(e.path());
    auto r = run(kClient + " saxpy rms_norm", env);
    INFO(r.output);
    CHECK(jitk_test::count_lines_with(r.output, " compiled ok") == 1);
    CHECK(jitk_test::count_lines_with(r.output, " disk ok") == 1);
  }
}

TEST_CASE("16 processes started together on an empty cache compile each kernel once", "[cache][process][concurrency]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  constexpr int kProcesses = 16;
  std::vector<std::future<jitk_test::CommandResult>> runs;
  for (int i = 0; i < kProcesses; ++i) runs.push_back(std::async(std::launch::async, [&] { return run(kClient, env); }));
  int compiled = 0;
  for (auto& f : runs) {
    auto r = f.get();
    INFO(r.output);
    CHECK(r.exit_code == 0);
    compiled += static_cast<int>(jitk_test::count_lines_with(r.output, " compiled ok"));
  }
  CHECK(compiled == 4);
  CHECK(stats(cache)["compiles"].get<int>() == 4);
}

TEST_CASE("an unusable cache root still gives working kernels, with a warning that says how to fix it", "[cache][process]") {
  TempDir dir;
  jitk_test::write_file(dir.path() / "file", "not a folder");
  auto r = run(kClient + " saxpy", "JITK_CACHE_DIR='" + (dir.path() / "file" / "jitk").string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("memory only") && Contains("JITK_CACHE_DIR"));
  CHECK_THAT(r.output, Contains("saxpy compiled ok"));
}

TEST_CASE("processes killed at random points while compiling or storing never leave a loadable bad artifact", "[cache][process][crash]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> kill_after_ms(1, 120);
  constexpr int kKills = 20;
  for (int i = 0; i < kKills; ++i) {
    if (i % 4 == 0) run(kTool + " clear", env);  // so later kills land in compiles again
    char delay[32];
    std::snprintf(delay, sizeof delay, "%.3f", kill_after_ms(rng) / 1000.0);
    run(std::string("timeout -s KILL ") + delay + " " + kClient, env);
  }
  // whatever the kills left: everything verifies (temp files are not artifacts) and loads right
  auto verify = run(kTool + " verify", env);
  INFO(verify.output);
  CHECK(verify.exit_code == 0);
  auto r = run(kClient, env);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(jitk_test::count_lines_with(r.output, " ok") == 4);
  CHECK(jitk_test::count_lines_with(r.output, "WRONG") == 0);
}

TEST_CASE("a full disk (writes failing) still gives working kernels, with one warning that says why", "[cache][process][disk]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  // File size limit of 8 KiB: index.db and the blobs cannot be written; SIGXFSZ ignored so the
  // writes fail with EFBIG as they would with ENOSPC.
  auto r = run("bash -c 'ulimit -f 8; trap \"\" XFSZ; exec " + kClient + "'", env);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(jitk_test::count_lines_with(r.output, " compiled ok") == 4);
  CHECK(jitk_test::count_lines_with(r.output, "[jitk W]") >= 1);
  CHECK(jitk_test::count_lines_with(r.output, "[jitk W]") <= 2);
  CHECK_THAT(r.output, Contains("JITK_CACHE_DIR"));
}

TEST_CASE("an index.db owned by another user is not used", "[cache][process][security]") {
  if (::geteuid() != 0) {
    std::printf("SKIPPED: needs root to give index.db to another user\n");
    return;
  }
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy", env).exit_code == 0);
  REQUIRE(::chown((cache.path() / "index.db").c_str(), 65534, 65534) == 0);  // nobody
  auto r = run(kClient + " saxpy", env);
  INFO(r.output);
  CHECK_THAT(r.output, Contains("belongs to another user") && Contains("saxpy compiled ok"));
  auto trusted = run(kClient + " saxpy", env + " JITK_CACHE_TRUST_SHARED=1");
  CHECK_THAT(trusted.output, Contains("saxpy disk ok"));
}

TEST_CASE("a read-only cache root serves what it holds, keeps new kernels in memory, and warns once", "[cache][process][disk]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy", env).exit_code == 0);
  const std::string root = cache.str();
  if (std::system(("mount --bind '" + root + "' '" + root + "' 2>/dev/null && mount -o remount,ro,bind '" + root +
                   "' '" + root + "' 2>/dev/null").c_str()) != 0) {
    std::system(("umount '" + root + "' 2>/dev/null").c_str());
    std::printf("SKIPPED: cannot make a read-only bind mount here (needs root)\n");
    return;
  }
  auto r = run(kClient, env);
  std::system(("umount '" + root + "'").c_str());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("saxpy disk ok"));  // on the read-only disk: used
  CHECK(jitk_test::count_lines_with(r.output, " compiled ok") == 3);  // new: compiled, kept in memory
  CHECK(jitk_test::count_lines_with(r.output, "[jitk W]") == 1);
  CHECK_THAT(r.output, Contains("read-only") && Contains("JITK_CACHE_DIR"));
  CHECK(jitk_test::blob_files(cache.path()).size() == 1);
}

// Issue 26: with index.db locked by another process, every store waited the whole busy timeout
// again (a cold quickstart took 303 s). Now the first wait that reaches JITK_CACHE_LOCK_TIMEOUT
// sends the process to memory for the rest of its run.
TEST_CASE("an index locked by another process costs a cold run the lock timeout once, not once per kernel", "[cache][process][busy]") {
  TempDir cache, unlocked;
  auto env = jitk_test::cache_env(cache);
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto t_cold = std::chrono::steady_clock::now();
  REQUIRE(run(kClient, jitk_test::cache_env(unlocked)).exit_code == 0);  // what a cold run costs here
  const double cold = since(t_cold);
  REQUIRE(run(kTool + " stats", env).exit_code == 0);  // makes the index (WAL)
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open((cache.path() / "index.db").c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);  // held by this process
  auto t0 = std::chrono::steady_clock::now();
  auto r = run(kClient, env + " JITK_CACHE_LOCK_TIMEOUT=1");
  const double seconds = since(t0);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(jitk_test::count_lines_with(r.output, " compiled ok") == 4);
  CHECK(jitk_test::count_lines_with(r.output, "locked by another process") == 1);
  // The cold run plus one wait of 1 s (four, one per store, before).
  INFO("cold run " << cold << " s, with the index locked " << seconds << " s");
  CHECK(seconds >= 1.0);
  CHECK(seconds < cold + 1.0 + 1.8);
}
