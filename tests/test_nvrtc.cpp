// The CUDA backend on a machine without an NVIDIA GPU: every shipped kernel's CUDA text compiles
// through NVRTC for the GPUs jitk serves (sm_80, sm_86, sm_89, sm_90; the Hopper-only texts for
// sm_90a), as a device elsewhere would get it, and `jitk info` says CUDA can compile here though it
// cannot run. Without NVRTC each test prints "SKIPPED: <reason>".
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "jit/cuda.hpp"
#include "jit/cuda/nvrtc_compiler.hpp"
#include "jit/error.hpp"
#include "jit/kernel_catalog.hpp"
#include "runtime/get_kernel.hpp"
#include "runtime/selection.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

// True when NVRTC can be opened; otherwise prints the line ctest turns into "skipped".
bool have_nvrtc() {
  auto why = jit::detail::NvrtcCompiler::unavailable_reason();
  if (why.empty()) return true;
  std::printf("SKIPPED: NVRTC is unavailable: %s\n", why.c_str());
  return false;
}

// The GPUs jitk is built for: Ampere (A100, consumer), Ada, Hopper. A Hopper-only text
// (arch_suffix "a") compiles for sm_90a where its range holds sm_90.
const char* const kArchs[] = {"sm_80", "sm_86", "sm_89", "sm_90"};
// The archs every pair of parameter values is compiled for (the others: one params set an implementation).
bool is_covering_arch(const std::string& arch) { return arch == "sm_80" || arch == "sm_90"; }
// Row lengths for row kernels: not a multiple of a 16-byte pack, a common one, a long one.
const std::int64_t kHiddenSizes[] = {1000, 4096, 16384};
// Head sizes for attention's kernels (a partial rotary dim among them).
const std::int64_t kHeadDims[] = {32, 64, 96, 128, 256};
// Pages of a paged KV cache (vLLM's default, a large one).
const std::int64_t kPageSizes[] = {16, 64};
// Chains that exercise the generated code (loads of extra tensors, a store, math functions).
const char* const kPrologue = "add>store>gelu_tanh";
const char* const kEpilogue = "mul_vec>add_scalar>tanh";

// One compile: a kernel's implementation for one arch with one set of params.
struct Unit {
  std::string kernel, implementation, arch;
  jit::ParamSet params;
  std::string compiled_arch;  // arch + the implementation's suffix ("sm_90a")
  std::string label() const { return kernel + " / " + implementation + " / " + arch + " / " + params.to_string(); }
};

// Every value a parameter is compiled with: each choice of a text, a few row lengths, the powers
// of two of a small integer range (block sizes); tiles (integers with a fallback) keep their defaults.
std::vector<jit::ParamValue> values_of(const jit::ParamSpec& p, const std::vector<std::string>& dtypes) {
  std::vector<jit::ParamValue> out;
  if (p.name == "dtype") {
    for (const auto& d : dtypes) out.emplace_back(d);
  } else if (p.is_text()) {
    for (const auto& c : p.choices) out.emplace_back(c);
  } else if (p.name == "hidden") {
    for (auto h : kHiddenSizes) out.emplace_back(h);
  } else if (p.name == "head_dim" || p.name == "rotary_dim") {  // attention's heads, a partial rotary one
    for (auto d : kHeadDims) out.emplace_back(d);
  } else if (p.name == "page_size") {
    for (auto s : kPageSizes) out.emplace_back(s);
  } else if (p.name == "group") {  // query heads a kv head serves: multi-head, Llama-3-8B's 4, an odd one
    for (std::int64_t g : {1, 4, 5}) out.emplace_back(g);
  } else if (p.name == "window") {  // none, and Mistral's sliding window
    for (std::int64_t w : {0, 4096}) out.emplace_back(w);
  } else if (p.min == 0 && p.max == 1) {  // a switch: both ways
    for (std::int64_t b : {0, 1}) out.emplace_back(b);
  } else {
    for (std::int64_t v = 1; v <= p.max; v *= 2)
      if (v >= p.min) out.emplace_back(v);
    if (out.empty()) out.emplace_back(p.min);
  }
  return out;
}

// Every (parameter, value) pair and pair of pairs a params set holds: what pairwise coverage counts.
std::vector<std::string> pairs_of(const jit::ParamSet& set) {
  std::vector<std::string> out;
  const auto& v = set.values();
  auto text = [&](std::size_t i) { return jit::ParamSet{v[i]}.to_string(); };  // "dtype=bf16"
  for (std::size_t i = 0; i < v.size(); ++i)
    for (std::size_t j = i; j < v.size(); ++j) out.push_back(text(i) + "," + text(j));
  return out;
}

// Of the params sets an implementation takes, enough that every two parameters' values meet at
// least once (all-pairs): a gemm dtype with each layout of A and of B, a block size with each op.
// The whole product (27 block_sparse sets an arch) costs 3x the time for little more; with
// JITK_TEST_NVRTC_FULL=1 it is compiled whole.
std::vector<jit::ParamSet> pairwise(std::vector<jit::ParamSet> sets) {
  if (const char* full = std::getenv("JITK_TEST_NVRTC_FULL"); full && std::string(full) == "1") return sets;
  std::set<std::string> uncovered;
  for (const auto& s : sets)
    for (auto& p : pairs_of(s)) uncovered.insert(std::move(p));
  std::vector<jit::ParamSet> out;
  while (!uncovered.empty()) {
    std::size_t best = 0, best_new = 0;
    for (std::size_t i = 0; i < sets.size(); ++i) {
      const auto pairs = pairs_of(sets[i]);
      const auto fresh = static_cast<std::size_t>(std::count_if(pairs.begin(), pairs.end(), [&](const auto& p) { return uncovered.count(p) > 0; }));
      if (fresh > best_new) best = i, best_new = fresh;
    }
    for (const auto& p : pairs_of(sets[best])) uncovered.erase(p);
    out.push_back(sets[best]);
  }
  return out;
}

// The units of one implementation on one arch: params sets it takes covering every pair of
// parameter values, and where it takes fusion chains, its first params once more with both chains.
std::vector<Unit> units_of(const jit::KernelSpec& def, const jit::Implementation& impl, const std::string& arch) {
  std::vector<jit::ParamSet> sets = {{}};
  const bool chains = impl.fusion && std::any_of(def.params.begin(), def.params.end(), [](const auto& p) { return p.chain; });
  for (const auto& p : def.params) {
    if (p.chain || (p.fallback && !p.is_text())) continue;  // a text with a fallback (gemm's gate): every choice
    std::vector<jit::ParamSet> grown;
    for (const auto& set : sets)
      for (const auto& v : values_of(p, jit::detail::dtypes_of(def, impl))) {
        jit::ParamSet s = set;
        s.set(p.name, v);
        grown.push_back(std::move(s));
      }
    sets = std::move(grown);
  }
  std::vector<jit::ParamSet> taken;
  for (auto& set : sets) {  // e.g. cuda-sm90a takes 64-wide blocks only; rotary_dim <= head_dim
    jit::ParamSet valid;
    try {
      valid = jit::detail::validate_params(def, set);
    } catch (const jit::Error&) {
      continue;  // params the kernel refuses together (its params_check)
    }
    if (jit::detail::params_problem(impl, valid).empty()) taken.push_back(std::move(set));
  }
  std::vector<Unit> out;
  for (auto& set : pairwise(std::move(taken))) out.push_back({def.name, impl.name, arch, std::move(set), arch + impl.arch_suffix});
  if (chains && !out.empty()) {
    Unit chained = out.front();
    for (const auto& p : def.params)
      if (p.chain) chained.params.set(p.name, std::string(p.name == "prologue" ? kPrologue : kEpilogue));
    out.push_back(std::move(chained));
  }
  return out;
}

// Every shipped kernel's CUDA implementations, for every arch its capability range holds.
std::vector<Unit> cuda_units() {
  std::vector<Unit> out;
  const auto& r = jit::detail::registry();
  // JITK_TEST_NVRTC_KERNEL=name compiles that kernel's units alone (while working on one)
  const char* only = std::getenv("JITK_TEST_NVRTC_KERNEL");
  for (std::size_t k = 0; k < r.shipped; ++k)
    for (const auto& impl : r.kernels[k].implementations) {
      if (impl.backend != jit::Backend::Cuda || (only && *only && r.kernels[k].name != only)) continue;
      for (const char* arch : kArchs)
        if (const int c = jit::detail::capability_of_arch(arch); c >= impl.min_capability && c <= impl.max_capability) {
          auto units = units_of(r.kernels[k], impl, arch);
          // sm_86 and sm_89 take the sm_80 code paths (no text branches on them): one unit each
          // proves the text builds there; the params' pairs are covered on sm_80 and sm_90.
          if (!is_covering_arch(arch) && units.size() > 1) units.resize(1);
          for (auto& u : units) out.push_back(std::move(u));
        }
    }
  return out;
}

constexpr std::uint16_t kEmCuda = 190;

// "" when `bytes` is a CUBIN (an ELF64 for EM_CUDA) defining jitk_entry, else what is wrong.
std::string cubin_problem(const std::vector<char>& bytes) {
  if (bytes.size() < 64 || std::memcmp(bytes.data(), "\x7f" "ELF", 4) != 0 || bytes[4] != 2) return "not an ELF64 (PTX?)";
  std::uint16_t machine = 0;
  std::memcpy(&machine, bytes.data() + 18, sizeof machine);
  if (machine != kEmCuda) return "ELF machine " + std::to_string(machine) + ", not EM_CUDA";
  if (std::search(bytes.begin(), bytes.end(), std::begin("jitk_entry"), std::end("jitk_entry")) == bytes.end())
    return "no jitk_entry symbol";
  return "";
}

struct Outcome {
  std::string problem;  // "" when it compiled into a CUBIN for the arch
  double ms = 0;
};

// Resolves and compiles one unit through the path a warm for a named target takes (no cache).
Outcome compile(const Unit& u) {
  Outcome o;
  try {
    jit::Selection only;
    only.implementation = u.implementation;
    auto s = jit::detail::resolve(u.kernel, u.params, jit::Target::parse("cuda:" + u.arch), only);
    if (s.unit.implementation != u.implementation) return {"resolved to implementation " + s.unit.implementation};
    if (s.compiler->arch() != u.compiled_arch) return {"compiles for " + s.compiler->arch() + ", not " + u.compiled_arch};
    auto artifact = s.compiler->compile(s.unit);
    o.ms = artifact.compile_ms;
    o.problem = cubin_problem(artifact.bytes);
  } catch (const jit::Error& e) {
    // The message carries the compiler log, then the whole specialized source: keep the log.
    std::string what = e.what();
    o.problem = what.substr(0, what.find("\nspecialized source"));
  }
  return o;
}

}  // namespace

TEST_CASE("every shipped kernel's CUDA text compiles with NVRTC for sm_80, sm_86, sm_89 and sm_90 (sm_90a)", "[nvrtc]") {
  if (!have_nvrtc()) return;
  const auto units = cuda_units();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Outcome> outcomes(units.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < units.size();) outcomes[i] = compile(units[i]);
  };
  // NVRTC compiles in parallel; more threads than cores only add memory.
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  std::vector<std::future<void>> running;
  for (unsigned t = 0; t < threads; ++t) running.push_back(std::async(std::launch::async, worker));
  for (auto& r : running) r.get();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, std::pair<int, double>> by_impl;  // "kernel impl arch" -> units, ms
  int failed = 0;
  for (std::size_t i = 0; i < units.size(); ++i) {
    auto& [count, ms] = by_impl[units[i].kernel + " " + units[i].implementation + " " + units[i].arch];
    ++count;
    ms += outcomes[i].ms;
    if (outcomes[i].problem.empty()) continue;
    ++failed;
    FAIL_CHECK(units[i].label() << " did not compile:\n" << outcomes[i].problem);
  }
  for (const auto& [what, c] : by_impl) std::printf("nvrtc %s: %d units, %.0f ms\n", what.c_str(), c.first, c.second);
  std::printf("nvrtc: %zu units (%d failed) in %.1f s on %u threads\n", units.size(), failed, wall_s, threads);
  // Each family's CUDA texts are here: every kernel on every arch, and the Hopper-only ones on sm_90.
  if (const char* only = std::getenv("JITK_TEST_NVRTC_KERNEL"); only && *only) return;
  CHECK(by_impl.count("gemm cuda-sm90a sm_90") == 1);
  CHECK(by_impl.count("block_sparse_matmul cuda-sm90a sm_90") == 1);
  CHECK(by_impl.count("rms_norm cuda-sm90 sm_90") == 1);
  CHECK(by_impl.count("attention_decode cuda sm_80") == 1);  // every head_dim, page, group and q_len pair
  CHECK(by_impl.count("attention_decode cuda sm_90") == 1);
  CHECK(by_impl.count("gemm cuda-sm90a sm_80") == 0);
}

TEST_CASE("cuda-sm90a's 64-row tiles compile with their K split over a cluster (decode), plain, gated and with an epilogue", "[nvrtc]") {
  if (!have_nvrtc()) return;
  // The shipped-kernel sweep above compiles the default tiles (128 x 256: never split); the split
  // path (JITK_MAX_SPLIT_K, gemm_sm90.cu's SPLIT_K) is compiled here for each 64-row tile width.
  struct Variant {
    std::int64_t tile_n, stages;
    const char *a, *b, *gate, *epilogue;
  };
  const Variant variants[] = {{64, 8, "row", "row", "none", ""},        {128, 6, "row", "col", "silu", ""},
                              {192, 5, "col", "row", "none", "add"},    {256, 4, "col", "col", "gelu_tanh", "add"},
                              {128, 6, "row", "row", "none", "add_vec>gelu"}, {64, 8, "row", "row", "silu", "add"}};
  for (const Variant& v : variants) {
    jit::ParamSet params{{"dtype", std::string("bf16")}, {"a_layout", std::string(v.a)}, {"b_layout", std::string(v.b)},
                         {"tile_m", std::int64_t{64}}, {"tile_n", v.tile_n}, {"tile_k", std::int64_t{64}}, {"stages", v.stages},
                         {"gate", std::string(v.gate)}};
    if (*v.epilogue) params.set("epilogue", std::string(v.epilogue));
    const Unit u{"gemm", "cuda-sm90a", "sm_90", params, "sm_90a"};
    INFO(u.label());
    jit::Selection only;
    only.implementation = u.implementation;
    auto s = jit::detail::resolve(u.kernel, u.params, jit::Target::parse("cuda:sm_90"), only);
    CHECK(s.unit.shape.max_split_k == 8);
    CHECK_THAT(s.unit.main.text, Contains("#define JITK_MAX_SPLIT_K 8"));
    const Outcome o = compile(u);
    CHECK(o.problem.empty());
  }
  // 128-row tiles and clusters along M never split: their text has no split path
  jit::ParamSet big{{"dtype", std::string("bf16")}, {"a_layout", std::string("row")}, {"b_layout", std::string("col")}};
  CHECK(jit::detail::resolve("gemm", big, jit::Target::parse("cuda:sm_90")).unit.shape.max_split_k == 1);
  big.set("tile_m", std::int64_t{64}), big.set("tile_n", std::int64_t{128}), big.set("tile_k", std::int64_t{64}), big.set("cluster_m", std::int64_t{2});
  CHECK(jit::detail::resolve("gemm", big, jit::Target::parse("cuda:sm_90")).unit.shape.max_split_k == 1);
}

TEST_CASE("cuda-sm90a's staged gemm epilogue compiles with its chain's tensors and vectors loaded ahead", "[nvrtc]") {
  if (!have_nvrtc()) return;
  // The default tiles (128 x 256, C staged) and a 64 x 64 tile, plain and gated: where the epilogue
  // reads memory the staged copy-out loads C and the chain's operands a chunk ahead
  // (jitk_chain::epilogue_load, then the steps on what it loaded). A tensor read after a store
  // step is read in its step, not ahead (the store may write it).
  struct Variant {
    const char *gate, *epilogue, *ahead;  // what epilogue_load loads ("": nothing)
    std::int64_t tile;                    // 0: the default
  };
  const Variant variants[] = {{"none", "add", "l.t0 = jitk::load<W>(e0 + at);", 0},
                              {"none", "add>store>mul", "l.t0 = jitk::load<W>(e0 + at);", 0},
                              {"none", "mul_vec>add>relu", "l.t1 = jitk::load<W>(e1 + at);", 64},
                              {"silu", "add", "l.t0 = jitk::load<W>(e0 + at);", 0},
                              {"silu", "tanh", "", 64},
                              {"none", "", "", 0}};
  for (const Variant& v : variants) {
    jit::ParamSet params{{"dtype", std::string("bf16")}, {"a_layout", std::string("row")}, {"b_layout", std::string("row")},
                         {"gate", std::string(v.gate)}};
    if (v.tile) {
      params.set("tile_m", v.tile), params.set("tile_n", v.tile), params.set("tile_k", std::int64_t{64});
      params.set("stages", std::int64_t{4});
    }
    if (*v.epilogue) params.set("epilogue", std::string(v.epilogue));
    const Unit u{"gemm", "cuda-sm90a", "sm_90", params, "sm_90a"};
    INFO(u.label());
    jit::Selection only;
    only.implementation = u.implementation;
    const auto s = jit::detail::resolve(u.kernel, u.params, jit::Target::parse("cuda:sm_90"), only);
    const std::string& text = s.unit.main.text;
    if (*v.ahead) CHECK_THAT(text, Contains(v.ahead));
    else CHECK_THAT(text, Contains("EpilogueLoads<W> l; (void)at; (void)col; return l; }"));  // loads nothing
    if (std::string(v.epilogue) == "mul_vec>add>relu") CHECK_THAT(text, Contains("l.t0 = jitk::load<W>(e0 + col);"));
    if (std::string(v.epilogue) == "add>store>mul") {  // the mul's tensor (e2) after the store: read in its step
      CHECK_THAT(text, Contains("const auto t = jitk::load<W>(e2 + at);"));
      CHECK_THAT(text, !Contains("l.t1 = "));
    }
    const Outcome o = compile(u);
    CHECK(o.problem.empty());
  }
}

TEST_CASE("cuda-sm90a's QKV epilogue (rope, the KV-cache write) compiles on staged, register and split tiles, and the generic text refuses it", "[nvrtc]") {
  if (!have_nvrtc()) return;
  // The sweep above leaves head_dim at 0 (an integer with a fallback), so no QKV unit: each path here.
  struct Variant {
    std::int64_t tile_m, tile_n, stages, cluster, head_dim, page_size;
    const char *rope, *dtype, *b;
    int split;  // the plan's max_split_k (64-row tiles split K: store_split)
  };
  const Variant variants[] = {
      {128, 256, 4, 1, 128, 16, "neox", "bf16", "row", 1},  // the default tiles, staged (prefill)
      {64, 128, 8, 1, 128, 16, "neox", "bf16", "row", 8},   // decode's: split K
      {64, 64, 8, 1, 64, 32, "neox", "f16", "col", 8},
      {128, 128, 7, 1, 128, 16, "neox", "bf16", "col", 1},  // no room to stage C: from registers
      {128, 256, 4, 2, 128, 16, "neox", "bf16", "row", 1},  // clusters along M
      {128, 256, 4, 1, 128, 0, "neox", "bf16", "row", 1},   // rope alone
      {64, 256, 4, 1, 64, 16, "none", "bf16", "row", 8},    // the cache write alone
      {128, 192, 4, 1, 64, 1, "none", "f16", "row", 1},
  };
  for (const Variant& v : variants) {
    jit::ParamSet params{{"dtype", std::string(v.dtype)}, {"a_layout", std::string("row")}, {"b_layout", std::string(v.b)},
                         {"tile_m", v.tile_m}, {"tile_n", v.tile_n}, {"tile_k", std::int64_t{64}}, {"stages", v.stages},
                         {"cluster_m", v.cluster}, {"rope", std::string(v.rope)}, {"head_dim", v.head_dim}, {"page_size", v.page_size}};
    const Unit u{"gemm", "cuda-sm90a", "sm_90", params, "sm_90a"};
    INFO(u.label());
    jit::Selection only;
    only.implementation = u.implementation;
    const auto s = jit::detail::resolve(u.kernel, u.params, jit::Target::parse("cuda:sm_90"), only);
    CHECK(s.unit.shape.max_split_k == v.split);
    CHECK_THAT(s.unit.main.text, Contains("#define JITK_HEAD_DIM " + std::to_string(v.head_dim) + "LL"));
    // JITK_TEST_DUMP_DIR: each unit's specialized text there, for ptxas -v (registers, spills)
    if (const char* dir = std::getenv("JITK_TEST_DUMP_DIR"); dir && *dir) {
      std::ofstream f(std::string(dir) + "/qkv_" + std::to_string(&v - variants) + ".cu");
      f << s.unit.main.text;
    }
    const Outcome o = compile(u);
    CHECK(o.problem.empty());
  }
  // Tiles that cannot hold whole heads, and the generic text: refused with the reason.
  jit::ParamSet narrow{{"dtype", std::string("bf16")}, {"a_layout", std::string("row")}, {"b_layout", std::string("row")},
                       {"tile_m", std::int64_t{64}}, {"tile_n", std::int64_t{64}}, {"tile_k", std::int64_t{64}}, {"stages", std::int64_t{8}},
                       {"rope", std::string("neox")}, {"head_dim", std::int64_t{128}}};
  jit::Selection sm90a;
  sm90a.implementation = "cuda-sm90a";
  CHECK_THROWS_WITH(jit::detail::resolve("gemm", narrow, jit::Target::parse("cuda:sm_90"), sm90a),
                    Contains("tile_n a multiple of head_dim (a tile holds whole heads)"));
  narrow.set("tile_n", std::int64_t{128}), narrow.set("head_dim", std::int64_t{40});
  CHECK_THROWS_WITH(jit::detail::resolve("gemm", narrow, jit::Target::parse("cuda:sm_90"), sm90a), Contains("head_dim must be a multiple of 16"));
  const jit::ParamSet plain_rope{{"dtype", std::string("bf16")}, {"a_layout", std::string("row")}, {"b_layout", std::string("row")},
                                 {"rope", std::string("neox")}, {"head_dim", std::int64_t{128}}};
  CHECK_THROWS_WITH(jit::detail::resolve("gemm", plain_rope, jit::Target::parse("cuda:sm_80")),
                    Contains("the QKV epilogue runs on cuda-sm90a"));
}

TEST_CASE("a Hopper-only text compiles for sm_90a whether the target names sm_90 or sm_90a", "[nvrtc]") {
  if (!have_nvrtc()) return;
  const jit::ParamSet params{{"dtype", std::string("bf16")}, {"a_layout", std::string("row")}, {"b_layout", std::string("col")}};
  for (const char* target : {"cuda:sm_90", "cuda:sm_90a"}) {
    INFO(target);
    auto s = jit::detail::resolve("gemm", params, jit::Target::parse(target));
    CHECK(s.unit.implementation == "cuda-sm90a");
    CHECK(s.compiler->arch() == "sm_90a");
  }
}

TEST_CASE("jitk info says CUDA can compile here (NVRTC) though no driver can run it", "[nvrtc]") {
  if (!have_nvrtc()) return;
  if (jit::cuda::available()) {
    std::printf("SKIPPED: this machine has a usable CUDA GPU\n");
    return;
  }
  auto r = jitk_test::run(jitk_test::kTool + " info", jitk_test::cache_env(cache_dir));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("cuda: unavailable: " + jit::cuda::unavailable_reason() +
                                " (NVRTC can compile for named sm targets)"));
}

TEST_CASE("the row kernels' CUBINs carry no module data: no __device__ variables for the driver to place at each load",
          "[nvrtc]") {
  if (!have_nvrtc()) return;
  // Under --device-as-default-execution-space a namespace-scope constexpr of a text (or a variable
  // template's instance) is a __device__ variable the CUBIN carries, used or not, and module data
  // costs each load of the module (docs/writing-kernels.md): the texts use enumerators and functions.
  // (rotary from theta keeps one: CUDA's sincosf reads its range-reduction table, __cudart_i2opi_f.)
  struct Case {
    const char* kernel;
    jit::ParamSet params;
  };
  const std::vector<Case> cases = {
      {"rms_norm", {{"dtype", std::string("bf16")}, {"hidden", std::int64_t{4096}}}},
      {"rms_norm", {{"dtype", std::string("f32")}, {"hidden", std::int64_t{1000}}, {"epilogue", std::string("mul_vec>tanh")}}},
      {"softmax", {{"dtype", std::string("bf16")}, {"hidden", std::int64_t{4096}}}},
      {"layer_norm", {{"dtype", std::string("bf16")}, {"hidden", std::int64_t{4096}}}},
      {"silu_and_mul", {{"dtype", std::string("bf16")}, {"hidden", std::int64_t{14336}}}},
      {"saxpy", {{"dtype", std::string("f16")}}},
      {"adamw", {{"dtype", std::string("f32")}}},
      {"rotary_embedding", {{"dtype", std::string("bf16")}, {"head_dim", std::int64_t{128}}, {"rotary_dim", std::int64_t{64}}, {"style", std::string("neox")}, {"source", std::string("table")}}},
      {"kv_cache_append", {{"dtype", std::string("bf16")}, {"head_dim", std::int64_t{128}}, {"page_size", std::int64_t{16}}}},
  };
  for (const Case& c : cases) {
    INFO(c.kernel << " " << c.params.to_string());
    const auto s = jit::detail::resolve(c.kernel, c.params, jit::Target::parse("cuda:sm_90"));
    const std::vector<char> cubin = s.compiler->compile(s.unit).bytes;
    REQUIRE(cubin.size() > 4);
    REQUIRE(std::memcmp(cubin.data(), "\x7f" "ELF", 4) == 0);
    const std::string_view image(cubin.data(), cubin.size());
    CHECK(image.find(".nv.global") == std::string_view::npos);  // the sections of __device__ variables
  }
}
