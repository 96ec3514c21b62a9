// decoder_layer: a Llama-style layer on jitk kernels (examples/decoder_layer.hpp) on the default
// target -- float on the CPU, bf16 on a GPU: a prefill of 2 sequences of 37 tokens and a decode
// step at hidden 256, checked against the same layer in float64; on a GPU then Llama-3-8B's layer
// (hidden 4096, 32 / 8 heads of 128, MLP 14336) over 1 x 2048 tokens, first forward (every get:
// cold compile or disk-cache load) and the next ones, wall clock (bench/gpu/layer_bench.cpp times it properly).
//   decoder_layer --compile TARGET [--jobs N] [--only NAME]: compiles Llama-3-8B's layer variants
//   (bf16; float on the CPU) for TARGET, e.g. cuda:sm_90 -- no device needed --, into a fresh
//   temporary cache, N at a time (default 1: each compile alone), printing each one's time: what
//   a cold start compiles (docs/decoder-layer.md). Run it again for another sample: NVRTC's own
//   cache is the driver's and is not used without a device (CUDA_CACHE_PATH).
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "decoder_layer.hpp"
#include "jit/cache.hpp"
#include "jit/config.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) { return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count(); }

template <class T> int run(bool gpu) {
  using namespace jitk_example;
  const LayerConfig small;
  const std::int64_t batch = 2, seqlen = 37;
  const auto w = random_weights<T>(small, 1);
  DecoderLayer<T> layer(small, w, batch, seqlen + 1, gpu);
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> d(-2, 2);
  auto inputs = [&](std::int64_t n) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = widen(narrow<T>(d(rng)));
    return v;
  };
  ReferenceCache cache;
  const auto x = inputs(batch * seqlen * small.hidden);
  auto t0 = clock_type::now();
  const auto y = layer.prefill(narrowed<T>(x), seqlen);
  const double first_ms = ms_since(t0);
  std::vector<double> got(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) got[i] = widen(y[i]);
  const double prefill_error = jitk_reference::relative_l2_error(got, layer_reference(small, w, x, batch, seqlen, {0, 0}, cache));
  const auto xd = inputs(batch * small.hidden);
  const auto yd = layer.decode(narrowed<T>(xd), {static_cast<std::int32_t>(seqlen), static_cast<std::int32_t>(seqlen)});
  got.assign(yd.size(), 0);
  for (std::size_t i = 0; i < yd.size(); ++i) got[i] = widen(yd[i]);
  const double decode_error = jitk_reference::relative_l2_error(got, layer_reference(small, w, xd, batch, 1, {seqlen, seqlen}, cache));
  const double tolerance = gpu ? 2e-2 : 1e-4;
  std::printf("hidden %lld: prefill %lld x %lld: first forward %.1f ms, rel. error %.1e; decode step rel. error %.1e  %s\n",
              static_cast<long long>(small.hidden), static_cast<long long>(batch), static_cast<long long>(seqlen), first_ms, prefill_error,
              decode_error, prefill_error <= tolerance && decode_error <= tolerance ? "OK" : "WRONG");
  std::printf("MLP: %s\n", layer.fused_mlp() ? "one gated gemm (SiLU-and-mul in its epilogue)" : "gate/up gemm, then silu_and_mul");
  if (prefill_error > tolerance || decode_error > tolerance) return 1;
  if (!gpu) return 0;
  LayerConfig llama{4096, 32, 8, 128, 14336};
  const auto wl = random_weights<T>(llama, 3);
  DecoderLayer<T> big(llama, wl, 1, 2048, gpu);
  auto& step = big.prepare_prefill(2048);
  step.x.upload(narrowed<T>(inputs(2048 * llama.hidden)));
  for (int i = 0; i < 4; ++i) {
    t0 = clock_type::now();
    big.run(step);
    jit::cuda::synchronize();
    std::printf("Llama-3-8B layer, prefill 1 x 2048: forward %d %.2f ms%s\n", i, ms_since(t0), i == 0 ? " (every get)" : "");
  }
  return 0;
}

// --compile: each variant compiled for `target` in a fresh temporary cache, `jobs` at a time.
int compile_variants(const std::string& target_text, int jobs, const std::string& only) {
  using namespace jitk_example;
  const jit::Target target = jit::Target::parse(target_text);
  const jit::DType dtype = target.backend == jit::Backend::Cpu ? jit::DType::f32 : jit::DType::bf16;
  const LayerConfig llama{4096, 32, 8, 128, 14336};
  const bool fused = !jit::implementations_for("gemm", target, jit::kernels::Gemm::to_params(layer_params::gated_gemm(dtype))).empty();
  std::vector<jit::cache::WarmItem> items;
  for (const auto& v : layer_variants(llama, dtype, fused, true))
    if (only.empty() || v.name == only) items.push_back({v.kernel, target, v.params, v.name, {}});
  if (items.empty()) {
    std::fprintf(stderr, "decoder_layer: no variant named '%s'\n", only.c_str());
    return 2;
  }
  char dir[] = "/tmp/jitk-layer-compile-XXXXXX";
  if (!mkdtemp(dir)) {
    std::fprintf(stderr, "decoder_layer: cannot make a temporary cache folder: %s\n", std::strerror(errno));
    return 1;
  }
  struct RemoveDir {
    const char* d;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } remove_dir{dir};
  jit::Config config;
  config.cache_dir = dir;
  jit::configure(config);
  const auto t0 = clock_type::now();
  int failed = 0;
  jit::cache::warm(items, jobs, [&](const jit::cache::WarmResult& r) {
    using O = jit::cache::WarmResult::Outcome;
    std::printf("%-18s %-18s %9.1f ms%s%s\n", r.item->origin.c_str(), r.item->kernel.c_str(), r.ms,
                r.outcome == O::Compiled ? "" : "  FAILED: ", r.outcome == O::Compiled ? "" : r.error.c_str());
    failed += r.outcome != O::Compiled;
    std::fflush(stdout);
  });
  std::printf("%zu variants for %s, %d at a time: %.1f ms%s\n", items.size(), target.to_string().c_str(), jobs, ms_since(t0),
              failed ? " (some FAILED)" : "");
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1) {
      std::string target, only;
      int jobs = 1;
      for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--compile" && i + 1 < argc) target = argv[++i];
        else if (a == "--jobs" && i + 1 < argc) jobs = std::atoi(argv[++i]);
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else target.clear(), i = argc;  // usage
      }
      if (target.empty() || jobs < 1 || jobs > 64) {
        std::fprintf(stderr, "usage: decoder_layer [--compile TARGET [--jobs N (1-64)] [--only NAME]]\n");
        return 2;
      }
      return compile_variants(target, jobs, only);
    }
    const bool gpu = jit::default_target().backend == jit::Backend::Cuda;
    std::printf("decoder_layer on %s\n", jit::default_target().to_string().c_str());
    return gpu ? run<jit::bfloat16>(true) : run<float>(false);
  } catch (const jit::Error& e) {
    std::fprintf(stderr, "decoder_layer: %s: %s\n", jit::to_string(e.code()), e.what());
    return 1;
  }
}
