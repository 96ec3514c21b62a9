// jitk_layer_bench: Llama-3-8B's decoder layer (hidden 4096, 32 / 8 heads of 128, MLP 14336, bf16)
// on jitk kernels (examples/decoder_layer.hpp), the figures issue 25 asks for, each with the
// baseline measured in the same run:
//   prefill 1 x 2048 and 8 x 2048: median device time of the whole layer (CUDA events on a stream of
//     our own), and a per-kernel breakdown (each launch timed alone); the layer with its QKV
//     projection as three gemms (as before one gemm did it) and with its MLP unfused (the gate/up gemm,
//     then silu_and_mul, as before the gated gemm did both) timed in the same run;
//   decode, batch 64 over context 4096: one step launched kernel by kernel and replayed as a CUDA
//     graph, against the bound its bytes (weights + KV cache read once) set at the D2D copy
//     bandwidth measured here;
//   cold start in a child process (empty jitk cache, empty driver compute cache): every variant
//     compiled from one thread each, then the first forward; and a new process on the warm cache:
//     its first forward including every jit::get.
// torch eager / torch.compile on the same shapes: bench/gpu/torch_baseline.py --layer (run.sh runs
// both); --dump DIR writes the 1 x 2048 prefill's input, weights and output (raw bf16) for its
// correctness check against PyTorch.
//   jitk_layer_bench [--json] [--dump DIR] [--prefill-only | --prefill | --cold N]
//     (--prefill-only: the 1 x 2048 prefill alone; --prefill: 1 x 2048 and 8 x 2048, no tuning,
//     decode or cold start: an A/B of kernel texts at both sizes; --cold N: the cold start and warm
//     process rows alone, from N cold children, each child's figures and its variants' get times
//     printed: the cold start's critical path)
//   jitk_layer_bench --child-first-forward [--compile-all] [--ready-file F --start-file G]
//     (what the parent, or bench/gpu/fleet.sh, runs in children)
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "../../examples/decoder_layer.hpp"

namespace {

using T = jit::bfloat16;
using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t) { return std::chrono::duration<double, std::milli>(clock_type::now() - t).count(); }
const clock_type::time_point g_start = clock_type::now();  // as near the process's start as C++ gets
bool g_json = false;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void emit(const std::string& bench, double value, const char* unit, double baseline, const std::string& baseline_name) {
  const double ratio = baseline > 0 ? value / baseline : 0;
  if (g_json)
    std::printf("{\"bench\": \"%s\", \"value\": %.4f, \"unit\": \"%s\", \"baseline\": %.4f, \"baseline_name\": \"%s\", \"ratio\": %.3f}\n",
                bench.c_str(), value, unit, baseline, baseline_name.c_str(), ratio);
  else
    std::printf("%-44s %10.4f %-4s baseline %-36s %10.4f  ratio %.3f\n", bench.c_str(), value, unit, baseline_name.c_str(), baseline, ratio);
  std::fflush(stdout);
}

const jitk_example::LayerConfig kLlama{4096, 32, 8, 128, 14336};

// Seeded uniform values in [-s, s], rounded to bf16: a hash of the index (splitmix64), filled by all
// cores (the layer's 218 M weights one by one from mt19937 would take seconds).
std::vector<T> uniform(std::int64_t n, double lo, double hi, std::uint64_t seed) {
  std::vector<T> v(static_cast<std::size_t>(n));
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      for (std::int64_t i = w; i < n; i += workers) {
        std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(i) + 1;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        v[i] = jit::to_bfloat16(static_cast<float>(lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53));
      }
    });
  for (auto& t : threads) t.join();
  return v;
}

jitk_example::TypedWeights<T> llama_weights() {
  const auto& c = kLlama;
  const double s_in = 1 / std::sqrt(double(c.hidden)), s_q = 1 / std::sqrt(double(c.q_width())), s_mlp = 1 / std::sqrt(double(c.mlp));
  return {uniform(c.hidden, 0.5, 1.5, 1), uniform(c.hidden * c.qkv_width(), -s_in, s_in, 2), uniform(c.q_width() * c.hidden, -s_q, s_q, 3),
          uniform(c.hidden, 0.5, 1.5, 4), uniform(c.hidden * 2 * c.mlp, -s_in, s_in, 5), uniform(c.mlp * c.hidden, -s_mlp, s_mlp, 6)};
}

std::int64_t weight_bytes() {
  const auto& c = kLlama;
  return 2 * (2 * c.hidden + c.hidden * c.qkv_width() + c.q_width() * c.hidden + c.hidden * 2 * c.mlp + c.mlp * c.hidden);
}

using Layer = jitk_example::DecoderLayer<T>;

// Median device time of fn() over reps, on `stream`.
template <class F> double device_ms(jit::Stream stream, F&& fn, int reps = 20) {
  jit::cuda::Timer timer;
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    timer.start(stream);
    fn();
    ms.push_back(timer.stop_ms(stream));
  }
  return median(ms);
}

// Each launch of a step timed alone (the kernel's own time; the sum is less than the step's when
// launches overlap nothing, more when they would), medians over a few runs, printed in launch order.
void breakdown(Layer& layer, Layer::Step& step, jit::Stream stream, const std::string& prefix) {
  std::vector<std::string> names;
  std::vector<std::vector<double>> times;
  for (int rep = 0; rep < 7; ++rep) {
    jit::cuda::Timer timer;
    std::size_t index = 0;
    bool running = false;
    layer.run(step, stream, [&](const char* what) {
      if (running) {
        const double ms = timer.stop_ms(stream);
        if (times.size() < index) times.resize(index);
        times[index - 1].push_back(ms);
      }
      running = what != nullptr;
      if (!what) return;
      if (names.size() <= index) names.emplace_back(what);
      ++index;
      timer.start(stream);
    });
  }
  double total = 0;
  for (const auto& t : times) total += median(t);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double ms = median(times[i]);
    if (g_json)
      std::printf("{\"bench\": \"%s_kernel_%02zu\", \"kernel\": \"%s\", \"ms\": %.4f, \"share\": %.3f}\n", prefix.c_str(), i, names[i].c_str(), ms,
                  ms / total);
    else
      std::printf("  %-28s %8.4f ms  %5.1f%%\n", names[i].c_str(), ms, 100 * ms / total);
  }
  std::fflush(stdout);
}

// Each kernel's cost inside the decode step's graph: the step's graph without it, replayed in turn
// with the whole one (5 x 20 replays each, medians of medians); beside it the time the bytes it must
// read (a gemm's weight, attention's K and V; the row kernels' < 1 MB counted as none) take at the
// copy rate. What the graph hides of a kernel's launch and ramp, the breakdown above cannot show.
void in_graph_costs(Layer& layer, Layer::Step& step, jit::cuda::OwnedStream& stream, jit::cuda::Graph& whole, double copy_gbps,
                    std::int64_t batch, std::int64_t context) {
  const auto& c = kLlama;
  std::vector<std::string> names;
  layer.run(step, stream, [&](const char* what) { if (what) names.emplace_back(what); });
  stream.synchronize();
  const std::map<std::string, double> bytes = {
      {"gemm qkv", 2.0 * c.hidden * c.qkv_width()},
      {"gemm o + residual", 2.0 * c.q_width() * c.hidden},
      {"gemm gate/up + silu", 2.0 * c.hidden * 2 * c.mlp},
      {"gemm down + residual", 2.0 * c.mlp * c.hidden},
      {"attention_decode", 2.0 * 2 * batch * (context + 1) * c.kv_width()}};
  double sum = 0;
  for (int i = 0; i < static_cast<int>(names.size()); ++i) {
    auto without = jit::cuda::Graph::capture(stream, [&] { layer.run(step, stream, {}, [&](int place, const char*) { return place != i; }); });
    std::vector<double> full, less;
    for (int r = 0; r < 5; ++r) {
      full.push_back(device_ms(stream, [&] { whole.replay(stream); }, 20));
      less.push_back(device_ms(stream, [&] { without.replay(stream); }, 20));
    }
    const double cost = median(full) - median(less);
    const auto b = bytes.find(names[i]);
    const double at_copy = b == bytes.end() ? 0.0 : b->second / copy_gbps / 1e6;
    sum += cost;
    if (g_json)
      std::printf("{\"bench\": \"layer_decode_b64_ctx4096_in_graph_%02d\", \"kernel\": \"%s\", \"ms\": %.4f, \"bytes_at_copy_ms\": %.4f}\n", i,
                  names[i].c_str(), cost, at_copy);
    else
      std::printf("  in the graph: %-24s %8.4f ms (its bytes at the copy rate %.4f)\n", names[i].c_str(), cost, at_copy);
  }
  emit("layer_decode_b64_ctx4096_in_graph_sum_ms", sum, "ms", 0, "the kernels' costs in the graph, summed");
  std::fflush(stdout);
}

double copy_gbps(std::size_t bytes) {
  jit::cuda::DeviceArray<unsigned char> a(bytes), b(bytes);
  jit::cuda::OwnedStream stream;
  const double ms = device_ms(stream, [&] {
    cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(b.data()), reinterpret_cast<CUdeviceptr>(a.data()), bytes,
                      static_cast<CUstream>(jit::Stream(stream).handle));
  });
  return 2.0 * static_cast<double>(bytes) / ms / 1e6;  // read + write
}

void write_raw(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

// Every gemm tile the tuner will try, for the layer's three gemm variants, compiled from 16 threads
// first (the tuner compiles its candidates one by one): what `jitk warm --tune -j` does.
void precompile_gemm_candidates() {
  using jit::kernels::Gemm;
  Layer probe(kLlama, jitk_example::TypedWeights<T>{std::vector<T>(1), {}, {}, std::vector<T>(1), {}, {}}, 1, 16, true);
  std::vector<Gemm::Params> all;
  for (const Gemm::Params& base : {Gemm::Params{jit::DType::bf16}, probe.residual_gemm_params(), probe.gated_gemm_params()})
    for (const auto& c : Gemm::candidates(base, jit::default_target())) all.push_back(c);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  const auto t0 = clock_type::now();
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (std::size_t i; (i = next++) < all.size();) try {
          jit::get<Gemm>(all[i]);
        } catch (const jit::Error&) {  // a tile no implementation takes: the tuner skips it too
        }
    });
  for (auto& t : threads) t.join();
  emit("layer_gemm_candidates_precompile_ms", ms_since(t0), "ms", double(all.size()), "candidates (baseline column: count)");
}

// prefill_only: the 1 x 2048 prefill and its breakdown alone (an A/B of kernel texts through
// JITK_KERNEL_DIR, e.g. bench/gpu/ab.sh's folders): no tuning, 8 x 2048, decode or cold start.
// prefill (--prefill): the same at 1 x 2048 and 8 x 2048.
// decode (--decode): the decode step alone, its same-run baselines and breakdown (no tuning).
int bench(const std::string& dump, bool prefill_only, bool prefill = false, bool decode = false) {
  const bool prefills_alone = prefill_only || prefill;
  if (!prefills_alone && !decode) precompile_gemm_candidates();
  const double copy = copy_gbps(std::size_t(1) << 30);
  emit("layer_d2d_copy_1GiB", copy, "GB/s", 0, "-");
  auto weights = llama_weights();
  if (!dump.empty()) {
    write_raw(dump + "/norm1.bf16", weights.norm1);
    write_raw(dump + "/wqkv.bf16", weights.wqkv);
    write_raw(dump + "/wo.bf16", weights.wo);
    write_raw(dump + "/norm2.bf16", weights.norm2);
    // [gate | up], as PyTorch's layer reads it (the layer's own is in the gated gemm's layout)
    write_raw(dump + "/wgu.bf16", jitk_reference::deinterleave_gate_up(weights.wgu, kLlama.hidden, kLlama.mlp));
    write_raw(dump + "/wd.bf16", weights.wd);
  }
  jit::cuda::OwnedStream stream;
  const auto& c = kLlama;
  // prefill: 1 x 2048, 8 x 2048 (a layer a batch size: its KV cache is sized for it)
  for (std::int64_t batch : {1, 8}) {
    if ((prefill_only && batch > 1) || decode) break;
    const std::int64_t seqlen = 2048;
    Layer layer(c, batch == 1 ? weights : llama_weights(), batch, seqlen + 1, true);
    auto& step = layer.prepare_prefill(seqlen);
    const auto x = uniform(batch * seqlen * c.hidden, -2, 2, 100 + batch);
    step.x.upload(x);
    layer.run(step, stream);  // every get, every first launch
    stream.synchronize();
    if (batch == 1 && !dump.empty()) {
      write_raw(dump + "/x.bf16", x);
      write_raw(dump + "/y.bf16", step.y.host());
    }
    const double ms = device_ms(stream, [&] { layer.run(step, stream); });
    const double flops = 2.0 * batch * seqlen * (c.hidden * c.qkv_width() + c.q_width() * c.hidden + 3.0 * c.hidden * c.mlp) +
                         2.0 * batch * c.heads * c.head_dim * double(seqlen) * seqlen;  // causal attention: half of 4 n^2 d
    const std::string name = "layer_prefill_" + std::to_string(batch) + "x" + std::to_string(seqlen);
    emit(name + "_ms", ms, "ms", 0, "torch: torch_baseline.py --layer");
    emit(name + "_TFLOPs", flops / ms / 1e9, "TF/s", 0, "-");
    // the same layer with the QKV projection as three gemms (as before the one gemm), same run
    layer.use_three_qkv_gemms(true);
    layer.run(step, stream);
    stream.synchronize();
    const double three = device_ms(stream, [&] { layer.run(step, stream); });
    layer.use_three_qkv_gemms(false);
    emit(name + "_three_qkv_gemms_ms", three, "ms", ms, "one QKV gemm, same run (ratio: three / one)");
    // the same layer with its MLP unfused (gate/up gemm, then silu_and_mul), same run
    layer.use_unfused_mlp(true);
    layer.run(step, stream);
    stream.synchronize();
    const double unfused = device_ms(stream, [&] { layer.run(step, stream); });
    layer.use_unfused_mlp(false);
    emit(name + "_unfused_mlp_ms", unfused, "ms", ms, "gated gemm, same run (ratio: unfused / fused)");
    // the same layer with rotary and the KV-cache write as their own kernels after the QKV gemm
    // (where the default fuses them into its epilogue: cuda-sm90a), same run
    if (layer.fused_qkv(step.tokens)) {
      layer.use_fused_qkv(false);
      layer.run(step, stream);
      stream.synchronize();
      const double unfused_qkv = device_ms(stream, [&] { layer.run(step, stream); });
      emit(name + "_unfused_qkv_ms", unfused_qkv, "ms", ms, "QKV gemm with rotary + cache write, same run (ratio: unfused / fused)");
      breakdown(layer, step, stream, name + "_unfused_qkv");
      layer.use_fused_qkv(std::nullopt);
    }
    breakdown(layer, step, stream, name);
    if (prefills_alone) continue;
    // the same with each gemm's tile tuned for its shape (the first run tunes, untimed)
    layer.use_tuned_gemms(true);
    layer.run(step, stream);
    stream.synchronize();
    const double tuned = device_ms(stream, [&] { layer.run(step, stream); });
    emit(name + "_tuned_gemms_ms", tuned, "ms", ms, "default tiles, same run (ratio: tuned / default)");
    breakdown(layer, step, stream, name + "_tuned");
  }
  if (!dump.empty()) weights = {};
  if (prefills_alone) return 0;
  // decode: batch 64 over context 4096, one step (a new token a sequence at position 4096)
  {
    const std::int64_t batch = 64, context = 4096;
    Layer layer(c, llama_weights(), batch, context + 1, true);
    auto& step = layer.prepare_decode(std::vector<std::int32_t>(batch, static_cast<std::int32_t>(context)));
    step.x.upload(uniform(batch * c.hidden, -2, 2, 200));
    layer.run(step, stream);
    stream.synchronize();
    const double bytes = double(weight_bytes()) + 2.0 * 2 * batch * (context + 1) * c.kv_width();
    const double bound_ms = bytes / copy / 1e6;
    const double eager = device_ms(stream, [&] { layer.run(step, stream); }, 50);
    auto graph = jit::cuda::Graph::capture(stream, [&] { layer.run(step, stream); });
    const double replay = device_ms(stream, [&] { graph.replay(stream); }, 50);
    // host wall clock of 20 graph replays back to back: what a serving loop sees
    stream.synchronize();
    auto t0 = clock_type::now();
    for (int i = 0; i < 20; ++i) graph.replay(stream);
    stream.synchronize();
    const double wall = ms_since(t0) / 20;
    emit("layer_decode_b64_ctx4096_bound_ms", bound_ms, "ms", 0, "weights + KV cache bytes at the D2D copy rate");
    emit("layer_decode_b64_ctx4096_launches_ms", eager, "ms", bound_ms, "bound (ratio: time / bound)");
    emit("layer_decode_b64_ctx4096_graph_ms", replay, "ms", bound_ms, "bound (ratio: time / bound)");
    emit("layer_decode_b64_ctx4096_graph_wall_ms", wall, "ms", bound_ms, "bound (ratio: time / bound)");
    emit("layer_decode_b64_ctx4096_fraction_of_bound", bound_ms / replay, "x", 0.95, "issue 25's target");
    {  // the QKV projection as three gemms (as before the one gemm), same run, replayed from a graph
      layer.use_three_qkv_gemms(true);
      layer.run(step, stream);
      stream.synchronize();
      auto three_graph = jit::cuda::Graph::capture(stream, [&] { layer.run(step, stream); });
      const double three = device_ms(stream, [&] { three_graph.replay(stream); }, 50);
      layer.use_three_qkv_gemms(false);
      emit("layer_decode_b64_ctx4096_three_qkv_gemms_graph_ms", three, "ms", replay, "one QKV gemm, same run (ratio: three / one)");
    }
    {  // the MLP unfused (gate/up gemm, then silu_and_mul), same run, replayed from a graph
      layer.use_unfused_mlp(true);
      layer.run(step, stream);
      stream.synchronize();
      auto unfused_graph = jit::cuda::Graph::capture(stream, [&] { layer.run(step, stream); });
      const double unfused = device_ms(stream, [&] { unfused_graph.replay(stream); }, 50);
      layer.use_unfused_mlp(false);
      emit("layer_decode_b64_ctx4096_unfused_mlp_graph_ms", unfused, "ms", replay, "gated gemm, same run (ratio: unfused / fused)");
    }
    if (layer.fused_qkv()) {  // decode runs the unfused kernels by default: the fused QKV gemm, same run, from a graph
      layer.use_fused_qkv(true);
      layer.run(step, stream);
      stream.synchronize();
      auto fused_graph = jit::cuda::Graph::capture(stream, [&] { layer.run(step, stream); });
      const double fused = device_ms(stream, [&] { fused_graph.replay(stream); }, 50);
      emit("layer_decode_b64_ctx4096_fused_qkv_graph_ms", fused, "ms", replay,
           "the unfused QKV kernels (the default), same run (ratio: fused / unfused)");
      breakdown(layer, step, stream, "layer_decode_b64_ctx4096_fused_qkv");
      layer.use_fused_qkv(std::nullopt);
    }
    breakdown(layer, step, stream, "layer_decode_b64_ctx4096");
    in_graph_costs(layer, step, stream, graph, copy, batch, context);
    if (decode) return 0;
    layer.use_tuned_gemms(true);
    layer.run(step, stream);
    stream.synchronize();
    auto tuned_graph = jit::cuda::Graph::capture(stream, [&] { layer.run(step, stream); });
    const double tuned = device_ms(stream, [&] { tuned_graph.replay(stream); }, 50);
    emit("layer_decode_b64_ctx4096_tuned_gemms_graph_ms", tuned, "ms", bound_ms, "bound (ratio: time / bound)");
    breakdown(layer, step, stream, "layer_decode_b64_ctx4096_tuned");
  }
  for (const auto& t : jit::cache::tuning())
    std::printf("{\"bench\": \"layer_tuning\", \"kernel\": \"%s\", \"base\": \"%s\", \"shape_class\": \"%s\", \"choice\": \"%s\", "
                "\"best_ms\": %.4f, \"default_ms\": %.4f, \"tuning_ms\": %.0f}\n",
                t.kernel.c_str(), t.base_params.c_str(), t.shape_class.c_str(), t.choice.c_str(), t.best_ms, t.default_ms, t.tuning_ms);
  return 0;
}

// In a child: the process's first forward (prefill 1 x 2048), with every get; with --compile-all
// every variant is got first, from one thread each (a cold start's compiles in parallel).
// A fleet's child (bench/gpu/fleet.sh) says it is set up by creating ready_file, then waits (bounded)
// for start_file, so that every child of the fleet asks for its kernels at the same moment.
void fleet_barrier(const std::string& ready_file, const std::string& start_file) {
  if (!ready_file.empty()) std::ofstream(ready_file) << getpid() << "\n";
  if (start_file.empty()) return;
  for (int i = 0; access(start_file.c_str(), F_OK) != 0; ++i) {
    if (i > 600000) throw std::runtime_error("no start file " + start_file + " after 600 s");
    usleep(1000);
  }
}

// FNV-1a of the output's bytes: the fleet's children compare theirs with one node's.
template <class V> unsigned long long checksum(const V& v) {
  unsigned long long h = 1469598103934665603ull;
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size() * sizeof(v[0]); ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

int child_first_forward(bool compile_all, const std::string& ready_file, const std::string& start_file) {
  const auto& c = kLlama;
  Layer layer(c, llama_weights(), 1, 2049, true);
  auto& step = layer.prepare_prefill(2048);
  step.x.upload(uniform(2048 * c.hidden, -2, 2, 7));
  jit::cuda::synchronize();
  const double setup_ms = ms_since(g_start);
  fleet_barrier(ready_file, start_file);
  const auto t0 = clock_type::now();
  std::size_t variants = 0;
  std::vector<Layer::VariantTiming> timings;
  if (compile_all) variants = layer.compile_all(2048, &timings);
  const double compile_ms = ms_since(t0);
  jit::cuda::OwnedStream stream;
  layer.run(step, stream);
  stream.synchronize();
  const double first_ms = ms_since(t0);
  const auto t1 = clock_type::now();
  layer.run(step, stream);
  stream.synchronize();
  const double second_ms = ms_since(t1);
  // each variant's get (cold: its compile), when it began and returned after compile_all began
  for (const auto& t : timings) std::printf("variant %s start_ms %.1f end_ms %.1f\n", t.name.c_str(), t.start_ms, t.end_ms);
  std::printf("setup_ms %.1f compile_all_ms %.1f variants %zu first_forward_ms %.2f second_forward_ms %.2f\n", setup_ms, compile_ms, variants,
              first_ms, second_ms);
  // the output's checksum (after the timings): a fleet's children compare theirs, and --cold's rows
  // on other kernel texts theirs with the built-in texts' (the same math gives the same bits)
  std::printf("checksum %016llx\n", checksum(step.y.host()));
  return 0;
}

struct ChildResult {
  double compile_all_ms = -1, first_forward_ms = -1, second_forward_ms = -1;
  std::vector<std::string> variant_lines;  // the child's "variant NAME start_ms S end_ms E" lines
  std::string checksum;                    // of its output after the first forward
};
ChildResult run_child(const std::string& self, const std::string& env, bool compile_all) {
  const std::string cmd = env + " '" + self + "' --child-first-forward" + (compile_all ? " --compile-all" : "") + " 2>&1";
  ChildResult r;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char line[1024];
    while (std::fgets(line, sizeof line, p)) {
      std::size_t variants = 0;
      double setup = 0;
      if (std::strncmp(line, "variant ", 8) == 0) r.variant_lines.emplace_back(line);
      else if (std::strncmp(line, "checksum ", 9) == 0) r.checksum = std::string(line + 9, std::strcspn(line + 9, "\n"));
      else if (std::sscanf(line, "setup_ms %lf compile_all_ms %lf variants %zu first_forward_ms %lf second_forward_ms %lf", &setup, &r.compile_all_ms,
                           &variants, &r.first_forward_ms, &r.second_forward_ms) != 5)
        std::fprintf(stderr, "child: %s", line);
    }
    pclose(p);
  }
  return r;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "jitk_layer_bench";
}

// Cold: an empty jitk cache and an empty driver compute cache (NVRTC's output is cached there too),
// every variant compiled at once, then the first forward. Warm: a new process on those caches.
// `samples` cold children (each with its warm ones after it); with `each`, every cold child's figures
// and its variants' get times (start and end, ms after compile_all began: the cold start's critical path).
void cold_and_warm(int samples = 3, bool each = false) {
  const std::string self = self_path();
  std::vector<double> cold, cold_forward, warm, second;
  for (int i = 0; i < samples; ++i) {
    char jitk_dir[] = "/tmp/jitk-layer-cold-XXXXXX", cuda_dir[] = "/tmp/jitk-layer-cuda-XXXXXX";
    if (!mkdtemp(jitk_dir) || !mkdtemp(cuda_dir)) return;
    const std::string env = std::string("JITK_CACHE_DIR=") + jitk_dir + " CUDA_CACHE_PATH=" + cuda_dir;
    const auto c = run_child(self, env, true);
    cold.push_back(c.compile_all_ms);
    cold_forward.push_back(c.first_forward_ms);
    if (each) {
      std::printf("cold sample %d: compile_all %.1f ms, first forward done at %.1f ms, output checksum %s\n", i, c.compile_all_ms,
                  c.first_forward_ms, c.checksum.c_str());
      for (const auto& v : c.variant_lines) std::printf("  %s", v.c_str());
      std::fflush(stdout);
    }
    for (int j = 0; j < (each ? 1 : 3); ++j) {  // --cold: one warm child a sample (each child builds the weights: ~seconds)
      const auto w = run_child(self, env, false);
      warm.push_back(w.first_forward_ms);
      second.push_back(w.second_forward_ms);
    }
    std::system((std::string("rm -rf ") + jitk_dir + " " + cuda_dir).c_str());
  }
  emit("layer_cold_compile_all_ms", median(cold), "ms", 16100, "torch.compile first call (issue 25)");
  emit("layer_cold_compile_and_first_forward_ms", median(cold_forward), "ms", 3000, "issue 25's target");
  emit("layer_warm_process_first_forward_ms", median(warm), "ms", 20, "issue 25's target");
  emit("layer_warm_process_second_forward_ms", median(second), "ms", 0, "-");
}

// Gemms of few rows (decode) at the default params (the few-rows route where the default tiles
// leave SMs idle) against cuda-sm90a tiles chosen by hand: GB/s of B read (the weights), median.
void sweep_few_rows() {
  using jit::kernels::Gemm;
  jit::cuda::OwnedStream stream;
  std::vector<Gemm::Params> candidates = {Gemm::Params{jit::DType::bf16}};
  for (auto [tm, tn, st] : {std::tuple{64, 64, 8}, {64, 128, 6}, {64, 64, 6}, {64, 192, 5}}) {
    Gemm::Params p{jit::DType::bf16};
    p.tile_m = tm, p.tile_n = tn, p.tile_k = 64, p.stages = st;
    candidates.push_back(p);
  }
  for (std::int64_t k : {4096, 14336})
    for (std::int64_t n : {1024, 2048, 3072, 4096, 6144, 8192, 14336, 28672}) {
      const std::int64_t b_elems = k * n;
      jit::cuda::DeviceArray<T> a(static_cast<std::size_t>(64 * k)), b(static_cast<std::size_t>(b_elems)), c(static_cast<std::size_t>(64 * n));
      a.fill_bytes(0x3c), b.fill_bytes(0x3c);
      for (std::int64_t m : {16, 32, 48, 64}) {
        std::string line = "m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k) + ":";
        for (const auto& p : candidates) {
          try {
            auto g = jit::get<Gemm>(p);
            const Gemm::Args args{m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c.data(), n};
            const double ms = device_ms(stream, [&] { g.launch(args, stream); }, 30);
            char buf[96];
            std::snprintf(buf, sizeof buf, "  %dx%dx%d %.4f ms %.0f GB/s", int(p.tile_m), int(p.tile_n), int(p.stages), ms, 2.0 * b_elems / ms / 1e6);
            line += buf;
          } catch (const jit::Error& e) {
            line += "  (" + std::string(e.what()).substr(0, 40) + ")";
          }
        }
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string dump, ready_file, start_file;
    bool child = false, compile_all = false, sweep = false, prefill_only = false, prefill = false, decode = false;
    int cold_samples = 0;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--json") g_json = true;
      else if (a == "--dump" && i + 1 < argc) dump = argv[++i];
      else if (a == "--child-first-forward") child = true;
      else if (a == "--compile-all") compile_all = true;
      else if (a == "--ready-file" && i + 1 < argc) ready_file = argv[++i];
      else if (a == "--start-file" && i + 1 < argc) start_file = argv[++i];
      else if (a == "--sweep-few-rows") sweep = true;
      else if (a == "--prefill-only") prefill_only = true;
      else if (a == "--prefill") prefill = true;
      else if (a == "--decode") decode = true;
      else if (a == "--cold" && i + 1 < argc) {
        cold_samples = std::atoi(argv[++i]);
        if (cold_samples < 1 || cold_samples > 50) {
          std::fprintf(stderr, "jitk_layer_bench: --cold N takes 1 to 50 samples, not '%s'\n", argv[i]);
          return 2;
        }
      }
      else {
        std::fprintf(stderr, "usage: jitk_layer_bench [--json] [--dump DIR] [--prefill-only | --prefill | --decode | --cold N] [--sweep-few-rows] | --child-first-forward [--compile-all] [--ready-file F --start-file G]\n");
        return 2;
      }
    }
    if (!jit::cuda::available()) {
      std::fprintf(stderr, "jitk_layer_bench: no GPU (%s): nothing to measure\n", jit::cuda::unavailable_reason().c_str());
      return 0;
    }
    if (child) return child_first_forward(compile_all, ready_file, start_file);
    if (sweep) {
      sweep_few_rows();
      return 0;
    }
    if (cold_samples > 0) {
      cold_and_warm(cold_samples, true);
      return 0;
    }
    if (!prefill_only && !prefill && !decode) cold_and_warm();
    return bench(dump, prefill_only, prefill, decode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jitk_layer_bench: %s\n", e.what());
    return 1;
  }
}
