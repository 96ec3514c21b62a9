// attention_decode on NVIDIA (and, through hipRTC, AMD) GPUs: a block a work item (sequence, kv
// head, row chunk, split). Its query rows (up to RC of the group's heads x new tokens) live in
// registers; a key's row of head_dim elements is spread over KL lanes, one 16-byte pack each, so
// a warp takes 32 / KL keys at once and each thread U of them a step. A thread's K and V packs go
// through its own slots of shared memory (cp.async), the next step's in flight during a step's
// math. The arithmetic, not the loads, bounds it on the H100 (bf16, d128, group 4: more steps in
// flight did not help, fewer instructions a key did), hence a key's dot products reduce-scattered
// over its lanes and a row's sums rescaled only when its max grows. Each thread keeps an online
// softmax (max, weight, sums of its packs) per row; the warp's key groups merge through
// shuffles, the warps through shared memory. Without a
// workspace the block writes o (and lse); with one it writes its partial there and the last block
// of its (sequence, kv head, chunk) to finish merges the splits (an atomic count, reset after).
// A page outside [0, num_pages) and keys past max_pages * P are masked, never read. q's tokens are
// q_stride elements apart (a whole number of 16-byte packs: the host checks it), o is packed.
//
// f16 and bf16 on CUDA (head_dim a multiple of 16, two stages of 8 keys a warp in 40 KB: up to 4
// warps at d128) take the tensor cores instead (mma.sync, FlashAttention-2's order; on the H100, bf16,
// d128, group 4, 4 warps: 0.935 of copy bandwidth at 64 x 4096, 0.914 at 8 x 32768 in 8 splits,
// against 0.858 / 0.843 for the CUDA-core text in the same run; 0.951 / 0.930 with L2::128B, below): each warp walks its own tiles of 8
// keys, staged through its own shared memory (cp.async, a step ahead); the chunk's rows (at most 8,
// the A operand's rows 8-15 zeros; in shared memory) times the tile's K (ldmatrix) give the scores in the
// accumulators, where each lane holds one row's scores of two keys; their weights, rounded to T,
// are at once the A operand of P V (ldmatrix.trans of the tile's V), whose accumulators hold the
// lane's row's sums of a quarter of each 8-column tile of o.
#include "jitk_gpu.h"

// The tensor-core text: f16 or bf16 on CUDA, head_dim a multiple of 16, both stages of 8 keys a warp in 40 KB.
#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__)) && (defined(JITK_DTYPE_BF16) || defined(JITK_DTYPE_F16)) && \
    JITK_HEAD_DIM % 16 == 0 && 2 * 2 * 8 * (JITK_HEAD_DIM + 8) * 2 * (JITK_BLOCK / 32) <= 40 * 1024
#define JITK_DECODE_MMA 1
#else
#define JITK_DECODE_MMA 0
#endif

constexpr i64 D = JITK_HEAD_DIM;
constexpr i64 P = JITK_PAGE_SIZE;
constexpr int G = JITK_GROUP;
constexpr int QL = JITK_Q_LEN;
constexpr int R = G * QL;          // query rows of a (sequence, kv head)
constexpr int RC = R < 8 ? R : 8;  // rows a block takes: AttentionDecode::rows_per_item
constexpr int CHUNKS = (R + RC - 1) / RC;
constexpr int W = jitk::vector_width<T>();  // elements a 16-byte pack
constexpr int PACKS = static_cast<int>(D / W);
constexpr int pow2_at_least(int n) { return n <= 1 ? 1 : 2 * pow2_at_least((n + 1) / 2); }
constexpr int KL = PACKS >= 32 ? 32 : pow2_at_least(PACKS);  // lanes a key's row
constexpr int PP = (PACKS + KL - 1) / KL;                     // packs a lane
constexpr int KPW = 32 / KL;                                  // keys a warp at once
constexpr int NW = JITK_BLOCK / 32;
[[maybe_unused]] constexpr int NS = NW * KPW;                  // keys the block takes at once
// Keys a thread a step (the math of one step overlaps the loads of the next ones): 4 where a thread
// keeps at most 32 of each row array, else 2, fewer where S = 2 steps of them would not fit kStageBytes.
constexpr int kKeysWanted = RC * PP * W <= 32 ? 4 : 2;
constexpr int kWantStages = 2;                // steps staged: S - 1 of them in flight during the math
constexpr int kStageBytes = 40 * 1024;        // shared memory for them (4 blocks an SM: 160 KB)
constexpr int step_bytes(int u) { return u * PP * 2 * JITK_BLOCK * 16; }
constexpr int fit_keys(int u) { return u <= 1 || 2 * step_bytes(u) <= kStageBytes ? u : fit_keys(u / 2); }
constexpr int U = fit_keys(kKeysWanted);
constexpr int S = kWantStages * step_bytes(U) <= kStageBytes ? kWantStages : (kStageBytes / step_bytes(U) > 1 ? kStageBytes / step_bytes(U) : 1);
// Threads an SM should hold: 512 (128 registers a thread) where a thread keeps at most 32 of each
// row array, else 256. On the H100 (bf16, d128, group 4) 4 blocks of 128 instead of the 3 that 136
// registers gave: 0.725 -> 0.811 of copy bandwidth at 64 x 4096 in 4 splits, 0.824 unsplit (28 bytes spilled);
// 8 keys a thread a step instead of 4 (210 registers) read 0.58. Staged through shared memory with
// the reduce-scatter and lazy rescaling: 0.864 at 64 x 4096, 0.850 at 8 x 32768 in 8 splits (0.829
// and 0.818 before); staging alone 0.820 / 0.807; 2 keys a step, 4 or 5 stages: 0.77 / 0.76. One
// ex2 a weight and the select-free reduce-scatter then: 0.92 at 8 warps on both shapes.
// The tensor-core plan keeps head_dim / 4 sums a thread (q is read back from shared memory: with
// its fragments in registers, 142 at bf16, d128, 3 blocks an SM: 0.814 / 0.797): 512 threads an SM
// up to head_dim 128 (112 registers).
constexpr int kWantThreads = JITK_DECODE_MMA ? (D <= 128 ? 512 : 256) : (RC * PP * W <= 32 ? 512 : 256);
constexpr int kMinBlocks = kWantThreads / JITK_BLOCK > 0 ? kWantThreads / JITK_BLOCK : 1;
[[maybe_unused]] constexpr bool kLazy = true;  // a row's sums rescaled only when its max grows
constexpr int log2_of(int n) { return n <= 1 ? 0 : 1 + log2_of(n / 2); }
[[maybe_unused]] constexpr bool kScatter = RC >= 2 && (RC & (RC - 1)) == 0 && RC <= KL;  // the dot products reduce-scattered
[[maybe_unused]] constexpr int kLogRC = log2_of(RC);
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
static_assert(D % W == 0, "the plan takes head_dim in 16-byte packs");

// The tensor-core plan: a warp's tile of keys (the n of S = Q K^T, the k of P V), a staged key row
// (head_dim elements and one 16-byte pack of padding: ldmatrix's 8 rows fall in distinct banks),
// the stages each warp keeps (the next tile's loads in flight during a tile's math).
constexpr int kMmaKeys = 8;
constexpr int kMmaRow = PACKS + 1;  // 16-byte packs a staged key row
constexpr int kMmaStages = 2;
constexpr int kMmaWarpPacks = kMmaStages * 2 * kMmaKeys * kMmaRow;  // a warp's staging, K and V
constexpr int kMmaBytes = JITK_DECODE_MMA ? NW * kMmaWarpPacks * 16 : 0;

typedef jitk::Pack<T, W> Row;

// Staging: a slot is one 16-byte pack of one thread, [stage][u][p][K or V][thread] (a warp's
// packs side by side: no bank conflicts).
static_assert(S * U <= 32, "okbits holds a bit a key of each stage");
constexpr int kAccBytes = NW * RC * static_cast<int>(D) * 4;
constexpr int kStagedBytes = JITK_DECODE_MMA ? kMmaBytes : S * step_bytes(U);
constexpr int kRawBytes = kStagedBytes > kAccBytes ? kStagedBytes : kAccBytes;
__device__ inline int slot(int stage, int u, int p, int kv) { return (((stage * U + u) * PP + p) * 2 + kv) * JITK_BLOCK + static_cast<int>(threadIdx.x); }

// 16 bytes from global into shared memory, zeros when !read (nothing is read then): cp.async.cg
// (L2 only; K and V are read once, or again from L2 by the blocks of other row chunks) and its
// groups on CUDA; a plain copy elsewhere. L2::128B asks L2 for the whole 128-byte line at the first
// 16 bytes: on the H100 (bf16, d128, group 4, 4 warps) 0.934 -> 0.951 of copy bandwidth at 64 x 4096,
// 0.912 -> 0.930 at 8 x 32768 in 8 splits (L2::256B the same); a probe reading the same bytes in the
// same pattern without the math reads 0.966 -> 0.988 with it, 0.97 with a third stage, 1.02 through
// registers (bench/results/2026-11-26-h100-decode-l2-hint.md).
__device__ inline void stage16(Row* dst, const T* src, bool read) {
#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__))
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(at), "l"(src), "r"(read ? 16 : 0) : "memory");
#else
  *dst = read ? jitk::load<W>(src) : Row{};
#endif
}
__device__ inline void stage_commit() {
#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__))
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N of this thread's groups are in flight.
template <int N> __device__ inline void wait_stages() {
#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__))
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

#if JITK_DECODE_MMA
#if defined(JITK_DTYPE_BF16)
#define JITK_MMA_T "bf16"
#else
#define JITK_MMA_T "f16"
#endif
// d += a b for one 16 x 8 tile of S over 16 of head_dim (m16n8k16): a holds the lane's row's two
// pairs (rows 8-15 are zeros), b the tile's K; only rows 0-7 of d are kept.
__device__ inline void mma_k16(float (&d)[2], const unsigned (&a)[2], unsigned b0, unsigned b1) {
  asm("{\n.reg .f32 x2, x3;\n"
      "mma.sync.aligned.m16n8k16.row.col.f32." JITK_MMA_T "." JITK_MMA_T ".f32 {%0,%1,x2,x3}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9,%10,%11};\n}\n"
      : "=f"(d[0]), "=f"(d[1])
      : "r"(a[0]), "r"(0u), "r"(a[1]), "r"(0u), "r"(b0), "r"(b1), "f"(d[0]), "f"(d[1]), "f"(0.0f), "f"(0.0f));
}
// d += p v for one 8-column tile of o over the 8 keys (m16n8k8): p the lane's row's two weights.
__device__ inline void mma_k8(float (&d)[2], unsigned p, unsigned b) {
  asm("{\n.reg .f32 x2, x3;\n"
      "mma.sync.aligned.m16n8k8.row.col.f32." JITK_MMA_T "." JITK_MMA_T ".f32 {%0,%1,x2,x3}, {%2,%3}, {%4}, {%5,%6,%7,%8};\n}\n"
      : "=f"(d[0]), "=f"(d[1])
      : "r"(p), "r"(0u), "r"(b), "f"(d[0]), "f"(d[1]), "f"(0.0f), "f"(0.0f));
}
// Four (two) 8 x 8 matrices of 16-bit elements from shared memory, lane i naming row i % 8 of
// matrix i / 8; .trans: each lane gets a column pair's elements instead of a row pair's.
__device__ inline void ldsm4(unsigned (&r)[4], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
}
__device__ inline void ldsm2(unsigned (&r)[2], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(at) : "memory");
}
__device__ inline void ldsm4_t(unsigned (&r)[4], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
}
__device__ inline void ldsm2_t(unsigned (&r)[2], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(at) : "memory");
}
// Two floats rounded to T, lo in the low half (the lower k index).
__device__ inline unsigned pack2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn." JITK_MMA_T "x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
#endif

// 2^x in one op (ex2.approx.ftz): x <= 0 here, -inf gives 0; a weight under 2^-126 flushes to 0.
__device__ inline float exp2_ftz(float x) {
#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__))
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// exp2 of a - b where both may be -inf (a weight of 0 then).
__device__ inline float weight(float a, float b) { return b == jitk::neg_inf() ? 0.0f : exp2f(a - b); }

// Row r of chunk `chunk` of a (sequence, kv head): new token row / G of head kvh * G + row % G.
__device__ inline i64 out_row(i64 seq, i64 kvh, i64 chunk, int r, i64 heads) {
  const int row = static_cast<int>(chunk) * RC + r;
  return (seq * QL + row / G) * heads + kvh * G + row % G;
}

// Where the same row of q starts: its token's row q_stride elements from the last (packed: heads x D).
__device__ inline i64 q_row(i64 seq, i64 kvh, i64 chunk, int r, i64 q_stride) {
  const int row = static_cast<int>(chunk) * RC + r;
  return (seq * QL + row / G) * q_stride + (kvh * G + row % G) * D;
}

// Element d of an output row from its sums a, max top (log2 units) and weight sum; a row that saw no key: 0, lse -inf.
__device__ inline void write_output(T* o, float* lse, i64 row, int d, float a, float top, float sum) {
  o[row * D + d] = jitk::from_float<T>(sum > 0.0f ? a / sum : 0.0f);
  if (lse && d == 0) lse[row] = sum > 0.0f ? (top + log2f(sum)) * kLn2 : jitk::neg_inf();
}

JITK_GPU_KERNEL_MIN_BLOCKS(kMinBlocks)(const T* __restrict__ q, const T* __restrict__ k_cache, const T* __restrict__ v_cache,
                const int* __restrict__ block_table, const int* __restrict__ context_lens, T* __restrict__ o,
                float* __restrict__ lse, char* __restrict__ workspace, float scale, i64 kv_heads, i64 num_pages,
                i64 max_pages, i64 splits, i64 pages_per_split, i64 batch, i64 q_stride, i64 n) {
  __shared__ __align__(16) unsigned char s_raw[kRawBytes];  // the staging slots, then the warps' sums
  const i64 item = blockIdx.x;
  if (item >= n) return;
  const i64 split = item % splits, pair = item / splits;  // pair: (sequence, kv head, chunk)
  const i64 chunk = pair % CHUNKS, kvh = pair / CHUNKS % kv_heads, seq = pair / CHUNKS / kv_heads;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kl = lane % KL, sg = warp * KPW + lane / KL;  // place in its key's row; its key group
  const i64 heads = kv_heads * G;
  const int rows = R - static_cast<int>(chunk) * RC < RC ? R - static_cast<int>(chunk) * RC : RC;

  const int context = context_lens[seq] > 0 ? context_lens[seq] : 0;
  const int keys = static_cast<i64>(context) < max_pages * P ? context : static_cast<int>(max_pages * P);
  const int begin = static_cast<int>(split * pages_per_split * P);
  // the last split runs to the end, whatever max_context the split was sized for
  int end = split == splits - 1 ? keys : static_cast<int>((split + 1) * pages_per_split * P);
  end = end < keys ? end : keys;
  const int seen = context - QL + (static_cast<int>(chunk) * RC + rows - 1) / G + 1;  // by the chunk's last row: the most
  end = end < seen ? end : seen;

  const int* table = block_table + seq * max_pages;
  __shared__ float s_m[NW][RC], s_l[NW][RC];  // the warps' maxima and weights a row
  float (*s_acc)[RC][D] = reinterpret_cast<float (*)[RC][D]>(s_raw);  // and sums (once the staging is done)
#if JITK_DECODE_MMA
  {
    constexpr int NT = static_cast<int>(D / 8);   // 8-column tiles of o
    constexpr int KS = static_cast<int>(D / 16);  // 16-element steps of a dot product
    constexpr int CH = kMmaKeys * PACKS;          // 16-byte packs of a tile's K (or V)
    constexpr int CPT = (CH + 31) / 32;           // of them a lane stages
    const int g = lane / 4, t4 = lane % 4;        // the lane's row; its keys 2 t4 and 2 t4 + 1 of a tile
    const float c = scale * kLog2e;               // a dot product to log2 units
    // The chunk's rows in shared memory (zeros past its rows), read back as A fragments (ldmatrix) a tile.
    __shared__ Row s_q[8 * kMmaRow];
    for (int e = threadIdx.x; e < 8 * PACKS; e += JITK_BLOCK) {
      const int r = e / PACKS, pk = e % PACKS;
      s_q[r * kMmaRow + pk] = r < rows ? jitk::load<W>(q + q_row(seq, kvh, chunk, r, q_stride) + pk * W) : Row{};
    }
    __syncthreads();
    int lim = g < rows ? context - QL + (static_cast<int>(chunk) * RC + g) / G + 1 : 0;  // keys the row sees
    lim = lim < end ? lim : end;
    float o[NT][2], m = jitk::neg_inf(), l = 0.0f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) o[nt][0] = o[nt][1] = 0.0f;

    // The warp's tiles: t-th at keys begin + (t NW + warp) 8; a page a lane of each 8 (key lane % 8),
    // read a tile ahead of its copies; with pages of 8 keys or more a tile lies in one page.
    Row* mine = reinterpret_cast<Row*>(s_raw) + warp * kMmaWarpPacks;
    const int tiles = end > begin ? (end - begin + kMmaKeys - 1) / kMmaKeys : 0;
    const int steps = tiles > warp ? (tiles - warp + NW - 1) / NW : 0;  // the same for the warp's lanes
    constexpr bool kOnePage = P % kMmaKeys == 0;
    auto page_of = [&](int t) {
      const int j = begin + (t * NW + warp) * kMmaKeys + (kOnePage ? 0 : lane % kMmaKeys);
      int page = -1;
      if (t < steps && j < end) {
        page = table[j / P];
        page = page >= 0 && page < num_pages ? page : -1;
      }
      return page;
    };
    int next = page_of(0);
    unsigned okbits = 0;  // bit 2 stage + i: key 2 t4 + i of the tile in that stage is read
    auto issue = [&](int t) {
      if (t < steps) {
        const int stage = t % kMmaStages, base = begin + (t * NW + warp) * kMmaKeys;
        Row* ks_ = mine + stage * 2 * kMmaKeys * kMmaRow;
        Row* vs_ = ks_ + kMmaKeys * kMmaRow;
#pragma unroll
        for (int i = 0; i < CPT; ++i) {
          const int e = i * 32 + lane, key = e < CH ? e / PACKS : 0, pk = e % PACKS;
          const int page = kOnePage ? (base + key < end ? next : -1) : __shfl_sync(0xffffffffu, next, key);
          if (e < CH) {
            const bool read = page >= 0;
            const i64 at = read ? ((static_cast<i64>(page) * P + (base + key) % P) * kv_heads + kvh) * D + pk * W : 0;
            stage16(ks_ + key * kMmaRow + pk, k_cache + at, read);
            stage16(vs_ + key * kMmaRow + pk, v_cache + at, read);
          }
        }
        const int p0 = kOnePage ? next : __shfl_sync(0xffffffffu, next, 2 * t4);
        const int p1 = kOnePage ? next : __shfl_sync(0xffffffffu, next, 2 * t4 + 1);
        okbits = (okbits & ~(3u << (2 * stage))) | (static_cast<unsigned>(p0 >= 0) | static_cast<unsigned>(p1 >= 0) << 1) << (2 * stage);
      }
      stage_commit();  // a group a tile, empty past the last
    };
#pragma unroll
    for (int t = 0; t < kMmaStages - 1; ++t) {
      issue(t);
      next = page_of(t + 1);
    }
    // ldmatrix's row of the lane: key lane % 8, pack lane / 8 of each 4 packs (32 columns)
    const unsigned row_at = static_cast<unsigned>(((lane % 8) * kMmaRow + lane / 8) * 16);
    const unsigned q_at = static_cast<unsigned>(__cvta_generic_to_shared(s_q)) + row_at;
    for (int t = 0; t < steps; ++t) {
      __syncwarp();  // every lane done reading the stage refilled next
      issue(t + kMmaStages - 1);
      next = page_of(t + kMmaStages);
      wait_stages<kMmaStages - 1>();  // this lane's copies of tile t landed
      __syncwarp();                   // and every lane's
      const int stage = t % kMmaStages, base = begin + (t * NW + warp) * kMmaKeys;
      const unsigned k_at = static_cast<unsigned>(__cvta_generic_to_shared(mine + stage * 2 * kMmaKeys * kMmaRow)) + row_at;
      const unsigned v_at = k_at + kMmaKeys * kMmaRow * 16;
      float sc[2] = {0.0f, 0.0f};  // the row's scores of keys 2 t4, 2 t4 + 1
#pragma unroll
      for (int j = 0; j < KS / 2; ++j) {
        unsigned b[4], a[4];
        ldsm4(a, q_at + j * 64);
        ldsm4(b, k_at + j * 64);
        mma_k16(sc, {a[0], a[1]}, b[0], b[1]);
        mma_k16(sc, {a[2], a[3]}, b[2], b[3]);
      }
      if constexpr (KS % 2 != 0) {
        unsigned b[2], a[2];
        ldsm2(a, q_at + (KS / 2) * 64);
        ldsm2(b, k_at + (KS / 2) * 64);
        mma_k16(sc, a, b[0], b[1]);
      }
      float x[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        x[i] = ((okbits >> (2 * stage + i)) & 1u) && base + 2 * t4 + i < lim ? sc[i] * c : jitk::neg_inf();
      float top = fmaxf(x[0], x[1]);
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
      if (top > m) {  // the row's max grew: its sums rescaled (only then); m -inf before: 0
        const float shrink = exp2_ftz(m - top);
        l *= shrink;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          o[nt][0] *= shrink;
          o[nt][1] *= shrink;
        }
        m = top;
      }
      const float base_m = m == jitk::neg_inf() ? 0.0f : m;  // no key yet: every x is -inf, each weight 0
      const float p0 = exp2_ftz(x[0] - base_m), p1 = exp2_ftz(x[1] - base_m);
      l += p0 + p1;
      const unsigned pa = pack2(p0, p1);
#pragma unroll
      for (int j = 0; j < NT / 4; ++j) {
        unsigned b[4];
        ldsm4_t(b, v_at + j * 64);
#pragma unroll
        for (int e = 0; e < 4; ++e) mma_k8(o[4 * j + e], pa, b[e]);
      }
      if constexpr (NT % 4 != 0) {
        unsigned b[2];
        ldsm2_t(b, v_at + (NT / 4) * 64);
        mma_k8(o[NT - 2], pa, b[0]);
        mma_k8(o[NT - 1], pa, b[1]);
      }
    }
    l += __shfl_xor_sync(0xffffffffu, l, 1);  // the row's weights over its quad's keys
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    // The warps into one, through shared memory (the staging's bytes, once every warp is done with them).
    wait_stages<0>();
    __syncthreads();
    if (g < RC) {
      if (t4 == 0) {
        s_m[warp][g] = m;
        s_l[warp][g] = l;
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        s_acc[warp][g][nt * 8 + 2 * t4] = o[nt][0];
        s_acc[warp][g][nt * 8 + 2 * t4 + 1] = o[nt][1];
      }
    }
  }
#else
  // The rows, scaled so that exp2 of a score is its softmax weight; limit: the keys a row sees.
  // With the reduce-scatter (below) a lane holds row r ^ mine in qr[r]: the row it ends with is then
  // the one its first slot holds, and each level keeps the first half of its slots.
  const int mine = kScatter ? (lane % KL) / (KL / RC) : 0;
  float qr[RC][PP][W];
  int limit[RC];
#pragma unroll
  for (int r = 0; r < RC; ++r) {
    const int row = static_cast<int>(chunk) * RC + r;
    limit[r] = r < rows ? context - QL + row / G + 1 : 0;
    const int held = r ^ mine;
#pragma unroll
    for (int p = 0; p < PP; ++p) {
      const int d0 = (p * KL + kl) * W;
      Row x{};
      if (held < rows && d0 < D) x = jitk::load<W>(q + q_row(seq, kvh, chunk, held, q_stride) + d0);
#pragma unroll
      for (int w = 0; w < W; ++w) qr[r][p][w] = held < rows && d0 < D ? jitk::to_float(x.v[w]) * scale * kLog2e : 0.0f;
    }
  }
  float m[RC], l[RC], acc[RC][PP][W];
#pragma unroll
  for (int r = 0; r < RC; ++r) {
    m[r] = jitk::neg_inf();
    l[r] = 0.0f;
#pragma unroll
    for (int p = 0; p < PP; ++p)
#pragma unroll
      for (int w = 0; w < W; ++w) acc[r][p][w] = 0.0f;
  }

  // Each thread's K and V packs go through its own slots of shared memory, S steps deep: the loads
  // of the S - 1 steps ahead are in flight while a step is computed, holding no registers. A slot
  // is written (cp.async) and read back by the same thread only, so no barrier is needed; a key
  // past the end, on a page outside the pool, or a lane past head_dim gets zeros (src size 0,
  // nothing read), its score masked by okbits.
  const int steps = end > begin ? (end - begin + NS * U - 1) / (NS * U) : 0;  // the same for every lane (shuffles below)
  Row* slots = reinterpret_cast<Row*>(s_raw);
  int pages[U];          // the pages of the next step to issue (-1: masked)
  unsigned okbits = 0;   // bit stage * U + u: key u of the step in that stage is read
  auto fetch_pages = [&](int t) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = begin + t * NS * U + u * NS + sg;
      int page = -1;
      if (t < steps && j < end) {
        page = table[j / P];
        page = page >= 0 && page < num_pages ? page : -1;
      }
      pages[u] = page;
    }
  };
  auto issue = [&](int t) {
    if (t < steps) {
      const int stage = t % S;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = begin + t * NS * U + u * NS + sg;
        const bool ok = pages[u] >= 0;
        const unsigned bit = 1u << (stage * U + u);
        okbits = ok ? okbits | bit : okbits & ~bit;
        const i64 at = ok ? ((static_cast<i64>(pages[u]) * P + j % P) * kv_heads + kvh) * D : 0;
#pragma unroll
        for (int p = 0; p < PP; ++p) {
          const int d0 = (p * KL + kl) * W;
          const bool read = ok && d0 < D;
          stage16(slots + slot(stage, u, p, 0), read ? k_cache + at + d0 : k_cache, read);
          stage16(slots + slot(stage, u, p, 1), read ? v_cache + at + d0 : v_cache, read);
        }
      }
    }
    stage_commit();  // a group a step, empty past the last: wait_stages counts the same for all
  };
#pragma unroll
  for (int t = 0; t < S - 1; ++t) {
    fetch_pages(t);
    issue(t);
  }
  fetch_pages(S - 1);
  for (int t = 0; t < steps; ++t) {
    issue(t + S - 1);
    fetch_pages(t + S);  // the table's reads for the step after, behind this step's math
    wait_stages<S - 1>();  // step t's group has landed
    const int stage = t % S, step = begin + t * NS * U;
    Row kp[U][PP], vp[U][PP];
    bool ok[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      ok[u] = (okbits >> (stage * U + u)) & 1u;
#pragma unroll
      for (int p = 0; p < PP; ++p) {
        kp[u][p] = slots[slot(stage, u, p, 0)];
        vp[u][p] = slots[slot(stage, u, p, 1)];
      }
    }
    float s[U][RC];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[PP][W];
#pragma unroll
      for (int p = 0; p < PP; ++p)
#pragma unroll
        for (int w = 0; w < W; ++w) kf[p][w] = jitk::to_float(kp[u][p].v[w]);
      float d[RC];  // this lane's share of each row's dot product
#pragma unroll
      for (int r = 0; r < RC; ++r) {
        d[r] = 0.0f;
#pragma unroll
        for (int p = 0; p < PP; ++p)
#pragma unroll
          for (int w = 0; w < W; ++w) d[r] += qr[r][p][w] * kf[p][w];
      }
      if constexpr (kScatter) {
        // Reduce-scatter over the key's lanes: at each of log2(RC) levels a lane keeps the first
        // half of its slots and adds its partner's second half (which holds the same rows: the
        // partner's order differs in that level's bit); then the one row left (mine) sums over the
        // remaining lanes, and each row comes back from a lane that holds it: RC - 1 + log2(KL /
        // RC) + RC shuffles, not RC log2(KL).
#pragma unroll
        for (int level = 0; level < kLogRC; ++level) {
          const int h = RC >> (level + 1), mask = KL >> (level + 1);
#pragma unroll
          for (int i = 0; i < h; ++i) d[i] += JITK_SHFL_XOR(d[i + h], mask);
        }
#pragma unroll
        for (int mask = KL / RC / 2; mask > 0; mask /= 2) d[0] += JITK_SHFL_XOR(d[0], mask);
#pragma unroll
        for (int r = 0; r < RC; ++r) {
          const float x = JITK_SHFL_XOR(d[0], (mine ^ r) * (KL / RC));
          s[u][r] = ok[u] && (QL == 1 || step + u * NS + sg < limit[r]) ? x : jitk::neg_inf();
        }
      } else {
#pragma unroll
        for (int r = 0; r < RC; ++r) {
#pragma unroll
          for (int mask = KL / 2; mask > 0; mask /= 2) d[r] += JITK_SHFL_XOR(d[r], mask);
          s[u][r] = ok[u] && (QL == 1 || step + u * NS + sg < limit[r]) ? d[r] : jitk::neg_inf();
        }
      }
    }
#pragma unroll
    for (int r = 0; r < RC; ++r) {
      float top = m[r];
#pragma unroll
      for (int u = 0; u < U; ++u) top = fmaxf(top, s[u][r]);
      if (top == jitk::neg_inf()) continue;  // no key of this step for this row (nor before)
      if (!kLazy || top > m[r]) {  // the row's max grew: its sums rescaled (lazily: only then)
        const float shrink = exp2_ftz(m[r] - top);  // top is finite; m -inf (no key yet): 0
        l[r] *= shrink;
#pragma unroll
        for (int p = 0; p < PP; ++p)
#pragma unroll
          for (int w = 0; w < W; ++w) acc[r][p][w] *= shrink;
        m[r] = top;
      }
      float w_u[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        w_u[u] = exp2_ftz(s[u][r] - top);
        l[r] += w_u[u];
      }
#pragma unroll
      for (int p = 0; p < PP; ++p)
#pragma unroll
        for (int w = 0; w < W; ++w) {
          float a = acc[r][p][w];
#pragma unroll
          for (int u = 0; u < U; ++u) a += w_u[u] * jitk::to_float(vp[u][p].v[w]);
          acc[r][p][w] = a;
        }
    }
  }

  // The warp's key groups (lanes KL apart) into one.
#pragma unroll
  for (int mask = KL; mask < 32; mask *= 2)
#pragma unroll
    for (int r = 0; r < RC; ++r) {
      const float m_other = JITK_SHFL_XOR(m[r], mask), l_other = JITK_SHFL_XOR(l[r], mask);
      const float top = fmaxf(m[r], m_other), mine = weight(m[r], top), theirs = weight(m_other, top);
      l[r] = l[r] * mine + l_other * theirs;
      m[r] = top;
#pragma unroll
      for (int p = 0; p < PP; ++p)
#pragma unroll
        for (int w = 0; w < W; ++w) acc[r][p][w] = acc[r][p][w] * mine + JITK_SHFL_XOR(acc[r][p][w], mask) * theirs;
    }

  // The warps into one, through shared memory (the staging slots' bytes, once every warp is done with them).
  wait_stages<0>();
  __syncthreads();
  if (lane < KL) {
#pragma unroll
    for (int r = 0; r < RC; ++r) {
      if (lane == 0) {
        s_m[warp][r] = m[r];
        s_l[warp][r] = l[r];
      }
#pragma unroll
      for (int p = 0; p < PP; ++p)
#pragma unroll
        for (int w = 0; w < W; ++w)
          if ((p * KL + kl) * W + w < D) s_acc[warp][r][(p * KL + kl) * W + w] = acc[r][p][w];
    }
  }
#endif
  __syncthreads();
  // workspace: the blocks' partials [item][RC][D + 2] (sums, then max and weight), then a counter
  // a (sequence, kv head, chunk): its blocks done so far
  float* partials = reinterpret_cast<float*>(workspace);
  for (int e = threadIdx.x; e < rows * D; e += JITK_BLOCK) {
    const int r = e / static_cast<int>(D), d = e % static_cast<int>(D);
    float top = jitk::neg_inf();
#pragma unroll
    for (int w = 0; w < NW; ++w) top = fmaxf(top, s_m[w][r]);
    float sum = 0.0f, a = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const float x = weight(s_m[w][r], top);
      sum += s_l[w][r] * x;
      a += s_acc[w][r][d] * x;
    }
    if (workspace) {
      float* part = partials + (item * RC + r) * (D + 2);
      part[d] = a;
      if (d == 0) {
        part[D] = top;
        part[D + 1] = sum;
      }
    } else {
      write_output(o, lse, out_row(seq, kvh, chunk, r, heads), d, a, top, sum);
    }
  }
  if (!workspace) return;

  // The last block of the pair to finish merges the splits' partials.
  unsigned* counters = reinterpret_cast<unsigned*>(partials + batch * kv_heads * CHUNKS * splits * RC * (D + 2));
  __shared__ bool s_last;
  __threadfence();  // this block's partials visible before its count
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(&counters[pair], 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  const volatile float* first = partials + pair * splits * RC * (D + 2);  // L2, not a stale L1 line
  const i64 stride = RC * (D + 2);  // from one split's partial of a row to the next's
  for (int e = threadIdx.x; e < rows * D; e += JITK_BLOCK) {
    const int r = e / static_cast<int>(D), d = e % static_cast<int>(D);
    const volatile float* row = first + r * (D + 2);
    float top = jitk::neg_inf();
    for (i64 s = 0; s < splits; ++s) top = fmaxf(top, row[s * stride + D]);
    float sum = 0.0f, a = 0.0f;
    for (i64 s = 0; s < splits; ++s) {
      const float x = weight(row[s * stride + D], top);
      sum += row[s * stride + D + 1] * x;
      a += row[s * stride + d] * x;
    }
    write_output(o, lse, out_row(seq, kvh, chunk, r, heads), d, a, top, sum);
  }
  if (threadIdx.x == 0) atomicExch(&counters[pair], 0u);  // ready for the next launch
}
