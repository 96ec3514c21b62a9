// rms_norm:           y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight
// fused_add_rms_norm: residual[r, :] += x[r, :], then y[r, :] = rms_norm(residual[r, :])   (rows of H elements)
// The fusion chains (jitk_chain) run on x as it is read (prologue) and on y before it is stored (epilogue).
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

// __restrict only binds on parameters (clang ignores it on locals), so the row lives here.
// at: the row's first element in the row-shaped tensors (x, y and the chains').
static inline void rms_norm_row(const T* __restrict x, T* __restrict residual, const T* __restrict weight,
                                T* __restrict y, T eps, const jitk_chain& chain, i64 at) {
#if JITK_KERNEL_FUSED_ADD_RMS_NORM
  // The sum is written back to residual in the pass that squares it; the scaling reads it again.
  T sum_sq = jitk::reduce_sum<T>(H, [&](i64 i) {
    T v = x[i] + residual[i];
    residual[i] = v;
    return v * v;
  });
  const T* __restrict in = residual;
#else
  T sum_sq;
  const T* in = x;
  if constexpr (jitk_chain::has_prologue) {
    // The prologue's row goes to y (it is a row of T, as a kernel before would have stored it);
    // the norm then reads it back from cache.
    for (i64 i = 0; i < H; ++i) y[i] = chain.prologue(x[i], at + i, i);
    sum_sq = jitk::reduce_sum<T>(H, [&](i64 i) { return y[i] * y[i]; });
    in = y;
  } else {
    sum_sq = jitk::reduce_sum<T>(H, [&](i64 i) { return x[i] * x[i]; });
  }
#endif
  T inv_rms = T(1) / jitk::sqrt(sum_sq / T(H) + eps);
  for (i64 i = 0; i < H; ++i) y[i] = chain.epilogue(in[i] * inv_rms * weight[i], at + i, i);
}

JITK_CPU_KERNEL {
#if JITK_KERNEL_FUSED_ADD_RMS_NORM
  const T* x = JITK_ARG(0, const T*);
  T* residual = JITK_ARG(1, T*);
  const T* weight = JITK_ARG(2, const T*);
  T* y = JITK_ARG(3, T*);
  const T eps = JITK_ARG(4, T);
  const jitk_chain chain = jitk_chain::from(jitk_args + 5);
  for (i64 r = jitk_begin; r < jitk_end; ++r) rms_norm_row(x + r * H, residual + r * H, weight, y + r * H, eps, chain, r * H);
#else
  const T* x = JITK_ARG(0, const T*);
  const T* weight = JITK_ARG(1, const T*);
  T* y = JITK_ARG(2, T*);
  const T eps = JITK_ARG(3, T);
  const jitk_chain chain = jitk_chain::from(jitk_args + 4);
  for (i64 r = jitk_begin; r < jitk_end; ++r) rms_norm_row(x + r * H, nullptr, weight, y + r * H, eps, chain, r * H);
#endif
}
