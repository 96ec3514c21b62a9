// jit::configure (the cache root, mode, remote and log level from code, over the environment), and
// what tuning leaves behind: JITK_RECORD's entries, the losers removed, manifests' defaults.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include "test_support.hpp"

using Catch::Matchers::Contains;
using jitk_test::run;
using jitk_test::TempDir;
namespace fs = std::filesystem;

namespace {
using jitk_test::kClient;
using jitk_test::kTool;
const std::string kProbe = JITK_CONFIGURE_PROBE;

// The probe with these options, under an environment with none of jitk's settings but `env`.
jitk_test::CommandResult probe(const std::string& options, const std::string& env = "") {
  return run("env -u JITK_CACHE_DIR -u JITK_CACHE_MODE -u JITK_LOG_LEVEL -u JITK_REMOTE -u JITK_REMOTE_MODE " + env + " " +
             kProbe + " " + options);
}

nlohmann::json ls(const std::string& env) { return nlohmann::json::parse(run(kTool + " ls --json", env).output); }

std::size_t rows_of(const nlohmann::json& rows, const std::string& kernel) {
  std::size_t n = 0;
  for (const auto& r : rows) n += r["kernel"] == kernel;
  return n;
}
}  // namespace

TEST_CASE("jit::configure's cache root wins over JITK_CACHE_DIR, and a get stores there", "[configure]") {
  TempDir env_dir, code_dir;
  const fs::path env_root = env_dir.path() / "from-env", code_root = code_dir.path() / "from-code";
  auto r = probe("--dir '" + code_root.string() + "' --get", "JITK_CACHE_DIR='" + env_root.string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("configure: ok") && Contains("cache_dir " + code_root.string() + " from jit::configure"));
  CHECK_THAT(r.output, Contains("saxpy compiled ok") && Contains("disk: on disk"));
  CHECK(jitk_test::blob_files(code_root).size() == 1);
  CHECK_FALSE(fs::exists(env_root));
  // A second process configured the same way loads it from disk.
  r = probe("--dir '" + code_root.string() + "' --get");
  CHECK_THAT(r.output, Contains("saxpy disk ok"));
}

TEST_CASE("without jit::configure the environment names the root, and each setting says where it came from", "[configure]") {
  TempDir dir;
  auto r = probe("--get", "JITK_CACHE_DIR='" + dir.str() + "' JITK_LOG_LEVEL=error");
  INFO(r.output);
  CHECK_THAT(r.output, Contains("cache_dir " + dir.str() + " from JITK_CACHE_DIR"));
  CHECK_THAT(r.output, Contains("cache_mode read-write from default") && Contains("log_level error from JITK_LOG_LEVEL"));
  CHECK(jitk_test::blob_files(dir.path()).size() == 1);
  // A relative cache_dir is made absolute when configure is called.
  r = run("cd '" + dir.str() + "' && " + kProbe + " --dir relative/cache");
  CHECK_THAT(r.output, Contains("cache_dir " + dir.str() + "/relative/cache from jit::configure"));
}

TEST_CASE("cache mode read-only uses a warmed cache and writes nothing, and memory-only touches no disk", "[configure]") {
  TempDir dir;
  const fs::path warmed = dir.path() / "warmed";
  REQUIRE(probe("--dir '" + warmed.string() + "' --get").exit_code == 0);
  REQUIRE(jitk_test::blob_files(warmed).size() == 1);
  const std::string index_before = jitk_test::read_file(warmed / "index.db");

  SECTION("read-only from code: found kernels load, nothing is written") {
    auto r = probe("--dir '" + warmed.string() + "' --mode read-only --get");
    INFO(r.output);
    CHECK_THAT(r.output, Contains("cache_mode read-only from jit::configure") && Contains("saxpy disk ok"));
    CHECK(jitk_test::read_file(warmed / "index.db") == index_before);
  }
  SECTION("read-only from JITK_CACHE_MODE, on a root that does not exist: nothing is created") {
    const fs::path absent = dir.path() / "absent";
    auto r = probe("--get", "JITK_CACHE_DIR='" + absent.string() + "' JITK_CACHE_MODE=read-only");
    INFO(r.output);
    CHECK_THAT(r.output, Contains("cache_mode read-only from JITK_CACHE_MODE") && Contains("saxpy compiled ok"));
    CHECK_FALSE(fs::exists(absent));
  }
  SECTION("memory-only: the root is neither created nor read, and no warning is given") {
    const fs::path absent = dir.path() / "absent";
    auto r = probe("--dir '" + absent.string() + "' --mode memory-only --get");
    INFO(r.output);
    CHECK_THAT(r.output, Contains("saxpy compiled ok") && Contains("disk: the cache is memory-only"));
    CHECK_FALSE(fs::exists(absent));
    CHECK_THAT(r.output, !Contains("[jitk W]"));
    r = probe("--dir '" + warmed.string() + "' --mode memory-only --get");
    CHECK_THAT(r.output, Contains("saxpy compiled ok"));  // the warmed copy is not read either
  }
  SECTION("code wins over JITK_CACHE_MODE") {
    auto r = probe("--dir '" + warmed.string() + "' --mode read-write --get", "JITK_CACHE_MODE=memory-only");
    CHECK_THAT(r.output, Contains("cache_mode read-write from jit::configure") && Contains("saxpy disk ok"));
  }
  SECTION("a JITK_CACHE_MODE that is not a mode is one warning, and nothing is written") {
    auto r = probe("--get", "JITK_CACHE_DIR='" + warmed.string() + "' JITK_CACHE_MODE=readonly");
    INFO(r.output);
    CHECK(jitk_test::count_lines_with(r.output, "JITK_CACHE_MODE='readonly' is not read-write, read-only or memory-only") == 1);
    CHECK_THAT(r.output, Contains("cache_mode read-only") && Contains("saxpy disk ok"));
    CHECK(jitk_test::read_file(warmed / "index.db") == index_before);
  }
}

TEST_CASE("after the first get, the cache settings are fixed: another value throws, the same is accepted, the log level changes",
          "[configure]") {
  TempDir dir, other;
  const std::string base = "--dir '" + dir.str() + "' --get ";
  auto r = probe(base + "--again-dir '" + other.str() + "'");
  INFO(r.output);
  CHECK_THAT(r.output, Contains("again: error (invalid params): jit::configure: the cache is already in use in this process"));
  CHECK_THAT(r.output, Contains("cache root " + dir.str() + " -> " + other.str()));
  CHECK(jitk_test::blob_files(other.path()).empty());
  r = probe(base + "--again-dir '" + dir.str() + "/' --again-mode read-write");
  CHECK_THAT(r.output, Contains("again: ok"));
  r = probe(base + "--again-mode memory-only");
  CHECK_THAT(r.output, Contains("again: error (invalid params)") && Contains("cache mode read-write -> memory-only"));
  r = probe(base + "--again-remote redis://127.0.0.1:1");
  CHECK_THAT(r.output, Contains("again: error (invalid params)") && Contains("remote"));
  // A call that throws changes nothing, not even the log level it also gives.
  r = probe(base + "--again-dir '" + other.str() + "' --again-level debug");
  CHECK_THAT(r.output, Contains("again: error") && Contains("log_level warn from default"));
  r = probe(base + "--again-level debug");
  CHECK_THAT(r.output, Contains("again: ok") && Contains("log_level debug from jit::configure"));
}

TEST_CASE("jit::configure's log level wins over JITK_LOG_LEVEL", "[configure]") {
  TempDir dir;
  auto r = probe("--dir '" + dir.str() + "' --level info --get", "JITK_LOG_LEVEL=off");
  INFO(r.output);
  CHECK_THAT(r.output, Contains("log_level info from jit::configure") && Contains("[jitk I]"));
  r = probe("--dir '" + dir.str() + "' --level off --get", "JITK_LOG_LEVEL=trace");
  CHECK_THAT(r.output, !Contains("[jitk"));
}

TEST_CASE("jit::configure's remote replaces the environment's", "[configure]") {
  auto r = probe("--remote redis://127.0.0.1:9", "JITK_REMOTE=redis://10.0.0.1:6379");
  CHECK_THAT(r.output, Contains("remote 'redis://127.0.0.1:9' from jit::configure"));
  r = probe("", "JITK_REMOTE=redis://10.0.0.1:6379");
  CHECK_THAT(r.output, Contains("remote 'redis://10.0.0.1:6379' from JITK_REMOTE"));
}

TEST_CASE("jit::configure refuses an empty cache_dir and changes nothing", "[configure][hostile]") {
  TempDir dir;
  auto r = probe("--dir '' --level debug", "JITK_CACHE_DIR='" + dir.str() + "'");
  INFO(r.output);
  CHECK_THAT(r.output, Contains("configure: error (invalid params): jit::configure: cache_dir is empty"));
  CHECK_THAT(r.output, Contains("cache_dir " + dir.str() + " from JITK_CACHE_DIR") && Contains("log_level warn"));
}

TEST_CASE("JITK_RECORD records the tuned use (winner, base and shape), not the candidates tried", "[configure][record][tuning]") {
  TempDir cache, fresh, dir;
  const auto manifest = dir.path() / "used.toml";
  auto r = run(kClient + " gemm-tuned 64 48 40", "JITK_RECORD='" + manifest.string() + "' " + jitk_test::cache_env(cache));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string text = jitk_test::read_file(manifest);
  INFO(text);
  CHECK(jitk_test::count_lines_with(text, "[[kernel]]") == 2);
  CHECK(jitk_test::count_lines_with(text, "tune = [[64, 48, 40]]") == 1);
  // The record tunes elsewhere: a fresh cache warmed from it with --tune holds the decision.
  auto warm = run(kTool + " warm --tune '" + manifest.string() + "'", jitk_test::cache_env(fresh));
  INFO(warm.output);
  CHECK(warm.exit_code == 0);
  CHECK_THAT(warm.output, Contains("tune: 1 tuned"));
  auto again = run(kClient + " gemm-tuned 64 48 40", jitk_test::cache_env(fresh) + " JITK_LOG_LEVEL=info");
  CHECK_THAT(again.output, !Contains("autotuned"));
}

TEST_CASE("tuning removes the candidates it compiled and lost, keeping the winner and what was cached before stay",
          "[configure][tuning]") {
  TempDir cache, dir;
  const std::string env = jitk_test::cache_env(cache);
  // gemm's base params cached before the tuning (another program used them).
  jitk_test::write_file(dir.path() / "base.toml", "[[kernel]]\nname = \"gemm\"\ntarget = \"cpu\"\nparams = { dtype = \"f32\" }\n");
  REQUIRE(run(kTool + " warm '" + (dir.path() / "base.toml").string() + "'", env).exit_code == 0);
  const auto before = ls(env);
  REQUIRE(rows_of(before, "gemm") == 1);
  const std::string base_key = before[0]["key"];
  auto r = run(kClient + " gemm-tuned 200 120 72", env);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto after = ls(env);
  INFO(after.dump());
  CHECK(rows_of(after, "gemm") <= 2);  // the base, and the winner when it is another
  bool base_kept = false;
  for (const auto& row : after) base_kept = base_kept || row["key"] == base_key;
  CHECK(base_kept);
  CHECK(jitk_test::blob_files(cache.path()).size() == after.size());
  auto tuning = nlohmann::json::parse(run(kTool + " ls --tuning --json", env).output);
  REQUIRE(tuning.size() == 1);
  // The winner is cached: a second process loads it without tuning or compiling.
  auto again = run(kClient + " gemm-tuned 200 120 72", env + " JITK_LOG_LEVEL=info");
  CHECK_THAT(again.output, !Contains("autotuned") && !Contains("compiled gemm"));
  CHECK(ls(env).size() == after.size());
}

TEST_CASE("a manifest entry may leave out a param with a default, while one without a default is still named", "[configure][manifest]") {
  TempDir cache, dir;
  const auto manifest = dir.path() / "defaults.toml";
  jitk_test::write_file(manifest,
                        "[[kernel]]\nname = \"saxpy\"\ntarget = \"cpu\"\n\n"
                        "[[kernel]]\nname = \"rms_norm\"\ntarget = \"cpu\"\nparams = { hidden = 333 }\n");
  auto warm = run(kTool + " warm '" + manifest.string() + "'", jitk_test::cache_env(cache));
  INFO(warm.output);
  REQUIRE(warm.exit_code == 0);
  CHECK_THAT(warm.output, Contains("2 kernels: 2 compiled"));
  // The keys are those of jit::get<K>({f32, ...}): the client finds both on disk.
  auto client = run(kClient + " saxpy rms_norm", jitk_test::cache_env(cache));
  CHECK(jitk_test::count_lines_with(client.output, " disk ok") == 2);

  jitk_test::write_file(manifest, "[[kernel]]\nname = \"attention_decode\"\ntarget = \"cpu\"\nparams = { page_size = 16 }\n");
  auto bad = run(kTool + " warm '" + manifest.string() + "'", jitk_test::cache_env(cache));
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.output, Contains("kernel #1 (attention_decode)") && Contains("missing parameter 'head_dim'"));
}

TEST_CASE("jitk warm --kernels refuses what is not a kernel module, naming it, and warms nothing", "[configure][warm][hostile]") {
  TempDir cache, dir;
  const auto manifest = dir.path() / "m.toml";
  jitk_test::write_file(manifest, "[[kernel]]\nname = \"saxpy\"\ntarget = \"cpu\"\n");
  const auto text = dir.path() / "not-a-library.so";
  jitk_test::write_file(text, "this is text, not ELF\n");
  REQUIRE(::mkfifo((dir.path() / "fifo.so").c_str(), 0600) == 0);
  struct Case {
    std::string module, expect;
  };
  for (const Case& c : {Case{text.string(), "cannot be loaded"}, Case{dir.str(), "is a folder, not a shared library"},
                        Case{(dir.path() / "fifo.so").string(), "is a FIFO, not a shared library"}, Case{(dir.path() / "absent.so").string(), "no such file"},
                        Case{JITK_LIBRARY_FILE, "has no jitk_register_kernels (add JITK_KERNEL_MODULE"}}) {
    auto r = run(kTool + " warm --kernels '" + c.module + "' '" + manifest.string() + "'", jitk_test::cache_env(cache));
    INFO(c.module << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Contains("kernel module '") && Contains(c.expect));
  }
  CHECK(jitk_test::blob_files(cache.path()).empty());
}
