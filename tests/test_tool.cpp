// The jitk tool: info, ls, stats, clear, verify and warm, run as a user would.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <set>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "cache/blob_format.hpp"
#include "jit/registry.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using jitk_test::run;
using jitk_test::TempDir;

namespace {
using jitk_test::kClient;
using jitk_test::kTool;
const std::string kWarmToml = std::string(JITK_SOURCE_DIR) + "/examples/warm.toml";

// JITK_CACHE_DIR for a root that cannot be made: its parent is a regular file.
std::string unusable_cache_env(const TempDir& dir) {
  jitk_test::write_file(dir.path() / "file", "not a folder");
  return "JITK_CACHE_DIR='" + (dir.path() / "file" / "jitk").string() + "'";
}

nlohmann::json json_of(const std::string& command, const std::string& env) {
  auto r = run(kTool + " " + command, env);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}
}  // namespace

TEST_CASE("jitk info names each backend and whether it is available", "[tool]") {
  TempDir cache;
  auto r = run(kTool + " info", jitk_test::cache_env(cache));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("cpu: available") && Contains("cuda: unavailable") && Contains(cache.str()));
}

TEST_CASE("jitk ls --json and stats --json describe what the cache holds", "[tool]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " rms_norm softmax", env).exit_code == 0);
  auto rows = json_of("ls --json", env);
  REQUIRE(rows.size() == 2);
  for (const auto& row : rows) {
    for (const char* field : {"kernel", "params", "backend", "arch", "size_bytes", "hits", "last_used"})
      CHECK(row.contains(field));
    CHECK(row["backend"] == "cpu");
    CHECK(row["size_bytes"].get<int>() > 0);
  }
  auto s = json_of("stats --json", env);
  CHECK(s["entries"] == 2);
  CHECK(s["compiles"] == 2);
  CHECK(s["bytes"].get<int>() > 0);
  for (const char* field : {"hits", "misses"}) CHECK(s.contains(field));
}

TEST_CASE("jitk clear leaves no entries and no blobs", "[tool]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient, env).exit_code == 0);
  auto r = run(kTool + " clear", env);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("cleared 4 artifacts"));
  CHECK(json_of("stats --json", env)["entries"] == 0);
  CHECK(jitk_test::blob_files(cache.path()).empty());
}

TEST_CASE("jitk verify finds a damaged blob and --fix repairs it", "[tool]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy softmax", env).exit_code == 0);
  CHECK(run(kTool + " verify", env).exit_code == 0);
  auto blobs = jitk_test::blob_files(cache.path());
  REQUIRE(blobs.size() == 2);
  auto bytes = jitk_test::read_file(blobs[0]);
  bytes[bytes.size() - 1] ^= 1;
  jitk_test::write_file(blobs[0], bytes);
  std::filesystem::create_directories(cache.path() / "blobs" / "aa");
  jitk_test::write_file(cache.path() / "blobs" / "aa" / std::string(32, 'a'), "orphan");  // a blob with no row
  auto found = run(kTool + " verify", env);
  CHECK(found.exit_code == 1);
  CHECK_THAT(found.output, Contains("checksum") && Contains("blob without index row") && Contains("2 problem(s)"));
  CHECK(run(kTool + " verify --fix", env).exit_code == 0);
  CHECK(run(kTool + " verify", env).exit_code == 0);
  CHECK(json_of("stats --json", env)["entries"] == 1);
}

TEST_CASE("jitk verify reports a FIFO in a blob's place without blocking, and --fix rebuilds lost rows from blob headers", "[tool]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy softmax", env).exit_code == 0);
  auto blobs = jitk_test::blob_files(cache.path());
  REQUIRE(blobs.size() == 2);
  std::filesystem::remove(blobs[0]);
  REQUIRE(::mkfifo(blobs[0].c_str(), 0600) == 0);
  auto found = run("timeout 60 " + kTool + " verify", env);
  INFO(found.output);
  CHECK(found.exit_code == 1);
  CHECK_THAT(found.output, Contains("is a FIFO, not a regular file") && Contains("1 problem(s)"));
  CHECK(run("timeout 60 " + kTool + " verify --fix", env).exit_code == 0);
  // index.db lost: the blob's header says what it is, and --fix puts its row back.
  for (const char* f : {"index.db", "index.db-wal", "index.db-shm"}) std::filesystem::remove(cache.path() / f);
  CHECK(json_of("stats --json", env)["entries"] == 0);
  auto fixed = run(kTool + " verify --fix", env);
  INFO(fixed.output);
  CHECK_THAT(fixed.output, Contains("row rebuilt from its header (softmax") || Contains("row rebuilt from its header (saxpy"));
  CHECK(json_of("stats --json", env)["entries"] == 1);
  CHECK(run(kTool + " verify", env).exit_code == 0);
}

TEST_CASE("jitk warm compiles every listed specialization once and a second warm compiles nothing", "[tool][warm]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  auto first = run(kTool + " warm -j 2 '" + kWarmToml + "'", env);
  INFO(first.output);
  CHECK(first.exit_code == 0);
  CHECK_THAT(first.output, Contains("9 kernels: 9 compiled, 0 already cached, 0 failed"));
  auto second = run(kTool + " warm '" + kWarmToml + "'", env);
  CHECK_THAT(second.output, Contains("9 kernels: 0 compiled, 9 already cached, 0 failed"));
  CHECK(json_of("stats --json", env)["compiles"] == 9);
  // the quickstart's kernels are now on disk: a program compiles nothing
  auto client = run(kClient + " saxpy", env);
  CHECK_THAT(client.output, Contains("saxpy disk ok"));
}

TEST_CASE("a bad manifest is an error naming the entry and the problem, and nothing is compiled", "[tool][warm]") {
  TempDir cache, dir;
  auto env = jitk_test::cache_env(cache);
  struct Case {
    const char* toml;
    const char* expect;
  } cases[] = {
      {"[[kernel]]\nname = \"softmax\"\nparams = { dtype = \"f32\", hidden = 0 }\n", "kernel #1 (softmax)"},
      {"[[kernel]]\nname = \"saxpy\"\nparams = { dtype = \"f32\" }\n[[kernel]]\nname = \"nope\"\n",
       "kernel #2 (nope): unknown kernel"},
      {"[[kernel]]\nname = \"rms_norm\"\n", "kernel #1 (rms_norm): rms_norm: missing parameter 'hidden'"},
      {"[[kernel]]\nname = \"saxpy\"\nparams = { dtype = [\"f32\", \"f17\"] }\n", "'f17' is not supported"},
      {"[[kernel]\nname = \"saxpy\"\n", "syntax error at line 1"},
      {"[[kernel]]\nname = \"saxpy\"\ntarget = \"gpu\"\n", "unknown target 'gpu'"},
      {"[[kernel]]\nnmae = \"saxpy\"\n", "unknown key 'nmae'"},
      {"[[kernel]]\nname = \"softmax\"\nparams = { dtype = \"f32\", hidden = 1.5 }\n", "must be an integer"},
      {"[[kernel]]\nname = \"softmax\"\nparams = { dtype = \"f32\", hidden = 64 }\ntune = [[1, 2, 3]]\n", "softmax cannot be tuned"},
      {"[[kernel]]\nname = \"gemm\"\nparams = { dtype = \"f32\", a_layout = \"row\", b_layout = \"row\", tile_m = 0, tile_n = 0, "
       "tile_k = 0, stages = 0 }\ntune = [[64, 64]]\n",
       "tune: each shape is [m, n, k]: gemm: a shape is three positive numbers"},
      {"[[kernel]]\nname = \"gemm\"\nparams = { dtype = \"f32\", a_layout = \"row\", b_layout = \"row\", tile_m = 0, tile_n = 0, "
       "tile_k = 0, stages = 0 }\ntune = [[64, \"x\", 64]]\n",
       "not a list of integers"},
  };
  for (const auto& c : cases) {
    jitk_test::write_file(dir.path() / "bad.toml", c.toml);
    auto r = run(kTool + " warm '" + (dir.path() / "bad.toml").string() + "'", env);
    INFO(c.toml << "\n--- output:\n" << r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Contains(c.expect));
  }
  CHECK(json_of("stats --json", env)["compiles"] == 0);
}

TEST_CASE("jitk clear --kernel removes one kernel's artifacts and prune evicts by size and age", "[tool][eviction]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient, env).exit_code == 0);
  auto one = run(kTool + " clear --kernel softmax", env);
  CHECK_THAT(one.output, Contains("cleared 1 artifacts of softmax"));
  CHECK(json_of("stats --json", env)["entries"] == 3);
  CHECK(run(kTool + " prune --older-than 30d", env).output.find("pruned 0 artifacts") != std::string::npos);
  auto pruned = run(kTool + " prune --max-size 1", env);  // 1 byte: everything goes
  CHECK_THAT(pruned.output, Contains("pruned 3 artifacts"));
  CHECK(json_of("stats --json", env)["entries"] == 0);
  CHECK(jitk_test::blob_files(cache.path()).empty());
  auto bad = run(kTool + " prune --max-size lots", env);
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.output, Contains("not a size"));
}

TEST_CASE("JITK_CACHE_MAX_SIZE keeps the cache under its limit as kernels are added", "[tool][eviction]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy", env).exit_code == 0);
  auto one_blob = json_of("stats --json", env)["bytes"].get<std::int64_t>();
  // room for about two artifacts: the four kernels cannot all stay
  auto limited = env + " JITK_CACHE_MAX_SIZE=" + std::to_string(one_blob * 5 / 2);
  REQUIRE(run(kClient, limited).exit_code == 0);
  auto s = json_of("stats --json", env);
  CHECK(s["entries"].get<int>() < 4);
  CHECK(s["bytes"].get<std::int64_t>() <= one_blob * 5 / 2 + 4096);  // index rows count payload bytes, files add a header
}

TEST_CASE("jitk warm --tune tunes a manifest's shapes once, jitk ls --tuning shows them, the next warm reuses them",
          "[tool][warm][tuning]") {
  TempDir cache, dir;
  auto env = jitk_test::cache_env(cache);
  jitk_test::write_file(dir.path() / "tune.toml",
                        "[[kernel]]\nname = \"gemm\"\ntarget = \"cpu\"\n"
                        "params = { dtype = \"f32\", a_layout = \"row\", b_layout = [\"row\", \"col\"], tile_m = 0, tile_n = 0, tile_k = 0, stages = 0 }\n"
                        "tune = [[64, 64, 64], [100, 30, 70]]\n");
  const std::string manifest = "'" + (dir.path() / "tune.toml").string() + "'";
  auto plain = run(kTool + " warm " + manifest, env);
  INFO(plain.output);
  CHECK(plain.exit_code == 0);
  CHECK_THAT(plain.output, Contains("4 shapes to tune in the manifest; `jitk warm --tune` tunes them"));
  CHECK(json_of("ls --tuning --json", env).empty());  // a plain warm times nothing

  auto first = run(kTool + " warm --tune " + manifest, env);
  INFO(first.output);
  CHECK(first.exit_code == 0);
  CHECK_THAT(first.output, Contains("tune: 4 tuned, 0 reused from the cache index, 0 failed") &&
                               Contains("for 100x30x70 (m<=128,n<=32,k<=128)"));
  const auto decisions = json_of("ls --tuning --json", env);
  CHECK(decisions.size() == 4);
  auto second = run(kTool + " warm --tune " + manifest, env);
  INFO(second.output);
  CHECK_THAT(second.output, Contains("tune: 0 tuned, 4 reused from the cache index, 0 failed"));
  CHECK(json_of("ls --tuning --json", env).size() == 4);
}

TEST_CASE("jitk warm into a cache that cannot be written says nothing was kept and fails", "[tool][warm]") {
  TempDir dir;
  auto r = run(kTool + " warm '" + kWarmToml + "'", unusable_cache_env(dir));
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Contains("nothing was kept") && Contains("memory only"));
}

TEST_CASE("jitk info says in one line when the cache is memory only, and why", "[tool]") {
  TempDir dir;
  auto r = run(kTool + " info", unusable_cache_env(dir));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(jitk_test::count_lines_with(r.output, "cache: ") == 1);  // one line, not a second "unusable" one
  CHECK_THAT(r.output, Contains("cache: memory only: cannot create"));
}

TEST_CASE("settings that cannot be honoured are named in one warning, never silently replaced", "[tool][env]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  SECTION("an unknown JITK_LOG_LEVEL names the value and the levels there are") {
    auto r = run(kClient + " saxpy softmax", env + " JITK_LOG_LEVEL=verbose");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(jitk_test::count_lines_with(r.output, "JITK_LOG_LEVEL='verbose' is not a level") == 1);
    CHECK_THAT(r.output, Contains("trace, debug, info, warn, error, critical, off"));
  }
  SECTION("a level in upper case is a level") {
    auto r = run(kClient + " saxpy", env + " JITK_LOG_LEVEL=INFO");
    INFO(r.output);
    CHECK_THAT(r.output, Contains("[jitk I] compiled saxpy"));
    CHECK(r.output.find("is not a level") == std::string::npos);
  }
  SECTION("a JITK_NUM_THREADS that is not a thread count is named once") {
    auto r = run(kClient + " saxpy softmax", env + " JITK_NUM_THREADS=lots");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(jitk_test::count_lines_with(r.output, "JITK_NUM_THREADS='lots' is not a thread count") == 1);
  }
  SECTION("a JITK_KERNEL_DIR that is not a folder is named once") {
    TempDir dir;
    jitk_test::write_file(dir.path() / "file", "not a folder");
    auto r = run(kClient + " saxpy softmax", env + " JITK_KERNEL_DIR='" + (dir.path() / "file").string() + "'");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(jitk_test::count_lines_with(r.output, "is not a folder; using the kernel text built into jitk") == 1);
  }
  SECTION("a JITK_KERNEL_DIR without a file says at INFO, once per file, that the built-in copy is used") {
    TempDir empty;
    auto r = run(kClient + " rms_norm softmax", env + " JITK_LOG_LEVEL=info JITK_KERNEL_DIR='" + empty.str() + "'");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(jitk_test::count_lines_with(r.output, "has no rms_norm/rms_norm.cpp; using the copy built into jitk") == 1);
    CHECK(jitk_test::count_lines_with(r.output, "has no jitk_cpu.h; using the copy built into jitk") == 1);  // both kernels read it
    CHECK(r.output.find("[jitk W]") == std::string::npos);
  }
}

TEST_CASE("jitk warm -j 0 is refused with a short message", "[tool][warm]") {
  TempDir cache;
  auto r = run(kTool + " warm -j 0 '" + kWarmToml + "'", jitk_test::cache_env(cache));
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Contains("--jobs") && Contains("not in range"));
}

TEST_CASE("jitk ls shows each artifact's implementation, and prune --stale removes versions no longer shipped", "[tool]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " rms_norm softmax saxpy silu_and_mul", env).exit_code == 0);
  auto ls = run(kTool + " ls", env);
  CHECK(jitk_test::count_lines_with(ls.output, " cpu v1 ") == 4);
  for (const auto& row : json_of("ls --json", env)) {
    CHECK(row["implementation"] == "cpu");
    CHECK(row["implementation_version"] == 1);
  }
  {
    // Age the rows as an older jitk or a program of its own would have left them.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((cache.path() / "index.db").c_str(), &db) == SQLITE_OK);
    for (const char* sql : {"UPDATE artifacts SET implementation_version = 0 WHERE kernel = 'rms_norm'",  // older version
                            "UPDATE artifacts SET implementation = '' WHERE kernel = 'softmax'",  // format 1
                            "UPDATE artifacts SET implementation = 'my-saxpy' WHERE kernel = 'saxpy'"})  // a user's
      CHECK(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    // Their blobs' headers name what they were made as, too.
    for (const auto& blob : jitk_test::blob_files(cache.path())) {
      const std::string bytes = jitk_test::read_file(blob);
      jit::detail::BlobHeader h;
      REQUIRE(jit::detail::check_blob_binding(bytes, blob.filename().string(), &h).empty());
      if (h.meta.kernel == "rms_norm") h.meta.implementation_version = 0;
      if (h.meta.kernel == "softmax") h.meta.implementation = "";
      if (h.meta.kernel == "saxpy") h.meta.implementation = "my-saxpy";
      const std::string code = bytes.substr(h.header_size);
      jitk_test::write_file(blob, jit::detail::encode_blob_header(h.key, h.meta, code) + code);
    }
  }
  CHECK_THAT(run(kTool + " ls", env).output, Contains(" - ") && Contains("my-saxpy v1"));
  CHECK(run(kTool + " prune --stale --older-than 1x", env).exit_code == 2);  // removes nothing: see the next line
  auto r = run(kTool + " prune --stale", env);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("pruned 2 stale artifacts") && Contains("kept 1 artifacts") && Contains("saxpy/my-saxpy"));
  auto rows = json_of("ls --json", env);
  std::set<std::string> left;
  for (const auto& row : rows) left.insert(row["kernel"].get<std::string>());
  CHECK(left == std::set<std::string>{"saxpy", "silu_and_mul"});
  CHECK(jitk_test::blob_files(cache.path()).size() == 2);
  CHECK(run(kTool + " verify", env).exit_code == 0);
  // what is current stays through a second prune
  CHECK_THAT(run(kTool + " prune --stale", env).output, Contains("pruned 0 stale artifacts"));
}

TEST_CASE("jitk info --kernels lists every implementation and which one each target gets, and why", "[tool]") {
  TempDir cache;
  auto r = run(kTool + " info --kernels --target cpu --target cuda:sm_90 --target cuda:sm_80 --target cuda:sm_60",
               jitk_test::cache_env(cache));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("rms_norm: ") && Contains("cuda-sm90 v2: cuda, capability [90, 90], priority 1") &&
                           Contains("cuda v1: cuda, capability [70, max], priority 0") && Contains("generic (the fallback)"));
  CHECK_THAT(r.output, Contains("on cpu (dtype=f32,hidden=4096): cpu v1") &&
                           Contains("on cuda:sm_90 (dtype=bf16,hidden=4096): cuda-sm90 v2 (range [90, 90]") &&
                           Contains("on cuda:sm_80 (dtype=bf16,hidden=4096): cuda v1") &&
                           Contains("on cuda:sm_60 (dtype=bf16,hidden=4096): none:"));
  CHECK(jitk_test::count_lines_with(r.output, "  on cpu ") == jit::registered_kernels().size());  // one line per kernel and target
  CHECK(run(kTool + " info --target cuda:sm_90", jitk_test::cache_env(cache)).exit_code == 2);
}
