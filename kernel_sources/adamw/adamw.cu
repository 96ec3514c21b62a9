// adamw: one AdamW step in place (see adamw.cpp for the update); float master weights and moments,
// T gradients. Each thread one 16-byte pack of gradients: W of them, with W floats of each of
// param, m and v (W / 4 16-byte loads each).
#include "jitk_gpu.h"

typedef float M;

struct Step {
  M decay, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, step_size, inv_sqrt_bc2;
};

__device__ inline void adamw_elem(M& p, M g, M& m, M& v, const Step& s) {
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  p = p * s.decay - s.step_size * m / (sqrtf(v) * s.inv_sqrt_bc2 + s.eps);
}

template <int W>
__device__ void adamw_pack(M* __restrict__ param, const T* __restrict__ grad, M* __restrict__ m, M* __restrict__ v,
                           const Step& s, i64 e) {
  const auto g = jitk::load<W>(grad + e);
  constexpr int C = W < 4 ? W : 4;  // floats per 16-byte (or smaller) access
  jitk::Pack<M, C> p4[W / C], m4[W / C], v4[W / C];
#pragma unroll
  for (int c = 0; c < W / C; ++c) {
    p4[c] = jitk::load<C>(param + e + c * C);
    m4[c] = jitk::load<C>(m + e + c * C);
    v4[c] = jitk::load<C>(v + e + c * C);
  }
#pragma unroll
  for (int k = 0; k < W; ++k) adamw_elem(p4[k / C].v[k % C], jitk::to_float(g.v[k]), m4[k / C].v[k % C], v4[k / C].v[k % C], s);
#pragma unroll
  for (int c = 0; c < W / C; ++c) {
    jitk::store<C>(param + e + c * C, p4[c]);
    jitk::store<C>(m + e + c * C, m4[c]);
    jitk::store<C>(v + e + c * C, v4[c]);
  }
}

JITK_GPU_KERNEL(M* __restrict__ param, const T* __restrict__ grad, M* __restrict__ m, M* __restrict__ v, M decay,
                M beta1, M one_minus_beta1, M beta2, M one_minus_beta2, M eps, M step_size, M inv_sqrt_bc2, i64 n) {
  constexpr int W = jitk::vector_width<T>();
  const Step s{decay, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, step_size, inv_sqrt_bc2};
  const i64 first = (static_cast<i64>(blockIdx.x) * JITK_BLOCK + threadIdx.x) * W;
  if (first >= n) return;
  if (first + W <= n && jitk::aligned16(param) && jitk::aligned16(grad) && jitk::aligned16(m) && jitk::aligned16(v)) {
    adamw_pack<W>(param, grad, m, v, s, first);
  } else {
    for (i64 e = first; e < first + W && e < n; ++e) adamw_pack<1>(param, grad, m, v, s, e);
  }
}
