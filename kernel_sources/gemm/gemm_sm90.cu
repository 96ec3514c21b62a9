// gemm on Hopper (sm_90a): C = alpha * A B + beta * C, then the epilogue chain, for f16 and bf16,
// any layout (A row-major and B column-major are K-major, as nn.Linear's x W^T; the others are
// read M- or N-major, transposed by wgmma); float accumulators. Gated (gate = silu, gelu,
// gelu_tanh): C = act(gate columns) * up columns, M x N / 2, paired in each thread's registers (store_gated).
//
// Blocks of 128 * (TILE_M / 64 + 1) threads in warpgroups (block-sparse forward and backward_input:
// 384, a producer and two consumers), persistent (at most JITK_BLOCKS_PER_SM an SM, each looping
// over TILE_M x TILE_N tiles of C):
//   warpgroup 0 (the producer; one thread works, a warp where block-sparse's indexes are read)
//     loads 64-wide K slices of A (TILE_M rows) and B (TILE_N rows) through the copy engine (TMA,
//     tensor maps made by the host at each launch) into STAGES shared-memory slots of 128-byte
//     swizzled rows, each slot completing on a `full` mbarrier;
//   warpgroups 1.. (consumers) each multiply 64 rows of the tile by all TILE_N columns with wgmma
//     (A and B straight from shared memory), then release the slot on its `empty` mbarrier
//     (block-sparse forward and backward_input: two consumers taking whole tiles in turn, below).
// The copy engine zero-fills what lies outside A and B, so edge tiles and any K need no branches;
// stores to C are bounds-checked. setmaxnreg moves registers from the producer to the consumers.
// gemm with JITK_CLUSTER_M = 2: blocks run in clusters of two that take vertically neighbouring
// tiles (rows m and m + 1 of tiles, one column), which read the same B slices: each block's
// producer loads its own A and half of B, the copy engine writing that half into both blocks'
// shared memory (TMA multicast), so B is read from L2 once for two tiles. A slot is then refilled
// only when the consumers of both blocks are done with it: they arrive on the `empty` barriers of
// both. A cluster with a tile row past M computes zeros there and stores none of them.
#include "jitk_sm90.h"
#include "jitk_gate.h"

#if JITK_KERNEL_BLOCK_SPARSE_MATMUL
// block_sparse_matmul (block_size 64), as gemm.cu lays the products out: a tile walks the blocks of
// a block column (forward) or row (backward_input) of W, one block a K slice; backward_weight's
// tile is one block of dW, walking M (X read M-major, dY N-major: wgmma transposes).
// forward and backward_input compute the tile's transpose (SWAPPED): wgmma's M is the block, 64
// columns of Y (dX), its N the JITK_TILE_M rows of X (dY), so a 64-wide block column still feeds
// wgmma with N up to 256 (its most efficient shape: 2 KB of A and 8 KB of B a 64x256x16 product).
// A is then W's block (forward: read M-major, W^T; backward_input: K-major) and B is X (dY),
// K-major; their tensor maps trade places. Two consumer warpgroups take whole tiles in turn
// (PINGPONG): one stores its tile while the other multiplies, which a tile of a few K slices needs.
// A finished tile goes through shared memory (stmatrix's transpose) so that C is written in
// 16-byte pieces of its rows (written value by value, 2 bytes at a time, the stores held the
// consumer up: H100, 4096^3 at 90% sparsity, +15-18%).
constexpr int BS = JITK_BLOCK_SIZE;
static_assert(BS == 64, "gemm_sm90.cu: block_sparse_matmul takes 64-wide blocks (128-byte rows)");
#if JITK_OP_BACKWARD_WEIGHT
constexpr int TM = 64, TN = 64, TA = 1, TB = 1;
constexpr bool SWAPPED = false, PINGPONG = false, INDEXED = false;
#else
#if JITK_OP_FORWARD
constexpr int TA = 1;
#else
constexpr int TA = 0;
#endif
constexpr int TM = 64, TN = JITK_TILE_M, TB = 0;
constexpr bool SWAPPED = true, PINGPONG = true, INDEXED = true;  // INDEXED: a slice's coordinates come from W's indexes
#endif
constexpr int TK = 64;
#else
constexpr bool INDEXED = false;
// A column-major is M-major, B row-major N-major: wgmma reads them transposed.
constexpr int TM = JITK_TILE_M, TN = JITK_TILE_N, TK = JITK_TILE_K;
#if JITK_A_LAYOUT_COL
constexpr int TA = 1;
#else
constexpr int TA = 0;
#endif
#if JITK_B_LAYOUT_ROW
constexpr int TB = 1;
#else
constexpr int TB = 0;
#endif
constexpr bool SWAPPED = false, PINGPONG = false;
#endif
constexpr int STAGES = JITK_STAGES;
#if JITK_KERNEL_BLOCK_SPARSE_MATMUL
constexpr int CLUSTER = 1;
#else
constexpr int CLUSTER = JITK_CLUSTER_M;  // blocks a cluster, along M, sharing B's slices
#endif
// Consumers: TM / 64 sharing each tile (64 rows each), or two taking tiles in turn.
constexpr int CONSUMERS = PINGPONG ? 2 : TM / 64;
constexpr unsigned SLOT_USERS = (PINGPONG ? 128 : CONSUMERS * 128) * CLUSTER;  // arrivals that free a slot (of every block of the cluster)
// Registers: a 64-wide tile needs few accumulators (32 a thread), so two blocks share an SM and
// one's pipeline fill and epilogue hide behind the other's products (gemm's 64-wide tiles and
// block-sparse backward_weight; forward and backward_input hide them with PINGPONG in one block
// instead). setmaxnreg then moves the producer's registers to the consumers within what the
// block got at entry (the launch bound caps it; the pool must cover the new split).
constexpr int BLOCKS_PER_SM = JITK_BLOCKS_PER_SM;  // the host's plan: 2 when TN <= 64 and shared memory allows
static_assert(BLOCKS_PER_SM == 1 || (BLOCKS_PER_SM == 2 && TN <= 64), "gemm_sm90.cu: blocks an SM the registers cannot hold");
static_assert(CLUSTER == 1 || (CLUSTER == 2 && BLOCKS_PER_SM == 1 && !PINGPONG), "gemm_sm90.cu: a cluster the host's plan refuses");
constexpr int REGS_AT_ENTRY = 65536 / (JITK_BLOCK * BLOCKS_PER_SM) / 8 * 8;
constexpr int PRODUCER_REGS = BLOCKS_PER_SM == 1 ? 40 : 24;
constexpr int CONSUMER_SHARE = (REGS_AT_ENTRY * JITK_BLOCK - 128 * PRODUCER_REGS) / (128 * CONSUMERS) / 8 * 8;
constexpr int CONSUMER_REGS = CONSUMER_SHARE < 240 ? CONSUMER_SHARE : 240;
static_assert(TK == 64 && TM % 64 == 0 && TN % 64 == 0 && TN <= 256, "gemm_sm90.cu: tile the host's plan refuses");
static_assert(JITK_BLOCK == 128 * (CONSUMERS + 1), "gemm_sm90.cu: the host's tile plan and this text disagree on the threads");
constexpr int A_SLOT = TM * TK, B_SLOT = TN * TK;  // elements; every slot is a multiple of 1024 bytes
constexpr unsigned SLOT_BYTES = (A_SLOT + B_SLOT) * sizeof(T);
// SWAPPED: each consumer stages its tile's transpose (TN rows of C by the 64-wide block) in shared
// memory after the slots, so that C is written in 16-byte pieces of its rows. Otherwise (gemm)
// each consumer stages its 64 rows 64 columns at a time (EPI_STAGED), where the host's plan left
// room for it after the slots (tile_plans.hpp, kSm90EpilogueRows): C is then written in 16-byte
// pieces of its rows too, 8 threads a 128-byte row, where from registers each store was 4 bytes
// (a warp's 8 rows, 16 bytes each). H100, bf16, the Llama-3-8B layer's prefill gemms (2048 rows,
// B row-major), of cuBLAS in the same run: qkv (n 6144) 0.870 -> 0.970, o (n 4096) 0.878 -> 0.977,
// gate/up (n 28672) 0.863 -> 0.939, down (k 14336) 0.957 -> 0.992.
constexpr unsigned EPI_BYTES = 2 * 64 * 64 * sizeof(T);
// rope (gemm's QKV epilogue, below): the head's HD / 2 inverse frequencies, made once a block, after
// the barriers (the host's plan counts them in).
#if !JITK_KERNEL_BLOCK_SPARSE_MATMUL && JITK_ROPE_NEOX
constexpr unsigned ROPE_BYTES = JITK_HEAD_DIM / 2 * 4;
#else
constexpr unsigned ROPE_BYTES = 0;
#endif
constexpr bool EPI_STAGED = !SWAPPED && STAGES * SLOT_BYTES + EPI_BYTES + 1024 + 16 * STAGES + 16 + ROPE_BYTES <= JITK_SHARED_BYTES;
constexpr unsigned STAGING_BYTES = SWAPPED ? 2 * TN * 64 * sizeof(T) : EPI_STAGED ? EPI_BYTES : 0;
static_assert(STAGES * SLOT_BYTES + STAGING_BYTES + 1024 + 16 * STAGES + 16 + ROPE_BYTES <= JITK_SHARED_BYTES,
              "gemm_sm90.cu: more shared memory than planned");

struct __align__(64) TensorMap {  // a CUtensorMap, by value
  u64 opaque[16];
};

using namespace jitk::sm90;

// ---- the copy engine: a box of the map at (inner, outer) into dst, completing on bar ----
__device__ inline void tma_load(void* dst, const TensorMap* map, u64* bar, int inner, int outer) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
                   smem_addr(dst)),
               "l"(reinterpret_cast<u64>(map)), "r"(smem_addr(bar)), "r"(inner), "r"(outer)
               : "memory");
}

// The same, the box landing at dst's offset in the shared memory of every block of the cluster in
// `blocks` (a bit each), and completing on the barrier at bar's offset in each.
__device__ inline void tma_load_multicast(void* dst, const TensorMap* map, u64* bar, int inner, int outer, unsigned short blocks) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_addr(dst)),
               "l"(reinterpret_cast<u64>(map)), "r"(smem_addr(bar)), "r"(inner), "r"(outer), "h"(blocks)
               : "memory");
}
// Arrives on the barrier at bar's offset in block `rank` of the cluster (this block's own included).
__device__ inline void bar_arrive_in(u64* bar, unsigned rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
                   smem_addr(bar)),
               "r"(rank)
               : "memory");
}
// Frees a slot: on this block's `empty` barrier, and with a cluster on each block's (their
// producers write into this block's slot too).
__device__ inline void release(u64* bar) {
  if (CLUSTER == 1) {
    bar_arrive(bar);
  } else {
#pragma unroll
    for (unsigned r = 0; r < CLUSTER; ++r) bar_arrive_in(bar, r);
  }
}
using jitk::cluster_rank;
using jitk::cluster_size;
using jitk::cluster_sync;

// One operand's slice: K-major, one box of ROWS rows of 64 K at (k, r); M/N-major, ROWS / 64 boxes
// of 64 rows of K by 64 of M or N, 4096 elements apart (the descriptor's leading offset).
template <int ROWS, int MN>
__device__ inline void load_operand(T* slot, const TensorMap* map, u64* bar, int k, int r) {
  if (!MN) {
    tma_load(slot, map, bar, k, r);
  } else {
#pragma unroll
    for (int c = 0; c < ROWS / 64; ++c) tma_load(slot + c * 4096, map, bar, r + 64 * c, k);
  }
}
// With a cluster: block `rank`'s share of B's slice, multicast to every block of the cluster.
// K-major: the rank-th box of ROWS / CLUSTER rows (the host's map has boxes that high); N-major:
// the 64-wide boxes c with c % CLUSTER == rank.
template <int ROWS, int MN>
__device__ inline void load_shared_operand(T* slot, const TensorMap* map, u64* bar, int k, int r, unsigned rank) {
  constexpr unsigned short everyone = (1u << CLUSTER) - 1;
  if (!MN) {
    constexpr int PART = ROWS / CLUSTER;
    tma_load_multicast(slot + rank * PART * 64, map, bar, k, r + static_cast<int>(rank) * PART, everyone);
  } else {
#pragma unroll
    for (int c = 0; c < ROWS / 64; ++c)
      if (c % CLUSTER == static_cast<int>(rank)) tma_load_multicast(slot + c * 4096, map, bar, r + 64 * c, k, everyone);
  }
}

// Where a tile reads and writes: slice t's A and B box coordinates (inner, outer), and C's block.
struct Plan {
  i64 m0, n0;           // C's rows and columns the tile starts at
  T* c;                 // C (backward_weight: the block of dW)
  i64 ldc, rows, cols;  // C's leading dimension and bounds
  int slices;
#if JITK_KERNEL_BLOCK_SPARSE_MATMUL
  const int* ids;        // forward: the blocks walked by id; backward_input: null (first, first + 1, ...)
  const int* other;      // forward: each block's row; backward_input: its column
  int first, block_row, block_col;
  // Slice t: where A's and B's boxes start along K and along their rows (M, N).
  __device__ void coords(int t, int& a_k, int& a_r, int& b_k, int& b_r) const {
#if JITK_OP_BACKWARD_WEIGHT
    a_k = t * TK, a_r = block_row * BS, b_k = t * TK, b_r = block_col * BS;
#elif JITK_OP_FORWARD
    const int id = ids[t];  // A: the block, its rows K (id * BS on in W's values), its columns M; B: X
    b_k = other[id] * BS, b_r = static_cast<int>(m0), a_k = id * BS, a_r = 0;
#else
    const int id = first + t;  // A: the block, its rows M, its columns K; B: dY
    b_k = other[id] * BS, b_r = static_cast<int>(m0), a_k = 0, a_r = id * BS;
#endif
  }
#else
  int k0 = 0;  // the first slice (a split tile: this block's share of K starts there)
  __device__ void coords(int t, int& a_k, int& a_r, int& b_k, int& b_r) const {
    a_k = (k0 + t) * TK, a_r = static_cast<int>(m0), b_k = (k0 + t) * TK, b_r = static_cast<int>(n0);
  }
#endif
};

// Two values of T in one register, `lo` at the lower address.
__device__ inline unsigned bits16(jitk_half x) { return __half_as_ushort(x); }
__device__ inline unsigned bits16(jitk_bfloat16 x) { return __bfloat16_as_ushort(x); }
__device__ inline unsigned pack2(float lo, float hi) {
  return bits16(jitk::from_float<T>(lo)) | bits16(jitk::from_float<T>(hi)) << 16;
}
// The two values of a pack2() register, as floats.
__device__ inline float from_bits(unsigned short b, const jitk_half*) { return __half2float(__ushort_as_half(b)); }
__device__ inline float from_bits(unsigned short b, const jitk_bfloat16*) { return __bfloat162float(__ushort_as_bfloat16(b)); }
__device__ inline float lo_of(unsigned x) { return from_bits(static_cast<unsigned short>(x & 0xffffu), static_cast<const T*>(nullptr)); }
__device__ inline float hi_of(unsigned x) { return from_bits(static_cast<unsigned short>(x >> 16), static_cast<const T*>(nullptr)); }
// Four 8x8 matrices of 16-bit values from the mma fragment layout (thread l: row l / 4, columns
// 2 (l % 4) and + 1 of matrix i in register i) into shared memory transposed: thread l gives the
// address of row l % 8 of matrix l / 8, which receives that matrix's column.
__device__ inline void stmatrix_trans(const T* row, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(row)), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
// The consumers' own barrier (ids 1 and 2; 0 is __syncthreads): its 128 threads only.
__device__ inline void consumer_sync(int w) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + w) : "memory"); }
// The same matrices into shared memory as they are (thread l: row l % 8 of matrix l / 8).
__device__ inline void stmatrix(const T* row, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(row)), "r"(r0), "r"(r1), "r"(r2),
               "r"(r3)
               : "memory");
}

// Thread t of consumer w holds, for each 8-column group j, rows w*64 + (t/32)*16 + (t%32)/4 (+8)
// and columns j*8 + (t%4)*2 (+1): registers 4j + {0, 1} and 4j + {2, 3}. Pairs of columns are
// stored together where C and the chain's tensors allow.
// From registers (no staging area), where the epilogue reads memory (beta != 0: C; a chain's
// tensors), EPI_CHUNK register pairs are finished (their reads in flight together) before they are
// stored: the chain's pointers are not __restrict__, so a read cannot be moved above a store to C,
// and pair by pair each read waited out a round trip behind the last store (H100, the decoder
// layer's output projection with its residual in the epilogue: 0.126 ms against 0.108 without).
// Measured there (two rounds, one call): chunks of 1 pair 0.1428 / 0.1375 ms, 4 pairs 0.1350 /
// 0.1347, 8 pairs 0.1360 / 0.1381, 16 pairs 0.1417 / 0.1439; all pairs at once (two passes) 0.144
// (registers). The plain q projection of the same shape: 0.110-0.113. The staged epilogue reads
// in the staged copy-out instead (EpiChunk, below).
constexpr int EPI_CHUNK = 4 < TN / 4 ? 4 : TN / 4;
static_assert((TN / 2) % (2 * EPI_CHUNK) == 0, "gemm_sm90.cu: the epilogue's chunks tile the registers");

// A QKV projection's epilogue (gemm with rope = neox and/or page_size > 0; include/jit/kernels/gemm.hpp):
// C is [M tokens, (heads + 2 kv_heads) x HD], a row's q heads, k heads, v heads. rope: the
// accumulators, alpha A B rounded to T (as the plain gemm stores them), are rotated in registers
// before the copy-out: a thread holds every 8-column group of its two rows (the layout store()
// describes), so a head's column j and its partner j + HD / 2 (group + HD / 16) are both its own
// where the tile holds whole heads (the host's plan: HD a multiple of 16, TILE_N of HD). The angle
// is positions[r] * inv_freq[j] in float, inv_freq[j] = 1 / powf(theta, 2j / HD) as rotary.cu makes it
// (once a block, in shared memory: powf in the epilogue cost registers); its cos and sin after a
// reduction by 2 pi in three parts (Cody-Waite, as sincosf's own fast path) with __sincosf on the
// rest (absolute error ~2^-21): sincosf's slow path for large angles (Payne-Hanek, a local array)
// spilled the 128 x 256 tile's consumers (ptxas: 284 bytes stored, 1052 loaded a tile).
// page_size: the copy-out writes each 8-column piece of a k or v head also into k_cache or v_cache
// at the row's slot (16 bytes where aligned), as kv_cache_append would; a slot outside [0, num_pages
// * PAGE) writes nothing. Split tiles (store_split) do the same from the cluster's summed rows.
#if !JITK_KERNEL_BLOCK_SPARSE_MATMUL && (JITK_ROPE_NEOX || JITK_PAGE_SIZE > 0)
constexpr bool QKV = true;
constexpr int HD = JITK_HEAD_DIM;
#if JITK_ROPE_NEOX
constexpr bool ROPE = true;
#else
constexpr bool ROPE = false;
#endif
constexpr bool CACHE = JITK_PAGE_SIZE > 0;
constexpr i64 PAGE = JITK_PAGE_SIZE > 0 ? JITK_PAGE_SIZE : 1;
static_assert(HD % 16 == 0 && TN % HD == 0, "gemm_sm90.cu: a QKV tile holds whole heads (the host's plan refuses others)");
#define JITK_QKV_PARAMS                                                                                                        \
  , const i64 *__restrict__ qkv_positions, float qkv_theta, const i64 *__restrict__ qkv_slots, T *__restrict__ qkv_k_cache, \
      T *__restrict__ qkv_v_cache, i64 qkv_heads, i64 qkv_kv_heads, i64 qkv_num_pages
#define JITK_QKV_ARGS qkv_positions, qkv_theta, qkv_slots, qkv_k_cache, qkv_v_cache, qkv_heads, qkv_kv_heads, qkv_num_pages
#else
constexpr bool QKV = false, ROPE = false, CACHE = false;
constexpr int HD = 64;
constexpr i64 PAGE = 1;
#define JITK_QKV_PARAMS
#define JITK_QKV_ARGS
#endif
struct Qkv {
  const i64* positions;
  float theta;
  const i64* slots;
  T* k_cache;
  T* v_cache;
  i64 heads, kv_heads, num_pages;
  const float* inv_freq;  // [HD / 2], in shared memory (rope)
  // The block's inverse frequencies into `table` (every thread of the block, before a barrier).
  __device__ static void make_table(float* table, float theta) {
    for (int j = threadIdx.x; j < HD / 2; j += JITK_BLOCK) table[j] = 1.0f / powf(theta, static_cast<float>(2 * j) / static_cast<float>(HD));
  }
  // cos and sin of pair j (of a head's HD / 2) at position pos.
  __device__ void angle(float pos, int j, float& c, float& s) const {
    const float x = pos * inv_freq[j];
    const float k = rintf(x * 0.15915494309189535f);  // whole turns
    float r = fmaf(-k, 6.28125f, x);                  // 2 pi = 6.28125 + 1.93500518798828125e-3 + 3.0199160e-7 (Cody-Waite)
    r = fmaf(-k, 1.93500518798828125e-3f, r);
    r = fmaf(-k, 3.0199160e-7f, r);
    __sincosf(r, &s, &c);
  }
  // The accumulators of rows r0 and r0 + 8 (the tile's from column n0) as alpha A B rounded to T,
  // their q and k heads rotated.
  __device__ void rotate(float (&d)[TN / 2], i64 r0, i64 n0, i64 rows, float alpha) const {
#pragma unroll
    for (int i = 0; i < TN / 2; ++i) d[i] = jitk::to_float(jitk::from_float<T>(alpha * d[i]));
    const float pos0 = r0 < rows ? static_cast<float>(positions[r0]) : 0.f;
    const float pos1 = r0 + 8 < rows ? static_cast<float>(positions[r0 + 8]) : 0.f;
    const i64 head0 = n0 / HD, rotated = heads + kv_heads;  // the tile's first head; heads rotated (q's, then k's)
    const int lane_col = (threadIdx.x % 4) * 2;
#pragma unroll
    for (int g = 0; g < HD / 16; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float c0, s0, c1, s1;
        angle(pos0, g * 8 + lane_col + e, c0, s0);
        angle(pos1, g * 8 + lane_col + e, c1, s1);
#pragma unroll
        for (int h = 0; h < TN / HD; ++h) {
          if (head0 + h >= rotated) continue;
          const int a = 4 * (h * (HD / 8) + g) + e, b = a + 4 * (HD / 16);  // columns j and j + HD / 2 of row r0 (+ 2: r0 + 8)
          float x = d[a], y = d[b];
          d[a] = x * c0 - y * s0, d[b] = y * c0 + x * s0;
          x = d[a + 2], y = d[b + 2];
          d[a + 2] = x * c1 - y * s1, d[b + 2] = y * c1 + x * s1;
        }
      }
  }
  // The same on the values packed two a register (p[i / 2] = pack2 of registers i, i + 1: half the
  // registers, which the 128 x 256 tile's consumers need: rotating the floats in place spilled).
  __device__ void rotate_packed(unsigned (&p)[TN / 4], i64 r0, i64 n0, i64 rows) const {
    const float pos0 = r0 < rows ? static_cast<float>(positions[r0]) : 0.f;
    const float pos1 = r0 + 8 < rows ? static_cast<float>(positions[r0 + 8]) : 0.f;
    const i64 head0 = n0 / HD, rotated = heads + kv_heads;
    const int lane_col = (threadIdx.x % 4) * 2;
#pragma unroll
    for (int g = 0; g < HD / 16; ++g) {
      float c[4], sn[4];  // pairs lane_col + (0, 1) of group g, rows r0 and r0 + 8
      angle(pos0, g * 8 + lane_col, c[0], sn[0]);
      angle(pos0, g * 8 + lane_col + 1, c[1], sn[1]);
      angle(pos1, g * 8 + lane_col, c[2], sn[2]);
      angle(pos1, g * 8 + lane_col + 1, c[3], sn[3]);
#pragma unroll
      for (int h = 0; h < TN / HD; ++h) {
        if (head0 + h >= rotated) continue;
#pragma unroll
        for (int row = 0; row < 2; ++row) {
          const int a = 2 * (h * (HD / 8) + g) + row, b = a + 2 * (HD / 16);  // group g's and its partner's register of the row
          const float x0 = lo_of(p[a]), x1 = hi_of(p[a]), y0 = lo_of(p[b]), y1 = hi_of(p[b]);
          const float c0 = c[2 * row], s0 = sn[2 * row], c1 = c[2 * row + 1], s1 = sn[2 * row + 1];
          p[a] = pack2(x0 * c0 - y0 * s0, x1 * c1 - y1 * s1);
          p[b] = pack2(y0 * c0 + x0 * s0, y1 * c1 + x1 * s1);
        }
      }
    }
  }
  // W values of row r of C from column col (in one head: col % W == 0, W divides HD) into the cache
  // where they are a k or v head's and the row has a slot there.
  template <int W>
  __device__ void put(i64 r, i64 col, const jitk::Pack<T, W>& v) const {
    if (!CACHE || col < heads * HD) return;
    const i64 h = (col - heads * HD) / HD, at = col % HD;
    const i64 slot = slots[r];
    if (slot < 0 || slot >= num_pages * PAGE) return;  // padding (-1), or no slot in the cache
    T* to = (h < kv_heads ? k_cache + (slot * kv_heads + h) * HD : v_cache + (slot * kv_heads + h - kv_heads) * HD) + at;
    if ((reinterpret_cast<u64>(to) & (W * sizeof(T) - 1)) == 0) {
      jitk::store<W>(to, v);
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e) to[e] = v.v[e];
    }
  }
  __device__ void put1(i64 r, i64 col, T v) const {
    jitk::Pack<T, 1> p;
    p.v[0] = v;
    put<1>(r, col, p);
  }
};

// The staged epilogue's copy-out (store() and store_gated()): a consumer's 64 staged rows of
// PIECES 16-byte pieces (8 columns each; the piece p of staged row `row` at p ^ (row % 8)) into C
// from row r0 and column c0, 128 threads each taking pieces t, t + 128, ... (8 threads a 128-byte
// row: 16-byte stores). Where the epilogue reads memory (beta != 0: C; a chain's tensors) the
// values staged are alpha A B rounded to T, and the copy-out adds beta * C and runs the chain on
// them, piece by piece, reading C and the chain's tensors at the piece's place in 16-byte pieces
// too (C then is round(round(alpha A B) + beta C), as the plain gemm and an elementwise kernel
// after it would compute). Those reads are issued a chunk ahead (load(): the next chunk's while
// this one is stored), all of a thread's pieces of a chunk at once, so that a tile's reads wait
// out about one round trip, not one a stmatrix: read in the accumulators' layout (4 bytes a
// thread, 8 rows a warp instruction) right before each stmatrix, C and the residual cost the
// Llama-3-8B layer's 8 x 2048 prefill ~0.4 ms in each of its o and down gemms (H100; against cuBLAS
// with beta = 1, o + residual 16384 x 4096 x 4096 0.745 -> 0.873, down 16384 x 4096 x 14336 with
// beta = 1 0.924 -> 0.977; bench/results/2026-11-26-h100-residual-epilogue-ab.md). Where C's rows
// or the chain's tensors are not 16-byte aligned, or a piece is cut short by C's last column, the
// piece goes element by element (its reads then in the copy-out). Where the epilogue reads
// nothing the copy-out is a copy (store()'s and store_gated()'s own loops).
template <int PIECES>
struct EpiChunk {
  static constexpr int EACH = 64 * PIECES / 128;  // pieces a thread
  static_assert(EACH * 128 == 64 * PIECES, "gemm_sm90.cu: a staged chunk's pieces divide among the consumer's threads");
  T* out;
  i64 ld, rows, cols;  // C's leading dimension and bounds
  bool vectors, reads;
  float beta;
  // A thread's reads for one chunk (loaded by load(), used by copy()).
  struct Reads {
    jitk::Pack<T, 8> c[EACH];
    jitk_chain::EpilogueLoads<8> e[EACH];
  };
  __device__ EpiChunk(T* out_, i64 ld_, i64 rows_, i64 cols_, float beta_, const jitk_chain& chain)
      : out(out_), ld(ld_), rows(rows_), cols(cols_), reads(beta_ != 0.f || jitk_chain::has_epilogue), beta(beta_) {
    vectors = ld % 8 == 0 && jitk::aligned16(out) && (!reads || chain.aligned());
  }
  // The thread's pieces of the chunk at (r0, c0): C's and the chain's 16-byte pieces there.
  __device__ void load(Reads& x, i64 r0, i64 c0, int t, const jitk_chain& chain) const {
    if (!reads) return;
#pragma unroll
    for (int k = 0; k < EACH; ++k) {
      const int q = t + 128 * k;
      const i64 r = r0 + q / PIECES, col = c0 + (q % PIECES) * 8;
      if (!vectors || r >= rows || col + 8 > cols) continue;
      const i64 at = r * ld + col;
      if (beta != 0.f) x.c[k] = jitk::load<8>(out + at);
      x.e[k] = chain.epilogue_load<8>(at, col);
    }
  }
  __device__ void copy(const T* st, const Reads& x, i64 r0, i64 c0, int t, const jitk_chain& chain) const {
#pragma unroll
    for (int k = 0; k < EACH; ++k) {
      const int q = t + 128 * k, row = q / PIECES, p = q % PIECES;
      const i64 r = r0 + row, col = c0 + p * 8;
      if (r >= rows) break;  // q rises with the row
      const T* from = st + row * 64 + ((p ^ (row % 8)) * 8);
      const i64 at = r * ld + col;
      if (vectors && col + 8 <= cols) {
        jitk::Pack<T, 8> s = *reinterpret_cast<const jitk::Pack<T, 8>*>(from);
        if (reads) {
          float v[8];
#pragma unroll
          for (int e = 0; e < 8; ++e) v[e] = jitk::to_float(s.v[e]);
          if (beta != 0.f)
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] += beta * jitk::to_float(x.c[k].v[e]);
          chain.epilogue<8>(v, x.e[k], at, col);
#pragma unroll
          for (int e = 0; e < 8; ++e) s.v[e] = jitk::from_float<T>(v[e]);
        }
        jitk::store<8>(out + at, s);
      } else {
#pragma unroll 1  // an edge or unaligned piece: not copied for each piece of each chunk
        for (int e = 0; e < 8 && col + e < cols; ++e) {
          if (reads) {
            float v[1] = {jitk::to_float(from[e])};
            if (beta != 0.f) v[0] += beta * jitk::to_float(out[at + e]);
            chain.epilogue<1>(v, at + e, col + e);
            out[at + e] = jitk::from_float<T>(v[0]);
          } else {
            out[at + e] = from[e];
          }
        }
      }
    }
  }
};

// A consumer's staged chunk c (its 64 rows x 64 columns, swizzled in `st`) to C, and to the KV
// cache where CACHE: 16-byte pieces where C's rows allow, else element by element.
__device__ inline void copy_staged(const T* st, const Plan& plan, int w, int c, int t, bool vectors, const Qkv& qkv) {
  T* __restrict__ out = plan.c;
  const i64 ld = plan.ldc, M_out = plan.rows, N_out = plan.cols;
#pragma unroll
  for (int q = t; q < 64 * 8; q += 128) {
    const int row = q / 8, piece = q % 8;
    const i64 r = plan.m0 + w * 64 + row, col = plan.n0 + c * 64 + piece * 8;
    if (r >= M_out) break;  // q rises with the row
    const T* from = st + row * 64 + ((piece ^ (row % 8)) * 8);
    if (vectors && col + 8 <= N_out) {
      const jitk::Pack<T, 8> v = *reinterpret_cast<const jitk::Pack<T, 8>*>(from);
      jitk::store<8>(out + r * ld + col, v);
      if constexpr (CACHE) qkv.put<8>(r, col, v);
    } else {
#pragma unroll 1  // an edge or unaligned piece: not copied for each piece of each chunk
      for (int e = 0; e < 8 && col + e < N_out; ++e) {
        out[r * ld + col + e] = from[e];
        if constexpr (CACHE) qkv.put1(r, col + e, from[e]);
      }
    }
  }
}

__device__ inline void store(const Plan& plan, float (&d)[TN / 2], int w, int t, float alpha, float beta,
                             const jitk_chain& chain, T* staging, const Qkv& qkv) {
  T* __restrict__ out = plan.c;
  const i64 ld = plan.ldc, M_out = plan.rows, N_out = plan.cols;
  const i64 r0 = plan.m0 + w * 64 + (t / 32) * 16 + (t % 32) / 4;
  if constexpr (ROPE && EPI_STAGED) {  // packed two a register, rotated, staged and copied out (C and the cache)
    unsigned p[TN / 4];
#pragma unroll
    for (int i = 0; i < TN / 2; i += 2) p[i / 2] = pack2(alpha * d[i], alpha * d[i + 1]);
    qkv.rotate_packed(p, r0, plan.n0, M_out);
    const int lane = t % 32, warp = t / 32;
    T* st = staging + w * 64 * 64;
    const int srow = warp * 16 + ((lane / 8) % 2) * 8 + lane % 8, sgroup = lane / 16;
    const bool vectors = ld % 8 == 0 && jitk::aligned16(out);
#pragma unroll
    for (int c = 0; c < TN / 64; ++c) {
#pragma unroll
      for (int j = 0; j < 8; j += 2) {
        const int i0 = (c * 8 + j) * 2;  // packed registers of groups c * 8 + j and + 1
        __syncwarp();
        stmatrix(st + srow * 64 + (((j + sgroup) ^ (srow % 8)) * 8), p[i0], p[i0 + 1], p[i0 + 2], p[i0 + 3]);
      }
      consumer_sync(w);
      copy_staged(st, plan, w, c, t, vectors, qkv);
      consumer_sync(w);
    }
    return;
  }
  if constexpr (ROPE) {  // d becomes the values C gets: alpha is applied
    qkv.rotate(d, r0, plan.n0, M_out, alpha);
    alpha = 1.f;
  }
  const bool pairs = ld % 2 == 0 && jitk::aligned16(out) && chain.aligned();
  const bool reads = beta != 0.f || jitk_chain::has_epilogue;
  // Register pair i's final values, in place (alpha, beta * C, the chain).
  auto finish = [&](int i) {
    const i64 r = r0 + 8 * ((i / 2) % 2), col = plan.n0 + (i / 4) * 8 + (t % 4) * 2;
    if (r >= M_out || col >= N_out) return;
    const i64 at = r * ld + col;
    if (pairs && col + 1 < N_out) {
      float v[2] = {alpha * d[i], alpha * d[i + 1]};
      if (beta != 0.f) {
        const auto old = jitk::load<2>(out + at);
        v[0] += beta * jitk::to_float(old.v[0]), v[1] += beta * jitk::to_float(old.v[1]);
      }
      chain.epilogue<2>(v, at, col);
      d[i] = v[0], d[i + 1] = v[1];
    } else {
      for (int h = 0; h < 2 && col + h < N_out; ++h) {
        float v[1] = {alpha * d[i + h]};
        if (beta != 0.f) v[0] += beta * jitk::to_float(out[at + h]);
        chain.epilogue<1>(v, at + h, col + h);
        d[i + h] = v[0];
      }
    }
  };
  // Register pair i into C (scaled by `scale`: alpha where finish() did not run).
  auto put = [&](int i, float scale) {
    const i64 r = r0 + 8 * ((i / 2) % 2), col = plan.n0 + (i / 4) * 8 + (t % 4) * 2;
    if (r >= M_out || col >= N_out) return;
    const i64 at = r * ld + col;
    if (pairs && col + 1 < N_out) {
      jitk::Pack<T, 2> p;
      p.v[0] = jitk::from_float<T>(scale * d[i]), p.v[1] = jitk::from_float<T>(scale * d[i + 1]);
      jitk::store<2>(out + at, p);
      if constexpr (CACHE) qkv.put<2>(r, col, p);
    } else {
      for (int h = 0; h < 2 && col + h < N_out; ++h) {
        out[at + h] = jitk::from_float<T>(scale * d[i + h]);
        if constexpr (CACHE) qkv.put1(r, col + h, out[at + h]);
      }
    }
  };
  if constexpr (EPI_STAGED) {
    // 64 columns at a time: 4 register pairs at a time (two 8-column groups: one stmatrix of four
    // 8 x 8 matrices, the groups' top and bottom 8 rows of the warp's 16) into the consumer's 64 x
    // 64 staging area (the 16-byte piece p of row r at p ^ (r % 8): conflict-free both ways), then
    // from there to C.
    // Where the epilogue reads memory, beta * C and the chain are added in the copy-out (EpiChunk).
    static_assert(EPI_CHUNK == 4, "gemm_sm90.cu: the staged epilogue stages 4 pairs a stmatrix");
    const int lane = t % 32, warp = t / 32;
    T* st = staging + w * 64 * 64;  // the consumer's
    const int srow = warp * 16 + ((lane / 8) % 2) * 8 + lane % 8, sgroup = lane / 16;  // this lane's stmatrix row
    if (reads) {
      const EpiChunk<8> chunk(out, ld, M_out, N_out, beta, chain);
      const i64 rows0 = plan.m0 + w * 64;
      EpiChunk<8>::Reads ahead[2];
      chunk.load(ahead[0], rows0, plan.n0, t, chain);
#pragma unroll
      for (int c = 0; c < TN / 64; ++c) {
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
          const int i0 = (c * 8 + j) * 4;  // registers of groups c * 8 + j and + 1
          __syncwarp();  // stmatrix is .aligned: the whole warp, past load()'s and copy()'s branches
          stmatrix(st + srow * 64 + (((j + sgroup) ^ (srow % 8)) * 8), pack2(alpha * d[i0], alpha * d[i0 + 1]),
                   pack2(alpha * d[i0 + 2], alpha * d[i0 + 3]), pack2(alpha * d[i0 + 4], alpha * d[i0 + 5]),
                   pack2(alpha * d[i0 + 6], alpha * d[i0 + 7]));
        }
        consumer_sync(w);
        if (c + 1 < TN / 64) chunk.load(ahead[(c + 1) % 2], rows0, plan.n0 + (c + 1) * 64, t, chain);
        chunk.copy(st, ahead[c % 2], rows0, plan.n0 + c * 64, t, chain);
        consumer_sync(w);  // the staging area is read before this consumer writes it again
      }
      return;
    }
    const bool vectors = ld % 8 == 0 && jitk::aligned16(out);
#pragma unroll
    for (int c = 0; c < TN / 64; ++c) {
#pragma unroll
      for (int j = 0; j < 8; j += 2) {
        const int i0 = (c * 8 + j) * 4;  // registers of groups c * 8 + j and + 1
        __syncwarp();  // stmatrix is .aligned: the whole warp
        stmatrix(st + srow * 64 + (((j + sgroup) ^ (srow % 8)) * 8), pack2(alpha * d[i0], alpha * d[i0 + 1]),
                 pack2(alpha * d[i0 + 2], alpha * d[i0 + 3]), pack2(alpha * d[i0 + 4], alpha * d[i0 + 5]),
                 pack2(alpha * d[i0 + 6], alpha * d[i0 + 7]));
      }
      consumer_sync(w);
      copy_staged(st, plan, w, c, t, vectors, qkv);
      consumer_sync(w);  // the staging area is read before this consumer writes it again
    }
    return;
  }
  if (!reads) {
#pragma unroll
    for (int i = 0; i < TN / 2; i += 2) put(i, alpha);
    return;
  }
#pragma unroll
  for (int i0 = 0; i0 < TN / 2; i0 += 2 * EPI_CHUNK) {
#pragma unroll
    for (int i = i0; i < i0 + 2 * EPI_CHUNK; i += 2) finish(i);
#pragma unroll
    for (int i = i0; i < i0 + 2 * EPI_CHUNK; i += 2) put(i, 1.f);
  }
}

// gate = silu / gelu / gelu_tanh (gemm only; include/jit/kernels/gemm.hpp): B's columns come in
// groups of 16, 8 gate then 8 up, so in the layout above a thread's 8-column groups 2p (gate) and
// 2p + 1 (up) pair up register for register: 8p + e with 8p + 4 + e (e < 4). C is M x N / 2, the
// tile's TN / 2 columns from n0 / 2; the thread writes columns 8p + (t % 4) * 2 (+ 1) of them.
constexpr bool GATED = JITK_GATED;  // jitk_gate.h: gate = silu / gelu / gelu_tanh
// g and u as the unfused pair sees them: stored as T by the gemm, read back by silu_and_mul.
__device__ inline float rounded(float x) { return jitk::to_float(jitk::from_float<T>(x)); }
constexpr int GATE_PAIRS = TN / 8;  // gate register pairs a thread: TN / 16 groups, two rows each
constexpr int GATE_CHUNK = EPI_CHUNK < GATE_PAIRS ? EPI_CHUNK : GATE_PAIRS;
static_assert(TN % 16 == 0 && GATE_PAIRS % GATE_CHUNK == 0, "gemm_sm90.cu: a gated tile holds whole groups");
__device__ inline void store_gated(const Plan& plan, float (&d)[TN / 2], int w, int t, float alpha, float beta,
                                   const jitk_chain& chain, T* staging) {
  T* __restrict__ out = plan.c;
  const i64 ld = plan.ldc, M_out = plan.rows, N_out = plan.cols / 2;  // C's columns: half of B's
  const i64 r0 = plan.m0 + w * 64 + (t / 32) * 16 + (t % 32) / 4, c0 = plan.n0 / 2 + (t % 4) * 2;
  // col is even and N_out a multiple of 8: a pair inside C is whole
  const bool pairs = ld % 2 == 0 && jitk::aligned16(out) && chain.aligned();
  const bool reads = beta != 0.f || jitk_chain::has_epilogue;
#pragma unroll
  for (int i = 0; i < TN / 2; i += 8)
#pragma unroll
    for (int e = 0; e < 4; ++e) d[i + e] = jitk::JITK_GATE_ACTIVATION(rounded(alpha * d[i + e])) * rounded(alpha * d[i + 4 + e]);
  // Gate pair q: registers i, i + 1 (i = 8 (q / 2) + 2 (q % 2)), row r0 (+ 8 for odd q).
  auto where = [&](int q, int& i, i64& r, i64& col) {
    i = 8 * (q / 2) + 2 * (q % 2);
    r = r0 + 8 * (q % 2), col = c0 + 8 * (q / 2);
    return r < M_out && col < N_out;
  };
  auto finish = [&](int q) {  // beta * C, then the chain
    int i;
    i64 r, col;
    if (!where(q, i, r, col)) return;
    const i64 at = r * ld + col;
    if (pairs) {
      float v[2] = {d[i], d[i + 1]};
      if (beta != 0.f) {
        const auto old = jitk::load<2>(out + at);
        v[0] += beta * jitk::to_float(old.v[0]), v[1] += beta * jitk::to_float(old.v[1]);
      }
      chain.epilogue<2>(v, at, col);
      d[i] = v[0], d[i + 1] = v[1];
    } else {
      for (int h = 0; h < 2; ++h) {
        float v[1] = {d[i + h]};
        if (beta != 0.f) v[0] += beta * jitk::to_float(out[at + h]);
        chain.epilogue<1>(v, at + h, col + h);
        d[i + h] = v[0];
      }
    }
  };
  auto put = [&](int q) {
    int i;
    i64 r, col;
    if (!where(q, i, r, col)) return;
    const i64 at = r * ld + col;
    if (pairs) {
      jitk::Pack<T, 2> p;
      p.v[0] = jitk::from_float<T>(d[i]), p.v[1] = jitk::from_float<T>(d[i + 1]);
      jitk::store<2>(out + at, p);
    } else {
      for (int h = 0; h < 2; ++h) out[at + h] = jitk::from_float<T>(d[i + h]);
    }
  };
  if constexpr (EPI_STAGED) {
    // As store()'s staged path, on C's half-width tile: each 64 columns of B (8 groups: gate groups
    // c * 8 + j for even j, each with its up group j + 1) give 32 columns of C; one stmatrix takes
    // the gated values of two gate groups (j and j + 2: their top and bottom 8 rows of the warp's
    // 16) into pieces j / 2 and j / 2 + 1 of the consumer's staging rows, then 16-byte stores
    // (where the epilogue reads memory: EpiChunk's copy-out, beta * C and the chain there).
    const int lane = t % 32, warp = t / 32;
    T* st = staging + w * 64 * 64;  // the consumer's (rows of 64; 32 of each used here)
    const int srow = warp * 16 + ((lane / 8) % 2) * 8 + lane % 8, sgroup = lane / 16;  // this lane's stmatrix row
    if (reads) {
      const EpiChunk<4> chunk(out, ld, M_out, N_out, beta, chain);
      const i64 rows0 = plan.m0 + w * 64;
      EpiChunk<4>::Reads ahead[2];
      chunk.load(ahead[0], rows0, plan.n0 / 2, t, chain);
#pragma unroll
      for (int c = 0; c < TN / 64; ++c) {
#pragma unroll
        for (int j = 0; j < 8; j += 4) {
          const int g0 = (c * 8 + j) * 4, g2 = (c * 8 + j + 2) * 4;  // gate groups c * 8 + j and + 2 (registers)
          __syncwarp();  // stmatrix is .aligned: the whole warp, past load()'s and copy()'s branches
          stmatrix(st + srow * 64 + (((j / 2 + sgroup) ^ (srow % 8)) * 8), pack2(d[g0], d[g0 + 1]), pack2(d[g0 + 2], d[g0 + 3]),
                   pack2(d[g2], d[g2 + 1]), pack2(d[g2 + 2], d[g2 + 3]));
        }
        consumer_sync(w);
        if (c + 1 < TN / 64) chunk.load(ahead[(c + 1) % 2], rows0, plan.n0 / 2 + (c + 1) * 32, t, chain);
        chunk.copy(st, ahead[c % 2], rows0, plan.n0 / 2 + c * 32, t, chain);
        consumer_sync(w);  // the staging area is read before this consumer writes it again
      }
      return;
    }
    const bool vectors = ld % 8 == 0 && jitk::aligned16(out);
#pragma unroll
    for (int c = 0; c < TN / 64; ++c) {
#pragma unroll
      for (int j = 0; j < 8; j += 4) {
        const int g0 = (c * 8 + j) * 4, g2 = (c * 8 + j + 2) * 4;  // gate groups c * 8 + j and + 2 (registers)
        __syncwarp();  // stmatrix is .aligned: the whole warp
        stmatrix(st + srow * 64 + (((j / 2 + sgroup) ^ (srow % 8)) * 8), pack2(d[g0], d[g0 + 1]), pack2(d[g0 + 2], d[g0 + 3]),
                 pack2(d[g2], d[g2 + 1]), pack2(d[g2 + 2], d[g2 + 3]));
      }
      consumer_sync(w);
#pragma unroll
      for (int q = t; q < 64 * 4; q += 128) {
        const int row = q / 4, p = q % 4;
        const i64 r = plan.m0 + w * 64 + row, col = plan.n0 / 2 + c * 32 + p * 8;
        if (r >= M_out) break;  // q rises with the row
        const T* from = st + row * 64 + ((p ^ (row % 8)) * 8);
        if (vectors && col + 8 <= N_out) {
          jitk::store<8>(out + r * ld + col, *reinterpret_cast<const jitk::Pack<T, 8>*>(from));
        } else {
#pragma unroll 1  // an edge or unaligned piece: not copied for each piece of each chunk
          for (int e = 0; e < 8 && col + e < N_out; ++e) out[r * ld + col + e] = from[e];
        }
      }
      consumer_sync(w);  // the staging area is read before this consumer writes it again
    }
    return;
  }
  if (!reads) {
#pragma unroll
    for (int q = 0; q < GATE_PAIRS; ++q) put(q);
    return;
  }
#pragma unroll
  for (int q0 = 0; q0 < GATE_PAIRS; q0 += GATE_CHUNK) {  // reads in flight together (EPI_CHUNK, above)
#pragma unroll
    for (int q = q0; q < q0 + GATE_CHUNK; ++q) finish(q);
#pragma unroll
    for (int q = q0; q < q0 + GATE_CHUNK; ++q) put(q);
  }
}

// SWAPPED: the accumulators hold the tile's transpose, wgmma's rows (above) being columns of C
// (of the block) and its columns rows of C: thread t holds C[r][col] and C[r + 1][col], r =
// m0 + 8g + 2(t % 4), col = n0 + 16(t / 32) + (t % 32) / 4 (+ 8), in registers 4g + {0, 1} (+ {2, 3}).
// The finished values go to the consumer's staging area (TN rows of 64, the 16-byte piece p of row
// r at p ^ (r % 8): conflict-free both ways) through stmatrix's transpose, then from there to C,
// 8 threads a 128-byte row.
__device__ inline void store_transposed(const Plan& plan, float (&d)[TN / 2], int t, int w, float alpha, float beta,
                                        const jitk_chain& chain, T* staging) {
  T* __restrict__ out = plan.c;
  const i64 ld = plan.ldc, M_out = plan.rows, N_out = plan.cols;
  const int lane = t % 32, warp = t / 32;
  const i64 c0 = plan.n0 + warp * 16 + lane / 4;
  T* st = staging + w * TN * 64;
  const int row_in = (lane / 16) * 8 + lane % 8, piece = warp * 2 + (lane / 8) % 2;  // matrix lane / 8: rows g + (lane / 16)
#pragma unroll
  for (int g = 0; g < TN / 8; g += 2) {
#pragma unroll
    for (int i = 4 * g; i < 4 * g + 8; ++i) {
      const i64 col = c0 + 8 * ((i / 2) % 2), r = plan.m0 + (i / 4) * 8 + (lane % 4) * 2 + i % 2;
      float v[1] = {alpha * d[i]};
      if (r < M_out && col < N_out) {  // beyond C: staged, never stored
        const i64 at = r * ld + col;
        if (beta != 0.f) v[0] += beta * jitk::to_float(out[at]);
        chain.epilogue<1>(v, at, col);
      }
      d[i] = v[0];
    }
    const int row = g * 8 + row_in;
    __syncwarp();  // stmatrix is .aligned: the whole warp, past the branch above
    stmatrix_trans(st + row * 64 + ((piece ^ (row % 8)) * 8), pack2(d[4 * g], d[4 * g + 1]), pack2(d[4 * g + 2], d[4 * g + 3]),
                   pack2(d[4 * g + 4], d[4 * g + 5]), pack2(d[4 * g + 6], d[4 * g + 7]));
  }
  consumer_sync(w);
  const bool vectors = ld % 8 == 0 && jitk::aligned16(out);
  for (int q = t; q < TN * 8; q += 128) {
    const int row = q / 8, p = q % 8;
    const i64 r = plan.m0 + row, col = plan.n0 + p * 8;
    if (r >= M_out) break;  // q rises with the row
    const T* from = st + row * 64 + ((p ^ (row % 8)) * 8);
    if (vectors && col + 8 <= N_out) {  // C is not read again here: evict-first
      jitk::store_stream<8>(out + r * ld + col, *reinterpret_cast<const jitk::Pack<T, 8>*>(from));
    } else {
      for (int e = 0; e < 8 && col + e < N_out; ++e) out[r * ld + col + e] = from[e];
    }
  }
  consumer_sync(w);  // the staging area is read before this consumer writes it again
}

// SPLIT_K (gemm, few rows: the host's plan gave the 64-row tiles JITK_MAX_SPLIT_K): a launch whose
// tiles leave SMs idle (decode's 64 rows: 64 x 64 tiles of n 4096 are 64 for 132 SMs) runs each tile
// on a cluster of blocks (the launch chooses how many: cluster_size()), block `part` walking its
// share of K's slices. At 64 rows every block re-reads A (64 x K, from L2) beside its share of B (the
// weight, from DRAM), and one block an SM reads at most ~70-85 GB/s (H100: 64 x 64 tiles of 64 x
// 4096 x 4096 took the same 0.019-0.020 ms at n 1024 and 4096), so a weight is read near the copy
// rate only by most of the SMs and wide tiles. The partial sums meet in shared memory as floats
// (the drained slots, rows RED_LD apart); each block sums rows [64 part / split, 64 (part + 1) /
// split) over the cluster in rank order (the same sum whichever block adds) and finishes them as
// store() and store_gated() do (alpha, beta * C, the chain), 8 columns of C a thread.
#if !JITK_KERNEL_BLOCK_SPARSE_MATMUL && defined(JITK_MAX_SPLIT_K)
constexpr bool SPLIT_K = true;
static_assert(TM == 64 && CLUSTER == 1 && !PINGPONG, "gemm_sm90.cu: a split tile the host's plan refuses");
#else
constexpr bool SPLIT_K = false;
#endif
constexpr int RED_LD = TN + 8;  // floats: a half-warp's float2 stores (rows (lane / 4), columns 2 (lane % 4)) hit every bank once
static_assert(!SPLIT_K || 64 * RED_LD * 4 <= STAGES * static_cast<int>(SLOT_BYTES), "gemm_sm90.cu: a split tile's sums outgrow the slots");
#if !JITK_KERNEL_BLOCK_SPARSE_MATMUL && defined(JITK_MAX_SPLIT_K)
// Four floats of block `rank`'s shared memory at `local`'s offset (16-byte aligned).
__device__ inline float4 cluster_load4(const float* local, unsigned rank) {
  float4 v;
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %4, %5;\nld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [remote];\n}\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(smem_addr(local)), "r"(rank)
               : "memory");
  return v;
}
#endif
// The consumer's accumulators (the layout store() describes) into red, row r at r * RED_LD.
__device__ inline void stage_partial(const float (&d)[TN / 2], int t, float* red) {
  const int r0 = (t / 32) * 16 + (t % 32) / 4;
#pragma unroll
  for (int i = 0; i < TN / 2; i += 2) {
    const int r = r0 + 8 * ((i / 2) % 2), col = (i / 4) * 8 + (t % 4) * 2;
    *reinterpret_cast<float2*>(red + r * RED_LD + col) = make_float2(d[i], d[i + 1]);
  }
}
// This block's rows of a split tile: 8 columns of C a unit (gated: one group of 8 gate and 8 up
// columns of the sums), summed over the cluster's `split` blocks' red in rank order.
// rope: a function of its own (not inlined), so that its registers are its own: inlined, the
// rotation's pairs and angles made the 64-row tile's kernel spill (ptxas: 188 bytes stored; called,
// the kernel spills nothing and the call ~170 bytes, once a split tile).
#if !JITK_KERNEL_BLOCK_SPARSE_MATMUL && JITK_ROPE_NEOX
#define JITK_STORE_SPLIT __device__ __noinline__
#else
#define JITK_STORE_SPLIT __device__ inline
#endif
JITK_STORE_SPLIT void store_split(const Plan& plan, unsigned split, unsigned part, int t, float alpha, float beta,
                                  const jitk_chain& chain, const float* red, const Qkv& qkv) {
#if !JITK_KERNEL_BLOCK_SPARSE_MATMUL && defined(JITK_MAX_SPLIT_K)
  T* __restrict__ out = plan.c;
  const i64 ld = plan.ldc, M_out = plan.rows, N_out = GATED ? plan.cols / 2 : plan.cols;
  const int first = static_cast<int>(64 * part / split), last = static_cast<int>(64 * (part + 1) / split);
  constexpr int UNITS = TN / (GATED ? 16 : 8);  // a row's
  constexpr int READS = GATED ? 4 : 2;           // float4s a unit a block
  const bool vectors = ld % 8 == 0 && jitk::aligned16(out) && chain.aligned();
  for (int e = t; e < (last - first) * UNITS; e += 128) {
    const int row = first + e / UNITS, unit = e % UNITS;
    const i64 r = plan.m0 + row, col = (GATED ? plan.n0 / 2 : plan.n0) + unit * 8;
    if (r >= M_out || col >= N_out) continue;
    const float* at = red + row * RED_LD + unit * 8 * (GATED ? 2 : 1);
    float s[4 * READS];
#pragma unroll
    for (int j = 0; j < READS; ++j) {
      const float4 x = cluster_load4(at + 4 * j, 0);
      s[4 * j] = x.x, s[4 * j + 1] = x.y, s[4 * j + 2] = x.z, s[4 * j + 3] = x.w;
    }
    for (unsigned q = 1; q < split; ++q)
#pragma unroll
      for (int j = 0; j < READS; ++j) {
        const float4 x = cluster_load4(at + 4 * j, q);
        s[4 * j] += x.x, s[4 * j + 1] += x.y, s[4 * j + 2] += x.z, s[4 * j + 3] += x.w;
      }
    float v[8];
    if constexpr (GATED) {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = jitk::JITK_GATE_ACTIVATION(rounded(alpha * s[k])) * rounded(alpha * s[k + 8]);
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = alpha * s[k];
    }
    if constexpr (ROPE) {  // a q or k head's 8 columns turn with their partners' (HD / 2 columns on or back), summed alike
      if (col / HD < qkv.heads + qkv.kv_heads) {
        const int in_head = static_cast<int>(col % HD);
        const bool first = in_head < HD / 2;
        const float* partner = at + (first ? HD / 2 : -HD / 2);
        float o[8];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float4 x = cluster_load4(partner + 4 * j, 0);
          o[4 * j] = x.x, o[4 * j + 1] = x.y, o[4 * j + 2] = x.z, o[4 * j + 3] = x.w;
        }
        for (unsigned q = 1; q < split; ++q)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const float4 x = cluster_load4(partner + 4 * j, q);
            o[4 * j] += x.x, o[4 * j + 1] += x.y, o[4 * j + 2] += x.z, o[4 * j + 3] += x.w;
          }
        const float pos = static_cast<float>(qkv.positions[r]);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          float c, sn;
          qkv.angle(pos, (first ? in_head : in_head - HD / 2) + k, c, sn);
          const float self = rounded(v[k]), other = rounded(alpha * o[k]);
          v[k] = first ? self * c - other * sn : self * c + other * sn;
        }
      }
    }
    const i64 at_c = r * ld + col;
    if (vectors && col + 8 <= N_out) {
      if (beta != 0.f) {
        const auto old = jitk::load<8>(out + at_c);
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] += beta * jitk::to_float(old.v[k]);
      }
      chain.epilogue<8>(v, at_c, col);
      jitk::Pack<T, 8> p;
#pragma unroll
      for (int k = 0; k < 8; ++k) p.v[k] = jitk::from_float<T>(v[k]);
      jitk::store<8>(out + at_c, p);
      if constexpr (CACHE) qkv.put<8>(r, col, p);
    } else {
      for (int k = 0; k < 8 && col + k < N_out; ++k) {
        float x[1] = {v[k]};
        if (beta != 0.f) x[0] += beta * jitk::to_float(out[at_c + k]);
        chain.epilogue<1>(x, at_c + k, col + k);
        out[at_c + k] = jitk::from_float<T>(x[0]);
        if constexpr (CACHE) qkv.put1(r, col + k, out[at_c + k]);
      }
    }
  }
#else
  (void)plan, (void)split, (void)part, (void)t, (void)alpha, (void)beta, (void)chain, (void)red, (void)qkv;
#endif
}

// The tiles of a launch, and each one's plan.
struct Tiles {
  i64 M, N, K;
  T* c;
  i64 ldc;
#if JITK_KERNEL_BLOCK_SPARSE_MATMUL
  const int *row_ptr, *col_of, *row_of, *col_ptr, *by_col, *rows_by_count, *cols_by_count;
  i64 block_rows, block_cols, nnz;
  static constexpr unsigned rank = 0, split = 1, part = 0;  // no clusters
#if JITK_OP_BACKWARD_WEIGHT
  __device__ i64 round_tiles(i64 slots) const { return slots; }
  __device__ i64 count() const { return nnz; }
  __device__ Plan plan(i64 tile) const {
    const int id = static_cast<int>(tile);
    return {0, 0, c + static_cast<i64>(id) * BS * BS, BS, BS, BS, static_cast<int>((M + TK - 1) / TK), nullptr, nullptr, 0,
            row_of[id], col_of[id]};
  }
#else
  // Tiles of JITK_TILE_M rows by one block column (forward: W's; backward_input: dX's, W's block
  // row; a "line" below), in groups of a few tile rows where they fill the consumers' slots
  // (group_rows): a group is every line of group_rows() tile rows, the lines with the most blocks
  // first, the tile rows of a line side by side. A group is one round of the slots (tile_of), so
  // the tiles running at once read a few tile rows of X (dY) -- 8 MB at 4096 x 4096 -- which stay
  // in L2 for the group's every block column, where tiles by whole block columns read all of X in
  // a round and read it again from DRAM (H100, 4096^3 at 90% sparsity: +7%).
  static constexpr int ROWS = JITK_TILE_M;
  __device__ i64 count() const {
#if JITK_OP_FORWARD
    return (M + ROWS - 1) / ROWS * block_cols;
#else
    return (M + ROWS - 1) / ROWS * block_rows;
#endif
  }
  __device__ i64 lines() const {
#if JITK_OP_FORWARD
    return block_cols;
#else
    return block_rows;
#endif
  }
  // Tile rows a group takes: as many whole rows of lines as the consumers' slots hold, where those
  // leave at most 1/16 of the slots idle; else 0: no groups (tiles by whole lines, as many a round
  // as there are slots).
  // The snake hands a group's tiles to slots 0.. in one round and to ..P - 1 in the next, so idle
  // slots are a lasting imbalance: every other round for the slots at either end (a grid of 114
  // SMs on 128 lines would give some blocks twice the tiles of others).
  __device__ i64 group_rows() const {
    const i64 slots = static_cast<i64>(gridDim.x) * CONSUMERS, n = lines() > 0 ? lines() : 1, g = slots / n;
    return g >= 1 && 16 * g * n >= 15 * slots ? g : 0;
  }
  // Tiles a round of `slots` hands out: a group (the rest of the slots idle), or `slots`.
  __device__ i64 round_tiles(i64 slots) const {
    const i64 g = group_rows();
    return g > 0 ? g * lines() : slots;
  }
  __device__ Plan plan(i64 tile) const {
    const i64 tiles_m = (M + ROWS - 1) / ROWS, group = group_rows() > 0 ? group_rows() : tiles_m, lines_ = lines();
    const i64 first = tile / (group * lines_) * group, in_group = tiles_m - first < group ? tiles_m - first : group;
    const i64 in = tile - first * lines_, m0 = (first + in % in_group) * ROWS, line = in / in_group;
#if JITK_OP_FORWARD
    const int j = cols_by_count[line];
    return {m0, static_cast<i64>(j) * BS, c, ldc, M, N, col_ptr[j + 1] - col_ptr[j], by_col + col_ptr[j], row_of, 0, 0, 0};
#else
    const int j = rows_by_count[line];
    return {m0, static_cast<i64>(j) * BS, c, ldc, M, K, row_ptr[j + 1] - row_ptr[j], nullptr, col_of, row_ptr[j], 0, 0};
#endif
  }
#endif
#else
  unsigned rank;  // this block's place in its cluster
  // SPLIT_K: the blocks of a cluster walking shares of one tile's K (1: none), and this block's share
  unsigned split, part;
  // Units of CLUSTER vertically neighbouring tiles, one a cluster: unit (u, n) is tile rows
  // u * CLUSTER .. + CLUSTER - 1 of tile column n, the block of rank r taking row u * CLUSTER + r.
  __device__ i64 count() const { return ((M + TM - 1) / TM + CLUSTER - 1) / CLUSTER * ((N + TN - 1) / TN); }
  __device__ i64 round_tiles(i64 slots) const { return slots; }
  // Units in groups of 8 unit rows, column by column within a group (neighbours share A and B in L2).
  __device__ Plan plan(i64 unit) const {
    const i64 units_m = ((M + TM - 1) / TM + CLUSTER - 1) / CLUSTER, tiles_n = (N + TN - 1) / TN;
    const i64 group = 8, per_group = group * tiles_n;
    const i64 first = unit / per_group * group, in_group = units_m - first < group ? units_m - first : group;
    const i64 u = first + (unit % per_group) % in_group;
    Plan p{(u * CLUSTER + rank) * TM, (unit % per_group) / in_group * TN, c, ldc, M, N, static_cast<int>((K + TK - 1) / TK)};
    if (SPLIT_K && split > 1) {  // this block's share of the slices (the launch gives each at least 4)
      const int all = p.slices;
      p.k0 = static_cast<int>(static_cast<i64>(all) * part / split);
      p.slices = static_cast<int>(static_cast<i64>(all) * (part + 1) / split) - p.k0;
    }
    return p;
  }
#endif
  // The block's local-th tile, or -1 past its last: blocks take tiles in turn; with PINGPONG the
  // consumers do, in a snake over P = 2 x blocks slots (0, 1, ... P - 1, then P - 1 ... 0) so that
  // tiles in falling size even out, round_tiles() of them a round (slots past those idle). A full
  // round gives a block's two consumers neighbouring slots (slot = block x 2 + consumer): tiles of
  // one block column and alike in length, so their turns stay even and they share W's blocks in
  // L2 (on the H100 at 4096^2 x 4096: up to 18% faster than first consumers first). A round with
  // fewer tiles than slots goes first consumers first (slot = consumer x blocks + block), so
  // every SM gets one before any gets two. A round may hand a consumer a tile past the count (or
  // an idle slot): it has none.
  __device__ i64 tile_of(i64 local) const {
    if (!PINGPONG) {  // clusters take units in turn, as blocks take tiles
      const i64 tile = blockIdx.x / (CLUSTER * split) + local * (gridDim.x / (CLUSTER * split));
      return tile < count() ? tile : -1;
    }
    const i64 slots = static_cast<i64>(gridDim.x) * CONSUMERS, round = local / CONSUMERS, per_round = round_tiles(slots);
    if (round * per_round >= count()) return -1;
    const i64 slot = count() - round * per_round < per_round ? (local % CONSUMERS) * static_cast<i64>(gridDim.x) + blockIdx.x
                                                             : static_cast<i64>(blockIdx.x) * CONSUMERS + local % CONSUMERS;
    const i64 at = round % 2 ? slots - 1 - slot : slot;
    return at < per_round ? round * per_round + at : count();
  }
};

// Persistent: the grid holds at most BLOCKS_PER_SM blocks an SM, each taking tiles blockIdx.x,
// + gridDim.x, ... (clusters: units; PINGPONG: Tiles::tile_of's snake). The producer runs ahead
// into the next tile while the consumers store the last.
#if JITK_KERNEL_BLOCK_SPARSE_MATMUL
JITK_GPU_KERNEL_MIN_BLOCKS(BLOCKS_PER_SM)(i64 M, i64 N, i64 K, float alpha, const T* __restrict__ a, i64 lda, const T* __restrict__ b,
                                          i64 ldb, float beta, T* __restrict__ c, i64 ldc, const int* __restrict__ index,
                                          i64 block_rows, i64 block_cols, i64 nnz JITK_CHAIN_PARAMS, i64 rows,
                                          const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b) {
  const int* col_of = index + block_rows + 1;
  const int* row_of = col_of + nnz;
  const int* col_ptr = row_of + nnz;
  const int* by_col = col_ptr + block_cols + 1;
  const int* rows_by_count = by_col + nnz;
  const Tiles tiles{M,       N,      K,       c,      ldc,   index,         col_of,     row_of, col_ptr,
                    by_col, rows_by_count, rows_by_count + block_rows, block_rows, block_cols, nnz};
#else
JITK_GPU_KERNEL_MIN_BLOCKS(BLOCKS_PER_SM)(i64 M, i64 N, i64 K, float alpha, const T* __restrict__ a, i64 lda, const T* __restrict__ b,
                                          i64 ldb, float beta, T* __restrict__ c, i64 ldc JITK_CHAIN_PARAMS JITK_QKV_PARAMS, i64 rows,
                                          const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b) {
  const Tiles tiles{M, N, K, c, ldc, CLUSTER > 1 ? cluster_rank() : 0u, SPLIT_K ? cluster_size() : 1u, SPLIT_K ? cluster_rank() : 0u};
#endif
  extern __shared__ __align__(1024) unsigned char jitk_smem[];
  // Slots 1024-byte aligned (the swizzle's period), then the barriers.
  unsigned char* base = jitk_smem + ((1024 - smem_addr(jitk_smem) % 1024) % 1024);
  T* sa = reinterpret_cast<T*>(base);
  T* sb = sa + STAGES * A_SLOT;
  T* staging = sb + STAGES * B_SLOT;  // SWAPPED: the consumers' (STAGING_BYTES)
  u64* full = reinterpret_cast<u64*>(reinterpret_cast<unsigned char*>(staging) + STAGING_BYTES);
  u64* empty = full + STAGES;
  u64* turn = empty + STAGES;  // PINGPONG: turn[w] completes when consumer w may start its next tile's products
  const i64 count = tiles.count();

  const int warpgroup = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      bar_init(&full[s], 1);
      bar_init(&empty[s], SLOT_USERS);
    }
    bar_init(&turn[0], 128);
    bar_init(&turn[1], 128);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // With a cluster the other block's producer and consumers use this block's barriers: both
  // blocks' must be initialized first.
  float* rope_table = reinterpret_cast<float*>(turn + 2);  // rope: the inverse frequencies (ROPE_BYTES)
#if !JITK_KERNEL_BLOCK_SPARSE_MATMUL && JITK_ROPE_NEOX
  Qkv::make_table(rope_table, qkv_theta);
#endif
  if (CLUSTER > 1) cluster_sync();
  else __syncthreads();

  // `it` counts the slices this block has walked over all its tiles: slot it % STAGES, in its
  // (it / STAGES)-th use.
  // SWAPPED: wgmma's A (W's block) comes through the second map, its B (X, dY) through the first.
  const TensorMap* map_of_a = SWAPPED ? &map_b : &map_a;
  const TensorMap* map_of_b = SWAPPED ? &map_a : &map_b;
  if (warpgroup == 0) {  // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
    // Block-sparse forward and backward_input read two dependent indexes for a slice's
    // coordinates: a warp's lanes find 32 slices' at once, lane 0 issues the copies (one thread
    // alone waited on the indexes slice after slice: 0-5% slower at 90% sparsity over two runs).
    // Elsewhere the coordinates are arithmetic and thread 0 does it all.
    constexpr int LANES = INDEXED ? 32 : 1;
    if (t < LANES) {
      int it = 0;
      for (i64 local = 0;; ++local) {
        const i64 tile = tiles.tile_of(local);
        if (tile < 0) break;
        if (tile >= count) continue;
        const Plan plan = tiles.plan(tile);
        for (int k0 = 0; k0 < plan.slices; k0 += LANES) {
          int at[4] = {0, 0, 0, 0};  // lane l: slice k0 + l's a_k, a_r, b_k, b_r
          if (k0 + t < plan.slices) plan.coords(k0 + t, at[0], at[1], at[2], at[3]);
          const int n = plan.slices - k0 < LANES ? plan.slices - k0 : LANES;
          for (int j = 0; j < n; ++j, ++it) {
            int a_k = at[0], a_r = at[1], b_k = at[2], b_r = at[3];
            if (INDEXED) {
              a_k = __shfl_sync(0xffffffffu, a_k, j), a_r = __shfl_sync(0xffffffffu, a_r, j);
              b_k = __shfl_sync(0xffffffffu, b_k, j), b_r = __shfl_sync(0xffffffffu, b_r, j);
            }
            if (t == 0) {
              const int s = it % STAGES, round = it / STAGES;
              if (round > 0) bar_wait(&empty[s], (round - 1) & 1);  // the consumers are done with the slot's last use
              bar_expect_bytes(&full[s], SLOT_BYTES);  // with a cluster, part of B comes from the other block
              load_operand<TM, TA>(sa + s * A_SLOT, map_of_a, &full[s], a_k, a_r);
              if (CLUSTER == 1) load_operand<TN, TB>(sb + s * B_SLOT, map_of_b, &full[s], b_k, b_r);
              else load_shared_operand<TN, TB>(sb + s * B_SLOT, map_of_b, &full[s], b_k, b_r, tiles.rank);
            }
            if (INDEXED) __syncwarp();
          }
        }
      }
    }
  } else {  // a consumer: rows [64 * (warpgroup - 1), +64) of each tile, or (PINGPONG) every other tile
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
    const int w = warpgroup - 1, part = PINGPONG ? 0 : w;
    const jitk_chain chain{JITK_CHAIN_ARGS};
    Qkv qkv{JITK_QKV_ARGS};
    qkv.inv_freq = rope_table;
    int it = 0;
    // PINGPONG: the consumers' products take turns, tile by tile (0, 1, 0, ...), so one stores while
    // the other multiplies -- and neither waits on a slot's `full` barrier more than one use ahead
    // of the other's (an mbarrier's parity tells only one phase from the next). A turn without a
    // tile (the snake's last round) is still taken.
    int turns = 0;
    for (i64 local = 0;; ++local) {
      const i64 tile = tiles.tile_of(local);
      if (tile < 0) break;
      const Plan plan = tile < count ? tiles.plan(tile) : Plan{};  // past the count (PINGPONG only): no slices
      if (PINGPONG && local % CONSUMERS != w) {  // the other consumer's: its slices pass by
        it += plan.slices;
        continue;
      }
      if (PINGPONG && (w > 0 || turns > 0)) bar_wait(&turn[w], (w == 0 ? turns - 1 : turns) & 1);
      ++turns;
      if (tile >= count) {  // a turn without a tile
        bar_arrive(&turn[1 - w]);
        continue;
      }
      float d[TN / 2];
#pragma unroll
      for (int i = 0; i < TN / 2; ++i) d[i] = 0.f;
      for (int kt = 0; kt < plan.slices; ++kt, ++it) {
        const int s = it % STAGES;
        bar_wait(&full[s], (it / STAGES) & 1);
        const T* as = sa + s * A_SLOT + part * 64 * TK;  // K-major: 64 rows on; M-major: the part-th 64-wide box
        const T* bs = sb + s * B_SLOT;
        keep_registers(d);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < TK; kk += 16)
          Wgmma<TN, TA, TB>::run(d, descriptor(k_step(as, kk, TA), TA), descriptor(k_step(bs, kk, TB), TB), 1);
        wgmma_commit();
        keep_registers(d);
        // One slice's products stay in flight while the next slice is awaited: once the previous
        // slice's are done, its slot goes back to the producer.
        wgmma_wait<1>();
        if (kt > 0) release(&empty[(it - 1) % STAGES]);
      }
      wgmma_wait<0>();
      keep_registers(d);
      if (plan.slices > 0) release(&empty[(it - 1) % STAGES]);  // the tile's last slot
      if (PINGPONG) bar_arrive(&turn[1 - w]);
      if (SWAPPED) store_transposed(plan, d, t, w, alpha, beta, chain, staging);
      else if (SPLIT_K && tiles.split > 1) {
        consumer_sync(w);  // the consumer's warps are all past their last products before the slots are overwritten
        stage_partial(d, t, reinterpret_cast<float*>(base));
      }
      else if (GATED) store_gated(plan, d, part, t, alpha, beta, chain, staging);
      else store(plan, d, part, t, alpha, beta, chain, staging, qkv);
    }
  }
  // A split tile: every block's partial sums staged, each block sums its share of the rows over the
  // cluster and stores them (every thread of the cluster passes both barriers).
  if constexpr (SPLIT_K) {
    if (tiles.split > 1) {
      cluster_sync();
      if (warpgroup > 0) {
        const i64 tile = blockIdx.x / tiles.split;
        Qkv qkv{JITK_QKV_ARGS};
        qkv.inv_freq = rope_table;
        if (tile < count) store_split(tiles.plan(tile), tiles.split, tiles.part, t, alpha, beta, jitk_chain{JITK_CHAIN_ARGS},
                                      reinterpret_cast<const float*>(base), qkv);
      }
      cluster_sync();  // no block leaves while another reads its shared memory
    }
  }
  // The other block may still arrive on this block's barriers and write into its slots: neither
  // leaves before both are done.
  if (CLUSTER > 1) cluster_sync();
}
