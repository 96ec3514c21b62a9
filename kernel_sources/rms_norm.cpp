// rms_norm: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight, rows of H elements.
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

// __restrict only binds on parameters (clang ignores it on locals), so the row lives here.
static inline void rms_norm_row(const T* __restrict x, const T* __restrict weight, T* __restrict y, T eps) {
  T sum_sq = jitk::reduce_sum<T>(H, [&](i64 i) { return x[i] * x[i]; });
  T inv_rms = T(1) / jitk::sqrt(sum_sq / T(H) + eps);
  for (i64 i = 0; i < H; ++i) y[i] = x[i] * inv_rms * weight[i];
}

JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  const T* weight = JITK_ARG(1, const T*);
  T* y = JITK_ARG(2, T*);
  const T eps = JITK_ARG(3, T);
  for (i64 r = jitk_begin; r < jitk_end; ++r) rms_norm_row(x + r * H, weight, y + r * H, eps);
}
