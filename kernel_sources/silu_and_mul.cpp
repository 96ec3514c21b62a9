// silu_and_mul: out[r, i] = silu(x[r, i]) * x[r, H + i], x is rows x 2H, out is rows x H.
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

// __restrict only binds on parameters (clang ignores it on locals), so the row lives here.
static inline void silu_and_mul_row(const T* __restrict gate, const T* __restrict up, T* __restrict out) {
  for (i64 i = 0; i < H; ++i) {
    T g = gate[i];
    out[i] = g / (T(1) + jitk::exp(-g)) * up[i];
  }
}

JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  T* out = JITK_ARG(1, T*);
  for (i64 r = jitk_begin; r < jitk_end; ++r) silu_and_mul_row(x + r * 2 * H, x + r * 2 * H + H, out + r * H);
}
