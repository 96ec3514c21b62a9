// A Llama-style decoder layer on jitk kernels only (issue 25): RMSNorm, the QKV projection (one gemm
// over the concatenated weight [hidden, (heads + 2 kv_heads) x head_dim], its output row [q | k | v]
// a token), rotary on q and k in place inside that output, the new k and v read from it and
// appended into a paged KV cache (on cuda-sm90a's prefill both in the QKV gemm's epilogue; elsewhere, and decode,
// rotary_embedding and kv_cache_append after it), attention (prefill over the batch's
// sequences, or one decode step over the cache) reading q (prefill: k and v too) there with the
// row's width as token stride, the output projection with the residual added by the gemm
// (beta = 1), RMSNorm, the gate/up projection with SiLU-and-mul in its epilogue (a gated gemm, where the
// target has one; else the gemm, then silu_and_mul), the down projection + residual.
// T is float on the CPU backend, jit::bfloat16 (or jit::half) on a GPU; the same code runs both.
// Shared by examples/decoder_layer.cpp (the program) and tests/test_decoder_layer.cpp, which
// holds it to layer_reference() below, in float64.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/cuda.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "jit/tuning.hpp"

namespace jitk_example {

struct LayerConfig {
  std::int64_t hidden = 256, heads = 4, kv_heads = 2, head_dim = 64, mlp = 512;
  std::int64_t page_size = 16;  // mlp: a multiple of 8 (the gate/up weight's groups, below)
  double eps = 1e-5, theta = 500000;
  std::int64_t q_width() const { return heads * head_dim; }
  std::int64_t kv_width() const { return kv_heads * head_dim; }
  std::int64_t qkv_width() const { return q_width() + 2 * kv_width(); }
};

template <class T> double widen(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return v;
  else return jit::to_float(v);
}
template <class T> T narrow(double v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return static_cast<T>(v);
  else if constexpr (std::is_same_v<T, jit::half>) return jit::to_half(static_cast<float>(v));
  else return jit::to_bfloat16(static_cast<float>(v));
}

// An array where the kernels run: host memory on the CPU backend, device memory on a GPU.
template <class E> class Array {
 public:
  Array(std::vector<E> host, bool gpu) : host_(std::move(host)) {
    if (gpu) device_ = std::make_unique<jit::cuda::DeviceArray<E>>(host_);
  }
  Array(std::size_t n, bool gpu, E fill = E{}) : Array(std::vector<E>(n, fill), gpu) {}
  E* data() { return device_ ? device_->data() : host_.data(); }
  const std::vector<E>& host() {  // waits for queued work and copies back from the GPU
    if (device_) {
      jit::cuda::synchronize();
      host_ = device_->download();
    }
    return host_;
  }
  void upload(const std::vector<E>& v) {
    host_ = v;
    if (device_) device_->upload(v);
  }

 private:
  std::vector<E> host_;
  std::unique_ptr<jit::cuda::DeviceArray<E>> device_;
};

// The layer's weights in float64 (the reference's) and as T (the kernels'): rounded once, so the
// reference reads exactly what the kernels read. wgu [hidden, 2 mlp] is in the gated gemm's layout
// (jit::kernels::Gemm, gate = silu): its columns in groups of 16, 8 gate columns then the 8 up
// columns they pair with -- jitk_reference::interleave_gate_up() of a [gate | up] weight, which
// deinterleave_gate_up() gives back (bench/gpu/layer_bench.cpp hands PyTorch that).
struct LayerWeights {
  std::vector<double> norm1, wqkv, wo, norm2, wgu, wd;  // wqkv [hidden, qkv_width], wo [q_width, hidden], wgu [hidden, 2 mlp], wd [mlp, hidden]
};
template <class T> LayerWeights random_weights(const LayerConfig& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto fill = [&](std::int64_t n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = widen(narrow<T>(d(rng)));
    return v;
  };
  const double s_in = 1 / std::sqrt(double(c.hidden)), s_q = 1 / std::sqrt(double(c.q_width())), s_mlp = 1 / std::sqrt(double(c.mlp));
  return {fill(c.hidden, 0.5, 1.5), fill(c.hidden * c.qkv_width(), -s_in, s_in), fill(c.q_width() * c.hidden, -s_q, s_q),
          fill(c.hidden, 0.5, 1.5), fill(c.hidden * 2 * c.mlp, -s_in, s_in), fill(c.mlp * c.hidden, -s_mlp, s_mlp)};
}

template <class T> std::vector<T> narrowed(const std::vector<double>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = narrow<T>(v[i]);
  return out;
}

// The weights as the kernels read them (T).
template <class T> struct TypedWeights {
  std::vector<T> norm1, wqkv, wo, norm2, wgu, wd;
};
template <class T> TypedWeights<T> typed(const LayerWeights& w) {
  return {narrowed<T>(w.norm1), narrowed<T>(w.wqkv), narrowed<T>(w.wo), narrowed<T>(w.norm2), narrowed<T>(w.wgu), narrowed<T>(w.wd)};
}

// The params of the layer's kernels, for a layer of config c in dtype.
namespace layer_params {
inline jit::kernels::Gemm::Params gemm(jit::DType dtype) { return jit::kernels::Gemm::Params{dtype}; }
inline jit::kernels::Gemm::Params residual_gemm(jit::DType dtype) {  // o + residual (the epilogue's add)
  jit::kernels::Gemm::Params p{dtype};
  p.epilogue = "add";
  return p;
}
inline jit::kernels::Gemm::Params gated_gemm(jit::DType dtype) {  // gate/up with SiLU-and-mul
  jit::kernels::Gemm::Params p{dtype};
  p.gate = jit::kernels::Gemm::Gate::Silu;
  return p;
}
inline jit::kernels::SiluAndMul::Params unfused_silu(jit::DType dtype) { return {dtype, 8}; }
inline jit::kernels::AttentionPrefill::Params prefill(const LayerConfig& c, jit::DType dtype) {
  return {dtype, c.head_dim, true, 0, c.heads / c.kv_heads};
}
inline jit::kernels::AttentionDecode::Params decode(const LayerConfig& c, jit::DType dtype) {
  return {dtype, c.head_dim, c.page_size, c.heads / c.kv_heads, 1};
}
inline jit::kernels::RotaryEmbedding::Params rotary(const LayerConfig& c, jit::DType dtype) {
  using R = jit::kernels::RotaryEmbedding;
  return {dtype, c.head_dim, c.head_dim, R::Style::NeoX, R::Source::Theta};
}
inline jit::kernels::RmsNorm::Params rms_norm(const LayerConfig& c, jit::DType dtype) { return {dtype, c.hidden}; }
inline jit::kernels::KvCacheAppend::Params kv_append(const LayerConfig& c, jit::DType dtype) { return {dtype, c.head_dim, c.page_size}; }
// The QKV projection's gemm with rotary (neox, theta, rotary_dim = head_dim) and the paged-cache write.
inline jit::kernels::Gemm::Params qkv_gemm(const LayerConfig& c, jit::DType dtype) {
  jit::kernels::Gemm::Params p{dtype};
  p.rope = jit::kernels::Gemm::Rope::NeoX;
  p.head_dim = c.head_dim;
  p.page_size = c.page_size;
  return p;
}
}  // namespace layer_params

// Which steps take the QKV gemm with rotary and the cache write in its epilogue (the others the
// plain gemm, rotary_embedding and kv_cache_append): DecoderLayer::fused_qkv() per step.
struct FusedQkv {
  bool prefill = false, decode = false;
};

// One kernel variant the layer gets: a name for reports, the kernel and its params (what a warm
// manifest or jit::cache::warm takes), and the typed get on the default target.
struct LayerVariant {
  std::string name, kernel;
  jit::ParamSet params;
  std::function<void()> get;
};
template <class K> LayerVariant layer_variant(std::string name, const typename K::Params& p) {
  return {std::move(name), std::string(K::name), K::to_params(p), [p] { jit::get<K>(p); }};
}

// Every variant a layer of config c in dtype gets for a decode step and, with `prefill`, a prefill;
// fused_mlp: the gated gemm, else the gemm (already listed) and silu_and_mul; fused_qkv: the steps
// that take the fused QKV gemm (rotary_embedding and kv_cache_append listed where a step does not).
// Longest compile first (compile_all's order, below): the Hopper gemms, attention_prefill, then the
// short ones.
inline std::vector<LayerVariant> layer_variants(const LayerConfig& c, jit::DType dtype, bool fused_mlp, bool prefill,
                                                FusedQkv fused_qkv = {}) {
  using namespace jit::kernels;
  namespace lp = layer_params;
  const bool any_fused_qkv = (prefill && fused_qkv.prefill) || fused_qkv.decode;
  const bool any_unfused_qkv = (prefill && !fused_qkv.prefill) || !fused_qkv.decode;
  std::vector<LayerVariant> v;
  v.push_back(layer_variant<Gemm>("gemm", lp::gemm(dtype)));
  if (any_fused_qkv) v.push_back(layer_variant<Gemm>("gemm qkv rope cache", lp::qkv_gemm(c, dtype)));
  v.push_back(layer_variant<Gemm>("gemm add", lp::residual_gemm(dtype)));
  if (fused_mlp) v.push_back(layer_variant<Gemm>("gemm gate silu", lp::gated_gemm(dtype)));
  else v.push_back(layer_variant<SiluAndMul>("silu_and_mul", lp::unfused_silu(dtype)));
  if (prefill) v.push_back(layer_variant<AttentionPrefill>("attention_prefill", lp::prefill(c, dtype)));
  v.push_back(layer_variant<AttentionDecode>("attention_decode", lp::decode(c, dtype)));
  v.push_back(layer_variant<RmsNorm>("rms_norm", lp::rms_norm(c, dtype)));
  if (any_unfused_qkv) {
    v.push_back(layer_variant<RotaryEmbedding>("rotary_embedding", lp::rotary(c, dtype)));
    v.push_back(layer_variant<KvCacheAppend>("kv_cache_append", lp::kv_append(c, dtype)));
  }
  return v;
}

// The layer on jitk kernels, with its paged KV cache (pages handed out in order, sequence by sequence).
// Two ways to run it: prefill() / decode() take host inputs and return host outputs (the tests'
// way); prepare_prefill() / prepare_decode() put a step's inputs on the device once and run()
// launches only the kernels, on a stream of the caller's (the bench's way: timed with events,
// captured into a CUDA graph).
template <class T> class DecoderLayer {
 public:
  DecoderLayer(const LayerConfig& c, const LayerWeights& w, std::int64_t batch, std::int64_t max_context, bool gpu)
      : DecoderLayer(c, typed<T>(w), batch, max_context, gpu) {}
  DecoderLayer(const LayerConfig& c, TypedWeights<T> w, std::int64_t batch, std::int64_t max_context, bool gpu)
      : c_(c), gpu_(gpu), batch_(batch), max_pages_((max_context + c.page_size - 1) / c.page_size),
        num_pages_(batch * max_pages_), norm1_(std::move(w.norm1), gpu), wqkv_(std::move(w.wqkv), gpu), wo_(std::move(w.wo), gpu),
        norm2_(std::move(w.norm2), gpu), wgu_(std::move(w.wgu), gpu), wd_(std::move(w.wd), gpu),
        k_cache_(static_cast<std::size_t>(num_pages_ * c.page_size * c.kv_width()), gpu),
        v_cache_(static_cast<std::size_t>(num_pages_ * c.page_size * c.kv_width()), gpu), table_(block_table(), gpu),
        dtype_(jit::dtype_of<T>()) {
    if (c.mlp <= 0 || c.mlp % 8 != 0)
      throw std::invalid_argument("DecoderLayer: mlp = " + std::to_string(c.mlp) +
                                  " must be a positive multiple of 8 (the gate/up weight's groups of 8 gate and 8 up columns)");
    fused_mlp_available_ = !jit::implementations_for("gemm", jit::default_target(), jit::kernels::Gemm::to_params(gated_gemm_params())).empty();
    // the QKV gemm with rotary and the cache write in its epilogue: Hopper's (cuda-sm90a); the CPU's
    // gemm has it too, but elsewhere the layer runs the unfused kernels unless use_fused_qkv(true)
    const jit::Target target = jit::default_target();
    fused_qkv_available_ = target.backend == jit::Backend::Cuda &&
                           !jit::implementations_for("gemm", target, jit::kernels::Gemm::to_params(qkv_gemm_params())).empty();
  }

  // A step's device-side state: inputs, intermediates and output (y), made once per shape and kept
  // (a GPU's allocations would cost more than some of the kernels).
  struct Step {
    Step(const LayerConfig& c, std::int64_t batch, std::int64_t tokens, std::int64_t seqlen, bool gpu)
        : tokens(tokens), seqlen(seqlen), x(n(tokens * c.hidden), gpu), normed(n(tokens * c.hidden), gpu),
          qkv(n(tokens * c.qkv_width()), gpu), o(n(tokens * c.q_width()), gpu), y(n(tokens * c.hidden), gpu),
          gu(n(tokens * 2 * c.mlp), gpu), act(n(tokens * c.mlp), gpu), positions(n(tokens), gpu), slots(n(tokens), gpu),
          cu_seqlens(n(batch + 1), gpu), context_lens(n(batch), gpu) {}
    static std::size_t n(std::int64_t v) { return static_cast<std::size_t>(v); }
    std::int64_t tokens, seqlen;  // seqlen 0: a decode step (one token a sequence)
    Array<T> x, normed, qkv, o, y, gu, act;  // qkv [tokens, qkv_width]: a token's q, k and v heads, in that order; gu: unfused MLP only
    Array<std::int64_t> positions, slots;
    Array<std::int32_t> cu_seqlens, context_lens;
    std::vector<std::int32_t> host_cu_seqlens;
    std::unique_ptr<Array<unsigned char>> workspace;  // a split decode's partials (none when it does not split)
  };

  // x [batch * seqlen, hidden] (sequences of seqlen tokens from position 0) -> the layer's output; the
  // sequences' k and v land in the cache.
  std::vector<T> prefill(const std::vector<T>& x, std::int64_t seqlen) {
    Step& s = prepare_prefill(seqlen);
    s.x.upload(x);
    run(s);
    return s.y.host();
  }
  // One new token a sequence, at position context[b] (the cache holds positions 0 .. context[b] - 1).
  std::vector<T> decode(const std::vector<T>& x, const std::vector<std::int32_t>& context) {
    Step& s = prepare_decode(context);
    s.x.upload(x);
    run(s);
    return s.y.host();
  }

  Step& prepare_prefill(std::int64_t seqlen) {
    const std::int64_t tokens = batch_ * seqlen;
    Step& s = step(tokens, seqlen);
    std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens)), slots(positions.size());
    for (std::int64_t t = 0; t < tokens; ++t) {
      positions[t] = t % seqlen;
      slots[t] = slot(t / seqlen, t % seqlen);
    }
    s.host_cu_seqlens.resize(static_cast<std::size_t>(batch_ + 1));
    for (std::int64_t b = 0; b <= batch_; ++b) s.host_cu_seqlens[b] = static_cast<std::int32_t>(b * seqlen);
    s.positions.upload(positions);
    s.slots.upload(slots);
    s.cu_seqlens.upload(s.host_cu_seqlens);
    return s;
  }
  Step& prepare_decode(const std::vector<std::int32_t>& context) {
    Step& s = step(batch_, 0);
    std::vector<std::int64_t> positions(context.begin(), context.end()), slots(positions.size());
    std::vector<std::int32_t> lens(context.size());
    for (std::int64_t b = 0; b < batch_; ++b) {
      slots[b] = slot(b, context[b]);
      lens[b] = context[b] + 1;
    }
    s.positions.upload(positions);
    s.slots.upload(slots);
    s.context_lens.upload(lens);
    const std::size_t bytes = jit::kernels::AttentionDecode::workspace_bytes(decode_params(), batch_, c_.kv_heads, max_pages_ * c_.page_size);
    if (bytes && !s.workspace) s.workspace = std::make_unique<Array<unsigned char>>(bytes, gpu_);  // zero-filled, as it must be
    return s;
  }

  // Every kernel of a step, each launch in order: s.x in, s.y out. `mark`, when given, is called
  // with each kernel's name before its launch (a profiler's hook). `keep`, when given, is asked
  // with each launch's place in the step (0, 1, ...) and name, and a launch it says false to is left
  // out (a bench's leave-one-out timing: the step's output is then wrong).
  void run(Step& s, jit::Stream stream = {}, const std::function<void(const char*)>& mark = {},
           const std::function<bool(int, const char*)>& keep = {}) {
    using namespace jit::kernels;
    const std::int64_t tokens = s.tokens, h = c_.hidden;
    int place = 0;
    auto launch = [&](const char* what, auto&& kernel, const auto& args) {
      if (keep && !keep(place++, what)) return;
      if (mark) mark(what);
      kernel.launch(args, stream);
    };
    // C [tokens, n] = A [tokens, kk] B, B a column slice of a row-major weight `ldb` wide, C's rows `ldc` apart (0: n)
    const auto matmul = [&](const char* what, T* a, std::int64_t kk, const T* b, std::int64_t n, std::int64_t ldb, double beta, T* out,
                            std::int64_t ldc = 0) {
      launch(what, gemm(layer_params::gemm(dtype_), tokens, n, kk), Gemm::Args{tokens, n, kk, 1.0, a, kk, b, ldb, beta, out, ldc ? ldc : n});
    };
    auto norm = jit::get<RmsNorm>(layer_params::rms_norm(c_, dtype_));
    launch("rms_norm", norm, RmsNorm::Args{tokens, s.x.data(), norm1_.data(), s.normed.data(), c_.eps});
    // One gemm for q, k and v: qkv [tokens, width] = normed Wqkv. The kernels after it read and
    // write q, k and v in place there, as column slices with the row's width as token stride.
    const std::int64_t width = c_.qkv_width();
    T* const q = s.qkv.data();
    T* const k = q + c_.q_width();
    T* const v = k + c_.kv_width();
    if (fused_qkv(tokens)) {
      // rotary on q and k, and k and v into the paged cache, in the gemm's epilogue (no tuning: its
      // tiles hold whole heads, the default's and the few-rows routes' do)
      Gemm::Args a{tokens, width, h, 1.0, s.normed.data(), h, wqkv_.data(), width, 0.0, q, width};
      a.heads = c_.heads, a.kv_heads = c_.kv_heads, a.positions = s.positions.data(), a.theta = c_.theta;
      a.slots = s.slots.data(), a.num_pages = num_pages_, a.k_cache = k_cache_.data(), a.v_cache = v_cache_.data();
      launch("gemm qkv + rotary + kv cache", jit::get<Gemm>(qkv_gemm_params()), a);
    } else {
      if (!three_qkv_gemms_) {
        matmul("gemm qkv", s.normed.data(), h, wqkv_.data(), width, width, 0, q);
      } else {  // the same output from three gemms, each writing its columns of qkv
        matmul("gemm q", s.normed.data(), h, wqkv_.data(), c_.q_width(), width, 0, q, width);
        matmul("gemm k", s.normed.data(), h, wqkv_.data() + c_.q_width(), c_.kv_width(), width, 0, k, width);
        matmul("gemm v", s.normed.data(), h, wqkv_.data() + c_.q_width() + c_.kv_width(), c_.kv_width(), width, 0, v, width);
      }
      RotaryEmbedding::Args rot{tokens, c_.heads, c_.kv_heads, s.positions.data(), q, k, c_.theta};
      rot.q_stride = rot.k_stride = width;
      launch("rotary_embedding", jit::get<RotaryEmbedding>(rotary_params()), rot);
      KvCacheAppend::Args append{tokens, c_.kv_heads, num_pages_, k, v, s.slots.data(), k_cache_.data(), v_cache_.data()};
      append.k_stride = append.v_stride = width;
      launch("kv_cache_append", jit::get<KvCacheAppend>(layer_params::kv_append(c_, dtype_)), append);
    }
    if (s.seqlen > 0) {
      AttentionPrefill::Args a{batch_, c_.kv_heads, s.seqlen, tokens, tokens, q, k, v, s.o.data(), jit::MutPtr{},
                               s.cu_seqlens.data(), s.cu_seqlens.data(), scale()};
      a.q_stride = a.k_stride = a.v_stride = width;
      a.host_cu_seqlens_q = a.host_cu_seqlens_k = s.host_cu_seqlens.data();
      launch("attention_prefill", jit::get<AttentionPrefill>(prefill_params()), a);
    } else {
      AttentionDecode::Args a{batch_, c_.kv_heads, num_pages_, max_pages_, q, k_cache_.data(), v_cache_.data(),
                              table_.data(), s.context_lens.data(), s.o.data()};
      a.q_stride = width;
      a.scale = scale();
      if (s.workspace) {
        a.workspace = s.workspace->data();
        a.workspace_size = jit::kernels::AttentionDecode::workspace_bytes(decode_params(), batch_, c_.kv_heads, max_pages_ * c_.page_size);
      }
      launch("attention_decode", jit::get<AttentionDecode>(decode_params()), a);
    }
    // y = o Wo + x: the residual added by the gemm's epilogue
    launch("gemm o + residual", gemm(residual_gemm_params(), tokens, h, c_.q_width()),
           Gemm::Args{tokens, h, c_.q_width(), 1.0, s.o.data(), c_.q_width(), wo_.data(), h, 0.0, s.y.data(), h,
                      jit::Operands{static_cast<const T*>(s.x.data())}});
    launch("rms_norm", norm, RmsNorm::Args{tokens, s.y.data(), norm2_.data(), s.normed.data(), c_.eps});
    if (fused_mlp()) {  // act [tokens, mlp] = silu(gate) * up straight from the gemm's accumulators
      launch("gemm gate/up + silu", gemm(gated_gemm_params(), tokens, 2 * c_.mlp, h),
             Gemm::Args{tokens, 2 * c_.mlp, h, 1.0, s.normed.data(), h, wgu_.data(), 2 * c_.mlp, 0.0, s.act.data(), c_.mlp});
    } else {  // the same from gu [tokens, 2 mlp]: each row is 2 mlp / 16 rows of [8 gate | 8 up] for silu_and_mul
      matmul("gemm gate/up", s.normed.data(), h, wgu_.data(), 2 * c_.mlp, 2 * c_.mlp, 0, s.gu.data());
      launch("silu_and_mul", jit::get<SiluAndMul>(unfused_silu_params()), SiluAndMul::Args{tokens * c_.mlp / 8, s.gu.data(), s.act.data()});
    }
    matmul("gemm down + residual", s.act.data(), c_.mlp, wd_.data(), h, h, 1, s.y.data());  // y += act Wd (beta = 1)
    if (mark) mark(nullptr);
  }

  // Gemms through jit::get_tuned (the best tile for each launch's class of shapes, timed once on
  // this device and kept in the cache index) instead of the default tiles.
  void use_tuned_gemms(bool on) { tuned_ = on; }
  // The QKV projection as three gemms (the q, k and v column slices of the weight, each writing its
  // columns of the same qkv rows: ldc = the row's width) instead of one, as the layer ran before:
  // the bench's same-run baseline for the one gemm. Everything after it is the same.
  void use_three_qkv_gemms(bool on) { three_qkv_gemms_ = on; }
  // The MLP's gate/up projection as a gemm into gu, then silu_and_mul into act, instead of one gated
  // gemm (SiLU-and-mul in its epilogue): the bench's same-run baseline for the fused one, and what
  // runs anyway where the target has no gated gemm (f32 on a GPU). The same weight either way.
  void use_unfused_mlp(bool on) { unfused_mlp_ = on; }
  // Whether run() takes the gated gemm (the target has one and use_unfused_mlp is off).
  bool fused_mlp() const { return fused_mlp_available_ && !unfused_mlp_; }
  // The QKV projection with rotary and the KV-cache write in its epilogue (one gemm, gemm's rope and
  // page_size) on for every step (true) or off (false: the gemm, rotary_embedding, kv_cache_append:
  // the bench's same-run baseline), or the default (nullopt): on where the target is CUDA and has it
  // (cuda-sm90a) for steps of more than kFusedQkvMinTokens tokens (prefill), off for fewer (decode:
  // on the H100 the fused gemm's 64-row tile, 64 x 128 split over clusters, made the b64 decode step
  // 1% slower than the plain gemm's 64 x 64 tile + the two kernels, docs/decoder-layer.md), off
  // elsewhere (the CPU's gemm has it too: the tests turn it on there).
  static constexpr std::int64_t kFusedQkvMinTokens = 64;
  void use_fused_qkv(std::optional<bool> on) { fused_qkv_choice_ = on ? (*on ? 1 : 0) : -1; }
  // Whether run() takes the fused QKV gemm for a step of `tokens` tokens (three_qkv_gemms runs the
  // unfused kernels); without an argument, for a prefill-sized step.
  bool fused_qkv(std::int64_t tokens = kFusedQkvMinTokens + 1) const {
    if (three_qkv_gemms_) return false;
    return fused_qkv_choice_ < 0 ? fused_qkv_available_ && tokens > kFusedQkvMinTokens : fused_qkv_choice_ == 1;
  }

  // One variant compile_all got: its name, and when its get began and returned (ms after compile_all began).
  struct VariantTiming {
    std::string name;
    double start_ms = 0, end_ms = 0;
  };
  // Gets every kernel variant a prefill of `seqlen` and a decode step use, from one thread each:
  // on an empty cache their compiles run in parallel (what a cold start waits for is the slowest,
  // not the sum). Returns how many variants there are; `timings`, when given, gets each variant's.
  // The longest compiles are started first: NVRTC runs the start of each compile's front end
  // (with -pch, also the header's PCH) under one lock of the process, so the compiles queue there
  // one after another before they run in parallel; the threads that reach it first start their
  // back ends first. The Hopper gemms' compiles are the longest (of sm_90a's ~5 s of compile work,
  // ~1.2-1.8 s each of the three on one core, then attention_prefill ~0.8 s; the rest 0.1-0.4 s:
  // docs/decoder-layer.md).
  std::size_t compile_all(std::int64_t seqlen, std::vector<VariantTiming>* timings = nullptr) {
    const std::int64_t prefill_tokens = batch_ * std::max<std::int64_t>(seqlen, 1);
    const std::vector<LayerVariant> gets =
        layer_variants(c_, dtype_, fused_mlp(), seqlen > 0, {seqlen > 0 && fused_qkv(prefill_tokens), fused_qkv(batch_)});
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const auto ms = [&] { return std::chrono::duration<double, std::milli>(clock::now() - t0).count(); };
    std::vector<VariantTiming> times(gets.size());
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(gets.size());
    for (std::size_t i = 0; i < gets.size(); ++i)
      threads.emplace_back([&, i] {
        times[i].name = gets[i].name;
        times[i].start_ms = ms();
        try {
          gets[i].get();
        } catch (...) {
          errors[i] = std::current_exception();
        }
        times[i].end_ms = ms();
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    if (timings) *timings = std::move(times);
    return gets.size();
  }

 private:
  double scale() const { return 1 / std::sqrt(double(c_.head_dim)); }
  jit::kernels::AttentionPrefill::Params prefill_params() const { return layer_params::prefill(c_, dtype_); }
  jit::kernels::AttentionDecode::Params decode_params() const { return layer_params::decode(c_, dtype_); }
  jit::kernels::RotaryEmbedding::Params rotary_params() const { return layer_params::rotary(c_, dtype_); }

 public:
  jit::kernels::Gemm::Params residual_gemm_params() const { return layer_params::residual_gemm(dtype_); }
  jit::kernels::Gemm::Params gated_gemm_params() const { return layer_params::gated_gemm(dtype_); }
  jit::kernels::SiluAndMul::Params unfused_silu_params() const { return layer_params::unfused_silu(dtype_); }
  // The QKV projection's gemm with rotary (neox, theta, rotary_dim = head_dim) and the paged-cache write.
  jit::kernels::Gemm::Params qkv_gemm_params() const { return layer_params::qkv_gemm(c_, dtype_); }

 private:
  jit::Kernel<jit::kernels::Gemm> gemm(const jit::kernels::Gemm::Params& p, std::int64_t m, std::int64_t n, std::int64_t k) const {
    return tuned_ ? jit::get_tuned<jit::kernels::Gemm>(p, {m, n, k}) : jit::get<jit::kernels::Gemm>(p);
  }
  std::int64_t slot(std::int64_t b, std::int64_t position) const {
    return (b * max_pages_ + position / c_.page_size) * c_.page_size + position % c_.page_size;
  }
  std::vector<std::int32_t> block_table() const {
    std::vector<std::int32_t> t(static_cast<std::size_t>(batch_ * max_pages_));
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>(i);
    return t;
  }
  Step& step(std::int64_t tokens, std::int64_t seqlen) {
    auto& slot = steps_[{tokens, seqlen}];
    if (!slot) slot = std::make_unique<Step>(c_, batch_, tokens, seqlen, gpu_);
    return *slot;
  }

  LayerConfig c_;
  bool gpu_;
  std::int64_t batch_, max_pages_, num_pages_;
  Array<T> norm1_, wqkv_, wo_, norm2_, wgu_, wd_, k_cache_, v_cache_;
  Array<std::int32_t> table_;
  jit::DType dtype_;
  bool tuned_ = false;
  bool three_qkv_gemms_ = false;
  bool unfused_mlp_ = false;
  bool fused_mlp_available_ = false;
  bool fused_qkv_available_ = false;
  int fused_qkv_choice_ = -1;  // -1: the default (fused_qkv_available_)
  std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<Step>> steps_;
};

// ---- the same layer in float64 ----------------------------------------------------------------

// out [rows, n] = a [rows, kk] b[:, col0 .. col0 + n) (b row-major, ldb wide)
inline std::vector<double> matmul(const std::vector<double>& a, std::int64_t rows, std::int64_t kk, const std::vector<double>& b,
                                  std::int64_t col0, std::int64_t n, std::int64_t ldb) {
  std::vector<double> out(static_cast<std::size_t>(rows * n), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < kk; ++i) {
      const double x = a[r * kk + i];
      for (std::int64_t j = 0; j < n; ++j) out[r * n + j] += x * b[i * ldb + col0 + j];
    }
  return out;
}

// The layer over `tokens` rows of x, with the keys and values of every token in k_all / v_all
// ([*, kv_width] rows, appended to by this call): row t's query attends to keys keys_of[t]
// (indexes into k_all), in order of position.
struct ReferenceCache {
  std::vector<std::vector<double>> k, v;  // per sequence: [positions, kv_width]
};
inline std::vector<double> layer_reference(const LayerConfig& c, const LayerWeights& w, const std::vector<double>& x, std::int64_t batch,
                                           std::int64_t new_tokens, const std::vector<std::int64_t>& start, ReferenceCache& cache) {
  const std::int64_t tokens = batch * new_tokens, h = c.hidden;
  const auto normed1 = jitk_reference::rms_norm(tokens, h, x, w.norm1, c.eps);
  auto q = matmul(normed1, tokens, h, w.wqkv, 0, c.q_width(), c.qkv_width());
  auto k = matmul(normed1, tokens, h, w.wqkv, c.q_width(), c.kv_width(), c.qkv_width());
  const auto v = matmul(normed1, tokens, h, w.wqkv, c.q_width() + c.kv_width(), c.kv_width(), c.qkv_width());
  std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) positions[t] = start[t / new_tokens] + t % new_tokens;
  jitk_reference::rotary_embedding(q, tokens, c.heads, c.head_dim, c.head_dim, true, positions, c.theta);
  jitk_reference::rotary_embedding(k, tokens, c.kv_heads, c.head_dim, c.head_dim, true, positions, c.theta);
  cache.k.resize(static_cast<std::size_t>(batch));
  cache.v.resize(static_cast<std::size_t>(batch));
  std::vector<double> o(static_cast<std::size_t>(tokens * c.q_width()), 0.0);
  const std::int64_t group = c.heads / c.kv_heads, kvw = c.kv_width();
  for (std::int64_t b = 0; b < batch; ++b) {
    auto& ks = cache.k[b];
    auto& vs = cache.v[b];
    ks.insert(ks.end(), k.begin() + b * new_tokens * kvw, k.begin() + (b + 1) * new_tokens * kvw);
    vs.insert(vs.end(), v.begin() + b * new_tokens * kvw, v.begin() + (b + 1) * new_tokens * kvw);
    const std::int64_t lk = static_cast<std::int64_t>(ks.size()) / kvw;
    std::vector<double> qb(q.begin() + b * new_tokens * c.q_width(), q.begin() + (b + 1) * new_tokens * c.q_width()), ob, lse;
    jitk_reference::attention_prefill(ob, lse, qb, ks, vs, {0, static_cast<std::int32_t>(new_tokens)}, {0, static_cast<std::int32_t>(lk)},
                                      c.kv_heads, group, c.head_dim, true, 0, 1 / std::sqrt(double(c.head_dim)), c.q_width(), kvw, kvw);
    std::copy(ob.begin(), ob.end(), o.begin() + b * new_tokens * c.q_width());
  }
  auto y = matmul(o, tokens, c.q_width(), w.wo, 0, h, h);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += x[i];
  const auto normed2 = jitk_reference::rms_norm(tokens, h, y, w.norm2, c.eps);
  const auto gu = matmul(normed2, tokens, h, w.wgu, 0, 2 * c.mlp, 2 * c.mlp);
  const auto act = jitk_reference::silu_and_mul_interleaved(tokens, c.mlp, gu);  // wgu's layout (LayerWeights)
  const auto down = matmul(act, tokens, c.mlp, w.wd, 0, h, h);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += down[i];
  return y;
}

}  // namespace jitk_example
