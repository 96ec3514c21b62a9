// adamw: one AdamW step (PyTorch's torch.optim.AdamW) on n elements, in place. The master
// weights and moments are float (double when dtype=f64); the gradients are T.
//   param *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   param -= (lr / (1 - beta1^step)) m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// The bias corrections and 1 - beta are computed once per step by the descriptor, on the host, in double.
#include "jitk_cpu.h"

#if JITK_DTYPE_F64
typedef double M;
#else
typedef float M;
#endif

// __restrict only binds on parameters (clang ignores it on locals), so the loop lives here.
static inline void adamw_range(M* __restrict param, const T* __restrict grad, M* __restrict m, M* __restrict v,
                               M decay, M beta1, M one_minus_beta1, M beta2, M one_minus_beta2, M eps, M step_size,
                               M inv_sqrt_bc2, i64 begin, i64 end) {
  for (i64 i = begin; i < end; ++i) {
    const M g = grad[i];
    const M mi = beta1 * m[i] + one_minus_beta1 * g;
    const M vi = beta2 * v[i] + one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = param[i] * decay - step_size * mi / (jitk::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}

JITK_CPU_KERNEL {
  adamw_range(JITK_ARG(0, M*), JITK_ARG(1, const T*), JITK_ARG(2, M*), JITK_ARG(3, M*), JITK_ARG(4, M), JITK_ARG(5, M),
              JITK_ARG(6, M), JITK_ARG(7, M), JITK_ARG(8, M), JITK_ARG(9, M), JITK_ARG(10, M), JITK_ARG(11, M),
              jitk_begin, jitk_end);
}
