// silu_and_mul: out[r, i] = silu(x[r, i]) * x[r, H + i], x is rows x 2H, out is rows x H.
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

JITK_CPU_KERNEL {
  const T* __restrict x = JITK_ARG(0, const T*);
  T* __restrict out = JITK_ARG(1, T*);
  for (i64 r = jitk_begin; r < jitk_end; ++r) {
    const T* __restrict gate = x + r * 2 * H;
    const T* __restrict up = gate + H;
    T* __restrict o = out + r * H;
    for (i64 i = 0; i < H; ++i) {
      T g = gate[i];
      o[i] = g / (T(1) + jitk::exp(-g)) * up[i];
    }
  }
}
