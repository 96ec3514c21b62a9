// layer_norm: one block per row, the row in registers: y = (x - mean) / sqrt(var + eps) * weight + bias.
// The variance is the mean of squared deviations from the row in registers (no second read of x,
// and no E[x^2] - mean^2 cancellation). The fusion chains (jitk_chain) run on the row as it is
// loaded (prologue) and on y before it is stored (epilogue).
#include "jitk_gpu.h"

enum : i64 { H = JITK_HIDDEN };

// at: the row's first element in the row-shaped tensors (x, y and the chains')
template <int W>
__device__ void layer_norm_row(const T* __restrict__ xr, const T* __restrict__ w, const T* __restrict__ b,
                               T* __restrict__ yr, float eps, const jitk_chain& chain, i64 at) {
  __shared__ float scratch[32];
  constexpr int packs = H / W;
  constexpr int per_thread = (packs + JITK_BLOCK - 1) / JITK_BLOCK;
  // The row stays as loaded (16-bit types: half the registers of floats); see jitk::row_min_blocks.
  jitk::Pack<T, W> in[per_thread];
  jitk_chain::Loads<W> pro[per_thread];  // the prologue's tensors (none: an empty struct)
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      in[j] = jitk::load<W>(xr + p * W);
      pro[j] = chain.prologue_load<W>(at + p * W);
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      chain.prologue<W>(in[j], pro[j], at + p * W, p * W);
#pragma unroll
      for (int k = 0; k < W; ++k) sum += jitk::to_float(in[j].v[k]);
    }
  }
  const float mean = jitk::block_reduce<false>(sum, scratch) / static_cast<float>(H);
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    if (j * JITK_BLOCK + threadIdx.x < packs) {
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float d = jitk::to_float(in[j].v[k]) - mean;
        sq += d * d;
      }
    }
  }
  const float inv_std = rsqrtf(jitk::block_reduce<false>(sq, scratch) / static_cast<float>(H) + eps);
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      auto wv = jitk::load<W>(w + p * W);
      auto bv = jitk::load<W>(b + p * W);
      float o[W];
#pragma unroll
      for (int k = 0; k < W; ++k)
        o[k] = (jitk::to_float(in[j].v[k]) - mean) * inv_std * jitk::to_float(wv.v[k]) + jitk::to_float(bv.v[k]);
      chain.epilogue<W>(o, at + p * W, p * W);
      jitk::Pack<T, W> out;
#pragma unroll
      for (int k = 0; k < W; ++k) out.v[k] = jitk::from_float<T>(o[k]);
      jitk::store<W>(yr + p * W, out);
    }
  }
}

JITK_GPU_KERNEL_MIN_BLOCKS(jitk::row_min_blocks<T>(H))(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y, float eps
                JITK_CHAIN_PARAMS, i64 rows) {
  constexpr int W = jitk::vector_width<T>();
  const jitk_chain chain{JITK_CHAIN_ARGS};
  const i64 r = blockIdx.x;
  if (r >= rows) return;
  if constexpr (H % W == 0) {
    if (jitk::aligned16(x) && jitk::aligned16(w) && jitk::aligned16(b) && jitk::aligned16(y) && chain.aligned())
      return layer_norm_row<W>(x + r * H, w, b, y + r * H, eps, chain, r * H);
  }
  layer_norm_row<1>(x + r * H, w, b, y + r * H, eps, chain, r * H);
}
