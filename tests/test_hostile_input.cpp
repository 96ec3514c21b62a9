// Hostile and careless input (issue 26): packs, manifests, kernel text, the record file, sizes and
// ages, text that reaches a terminal, autotuning rows. Each case is one that was observed to crash,
// hang, read without bound, merge half a pack, or print raw escape sequences.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include "cache/blob_format.hpp"
#include "cache/cache_key.hpp"
#include "cache/disk_tier.hpp"
#include "cache/tuning_store.hpp"
#include "jit/cache.hpp"
#include "jit/error.hpp"
#include "runtime/shipping/pack_reader.hpp"
#include "support/text.hpp"
#include "support/units.hpp"
#include "pack_support.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using jitk_test::run;
using jitk_test::rewrite_pack;
using jitk_test::TempDir;
namespace fs = std::filesystem;

namespace {
using jitk_test::kClient;
using jitk_test::kTool;

// Every process a test starts that could block on a special file runs under this many seconds.
const std::string kTimeout = "timeout 60 ";

nlohmann::json stats(const std::string& env) { return nlohmann::json::parse(run(kTool + " stats --json", env).output); }

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// What a cache holds, to compare before and after: its index rows (key and checksum), its
// decisions, and every file under blobs/ with its bytes.
struct CacheState {
  std::set<std::string> rows, tuning, blobs;
  bool operator==(const CacheState&) const = default;
};
CacheState state_of(const TempDir& cache) {
  CacheState s;
  const auto env = jitk_test::cache_env(cache);
  for (const auto& r : nlohmann::json::parse(run(kTool + " ls --json", env).output)) s.rows.insert(r["key"].get<std::string>());
  for (const auto& t : nlohmann::json::parse(run(kTool + " ls --tuning --json", env).output)) s.tuning.insert(t.dump());
  for (const auto& f : jitk_test::blob_files(cache.path())) s.blobs.insert(f.string() + ":" + jitk_test::read_file(f));
  return s;
}

// A cache of three artifacts and one autotuning decision exported to a pack; `target` holds one
// artifact of its own (silu_and_mul), which no import may lose.
struct PackFixture {
  TempDir source, target, dir;
  fs::path pack = dir.path() / "p.jitkpack";
  PackFixture() {
    REQUIRE(run(kClient + " saxpy softmax rms_norm", jitk_test::cache_env(source)).exit_code == 0);
    REQUIRE(run(kClient + " silu_and_mul", jitk_test::cache_env(target)).exit_code == 0);
    const auto exp = run(kTool + " export " + quoted(pack), jitk_test::cache_env(source));
    INFO(exp.output);
    REQUIRE(exp.exit_code == 0);
    // a decision travels too: one made by hand (tuning a gemm takes long under sanitizers)
    rewrite_pack(pack, [](nlohmann::json& doc) {
      doc["tuning"] = nlohmann::json::array({{{"kernel", "gemm"}, {"base_params", "dtype=f32"}, {"shape_class", "m64n64k64"},
                                              {"device", "cpu test"}, {"choice", "dtype=f32,tile_m=64"}, {"candidates", 4},
                                              {"best_ms", 0.5}, {"default_ms", 0.75}, {"tuning_ms", 12.0}, {"created", 1700000000}}});
    });
  }
  std::string env() const { return jitk_test::cache_env(target); }
  jitk_test::CommandResult import() const { return run(kTimeout + kTool + " import " + quoted(pack), env()); }
};

}  // namespace

// ---- sizes and ages ----------------------------------------------------------------------------

TEST_CASE("sizes and ages are read strictly: signs, spaces, hex, exponents and overflow are refused", "[hostile][units]") {
  using jit::detail::parse_age;
  using jit::detail::parse_size;
  for (const char* bad : {"0x10", "1e-9", "1e3", " 5M", "5M ", "-1", "+5", "", "5.M", ".5G", "1.5", "inf", "nan", "5 M", "5MiB",
                          "9223372036854775808", "8388608T", "99999999999999999999", "5MBB", "1,5G"}) {
    std::string why;
    INFO("size '" << bad << "'");
    CHECK_FALSE(parse_size(bad, &why));
    CHECK_FALSE(why.empty());
  }
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("2G") == 2LL << 30);
  CHECK(parse_size("1.5G") == 3LL << 29);
  CHECK(parse_size("10MB") == 10LL << 20);
  CHECK(parse_size("9223372036854775807") == std::numeric_limits<std::int64_t>::max());
  CHECK(parse_size("8388607T") == (8388607LL << 40));
  for (const char* bad : {"0x10d", "1e9s", " 5d", "5d ", "-1d", "", "99999999999999999999d", "106751991167301d", "5", "d", "5w",
                          "1.5h", "+5m"}) {
    std::string why;
    INFO("age '" << bad << "'");
    CHECK_FALSE(parse_age(bad, &why));
    CHECK_FALSE(why.empty());
  }
  CHECK(parse_age("30d") == 30 * 86400);
  CHECK(parse_age("0s") == 0);
  CHECK(parse_age("106751991167300d") == 106751991167300LL * 86400);
}

TEST_CASE("jitk prune --older-than a huge age prunes nothing, and sizes or ages past int64 are errors naming the forms",
          "[hostile][units][tool]") {
  TempDir cache;
  const auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy softmax", env).exit_code == 0);
  REQUIRE(stats(env)["entries"] == 2);
  // 1e15 days: seconds that once overflowed to a negative age, and everything was pruned
  auto r = run(kTool + " prune --older-than 1000000000000000d", env);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains("is not an age") && Contains("a whole number with a unit s, m, h or d"));
  CHECK(stats(env)["entries"] == 2);
  r = run(kTool + " prune --older-than 100000000000000d", env);  // fits: nothing is that old
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("pruned 0 artifacts"));
  for (const char* bad : {"0x10", "1e-9", "' 5M'", "-1", "''", "99999999999999999999"}) {
    r = run(kTool + " prune --max-size " + bad, env);
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(stats(env)["entries"] == 2);
  }
  r = run(kTool + " prune --max-size 0x10", env);
  CHECK_THAT(r.output, Contains("'0x10' is not a size") && Contains("K, M, G or T"));
  r = run(kTool + " prune", env + " JITK_CACHE_MAX_SIZE=1e-9");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains("JITK_CACHE_MAX_SIZE '1e-9' is not a size"));
  CHECK(stats(env)["entries"] == 2);
}

TEST_CASE("a JITK_CACHE_MAX_SIZE that is not a plain size is one warning naming the forms, and no limit", "[hostile][units]") {
  for (const char* bad : {"1e-9", "0x10", "' 5M'"}) {
    TempDir cache;
    const auto env = jitk_test::cache_env(cache);
    auto r = run(kClient + " saxpy softmax", env + " JITK_CACHE_MAX_SIZE=" + bad);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(jitk_test::count_lines_with(r.output, "is not a size") == 1);
    CHECK_THAT(r.output, Contains("K, M, G or T") && Contains("no size limit"));
    CHECK(stats(env)["entries"] == 2);  // 1e-9 once meant 0 bytes: everything evicted
  }
}

TEST_CASE("counts in options and the environment are digits only: jitk warm -j and JITK_NUM_THREADS", "[hostile][units]") {
  TempDir cache;
  const auto env = jitk_test::cache_env(cache);
  const std::string manifest = std::string(JITK_SOURCE_DIR) + "/examples/warm.toml";
  for (const char* bad : {"0x10", "' 5'", "1e1", "+4"}) {
    auto r = run(kTool + " warm -j " + bad + " '" + manifest + "'", env);
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Contains("--jobs") && Contains("not a whole number"));
  }
  CHECK(stats(env)["compiles"] == 0);
  for (const char* bad : {"' 4'", "'4 '", "+4", "0x4"}) {
    auto r = run(kClient + " saxpy", env + " JITK_NUM_THREADS=" + bad);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(jitk_test::count_lines_with(r.output, "is not a thread count") == 1);
  }
}

// ---- jitk export --------------------------------------------------------------------------------

TEST_CASE("export writes its pack through a temp file of a fresh name: a planted link or FIFO is never opened", "[hostile][pack]") {
  TempDir dir;
  const auto victim = dir.path() / "bashrc";
  jitk_test::write_file(victim, "export PATH=/usr/bin\n");
  // the names the temp file once had (the pack's path + ".tmp." + this process's id): a link to a
  // file of the user's, and a FIFO (opening it for writing would wait for a reader forever)
  const fs::path linked = dir.path() / "a.jitkpack", fifo_pack = dir.path() / "b.jitkpack";
  const std::string suffix = ".tmp." + std::to_string(::getpid());
  fs::create_symlink(victim, linked.string() + suffix);
  REQUIRE(::mkfifo((fifo_pack.string() + suffix).c_str(), 0600) == 0);
  for (const fs::path& pack : {linked, fifo_pack}) {
    INFO(pack);
    CHECK_NOTHROW(jit::cache::export_pack(pack));
    CHECK(fs::is_regular_file(fs::symlink_status(pack)));
    CHECK(jitk_test::read_file(pack).rfind("JITKPACK", 0) == 0);
  }
  CHECK(jitk_test::read_file(victim) == "export PATH=/usr/bin\n");
  CHECK(fs::is_symlink(fs::symlink_status(linked.string() + suffix)));
  CHECK(fs::is_fifo(fs::symlink_status(fifo_pack.string() + suffix)));
  // no temp file is left behind: the victim, the two packs and the two planted names, nothing else
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  CHECK(files == 5);
}

// ---- JITK_RECORD -------------------------------------------------------------------------------

TEST_CASE("JITK_RECORD never follows a planted link: the link's target is untouched", "[hostile][record]") {
  TempDir cache, dir;
  const auto victim = dir.path() / "bashrc";
  jitk_test::write_file(victim, "export PATH=/usr/bin\n");
  fs::create_symlink(victim, dir.path() / "used.toml");
  auto r = run(kTimeout + kClient + " saxpy softmax",
               "JITK_RECORD=" + quoted(dir.path() / "used.toml") + " " + jitk_test::cache_env(cache));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("saxpy compiled ok") && Contains("symbolic link"));
  CHECK(jitk_test::count_lines_with(r.output, "JITK_RECORD=") == 1);
  CHECK(jitk_test::read_file(victim) == "export PATH=/usr/bin\n");
  // a dangling link is not created through either
  fs::remove(victim);
  r = run(kTimeout + kClient + " saxpy", "JITK_RECORD=" + quoted(dir.path() / "used.toml") + " " + jitk_test::cache_env(cache));
  CHECK(r.exit_code == 0);
  CHECK_FALSE(fs::exists(victim));
}

TEST_CASE("JITK_RECORD at a FIFO, /dev/full or /dev/stdout is refused in one warning and the program goes on", "[hostile][record]") {
  TempDir cache, dir;
  const auto fifo = dir.path() / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& file : {fifo.string(), std::string("/dev/full"), std::string("/dev/stdout"), dir.str()}) {
    auto r = run(kTimeout + kClient + " saxpy softmax rms_norm", "JITK_RECORD='" + file + "' " + jitk_test::cache_env(cache));
    INFO(file << ": " << r.output);
    CHECK(r.exit_code == 0);  // not 124 (hung), not an abort
    CHECK(jitk_test::count_lines_with(r.output, " ok") == 3);
    CHECK(jitk_test::count_lines_with(r.output, "JITK_RECORD=") == 1);
    CHECK(r.output.find("[[kernel]]") == std::string::npos);
  }
}

TEST_CASE("a record file that hits its size limit halfway is one warning, keeps no half entry, and recording stops",
          "[hostile][record]") {
  TempDir cache, dir;
  const auto manifest = dir.path() / "used.toml";
  // RLIMIT_FSIZE of 512 bytes: the header and an entry or two fit, then a write stops short
  // (SIGXFSZ ignored, so the write fails with EFBIG instead of killing the program). The
  // program's output goes through a pipe, which the limit does not cut.
  auto r = run("sh -c \"{ (trap '' XFSZ; ulimit -f 1; exec " + kTimeout + kClient +
                   " saxpy softmax rms_norm silu_and_mul) 2>&1; echo exit=\\$?; } | cat\"",
               "JITK_RECORD=" + quoted(manifest) + " " + jitk_test::cache_env(cache));
  INFO(r.output);
  CHECK_THAT(r.output, Contains("exit=0"));
  CHECK(jitk_test::count_lines_with(r.output, " ok") == 4);
  CHECK(jitk_test::count_lines_with(r.output, "JITK_RECORD=") == 1);
  CHECK_THAT(r.output, Contains("cannot be appended to"));
  const std::string text = jitk_test::read_file(manifest);
  INFO(text);
  CHECK(text.size() <= 512);
  // every entry whole: the file is still a manifest jitk warm reads
  CHECK(jitk_test::count_lines_with(text, "[[kernel]]") == jitk_test::count_lines_with(text, "params = {"));
  CHECK((text.empty() || text.back() == '\n'));
  if (jitk_test::count_lines_with(text, "[[kernel]]") > 0) {
    TempDir fresh;
    CHECK(run(kTool + " warm " + quoted(manifest), jitk_test::cache_env(fresh)).exit_code == 0);
  }
}

// ---- manifests and kernel text -----------------------------------------------------------------

TEST_CASE("a manifest that is a directory, a FIFO or a device is an error, never empty text or a hang", "[hostile][manifest]") {
  TempDir dir;
  const auto fifo = dir.path() / "fifo.toml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(jit::cache::parse_manifest(dir.path()), Contains("directory, not a regular file"));
  CHECK_THROWS_WITH(jit::cache::parse_manifest(fifo), Contains("FIFO, not a regular file"));  // once: blocked in open
  CHECK_THROWS_WITH(jit::cache::parse_manifest("/dev/zero"), Contains("character device"));
  // too large: refused unread
  const auto big = dir.path() / "big.toml";
  jitk_test::write_file(big, "");
  fs::resize_file(big, 1LL << 30);
  CHECK_THROWS_WITH(jit::cache::parse_manifest(big), Contains("more than the"));
  TempDir cache;
  auto r = run(kTimeout + kTool + " warm " + quoted(fifo), jitk_test::cache_env(cache));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains("FIFO"));
}

TEST_CASE("a manifest's numbers that are floats past int64's range are refused, never cast", "[hostile][manifest]") {
  // toml++'s value<int64_t>() of such a float casts it unchecked (UBSan saw it in fuzz_manifest): the
  // parser asks a node's type first.
  TempDir dir;
  const auto file = dir.path() / "floats.toml";
  for (const std::string entry :
       {"params = { dtype = \"f32\", hidden = 4.44444e52 }", "params = { dtype = \"f32\", hidden = [4096, -9.9e300] }",
        "params = { dtype = \"f32\" }\ntune = [[4.4e52, 8, 8]]", "params = { dtype = \"f32\", hidden = nan }"}) {
    jitk_test::write_file(file, "[[kernel]]\nname = \"" + std::string(entry.find("tune") != std::string::npos ? "gemm" : "rms_norm") +
                                    "\"\ntarget = \"cpu\"\n" + entry + "\n");
    INFO(entry);
    CHECK_THROWS_AS(jit::cache::parse_manifest(file), jit::Error);
  }
}

TEST_CASE("kernel text in JITK_KERNEL_DIR that is a directory or a FIFO is an error naming it", "[hostile][kernel-dir]") {
  TempDir cache, kernels;
  fs::create_directories(kernels.path() / "saxpy" / "saxpy.cpp");  // once read as empty text
  fs::create_directories(kernels.path() / "softmax");
  REQUIRE(::mkfifo((kernels.path() / "softmax" / "softmax.cpp").c_str(), 0600) == 0);
  for (const char* kernel : {"saxpy", "softmax"}) {
    auto r = run(kTimeout + kClient + " " + kernel, jitk_test::cache_env(cache) + " JITK_KERNEL_DIR=" + quoted(kernels.path()));
    INFO(r.output);
    CHECK(r.exit_code == 2);  // an error, not 124 (hung)
    CHECK_THAT(r.output, Contains("cannot be used as kernel text") && Contains("not a regular file"));
  }
}

// ---- packs -------------------------------------------------------------------------------------

TEST_CASE("jitk import of /dev/zero, a FIFO or a 50 GB sparse file is refused at once, unread", "[hostile][pack]") {
  TempDir cache, dir;
  const auto fifo = dir.path() / "fifo.jitkpack";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto sparse = dir.path() / "sparse.jitkpack";
  jitk_test::write_file(sparse, "");
  fs::resize_file(sparse, 50LL << 30);
  struct Case {
    std::string file, expect;
  } cases[] = {{"/dev/zero", "character device, not a regular file"},
               {fifo.string(), "FIFO, not a regular file"},
               {sparse.string(), "more than a pack may be"}};
  for (const auto& c : cases) {
    auto r = run(kTimeout + kTool + " import '" + c.file + "'", jitk_test::cache_env(cache));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Contains(c.expect) && Contains("nothing imported"));
  }
  CHECK(jitk_test::blob_files(cache.path()).empty());
}

TEST_CASE("a pack with a wrong type in one entry's field is refused naming the entry and the field, the cache as it was",
          "[hostile][pack]") {
  PackFixture f;
  const CacheState before = state_of(f.target);
  REQUIRE(before.rows.size() == 1);
  const std::string good = jitk_test::read_file(f.pack);
  struct Case {
    const char* field;
    nlohmann::json value;
  } cases[] = {{"compile_ms", "fast"},        {"compile_ms", -1},         {"compile_ms", 1e300},
               {"implementation_version", 1.5}, {"implementation_version", -3}, {"implementation_version", "1"},
               {"size", "12"},                {"size", -1},               {"size", 1e300},
               {"kernel", nlohmann::json::array()}, {"kernel", ""},      {"kernel", "soft\x1b[2Jmax"},
               {"params", nlohmann::json::object()}, {"key", 5},         {"key", "ZZ"},
               {"checksum", nullptr},         {"backend", true},          {"arch", 1},
               {"compiler", "a\nb"},          {"implementation", "\x07"}};
  for (const auto& c : cases) {
    jitk_test::write_file(f.pack, good);
    // the third entry: two good ones come before it
    rewrite_pack(f.pack, [&](nlohmann::json& doc) { doc["artifacts"][2][c.field] = c.value; });
    auto r = f.import();
    INFO(c.field << " = " << c.value.dump() << ": " << r.output);
    CHECK(r.exit_code == 2);  // an error, not an abort after merging the first two
    CHECK_THAT(r.output, Contains("artifact #3") && Contains(std::string("field '") + c.field + "'") && Contains("nothing imported"));
    CHECK(r.output.find('\x1b') == std::string::npos);
    CHECK(state_of(f.target) == before);
  }
  // a missing field, an entry that is not an object, a list that is not one
  for (const auto& edit : std::vector<std::function<void(nlohmann::json&)>>{
           [](nlohmann::json& d) { d["artifacts"][2].erase("checksum"); },
           [](nlohmann::json& d) { d["artifacts"][2] = 7; },
           [](nlohmann::json& d) { d["artifacts"] = "all of them"; },
           [](nlohmann::json& d) { d = nlohmann::json::array(); },
           [](nlohmann::json& d) { d["artifacts"][2]["key"] = d["artifacts"][0]["key"]; }}) {
    jitk_test::write_file(f.pack, good);
    rewrite_pack(f.pack, edit);
    auto r = f.import();
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Contains("nothing imported"));
    CHECK(state_of(f.target) == before);
  }
  // and the same pack whole imports
  jitk_test::write_file(f.pack, good);
  auto r = f.import();
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("imported 3 artifacts") && Contains("1 tuning decisions"));
}

TEST_CASE("a pack whose autotuning decisions are absurd is refused naming the field, the cache as it was", "[hostile][pack][tuning]") {
  PackFixture f;
  const CacheState before = state_of(f.target);
  const std::string good = jitk_test::read_file(f.pack);
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* expect;
  } cases[] = {{"created", 1e300, "field 'created'"},      {"created", -5, "created"},
               {"created", 99999999999LL, "created"},      {"best_ms", -1.0, "best_ms"},
               {"default_ms", 1e300, "default_ms"},        {"tuning_ms", "long", "field 'tuning_ms'"},
               {"candidates", 1000000000000LL, "candidates"}, {"candidates", 0, "candidates"},
               {"choice", "", "choice"},                   {"device", "\x1b]0;pwned\x07", "device"},
               {"kernel", 3, "field 'kernel'"}};
  for (const auto& c : cases) {
    jitk_test::write_file(f.pack, good);
    rewrite_pack(f.pack, [&](nlohmann::json& doc) { doc["tuning"][0][c.field] = c.value; });
    auto r = f.import();
    INFO(c.field << " = " << c.value.dump() << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Contains("autotuning decision #1") && Contains(c.expect) && Contains("nothing imported"));
    CHECK(r.output.find('\x1b') == std::string::npos);
    CHECK(state_of(f.target) == before);
  }
}

TEST_CASE("an import that fails while storing leaves the cache exactly as it was and names the entry", "[hostile][pack]") {
  PackFixture f;
  const auto artifacts = nlohmann::json::parse(run(kTool + " ls --json", jitk_test::cache_env(f.source)).output);
  REQUIRE(artifacts.size() == 3);
  // The pack lists artifacts as ls does (by kernel, params). Its last one whose blob folder the
  // target has not made gets a regular file there instead: writing that blob fails, after the
  // ones before it were written.
  std::string last_key;
  for (const auto& a : artifacts)
    if (!fs::exists(f.target.path() / "blobs" / a["key"].get<std::string>().substr(0, 2))) last_key = a["key"];
  REQUIRE(!last_key.empty());
  REQUIRE(last_key != artifacts[0]["key"]);
  jitk_test::write_file(f.target.path() / "blobs" / last_key.substr(0, 2), "in the way");
  const CacheState before = state_of(f.target);
  auto r = f.import();
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains("nothing imported, the cache is as it was") && Contains("artifact #"));
  CHECK(state_of(f.target) == before);
  // with the obstacle gone the same pack imports whole
  fs::remove(f.target.path() / "blobs" / last_key.substr(0, 2));
  r = f.import();
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("imported 3 artifacts"));
  CHECK(stats(f.env())["entries"] == 4);
}

// ---- text that reaches a terminal --------------------------------------------------------------

TEST_CASE("printable escapes control characters, escape sequences, bidi overrides and bytes that are not UTF-8",
          "[hostile][text]") {
  using jit::detail::printable;
  CHECK(printable("rms_norm") == "rms_norm");
  CHECK(printable("a\x1b[31mb") == "a\\x1b[31mb");
  CHECK(printable("\x1b]0;title\x07") == "\\x1b]0;title\\x07");
  CHECK(printable("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(printable("a\nb\tc\rd", true) == "a\nb\tc\\rd");
  CHECK(printable("back\\slash") == "back\\\\slash");
  CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");                  // UTF-8 passes
  CHECK(printable("\xc2\x9b" "31m") == "\\u{009b}31m");              // C1 CSI
  CHECK(printable("\xe2\x80\xae" "evil") == "\\u{202e}evil");        // right-to-left override
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");                      // not UTF-8
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                      // overlong
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(jit::detail::is_plain_text("dtype=f32,hidden=4096"));
  CHECK_FALSE(jit::detail::is_plain_text("a\x1b"));
  CHECK_FALSE(jit::detail::is_plain_text("\xff"));
}

TEST_CASE("jitk ls, ls --tuning and verify show escape sequences in the index escaped", "[hostile][text][tool]") {
  TempDir cache;
  const auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy softmax", env).exit_code == 0);
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((cache.path() / "index.db").c_str(), &db) == SQLITE_OK);
    const char* sql =
        "UPDATE artifacts SET kernel = 'evil' || char(27) || ']0;pwned' || char(7) || char(27) || '[2J', "
        "params = 'x' || char(10) || 'y' WHERE kernel = 'saxpy';"
        "CREATE TABLE IF NOT EXISTS tuning(kernel TEXT NOT NULL, base_params TEXT NOT NULL, shape_class TEXT NOT NULL, "
        "device TEXT NOT NULL, choice TEXT NOT NULL, candidates INTEGER NOT NULL, best_ms REAL NOT NULL, "
        "default_ms REAL NOT NULL, tuning_ms REAL NOT NULL, created INTEGER NOT NULL, "
        "PRIMARY KEY(kernel, base_params, shape_class, device));"
        "INSERT INTO tuning VALUES('gemm' || char(27) || '[31m', 'dtype=f32', 'm1', 'cpu' || char(155) || 'x', 'tile=1', 2, 1, 1, 1, 1700000000);";
    REQUIRE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto ls = run(kTool + " ls", env);
  INFO(ls.output);
  CHECK(ls.exit_code == 0);
  CHECK(ls.output.find('\x1b') == std::string::npos);
  CHECK(ls.output.find('\x07') == std::string::npos);
  CHECK_THAT(ls.output, Contains("evil\\x1b]0;pwned\\x07\\x1b[2J") && Contains("x\\ny"));
  auto tuning = run(kTool + " ls --tuning", env);
  INFO(tuning.output);
  CHECK(tuning.output.find('\x1b') == std::string::npos);
  CHECK_THAT(tuning.output, Contains("gemm\\x1b[31m"));
  // JSON escapes them itself; bytes that are not UTF-8 are replaced, not an abort
  auto json = run(kTool + " ls --tuning --json", env);
  INFO(json.output);
  CHECK(json.exit_code == 0);
  CHECK(json.output.find('\x1b') == std::string::npos);
  // verify names the row whose blob is gone
  for (const auto& f : jitk_test::blob_files(cache.path())) fs::remove(f);
  auto verify = run(kTool + " verify", env);
  INFO(verify.output);
  CHECK(verify.exit_code == 1);
  CHECK(verify.output.find('\x1b') == std::string::npos);
  CHECK_THAT(verify.output, Contains("evil\\x1b]0;pwned"));
}

// ---- autotuning rows ---------------------------------------------------------------------------

TEST_CASE("autotuning rows are checked field by field when stored and when found", "[hostile][tuning]") {
  using jit::detail::TuningRow;
  const std::int64_t now = 1'800'000'000;
  const TuningRow good{"gemm", "dtype=f32", "m64", "cpu x", "dtype=f32,tile_m=64", 4, 0.5, 0.75, 10, now - 5};
  CHECK(jit::detail::tuning_row_problem(good, now).empty());
  auto with = [&](const std::function<void(TuningRow&)>& edit) {
    TuningRow r = good;
    edit(r);
    return jit::detail::tuning_row_problem(r, now);
  };
  CHECK_THAT(with([](TuningRow& r) { r.created = std::numeric_limits<std::int64_t>::max(); }), Contains("created"));
  CHECK_THAT(with([](TuningRow& r) { r.created = -1; }), Contains("created"));
  CHECK_THAT(with([](TuningRow& r) { r.best_ms = std::nan(""); }), Contains("best_ms"));
  CHECK_THAT(with([](TuningRow& r) { r.default_ms = -2; }), Contains("default_ms"));
  CHECK_THAT(with([](TuningRow& r) { r.tuning_ms = INFINITY; }), Contains("tuning_ms"));
  CHECK_THAT(with([](TuningRow& r) { r.candidates = 0; }), Contains("candidates"));
  CHECK_THAT(with([](TuningRow& r) { r.candidates = 1LL << 40; }), Contains("candidates"));
  CHECK_THAT(with([](TuningRow& r) { r.choice = "a\x1b[2J"; }), Contains("choice"));
  CHECK_THAT(with([](TuningRow& r) { r.kernel = ""; }), Contains("empty"));

  // the store refuses to keep one, and does not hand out one it finds in the index
  TempDir dir;
  jit::detail::SqliteIndex index(dir.path() / "index.db");
  jit::detail::TuningStore store([&]() -> jit::detail::SqliteIndex& { return index; });
  TuningRow nan = good;
  nan.created = 1'700'000'000;
  nan.best_ms = std::nan("");
  CHECK_THROWS_WITH(store.store(nan), Contains("best_ms"));
  CHECK_FALSE(store.find(nan.kernel, nan.base_params, nan.shape_class, nan.device));
  index.store_tuning({"gemm", "dtype=f32", "m64", "cpu x", "dtype=f32,tile_m=64", 4, 0.5, 0.75, 10, 1'700'000'000});
  REQUIRE(store.find("gemm", "dtype=f32", "m64", "cpu x"));
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() / "index.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "UPDATE tuning SET created = 1e300", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  CHECK_FALSE(store.find("gemm", "dtype=f32", "m64", "cpu x"));
}

// ---- the pack reader on its own (what the fuzz target drives) ----------------------------------

namespace {
class MemoryPack final : public jit::detail::PackBytes {
 public:
  explicit MemoryPack(std::string bytes) : bytes_(std::move(bytes)) {}
  std::int64_t size() const override { return static_cast<std::int64_t>(bytes_.size()); }
  bool read_at(void* out, std::size_t n, std::int64_t offset) const override {
    if (offset < 0 || offset > size() || n > bytes_.size() - static_cast<std::size_t>(offset)) return false;
    std::memcpy(out, bytes_.data() + offset, n);
    return true;
  }

 private:
  std::string bytes_;
};

std::string pack_of(const std::string& json, const std::string& payloads = "") {
  std::string out("JITKPACK", 8);
  const std::uint32_t version = jit::detail::kPackVersion, format = jit::detail::kCacheFormatVersion;
  const std::uint64_t size = json.size();
  out.append(reinterpret_cast<const char*>(&version), 4);
  out.append(reinterpret_cast<const char*>(&format), 4);
  out.append(reinterpret_cast<const char*>(&size), 8);
  out += json + payloads;
  return out + jit::detail::checksum_hex(out.data(), out.size());
}
}  // namespace

TEST_CASE("the pack reader refuses deep nesting, sizes past its limits and payloads that do not add up", "[hostile][pack]") {
  auto refuse = [](const std::string& bytes, const std::string& expect) {
    INFO(expect);
    CHECK_THROWS_WITH(jit::detail::read_pack(MemoryPack(bytes), "p", 1'800'000'000), Contains(expect) && Contains("nothing imported"));
  };
  refuse(pack_of(std::string(100000, '[') + std::string(100000, ']')), "nests deeper");
  refuse(pack_of(R"({"artifacts": [{"key": "00000000000000000000000000000000", "kernel": "k", "params": "", "backend": "cpu",
      "arch": "", "compiler": "", "implementation": "", "implementation_version": 0, "compile_ms": 0,
      "size": 99999999999999, "checksum": "00000000000000000000000000000000"}]})"),
         "field 'size'");
  // Pack version 2: a payload is a whole blob bound to its entry.
  const std::string key(32, '0');
  const jit::detail::ArtifactMeta meta{.kernel = "k", .params = "", .backend = "cpu", .arch = "", .compiler = "", .compile_ms = 0,
                                       .implementation = "", .implementation_version = 0};
  const std::string payload = jit::detail::encode_blob_header(key, meta, "abc") + "abc";
  auto entry_of = [&](const std::string& blob) {
    return R"({"key": ")" + key + R"(", "kernel": "k", "params": "", "backend": "cpu",
      "arch": "", "compiler": "", "implementation": "", "implementation_version": 0, "compile_ms": 0,
      "size": )" + std::to_string(blob.size()) + R"(, "checksum": ")" + jit::detail::checksum_hex(blob.data(), blob.size()) + R"("})";
  };
  const std::string entry = entry_of(payload);
  CHECK(jit::detail::read_pack(MemoryPack(pack_of(R"({"artifacts": [)" + entry + "]}", payload)), "p", 1'800'000'000).artifacts.size() == 1);
  refuse(pack_of(R"({"artifacts": [)" + entry + "]}", payload + "x"), "bytes after the last payload");
  refuse(pack_of(R"({"artifacts": [)" + entry + "]}", payload.substr(0, payload.size() - 1)), "runs past the end");
  refuse(pack_of(R"({"artifacts": [)" + entry + "]}", payload.substr(0, payload.size() - 1) + "d"), "fails its checksum");
  // A payload whose checksums hold but which is not the artifact its entry names: bare bytes, a
  // blob bound to another key, a blob bound to another kernel.
  refuse(pack_of(R"({"artifacts": [)" + entry_of("abc") + "]}", "abc"), "is not the artifact its entry names");
  const std::string other_key = jit::detail::encode_blob_header(std::string(32, '1'), meta, "abc") + "abc";
  refuse(pack_of(R"({"artifacts": [)" + entry_of(other_key) + "]}", other_key), "is not the artifact its entry names");
  auto other_meta = meta;
  other_meta.kernel = "j";
  const std::string other_kernel = jit::detail::encode_blob_header(key, other_meta, "abc") + "abc";
  refuse(pack_of(R"({"artifacts": [)" + entry_of(other_kernel) + "]}", other_kernel), "is not the artifact its entry names");
  std::string many = R"({"artifacts": [)";
  for (std::size_t i = 0; i <= jit::detail::kMaxPackEntries; ++i) many += (i ? ",{}" : "{}");
  refuse(pack_of(many + "]}"), "more than a pack may");
  std::string header_only = pack_of("{}");
  std::uint64_t huge = 1ull << 62;
  std::memcpy(header_only.data() + 16, &huge, 8);
  refuse(header_only, "runs past its end");
}
