// decoder_layer: a Llama-style layer on jitk kernels (examples/decoder_layer.hpp) on the default
// target -- float on the CPU, bf16 on a GPU: a prefill of 2 sequences of 37 tokens and a decode
// step at hidden 256, checked against the same layer in float64; on a GPU then Llama-3-8B's layer
// (hidden 4096, 32 / 8 heads of 128, MLP 14336) over 1 x 2048 tokens, first forward (every get:
// cold compile or disk-cache load) and the next ones, wall clock (bench/gpu/layer_bench.cpp times it properly).
#include <chrono>
#include <cstdio>

#include "decoder_layer.hpp"

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
  for (auto [what, tokens] : {std::pair<const char*, std::int64_t>{"prefill", batch * seqlen}, {"decode", batch}})
    std::printf("QKV %s: %s\n", what, layer.fused_qkv(tokens) ? "one gemm (rotary and the KV-cache write in its epilogue)"
                                                              : "qkv gemm, then rotary_embedding and kv_cache_append");
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

}  // namespace

int main() {
  try {
    const bool gpu = jit::default_target().backend == jit::Backend::Cuda;
    std::printf("decoder_layer on %s\n", jit::default_target().to_string().c_str());
    return gpu ? run<jit::bfloat16>(true) : run<float>(false);
  } catch (const jit::Error& e) {
    std::fprintf(stderr, "decoder_layer: %s: %s\n", jit::to_string(e.code()), e.what());
    return 1;
  }
}
