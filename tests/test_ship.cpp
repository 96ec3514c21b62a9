// Warm up, record, ship: JITK_RECORD manifests, jitk warm (progress, Ctrl-C), jitk export / import.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <set>

#include "cache/blob_format.hpp"
#include "cache/cache_key.hpp"
#include "pack_support.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using jitk_test::run;
using jitk_test::TempDir;

namespace {
using jitk_test::kClient;
using jitk_test::kTool;

nlohmann::json stats(const std::string& env) { return nlohmann::json::parse(run(kTool + " stats --json", env).output); }

using jitk_test::rewrite_pack;  // tests/pack_support.hpp: rebinds blob headers when asked

// Swaps the payloads of entries i and j (with their sizes and checksums, so every checksum in the
// pack still holds): each entry keeps its key, kernel and params but carries the other's code.
void swap_pack_payloads(const jitk_test::fs::path& pack, std::size_t i, std::size_t j) {
  rewrite_pack(pack, [&](nlohmann::json& doc, std::vector<std::string>& payloads) {
    auto& rows = doc["artifacts"];
    std::swap(payloads[i], payloads[j]);
    std::swap(rows[i]["size"], rows[j]["size"]);
    std::swap(rows[i]["checksum"], rows[j]["checksum"]);
  });
}

}  // namespace

TEST_CASE("a pack whose entries' payloads are swapped is refused whole, naming the entry", "[ship][pack]") {
  TempDir cache, other, dir;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " saxpy rms_norm", env).exit_code == 0);
  const auto pack = dir.path() / "swapped.jitkpack";
  REQUIRE(run(kTool + " export '" + pack.string() + "'", env).exit_code == 0);
  swap_pack_payloads(pack, 0, 1);
  auto imp = run(kTool + " import '" + pack.string() + "'", jitk_test::cache_env(other));
  INFO(imp.output);
  CHECK(imp.exit_code != 0);
  CHECK_THAT(imp.output, Contains("is not the artifact its entry names") && Contains("nothing imported"));
  CHECK(stats(jitk_test::cache_env(other))["entries"] == 0);
  CHECK(jitk_test::blob_files(other.path()).empty());
}

TEST_CASE("JITK_RECORD lists what programs used, once each, with many processes at once", "[ship][record]") {
  TempDir cache, fresh, dir;
  const auto manifest = dir.path() / "used.toml";
  const std::string record = "JITK_RECORD='" + manifest.string() + "' " + jitk_test::cache_env(cache);
  // Four processes at once, overlapping in what they use.
  auto r = run("sh -c '" + kClient + " rms_norm softmax & " + kClient + " softmax saxpy & " + kClient +
                   " saxpy rms_norm & " + kClient + " rms_norm & wait'",
               record);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string text = jitk_test::read_file(manifest);
  INFO(text);
  CHECK(jitk_test::count_lines_with(text, "[[kernel]]") == 3);
  CHECK(jitk_test::count_lines_with(text, "name = \"rms_norm\"") == 1);
  CHECK_THAT(text, Contains("target = \"cpu\"") && Contains("params = { dtype = \"f32\", hidden = 333 }"));
  // run again: nothing new is appended
  REQUIRE(run(kClient + " rms_norm softmax saxpy", record).exit_code == 0);
  CHECK(jitk_test::read_file(manifest) == text);
  // warm anywhere from the file; a fresh process there compiles nothing
  auto warm = run(kTool + " warm '" + manifest.string() + "'", jitk_test::cache_env(fresh));
  INFO(warm.output);
  CHECK_THAT(warm.output, Contains("3 kernels: 3 compiled"));
  auto client = run(kClient + " rms_norm softmax saxpy", jitk_test::cache_env(fresh));
  CHECK(jitk_test::count_lines_with(client.output, " disk ok") == 3);
  CHECK(stats(jitk_test::cache_env(fresh))["compiles"] == 3);
}

TEST_CASE("a record file that cannot be written is one warning, and the program still works", "[ship][record]") {
  TempDir cache;
  auto r = run(kClient + " saxpy", "JITK_RECORD=/nonexistent/dir/used.toml " + jitk_test::cache_env(cache));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("saxpy compiled ok") && Contains("JITK_RECORD=/nonexistent/dir/used.toml cannot be opened"));
}

TEST_CASE("export, clear, import: a fresh process compiles nothing", "[ship][pack]") {
  TempDir cache, dir;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient, env).exit_code == 0);
  const auto pack = dir.path() / "warmed.jitkpack";
  auto exp = run(kTool + " export '" + pack.string() + "'", env);
  INFO(exp.output);
  CHECK_THAT(exp.output, Contains("exported 4 artifacts"));
  CHECK_THAT(run(kTool + " export '" + (dir.path() / "gpu.jitkpack").string() + "' --target cuda", env).output,
             Contains("exported 0 artifacts"));
  REQUIRE(run(kTool + " clear", env).exit_code == 0);
  auto imp = run(kTool + " import '" + pack.string() + "'", env);
  INFO(imp.output);
  CHECK(imp.exit_code == 0);
  CHECK_THAT(imp.output, Contains("imported 4 artifacts, 0 already cached, 0 stale"));
  const auto compiles = stats(env)["compiles"];
  auto client = run(kClient, env);
  CHECK(jitk_test::count_lines_with(client.output, " disk ok") == 4);
  CHECK(stats(env)["compiles"] == compiles);
  CHECK(run(kTool + " verify", env).exit_code == 0);
  // importing again merges nothing new
  CHECK_THAT(run(kTool + " import '" + pack.string() + "'", env).output, Contains("imported 0 artifacts, 4 already cached"));
}

TEST_CASE("autotuning decisions travel in a pack: exported, cleared, imported, kept where the index has its own",
          "[ship][pack][tuning]") {
  TempDir cache, dir;
  auto env = jitk_test::cache_env(cache);
  REQUIRE(run(kClient + " gemm-tuned 300 200 100", env).exit_code == 0);
  const auto decisions = nlohmann::json::parse(run(kTool + " ls --tuning --json", env).output);
  REQUIRE(decisions.size() == 1);
  const auto pack = dir.path() / "tuned.jitkpack";
  auto exp = run(kTool + " export '" + pack.string() + "'", env);
  INFO(exp.output);
  CHECK_THAT(exp.output, Contains("and 1 tuning decisions"));
  CHECK_THAT(run(kTool + " export '" + (dir.path() / "gpu.jitkpack").string() + "' --target cuda", env).output,
             Contains("exported 0 artifacts (0 B) and 0 tuning decisions for cuda"));
  REQUIRE(run(kTool + " clear", env).exit_code == 0);
  REQUIRE(nlohmann::json::parse(run(kTool + " ls --tuning --json", env).output).empty());
  auto imp = run(kTool + " import '" + pack.string() + "'", env);
  INFO(imp.output);
  CHECK_THAT(imp.output, Contains("1 tuning decisions, 0 already there"));
  const auto back = nlohmann::json::parse(run(kTool + " ls --tuning --json", env).output);
  REQUIRE(back.size() == 1);
  CHECK(back[0]["choice"] == decisions[0]["choice"]);
  CHECK(back[0]["shape_class"] == decisions[0]["shape_class"]);
  CHECK_THAT(run(kTool + " import '" + pack.string() + "'", env).output, Contains("0 tuning decisions, 1 already there"));
  // the next process uses the imported decision: nothing is timed (no new row, same choice)
  auto again = run(kClient + " gemm-tuned 300 200 100", env);
  INFO(again.output);
  CHECK(nlohmann::json::parse(run(kTool + " ls --tuning --json", env).output).size() == 1);
}

TEST_CASE("a damaged or truncated pack is refused with a clear error and nothing is merged", "[ship][pack]") {
  TempDir cache, target, dir;
  REQUIRE(run(kClient + " saxpy softmax", jitk_test::cache_env(cache)).exit_code == 0);
  const auto pack = dir.path() / "p.jitkpack";
  REQUIRE(run(kTool + " export '" + pack.string() + "'", jitk_test::cache_env(cache)).exit_code == 0);
  const std::string good = jitk_test::read_file(pack);
  struct Case {
    std::string bytes;
    const char* expect;
  } cases[] = {
      {good.substr(0, good.size() - 100), "damaged"},
      {good.substr(0, good.size() / 2) + "x" + good.substr(good.size() / 2 + 1), "checksum does not match"},
      {"not a pack at all, just some text that is long enough to have a header and a trailer", "not a jitk pack"},
      {"", "not a jitk pack"},
  };
  for (const auto& c : cases) {
    jitk_test::write_file(pack, c.bytes);
    auto r = run(kTool + " import '" + pack.string() + "'", jitk_test::cache_env(target));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Contains(c.expect) && Contains("nothing imported"));
  }
  // a payload that fails its own checksum, in a pack whose whole-file checksum was made to fit
  jitk_test::write_file(pack, good);
  rewrite_pack(pack, [](nlohmann::json& doc) { doc["artifacts"][1]["checksum"] = std::string(32, '0'); });
  auto r = run(kTool + " import '" + pack.string() + "'", jitk_test::cache_env(target));
  CHECK_THAT(r.output, Contains("fails its checksum") && Contains("nothing imported"));
  CHECK(stats(jitk_test::cache_env(target))["entries"] == 0);
  CHECK(jitk_test::blob_files(target.path()).empty());
}

TEST_CASE("a pack from another jitk or compiler version imports nothing stale", "[ship][pack]") {
  TempDir cache, target, dir;
  REQUIRE(run(kClient, jitk_test::cache_env(cache)).exit_code == 0);
  const auto pack = dir.path() / "p.jitkpack";
  REQUIRE(run(kTool + " export '" + pack.string() + "'", jitk_test::cache_env(cache)).exit_code == 0);
  const std::string good = jitk_test::read_file(pack);
  rewrite_pack(pack, [](nlohmann::json& doc) {
    doc["artifacts"][0]["implementation_version"] = 7;                     // a later jitk's implementation
    doc["artifacts"][1]["compiler"] = "clang Debian Clang 99.0.0";          // another compiler
    doc["artifacts"][2]["implementation"] = "";                             // cache format 1
  }, /*rebind=*/true);
  auto r = run(kTool + " import '" + pack.string() + "'", jitk_test::cache_env(target));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("imported 1 artifacts, 0 already cached, 3 stale left out") &&
                           Contains("this jitk ships v1") && Contains("compiled by clang Debian Clang 99.0.0") &&
                           Contains("made before implementations"));
  CHECK(stats(jitk_test::cache_env(target))["entries"] == 1);
  // a pack of another cache format is refused whole
  jitk_test::write_file(pack, good);
  std::string bytes = jitk_test::read_file(pack);
  const std::uint32_t format = 1;
  std::memcpy(bytes.data() + 12, &format, sizeof format);
  bytes.replace(bytes.size() - 32, 32, jit::detail::checksum_hex(bytes.data(), bytes.size() - 32));
  jitk_test::write_file(pack, bytes);
  CHECK_THAT(run(kTool + " import '" + pack.string() + "'", jitk_test::cache_env(target)).output,
             Contains("cache format 1") && Contains("nothing imported"));
}

TEST_CASE("Ctrl-C during jitk warm stops starting compiles and leaves no half-written artifact", "[ship][warm]") {
  TempDir cache, dir;
  auto env = jitk_test::cache_env(cache);
  const auto manifest = dir.path() / "many.toml";
  std::string hidden;
  for (int h = 1; h <= 60; ++h) hidden += (hidden.empty() ? "" : ", ") + std::to_string(100 + h);
  jitk_test::write_file(manifest, "[[kernel]]\nname = \"softmax\"\ntarget = \"cpu\"\nparams = { dtype = \"f64\", hidden = [" +
                                      hidden + "] }\n");
  // warm one at a time; interrupt once the first artifact is stored (slow builds: ASan)
  const std::string first_blob = "find " + (cache.path() / "blobs").string() + " -type f ! -name \".*\" 2>/dev/null | head -1";
  auto r = run("sh -c '" + kTool + " warm -j 1 " + manifest.string() + " & pid=$!; for i in $(seq 600); do [ -n \"$(" +
                   first_blob + ")\" ] && break; sleep 0.05; done; kill -INT $pid; wait $pid'",
               env);
  INFO(r.output);
  CHECK(r.exit_code == 130);
  CHECK_THAT(r.output, Contains("interrupted") && Contains("not started (interrupted)"));
  const auto done = stats(env)["entries"].get<int>();
  CHECK(done > 0);
  CHECK(done < 60);
  CHECK(run(kTool + " verify", env).exit_code == 0);
  for (auto& e : std::filesystem::recursive_directory_iterator(cache.path() / "blobs"))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  // a second warm compiles the rest
  auto again = run(kTool + " warm " + manifest.string(), env);
  CHECK_THAT(again.output, Contains("60 kernels: " + std::to_string(60 - done) + " compiled, " + std::to_string(done) +
                                    " already cached"));
}

TEST_CASE("a decoder layer's run records exactly its variants, and a cache warmed from that record compiles nothing for the next run",
          "[ship][record][layer]") {
  TempDir first, warmed, dir;
  const auto manifest = dir.path() / "layer.toml";
  const std::string program = JITK_DECODER_LAYER;
  auto r = run(program, "JITK_RECORD='" + manifest.string() + "' " + jitk_test::cache_env(first));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("OK"));
  // jitk ls: one variant of each kernel the layer runs, nothing else
  const auto rows = nlohmann::json::parse(run(kTool + " ls --json", jitk_test::cache_env(first)).output);
  std::multiset<std::string> kernels;
  for (const auto& row : rows) kernels.insert(row["kernel"].get<std::string>());
  // gemm three times: plain, with the residual added by its epilogue, and gated (SiLU-and-mul in its
  // epilogue: no silu_and_mul of its own); then rotary_embedding and kv_cache_append where a step runs
  // them, and a fourth gemm with both in its epilogue where a step runs that (cuda-sm90a's prefill:
  // the program says which)
  std::multiset<std::string> expected = {"attention_decode", "attention_prefill", "gemm", "gemm", "gemm", "rms_norm"};
  bool fused = false, unfused = false;
  for (const char* step : {"prefill", "decode"}) {
    const bool f = r.output.find(std::string("QKV ") + step + ": one gemm") != std::string::npos;
    CHECK((f || r.output.find(std::string("QKV ") + step + ": qkv gemm, then rotary_embedding and kv_cache_append") != std::string::npos));
    (f ? fused : unfused) = true;
  }
  if (fused) expected.insert("gemm");
  if (unfused) expected.insert({"kv_cache_append", "rotary_embedding"});
  CHECK(kernels == expected);
  // the record warms an empty cache; the next run then compiles nothing
  const auto env = jitk_test::cache_env(warmed);
  auto warm = run(kTool + " warm '" + manifest.string() + "'", env);
  INFO(warm.output);
  REQUIRE(warm.exit_code == 0);
  const auto compiles = stats(env)["compiles"];
  CHECK(compiles == expected.size());
  CHECK(run(program, env).exit_code == 0);
  CHECK(stats(env)["compiles"] == compiles);
}
