// The warm path's parts: the request key (what it holds and when there is none), the remembered key,
// memos kept through the cache root's handle, and the build id they rest on.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "cache/cache_root.hpp"
#include "cache/disk_tier.hpp"
#include "cache/memo_folder.hpp"
#include "jit/kernel_catalog.hpp"
#include "runtime/request_key.hpp"
#include "support/build_identity.hpp"
#include "support/memo_store.hpp"
#include "test_support.hpp"

using jit::detail::CacheRoot;
using jit::detail::MemoFolder;
using jitk_test::TempDir;
namespace fs = std::filesystem;

namespace {

class FakeCompiler final : public jit::detail::Compiler {
 public:
  std::string id_ = "fake 1.0", arch_ = "sm_90", target_ = "nvptx64 sm_90";
  std::vector<std::string> options_ = {"-O3"};
  std::string id() const override { return id_; }
  std::string arch() const override { return arch_; }
  std::string target_fingerprint() const override { return target_; }
  std::vector<std::string> options() const override { return options_; }
  jit::detail::CompiledArtifact compile(const jit::detail::SourceUnit&) const override { return {}; }
};

struct Request {
  jit::detail::SourceUnit described;
  jit::detail::UnitTexts texts;
  FakeCompiler compiler;
  std::string external = "abc (3 toolkit headers)";
  bool mapped = false;
  std::string key() const {
    return jit::detail::request_key(described, texts, jit::Backend::Cuda, compiler, external, mapped);
  }
};

Request rms_norm_request() {
  Request r;
  r.described.kernel = "rms_norm";
  r.described.implementation = jit::detail::find_kernel("rms_norm").implementations.front().name;
  r.described.implementation_version = 1;
  r.described.params_text = "dtype=f32,hidden=4096";
  r.texts.text = {"rms_norm/rms_norm.cu", "kernel text"};
  r.texts.headers = {{"jitk_gpu.h", "header text"}};
  return r;
}

}  // namespace

TEST_CASE("this build of jitk has a build id, read from its own ELF notes", "[warm]") {
  const std::string& id = jit::detail::library_build_id();
  CHECK(id.size() >= 16);
  CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(&jit::detail::library_build_id() == &id);
}

TEST_CASE("the request key changes with every input the cache key hashes", "[warm]") {
  const Request base = rms_norm_request();
  const std::string k = base.key();
  REQUIRE(k.size() == 32);
  CHECK(rms_norm_request().key() == k);  // the same request, the same key
  std::vector<std::function<void(Request&)>> changes = {
      [](Request& r) { r.described.params_text = "dtype=f32,hidden=2048"; },
      [](Request& r) { r.described.implementation_version = 2; },
      [](Request& r) { r.texts.text.text += " "; },                 // a JITK_KERNEL_DIR edit
      [](Request& r) { r.texts.text.name = "other.cu"; },
      [](Request& r) { r.texts.headers[0].text = "header text 2"; },
      [](Request& r) { r.texts.headers.push_back({"jitk_sm90.h", ""}); },
      [](Request& r) { r.external = "abd (3 toolkit headers)"; },  // a toolkit header changed
      [](Request& r) { r.compiler.id_ = "fake 1.1"; },
      [](Request& r) { r.compiler.arch_ = "sm_90a"; },
      [](Request& r) { r.compiler.target_ = "nvptx64 compute_90"; },
      [](Request& r) { r.compiler.options_.push_back("-G"); },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    Request r = rms_norm_request();
    changes[i](r);
    INFO("change " << i);
    CHECK(r.key() != k);
    CHECK(r.key().size() == 32);
  }
}

TEST_CASE("a request a user's code renders has no request key: it is always resolved whole", "[warm]") {
  Request r = rms_norm_request();
  r.mapped = true;  // a scope's KernelMapping may hold any implementation under any name
  CHECK(r.key().empty());
  Request added = rms_norm_request();
  added.described.implementation = "user-added";
  CHECK(added.key().empty());
  // An implementation a user adds to a shipped kernel is not jitk's own, under any name.
  jit::Implementation mine = jit::detail::find_kernel("saxpy").implementations.front();
  mine.name = "users-saxpy-warm-test";
  mine.text = "// a user's text\n";
  jit::register_implementation("saxpy", mine);
  CHECK_FALSE(jit::detail::is_shipped_implementation("saxpy", "users-saxpy-warm-test"));
  CHECK(jit::detail::is_shipped_implementation("saxpy", jit::detail::find_kernel("saxpy").implementations.front().name));
  CHECK_FALSE(jit::detail::is_shipped_implementation("no_such_kernel", "cpu"));
}

TEST_CASE("a remembered key is read back only when whole and for the request that wrote it", "[warm]") {
  TempDir dir;
  const MemoFolder memos(std::make_shared<CacheRoot>(dir.path()), "keys", true);
  const std::string request(32, 'a'), other(32, 'b'), key = "0123456789abcdef0123456789abcdef";
  CHECK_FALSE(jit::detail::remembered_key(memos, request));
  jit::detail::remember_key(memos, request, key);
  CHECK(jit::detail::remembered_key(memos, request) == key);
  const auto file = dir.path() / "keys" / request;
  const std::string good = jitk_test::read_file(file);
  fs::copy_file(file, dir.path() / "keys" / other);  // another request's name: not its key
  CHECK_FALSE(jit::detail::remembered_key(memos, other));
  std::string flipped = good;
  flipped[flipped.find("key ") + 4] = 'f';
  for (const std::string& bytes : {std::string(), good.substr(0, 40), good + "\n", flipped, std::string(5000, 'x')}) {
    jitk_test::write_file(file, bytes);
    CHECK_FALSE(jit::detail::remembered_key(memos, request));
  }
  jit::detail::remember_key(memos, request, "not a key");  // never written
  CHECK_FALSE(jit::detail::remembered_key(memos, request));
}

TEST_CASE("memos are read and written through the root's handle, never through a symlink, FIFO or another folder", "[warm][hostile]") {
  TempDir dir, elsewhere;
  auto root = std::make_shared<CacheRoot>(dir.path());
  const MemoFolder memos(root, "m", true);
  CHECK(memos.write("one", "text\n"));
  CHECK(memos.read("one", 100) == std::string("text\n"));
  CHECK_FALSE(memos.read("one", 4));  // larger than asked for
  for (const std::string& bad : std::vector<std::string>{"", ".hidden", "a/b", "..", std::string(300, 'n')}) {
    CHECK_FALSE(memos.write(bad, "x"));
    CHECK_FALSE(memos.read(bad, 100));
  }
  jitk_test::write_file(elsewhere.path() / "target", "secret\n");
  fs::create_symlink(elsewhere.path() / "target", dir.path() / "m" / "link");
  CHECK_FALSE(memos.read("link", 100));
  REQUIRE(::mkfifo((dir.path() / "m" / "fifo").c_str(), 0600) == 0);
  CHECK_FALSE(memos.read("fifo", 100));  // returns at once
  CHECK(memos.write("link", "new\n"));  // replaces the link itself
  CHECK(jitk_test::read_file(elsewhere.path() / "target") == "secret\n");
  // The memo folder replaced by a symlink to a folder of ours elsewhere: never followed.
  fs::rename(dir.path() / "m", elsewhere.path() / "m");
  fs::create_directory_symlink(elsewhere.path() / "m", dir.path() / "m");
  CHECK_FALSE(memos.read("one", 100));
  CHECK_FALSE(memos.write("two", "x"));
  CHECK_FALSE(fs::exists(elsewhere.path() / "m" / "two"));
  // A read-only memo folder (a read-only cache) is read, never written.
  const MemoFolder read_only(root, "r", false);
  CHECK_FALSE(read_only.write("x", "y"));
  CHECK_FALSE(fs::exists(dir.path() / "r"));
}

TEST_CASE("a sealed memo is accepted only whole", "[warm]") {
  const std::string sealed = jit::detail::seal_memo("a line\n");
  CHECK(jit::detail::unseal_memo(sealed) == std::string_view("a line\n"));
  CHECK_FALSE(jit::detail::unseal_memo(sealed.substr(1)));
  CHECK_FALSE(jit::detail::unseal_memo(sealed + "x"));
  CHECK_FALSE(jit::detail::unseal_memo("xxh3 \n"));
  CHECK_FALSE(jit::detail::unseal_memo(""));
  std::string flipped = sealed;
  flipped[0] = 'A';
  CHECK_FALSE(jit::detail::unseal_memo(flipped));
}

TEST_CASE("clearing the cache forgets the keys requests resolved to", "[warm]") {
  TempDir dir;
  jit::detail::DiskTier cache(dir.path());
  jit::detail::ArtifactMeta meta{"saxpy", "dtype=f32", "cpu", "x", "c", 1.0};
  const std::string key(32, 'c');
  REQUIRE(cache.put(key, meta, std::vector<char>(100, 'p'), jit::detail::PutReason::Compiled));
  auto memos = cache.memos("keys");
  REQUIRE(memos);
  jit::detail::remember_key(*memos, std::string(32, 'a'), key);
  REQUIRE(jit::detail::remembered_key(*memos, std::string(32, 'a')));
  cache.clear();
  CHECK_FALSE(jit::detail::remembered_key(*memos, std::string(32, 'a')));
  CHECK(fs::is_empty(dir.path() / "keys"));
}
