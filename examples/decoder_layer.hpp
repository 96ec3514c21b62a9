// A Llama-style decoder layer on jitk kernels only (issue 25's first step, unfused): RMSNorm, the
// q, k and v projections (three gemms over column slices of one fused weight), rotary on q and k,
// the new k and v appended into a paged KV cache, attention (prefill over the batch's sequences,
// or one decode step over the cache), the output projection with the residual added by the gemm
// (beta = 1), RMSNorm, the gate/up projection, SiLU-and-mul, the down projection + residual.
// T is float on the CPU backend, jit::bfloat16 (or jit::half) on a GPU; the same code runs both.
// Shared by examples/decoder_layer.cpp (the program) and tests/test_decoder_layer.cpp, which
// holds it to layer_reference() below, in float64.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/cuda.hpp"
#include "jit/kernels.hpp"

namespace jitk_example {

struct LayerConfig {
  std::int64_t hidden = 256, heads = 4, kv_heads = 2, head_dim = 64, mlp = 512;
  std::int64_t page_size = 16;
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
// reference reads exactly what the kernels read.
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

// The layer on jitk kernels, with its paged KV cache (pages handed out in order, sequence by sequence).
template <class T> class DecoderLayer {
 public:
  DecoderLayer(const LayerConfig& c, const LayerWeights& w, std::int64_t batch, std::int64_t max_context, bool gpu)
      : c_(c), gpu_(gpu), batch_(batch), max_pages_((max_context + c.page_size - 1) / c.page_size),
        num_pages_(batch * max_pages_),
        norm1_(narrowed<T>(w.norm1), gpu), wqkv_(narrowed<T>(w.wqkv), gpu), wo_(narrowed<T>(w.wo), gpu),
        norm2_(narrowed<T>(w.norm2), gpu), wgu_(narrowed<T>(w.wgu), gpu), wd_(narrowed<T>(w.wd), gpu),
        k_cache_(static_cast<std::size_t>(num_pages_ * c.page_size * c.kv_width()), gpu),
        v_cache_(static_cast<std::size_t>(num_pages_ * c.page_size * c.kv_width()), gpu), table_(block_table(), gpu),
        dtype_(jit::dtype_of<T>()) {}

  // x [batch * seqlen, hidden] (sequences of seqlen tokens from position 0) -> the layer's output; the
  // sequences' k and v land in the cache.
  std::vector<T> prefill(const std::vector<T>& x, std::int64_t seqlen) {
    const std::int64_t tokens = batch_ * seqlen;
    std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens)), slots(positions.size());
    for (std::int64_t t = 0; t < tokens; ++t) {
      positions[t] = t % seqlen;
      slots[t] = slot(t / seqlen, t % seqlen);
    }
    std::vector<std::int32_t> cu(static_cast<std::size_t>(batch_ + 1));
    for (std::int64_t b = 0; b <= batch_; ++b) cu[b] = static_cast<std::int32_t>(b * seqlen);
    Array<std::int32_t> cu_dev(cu, gpu_);
    return forward(x, positions, slots, [&](T* q, T* k, T* v, T* o) {
      auto attention = jit::get<jit::kernels::AttentionPrefill>({dtype_, c_.head_dim, true, 0, c_.heads / c_.kv_heads});
      attention.launch({batch_, c_.kv_heads, seqlen, tokens, tokens, q, k, v, o, jit::MutPtr{}, cu_dev.data(), cu_dev.data(), scale(), 0, 0,
                        0, cu.data(), cu.data()});
    });
  }

  // One new token a sequence, at position context[b] (the cache holds positions 0 .. context[b] - 1).
  std::vector<T> decode(const std::vector<T>& x, const std::vector<std::int32_t>& context) {
    std::vector<std::int64_t> positions(context.begin(), context.end()), slots(positions.size());
    std::vector<std::int32_t> lens(context.size());
    for (std::int64_t b = 0; b < batch_; ++b) {
      slots[b] = slot(b, context[b]);
      lens[b] = context[b] + 1;
    }
    Array<std::int32_t> lens_dev(lens, gpu_);
    return forward(x, positions, slots, [&](T* q, T*, T*, T* o) {
      auto attention = jit::get<jit::kernels::AttentionDecode>({dtype_, c_.head_dim, c_.page_size, c_.heads / c_.kv_heads, 1});
      jit::kernels::AttentionDecode::Args a{batch_, c_.kv_heads, num_pages_, max_pages_, q, k_cache_.data(), v_cache_.data(),
                                            table_.data(), lens_dev.data(), o};
      a.scale = scale();
      attention.launch(a);
    });
  }

 private:
  double scale() const { return 1 / std::sqrt(double(c_.head_dim)); }
  std::int64_t slot(std::int64_t b, std::int64_t position) const {
    return (b * max_pages_ + position / c_.page_size) * c_.page_size + position % c_.page_size;
  }
  std::vector<std::int32_t> block_table() const {
    std::vector<std::int32_t> t(static_cast<std::size_t>(batch_ * max_pages_));
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>(i);
    return t;
  }

  template <class Attention>
  std::vector<T> forward(const std::vector<T>& x_host, const std::vector<std::int64_t>& positions, const std::vector<std::int64_t>& slots,
                         Attention attention) {
    using namespace jit::kernels;
    const std::int64_t tokens = static_cast<std::int64_t>(positions.size()), h = c_.hidden;
    Activations& a = activations(tokens);
    a.x.upload(x_host);
    a.y.upload(x_host);  // the residual: the projections add into it (beta = 1)
    a.positions.upload(positions);
    a.slots.upload(slots);
    auto &x = a.x, &normed = a.normed, &q = a.q, &k = a.k, &v = a.v, &o = a.o, &y = a.y, &gu = a.gu, &act = a.act;
    auto &pos = a.positions, &slot_dev = a.slots;
    auto norm = jit::get<RmsNorm>({dtype_, h});
    auto gemm = jit::get<Gemm>({dtype_});
    // C [tokens, n] (+)= A [tokens, kk] B, B a column slice of a row-major weight `ldb` wide
    const auto matmul = [&](T* a, std::int64_t kk, const T* b, std::int64_t n, std::int64_t ldb, double beta, T* out) {
      gemm.launch({tokens, n, kk, 1.0, a, kk, b, ldb, beta, out, n});
    };
    norm.launch({tokens, x.data(), norm1_.data(), normed.data(), c_.eps});
    const std::int64_t width = c_.qkv_width();
    matmul(normed.data(), h, wqkv_.data(), c_.q_width(), width, 0, q.data());
    matmul(normed.data(), h, wqkv_.data() + c_.q_width(), c_.kv_width(), width, 0, k.data());
    matmul(normed.data(), h, wqkv_.data() + c_.q_width() + c_.kv_width(), c_.kv_width(), width, 0, v.data());
    auto rotary = jit::get<RotaryEmbedding>({dtype_, c_.head_dim, c_.head_dim, RotaryEmbedding::Style::NeoX, RotaryEmbedding::Source::Theta});
    rotary.launch({tokens, c_.heads, c_.kv_heads, pos.data(), q.data(), k.data(), c_.theta});
    auto append = jit::get<KvCacheAppend>({dtype_, c_.head_dim, c_.page_size});
    append.launch({tokens, c_.kv_heads, num_pages_, k.data(), v.data(), slot_dev.data(), k_cache_.data(), v_cache_.data()});
    attention(q.data(), k.data(), v.data(), o.data());
    matmul(o.data(), c_.q_width(), wo_.data(), h, h, 1, y.data());  // y = x + o Wo
    norm.launch({tokens, y.data(), norm2_.data(), normed.data(), c_.eps});
    matmul(normed.data(), h, wgu_.data(), 2 * c_.mlp, 2 * c_.mlp, 0, gu.data());
    jit::get<SiluAndMul>({dtype_, c_.mlp}).launch({tokens, gu.data(), act.data()});
    matmul(act.data(), c_.mlp, wd_.data(), h, h, 1, y.data());  // y += act Wd
    return y.host();
  }

  // A forward's intermediate arrays, made once for each token count and kept (a GPU's allocations
  // would cost more than some of the kernels).
  struct Activations {
    Activations(const LayerConfig& c, std::int64_t tokens, bool gpu)
        : x(n(tokens * c.hidden), gpu), normed(n(tokens * c.hidden), gpu), q(n(tokens * c.q_width()), gpu), k(n(tokens * c.kv_width()), gpu),
          v(n(tokens * c.kv_width()), gpu), o(n(tokens * c.q_width()), gpu), y(n(tokens * c.hidden), gpu), gu(n(tokens * 2 * c.mlp), gpu),
          act(n(tokens * c.mlp), gpu), positions(n(tokens), gpu), slots(n(tokens), gpu) {}
    static std::size_t n(std::int64_t v) { return static_cast<std::size_t>(v); }
    Array<T> x, normed, q, k, v, o, y, gu, act;
    Array<std::int64_t> positions, slots;
  };
  Activations& activations(std::int64_t tokens) {
    auto& slot = activations_[tokens];
    if (!slot) slot = std::make_unique<Activations>(c_, tokens, gpu_);
    return *slot;
  }

  LayerConfig c_;
  bool gpu_;
  std::int64_t batch_, max_pages_, num_pages_;
  Array<T> norm1_, wqkv_, wo_, norm2_, wgu_, wd_, k_cache_, v_cache_;
  Array<std::int32_t> table_;
  jit::DType dtype_;
  std::map<std::int64_t, std::unique_ptr<Activations>> activations_;
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
  const auto act = jitk_reference::silu_and_mul(tokens, c.mlp, gu);
  const auto down = matmul(act, tokens, c.mlp, w.wd, 0, h, h);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += down[i];
  return y;
}

}  // namespace jitk_example
