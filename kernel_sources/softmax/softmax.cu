// softmax and log_softmax: one block per row, the row held in registers: one read of x, one write
// of y. One block reduction, of (max, sum) pairs: each thread sums exp(x - its own max), and
// pairs combine as (m, s) + (m', s') = (M, s e^(m - M) + s' e^(m' - M)), M = max(m, m'); then
// each thread rescales its exps by e^(its max - M): one round of block barriers instead of the two
// of a max reduction followed by a sum reduction.
#include "jitk_gpu.h"

enum : i64 { H = JITK_HIDDEN };

// Combines (m, s) with another thread's: a thread without elements holds (-inf, 0).
__device__ inline void combine(float& m, float& s, float m2, float s2) {
  const float top = fmaxf(m, m2);
  s = (m == top ? s : s * __expf(m - top)) + (m2 == top ? s2 : s2 * __expf(m2 - top));
  m = top;
}

__device__ inline void warp_combine(float& m, float& s) {
  for (int mask = JITK_WARP_SIZE / 2; mask > 0; mask /= 2) combine(m, s, JITK_SHFL_XOR(m, mask), JITK_SHFL_XOR(s, mask));
}

// Every thread gets the row's (max, sum of exp(x - max)).
__device__ inline void block_combine(float& m, float& s) {
  constexpr int warps = (JITK_BLOCK + JITK_WARP_SIZE - 1) / JITK_WARP_SIZE;
  __shared__ float scratch_m[32], scratch_s[32];
  warp_combine(m, s);
  if (warps == 1) return;
  const int lane = threadIdx.x % JITK_WARP_SIZE, warp = threadIdx.x / JITK_WARP_SIZE;
  if (lane == 0) {
    scratch_m[warp] = m;
    scratch_s[warp] = s;
  }
  __syncthreads();
  m = lane < warps ? scratch_m[lane] : jitk::neg_inf();
  s = lane < warps ? scratch_s[lane] : 0.0f;
  warp_combine(m, s);
}

template <int W> __device__ void softmax_row(const T* __restrict__ xr, T* __restrict__ yr) {
  constexpr int packs = H / W;
  constexpr int per_thread = (packs + JITK_BLOCK - 1) / JITK_BLOCK;
  // The row stays as loaded (16-bit types: half the registers of floats). log_softmax needs
  // nothing else; softmax keeps its exps as floats. Registers bound the blocks an SM holds, and
  // with them the loads in flight: log_softmax kept as floats took 112 registers at hidden 8192
  // (bf16) and ran at 0.56 of copy.
  jitk::Pack<T, W> in[per_thread];
  float m = jitk::neg_inf();
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      in[j] = jitk::load<W>(xr + p * W);
#pragma unroll
      for (int k = 0; k < W; ++k) m = fmaxf(m, jitk::to_float(in[j].v[k]));
    }
  }
  float s = 0.0f;
  const float own_max = m;
  // softmax keeps its exps unless that would take more than 32 registers: then it takes the exp
  // again when writing (the SFU has time to spare in a memory-bound kernel; registers do not).
#if JITK_KERNEL_LOG_SOFTMAX
  constexpr bool keep_exps = false;
#else
  constexpr bool keep_exps = per_thread * W <= 32;
#endif
  float e[keep_exps ? per_thread : 1][W];
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    if (j * JITK_BLOCK + threadIdx.x < packs) {
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float x_exp = __expf(jitk::to_float(in[j].v[k]) - own_max);
        if constexpr (keep_exps) e[j][k] = x_exp;
        s += x_exp;
      }
    }
  }
  block_combine(m, s);
#if JITK_KERNEL_LOG_SOFTMAX
  const float shift = m + logf(s);  // once per row: the accurate log
#else
  const float scale = own_max == m ? 1.0f / s : __expf(own_max - m) / s;
#endif
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      jitk::Pack<T, W> o;
#pragma unroll
      for (int k = 0; k < W; ++k)
#if JITK_KERNEL_LOG_SOFTMAX
        o.v[k] = jitk::from_float<T>(jitk::to_float(in[j].v[k]) - shift);
#else
        o.v[k] = jitk::from_float<T>((keep_exps ? e[keep_exps ? j : 0][k] : __expf(jitk::to_float(in[j].v[k]) - own_max)) * scale);
#endif
      jitk::store<W>(yr + p * W, o);
    }
  }
}

JITK_GPU_KERNEL_MIN_BLOCKS(jitk::row_min_blocks<T>(H))(const T* __restrict__ x, T* __restrict__ y, i64 rows) {
  constexpr int W = jitk::vector_width<T>();
  const i64 r = blockIdx.x;
  if (r >= rows) return;
  // The packed path exists only when rows split into whole packs (else it is not even instantiated).
  if constexpr (H % W == 0) {
    if (jitk::aligned16(x) && jitk::aligned16(y)) return softmax_row<W>(x + r * H, y + r * H);
  }
  softmax_row<1>(x + r * H, y + r * H);
}
