// Gated activations, x is rows x 2H, out is rows x H; each thread one pack of W columns:
//   silu_and_mul: out[r, c] = silu(x[r, c]) * x[r, H + c]
//   gelu_and_mul: out[r, c] = gelu(x[r, c]) * x[r, H + c] (erf, or approximate=tanh)
// with the fusion chains (jitk_chain): the prologue on both halves of x, the epilogue on out.
#include "jitk_gpu.h"

enum : i64 { H = JITK_HIDDEN };

__device__ inline float activation(float g) {
#if JITK_KERNEL_GELU_AND_MUL && JITK_APPROXIMATE_TANH
  return jitk::gelu_tanh(g);
#elif JITK_KERNEL_GELU_AND_MUL
  return jitk::gelu(g);
#else
  return jitk::silu(g);
#endif
}

template <int W> __device__ void gated_pack(const T* __restrict__ x, T* __restrict__ out, i64 e, const jitk_chain& chain) {
  const i64 r = e / H, c = e % H;
  const i64 at = r * 2 * H + c;
  auto g = jitk::load<W>(x + at);
  auto u = jitk::load<W>(x + at + H);
  const auto lg = chain.prologue_load<W>(at);
  const auto lu = chain.prologue_load<W>(at + H);
  chain.prologue<W>(g, lg, at, c);
  chain.prologue<W>(u, lu, at + H, H + c);
  float o[W];
#pragma unroll
  for (int k = 0; k < W; ++k) o[k] = activation(jitk::to_float(g.v[k])) * jitk::to_float(u.v[k]);
  chain.epilogue<W>(o, r * H + c, c);
  jitk::Pack<T, W> p;
#pragma unroll
  for (int k = 0; k < W; ++k) p.v[k] = jitk::from_float<T>(o[k]);
  jitk::store<W>(out + r * H + c, p);
}

JITK_GPU_KERNEL(const T* __restrict__ x, T* __restrict__ out JITK_CHAIN_PARAMS, i64 rows) {
  constexpr int W = jitk::vector_width<T>();
  const jitk_chain chain{JITK_CHAIN_ARGS};
  const i64 first = (static_cast<i64>(blockIdx.x) * JITK_BLOCK + threadIdx.x) * W;
  const i64 total = rows * H;
  if (first >= total) return;
  // Packs never straddle rows when H is a multiple of W.
  if (H % W == 0 && jitk::aligned16(x) && jitk::aligned16(out) && chain.aligned()) {
    gated_pack<W>(x, out, first, chain);
  } else {
    for (i64 e = first; e < first + W && e < total; ++e) gated_pack<1>(x, out, e, chain);
  }
}
