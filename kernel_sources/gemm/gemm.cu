// gemm and block_sparse_matmul on any CUDA GPU from sm_80.
//   gemm: C = alpha * A B + beta * C, then the epilogue chain; C row-major M x N (ldc), A (M x K)
//     and B (K x N) row- or column-major (JITK_A_LAYOUT_*, JITK_B_LAYOUT_*); gated (gate = silu,
//     gelu, gelu_tanh; f16 and bf16): C = act(gate columns) * up columns, M x N / 2 (below).
//   block_sparse_matmul (W: K x N of BLOCK_SIZE blocks, its support in `index`, its values the
//     present blocks, row-major each, in block-row order):
//     forward          Y = alpha X W + beta Y      (X: M x K, Y: M x N)
//     backward_input   dX = alpha dY W^T + beta dX (dY: M x N, dX: M x K)
//     backward_weight  dW = alpha X^T dY + beta dW on W's support only
//
// One block per TM x TN tile of the output, walking K in TK slices that cp.async keeps STAGES
// deep in shared memory. A slice wholly inside its matrix is copied from one base address a thread,
// at shared-memory offsets fixed at compile time and global ones that are multiples of the leading
// dimension; the general copy, whose index arithmetic and edge tests run per element, is kept for
// the edges (it cost f32 on the H100 a fifth of its speed: 35 against 44
// TFLOP/s at 4096^3).
//   f16, bf16: the slices stay in their global layout (each row padded by 16 bytes against bank
//              conflicts), so every layout loads with 16-byte copies (partial tiles and unaligned
//              matrices: element copies with zeros); each warp multiplies min(64, TM) x min(32, TN)
//              of the tile with WMMA 16x16x16 tensor-core fragments (float accumulators), staged
//              through shared memory for the epilogue.
//   f32:       each thread accumulates 8 x 8 (two 4-row by two 4-column blocks), 8 x 16 (four
//              column blocks) from TN = 256, with FMAs. Both slices are kept as rows of K ([TK][TM],
//              [TK][TN], rows padded to 4 mod 32 words) so a thread reads the 8 + 8 (8 + 16) values
//              of a k with four (six) 16-byte loads: a row-major A (column-major B) is transposed
//              on the way in, through buffers of each thread's own where the tile allows (16-byte
//              cp.async copies, 16-byte loads and stores after the FMAs: SmemTranspose),
//              else by 4-byte cp.async copies zero-filled past the edges, a warp taking 4 rows x 8
//              elements.
// gemm's blocks run in groups of 8 tile rows so neighbouring blocks share A and B in L2; where the
// tiles end in a partial wave, its tiles are finished stream-K (JITK_STREAM_K, below).
#include "jitk_gpu.h"
#include "jitk_gate.h"
#if !JITK_DTYPE_F32
#include <mma.h>
#endif

#if JITK_KERNEL_BLOCK_SPARSE_MATMUL
constexpr int BS = JITK_BLOCK_SIZE;
#if JITK_OP_BACKWARD_WEIGHT
constexpr int TM = BS, TN = BS, TK = 32;
constexpr bool A_ROW = false, B_ROW = true;  // A = X^T (X row-major), B = dY
#else
constexpr int TM = JITK_TILE_M, TN = BS, TK = BS;
#if JITK_OP_FORWARD
constexpr bool A_ROW = true, B_ROW = true;  // A = X, B = a block of W
#else
constexpr bool A_ROW = true, B_ROW = false;  // A = dY, B = a block of W read as its transpose
#endif
#endif
#else
constexpr int TM = JITK_TILE_M, TN = JITK_TILE_N, TK = JITK_TILE_K;
#if JITK_A_LAYOUT_COL
constexpr bool A_ROW = false;
#else
constexpr bool A_ROW = true;
#endif
#if JITK_B_LAYOUT_COL
constexpr bool B_ROW = false;
#else
constexpr bool B_ROW = true;
#endif
#endif
constexpr int STAGES = JITK_STAGES;
constexpr int THREADS = JITK_BLOCK;
#if JITK_DTYPE_F32
// A thread's share: 8 rows by RN columns (16 from TN = 256: more FMAs a shared-memory read, one
// block an SM with up to 255 registers).
constexpr int RN = TN >= 256 ? 16 : 8;
constexpr int WORKERS = TM * TN / (8 * RN);  // threads with a share; the rest (small tiles) only load
#else
constexpr int WARP_M = TM < 64 ? TM : 64, WARP_N = TN < 32 ? TN : 32;
constexpr int WORKERS = TM / WARP_M * (TN / WARP_N) * 32;
#endif
static_assert(THREADS == (WORKERS < 32 ? 32 : WORKERS), "gemm.cu: the host's tile plan and this text disagree on the threads");
// Two blocks an SM (at most 128 registers a thread at 256 threads): one block of 8 warps left
// the FMA pipes waiting on shared memory (f32 at 4096^3 on the H100: 28 TFLOP/s, 145 registers).
// f32's 8 x 16 shares need more registers: one block.
#if JITK_DTYPE_F32
constexpr int MIN_BLOCKS = RN == 16 ? 1 : 2;
#else
constexpr int MIN_BLOCKS = 2;
#endif
constexpr int V = 16 / sizeof(T);  // elements in a 16-byte copy, and the row padding
// A slice in global memory: A_G_OUTER rows of A_G_INNER elements ([TM][TK] row-major, [TK][TM]
// column-major); B's: [TK][TN] row-major, [TN][TK] column-major. f32 transposes A row-major and B
// column-major on the way into shared memory (A_T, B_T): there both are rows of K.
constexpr int A_G_OUTER = A_ROW ? TM : TK, A_G_INNER = A_ROW ? TK : TM;
constexpr int B_G_OUTER = B_ROW ? TK : TN, B_G_INNER = B_ROW ? TN : TK;
#if JITK_DTYPE_F32
constexpr bool A_T = A_ROW, B_T = !B_ROW;
#else
constexpr bool A_T = false, B_T = false;
#endif
// Rows padded by 16 bytes against bank conflicts; f32's to 4 mod 32 words (the transposed copy's
// conflict-free stride; the host's plan pads the same way).
constexpr int padded(int n) { return sizeof(T) == 4 ? n + (36 - n % 32) % 32 : n + V; }
constexpr int A_OUTER = A_T ? A_G_INNER : A_G_OUTER, A_INNER = A_T ? A_G_OUTER : A_G_INNER, A_LD = padded(A_INNER);
constexpr int B_OUTER = B_T ? B_G_INNER : B_G_OUTER, B_INNER = B_T ? B_G_OUTER : B_G_INNER, B_LD = padded(B_INNER);

__device__ inline void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// One slice of an operand: OUTER rows of INNER elements from g (rows ld apart), starting at row o0
// and element i0; rows at or past outer_lim and elements at or past inner_lim read as zero.
template <int OUTER, int INNER, int LD>
__device__ inline void load_slice(T* s, const T* __restrict__ g, i64 ld, i64 o0, i64 i0, i64 outer_lim, i64 inner_lim, bool vec) {
  constexpr int CHUNKS = INNER / V;  // TK, TM and TN are multiples of 16
  if constexpr (THREADS % CHUNKS == 0 && (OUTER * CHUNKS) % THREADS == 0) {
    if (vec && o0 + OUTER <= outer_lim && i0 + INNER <= inner_lim) {
      // Wholly inside: a thread's copies are THREADS / CHUNKS rows apart in one column of chunks.
      constexpr int STEP = THREADS / CHUNKS;
      const int r = threadIdx.x / CHUNKS, q = (threadIdx.x % CHUNKS) * V;
      const T* src = g + (o0 + r) * ld + i0 + q;
      T* dst = s + r * LD + q;
#pragma unroll
      for (int e = 0; e < OUTER / STEP; ++e) cp_async16(dst + e * STEP * LD, src + e * STEP * ld, 16);
      return;
    }
  }
  for (int c = threadIdx.x; c < OUTER * CHUNKS; c += THREADS) {
    const int r = c / CHUNKS, q = (c % CHUNKS) * V;
    const i64 go = o0 + r, gi = i0 + q;
    i64 valid = go < outer_lim ? inner_lim - gi : 0;
    valid = valid < 0 ? 0 : valid > V ? V : valid;
    T* dst = s + r * LD + q;
    if (vec) {
      // src_bytes < 16 fills the rest of the 16 bytes with zeros; nothing is read when it is 0.
      cp_async16(dst, valid > 0 ? g + go * ld + gi : g, static_cast<int>(valid * sizeof(T)));
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) dst[e] = e < valid ? g[go * ld + gi + e] : jitk::from_float<T>(0.f);
    }
  }
}

__device__ inline void cp_async4(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}

// The same slice transposed: element (r, q) of the global slice lands at s[q * LD + r]. A warp
// copies 4 rows x 8 elements: 32-byte runs of global memory, and (LD = 4 mod 32 words) 32
// distinct banks. 4-byte elements only (f32).
template <int OUTER, int INNER, int LD>
__device__ inline void load_slice_t(T* s, const T* __restrict__ g, i64 ld, i64 o0, i64 i0, i64 outer_lim, i64 inner_lim) {
  static_assert(sizeof(T) == 4 && OUTER % 4 == 0 && INNER % 8 == 0 && LD % 32 == 4, "gemm.cu: a transposed slice it cannot copy");
  constexpr int ROW_GROUPS = OUTER / 4, WARPS = THREADS / 32;
  if constexpr ((OUTER * INNER) % THREADS == 0 && THREADS % 32 == 0 && ROW_GROUPS % WARPS == 0) {
    if (o0 + OUTER <= outer_lim && i0 + INNER <= inner_lim) {
      // Wholly inside: copy e of a thread is group warp + e x WARPS, at fixed offsets from its first.
      constexpr int SPAN = ROW_GROUPS / WARPS;
      const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
      const T* src = g + (o0 + warp * 4 + lane % 4) * ld + i0 + lane / 4;
      T* dst = s + (lane / 4) * LD + warp * 4 + lane % 4;
#pragma unroll
      for (int e = 0; e < OUTER * INNER / THREADS; ++e) {
        const int dr = (e % SPAN) * WARPS * 4, dq = (e / SPAN) * 8;
        cp_async4(dst + dq * LD + dr, src + dr * ld + dq, 4);
      }
      return;
    }
  }
  for (int c = threadIdx.x; c < OUTER * INNER; c += THREADS) {
    const int group = c / 32, lane = c % 32;
    const int r = (group % ROW_GROUPS) * 4 + lane % 4, q = (group / ROW_GROUPS) * 8 + lane / 4;
    const i64 go = o0 + r, gi = i0 + q;
    const bool in = go < outer_lim && gi < inner_lim;
    cp_async4(s + q * LD + r, in ? g + go * ld + gi : g, in ? 4 : 0);
  }
}

// Where slice t of an operand lies: OUTER x INNER elements of g (rows ld apart) from row o0 and
// element i0; rows at or past outer_lim and elements at or past inner_lim read as zero. vec: g and
// ld allow 16-byte copies.
struct Slice {
  const T* __restrict__ g;
  i64 ld, o0, i0, outer_lim, inner_lim;
  bool vec;
};

// The copiers: fetch(t, slice) starts slice t's copies, put(t) finishes them (after the FMAs of
// slice t - 1, with slice t's copy group waited for), at(t) is where the FMAs read slice t; ELEMS is
// the shared memory each takes.
// AsyncCopy: STAGES slots of the slice by cp.async, as it lies in global memory or transposed
// (TRANS); it lands with its commit group, so there is nothing to put.
template <bool TRANS, int OUTER, int INNER, int LD>
struct AsyncCopy {
  static constexpr int SLOT = (TRANS ? INNER : OUTER) * LD, ELEMS = STAGES * SLOT;
  T* base;
  __device__ explicit AsyncCopy(T* region) : base(region) {}
  __device__ T* at(i64 t) const { return base + (t % STAGES) * SLOT; }
  __device__ void fetch(i64 t, const Slice& sl) {
    if constexpr (TRANS) load_slice_t<OUTER, INNER, LD>(at(t), sl.g, sl.ld, sl.o0, sl.i0, sl.outer_lim, sl.inner_lim);
    else load_slice<OUTER, INNER, LD>(at(t), sl.g, sl.ld, sl.o0, sl.i0, sl.outer_lim, sl.inner_lim, sl.vec);
  }
  __device__ void put(i64) const {}
};

// f32's transposed slice through buffers of the thread's own: fetch copies 4 x 4 blocks (4 rows of
// 4 elements, 16-byte cp.async) STAGES - 1 slices ahead into a ring of STAGES - 1 buffers, like the
// slots of an operand copied as it is; put writes slice t's blocks' 4 columns as 16-byte rows of
// one of two [INNER][OUTER] slots after slice t - 1's FMAs. Nothing lives in registers across the
// FMAs (blocks staged in registers spilled past 2 a thread, so row-major A and column-major B could
// not both be), and the copies have as long to land as the other operand's (with one buffer, put
// waited for copies issued one slice before: row-major A column-major B on the H100 stalled 5% of
// its time there; 4-byte cp.async transposition cost f32 5% too). A warp takes 16 rows x 32
// elements: each row's 128 bytes whole, and in each quarter warp 2 columns of blocks x 4 of rows, 8
// distinct 4-bank groups of the stores with LD = 4 mod 32 words. A buffer is [BLOCKS][4][THREADS]
// 16-byte rows: a warp's reads and copies of it are 512 contiguous bytes.
template <int OUTER, int INNER, int LD>
struct SmemTranspose {
  static constexpr int WARPS = THREADS / 32, UNITS = OUTER / 16 * (INNER / 32), BLOCKS = UNITS / WARPS;
  static constexpr int RAW = OUTER * INNER, SLOT = INNER * LD, ELEMS = (STAGES - 1) * RAW + 2 * SLOT;
  static_assert(OUTER % 16 == 0 && INNER % 32 == 0 && UNITS % WARPS == 0 && LD % 32 == 4, "gemm.cu: a staged slice it cannot copy");
  static_assert(BLOCKS * 16 * THREADS == RAW, "gemm.cu: a staging buffer holds the slice");
  T* slots;  // then the buffers
  __device__ explicit SmemTranspose(T* region) : slots(region) {}
  __device__ T* at(i64 t) const { return slots + (t % 2) * SLOT; }
  __device__ static int row(int b) {  // the block's first row in the slice
    const int lane = threadIdx.x % 32, unit = threadIdx.x / 32 + b * WARPS;
    return unit % (OUTER / 16) * 16 + (lane / 2) % 4 * 4;
  }
  __device__ static int inner(int b) {  // its first element
    const int lane = threadIdx.x % 32, unit = threadIdx.x / 32 + b * WARPS;
    return unit / (OUTER / 16) * 32 + ((lane / 8) * 2 + lane % 2) * 4;
  }
  __device__ T* mine(i64 t, int b, int i) const {
    return slots + 2 * SLOT + (t % (STAGES - 1)) * RAW + ((b * 4 + i) * THREADS + threadIdx.x) * 4;
  }
  __device__ void fetch(i64 t, const Slice& sl) {
    if (sl.vec && sl.o0 + OUTER <= sl.outer_lim && sl.i0 + INNER <= sl.inner_lim) {
#pragma unroll
      for (int b = 0; b < BLOCKS; ++b) {
        const T* src = sl.g + (sl.o0 + row(b)) * sl.ld + sl.i0 + inner(b);
#pragma unroll
        for (int i = 0; i < 4; ++i) cp_async16(mine(t, b, i), src + i * sl.ld, 16);
      }
      return;
    }
    // The edges (and unaligned matrices): element loads, zeros past the limits, stored as they are.
#pragma unroll
    for (int b = 0; b < BLOCKS; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const i64 go = sl.o0 + row(b) + i, gi = sl.i0 + inner(b);
        float e[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) e[j] = go < sl.outer_lim && gi + j < sl.inner_lim ? sl.g[go * sl.ld + gi + j] : 0.f;
        *reinterpret_cast<float4*>(mine(t, b, i)) = make_float4(e[0], e[1], e[2], e[3]);
      }
  }
  __device__ void put(i64 t) const {  // only this thread reads its buffers: no barrier
#pragma unroll
    for (int b = 0; b < BLOCKS; ++b) {
      float4 v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = *reinterpret_cast<const float4*>(mine(t, b, i));
      T* dst = at(t) + inner(b) * LD + row(b);
      *reinterpret_cast<float4*>(dst) = make_float4(v[0].x, v[1].x, v[2].x, v[3].x);
      *reinterpret_cast<float4*>(dst + LD) = make_float4(v[0].y, v[1].y, v[2].y, v[3].y);
      *reinterpret_cast<float4*>(dst + 2 * LD) = make_float4(v[0].z, v[1].z, v[2].z, v[3].z);
      *reinterpret_cast<float4*>(dst + 3 * LD) = make_float4(v[0].w, v[1].w, v[2].w, v[3].w);
    }
  }
};

// How an operand's slices reach shared memory: a transposed slice through SmemTranspose where it
// divides into whole warps' 16 x 32 units, else by cp.async.
template <bool TRANS, int OUTER, int INNER>
constexpr bool stageable() {
  return TRANS && THREADS % 32 == 0 && OUTER % 16 == 0 && INNER % 32 == 0 && (OUTER / 16 * (INNER / 32)) % (THREADS / 32) == 0;
}
template <bool STAGED, bool TRANS, int OUTER, int INNER, int LD> struct PickCopy { using type = AsyncCopy<TRANS, OUTER, INNER, LD>; };
template <bool TRANS, int OUTER, int INNER, int LD> struct PickCopy<true, TRANS, OUTER, INNER, LD> {
  using type = SmemTranspose<OUTER, INNER, LD>;
};
using CopyA = typename PickCopy<stageable<A_T, A_G_OUTER, A_G_INNER>(), A_T, A_G_OUTER, A_G_INNER, A_LD>::type;
using CopyB = typename PickCopy<stageable<B_T, B_G_OUTER, B_G_INNER>(), B_T, B_G_OUTER, B_G_INNER, B_LD>::type;
// A's region, then B's (the host's plan counts them the same way).
static_assert((CopyA::ELEMS + CopyB::ELEMS) * (int)sizeof(T) <= JITK_SHARED_BYTES,
              "gemm.cu: the slices need more shared memory than the host planned");

// The slices a tile walks: slices(t, sa, sb) says where slice t of A and of B lies.
#if JITK_KERNEL_BLOCK_SPARSE_MATMUL
// index: row_ptr[block_rows + 1], col_of[nnz], row_of[nnz], col_ptr[block_cols + 1], by_col[nnz]
// (block ids column by column), rows_by_count[block_rows], cols_by_count[block_cols]. Block b's values are at w + b * BS * BS.
struct Walk {
  const T* __restrict__ a;
  const T* __restrict__ b;
  i64 M, lda, ldb;
  i64 a_cols, b_cols;  // the columns of A's and B's matrices (X: K, dY: N)
  const int* __restrict__ ids;    // forward: the blocks walked, by id; backward_input: null (ids first, first + 1, ...)
  const int* __restrict__ other;  // forward: each block's row; backward_input: its column
  i64 m0;
  int first;                  // backward_input: the first block of the row
  int block_row, block_col;   // backward_weight: the block of dW
  bool a_vec, b_vec;
  __device__ void slices(i64 t, Slice& sa, Slice& sb) const {
#if JITK_OP_BACKWARD_WEIGHT
    // A = X^T: rows k0.. of X, the columns of the block row; B: dY's columns of the block column
    const i64 k0 = t * TK;
    sa = {a, lda, k0, static_cast<i64>(block_row) * BS, M, a_cols, a_vec};
    sb = {b, ldb, k0, static_cast<i64>(block_col) * BS, M, b_cols, b_vec};
#else
    // Slice t is one block: A's columns of its row (forward) or column; B the block, copied as it
    // is (forward reads it as [k][n], backward_input as [n][k]: the transpose).
    const int id = ids ? ids[t] : first + static_cast<int>(t);
    sa = {a, lda, m0, static_cast<i64>(other[id]) * BS, M, a_cols, a_vec};
    sb = {b + static_cast<i64>(id) * BS * BS, BS, 0, 0, BS, BS, b_vec};
#endif
  }
};
#else
struct Walk {
  const T* __restrict__ a;
  const T* __restrict__ b;
  i64 M, N, K, lda, ldb, m0, n0;
  bool a_vec, b_vec;
  __device__ void slices(i64 t, Slice& sa, Slice& sb) const {
    const i64 k0 = t * TK;
    sa = A_ROW ? Slice{a, lda, m0, k0, M, K, a_vec} : Slice{a, lda, k0, m0, K, M, a_vec};
    sb = B_ROW ? Slice{b, ldb, k0, n0, K, N, b_vec} : Slice{b, ldb, n0, k0, N, K, b_vec};
  }
};
#endif

// The value written to C at (r, col): alpha * acc (+ beta * C), then the epilogue chain.
__device__ inline void write_c(T* __restrict__ c, i64 ldc, i64 r, i64 col, float acc, float alpha, float beta,
                               const jitk_chain& chain) {
  const i64 at = r * ldc + col;
  float v[1] = {alpha * acc};
  if (beta != 0.f) v[0] += beta * jitk::to_float(c[at]);
  chain.epilogue<1>(v, at, col);
  c[at] = jitk::from_float<T>(v[0]);
}

// gate = silu / gelu / gelu_tanh (gemm, f16 and bf16: the host's plan refuses f32): B's columns in
// groups of 16, 8 gate then 8 up (include/jit/kernels/gemm.hpp); C is M x N / 2. The staged sums of
// a tile (below) hold both columns of a pair: C(r, o) from its group's gate and up sums.
constexpr bool GATED = JITK_GATED;  // jitk_gate.h: gate = silu / gelu / gelu_tanh
constexpr int GB = 8;  // gate columns a group
static_assert(!GATED || TN % (2 * GB) == 0, "gemm.cu: a gated tile the host's plan refuses");
#if JITK_DTYPE_F32
static_assert(!GATED, "gemm.cu: f32's sums stay in registers; the host's plan refuses it gated");
#endif
// Where output column o of a tile (o < TN / 2) finds its gate sum; its up sum is GB on.
__device__ inline int gate_column(int o) { return o / GB * 2 * GB + o % GB; }
// The value written to C at (r, col) of a gated gemm: act(alpha g) * alpha u, g and u rounded to T
// as the unfused pair (gemm, silu_and_mul) stores them, (+ beta * C), then the chain.
__device__ inline void write_gated(T* __restrict__ c, i64 ldc, i64 r, i64 col, float g, float u, float alpha, float beta,
                                   const jitk_chain& chain) {
  const i64 at = r * ldc + col;
  const float gv = jitk::to_float(jitk::from_float<T>(alpha * g)), uv = jitk::to_float(jitk::from_float<T>(alpha * u));
  float v[1] = {jitk::JITK_GATE_ACTIVATION(gv) * uv};
  if (beta != 0.f) v[0] += beta * jitk::to_float(c[at]);
  chain.epilogue<1>(v, at, col);
  c[at] = jitk::from_float<T>(v[0]);
}

// The sums of a tile as floats in shared memory (the 16-bit path's staging for the epilogue, and
// where split tiles meet), rows C_LD apart.
constexpr int C_LD = TN + 4;
#if !JITK_DTYPE_F32 || defined(JITK_MAX_SPLIT_K)  // f32 tiles are staged only to be split
static_assert(TM * C_LD * 4 <= JITK_SHARED_BYTES, "gemm.cu: C's staging needs more shared memory than the host planned");
#endif

// The blocks sharing this block's tile, each walking a share of its K, and this block's place
// among them: a cluster (sm_90), whose size the launch chose (1: a launch without clusters, the
// rule before sm_90, and for tiles the host's plan never splits: JITK_MAX_SPLIT_K undefined).
struct Split {
  unsigned blocks, rank;
};
__device__ inline Split this_split() {
#if __CUDA_ARCH__ >= 900 && defined(JITK_MAX_SPLIT_K)
  return {jitk::cluster_size(), jitk::cluster_rank()};
#else
  return {1u, 0u};
#endif
}

// A split tile's C: with every block's sums staged, block `rank` of the `split` adds them up for
// its share of the rows (in rank order, the same sum whoever adds) and writes those rows.
__device__ inline void write_split(const float* staging, unsigned split, unsigned rank, T* __restrict__ c, i64 M, i64 N, i64 ldc,
                                   i64 m0, i64 n0, float alpha, float beta, const jitk_chain& chain) {
#if __CUDA_ARCH__ >= 900 && defined(JITK_MAX_SPLIT_K)
  jitk::cluster_sync();  // every block's sums are staged
  const int rows = (TM + static_cast<int>(split) - 1) / static_cast<int>(split), r0 = static_cast<int>(rank) * rows;
  const int r1 = r0 + rows < TM ? r0 + rows : TM;
  if (GATED) {
    for (int e = threadIdx.x; e < (r1 - r0) * (TN / 2); e += THREADS) {
      const int r = r0 + e / (TN / 2), o = e % (TN / 2), col = gate_column(o);
      if (m0 + r >= M || n0 + col >= N) continue;
      float g = 0.f, u = 0.f;
      for (unsigned q = 0; q < split; ++q) {
        g += jitk::cluster_load(staging + r * C_LD + col, q);
        u += jitk::cluster_load(staging + r * C_LD + col + GB, q);
      }
      write_gated(c, ldc, m0 + r, n0 / 2 + o, g, u, alpha, beta, chain);
    }
    jitk::cluster_sync();
    return;
  }
  for (int e = threadIdx.x; e < (r1 - r0) * TN; e += THREADS) {
    const int r = r0 + e / TN, col = e % TN;
    if (m0 + r >= M || n0 + col >= N) continue;
    float sum = 0.f;
    for (unsigned q = 0; q < split; ++q) sum += jitk::cluster_load(staging + r * C_LD + col, q);
    write_c(c, ldc, m0 + r, n0 + col, sum, alpha, beta, chain);
  }
  jitk::cluster_sync();  // no block leaves while another reads its shared memory
#endif
}

#if !JITK_DTYPE_F32
using namespace nvcuda;
constexpr int WARPS_N = TN / WARP_N, FM = WARP_M / 16, FN = WARP_N / 16;
template <bool Row> struct Major { using type = wmma::row_major; };
template <> struct Major<false> { using type = wmma::col_major; };
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, typename Major<A_ROW>::type>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, typename Major<B_ROW>::type>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

struct Accumulators {
  FragC f[FM][FN];  // the warp's WARP_M x WARP_N
  int wm, wn;
  __device__ Accumulators() : wm((threadIdx.x / 32) / WARPS_N), wn((threadIdx.x / 32) % WARPS_N) {
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::fill_fragment(f[i][j], 0.f);
  }
  __device__ void multiply(const T* sa, const T* sb) {
#pragma unroll
    for (int kk = 0; kk < TK; kk += 16) {
      FragA fa[FM];
      FragB fb[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i) {
        const int m = wm * WARP_M + i * 16;
        wmma::load_matrix_sync(fa[i], A_ROW ? sa + m * A_LD + kk : sa + kk * A_LD + m, A_LD);
      }
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        const int n = wn * WARP_N + j * 16;
        wmma::load_matrix_sync(fb[j], B_ROW ? sb + kk * B_LD + n : sb + n * B_LD + kk, B_LD);
      }
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(f[i][j], fa[i], fb[j], f[i][j]);
    }
  }
  // Every accumulator of this thread with its index (stream-K's partial sums: the same fragment
  // elements in every block).
  static constexpr int COUNT = FM * FN * FragC::num_elements;
  template <class F> __device__ void each(F&& visit) {
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j)
#pragma unroll
        for (int e = 0; e < FragC::num_elements; ++e) visit((i * FN + j) * FragC::num_elements + e, f[i][j].x[e]);
  }
  // Through shared memory (the fragments' element order is the hardware's), then coalesced rows;
  // a split tile's rows summed over the cluster's blocks.
  __device__ void store(float* staging, T* __restrict__ c, i64 M, i64 N, i64 ldc, i64 m0, i64 n0, float alpha, float beta,
                        const jitk_chain& chain, unsigned split = 1, unsigned rank = 0) const {
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j)
        wmma::store_matrix_sync(staging + (wm * WARP_M + i * 16) * C_LD + wn * WARP_N + j * 16, f[i][j], C_LD, wmma::mem_row_major);
    if (split > 1) return write_split(staging, split, rank, c, M, N, ldc, m0, n0, alpha, beta, chain);
    __syncthreads();
    if (GATED) {
      for (int e = threadIdx.x; e < TM * (TN / 2); e += THREADS) {
        const int r = e / (TN / 2), o = e % (TN / 2), col = gate_column(o);
        if (m0 + r < M && n0 + col < N)
          write_gated(c, ldc, m0 + r, n0 / 2 + o, staging[r * C_LD + col], staging[r * C_LD + col + GB], alpha, beta, chain);
      }
      return;
    }
    for (int e = threadIdx.x; e < TM * TN; e += THREADS) {
      const int r = e / TN, col = e % TN;
      if (m0 + r < M && n0 + col < N) write_c(c, ldc, m0 + r, n0 + col, staging[r * C_LD + col], alpha, beta, chain);
    }
  }
};
#else
// Thread (ty, tx) owns rows ty*4 + {0..3} and TM/2 + ty*4 + {0..3}, and RN / 4 groups of 4
// columns, TN / (RN / 4) apart from tx*4. A warp holds 4 ty x 8 tx where the tile allows (its reads
// of a k are then 64 bytes of A and 128 of B: one shared-memory wavefront each), else 32 / TX ty x
// TX tx.
constexpr int CG = RN / 4;  // column groups
constexpr int TX = TN / RN, TY = TM / 8;
constexpr bool WARP_TILES = TX % 8 == 0 && TY % 4 == 0;
static_assert(A_OUTER == TK && B_OUTER == TK, "gemm.cu: f32 keeps both slices as rows of K");
struct Accumulators {
  float acc[8][RN];
  int ty, tx;
  __device__ Accumulators() {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (WARP_TILES) {
      ty = (warp / (TX / 8)) * 4 + lane / 8, tx = (warp % (TX / 8)) * 8 + lane % 8;
    } else {
      ty = threadIdx.x / TX, tx = threadIdx.x % TX;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < RN; ++j) acc[i][j] = 0.f;
  }
  __device__ static int row(int ty, int i) { return (i < 4 ? 0 : TM / 2) + ty * 4 + (i & 3); }
  __device__ static int col(int tx, int j) { return (j / 4) * (TN / CG) + tx * 4 + (j & 3); }
  __device__ static void load(float (&av)[8], float (&bv)[RN], const float* sa, const float* sb, int k) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 x = *reinterpret_cast<const float4*>(sa + k * A_LD + h * (TM / 2));
      av[h * 4] = x.x, av[h * 4 + 1] = x.y, av[h * 4 + 2] = x.z, av[h * 4 + 3] = x.w;
    }
#pragma unroll
    for (int g = 0; g < CG; ++g) {
      const float4 y = *reinterpret_cast<const float4*>(sb + k * B_LD + g * (TN / CG));
      bv[g * 4] = y.x, bv[g * 4 + 1] = y.y, bv[g * 4 + 2] = y.z, bv[g * 4 + 3] = y.w;
    }
  }
  __device__ void fma(const float (&av)[8], const float (&bv)[RN]) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < RN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
  }
  // With a block an SM (255 registers) and neither operand transposed, k + 1's values are read
  // while k's FMAs run (two register sets: A column-major B row-major on the H100 0.885 -> 0.902 of
  // cuBLAS; A row-major B row-major lost as much, 0.887 -> 0.874); two blocks an SM (128 registers)
  // have no room for them (128x128x16 spilled). Unrolled by 8, not TK: a fully unrolled slice
  // (TK x (8 * RN + 2 + CG) instructions) outgrows the instruction cache.
  static constexpr bool DOUBLE_BUFFER = MIN_BLOCKS == 1 && !A_T && !B_T;
  __device__ void multiply(const float* sa, const float* sb) {
    if (WORKERS < THREADS && threadIdx.x >= WORKERS) return;
    sa += ty * 4, sb += tx * 4;
    if constexpr (!DOUBLE_BUFFER) {
#pragma unroll 8
      for (int k = 0; k < TK; ++k) {
        float av[8], bv[RN];
        load(av, bv, sa, sb, k);
        fma(av, bv);
      }
      return;
    }
    float av[2][8], bv[2][RN];
    load(av[0], bv[0], sa, sb, 0);
#pragma unroll 4
    for (int k = 0; k < TK; k += 2) {
      load(av[1], bv[1], sa, sb, k + 1);
      fma(av[0], bv[0]);
      if (k + 2 < TK) load(av[0], bv[0], sa, sb, k + 2);
      fma(av[1], bv[1]);
    }
  }
  // Every accumulator of this thread with its index (stream-K's partial sums).
  static constexpr int COUNT = 8 * RN;
  template <class F> __device__ void each(F&& visit) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < RN; ++j) visit(i * RN + j, acc[i][j]);
  }
  // From registers; a split tile's sums are staged (16-byte rows of 4 columns) and summed over the
  // cluster's blocks.
  __device__ void store(float* staging, T* __restrict__ c, i64 M, i64 N, i64 ldc, i64 m0, i64 n0, float alpha, float beta,
                        const jitk_chain& chain, unsigned split = 1, unsigned rank = 0) const {
    const bool worker = !(WORKERS < THREADS && threadIdx.x >= WORKERS);
    if (split > 1) {
      if (worker)
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int g = 0; g < CG; ++g)
            *reinterpret_cast<float4*>(staging + row(ty, i) * C_LD + col(tx, g * 4)) =
                make_float4(acc[i][g * 4], acc[i][g * 4 + 1], acc[i][g * 4 + 2], acc[i][g * 4 + 3]);
      return write_split(staging, split, rank, c, M, N, ldc, m0, n0, alpha, beta, chain);
    }
    if (!worker) return;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const i64 r = m0 + row(ty, i);
      if (r >= M) continue;
#pragma unroll
      for (int j = 0; j < RN; ++j) {
        const i64 cc = n0 + col(tx, j);
        if (cc < N) write_c(c, ldc, r, cc, acc[i][j], alpha, beta, chain);
      }
    }
  }
};
#endif

// The K walk: STAGES - 1 slices in flight while one is multiplied (a copy group each). A staged
// operand's slice t + 1 is put after slice t's FMAs: its group has landed (the wait), its slot
// (t - 1's) is free from the barrier on, and the next barrier makes it visible.
__device__ inline void run_tile(const Walk& walk, i64 first, i64 slices, T* smem, Accumulators& acc) {
  CopyA copy_a(smem);
  CopyB copy_b(smem + CopyA::ELEMS);
  Slice slice_a, slice_b;
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < slices) {
      walk.slices(first + st, slice_a, slice_b);
      copy_a.fetch(st, slice_a);
      copy_b.fetch(st, slice_b);
    }
    cp_async_commit();
  }
  if (slices > 0) {
    cp_async_wait<STAGES - 2>();  // slice 0's group
    copy_a.put(0);
    copy_b.put(0);
  }
  for (i64 kt = 0; kt < slices; ++kt) {
    cp_async_wait<STAGES - 2>();  // slice kt has landed
    __syncthreads();              // ... for every thread, and slice kt - 1's slots are free
    const i64 next = kt + STAGES - 1;
    if (next < slices) {
      walk.slices(first + next, slice_a, slice_b);
      copy_a.fetch(next, slice_a);
      copy_b.fetch(next, slice_b);
    }
    cp_async_commit();
    acc.multiply(copy_a.at(kt), copy_b.at(kt));
    if (kt + 1 < slices) {
      cp_async_wait<STAGES - 2>();  // slice kt + 1's group
      copy_a.put(kt + 1);
      copy_b.put(kt + 1);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the staging of C reuses the slices' memory
}

#if JITK_KERNEL_BLOCK_SPARSE_MATMUL
// M: rows of X (and dY); K x N: W's shape (block_rows x block_cols blocks); a, b, c per op (above).
JITK_GPU_KERNEL_MIN_BLOCKS(MIN_BLOCKS)(i64 M, i64 N, i64 K, float alpha, const T* __restrict__ a, i64 lda, const T* __restrict__ b,
                              i64 ldb, float beta, T* __restrict__ c, i64 ldc, const int* __restrict__ index, i64 block_rows,
                              i64 block_cols, i64 nnz JITK_CHAIN_PARAMS, i64 rows) {
  extern __shared__ __align__(128) unsigned char jitk_smem[];
  const jitk_chain chain{JITK_CHAIN_ARGS};
  const int* row_ptr = index;
  const int* col_of = row_ptr + block_rows + 1;
  const int* row_of = col_of + nnz;
  const int* col_ptr = row_of + nnz;
  const int* by_col = col_ptr + block_cols + 1;
  const int* rows_by_count = by_col + nnz;
  const int* cols_by_count = rows_by_count + block_rows;
  (void)rows_by_count, (void)cols_by_count;
  T* smem = reinterpret_cast<T*>(jitk_smem);
  Accumulators acc;
#if JITK_OP_BACKWARD_WEIGHT
  const int id = blockIdx.x;  // one block of dW
  const Walk walk{a, b, M, lda, ldb, K, N, nullptr, nullptr, 0, 0, row_of[id], col_of[id],
                  jitk::aligned16(a) && lda % V == 0, jitk::aligned16(b) && ldb % V == 0};
  run_tile(walk, 0, (M + TK - 1) / TK, smem, acc);
  acc.store(reinterpret_cast<float*>(jitk_smem), c + static_cast<i64>(id) * BS * BS, BS, BS, BS, 0, 0, alpha, beta, chain);
#else
  // forward: tile (rows m0.., block column j) over column j's blocks; backward_input: tile (rows
  // m0.., dX's block column r = W's block row r) over row r's blocks. The columns (rows) with the
  // most blocks first: the long tiles start first, the short ones fill in.
  const i64 tiles_m = (M + TM - 1) / TM;
#if JITK_OP_FORWARD
  const i64 m0 = (blockIdx.x % tiles_m) * TM, j = cols_by_count[blockIdx.x / tiles_m];
#else
  const i64 m0 = (blockIdx.x % tiles_m) * TM, j = rows_by_count[blockIdx.x / tiles_m];
#endif
#if JITK_OP_FORWARD
  const int* ids = by_col + col_ptr[j];
  const i64 slices = col_ptr[j + 1] - col_ptr[j];
  const Walk walk{a, b, M, lda, ldb, K, N, ids, row_of, m0, 0, 0, 0, jitk::aligned16(a) && lda % V == 0, jitk::aligned16(b)};
  const i64 out_cols = N;
#else
  // row r's blocks are ids row_ptr[r] .. row_ptr[r + 1] - 1; ids_from[t] = row_ptr[r] + t
  const i64 first = row_ptr[j], slices = row_ptr[j + 1] - first;
  const Walk walk{a, b, M, lda, ldb, N, K, nullptr, col_of, m0, static_cast<int>(first), 0, 0, jitk::aligned16(a) && lda % V == 0,
                  jitk::aligned16(b)};
  const i64 out_cols = K;
#endif
  run_tile(walk, 0, slices, smem, acc);
  acc.store(reinterpret_cast<float*>(jitk_smem), c, M, out_cols, ldc, m0, j * BS, alpha, beta, chain);
#endif
}
#else
// Tile t's origin: tiles in groups of 8 tile rows, column by column within a group, so that
// neighbouring blocks share A and B in L2.
__device__ inline void tile_origin(i64 t, i64 tiles_m, i64 tiles_n, i64& m0, i64& n0) {
  const i64 group = 8, per_group = group * tiles_n;
  const i64 first = t / per_group * group, in_group = tiles_m - first < group ? tiles_m - first : group;
  m0 = (first + (t % per_group) % in_group) * TM, n0 = (t % per_group) / in_group * TN;
}

#if JITK_STREAM_K
// Stream-K (tiles for M that fills the SMs): the launch's first sk_dp_blocks blocks take a tile
// each; the rest, at most a wave, walk equal shares of the remaining tiles' K slices, cut at tile
// ends. A share's piece that starts inside a tile is published (this thread's sums, by index, at
// sk_work + block * TM * TN, then its flag); the piece holding a tile's first slices -- the end of
// its block's share, so the pieces after it were published first -- waits for the blocks after
// it that hold the rest, adds their sums in block order (the same result whatever the timing)
// and stores the tile. A block waits only on later blocks, and only after its other pieces, while
// each block publishes before it waits: with blocks started in order, some waiting block always
// finds what it waits for done or running, as long as the SMs hold two of these blocks at once.
#define JITK_SK_PARAMS , float* __restrict__ sk_work, unsigned* __restrict__ sk_flags, i64 sk_dp_blocks
static_assert(Accumulators::COUNT * THREADS == TM * TN, "gemm.cu: stream-K's partial sums are a tile of floats a block");
__device__ inline void sk_publish(Accumulators& acc, float* sums, unsigned* flag) {
  acc.each([&](int r, float& v) { __stcg(sums + r * THREADS + threadIdx.x, v); });
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(flag), "r"(1u) : "memory");
}
__device__ inline void sk_add(Accumulators& acc, const float* sums, const unsigned* flag) {
  if (threadIdx.x == 0) {
    unsigned ready = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(ready) : "l"(flag) : "memory");
    } while (!ready);
    __threadfence();
  }
  __syncthreads();
  acc.each([&](int r, float& v) { v += __ldcg(sums + r * THREADS + threadIdx.x); });
}
#else
#define JITK_SK_PARAMS
#endif

JITK_GPU_KERNEL_MIN_BLOCKS(MIN_BLOCKS)(i64 M, i64 N, i64 K, float alpha, const T* __restrict__ a, i64 lda, const T* __restrict__ b,
                              i64 ldb, float beta, T* __restrict__ c, i64 ldc JITK_CHAIN_PARAMS, i64 rows JITK_SK_PARAMS) {
  extern __shared__ __align__(128) unsigned char jitk_smem[];
  const jitk_chain chain{JITK_CHAIN_ARGS};
  const i64 tiles_m = (M + TM - 1) / TM, tiles_n = (N + TN - 1) / TN;
  const i64 slices = (K + TK - 1) / TK;
  T* smem = reinterpret_cast<T*>(jitk_smem);
  const bool a_vec = jitk::aligned16(a) && lda % V == 0, b_vec = jitk::aligned16(b) && ldb % V == 0;
#if JITK_STREAM_K
  if (static_cast<i64>(blockIdx.x) >= sk_dp_blocks) {
    const i64 blocks = gridDim.x - sk_dp_blocks, me = blockIdx.x - sk_dp_blocks;
    const i64 total = (tiles_m * tiles_n - sk_dp_blocks) * slices;
    const i64 lo = me * total / blocks, hi = (me + 1) * total / blocks;
    for (i64 at = lo; at < hi;) {
      const i64 u = at / slices, start = u * slices, end = start + slices, stop = hi < end ? hi : end;
      i64 m0, n0;
      tile_origin(sk_dp_blocks + u, tiles_m, tiles_n, m0, n0);
      const Walk walk{a, b, M, N, K, lda, ldb, m0, n0, a_vec, b_vec};
      Accumulators acc;
      run_tile(walk, at - start, stop - at, smem, acc);
      if (at > start) {
        sk_publish(acc, sk_work + me * TM * TN, sk_flags + me);
      } else {
        for (i64 q = me + 1; q < blocks && q * total / blocks < end; ++q) sk_add(acc, sk_work + q * TM * TN, sk_flags + q);
        acc.store(reinterpret_cast<float*>(jitk_smem), c, M, N, ldc, m0, n0, alpha, beta, chain);
      }
      __syncthreads();  // the next piece's slices reuse the staging's memory
      at = stop;
    }
    return;
  }
#endif
  // A tile split over a cluster's blocks (few tiles for the SMs: the launch decides) gives each a
  // share of its K slices.
  const auto [split, rank] = this_split();
  const i64 bid = blockIdx.x / split;
  // A text built for an older arch than the device's (NVRTC's PTX fallback) never splits, though the
  // launch may have: the blocks past the tiles have nothing to do.
  if (bid >= tiles_m * tiles_n) return;
  i64 m0, n0;
  tile_origin(bid, tiles_m, tiles_n, m0, n0);
  const Walk walk{a, b, M, N, K, lda, ldb, m0, n0, a_vec, b_vec};
  Accumulators acc;
  i64 from = 0, count = slices;  // constants where the tile is never split
  if (split > 1) {               // balanced shares: each block floor(slices / split) or one more
    from = rank * slices / split;
    count = (rank + 1) * slices / split - from;
  }
  run_tile(walk, from, count, smem, acc);
  acc.store(reinterpret_cast<float*>(jitk_smem), c, M, N, ldc, m0, n0, alpha, beta, chain, split, rank);
}
#endif

#if JITK_DTYPE_F32 && !JITK_KERNEL_BLOCK_SPARSE_MATMUL
// Packing (the launch decides; the driver looks this symbol up where it is): out, `cols` rows of
// `rows` elements (out_ld apart), = the transpose of in, `rows` rows of `cols` (ld apart). Rewrites
// an operand lying along K (A row-major, B column-major) along M or N, which this text's f32 tiles
// read without transposing them on the way into shared memory. 32 x 32 tiles through shared memory
// (a column of padding against bank conflicts), blocks of 32 x 8 threads, tiles by blockIdx.x.
extern "C" __global__ void __launch_bounds__(256) jitk_pack(const float* __restrict__ in, i64 ld, float* __restrict__ out,
                                                            i64 out_ld, i64 rows, i64 cols) {
  __shared__ float tile[32][33];
  const i64 tiles_c = (cols + 31) / 32, r0 = blockIdx.x / tiles_c * 32, c0 = blockIdx.x % tiles_c * 32;
  for (int i = threadIdx.y; i < 32; i += 8) {
    const i64 r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = in[r * ld + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) {
    const i64 c = c0 + i, r = r0 + threadIdx.x;
    if (c < cols && r < rows) out[c * out_ld + r] = tile[threadIdx.x][i];
  }
}
#endif
