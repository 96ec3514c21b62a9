// softmax:     y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max))
// log_softmax: y[r, :] = x[r, :] - max - log(sum(exp(x[r, :] - max)))     (rows of H elements)
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

// __restrict only binds on parameters (clang ignores it on locals); without it clang keeps the
// exp-and-sum loop scalar behind run-time alias checks (measured: 0.24x of g++ for f64).
static inline void softmax_row(const T* __restrict x, T* __restrict y) {
  T row_max = jitk::reduce_max<T>(H, [&](i64 i) { return x[i]; });
#if JITK_KERNEL_LOG_SOFTMAX
  T sum = jitk::reduce_sum<T>(H, [&](i64 i) { return jitk::exp(x[i] - row_max); });
  const T shift = row_max + jitk::log(sum);
  for (i64 i = 0; i < H; ++i) y[i] = x[i] - shift;
#else
  // exp is written once to y and summed in the same pass; the row is in cache for the scale.
  T sum = jitk::reduce_sum<T>(H, [&](i64 i) {
    T e = jitk::exp(x[i] - row_max);
    y[i] = e;
    return e;
  });
  T inv_sum = T(1) / sum;
  for (i64 i = 0; i < H; ++i) y[i] *= inv_sum;
#endif
}

JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  T* y = JITK_ARG(1, T*);
  for (i64 r = jitk_begin; r < jitk_end; ++r) softmax_row(x + r * H, y + r * H);
}
