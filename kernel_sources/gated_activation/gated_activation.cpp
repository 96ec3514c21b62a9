// Gated activations, x is rows x 2H, out is rows x H:
//   silu_and_mul: out[r, i] = silu(x[r, i]) * x[r, H + i]
//   gelu_and_mul: out[r, i] = gelu(x[r, i]) * x[r, H + i]; gelu exact, 0.5 g (1 + erf(g / sqrt(2))),
//                 or with approximate=tanh, 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
// with the fusion chains (jitk_chain): the prologue on both halves of x, the epilogue on out.
#include "jitk_cpu.h"

constexpr i64 H = JITK_HIDDEN;

static inline T activation(T g) {
#if JITK_KERNEL_GELU_AND_MUL && JITK_APPROXIMATE_TANH
  return jitk::gelu_tanh(g);
#elif JITK_KERNEL_GELU_AND_MUL
  return jitk::gelu(g);
#else
  return jitk::silu(g);
#endif
}

// __restrict only binds on parameters (clang ignores it on locals), so the row lives here.
static inline void gated_row(const T* __restrict gate, const T* __restrict up, T* __restrict out, const jitk_chain& chain,
                             i64 r) {
  for (i64 i = 0; i < H; ++i) {
    const T g = chain.prologue(gate[i], r * 2 * H + i, i), u = chain.prologue(up[i], r * 2 * H + H + i, H + i);
    out[i] = chain.epilogue(activation(g) * u, r * H + i, i);
  }
}

JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  T* out = JITK_ARG(1, T*);
  const jitk_chain chain = jitk_chain::from(jitk_args + 2);
  for (i64 r = jitk_begin; r < jitk_end; ++r) gated_row(x + r * 2 * H, x + r * 2 * H + H, out + r * H, chain, r);
}
