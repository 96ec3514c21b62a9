// softmax: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)), rows of H elements.
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

JITK_CPU_KERNEL {
  const T* __restrict x = JITK_ARG(0, const T*);
  T* __restrict y = JITK_ARG(1, T*);
  for (i64 r = jitk_begin; r < jitk_end; ++r) {
    const T* __restrict xr = x + r * H;
    T* __restrict yr = y + r * H;
    T row_max = jitk::reduce_max<T>(H, [&](i64 i) { return xr[i]; });
    // exp is written once to y and summed in the same pass; the row is in cache for the scale.
    T sum = jitk::reduce_sum<T>(H, [&](i64 i) {
      T e = jitk::exp(xr[i] - row_max);
      yr[i] = e;
      return e;
    });
    T inv_sum = T(1) / sum;
    for (i64 i = 0; i < H; ++i) yr[i] *= inv_sum;
  }
}
