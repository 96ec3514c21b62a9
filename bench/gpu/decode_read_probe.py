#!/usr/bin/env python3
"""How fast can the decode step's KV cache be read at all? (H100 probe, CuPy; no jitk.)

Reads the bytes attention_decode reads for the Llama decode step (64 sequences x 4096 keys, 8 kv heads
of 128 bf16, K and V: 1 GiB, pages of 16 shuffled over the pool, NHD layout), a block of 4 warps a
(sequence, kv head), without the attention's math, several ways, each beside a D2D copy of the same
process (read + write bytes a second, the layer bench's bound):
  ldg        16-byte loads into registers, 4 keys of K and V a thread in flight
  cp<S>      cp.async.cg 16 bytes a lane into shared memory, each warp its own 8-key tiles, S stages
             (attention_decode's staging: S = 2)
  cp<S>_l2   the same with .L2::128B (the whole 128-byte line asked for at the first 16 bytes)
    python3 bench/gpu/decode_read_probe.py [ROUNDS]
Measured 2026-11-26 (bench/results/2026-11-26-h100-decode-l2-hint.md): ldg 1.02 of copy, cp2 0.97,
cp2_l2 0.99, a third stage no better, a fourth worse (3 blocks an SM).
"""
import sys

import cupy as cp
import numpy as np

SRC = r'''
template <bool HINT>
__device__ __forceinline__ void cp16(unsigned dst, const void* src) {
  if (HINT) asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, 16;\n" :: "r"(dst), "l"(src) : "memory");
  else asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 16;\n" :: "r"(dst), "l"(src) : "memory");
}
template <int N> __device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
// 4 warps, each its own 8-key tiles (tile t of warp w: keys (4 t + w) 8 ..), ST stages of K and V a warp
template <bool HINT, int ST>
__device__ void staged(const uint4* __restrict__ k, const uint4* __restrict__ v, const int* __restrict__ table, int pages, int P, int H, unsigned* out) {
  extern __shared__ __align__(128) uint4 dyn[];
  uint4 (*stage)[ST][2][8][17] = reinterpret_cast<uint4 (*)[ST][2][8][17]>(dyn);  // [warp][stage][K/V][key][pack + pad]
  const int seq = blockIdx.x / H, h = blockIdx.x % H, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tiles = pages * P / 8, steps = (tiles - warp + 3) / 4;
  unsigned acc = 0;
  auto issue = [&](int t) {
    if (t < steps) {
      const int s = t % ST, base = (t * 4 + warp) * 8;
      const long long page = table[seq * pages + base / P];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = i * 32 + lane, key = e / 16, pk = e % 16;
        const long long o = ((page * P + (base + key) % P) * H + h) * 16LL + pk;
        cp16<HINT>((unsigned)__cvta_generic_to_shared(&stage[warp][s][0][key][pk]), k + o);
        cp16<HINT>((unsigned)__cvta_generic_to_shared(&stage[warp][s][1][key][pk]), v + o);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int i = 0; i < ST - 1; ++i) issue(i);
  for (int t = 0; t < steps; ++t) {
    __syncwarp();
    issue(t + ST - 1);
    wait_groups<ST - 1>();
    __syncwarp();
    const uint4 x = stage[warp][t % ST][lane / 16][lane % 8][lane % 16];
    acc ^= x.x ^ x.w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}
#define STAGED(NAME, HINT, ST) extern "C" __global__ void __launch_bounds__(128, 4) NAME(const uint4* k, const uint4* v, const int* t, int pages, int P, int H, unsigned* out) { staged<HINT, ST>(k, v, t, pages, P, H, out); }
STAGED(cp2, false, 2) STAGED(cp3, false, 3) STAGED(cp4, false, 4) STAGED(cp2_l2, true, 2) STAGED(cp3_l2, true, 3) STAGED(cp4_l2, true, 4)
extern "C" __global__ void ldg(const uint4* __restrict__ k, const uint4* __restrict__ v, const int* __restrict__ table, int pages, int P, int H, unsigned* out) {
  const int seq = blockIdx.x / H, h = blockIdx.x % H, lane = threadIdx.x % 16, key0 = threadIdx.x / 16;
  unsigned acc = 0;
  for (int j = key0; j < pages * P; j += 32) {
    uint4 a[4], b[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int key = j + 8 * u;
      const long long o = ((static_cast<long long>(table[seq * pages + key / P]) * P + key % P) * H + h) * 16LL + lane;
      a[u] = k[o];
      b[u] = v[o];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= a[u].x ^ b[u].y;
  }
  if (acc == 0x12345678u) out[0] = acc;
}
'''


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    batch, context, kv_heads, head_dim, page = 64, 4096, 8, 128, 16
    pages = context // page
    num_pages = batch * pages
    elems = num_pages * page * kv_heads * head_dim  # bf16 elements of K (and of V)
    k = cp.ones(elems // 2, dtype=cp.uint32)
    v = cp.ones_like(k)
    dst = cp.empty_like(k)
    out = cp.zeros(1, dtype=cp.uint32)
    nbytes = 2 * elems * 2
    table = cp.asarray(np.random.default_rng(0).permutation(num_pages).astype(np.int32))

    def median_ms(f, reps=30):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        f()
        cp.cuda.Device(0).synchronize()
        ts = []
        for _ in range(reps):
            s.record()
            f()
            e.record()
            e.synchronize()
            ts.append(cp.cuda.get_elapsed_time(s, e))
        return float(np.median(ts))

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; {nbytes / 2**30:.2f} GiB of K and V")
    for r in range(rounds):
        copy_gbs = nbytes / median_ms(lambda: dst.__setitem__(slice(None), k)) / 1e6
        print(f"round {r}: D2D copy {copy_gbs:.0f} GB/s (read + write)")
        for name in ("ldg", "cp2", "cp3", "cp4", "cp2_l2", "cp3_l2", "cp4_l2"):
            f = mod.get_function(name)
            smem = 0 if name == "ldg" else 4 * int(name[2]) * 2 * 8 * 17 * 16
            if smem > 48 * 1024:
                f.max_dynamic_shared_size_bytes = smem
            ms = median_ms(lambda: f((batch * kv_heads,), (128,), (k, v, table, np.int32(pages), np.int32(page), np.int32(kv_heads), out),
                                     shared_mem=smem))
            gbs = nbytes / ms / 1e6
            print(f"  {name:<8} {gbs:6.0f} GB/s  {gbs / copy_gbs:.3f} of copy  ({ms:.4f} ms)")


if __name__ == "__main__":
    main()
