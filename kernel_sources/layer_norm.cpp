// layer_norm: y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias, rows of H elements.
// The variance is the mean of squared deviations (a second pass over the row in cache), not
// E[x^2] - mean^2, which cancels badly when the mean is large.
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

static inline void layer_norm_row(const T* __restrict x, const T* __restrict weight, const T* __restrict bias,
                                  T* __restrict y, T eps) {
  const T mean = jitk::reduce_sum<T>(H, [&](i64 i) { return x[i]; }) / T(H);
  const T var = jitk::reduce_sum<T>(H, [&](i64 i) { return (x[i] - mean) * (x[i] - mean); }) / T(H);
  const T inv_std = T(1) / jitk::sqrt(var + eps);
  for (i64 i = 0; i < H; ++i) y[i] = (x[i] - mean) * inv_std * weight[i] + bias[i];
}

JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  const T* weight = JITK_ARG(1, const T*);
  const T* bias = JITK_ARG(2, const T*);
  T* y = JITK_ARG(3, T*);
  const T eps = JITK_ARG(4, T);
  for (i64 r = jitk_begin; r < jitk_end; ++r) layer_norm_row(x + r * H, weight, bias, y + r * H, eps);
}
