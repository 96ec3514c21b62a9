// rms_norm:           y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight
// fused_add_rms_norm: residual[r, :] += x[r, :], then y[r, :] = rms_norm(residual[r, :])   (rows of H elements)
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

// __restrict only binds on parameters (clang ignores it on locals), so the row lives here.
static inline void rms_norm_row(const T* __restrict x, T* __restrict residual, const T* __restrict weight,
                                T* __restrict y, T eps) {
#if JITK_KERNEL_FUSED_ADD_RMS_NORM
  // The sum is written back to residual in the pass that squares it; the scaling reads it again.
  T sum_sq = jitk::reduce_sum<T>(H, [&](i64 i) {
    T v = x[i] + residual[i];
    residual[i] = v;
    return v * v;
  });
  const T* __restrict in = residual;
#else
  T sum_sq = jitk::reduce_sum<T>(H, [&](i64 i) { return x[i] * x[i]; });
  const T* __restrict in = x;
#endif
  T inv_rms = T(1) / jitk::sqrt(sum_sq / T(H) + eps);
  for (i64 i = 0; i < H; ++i) y[i] = in[i] * inv_rms * weight[i];
}

JITK_CPU_KERNEL {
#if JITK_KERNEL_FUSED_ADD_RMS_NORM
  const T* x = JITK_ARG(0, const T*);
  T* residual = JITK_ARG(1, T*);
  const T* weight = JITK_ARG(2, const T*);
  T* y = JITK_ARG(3, T*);
  const T eps = JITK_ARG(4, T);
  for (i64 r = jitk_begin; r < jitk_end; ++r) rms_norm_row(x + r * H, residual + r * H, weight, y + r * H, eps);
#else
  const T* x = JITK_ARG(0, const T*);
  const T* weight = JITK_ARG(1, const T*);
  T* y = JITK_ARG(2, T*);
  const T eps = JITK_ARG(3, T);
  for (i64 r = jitk_begin; r < jitk_end; ++r) rms_norm_row(x + r * H, nullptr, weight, y + r * H, eps);
#endif
}
