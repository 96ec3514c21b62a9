// jitk_gpu.h: what GPU kernel text may use, written once for NVRTC (and hipRTC): element types,
// 16-byte vector packs, warp and block reductions, the entry point.
// The specialization prelude defines JITK_ENTRY, T, JITK_BLOCK (threads per block) and JITK_<PARAM>.
#pragma once
#if defined(__HIPCC_RTC__) || defined(__HIPCC__)
// hipRTC pre-includes the HIP runtime and __half (its headers have no include guards there:
// including them again breaks the compile). ROCm 5.2 has no bf16 type hipRTC can use: ours below.
#define JITK_WARP_SIZE warpSize  // 64 on CDNA (gfx90a), 32 on RDNA (gfx1030): a compile-time constant
#define JITK_SHFL_XOR(v, m) __shfl_xor(v, m)
typedef __half jitk_half;
struct jitk_bfloat16 {
  unsigned short bits;
};
__device__ inline float jitk_bfloat16_to_float(jitk_bfloat16 x) { return __uint_as_float(static_cast<unsigned>(x.bits) << 16); }
// Round to nearest even, as __float2bfloat16_rn; a NaN stays a (quiet) NaN.
__device__ inline jitk_bfloat16 jitk_float_to_bfloat16_rn(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<unsigned short>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<unsigned short>(u >> 16)};
}
#else
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define JITK_WARP_SIZE 32
#define JITK_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, v, m)
typedef __half jitk_half;
typedef __nv_bfloat16 jitk_bfloat16;
__device__ inline float jitk_bfloat16_to_float(jitk_bfloat16 x) { return __bfloat162float(x); }
__device__ inline jitk_bfloat16 jitk_float_to_bfloat16_rn(float f) { return __float2bfloat16_rn(f); }
#endif

typedef long long i64;
typedef unsigned long long u64;

// extern "C" so the symbol is found by name; the arguments are the descriptor's, then the number
// of work items (rows or elements) last.
#define JITK_GPU_KERNEL extern "C" __global__ void __launch_bounds__(JITK_BLOCK) JITK_ENTRY
#if defined(__HIPCC_RTC__) || defined(__HIPCC__)
// HIP's second __launch_bounds__ argument is minimum waves per execution unit, not blocks per
// multiprocessor: the hint is CUDA's alone.
#define JITK_GPU_KERNEL_MIN_BLOCKS(blocks) JITK_GPU_KERNEL
#else
// The same, asking the compiler to fit `blocks` blocks on an SM (registers permitting no spills is
// the text's business): memory-bound row kernels need the loads in flight that more blocks give.
#define JITK_GPU_KERNEL_MIN_BLOCKS(blocks) \
  extern "C" __global__ void __launch_bounds__(JITK_BLOCK, (2048 / JITK_BLOCK < (blocks) ? 2048 / JITK_BLOCK : (blocks))) JITK_ENTRY
#endif

namespace jitk {

#if !defined(__HIPCC_RTC__) && !defined(__HIPCC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Thread block clusters (sm_90): this block's place in its cluster, the cluster's blocks (1 in a
// launch without clusters), a barrier over every thread of every block of the cluster
// (release / acquire), and a float of block `rank`'s shared memory at `local`'s offset.
__device__ inline unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ inline unsigned cluster_size() {
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}
__device__ inline void cluster_sync() { asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory"); }
__device__ inline float cluster_load(const float* local, unsigned rank) {
  float v;
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %1, %2;\nld.shared::cluster.f32 %0, [remote];\n}\n"
               : "=f"(v)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(local))), "r"(rank)
               : "memory");
  return v;
}
#endif

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(jitk_half x) { return __half2float(x); }
__device__ inline float to_float(jitk_bfloat16 x) { return jitk_bfloat16_to_float(x); }
template <class V> __device__ inline V from_float(float x);
template <> __device__ inline float from_float<float>(float x) { return x; }
template <> __device__ inline jitk_half from_float<jitk_half>(float x) { return __float2half_rn(x); }
template <> __device__ inline jitk_bfloat16 from_float<jitk_bfloat16>(float x) { return jitk_float_to_bfloat16_rn(x); }

// W consecutive elements moved as one load/store (16 bytes when W * sizeof(V) == 16).
template <class V, int W> struct alignas(sizeof(V) * W) Pack {
  V v[W];
};
template <int W, class V> __device__ inline Pack<V, W> load(const V* p) { return *reinterpret_cast<const Pack<V, W>*>(p); }
template <int W, class V> __device__ inline void store(V* p, const Pack<V, W>& x) { *reinterpret_cast<Pack<V, W>*>(p) = x; }

// Loads and stores with a cache policy (CUDA; plain ones elsewhere): streaming (data used once,
// kept out of L2's way) and through the read-only cache (data every block reads).
template <int W, class V> __device__ inline Pack<V, W> load_stream(const V* p) {
#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__))
  if constexpr (sizeof(V) * W == 16) {
    const int4 bits = __ldcs(reinterpret_cast<const int4*>(p));
    return *reinterpret_cast<const Pack<V, W>*>(&bits);
  }
#endif
  return load<W>(p);
}
template <int W, class V> __device__ inline Pack<V, W> load_cached(const V* p) {
#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__))
  if constexpr (sizeof(V) * W == 16) {
    const int4 bits = __ldg(reinterpret_cast<const int4*>(p));
    return *reinterpret_cast<const Pack<V, W>*>(&bits);
  }
#endif
  return load<W>(p);
}
template <int W, class V> __device__ inline void store_stream(V* p, const Pack<V, W>& x) {
#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__))
  if constexpr (sizeof(V) * W == 16) {
    __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<const int4*>(&x));
    return;
  }
#endif
  store<W>(p, x);
}

// Elements per 16-byte pack. A function, not a variable: under NVRTC's
// --device-as-default-execution-space every namespace-scope constexpr variable of a text (and each
// variable template instance) is a __device__ variable that the CUBIN carries as module data, used
// or not, and module data costs the driver's load of the module (H100: 0.06-0.08 ms on a process's
// first load, 0.015-0.02 ms on later ones; bench/results/2026-11-26-h100-first-use-nvrtc.md). A
// text's integral constants are enumerators for the same reason.
template <class V> constexpr int vector_width() { return 16 / sizeof(V); }
// The name user texts written before vector_width<V>() use (deprecated: each instance a text names is module data).
template <class V> constexpr int kVector = vector_width<V>();

// A block-per-row kernel's share of a row of h elements per thread (16-byte packs of V), and the
// blocks an SM should hold for it: 3 (at most 85 registers a thread at 256 threads) up to 32
// elements a thread, else 2 (3 would spill); blocks of more than 256 threads: 2 (3 would leave
// at most 42 registers). Measured on the H100, bf16: log_softmax at hidden 8192 went from 0.56
// to 0.99 of copy bandwidth with 3 blocks an SM instead of 2.
template <class V> constexpr int row_share(i64 h) { return (h / vector_width<V>() + JITK_BLOCK - 1) / JITK_BLOCK * vector_width<V>(); }
template <class V> constexpr int row_min_blocks(i64 h) { return row_share<V>(h) > 32 || JITK_BLOCK > 256 ? 2 : 3; }

__device__ inline float neg_inf() { return __int_as_float(0xff800000); }

// Activations (gated kernels and fusion chains), as PyTorch defines them; both gelus in forms
// without cancellation for negative g: 0.5 g erfc(-g / sqrt 2), and 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u)).
__device__ inline float relu(float v) { return v < 0.0f ? 0.0f : v; }  // NaN stays NaN
__device__ inline float sigmoid(float v) { return 1.0f / (1.0f + __expf(-v)); }
// silu and gelu_tanh divide as a product by the reciprocal (rcp.approx, about 2 ulp; __fdividef): in
// the gated gemm's epilogue (jitk_gate.h) an IEEE division (a reciprocal, its refinement and a range
// check a value) held the Llama-3-8B gate/up to 0.870-0.880 of cuBLAS's plain gemm while the tensor
// cores waited; 0.943 with rcp.approx (H100, 16384 x 28672 x 4096; 0.970 at 2048 rows:
// bench/results/2026-11-26-h100-gemm-16384.md). A denominator past 2^126 (e^x overflowing: g under
// -87) gives 0, as g / inf does.
__device__ inline float silu(float v) { return __fdividef(v, 1.0f + __expf(-v)); }
// gelu: erff (cheaper) where 1 + erf keeps its digits, erfcf below -3 where it would cancel
// (1 + erf(-3 / sqrt 2) = 0.0027: under 3 of float's 7 digits lost, fewer than bf16/f16 keep).
__device__ inline float gelu(float g) {
  return g >= -3.0f ? 0.5f * g * (1.0f + erff(g * 0.7071067811865476f)) : 0.5f * g * erfcf(g * -0.7071067811865476f);
}
__device__ inline float gelu_tanh(float g) { return __fdividef(g, 1.0f + __expf(-1.5957691216057308f * (g + 0.044715f * g * g * g))); }

__device__ inline bool aligned16(const void* p) { return (reinterpret_cast<u64>(p) & 15) == 0; }

__device__ inline float warp_sum(float v) {
  for (int m = JITK_WARP_SIZE / 2; m > 0; m /= 2) v += JITK_SHFL_XOR(v, m);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int m = JITK_WARP_SIZE / 2; m > 0; m /= 2) v = fmaxf(v, JITK_SHFL_XOR(v, m));
  return v;
}

// Warps in a block: at most 32 (1024 threads of 32; HIP's 64-wide waves need half that), so a
// reduction's scratch of 32 floats always holds one per warp.
enum : int { kMaxWarps = 32 };

// Reduces over the block; every thread gets the result. `scratch` holds one float per warp (kMaxWarps).
template <bool IsMax> __device__ inline float block_reduce(float v, float* scratch) {
  constexpr int warps = (JITK_BLOCK + JITK_WARP_SIZE - 1) / JITK_WARP_SIZE;
  static_assert(warps <= kMaxWarps, "a block has more warps than the reduction scratch holds");
  v = IsMax ? warp_max(v) : warp_sum(v);
  if (warps == 1) return v;
  const int lane = threadIdx.x % JITK_WARP_SIZE, warp = threadIdx.x / JITK_WARP_SIZE;
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : (IsMax ? neg_inf() : 0.0f);
  return IsMax ? warp_max(v) : warp_sum(v);
}

}  // namespace jitk
