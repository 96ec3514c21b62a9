// Gated activations, x is rows x 2H, out is rows x H:
//   silu_and_mul: out[r, i] = silu(x[r, i]) * x[r, H + i]
//   gelu_and_mul: out[r, i] = gelu(x[r, i]) * x[r, H + i]; gelu exact, 0.5 g (1 + erf(g / sqrt(2))),
//                 or with approximate=tanh, 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

// Both gelus in forms without cancellation for negative g (where 1 + erf and 1 + tanh lose every
// digit): 0.5 g erfc(-g / sqrt(2)), and 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u)).
static inline T activation(T g) {
#if JITK_KERNEL_GELU_AND_MUL
#if JITK_APPROXIMATE_TANH
  const T u = T(0.7978845608028654) * (g + T(0.044715) * g * g * g);
  return g / (T(1) + jitk::exp(T(-2) * u));
#else
  return T(0.5) * g * jitk::erfc(g * T(-0.7071067811865476));
#endif
#else
  return g / (T(1) + jitk::exp(-g));
#endif
}

// __restrict only binds on parameters (clang ignores it on locals), so the row lives here.
static inline void gated_row(const T* __restrict gate, const T* __restrict up, T* __restrict out) {
  for (i64 i = 0; i < H; ++i) out[i] = activation(gate[i]) * up[i];
}

JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  T* out = JITK_ARG(1, T*);
  for (i64 r = jitk_begin; r < jitk_end; ++r) gated_row(x + r * 2 * H, x + r * 2 * H + H, out + r * H);
}
