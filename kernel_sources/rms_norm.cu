// rms_norm (and fused_add_rms_norm): one block per row; the row stays in registers between the reduction and the scaling,
// so memory sees one read of x and one write of y.
#include "jitk_gpu.h"

constexpr i64 H = JITK_HIDDEN;

// fused_add_rms_norm: v = x + residual, rounded to T and stored back to residual; the norm is
// then of what was stored (the same result as an add kernel followed by rms_norm). Every load of
// the row (x and residual) is issued before the first add, so they are all in flight at once.
template <int W> __device__ inline void add_residual(jitk::Pack<T, W>& v, const jitk::Pack<T, W>& r, T* __restrict__ rr, int p) {
#pragma unroll
  for (int k = 0; k < W; ++k) v.v[k] = jitk::from_float<T>(jitk::to_float(v.v[k]) + jitk::to_float(r.v[k]));
  jitk::store<W>(rr + p * W, v);
}

template <int W>
__device__ void rms_row(const T* __restrict__ xr, T* __restrict__ rr, const T* __restrict__ w, T* __restrict__ yr, float eps) {
  __shared__ float scratch[32];
  constexpr int packs = H / W;
  constexpr int per_thread = (packs + JITK_BLOCK - 1) / JITK_BLOCK;
  jitk::Pack<T, W> v[per_thread];
#if JITK_KERNEL_FUSED_ADD_RMS_NORM
  jitk::Pack<T, W> res[per_thread];
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      v[j] = jitk::load<W>(xr + p * W);
      res[j] = jitk::load<W>(rr + p * W);
    }
  }
#pragma unroll
  for (int j = 0; j < per_thread; ++j)
    if (j * JITK_BLOCK + threadIdx.x < packs) add_residual<W>(v[j], res[j], rr, j * JITK_BLOCK + threadIdx.x);
#else
#pragma unroll
  for (int j = 0; j < per_thread; ++j)
    if (j * JITK_BLOCK + threadIdx.x < packs) v[j] = jitk::load<W>(xr + (j * JITK_BLOCK + threadIdx.x) * W);
#endif
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
#pragma unroll
      for (int k = 0; k < W; ++k) {
        float f = jitk::to_float(v[j].v[k]);
        sum_sq += f * f;
      }
    }
  }
  const float inv_rms = rsqrtf(jitk::block_reduce<false>(sum_sq, scratch) / static_cast<float>(H) + eps);
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      auto wv = jitk::load<W>(w + p * W);
      jitk::Pack<T, W> o;
#pragma unroll
      for (int k = 0; k < W; ++k) o.v[k] = jitk::from_float<T>(jitk::to_float(v[j].v[k]) * inv_rms * jitk::to_float(wv.v[k]));
      jitk::store<W>(yr + p * W, o);
    }
  }
}

#if JITK_KERNEL_FUSED_ADD_RMS_NORM
JITK_GPU_KERNEL_MIN_BLOCKS(jitk::row_min_blocks<T>(H))(const T* __restrict__ x, T* __restrict__ residual, const T* __restrict__ w, T* __restrict__ y, float eps,
                i64 rows) {
  T* rr = residual + blockIdx.x * H;
  const bool aligned = jitk::aligned16(residual);
#else
JITK_GPU_KERNEL_MIN_BLOCKS(jitk::row_min_blocks<T>(H))(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, float eps, i64 rows) {
  T* rr = nullptr;
  const bool aligned = true;
#endif
  constexpr int W = jitk::kVector<T>;
  const i64 r = blockIdx.x;
  if (r >= rows) return;
  // The packed path exists only when rows split into whole packs (else it is not even instantiated).
  if constexpr (H % W == 0) {
    if (aligned && jitk::aligned16(x) && jitk::aligned16(w) && jitk::aligned16(y))
      return rms_row<W>(x + r * H, rr, w, y + r * H, eps);
  }
  rms_row<1>(x + r * H, rr, w, y + r * H, eps);
}
