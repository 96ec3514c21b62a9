// rms_norm (and fused_add_rms_norm): one block per row; the row stays in registers between the reduction and the scaling,
// so memory sees one read of x and one write of y. The fusion chains (jitk_chain) run on the row
// as it is loaded (prologue) and on y before it is stored (epilogue).
#include "jitk_gpu.h"

enum : i64 { H = JITK_HIDDEN };

#if JITK_IMPLEMENTATION_CUDA_SM90
// Hopper (implementation cuda-sm90; its layout keeps twice the row per thread): x is read with
// streaming loads (it is used once: keep it out of L2's way) and y written with streaming stores,
// while the weights, read by every row, go through the read-only cache.
template <int W> __device__ inline jitk::Pack<T, W> load_row(const T* p) { return jitk::load_stream<W>(p); }
template <int W> __device__ inline jitk::Pack<T, W> load_weight(const T* p) { return jitk::load_cached<W>(p); }
template <int W> __device__ inline void store_row(T* p, const jitk::Pack<T, W>& v) { jitk::store_stream<W>(p, v); }
#else
template <int W> __device__ inline jitk::Pack<T, W> load_row(const T* p) { return jitk::load<W>(p); }
template <int W> __device__ inline jitk::Pack<T, W> load_weight(const T* p) { return jitk::load<W>(p); }
template <int W> __device__ inline void store_row(T* p, const jitk::Pack<T, W>& v) { jitk::store<W>(p, v); }
#endif

// fused_add_rms_norm: v = x + residual, rounded to T and stored back to residual; the norm is
// then of what was stored (the same result as an add kernel followed by rms_norm). Every load of
// the row (x and residual) is issued before the first add, so they are all in flight at once.
template <int W> __device__ inline void add_residual(jitk::Pack<T, W>& v, const jitk::Pack<T, W>& r, T* __restrict__ rr, int p) {
#pragma unroll
  for (int k = 0; k < W; ++k) v.v[k] = jitk::from_float<T>(jitk::to_float(v.v[k]) + jitk::to_float(r.v[k]));
  jitk::store<W>(rr + p * W, v);
}

// at: the row's first element in the row-shaped tensors (x, y and the chains')
template <int W>
__device__ void rms_row(const T* __restrict__ xr, T* __restrict__ rr, const T* __restrict__ w, T* __restrict__ yr, float eps,
                        const jitk_chain& chain, i64 at) {
  __shared__ float scratch[32];
  constexpr int packs = H / W;
  constexpr int per_thread = (packs + JITK_BLOCK - 1) / JITK_BLOCK;
  jitk::Pack<T, W> v[per_thread];
  jitk_chain::Loads<W> pro[per_thread];  // the prologue's tensors (none: an empty struct)
#if JITK_KERNEL_FUSED_ADD_RMS_NORM
  jitk::Pack<T, W> res[per_thread];
#endif
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      v[j] = load_row<W>(xr + p * W);
      pro[j] = chain.prologue_load<W>(at + p * W);
#if JITK_KERNEL_FUSED_ADD_RMS_NORM
      res[j] = load_row<W>(rr + p * W);
#endif
    }
  }
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
#if JITK_KERNEL_FUSED_ADD_RMS_NORM
      add_residual<W>(v[j], res[j], rr, p);
#endif
      chain.prologue<W>(v[j], pro[j], at + p * W, p * W);
    }
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
#pragma unroll
      for (int k = 0; k < W; ++k) {
        float f = jitk::to_float(v[j].v[k]);
        sum_sq += f * f;
      }
    }
  }
  const float inv_rms = rsqrtf(jitk::block_reduce<false>(sum_sq, scratch) / static_cast<float>(H) + eps);
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int p = j * JITK_BLOCK + threadIdx.x;
    if (p < packs) {
      auto wv = load_weight<W>(w + p * W);
      float o[W];
#pragma unroll
      for (int k = 0; k < W; ++k) o[k] = jitk::to_float(v[j].v[k]) * inv_rms * jitk::to_float(wv.v[k]);
      chain.epilogue<W>(o, at + p * W, p * W);
      jitk::Pack<T, W> out;
#pragma unroll
      for (int k = 0; k < W; ++k) out.v[k] = jitk::from_float<T>(o[k]);
      store_row<W>(yr + p * W, out);
    }
  }
}

#if JITK_KERNEL_FUSED_ADD_RMS_NORM
JITK_GPU_KERNEL_MIN_BLOCKS(jitk::row_min_blocks<T>(H))(const T* __restrict__ x, T* __restrict__ residual, const T* __restrict__ w, T* __restrict__ y, float eps
                JITK_CHAIN_PARAMS, i64 rows) {
  T* rr = residual + blockIdx.x * H;
  const bool aligned = jitk::aligned16(residual);
#else
JITK_GPU_KERNEL_MIN_BLOCKS(jitk::row_min_blocks<T>(H))(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, float eps
                JITK_CHAIN_PARAMS, i64 rows) {
  T* rr = nullptr;
  const bool aligned = true;
#endif
  constexpr int W = jitk::vector_width<T>();
  const jitk_chain chain{JITK_CHAIN_ARGS};
  const i64 r = blockIdx.x;
  if (r >= rows) return;
  // The packed path exists only when rows split into whole packs (else it is not even instantiated).
  if constexpr (H % W == 0) {
    if (aligned && jitk::aligned16(x) && jitk::aligned16(w) && jitk::aligned16(y) && chain.aligned())
      return rms_row<W>(x + r * H, rr, w, y + r * H, eps, chain, r * H);
  }
  rms_row<1>(x + r * H, rr, w, y + r * H, eps, chain, r * H);
}
