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
#include "jitk_gpu.h"

constexpr i64 D = JITK_HEAD_DIM;
constexpr i64 P = JITK_PAGE_SIZE;
constexpr int G = JITK_GROUP;
constexpr int QL = JITK_Q_LEN;
constexpr int R = G * QL;          // query rows of a (sequence, kv head)
constexpr int RC = R < 8 ? R : 8;  // rows a block takes: AttentionDecode::rows_per_item
constexpr int CHUNKS = (R + RC - 1) / RC;
constexpr int W = jitk::kVector<T>;  // elements a 16-byte pack
constexpr int PACKS = static_cast<int>(D / W);
constexpr int pow2_at_least(int n) { return n <= 1 ? 1 : 2 * pow2_at_least((n + 1) / 2); }
constexpr int KL = PACKS >= 32 ? 32 : pow2_at_least(PACKS);  // lanes a key's row
constexpr int PP = (PACKS + KL - 1) / KL;                     // packs a lane
constexpr int KPW = 32 / KL;                                  // keys a warp at once
constexpr int NW = JITK_BLOCK / 32;
constexpr int NS = NW * KPW;                  // keys the block takes at once
// Keys a thread a step (the math of one step overlaps the loads of the next ones): 4 where a thread
// keeps at most 32 of each row array, else 2, fewer where S = 2 steps of them would not fit kStageBytes.
constexpr int kKeysWanted = RC * PP * W <= 32 ? 4 : 2;
constexpr int kWantStages = 2;                // steps staged: S - 1 of them in flight during the math
constexpr int kStageBytes = 40 * 1024;        // shared memory for them (4 blocks an SM: 160 KB)
constexpr int step_bytes(int u) { return u * PP * 2 * JITK_BLOCK * 16; }
constexpr int fit_keys(int u) { return u <= 1 || 2 * step_bytes(u) <= kStageBytes ? u : fit_keys(u / 2); }
constexpr int U = kKeysWanted;
constexpr int S = kWantStages * step_bytes(U) <= kStageBytes ? kWantStages : (kStageBytes / step_bytes(U) > 1 ? kStageBytes / step_bytes(U) : 1);
// Threads an SM should hold: 512 (128 registers a thread) where a thread keeps at most 32 of each
// row array, else 256. On the H100 (bf16, d128, group 4) 4 blocks of 128 instead of the 3 that 136
// registers gave: 0.725 -> 0.811 of copy bandwidth at 64 x 4096 in 4 splits, 0.824 unsplit (28 bytes spilled);
// 8 keys a thread a step instead of 4 (210 registers) read 0.58. Staged through shared memory with
// the reduce-scatter and lazy rescaling: 0.864 at 64 x 4096, 0.850 at 8 x 32768 in 8 splits (0.829
// and 0.818 before); staging alone 0.820 / 0.807; 2 keys a step, 4 or 5 stages: 0.77 / 0.76.
constexpr int kMinBlocks = ((RC * PP * W <= 32 ? 512 : 256) / JITK_BLOCK) > 0 ? (RC * PP * W <= 32 ? 512 : 256) / JITK_BLOCK : 1;
constexpr bool kLazy = true;  // a row's sums rescaled only when its max grows
constexpr int log2_of(int n) { return n <= 1 ? 0 : 1 + log2_of(n / 2); }
constexpr bool kScatter = RC >= 2 && (RC & (RC - 1)) == 0 && RC <= KL;  // the dot products reduce-scattered
constexpr int kLogRC = log2_of(RC);
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
static_assert(D % W == 0, "the plan takes head_dim in 16-byte packs");

typedef jitk::Pack<T, W> Row;

// Staging: a slot is one 16-byte pack of one thread, [stage][u][p][K or V][thread] (a warp's
// packs side by side: no bank conflicts).
static_assert(S * U <= 32, "okbits holds a bit a key of each stage");
constexpr int kAccBytes = NW * RC * static_cast<int>(D) * 4;
constexpr int kRawBytes = kAccBytes;
__device__ inline int slot(int stage, int u, int p, int kv) { return (((stage * U + u) * PP + p) * 2 + kv) * JITK_BLOCK + static_cast<int>(threadIdx.x); }

// 16 bytes from global into shared memory, zeros when !read (nothing is read then): cp.async.cg
// (L2 only; K and V are read once, or again from L2 by the blocks of other row chunks) and its
// groups on CUDA; a plain copy elsewhere.
__device__ inline void stage16(Row* dst, const T* src, bool read) {
#if !(defined(__HIPCC_RTC__) || defined(__HIPCC__))
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(at), "l"(src), "r"(read ? 16 : 0) : "memory");
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

  // K and V loaded straight into registers, each thread U keys' packs at once.
  const int* table = block_table + seq * max_pages;
  for (int step = begin; step < end; step += NS * U) {  // the same trip count for every lane (shuffles below)
    Row kp[U][PP], vp[U][PP];
    bool ok[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = step + u * NS + sg;
      i64 at = 0;
      ok[u] = false;
      if (j < end) {
        const int page = table[j / P];
        ok[u] = page >= 0 && page < num_pages;
        at = ((static_cast<i64>(page) * P + j % P) * kv_heads + kvh) * D;
      }
#pragma unroll
      for (int p = 0; p < PP; ++p) {
        const int d0 = (p * KL + kl) * W;
        kp[u][p] = Row{};
        vp[u][p] = Row{};
        if (ok[u] && d0 < D) {
          // read once; only blocks of other row chunks read the same pages again (from L2)
          kp[u][p] = CHUNKS == 1 ? jitk::load_stream<W>(k_cache + at + d0) : jitk::load<W>(k_cache + at + d0);
          vp[u][p] = CHUNKS == 1 ? jitk::load_stream<W>(v_cache + at + d0) : jitk::load<W>(v_cache + at + d0);
        }
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
  __shared__ float s_m[NW][RC], s_l[NW][RC];
  float (*s_acc)[RC][D] = reinterpret_cast<float (*)[RC][D]>(s_raw);
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
