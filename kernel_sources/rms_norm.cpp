// rms_norm: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight, rows of H elements.
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

JITK_CPU_KERNEL {
  const T* __restrict x = JITK_ARG(0, const T*);
  const T* __restrict weight = JITK_ARG(1, const T*);
  T* __restrict y = JITK_ARG(2, T*);
  const T eps = JITK_ARG(3, T);
  for (i64 r = jitk_begin; r < jitk_end; ++r) {
    const T* __restrict xr = x + r * H;
    T* __restrict yr = y + r * H;
    T sum_sq = jitk::reduce_sum<T>(H, [&](i64 i) { return xr[i] * xr[i]; });
    T inv_rms = T(1) / jitk::sqrt(sum_sq / T(H) + eps);
    for (i64 i = 0; i < H; ++i) yr[i] = xr[i] * inv_rms * weight[i];
  }
}
