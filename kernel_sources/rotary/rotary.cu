// rotary_embedding, in place: each head of q [tokens, heads, D] and k [tokens, kv_heads, D] (token
// rows q_stride and k_stride elements apart: packed, or column slices of a wider QKV row) has its
// first R elements rotated pair by pair by the angle position * inv_freq[i], inv_freq[i] =
// 1 / theta^(2i/R) in float as torch computes it (or cos and sin read from a float table
// [max_position, R]: R/2 cosines, then R/2 sines); elements R.. of the head are left as they are.
// The grid covers the pairs, head row by head row (a token's q heads, then its k heads), W pairs a
// thread: neox moves one 16-byte pack from each half of the head, gptj two neighbouring packs.
#include "jitk_gpu.h"

enum : i64 { D = JITK_HEAD_DIM };
enum : int { R = JITK_ROTARY_DIM };
enum : int { HALF = R / 2 };  // pairs a head rotates
enum : int { W = jitk::vector_width<T>() };
static_assert(R % 2 == 0 && i64{R} <= i64{D}, "rotary_dim is even and at most head_dim (the descriptor checks it)");
// A thread's W pairs lie in one head, and its packs (and table chunks of 4 floats) are 16-byte
// aligned when the buffers are.
enum : bool { kPackable = int{HALF} % int{W} == 0 && i64{D} % i64{W} == 0 };  // (each enumerator its own type: cast)
#if JITK_SOURCE_THETA
enum : bool { kTheta = true };
#else
enum : bool { kTheta = false };  // the table's
#endif

// The head row a pair index falls in: its first element and its token.
struct HeadRow {
  T* x;
  i64 token;
};
struct Rows {  // where the head rows are: q's and k's first elements, heads, token strides
  T* q;
  T* k;
  i64 heads, kv_heads, q_stride, k_stride;
};
__device__ inline HeadRow head_row(i64 row, const Rows& x) {
  const i64 heads = x.heads, kv_heads = x.kv_heads;
  const i64 per_token = heads + kv_heads;
  // 32-bit division where it fits (every model's today): 64-bit division is a long subroutine.
  const i64 t = row <= 0xffffffffLL && per_token <= 0xffffffffLL
                    ? static_cast<i64>(static_cast<unsigned>(row) / static_cast<unsigned>(per_token))
                    : row / per_token;
  const i64 h = row - t * per_token;
  return {h < heads ? x.q + t * x.q_stride + h * D : x.k + t * x.k_stride + (h - heads) * D, t};
}

__device__ inline void rotate(float& a, float& b, float c, float s) {
  const float x = a * c - b * s;
  b = b * c + a * s;
  a = x;
}

// cos and sin of pairs [i, i + N) at position pos: from the block's inv_freq, or from the table
// (false where it has no row for pos: the head is left as it is).
template <int N>
__device__ inline bool angles(i64 pos, int i, const float* inv_freq, const float* __restrict__ cos_sin, i64 max_position,
                              float (&c)[N], float (&s)[N]) {
#if JITK_SOURCE_THETA
  const float p = static_cast<float>(pos);
#pragma unroll
  for (int j = 0; j < N; ++j) sincosf(p * inv_freq[i + j], &s[j], &c[j]);
  return true;
#else
  if (pos < 0 || pos >= max_position) return false;
  const float* row = cos_sin + pos * R + i;
  if constexpr (N % 4 == 0 && kPackable) {  // the packed path: 16-byte chunks through the read-only cache
#pragma unroll
    for (int j = 0; j < N; j += 4) {
      const auto cv = jitk::load_cached<4>(row + j), sv = jitk::load_cached<4>(row + HALF + j);
#pragma unroll
      for (int u = 0; u < 4; ++u) c[j + u] = cv.v[u], s[j + u] = sv.v[u];
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) c[j] = row[j], s[j] = row[HALF + j];
  }
  return true;
#endif
}

// Pairs [first, first + W) of one head, as two 16-byte packs.
__device__ inline void rotate_packed(i64 first, const Rows& rows, const i64* positions, const float* inv_freq, const float* cos_sin,
                                     i64 max_position) {
  const i64 row = first / HALF;
  const int i = static_cast<int>(first - row * HALF);
  const HeadRow hr = head_row(row, rows);
#if JITK_STYLE_NEOX
  T* pa = hr.x + i;
  T* pb = hr.x + HALF + i;
#else
  T* pa = hr.x + 2 * i;
  T* pb = pa + W;
#endif
  // the head's packs go out before the angles are made, so their loads are in flight meanwhile
  auto a = jitk::load<W>(pa), b = jitk::load<W>(pb);
  float c[W], s[W];
  if (!angles<W>(positions[hr.token], i, inv_freq, cos_sin, max_position, c, s)) return;
#if JITK_STYLE_NEOX
#pragma unroll
  for (int j = 0; j < W; ++j) {
    float x = jitk::to_float(a.v[j]), y = jitk::to_float(b.v[j]);
    rotate(x, y, c[j], s[j]);
    a.v[j] = jitk::from_float<T>(x), b.v[j] = jitk::from_float<T>(y);
  }
#else
#pragma unroll
  for (int j = 0; j < W / 2; ++j) {
    float x = jitk::to_float(a.v[2 * j]), y = jitk::to_float(a.v[2 * j + 1]);
    rotate(x, y, c[j], s[j]);
    a.v[2 * j] = jitk::from_float<T>(x), a.v[2 * j + 1] = jitk::from_float<T>(y);
    x = jitk::to_float(b.v[2 * j]), y = jitk::to_float(b.v[2 * j + 1]);
    rotate(x, y, c[W / 2 + j], s[W / 2 + j]);
    b.v[2 * j] = jitk::from_float<T>(x), b.v[2 * j + 1] = jitk::from_float<T>(y);
  }
#endif
  jitk::store<W>(pa, a);
  jitk::store<W>(pb, b);
}

// One pair, element by element (heads that do not split into packs, unaligned buffers).
__device__ inline void rotate_one(i64 p, const Rows& rows, const i64* positions, const float* inv_freq, const float* cos_sin,
                                  i64 max_position) {
  const i64 row = p / HALF;
  const int i = static_cast<int>(p - row * HALF);
  const HeadRow hr = head_row(row, rows);
  float c[1], s[1];
  if (!angles<1>(positions[hr.token], i, inv_freq, cos_sin, max_position, c, s)) return;
#if JITK_STYLE_NEOX
  T* pa = hr.x + i;
  T* pb = hr.x + HALF + i;
#else
  T* pa = hr.x + 2 * i;
  T* pb = pa + 1;
#endif
  float x = jitk::to_float(*pa), y = jitk::to_float(*pb);
  rotate(x, y, c[0], s[0]);
  *pa = jitk::from_float<T>(x);
  *pb = jitk::from_float<T>(y);
}

JITK_GPU_KERNEL(T* __restrict__ q, T* __restrict__ k, const i64* __restrict__ positions, const float* __restrict__ cos_sin,
                float theta, i64 max_position, i64 heads, i64 kv_heads, i64 q_stride, i64 k_stride, i64 pairs) {
#if JITK_SOURCE_THETA
  // inv_freq once a block (a powf each) rather than once a pair
  __shared__ float inv_freq[HALF];
  for (int i = threadIdx.x; i < HALF; i += JITK_BLOCK) inv_freq[i] = 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(R));
  __syncthreads();
#else
  const float* inv_freq = nullptr;
#endif
  const i64 first = (static_cast<i64>(blockIdx.x) * JITK_BLOCK + threadIdx.x) * W;
  if (first >= pairs) return;
  const Rows rows{q, k, heads, kv_heads, q_stride, k_stride};
  if constexpr (kPackable) {
    // pairs is a whole number of heads, so a thread's W pairs are all there; every row starts
    // 16-byte aligned when the buffers do and the strides are whole packs (packed rows always are)
    if (jitk::aligned16(q) && jitk::aligned16(k) && q_stride % W == 0 && k_stride % W == 0 && (kTheta || jitk::aligned16(cos_sin)))
      return rotate_packed(first, rows, positions, inv_freq, cos_sin, max_position);
  }
  for (i64 p = first; p < first + W && p < pairs; ++p) rotate_one(p, rows, positions, inv_freq, cos_sin, max_position);
}
