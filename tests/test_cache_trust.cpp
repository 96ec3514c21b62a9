// The cache as an attacker or a careless user meets it: a root swapped under a running process, a
// symlinked root, parents others can write, FIFOs where files should be, blobs bound to another
// artifact, an index or a lock held past the timeout (issue 26).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <sqlite3.h>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "cache/blob_format.hpp"
#include "cache/blob_store.hpp"
#include "cache/cache_key.hpp"
#include "cache/cache_root.hpp"
#include "cache/disk_tier.hpp"
#include "cache/file_lock.hpp"
#include "cache/sqlite_index.hpp"
#include "cache/tuning_store.hpp"
#include "test_support.hpp"

using namespace jit::detail;
using Catch::Matchers::Contains;
using jitk_test::TempDir;
namespace fs = std::filesystem;

namespace {

std::vector<char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string text_of(const std::vector<char>& v) { return {v.begin(), v.end()}; }

const ArtifactMeta kSaxpy{"saxpy", "dtype=f32", "cpu", "x86-64", "clang-16", 1.0, "cpu", 1};
const ArtifactMeta kSoftmax{"softmax", "dtype=f32,hidden=8", "cpu", "x86-64", "clang-16", 1.0, "cpu", 1};
const std::string kKey(32, 'a'), kOther(32, 'b');

// Whether fn returns within `seconds`, run in a child process (a hang is killed, not waited on).
bool finishes_within(int seconds, const std::function<bool()>& fn) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(fn() ? 0 : 1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool present(const fs::path& p) {
  struct stat st{};
  return ::lstat(p.c_str(), &st) == 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) {
    if (value) ::setenv(name.c_str(), value, 1);
    else ::unsetenv(name.c_str());
  }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("a root moved away and replaced by another folder under a running process is refused: the planted blob is never loaded",
          "[cache][trust]") {
  TempDir dir;
  const auto root = dir.path() / "jitk";
  DiskTier cache(root);
  REQUIRE(cache.put(kKey, kSaxpy, bytes_of("genuine"), PutReason::Compiled));
  REQUIRE(cache.get(kKey, kSaxpy, Count::HitsAndMisses));

  // Another user renames the root away and puts a folder of theirs in its place, holding a blob
  // for the same key that verifies and names the same kernel.
  REQUIRE(::rename(root.c_str(), (dir.path() / "moved").c_str()) == 0);
  REQUIRE(::mkdir(root.c_str(), 0700) == 0);
  BlobStore(root).write(kKey, kSaxpy, bytes_of("planted"));
  const auto planted_entries = std::distance(fs::recursive_directory_iterator(root), fs::recursive_directory_iterator());

  auto got = cache.get(kKey, kSaxpy, Count::HitsAndMisses);
  CHECK_FALSE((got && text_of(*got) == "planted"));
  CHECK_FALSE(got);  // refused for good: the process keeps kernels in memory
  CHECK_THAT(cache.unavailable_reason(), Contains("moved or replaced"));
  CHECK_FALSE(cache.put(kOther, kSaxpy, bytes_of("new"), PutReason::Compiled));
  CHECK_FALSE(cache.get(kKey, kSaxpy, Count::HitsAndMisses));
  CHECK(cache.lock(kOther) == nullptr);
  // Nothing was written into the planted folder (no index, no blob, no lock).
  CHECK_FALSE(present(root / "index.db"));
  CHECK(std::distance(fs::recursive_directory_iterator(root), fs::recursive_directory_iterator()) == planted_entries);
}

TEST_CASE("a root re-pointed by a symlink swap under a running process is refused", "[cache][trust]") {
  TempDir dir;
  const auto root = dir.path() / "jitk";
  const auto theirs = dir.path() / "theirs";
  DiskTier cache(root);
  REQUIRE(cache.put(kKey, kSaxpy, bytes_of("genuine"), PutReason::Compiled));
  REQUIRE(::mkdir(theirs.c_str(), 0700) == 0);
  BlobStore(theirs).write(kKey, kSaxpy, bytes_of("planted"));
  REQUIRE(::rename(root.c_str(), (dir.path() / "moved").c_str()) == 0);
  REQUIRE(::symlink(theirs.c_str(), root.c_str()) == 0);

  auto got = cache.get(kKey, kSaxpy, Count::HitsAndMisses);
  CHECK_FALSE((got && text_of(*got) == "planted"));
  CHECK_THAT(cache.unavailable_reason(), Contains("symbolic link"));
  CHECK_FALSE(cache.put(kOther, kSaxpy, bytes_of("new"), PutReason::Compiled));
  CHECK_FALSE(present(theirs / "index.db"));
  CHECK_FALSE(BlobStore(theirs).exists(kOther));
}

TEST_CASE("a symlinked root is refused and nothing is created through it", "[cache][trust]") {
  TempDir dir;
  const auto target = dir.path() / "target";
  const auto link = dir.path() / "jitk";
  REQUIRE(::mkdir(target.c_str(), 0700) == 0);
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  DiskTier cache(link);
  CHECK_FALSE(cache.on_disk());
  CHECK_THAT(cache.unavailable_reason(), Contains("symbolic link"));
  CHECK_FALSE(cache.put(kKey, kSaxpy, bytes_of("x"), PutReason::Compiled));
  CHECK(fs::is_empty(target));
}

TEST_CASE("a root under a parent others can write without the sticky bit is refused, and nothing is created", "[cache][trust]") {
  TempDir dir;
  const auto shared = dir.path() / "shared";
  REQUIRE(::mkdir(shared.c_str(), 0700) == 0);
  REQUIRE(::chmod(shared.c_str(), 0777) == 0);
  ScopedEnv trust("JITK_CACHE_TRUST_SHARED", nullptr);
  {
    DiskTier cache(shared / "jitk");  // not there yet: not created either
    CHECK_FALSE(cache.on_disk());
    CHECK_THAT(cache.unavailable_reason(), Contains("without the sticky bit"));
    CHECK_FALSE(present(shared / "jitk"));
  }
  REQUIRE(::mkdir((shared / "jitk").c_str(), 0700) == 0);
  {
    DiskTier cache(shared / "jitk");
    CHECK_FALSE(cache.on_disk());
    CHECK(fs::is_empty(shared / "jitk"));
  }
  // With the sticky bit (as /tmp has) only an entry's owner can rename it: usable.
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  DiskTier cache(shared / "jitk");
  CHECK(cache.on_disk());
}

TEST_CASE("a root others can write is refused with nothing created inside it", "[cache][trust]") {
  TempDir dir;
  const auto root = dir.path() / "jitk";
  REQUIRE(::mkdir(root.c_str(), 0700) == 0);
  REQUIRE(::chmod(root.c_str(), 0770) == 0);
  ScopedEnv trust("JITK_CACHE_TRUST_SHARED", nullptr);
  DiskTier cache(root);
  CHECK_FALSE(cache.on_disk());
  CHECK_THAT(cache.unavailable_reason(), Contains("writable by group or others"));
  CHECK_FALSE(present(root / "blobs"));
  CHECK_FALSE(present(root / "locks"));
  CHECK_FALSE(present(root / "index.db"));
}

TEST_CASE("blobs/ or locks/ that is not a folder of ours is refused at open, and a root that is not a folder too", "[cache][trust]") {
  // The open looks at an existing blobs/ and locks/ with one fstatat, and opens only what does not
  // look right: each of these must still be refused there, nothing followed or made through it.
  ScopedEnv trust("JITK_CACHE_TRUST_SHARED", nullptr);
  TempDir outside;
  struct Case {
    const char* what;
    std::function<void(const fs::path&)> make;  // makes the bad entry in the root
    const char* reason;
  };
  const std::vector<Case> cases{
      {"blobs/ a symlink to a folder", [&](const fs::path& r) { fs::create_directory_symlink(outside.path(), r / "blobs"); },
       "blobs is a symbolic link, not a folder"},
      {"locks/ a symlink to a folder", [&](const fs::path& r) { fs::create_directory_symlink(outside.path(), r / "locks"); },
       "locks is a symbolic link, not a folder"},
      {"locks/ a regular file", [](const fs::path& r) { jitk_test::write_file(r / "locks", "x"); }, "locks is a regular file, not a folder"},
      {"blobs/ a FIFO", [](const fs::path& r) { REQUIRE(::mkfifo((r / "blobs").c_str(), 0600) == 0); }, "blobs is a FIFO, not a folder"},
      {"blobs/ writable by group", [](const fs::path& r) {
         REQUIRE(::mkdir((r / "blobs").c_str(), 0700) == 0);
         REQUIRE(::chmod((r / "blobs").c_str(), 0770) == 0);
       }, "blobs is writable by group or others"},
      {"locks/ writable by others", [](const fs::path& r) {
         REQUIRE(::mkdir((r / "locks").c_str(), 0700) == 0);
         REQUIRE(::chmod((r / "locks").c_str(), 0702) == 0);
       }, "locks is writable by group or others"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    TempDir dir;
    const auto root = dir.path() / "jitk";
    REQUIRE(::mkdir(root.c_str(), 0700) == 0);
    c.make(root);
    DiskTier cache(root);
    CHECK_FALSE(cache.on_disk());
    CHECK_THAT(cache.unavailable_reason(), Contains(c.reason));
    CHECK_FALSE(cache.put(kKey, kSaxpy, bytes_of("x"), PutReason::Compiled));
    CHECK(fs::is_empty(outside.path()));
  }
  // A root that is a file, and one beneath a file: refused, nothing made.
  TempDir dir;
  jitk_test::write_file(dir.path() / "file", "x");
  CHECK_THAT(DiskTier(dir.path() / "file").unavailable_reason(), Contains("is not a folder"));
  CHECK_THAT(DiskTier(dir.path() / "file" / "jitk").unavailable_reason(), Contains("is not a folder"));
  CHECK_THAT(DiskTier(dir.path() / "file" / "sub" / "jitk").unavailable_reason(),
             Contains("cannot create " + (dir.path() / "file" / "sub" / "jitk").string() + ": Not a directory"));
  CHECK(jitk_test::read_file(dir.path() / "file") == "x");
  // A root reached through a symlinked folder of ours is used (its real folders are checked).
  REQUIRE(::mkdir((dir.path() / "real").c_str(), 0700) == 0);
  fs::create_directory_symlink(dir.path() / "real", dir.path() / "link");
  {
    DiskTier cache(dir.path() / "link" / "jitk");
    REQUIRE(cache.on_disk());
    REQUIRE(cache.put(kKey, kSaxpy, bytes_of("through"), PutReason::Compiled));
  }
  DiskTier again(dir.path() / "link" / "jitk");
  auto back = again.get(kKey, kSaxpy, Count::HitsAndMisses);
  REQUIRE(back);
  CHECK(text_of(*back) == "through");
  CHECK(present(dir.path() / "real" / "jitk" / "blobs"));
}

TEST_CASE("a root, or a folder beneath it, of another user is refused", "[cache][trust]") {
  if (::geteuid() != 0) {
    WARN("SKIPPED: needs root to give a folder to another user");
    return;
  }
  TempDir dir;
  const auto root = dir.path() / "jitk";
  REQUIRE(::mkdir(root.c_str(), 0700) == 0);
  REQUIRE(::chown(root.c_str(), 4242, 4242) == 0);
  ScopedEnv trust("JITK_CACHE_TRUST_SHARED", nullptr);
  {
    DiskTier cache(root);
    CHECK_THAT(cache.unavailable_reason(), Contains("belongs to another user"));
    CHECK(fs::is_empty(root));
  }
  REQUIRE(::chown(root.c_str(), 0, 0) == 0);
  DiskTier cache(root);
  REQUIRE(cache.put(kKey, kSaxpy, bytes_of("mine"), PutReason::Compiled));
  auto blob = BlobStore(root).path_for(kKey);
  REQUIRE(::chown(blob.parent_path().c_str(), 4242, 4242) == 0);
  CHECK_FALSE(cache.get(kKey, kSaxpy, Count::HitsAndMisses));  // their folder: nothing in it is loaded
  REQUIRE(::chown(blob.parent_path().c_str(), 0, 0) == 0);
  REQUIRE(::chown(blob.c_str(), 4242, 4242) == 0);
  CHECK_FALSE(BlobStore(root).read(kKey).status == BlobRead::Status::Ok);
}

TEST_CASE("a FIFO where a blob should be is refused without blocking, and the kernel is rebuilt", "[cache][trust]") {
  TempDir dir;
  const auto root = dir.path() / "jitk";
  {
    DiskTier cache(root);
    REQUIRE(cache.put(kKey, kSaxpy, bytes_of("genuine"), PutReason::Compiled));
  }
  const auto blob = BlobStore(root).path_for(kKey);
  REQUIRE(::unlink(blob.c_str()) == 0);
  REQUIRE(::mkfifo(blob.c_str(), 0600) == 0);
  CHECK(finishes_within(20, [&] {
    DiskTier cache(root);
    auto problems = cache.verify(false);
    if (problems.size() != 1 || problems[0].what.find("FIFO") == std::string::npos) return false;
    if (cache.get(kKey, kSaxpy, Count::HitsAndMisses)) return false;  // not loaded, dropped
    return cache.put(kKey, kSaxpy, bytes_of("rebuilt"), PutReason::Compiled) &&
           text_of(*cache.get(kKey, kSaxpy, Count::HitsAndMisses)) == "rebuilt";
  }));
}

TEST_CASE("a FIFO where index.db or a lock file should be: a clear reason and memory, never a hang", "[cache][trust]") {
  TempDir dir;
  const auto root = dir.path() / "jitk";
  { DiskTier cache(root); }
  REQUIRE(::mkfifo((root / "index.db").c_str(), 0600) == 0);
  CHECK(finishes_within(20, [&] {
    DiskTier cache(root);
    return !cache.put(kKey, kSaxpy, bytes_of("x"), PutReason::Compiled) &&
           cache.unavailable_reason().find("index.db is a FIFO") != std::string::npos;
  }));
  REQUIRE(::unlink((root / "index.db").c_str()) == 0);
  REQUIRE(::mkfifo((root / "locks" / (kKey + ".lock")).c_str(), 0600) == 0);
  REQUIRE(::mkfifo((root / "locks" / "maintenance.lock").c_str(), 0600) == 0);
  CHECK(finishes_within(20, [&] {
    DiskTier cache(root);
    return cache.lock(kKey) == nullptr;
  }));
}

TEST_CASE("an index locked by another process past the timeout is waited for once, then the process keeps kernels in memory",
          "[cache][trust][busy]") {
  TempDir dir;
  const auto root = dir.path() / "jitk";
  ScopedEnv timeout("JITK_CACHE_LOCK_TIMEOUT", "0.5");
  DiskTier cache(root);
  REQUIRE(cache.put(kKey, kSaxpy, bytes_of("first"), PutReason::Compiled));
  // Another connection holds the write lock (in WAL mode BEGIN IMMEDIATE keeps every writer out).
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open((root / "index.db").c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  auto t0 = std::chrono::steady_clock::now();
  int kept = 0;
  for (int i = 0; i < 3; ++i) kept += cache.put(std::string(31, 'c') + char('0' + i), kSaxpy, bytes_of("k"), PutReason::Compiled);
  const double waited = seconds_since(t0);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  CHECK(kept == 0);
  CHECK(waited >= 0.4);
  CHECK(waited < 1.5);  // the timeout once, not once per kernel
  CHECK_THAT(cache.unavailable_reason(), Contains("locked by another process"));
}

TEST_CASE("a key lock held by another process past the timeout is waited for once", "[cache][trust][busy]") {
  TempDir dir;
  const auto root = dir.path() / "jitk";
  ScopedEnv timeout("JITK_CACHE_LOCK_TIMEOUT", "0.3");
  DiskTier cache(root);
  REQUIRE(cache.on_disk());
  int held = ::open((root / "locks" / (kKey + ".lock")).c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(held >= 0);
  REQUIRE(::flock(held, LOCK_EX) == 0);  // another open file description: excluded like another process
  auto t0 = std::chrono::steady_clock::now();
  CHECK(cache.lock(kKey) == nullptr);
  CHECK(cache.lock(kKey) == nullptr);
  CHECK_FALSE(cache.put(kOther, kSaxpy, bytes_of("x"), PutReason::Compiled));
  const double waited = seconds_since(t0);
  ::close(held);
  CHECK(waited >= 0.25);
  CHECK(waited < 1.0);
}

TEST_CASE("JITK_CACHE_LOCK_TIMEOUT takes seconds, and anything else keeps the default", "[cache][trust]") {
  {
    ScopedEnv t("JITK_CACHE_LOCK_TIMEOUT", "2.5");
    CHECK(cache_lock_timeout().count() == 2500);
  }
  for (const char* bad : {"-1", "1e9", "5s", " 5", "nan", "0x10", ""}) {
    ScopedEnv t("JITK_CACHE_LOCK_TIMEOUT", bad);
    CHECK(cache_lock_timeout().count() == 60000);
  }
}

TEST_CASE("a blob bound to another kernel, or copied under another key, is not loaded", "[cache][trust][binding]") {
  TempDir dir;
  DiskTier cache(dir.path() / "jitk");
  REQUIRE(cache.put(kKey, kSaxpy, bytes_of("saxpy code"), PutReason::Compiled));
  CHECK_FALSE(cache.get(kKey, kSoftmax, Count::HitsAndMisses));  // same key asked for another kernel
  REQUIRE(cache.put(kKey, kSaxpy, bytes_of("saxpy code"), PutReason::Compiled));
  const auto from = BlobStore(dir.path() / "jitk").path_for(kKey), to = BlobStore(dir.path() / "jitk").path_for(kOther);
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to);
  CHECK_FALSE(cache.get(kOther, kSaxpy, Count::HitsAndMisses));
  auto problems = cache.verify(false);
  CHECK(problems.empty());  // the copy was dropped when it failed to load
  REQUIRE(cache.get(kKey, kSaxpy, Count::HitsAndMisses));
}

TEST_CASE("a blob of the old format is a miss, rebuilt, not an error", "[cache][trust][binding]") {
  TempDir dir;
  const auto root = dir.path() / "jitk";
  DiskTier cache(root);
  REQUIRE(cache.on_disk());
  // Format 1: magic, u32 1, u32 88, u64 size, key, checksum, payload.
  std::string old = "JITKBLOB";
  const std::uint32_t format = 1, header = 88;
  const std::uint64_t size = 3;
  old.append(reinterpret_cast<const char*>(&format), 4).append(reinterpret_cast<const char*>(&header), 4);
  old.append(reinterpret_cast<const char*>(&size), 8).append(kKey).append(checksum_hex("old", 3)).append("old");
  const auto path = BlobStore(root).path_for(kKey);
  fs::create_directories(path.parent_path());
  jitk_test::write_file(path, old);
  CHECK(BlobStore(root).read(kKey).status == BlobRead::Status::Outdated);
  CHECK_FALSE(cache.get(kKey, kSaxpy, Count::HitsAndMisses));
  REQUIRE(cache.put(kKey, kSaxpy, bytes_of("new"), PutReason::Compiled));
  CHECK(text_of(*cache.get(kKey, kSaxpy, Count::HitsAndMisses)) == "new");
}

TEST_CASE("verify --fix rebuilds lost index rows from the blobs' headers", "[cache][trust][binding]") {
  TempDir dir;
  const auto root = dir.path() / "jitk";
  {
    DiskTier cache(root);
    REQUIRE(cache.put(kKey, kSaxpy, bytes_of("a"), PutReason::Compiled));
    REQUIRE(cache.put(kOther, kSoftmax, bytes_of("bb"), PutReason::Compiled));
  }
  { CHECK(SqliteIndex(root / "index.db").remove_all() == 2); }
  DiskTier cache(root);
  REQUIRE(cache.rows().empty());
  auto fixed = cache.verify(true);
  CHECK(fixed.size() == 2);
  auto rows = cache.rows();
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].kernel == "saxpy");
  CHECK(rows[0].params == "dtype=f32");
  CHECK(rows[0].implementation == "cpu");
  CHECK(rows[1].kernel == "softmax");
  CHECK(rows[1].size_bytes == 2);
  CHECK(cache.verify(false).empty());
}

TEST_CASE("every changed byte of a blob header is caught", "[cache][trust][binding]") {
  const std::string payload = "payload bytes";
  const std::string blob = encode_blob_header(kKey, kSaxpy, payload) + payload;
  BlobHeader h;
  REQUIRE(check_blob_binding(blob, kKey, &h).empty());
  CHECK(binding_mismatch(h, kKey, &kSaxpy).empty());
  CHECK_FALSE(check_blob_binding(blob, kOther, nullptr).empty());
  for (std::size_t i = 0; i < h.header_size; ++i) {
    std::string changed = blob;
    changed[i] ^= 0x20;
    INFO("byte " << i);
    CHECK_FALSE(check_blob_binding(changed, kKey, nullptr).empty());
  }
  for (std::size_t n = 0; n < blob.size(); ++n) CHECK_FALSE(check_blob_binding(blob.substr(0, n), kKey, nullptr).empty());
}

TEST_CASE("autotuning decisions asked of an index busy past the timeout wait once, then the cache is in memory", "[cache][trust][busy]") {
  TempDir dir;
  ScopedEnv timeout("JITK_CACHE_LOCK_TIMEOUT", "0.3");
  auto disk = std::make_shared<DiskTier>(dir.path() / "jitk");
  TuningStore tuning([disk]() -> SqliteIndex& { return disk->index(); },
                     [disk](const std::string& why) { disk->give_up_busy(why); });
  TuningRow row{"gemm", "dtype=f32", "m<=64", "cpu x86-64", "tile=64", 3, 1.0, 2.0, 30.0, 0};
  REQUIRE(tuning.store(row));
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open((dir.path() / "jitk" / "index.db").c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  auto t0 = std::chrono::steady_clock::now();
  row.shape_class = "m<=128";
  CHECK_FALSE(tuning.store(row));
  CHECK_FALSE(tuning.store(row));
  CHECK_FALSE(tuning.find("gemm", "dtype=f32", "m<=64", "cpu x86-64"));
  const double waited = seconds_since(t0);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  CHECK(waited >= 0.25);
  CHECK(waited < 1.0);
  CHECK_FALSE(disk->on_disk());
}
