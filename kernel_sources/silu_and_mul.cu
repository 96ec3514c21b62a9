// silu_and_mul: out[r, c] = silu(x[r, c]) * x[r, H + c]; each thread one pack of W columns.
#include "jitk_gpu.h"

constexpr i64 H = JITK_HIDDEN;

template <int W> __device__ void silu_pack(const T* __restrict__ x, T* __restrict__ out, i64 e) {
  const i64 r = e / H, c = e % H;
  const T* gate = x + r * 2 * H + c;
  auto g = jitk::load<W>(gate);
  auto u = jitk::load<W>(gate + H);
  jitk::Pack<T, W> o;
#pragma unroll
  for (int k = 0; k < W; ++k) {
    float gf = jitk::to_float(g.v[k]);
    o.v[k] = jitk::from_float<T>(gf / (1.0f + __expf(-gf)) * jitk::to_float(u.v[k]));
  }
  jitk::store<W>(out + r * H + c, o);
}

JITK_GPU_KERNEL(const T* __restrict__ x, T* __restrict__ out, i64 rows) {
  constexpr int W = jitk::kVector<T>;
  const i64 first = (static_cast<i64>(blockIdx.x) * JITK_BLOCK + threadIdx.x) * W;
  const i64 total = rows * H;
  if (first >= total) return;
  // Packs never straddle rows when H is a multiple of W.
  if (H % W == 0 && jitk::aligned16(x) && jitk::aligned16(out)) {
    silu_pack<W>(x, out, first);
  } else {
    for (i64 e = first; e < first + W && e < total; ++e) silu_pack<1>(x, out, e);
  }
}
