// attention_prefill's GPU texts. A block takes TM query rows of one (sequence, kv head) -- the
// group's G query heads of TM / G tokens, row r being token r / G, head kv_head * G + r % G, so
// each K and V tile is loaded once for the group -- and walks the keys the rows may see TN at a
// time: S = Q K^T, the mask, an online softmax in registers, O += P V with P taken straight from
// S's registers. Three paths:
// - cuda-sm90a (Hopper): wgmma, a producer warpgroup and 64-row consumer warpgroups (below);
// - cuda (sm_80 on; FlashAttention-2's scheme): mma.sync m16n8k16, 4 warps of TM / 64 16-row
//   slices, K's next tile loading while P V runs and V's while Q K^T runs (cp.async); rows padded
//   by 16 bytes in shared memory keep ldmatrix free of bank conflicts for any head_dim that is a
//   multiple of 16;
// - hip (AMD, hipRTC): a thread a row, K and V from global memory.
#include "jitk_gpu.h"

constexpr int D = JITK_HEAD_DIM;
constexpr int G = JITK_GROUP;
constexpr int TM = JITK_TILE_M;
constexpr int TN = JITK_TILE_N;
constexpr bool kCausal = JITK_CAUSAL != 0;
constexpr i64 kWindow = JITK_WINDOW;  // 0: none
constexpr float kLog2e = 1.4426950408889634f;

// Where a block's work lies: its (sequence, kv head), its rows and the keys they may see.
struct Work {
  i64 q0 = 0, lq = 0, k0 = 0, lk = 0;  // the sequence's first query and key rows, and their counts
  int kv_head = 0;
  int row0 = 0, rows = 0;  // the block's first row of the sequence's lq * G, and how many are real
  i64 key_begin = 0, key_end = 0;  // the keys any of its rows sees: [key_begin, key_end)
  bool valid = false;
  // The sequence has more queries than the launch's max_seqlen_q covers: its rows read NaN (the
  // last block of the pair also fills those past the grid), never a silent partial result.
  bool overflow = false;
  i64 fill_end = 0;  // overflow: the block fills rows [row0, fill_end)
};

// K and V bytes the blocks that run at once may share through L2 (a budget under the smallest L2
// of the GPUs served: A100 40 MB, H100 50 MB).
constexpr i64 kL2Bytes = i64{32} << 20;
// Which texts take the heaviest row tiles first under a causal mask (below): the generic one. The
// Hopper texts keep one pair's tiles after another: on the H100 the order gained them nothing at
// 2048 tokens and cost Llama-3-8B's GQA shape (32 pairs of 128 row tiles) 5%, for +5-7% at 8192
// tokens (bench/results/2026-11-26-h100-attention-causal-order.md; bench/gpu/ab/lpt2 is the next try).
#if defined(JITK_IMPLEMENTATION_CUDA)
constexpr bool kHeaviestFirst = kCausal;
#else
constexpr bool kHeaviestFirst = false;
#endif

// Block b of m_tiles * batch * kv_heads: which (sequence, kv head) pair -- a column -- and which of
// its row tiles. By default the pairs one after another, the row tiles of a pair consecutive (they
// share K and V through L2), the last first (under a causal mask it walks the most keys).
// kHeaviestFirst: under a causal mask row tile mt walks mt + 1 tiles' keys, so the heaviest go
// first over the whole grid, the lightest last (no SM is left with a heavy tile while the others
// have run out of work; FlashAttention-2 takes them lightest first): the columns are taken in
// sections of as many pairs as fit K and V in kL2Bytes (a power of two; FlashAttention-3's LPT
// order), and within a section the last row tile of every pair, then the one before, and so on.
// H100, generic text, 8192 tokens: +5% at head 64, +16% at 128, +9% at 256; one section of every
// pair instead cost the Hopper text 27% at head 128 x 2048 tokens (128 pairs' K and V at once).
__device__ inline bool block_tile(i64 m_tiles, i64 columns, i64 batch, i64 total_k, i64& col, i64& mt) {
  const i64 block = blockIdx.x;
  if (block >= m_tiles * columns) return false;
  if constexpr (kHeaviestFirst) {
    const i64 keys = batch > 0 && total_k / batch > 0 ? total_k / batch : 1;  // a sequence's keys, on average
    const i64 column_bytes = keys * D * 2 * static_cast<i64>(sizeof(T));
    i64 section = 1;
    while (section < columns && 2 * section * column_bytes <= kL2Bytes) section *= 2;
    const i64 per_section = section * m_tiles, first = block / per_section * section;
    const i64 in = block - first * m_tiles, here = columns - first < section ? columns - first : section;
    col = first + in % here;
    mt = m_tiles - 1 - in / here;
  } else {
    col = block / m_tiles;
    mt = m_tiles - 1 - block % m_tiles;
  }
  return true;
}

__device__ inline Work find_work(const int* cu_q, const int* cu_k, i64 batch, i64 kv_heads, i64 total_q, i64 total_k, i64 rows) {
  Work w;
  const i64 m_tiles = (rows + TM - 1) / TM;
  i64 col = 0, mt = 0;
  if (!block_tile(m_tiles, batch * kv_heads, batch, total_k, col, mt)) return w;
  const i64 b = col / kv_heads;
  w.kv_head = static_cast<int>(col - b * kv_heads);
  const i64 q0 = cu_q[b], q1 = cu_q[b + 1], k0 = cu_k[b], k1 = cu_k[b + 1];
  // Offsets out of range (the device holds what the host could not check): nothing is touched.
  if (q0 < 0 || q1 < q0 || q1 > total_q || k0 < 0 || k1 < k0 || k1 > total_k) return w;
  w.q0 = q0, w.lq = q1 - q0, w.k0 = k0, w.lk = k1 - k0;
  const i64 seq_rows = w.lq * G;
  if (mt * TM >= seq_rows) return w;
  w.row0 = static_cast<int>(mt * TM);
  w.rows = static_cast<int>(seq_rows - w.row0 < TM ? seq_rows - w.row0 : TM);
  if (seq_rows > rows) {
    w.overflow = w.valid = true;
    w.fill_end = mt == m_tiles - 1 ? seq_rows : w.row0 + w.rows;
    return w;
  }
  const i64 shift = w.lk - w.lq;  // query i sits at key position i + shift
  const i64 first_token = w.row0 / G, last_token = (w.row0 + w.rows - 1) / G;
  w.key_begin = 0;
  w.key_end = w.lk;
  if (kCausal && last_token + shift + 1 < w.key_end) w.key_end = last_token + shift + 1;
  if (kWindow > 0 && first_token + shift - kWindow > 0) w.key_begin = first_token + shift - kWindow;
  if (w.key_end < w.key_begin) w.key_end = w.key_begin;
  w.valid = true;
  return w;
}

// An overflowing sequence's rows [row0, fill_end) of o and lse set to NaN.
__device__ inline void fill_nan(const Work& w, T* o, float* lse, i64 kv_heads, i64 total_q) {
  const i64 heads = kv_heads * G;
  for (i64 e = threadIdx.x; e < (w.fill_end - w.row0) * D; e += JITK_BLOCK) {
    const i64 sr = w.row0 + e / D;
    o[((w.q0 + sr / G) * heads + w.kv_head * G + sr % G) * D + e % D] = jitk::from_float<T>(__int_as_float(0x7fc00000));
    if (lse && e % D == 0) lse[(w.kv_head * G + sr % G) * total_q + w.q0 + sr / G] = __int_as_float(0x7fc00000);
  }
}

// Whether some row of the block may not see some key of the tile of TN keys from n0: only such
// tiles are masked.
__device__ inline bool needs_mask(const Work& w, i64 n0) {
  const i64 shift = w.lk - w.lq;
  return n0 + TN > w.lk || (kCausal && n0 + TN - 1 > (w.row0 / G) + shift) ||
         (kWindow > 0 && n0 < (w.row0 + w.rows - 1) / G + shift - kWindow);
}

// Whether a row at key position `at` (its token + lk - lq) sees key `key` of the sequence's lk.
// Offsets are int32, so positions within a sequence fit an int.
__device__ inline bool sees(int at, int key, int lk) {
  if (key >= lk) return false;
  if (kCausal && key > at) return false;
  if (kWindow > 0 && key < at - kWindow) return false;
  return true;
}

#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__))

static_assert(sizeof(T) == 2, "the tensor-core texts take f16 and bf16");


__device__ inline unsigned shared_address(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// 16 bytes from global to shared memory, zeros where `valid` is false (cp.async's source size 0).
__device__ inline void copy16(void* to, const void* from, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(to)), "l"(from), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ inline void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ inline void wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
// Two floats as a register of two 16-bit elements (the first in the low half).
__device__ inline unsigned pack2(float lo, float hi) {
  const T l = jitk::from_float<T>(lo), h = jitk::from_float<T>(hi);
  return static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&l)) |
         (static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&h)) << 16);
}

// A row's log-sum-exp in natural units from its running max (of scores scaled by log2 e) and
// its sum of exp2(score - max); -inf for a row that saw no key.
__device__ inline float lse_of(float max_log2, float sum) {
  return sum > 0.0f ? (max_log2 + __log2f(sum)) * 0.6931471805599453f : jitk::neg_inf();
}

__device__ inline float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#endif

#if JITK_IMPLEMENTATION_CUDA_SM90A || JITK_IMPLEMENTATION_CUDA_SM90A_TMA

// ---- Hopper (cuda-sm90a, cuda-sm90a-tma): wgmma, a producer warpgroup, TM / 64 consumer warpgroups ----
// Warpgroup 0 (the producer, 128 threads) copies each K and V tile of TN keys into one of STAGES
// shared-memory stages with cp.async, in 128-byte swizzled slabs of 64 elements of the head (the
// layout wgmma reads), waits for its own copies, fences them to the async proxy and arrives on the
// tile's `full_k` / `full_v` mbarrier; a stage of K (of V) is refilled once every consumer has
// arrived on its `empty_k` (`empty_v`) one.
// cuda-sm90a-tma (kTma): the copy engine loads the tiles instead. The host encodes K and V each as a
// tensor map over the whole packed tensor (rows of kv_heads x D elements, a token's k_stride /
// v_stride apart; boxes of 64 elements by TN rows, 128-byte swizzle: the slabs above), and one
// thread of the producer issues a tile's D / 64 boxes at (kv_head * D + 64 slab, the sequence's
// first key + n0) after arming the tile's mbarrier with its bytes (expect-tx). The producer keeps
// 24 registers, the consumers get the rest (240 at two consumers, against 224). Rows past the
// packed tensor read as zeros (the map's bounds); rows past the sequence's end inside the tensor
// are the next sequence's: K's are masked out of S, V's are zeroed by the producer's warp before
// the tile is released (a P of 0 times a NaN or an infinity there would still be NaN).
// Consumer warpgroup c takes rows 64c .. 64c + 63 of the tile: S = Q K^T by wgmma (both from
// shared memory), the mask and an online softmax in registers, then O += P V by wgmma with P from
// registers (its accumulator layout is the A fragment's) and V read N-major (transposed by wgmma).
// As FlashAttention-3 does, a consumer issues tile j + 1's Q K^T and tile j's P V together and runs
// tile j + 1's softmax while P V is in flight (intra-warpgroup overlap); with kPingPong the
// consumers take turns issuing their products (named barriers, one a consumer), so that one's
// softmax runs under the others' products.
#include "jitk_sm90.h"
using namespace jitk::sm90;

#if JITK_IMPLEMENTATION_CUDA_SM90A_TMA
#define JITK_FA_TMA 1
#else
#define JITK_FA_TMA 0
#endif
constexpr bool kTma = JITK_FA_TMA != 0;

#ifndef JITK_FA_PINGPONG
#define JITK_FA_PINGPONG 1
#endif
#ifndef JITK_FA_MAX_STAGES
#define JITK_FA_MAX_STAGES 3
#endif
// The defaults by head size, from A/B runs against the text with both off
// (bench/results/2026-11-26-h100-fa-tma.md): the producer that never waits (cp.async only), +2-4%
// at heads 128 and 256 on an H200 and -1-3% at 64, +4-9% at 256 on the H100; the early rescale,
// +1-4% at 64 with cp.async on the H200 (-3% to +2% on the H100), -1-5% at 128 and 256, and -3%
// to +0.5% at 64 with the copy engine (H100): on for cp.async at head 64 alone.
#ifndef JITK_FA_ASYNC_PRODUCER
#define JITK_FA_ASYNC_PRODUCER (JITK_HEAD_DIM >= 128)
#endif
#ifndef JITK_FA_RESCALE_EARLY
#define JITK_FA_RESCALE_EARLY (JITK_HEAD_DIM == 64 && !JITK_FA_TMA)
#endif
// kAsyncProducer: the producer's threads do not wait for their copies: each arrives on the tile's
// mbarrier when they land (cp.async.mbarrier.arrive.noinc), and the consumers fence the async proxy
// after their wait. kRescaleEarly: O's rows are rescaled while Q K^T runs, before P V is issued
// (FlashAttention-3's order), not after P V is waited for.
constexpr bool kAsyncProducer = JITK_FA_ASYNC_PRODUCER != 0 && !kTma;  // the copy engine's tiles arrive by expect-tx
constexpr bool kRescaleEarly = JITK_FA_RESCALE_EARLY != 0;
#ifndef JITK_FA_STAGE_O
#define JITK_FA_STAGE_O 0
#endif
constexpr bool kStageO = JITK_FA_STAGE_O != 0;  // the epilogue below

constexpr int CONSUMERS = TM / 64;

constexpr bool kPingPong = JITK_FA_PINGPONG && CONSUMERS > 1;
static_assert(TM % 64 == 0 && (D == 64 || D == 128 || D == 256) && (TN % 64 == 0 || TN == 80) && TN <= 256,
              "attention_prefill sm90a: tiles the host's plan refuses");
static_assert(JITK_BLOCK == 128 * (CONSUMERS + 1), "attention_prefill sm90a: the plan's threads are a producer and TM / 64 consumers");
constexpr int REGS_AT_ENTRY = 65536 / JITK_BLOCK / 8 * 8;
constexpr int PRODUCER_REGS = kTma ? 24 : 56;
constexpr int CONSUMER_SHARE = (REGS_AT_ENTRY * JITK_BLOCK - 128 * PRODUCER_REGS) / (128 * CONSUMERS) / 8 * 8;
constexpr int CONSUMER_REGS = CONSUMER_SHARE < 240 ? CONSUMER_SHARE : 240;
constexpr int Q_ELEMS = TM * D, KV_ELEMS = TN * D;  // a tile's elements; slabs of ROWS x 64 one after another
// K/V stages: as many as the shared memory the plan gives holds, 2 to JITK_FA_MAX_STAGES
// (a stage: a K and a V tile and their four 8-byte mbarriers); kTma: one mbarrier more, `edge`
constexpr int EXTRA_BARRIERS = kTma ? 8 : 0;
constexpr int FIT_STAGES = (JITK_SHARED_BYTES - 1024 - EXTRA_BARRIERS - 2 * Q_ELEMS) / (2 * 2 * KV_ELEMS + 4 * 8);
constexpr int STAGES = FIT_STAGES < JITK_FA_MAX_STAGES ? FIT_STAGES : JITK_FA_MAX_STAGES;
static_assert(STAGES >= 2 && 2 * (Q_ELEMS + 2 * STAGES * KV_ELEMS) + 1024 + 4 * 8 * STAGES + EXTRA_BARRIERS <= JITK_SHARED_BYTES,
              "attention_prefill sm90a: more shared memory than planned");

// Row r's 16-byte chunk c (of D / 8) in a tile of ROWS rows stored as swizzled slabs: slab c / 8,
// row r's 128 bytes, the chunk's place XORed with r % 8 (what wgmma's 128-byte swizzle reads).
template <int ROWS> __device__ inline int swizzled(int r, int c) { return (c / 8) * ROWS * 64 + r * 64 + ((c % 8) ^ (r % 8)) * 8; }

// Copies rows [0, ROWS) of a tile, `step` threads from `first` on, zeros past `valid_rows`.
template <int ROWS, class RowAt> __device__ inline void copy_tile(T* to, int valid_rows, RowAt row_at, int first, int step) {
#pragma unroll 4
  for (int i = first; i < ROWS * (D / 8); i += step) {
    const int r = i / (D / 8), c = i % (D / 8);
    const bool valid = r < valid_rows;
    copy16(to + swizzled<ROWS>(r, c), (valid ? row_at(r) : row_at(0)) + c * 8, valid);
  }
}
__device__ inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ inline void warpgroup_sync(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }
template <int N> __device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// An arrival on `bar` once this thread's earlier cp.async copies have landed (counted among the
// barrier's expected arrivals).
__device__ inline void cp_async_arrive(u64* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// A consumer's wait for a tile: the barrier, then (copies that landed by cp.async's own arrival)
// the fence that lets wgmma's async proxy see them.
__device__ inline void wait_tile(u64* bar, unsigned parity) {
  bar_wait(bar, parity);
  if constexpr (kAsyncProducer) fence_async_shared();
}
#if JITK_FA_TMA
struct __align__(64) TensorMap {  // a CUtensorMap, by value
  u64 opaque[16];
};
// A box of the map at (inner, outer) into dst, completing (its bytes) on bar.
__device__ inline void tma_load(void* dst, const TensorMap* map, u64* bar, int inner, int outer) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
                   smem_addr(dst)),
               "l"(reinterpret_cast<u64>(map)), "r"(smem_addr(bar)), "r"(inner), "r"(outer)
               : "memory");
}
// A K or V tile: bar armed with the tile's bytes, then its D / 64 slabs (boxes of 64 x TN) from
// column `col` (the kv head's first element) and row `row` (a token of the packed tensor).
__device__ inline void load_tile(T* to, const TensorMap* map, u64* bar, int col, int row) {
  bar_expect_bytes(bar, KV_ELEMS * sizeof(T));
#pragma unroll
  for (int slab = 0; slab < D / 64; ++slab) tma_load(to + slab * TN * 64, map, bar, col + 64 * slab, row);
}
#endif

// The consumers' turns (kPingPong): named barriers 4 .. 4 + CONSUMERS - 1, one a consumer, each
// passed by its owner's bar.sync and the previous consumer's bar.arrive (256 threads).
constexpr int SCHED_BARRIER = 4;
__device__ inline void turn_wait(int c) {
  if constexpr (kPingPong) asm volatile("bar.sync %0, 256;\n" ::"r"(SCHED_BARRIER + c) : "memory");
}
__device__ inline void turn_pass(int c) {
  if constexpr (kPingPong) asm volatile("bar.arrive %0, 256;\n" ::"r"(SCHED_BARRIER + (c + 1) % CONSUMERS) : "memory");
}

// S = Q K^T for a consumer's 64 rows and TN keys (issued, not waited for).
__device__ inline void issue_qk(float (&sc)[TN / 2], const T* q_rows, const T* ks) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int slab = kk / 4, in = (kk % 4) * 16;
    Wgmma<TN, 0, 0>::run(sc, descriptor(q_rows + slab * TM * 64 + in, false), descriptor(ks + slab * TN * 64 + in, false), kk > 0);
  }
}
// P = S as A fragments of 16 keys: packed once the previous P V is done with p's registers (a
// register a wgmma in flight reads, written meanwhile, makes ptxas serialize every wgmma).
__device__ inline void pack_p(unsigned (&p)[TN / 16][4], const float (&sc)[TN / 2]) {
#pragma unroll
  for (int kk = 0; kk < TN / 16; ++kk) {
    p[kk][0] = pack2(sc[8 * kk + 0], sc[8 * kk + 1]);
    p[kk][1] = pack2(sc[8 * kk + 2], sc[8 * kk + 3]);
    p[kk][2] = pack2(sc[8 * kk + 4], sc[8 * kk + 5]);
    p[kk][3] = pack2(sc[8 * kk + 6], sc[8 * kk + 7]);
  }
}
// O += P V: P's registers as A fragments of 16 keys, V's rows of keys read N-major (issued, not waited for).
__device__ inline void issue_pv(float (&acc)[D / 2], const unsigned (&p)[TN / 16][4], const T* vs) {
#pragma unroll
  for (int kk = 0; kk < TN / 16; ++kk) WgmmaRs<D, 1>::run(acc, p[kk], descriptor(vs + kk * 16 * 64, true, TN * 64 * sizeof(T)), 1);
}

// A consumer's online softmax state: this thread's rows g and g + 8 of its warp's 16.
struct Softmax {
  float row_max[2] = {jitk::neg_inf(), jitk::neg_inf()}, row_sum[2] = {0.0f, 0.0f};
  float correction[2] = {1.0f, 1.0f};  // what O's rows are multiplied by once the tile's P V is added
  int at[2];                           // the rows as key positions
  float scale_log2;

  // The mask where some row of the tile from n0 may not see some key of it, then P = exp2(S - max)
  // in place with the rows' new max and sum.
  __device__ inline void step(float (&sc)[TN / 2], const Work& w, i64 n0, int t) {
    if (needs_mask(w, n0))
#pragma unroll
      for (int j = 0; j < TN / 2; ++j)
        if (!sees(at[(j / 2) % 2], static_cast<int>(n0) + 8 * (j / 4) + 2 * t + (j & 1), static_cast<int>(w.lk))) sc[j] = jitk::neg_inf();
    // registers 4j, 4j+1 are row g's, 4j+2, 4j+3 row g + 8's (a quad shares a row)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = row_max[h];
#pragma unroll
      for (int j = 0; j < TN / 8; ++j) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * h], sc[4 * j + 2 * h + 1]) * scale_log2);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // a row that has seen no key yet keeps exp2(-inf - 0) = 0 for every score
      const float base = mx == jitk::neg_inf() ? 0.0f : mx;
      correction[h] = exp2_approx(row_max[h] - base);
      row_max[h] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < TN / 8; ++j)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          sc[4 * j + e] = exp2_approx(fmaf(sc[4 * j + e], scale_log2, -base));
          sum += sc[4 * j + e];
        }
      row_sum[h] = row_sum[h] * correction[h] + sum;
    }
  }
  __device__ inline void rescale(float (&acc)[D / 2]) const {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      acc[4 * j] *= correction[0];
      acc[4 * j + 1] *= correction[0];
      acc[4 * j + 2] *= correction[1];
      acc[4 * j + 3] *= correction[1];
    }
  }
};

extern "C" __global__ void __launch_bounds__(JITK_BLOCK, 1)
    JITK_ENTRY(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o, float* __restrict__ lse,
               const int* __restrict__ cu_q, const int* __restrict__ cu_k, i64 batch, i64 kv_heads, i64 total_q, i64 total_k,
               i64 q_stride, i64 k_stride, i64 v_stride, float scale, i64 rows, i64 items
#if JITK_FA_TMA
               , const __grid_constant__ TensorMap map_k, const __grid_constant__ TensorMap map_v
#endif
    ) {
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  // wgmma's swizzled slabs want 1024-byte alignment
  T* sq = reinterpret_cast<T*>((reinterpret_cast<u64>(shared_raw) + 1023) & ~u64(1023));
  T* sk = sq + Q_ELEMS;                   // STAGES tiles of K
  T* sv = sk + STAGES * KV_ELEMS;         // STAGES tiles of V
  u64* full_k = reinterpret_cast<u64*>(sv + STAGES * KV_ELEMS);
  u64* full_v = full_k + STAGES;
  u64* empty_k = full_v + STAGES;
  u64* empty_v = empty_k + STAGES;
  u64* edge = empty_v + STAGES;  // kTma: a sequence's last V tile, before its rows past the end are zeroed
  (void)edge;
  const Work w = find_work(cu_q, cu_k, batch, kv_heads, total_q, total_k, rows);
  if (!w.valid || w.rows == 0) return;
  if (w.overflow) return fill_nan(w, o, lse, kv_heads, total_q);
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      bar_init(&full_k[s], kTma ? 1 : 128);
      bar_init(&full_v[s], kTma ? 1 : 128);
      bar_init(&empty_k[s], 128 * CONSUMERS);
      bar_init(&empty_v[s], 128 * CONSUMERS);
    }
    if constexpr (kTma) {
      bar_init(edge, 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // seen by the copy engine
    }
  }
  __syncthreads();
  const i64 first_tile = w.key_begin / TN, end_tile = (w.key_end + TN - 1) / TN;
  const int tiles = static_cast<int>(end_tile - first_tile);

  if (wg == 0) {  // the producer: K then V of each tile, each stage refilled once the consumers let it go
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
#if JITK_FA_TMA
    // one warp: lane 0 issues the copies, the warp zeroes the last V tile's rows past the sequence
    if (tid >= 32) return;
    if (tid == 0) asm volatile("prefetch.tensormap [%0];\nprefetch.tensormap [%1];\n" ::"l"(&map_k), "l"(&map_v) : "memory");
    const int col = w.kv_head * D;
    for (int i = 0; i < tiles; ++i) {
      const int s = i % STAGES;
      const unsigned phase = ((i / STAGES) - 1) & 1;
      const i64 n0 = (first_tile + i) * TN;
      const int row = static_cast<int>(w.k0 + n0);  // offsets are int32: a token of the packed tensor
      const int keys = static_cast<int>(w.lk - n0 < TN ? w.lk - n0 : TN);
      if (i >= STAGES) bar_wait(&empty_k[s], phase);
      if (tid == 0) load_tile(sk + s * KV_ELEMS, &map_k, &full_k[s], col, row);
      if (i >= STAGES) bar_wait(&empty_v[s], phase);
      if (keys == TN) {
        if (tid == 0) load_tile(sv + s * KV_ELEMS, &map_v, &full_v[s], col, row);
        continue;
      }
      // the sequence ends inside the tile (its last: keys end at key_end <= lk): the box lands on
      // `edge` (once a block), rows keys .. TN - 1 of each slab are zeroed, then the tile is released
      if (tid == 0) load_tile(sv + s * KV_ELEMS, &map_v, edge, col, row);
      bar_wait(edge, 0);
      const int per_slab = (TN - keys) * 8;  // 16-byte chunks past the last key's row, a slab
      for (int e = tid; e < (D / 64) * per_slab; e += 32) {
        const int slab = e / per_slab, chunk = e % per_slab;
        *reinterpret_cast<uint4*>(sv + s * KV_ELEMS + slab * TN * 64 + keys * 64 + chunk * 8) = make_uint4(0, 0, 0, 0);
      }
      fence_async_shared();  // the zeros, written by the generic proxy, before wgmma reads them
      __syncwarp();
      if (tid == 0) bar_arrive(&full_v[s]);
    }
#else
    const i64 head = static_cast<i64>(w.kv_head) * D;
    const T* k_at = k + (w.k0 + first_tile * TN) * k_stride + head;
    const T* v_at = v + (w.k0 + first_tile * TN) * v_stride + head;
    for (int i = 0; i < tiles; ++i) {
      const int s = i % STAGES;
      const unsigned phase = ((i / STAGES) - 1) & 1;
      const i64 n0 = (first_tile + i) * TN;
      const int keys = static_cast<int>(w.lk - n0 < TN ? w.lk - n0 : TN);
      if (i >= STAGES) bar_wait(&empty_k[s], phase);
      copy_tile<TN>(sk + s * KV_ELEMS, keys, [&](int r) { return k_at + r * k_stride; }, tid, 128);
      if constexpr (kAsyncProducer) cp_async_arrive(&full_k[s]);
      commit();
      if (i >= STAGES) bar_wait(&empty_v[s], phase);
      copy_tile<TN>(sv + s * KV_ELEMS, keys, [&](int r) { return v_at + r * v_stride; }, tid, 128);
      if constexpr (kAsyncProducer) cp_async_arrive(&full_v[s]);
      commit();
      k_at += TN * k_stride;
      v_at += TN * v_stride;
      if constexpr (kAsyncProducer) continue;
      cp_async_wait<1>();
      fence_async_shared();  // cp.async wrote through the generic proxy; wgmma reads through the async one
      bar_arrive(&full_k[s]);
      cp_async_wait<0>();
      fence_async_shared();
      bar_arrive(&full_v[s]);
    }
    if constexpr (kAsyncProducer) cp_async_wait<0>();  // no thread leaves with copies in flight
#endif
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
  const int c = wg - 1;               // this consumer's 64 rows of the tile
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  // Q's rows of this consumer, one warpgroup copying them
  {
    const auto q_row = [&](int r) {
      const int sr = w.row0 + r;
      return q + (w.q0 + sr / G) * q_stride + (static_cast<i64>(w.kv_head) * G + sr % G) * D;
    };
    const int valid = w.rows - 64 * c;
    for (int i = tid; i < 64 * (D / 8); i += 128) {
      const int r = i / (D / 8), ch = i % (D / 8);
      const bool ok = r < valid;
      copy16(sq + swizzled<TM>(64 * c + r, ch), (ok ? q_row(64 * c + r) : q_row(0)) + ch * 8, ok);
    }
    commit();
    wait_all();
    fence_async_shared();
    warpgroup_sync(1 + c);
  }
  const i64 shift = w.lk - w.lq;
  Softmax sm;
  for (int h = 0; h < 2; ++h) sm.at[h] = static_cast<int>((w.row0 + 64 * c + 16 * warp + g + 8 * h) / G + shift);
  sm.scale_log2 = scale * kLog2e;
  float acc[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc[i] = 0.0f;
  const T* q_rows = sq + 64 * c * 64;  // this consumer's rows in slab 0 (slab s: + s * TM * 64)

  if (tiles > 0) {
    // the first consumer takes the first turn
    if (kPingPong && c == 0) asm volatile("bar.arrive %0, 256;\n" ::"r"(SCHED_BARRIER) : "memory");
    float sc[TN / 2];
    unsigned p[TN / 16][4];
    wait_tile(&full_k[0], 0);
    turn_wait(c);
    wgmma_fence();
    issue_qk(sc, q_rows, sk);
    wgmma_commit();
    if (!(c == CONSUMERS - 1 && tiles == 1)) turn_pass(c);
    wgmma_wait<0>();
    keep_registers(sc);
    bar_arrive(&empty_k[0]);
    sm.step(sc, w, first_tile * TN, t);
    pack_p(p, sc);
    // each step: tile i's Q K^T and tile i - 1's P V issued together, tile i's softmax under P V
    for (int i = 1; i < tiles; ++i) {
      const int s = i % STAGES, sp = (i - 1) % STAGES;
      wait_tile(&full_k[s], (i / STAGES) & 1);
      wait_tile(&full_v[sp], ((i - 1) / STAGES) & 1);
      turn_wait(c);
      wgmma_fence();
      issue_qk(sc, q_rows, sk + s * KV_ELEMS);
      wgmma_commit();
      if constexpr (kRescaleEarly) {  // tile i - 1's correction, before its P V is added
        sm.rescale(acc);
        wgmma_fence();
      }
      issue_pv(acc, p, sv + sp * KV_ELEMS);
      wgmma_commit();
      if (!(c == CONSUMERS - 1 && i == tiles - 1)) turn_pass(c);  // the last consumer's last pass would have no taker
      wgmma_wait<1>();
      keep_registers(sc);
      bar_arrive(&empty_k[s]);
      sm.step(sc, w, (first_tile + i) * TN, t);
      wgmma_wait<0>();
      keep_registers(acc);
      keep_registers(sc);  // P is packed after the wait, never hoisted above it
      bar_arrive(&empty_v[sp]);
      if constexpr (!kRescaleEarly) sm.rescale(acc);
      pack_p(p, sc);
    }
    const int sl = (tiles - 1) % STAGES;
    wait_tile(&full_v[sl], ((tiles - 1) / STAGES) & 1);
    if constexpr (kRescaleEarly) sm.rescale(acc);
    wgmma_fence();
    issue_pv(acc, p, sv + sl * KV_ELEMS);
    wgmma_commit();
    wgmma_wait<0>();
    keep_registers(acc);
    bar_arrive(&empty_v[sl]);
  }

  // O = acc / sum; lse = ln of the sum. kStageO (and o 16-byte aligned): O staged through this
  // consumer's rows of Q's tile (its last Q K^T is done; the same swizzle keeps the writes free of
  // bank conflicts), then 16-byte stores of whole rows; else straight from the registers, a
  // thread's pairs of columns.
  const i64 heads = kv_heads * G;
  const bool staged = kStageO && (reinterpret_cast<u64>(o) & 15) == 0;
  const bool pairs = (reinterpret_cast<u64>(o) & 3) == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = sm.row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int r = 64 * c + 16 * warp + g + 8 * h;
    if (staged) {
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<unsigned*>(sq + swizzled<TM>(r, j) + 2 * t) = pack2(acc[4 * j + 2 * h] * inv, acc[4 * j + 2 * h + 1] * inv);
    }
    if (r >= w.rows) continue;
    const int sr = w.row0 + r;
    const i64 head = static_cast<i64>(w.kv_head) * G + sr % G;
    if (staged) {
      if (lse && t == 0) lse[head * total_q + w.q0 + sr / G] = lse_of(sm.row_max[h], sum);
      continue;
    }
    T* orow = o + ((w.q0 + sr / G) * heads + head) * D;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const float x0 = acc[4 * j + 2 * h] * inv, x1 = acc[4 * j + 2 * h + 1] * inv;
      if (pairs) {
        *reinterpret_cast<unsigned*>(orow + 8 * j + 2 * t) = pack2(x0, x1);
      } else {
        orow[8 * j + 2 * t] = jitk::from_float<T>(x0);
        orow[8 * j + 2 * t + 1] = jitk::from_float<T>(x1);
      }
    }
    if (lse && t == 0) lse[head * total_q + w.q0 + sr / G] = lse_of(sm.row_max[h], sum);
  }
  if (staged) {
    warpgroup_sync(1 + c);
    const int valid = w.rows - 64 * c;  // this consumer's real rows
    for (int i = tid; i < 64 * (D / 8); i += 128) {
      const int r = i / (D / 8), ch = i % (D / 8);
      if (r >= valid) break;
      const int sr = w.row0 + 64 * c + r;
      T* to = o + ((w.q0 + sr / G) * heads + static_cast<i64>(w.kv_head) * G + sr % G) * D + ch * 8;
      jitk::store<8>(to, jitk::load<8>(sq + swizzled<TM>(64 * c + r, ch)));
    }
  }
  (void)batch, (void)items;
}

#elif !(defined(__HIPCC_RTC__) || defined(__HIPCC__))


// Warps and the 16-row slices each takes: 4 warps from 64 rows on, a warp sharing each K and V
// fragment it reads between its slices (shared memory's bandwidth, not the tensor cores, bounds a
// warp of one slice).
constexpr int WARPS = TM < 64 ? TM / 16 : 4;
constexpr int WM = TM / 16 / WARPS;
static_assert(WARPS * 32 == JITK_BLOCK && WARPS * WM * 16 == TM, "the plan's threads are the text's warps");
constexpr int LD = D + 8;    // a shared-memory row, in elements: 16 bytes of padding
constexpr int CHUNKS = D / 8;  // 16-byte chunks a row
// Q's fragments held in registers for the whole walk where they fit (one slice, heads up to 128),
// else read from shared memory at each step.
constexpr bool kQInRegisters = WM == 1 && D <= 128;
static_assert(D % 16 == 0 && TM % 16 == 0 && TN % 16 == 0, "tiles of whole mma shapes");

// Four 8x8 matrices from shared memory (a 32-bit shared address: offsets from one base fold into
// the instruction, where 64-bit generic pointers would each take registers).
__device__ inline void ldmatrix_x4(unsigned (&r)[4], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}
__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}

// c += a b for one m16n8k16 tile: a 4 registers (16 x 16), b 2 (16 x 8), c 4 floats (16 x 8).
__device__ inline void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if JITK_DTYPE_BF16
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
#endif
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Loads `count` rows of a head (D elements each) into shared memory rows LD apart; rows past
// `valid_rows` are zeros. `row_at(r)` is row r's address. 16-byte copies where the rows allow,
// else element by element.
template <int ROWS, class RowAt> __device__ inline void load_rows(T* to, int valid_rows, bool aligned, RowAt row_at) {
  if (aligned) {
    for (int c = threadIdx.x; c < ROWS * CHUNKS; c += JITK_BLOCK) {
      const int r = c / CHUNKS, part = c - r * CHUNKS;
      const bool valid = r < valid_rows;
      copy16(to + r * LD + part * 8, valid ? row_at(r) + part * 8 : row_at(0), valid);
    }
  } else {
    for (int e = threadIdx.x; e < ROWS * D; e += JITK_BLOCK) {
      const int r = e / D, i = e - r * D;
      to[r * LD + i] = r < valid_rows ? row_at(r)[i] : jitk::from_float<T>(0.0f);
    }
  }
}

// A K or V tile of TN keys into shared memory: `rows` is the tile's first key of the kv head,
// keys `stride` elements apart; keys past `valid_rows` are zeros. Rows 16-byte aligned: a thread
// copies the same 16-byte chunk of keys tid / CHUNKS + i * (JITK_BLOCK / CHUNKS) (one address,
// advanced by a stride, instead of a row's address worked out a chunk at a time).
__device__ inline void load_kv(T* to, const T* rows, i64 stride, int valid_rows, bool aligned) {
  constexpr int kStep = JITK_BLOCK / CHUNKS;  // keys a pass of the block's threads covers
  if constexpr (JITK_BLOCK % CHUNKS == 0 && TN % kStep == 0) {
    if (aligned) {
      const int r0 = threadIdx.x / CHUNKS, part = threadIdx.x % CHUNKS;
      const T* from = rows + r0 * stride + part * 8;
      T* dst = to + r0 * LD + part * 8;
      #pragma unroll
      for (int i = 0; i < TN / kStep; ++i) {
        const bool valid = r0 + i * kStep < valid_rows;
        copy16(dst + i * kStep * LD, valid ? from + i * kStep * stride : rows, valid);
      }
      return;
    }
  }
  load_rows<TN>(to, valid_rows, aligned, [=](int r) { return rows + r * stride; });
}

JITK_GPU_KERNEL_MIN_BLOCKS(2)(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
                              float* __restrict__ lse, const int* __restrict__ cu_q, const int* __restrict__ cu_k, i64 batch,
                              i64 kv_heads, i64 total_q, i64 total_k, i64 q_stride, i64 k_stride, i64 v_stride, float scale,
                              i64 rows, i64 items) {
  extern __shared__ __align__(16) unsigned char shared[];
  T* sq = reinterpret_cast<T*>(shared);
  T* sk = sq + TM * LD;
  T* sv = sk + TN * LD;
  const Work w = find_work(cu_q, cu_k, batch, kv_heads, total_q, total_k, rows);
  if (!w.valid || w.rows == 0) return;
  if (w.overflow) return fill_nan(w, o, lse, kv_heads, total_q);
  const i64 heads = kv_heads * G;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;  // the fragments' row in 8 and column pair
  // this thread's rows are row_base + 16 m + 8 h of the sequence's lq * G (g and g + 8 of each of its
  // warp's WM slices of 16); row r sits at key position r / G + lk - lq, worked out where a tile is
  // masked rather than held in registers through the walk
  const int row_base = w.row0 + warp * WM * 16 + g, shift = static_cast<int>(w.lk - w.lq), lk = static_cast<int>(w.lk);

  // row r of the tile: token (row0 + r) / G, head kv_head * G + (row0 + r) % G
  const auto q_row = [&](int r) {
    const int sr = w.row0 + r;
    return q + (w.q0 + sr / G) * q_stride + (static_cast<i64>(w.kv_head) * G + sr % G) * D;
  };
  const bool aligned = jitk::aligned16(q) && jitk::aligned16(k) && jitk::aligned16(v) && q_stride % 8 == 0 &&
                       k_stride % 8 == 0 && v_stride % 8 == 0;
  // the sequence's first key of this kv head in K and V
  const T* k_head = k + w.k0 * k_stride + static_cast<i64>(w.kv_head) * D;
  const T* v_head = v + w.k0 * v_stride + static_cast<i64>(w.kv_head) * D;

  // the walk: tiles of TN keys from first_key while they start before key_end
  const i64 first_key = w.key_begin / TN * TN, key_end = w.key_end;
  float acc[WM][D / 8][4];
  float row_max[WM][2], row_sum[WM][2];
  #pragma unroll
  for (int m = 0; m < WM; ++m) {
    #pragma unroll
    for (int i = 0; i < D / 8; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j) acc[m][i][j] = 0.0f;
    #pragma unroll
    for (int h = 0; h < 2; ++h) row_max[m][h] = jitk::neg_inf(), row_sum[m][h] = 0.0f;
  }
  const float scale_log2 = scale * kLog2e;

  load_rows<TM>(sq, w.rows, aligned, q_row);
  if (first_key < key_end) load_kv(sk, k_head + first_key * k_stride, k_stride, static_cast<int>(w.lk - first_key < TN ? w.lk - first_key : TN), aligned);
  commit();

  unsigned qf[kQInRegisters ? D / 16 : 1][4];
  // ldmatrix addresses: A fragments (Q) and B fragments of K (non-transposed) and V (transposed)
  const int a_row = lane % 16, a_col = (lane / 16) * 8;
  const int bk_row = (lane % 8) + (lane / 16) * 8, bk_col = ((lane / 8) % 2) * 8;
  const int bv_row = (lane % 8) + ((lane / 8) % 2) * 8, bv_col = (lane / 16) * 8;
  // byte addresses in shared memory of this lane's first fragment row in Q, K and V
  constexpr unsigned kRow = LD * sizeof(T);
  const unsigned q_frag = shared_address(sq + (warp * WM * 16 + a_row) * LD + a_col);
  const unsigned k_frag = shared_address(sk + bk_row * LD + bk_col);
  const unsigned v_frag = shared_address(sv + bv_row * LD + bv_col);

  for (i64 n0 = first_key; n0 < key_end; n0 += TN) {
    const int keys = static_cast<int>(w.lk - n0 < TN ? w.lk - n0 : TN);
    wait_all();
    __syncthreads();  // K's tile is in; every warp is done with V's previous one
    if (kQInRegisters && n0 == first_key)
      #pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qf[kQInRegisters ? kk : 0], q_frag + kk * 32);
    load_kv(sv, v_head + n0 * v_stride, v_stride, keys, aligned);
    commit();

    // S = Q K^T: WM slices of 16 rows by TN keys a warp; each K fragment serves every slice
    float s[WM][TN / 8][4];
    #pragma unroll
    for (int m = 0; m < WM; ++m)
      #pragma unroll
      for (int i = 0; i < TN / 8; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) s[m][i][j] = 0.0f;
    #pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned a[WM][4];
      #pragma unroll
      for (int m = 0; m < WM; ++m) {
        if constexpr (kQInRegisters) {
          #pragma unroll
          for (int j = 0; j < 4; ++j) a[m][j] = qf[kk][j];
        } else {
          ldmatrix_x4(a[m], q_frag + m * 16 * kRow + kk * 32);
        }
      }
      #pragma unroll
      for (int nn = 0; nn < TN / 16; ++nn) {
        unsigned b[4];
        ldmatrix_x4(b, k_frag + nn * 16 * kRow + kk * 32);
        #pragma unroll
        for (int m = 0; m < WM; ++m) {
          mma(s[m][2 * nn], a[m], b[0], b[1]);
          mma(s[m][2 * nn + 1], a[m], b[2], b[3]);
        }
      }
    }

    // the mask, where some row of the tile may not see some key of it
    if (needs_mask(w, n0)) {
      #pragma unroll
      for (int m = 0; m < WM; ++m) {
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int at = (row_base + 16 * m + 8 * h) / G + shift;
          #pragma unroll
          for (int i = 0; i < TN / 8; ++i) {
            #pragma unroll
            for (int e = 0; e < 2; ++e)
              if (!sees(at, static_cast<int>(n0) + i * 8 + 2 * t + e, lk)) s[m][i][2 * h + e] = jitk::neg_inf();
          }
        }
      }
    }

    // online softmax: each row's running max and sum (a quad of lanes shares a row)
    #pragma unroll
    for (int m = 0; m < WM; ++m)
      #pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = row_max[m][h];
        #pragma unroll
        for (int i = 0; i < TN / 8; ++i) mx = fmaxf(mx, fmaxf(s[m][i][2 * h], s[m][i][2 * h + 1]) * scale_log2);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // a row that has seen no key yet keeps exp2(-inf - 0) = 0 for every score
        const float base = mx == jitk::neg_inf() ? 0.0f : mx;
        const float correction = exp2_approx(row_max[m][h] - base);
        row_max[m][h] = mx;
        float sum = 0.0f;
        #pragma unroll
        for (int i = 0; i < TN / 8; ++i)
          #pragma unroll
          for (int j = 2 * h; j < 2 * h + 2; ++j) {
            s[m][i][j] = exp2_approx(fmaf(s[m][i][j], scale_log2, -base));
            sum += s[m][i][j];
          }
        row_sum[m][h] = row_sum[m][h] * correction + sum;
        #pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          acc[m][i][2 * h] *= correction;
          acc[m][i][2 * h + 1] *= correction;
        }
      }

    // P as 16-bit pairs, the A fragments of 16 keys at a time: S's registers go before P V
    unsigned p[WM][TN / 16][4];
    #pragma unroll
    for (int m = 0; m < WM; ++m) {
      #pragma unroll
      for (int kk = 0; kk < TN / 16; ++kk) {
        p[m][kk][0] = pack2(s[m][2 * kk][0], s[m][2 * kk][1]);
        p[m][kk][1] = pack2(s[m][2 * kk][2], s[m][2 * kk][3]);
        p[m][kk][2] = pack2(s[m][2 * kk + 1][0], s[m][2 * kk + 1][1]);
        p[m][kk][3] = pack2(s[m][2 * kk + 1][2], s[m][2 * kk + 1][3]);
      }
    }

    wait_all();
    __syncthreads();  // V's tile is in; every warp is done with K's
    if (n0 + TN < key_end) {
      const i64 next = n0 + TN;
      load_kv(sk, k_head + next * k_stride, k_stride, static_cast<int>(w.lk - next < TN ? w.lk - next : TN), aligned);
    }
    commit();

    // O += P V: each V fragment serves every slice
    #pragma unroll
    for (int kk = 0; kk < TN / 16; ++kk) {
      #pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        unsigned b[4];
        ldmatrix_x4_trans(b, v_frag + kk * 16 * kRow + dn * 32);
        #pragma unroll
        for (int m = 0; m < WM; ++m) {
          mma(acc[m][2 * dn], p[m][kk], b[0], b[1]);
          mma(acc[m][2 * dn + 1], p[m][kk], b[2], b[3]);
        }
      }
    }
  }

  // O = acc / sum, staged through shared memory (Q's tile) for 16-byte stores; lse = ln of the sum
  wait_all();
  __syncthreads();
  #pragma unroll
  for (int m = 0; m < WM; ++m)
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = row_sum[m][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int r = (warp * WM + m) * 16 + g + 8 * h;
      #pragma unroll
      for (int i = 0; i < D / 8; ++i)
        *reinterpret_cast<unsigned*>(sq + r * LD + i * 8 + 2 * t) = pack2(acc[m][i][2 * h] * inv, acc[m][i][2 * h + 1] * inv);
      if (lse && t == 0 && r < w.rows) {
        const int sr = w.row0 + r;
        const float value = lse_of(row_max[m][h], sum);
        lse[(static_cast<i64>(w.kv_head) * G + sr % G) * total_q + w.q0 + sr / G] = value;
      }
    }
  __syncthreads();
  const bool o_aligned = jitk::aligned16(o);
  for (int c = threadIdx.x; c < w.rows * CHUNKS; c += JITK_BLOCK) {
    const int r = c / CHUNKS, part = c - r * CHUNKS;
    const int sr = w.row0 + r;
    T* to = o + ((w.q0 + sr / G) * heads + static_cast<i64>(w.kv_head) * G + sr % G) * D + part * 8;
    const T* from = sq + r * LD + part * 8;
    if (o_aligned) {
      jitk::store<8>(to, jitk::load<8>(from));
    } else {
      #pragma unroll
      for (int i = 0; i < 8; ++i) to[i] = from[i];
    }
  }
  (void)batch, (void)items;
}

#else  // AMD: a thread a query row, K and V read from global memory

JITK_GPU_KERNEL(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
                float* __restrict__ lse, const int* __restrict__ cu_q, const int* __restrict__ cu_k, i64 batch, i64 kv_heads,
                i64 total_q, i64 total_k, i64 q_stride, i64 k_stride, i64 v_stride, float scale, i64 rows, i64 items) {
  const Work w = find_work(cu_q, cu_k, batch, kv_heads, total_q, total_k, rows);
  if (!w.valid) return;
  if (w.overflow) return fill_nan(w, o, lse, kv_heads, total_q);
  const i64 heads = kv_heads * G, shift = w.lk - w.lq;
  for (int r = threadIdx.x; r < w.rows; r += JITK_BLOCK) {
    const int sr = w.row0 + r;
    const i64 token = sr / G, head = static_cast<i64>(w.kv_head) * G + sr % G;
    const T* qr = q + (w.q0 + token) * q_stride + head * D;
    float acc[D];
    for (int i = 0; i < D; ++i) acc[i] = 0.0f;
    float m = jitk::neg_inf(), sum = 0.0f;
    for (i64 key = w.key_begin; key < w.key_end; ++key) {
      if (!sees(static_cast<int>(token + shift), static_cast<int>(key), static_cast<int>(w.lk))) continue;
      const T* kr = k + (w.k0 + key) * k_stride + static_cast<i64>(w.kv_head) * D;
      const T* vr = v + (w.k0 + key) * v_stride + static_cast<i64>(w.kv_head) * D;
      float dot = 0.0f;
      for (int i = 0; i < D; ++i) dot += jitk::to_float(qr[i]) * jitk::to_float(kr[i]);
      const float s = dot * scale, next = fmaxf(m, s);
      const float correction = __expf(m - next), p = __expf(s - next);
      m = next;
      sum = sum * correction + p;
      for (int i = 0; i < D; ++i) acc[i] = acc[i] * correction + p * jitk::to_float(vr[i]);
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    T* orow = o + ((w.q0 + token) * heads + head) * D;
    for (int i = 0; i < D; ++i) orow[i] = jitk::from_float<T>(acc[i] * inv);
    if (lse) lse[head * total_q + w.q0 + token] = sum > 0.0f ? m + __logf(sum) : jitk::neg_inf();
  }
  (void)batch, (void)items;
}

#endif

