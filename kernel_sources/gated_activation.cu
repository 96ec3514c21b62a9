// Gated activations, x is rows x 2H, out is rows x H; each thread one pack of W columns:
//   silu_and_mul: out[r, c] = silu(x[r, c]) * x[r, H + c]
//   gelu_and_mul: out[r, c] = gelu(x[r, c]) * x[r, H + c] (erf, or approximate=tanh)
#include "jitk_gpu.h"

constexpr i64 H = JITK_HIDDEN;

// The gelus in forms without cancellation for negative g (see gated_activation.cpp).
__device__ inline float activation(float g) {
#if JITK_KERNEL_GELU_AND_MUL
#if JITK_APPROXIMATE_TANH
  return g / (1.0f + __expf(-1.5957691216057308f * (g + 0.044715f * g * g * g)));
#else
  return 0.5f * g * erfcf(g * -0.7071067811865476f);
#endif
#else
  return g / (1.0f + __expf(-g));
#endif
}

template <int W> __device__ void gated_pack(const T* __restrict__ x, T* __restrict__ out, i64 e) {
  const i64 r = e / H, c = e % H;
  const T* gate = x + r * 2 * H + c;
  auto g = jitk::load<W>(gate);
  auto u = jitk::load<W>(gate + H);
  jitk::Pack<T, W> o;
#pragma unroll
  for (int k = 0; k < W; ++k) o.v[k] = jitk::from_float<T>(activation(jitk::to_float(g.v[k])) * jitk::to_float(u.v[k]));
  jitk::store<W>(out + r * H + c, o);
}

JITK_GPU_KERNEL(const T* __restrict__ x, T* __restrict__ out, i64 rows) {
  constexpr int W = jitk::kVector<T>;
  const i64 first = (static_cast<i64>(blockIdx.x) * JITK_BLOCK + threadIdx.x) * W;
  const i64 total = rows * H;
  if (first >= total) return;
  // Packs never straddle rows when H is a multiple of W.
  if (H % W == 0 && jitk::aligned16(x) && jitk::aligned16(out)) {
    gated_pack<W>(x, out, first);
  } else {
    for (i64 e = first; e < first + W && e < total; ++e) gated_pack<1>(x, out, e);
  }
}
