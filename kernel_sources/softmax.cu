// softmax and log_softmax: one block per row, the row held in registers: one read of x, one write of y.
#include "jitk_gpu.h"

constexpr i64 H = JITK_HIDDEN;

template <int W> __device__ void softmax_row(const T* __restrict__ xr, T* __restrict__ yr) {
  __shared__ float scratch[32];
  constexpr int packs = H / W;
  constexpr int per_thread = (packs + JITK_BLOCK - 1) / JITK_BLOCK;
  float v[per_thread][W];
  float row_max = jitk::neg_inf();
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      auto in = jitk::load<W>(xr + p * W);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        v[j][k] = jitk::to_float(in.v[k]);
        row_max = fmaxf(row_max, v[j][k]);
      }
    }
  }
  row_max = jitk::block_reduce<true>(row_max, scratch);
  float sum = 0.0f;
#if JITK_KERNEL_LOG_SOFTMAX
  float (&x_minus_max)[per_thread][W] = v;  // the same registers, renamed for what they hold
#endif
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
#pragma unroll
      for (int k = 0; k < W; ++k) {
#if JITK_KERNEL_LOG_SOFTMAX
        x_minus_max[j][k] = v[j][k] - row_max;
        sum += __expf(x_minus_max[j][k]);
#else
        v[j][k] = __expf(v[j][k] - row_max);
        sum += v[j][k];
#endif
      }
    }
  }
  sum = jitk::block_reduce<false>(sum, scratch);
#if JITK_KERNEL_LOG_SOFTMAX
  const float log_sum = logf(sum);  // once per row: the accurate one
#else
  const float inv_sum = 1.0f / sum;
#endif
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      jitk::Pack<T, W> o;
#pragma unroll
#if JITK_KERNEL_LOG_SOFTMAX
      for (int k = 0; k < W; ++k) o.v[k] = jitk::from_float<T>(x_minus_max[j][k] - log_sum);
#else
      for (int k = 0; k < W; ++k) o.v[k] = jitk::from_float<T>(v[j][k] * inv_sum);
#endif
      jitk::store<W>(yr + p * W, o);
    }
  }
}

JITK_GPU_KERNEL(const T* __restrict__ x, T* __restrict__ y, i64 rows) {
  constexpr int W = jitk::kVector<T>;
  const i64 r = blockIdx.x;
  if (r >= rows) return;
  // The packed path exists only when rows split into whole packs (else it is not even instantiated).
  if constexpr (H % W == 0) {
    if (jitk::aligned16(x) && jitk::aligned16(y)) return softmax_row<W>(x + r * H, y + r * H);
  }
  softmax_row<1>(x + r * H, y + r * H);
}
