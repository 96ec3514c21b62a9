// layer_norm: y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias, rows of H elements.
// The variance is the mean of squared deviations (a second pass over the row in cache), not
// E[x^2] - mean^2, which cancels badly when the mean is large. The fusion chains (jitk_chain) run
// on x as it is read (prologue) and on y before it is stored (epilogue).
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

// at: the row's first element in the row-shaped tensors (x, y and the chains').
static inline void layer_norm_row(const T* __restrict x, const T* __restrict weight, const T* __restrict bias,
                                  T* __restrict y, T eps, const jitk_chain& chain, i64 at) {
  const T* in = x;
  if constexpr (jitk_chain::has_prologue) {
    // The prologue's row goes to y (a row of T, as a kernel before would have stored it); the
    // statistics then read it back from cache.
    for (i64 i = 0; i < H; ++i) y[i] = chain.prologue(x[i], at + i, i);
    in = y;
  }
  const T mean = jitk::reduce_sum<T>(H, [&](i64 i) { return in[i]; }) / T(H);
  const T var = jitk::reduce_sum<T>(H, [&](i64 i) { return (in[i] - mean) * (in[i] - mean); }) / T(H);
  const T inv_std = T(1) / jitk::sqrt(var + eps);
  for (i64 i = 0; i < H; ++i) y[i] = chain.epilogue((in[i] - mean) * inv_std * weight[i] + bias[i], at + i, i);
}

JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  const T* weight = JITK_ARG(1, const T*);
  const T* bias = JITK_ARG(2, const T*);
  T* y = JITK_ARG(3, T*);
  const T eps = JITK_ARG(4, T);
  const jitk_chain chain = jitk_chain::from(jitk_args + 5);
  for (i64 r = jitk_begin; r < jitk_end; ++r) layer_norm_row(x + r * H, weight, bias, y + r * H, eps, chain, r * H);
}
