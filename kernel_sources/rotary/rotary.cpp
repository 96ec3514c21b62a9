// rotary_embedding, in place: each head of q [tokens, heads, D] and k [tokens, kv_heads, D] (token
// rows q_stride and k_stride elements apart: packed, or column slices of a wider QKV row) has its
// first R elements rotated pair by pair by the angle position * inv_freq[i], inv_freq[i] =
// theta^(-2i/R) (or cos and sin read from a table [max_position, R]: R/2 cosines, then R/2 sines);
// elements R.. of the head are left as they are. The work items are the pairs, head row by head
// row (a token's q heads, then its k heads); a call's range may start and end inside a row.
#include "jitk_cpu.h"

constexpr i64 D = JITK_HEAD_DIM;
constexpr i64 R = JITK_ROTARY_DIM;
constexpr i64 HALF = R / 2;  // pairs a head rotates
static_assert(R % 2 == 0 && R <= D, "rotary_dim is even and at most head_dim (the descriptor checks it)");

// Pairs [lo, hi) of one head x by the angles whose cosines and sines are c and s. __restrict only
// binds on parameters (clang ignores it on locals), so the loop lives here.
static inline void rotate(T* __restrict x, const T* __restrict c, const T* __restrict s, i64 lo, i64 hi) {
#if JITK_STYLE_NEOX
  for (i64 i = lo; i < hi; ++i) {
    const T a = x[i], b = x[i + HALF];
    x[i] = a * c[i] - b * s[i];
    x[i + HALF] = b * c[i] + a * s[i];
  }
#else
  for (i64 i = lo; i < hi; ++i) {
    const T a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c[i] - b * s[i];
    x[2 * i + 1] = b * c[i] + a * s[i];
  }
#endif
}

JITK_CPU_KERNEL {
  T* q = JITK_ARG(0, T*);
  T* k = JITK_ARG(1, T*);
  const i64* positions = JITK_ARG(2, const i64*);
  const T* cos_sin = JITK_ARG(3, const T*);
  const T theta = JITK_ARG(4, T);
  const i64 max_position = JITK_ARG(5, i64);
  const i64 heads = JITK_ARG(6, i64);
  const i64 kv_heads = JITK_ARG(7, i64);
  const i64 q_stride = JITK_ARG(8, i64);
  const i64 k_stride = JITK_ARG(9, i64);
  const i64 per_token = heads + kv_heads;
  (void)cos_sin, (void)theta, (void)max_position;  // each source reads its own

  // This call's tokens' cosines and sines, made once a token and shared by its heads.
  T cos_of[HALF], sin_of[HALF];
  const T* c = cos_of;
  const T* s = sin_of;
#if JITK_SOURCE_THETA
  T inv_freq[HALF];
  for (i64 i = 0; i < HALF; ++i) inv_freq[i] = T(1) / jitk::pow(theta, T(2 * i) / T(R));
#endif
  i64 token = -1;
  bool rotates = false;  // a table has a row for the token's position
  for (i64 p = jitk_begin; p < jitk_end;) {
    const i64 row = p / HALF, lo = p - row * HALF;
    const i64 hi = jitk_end - p < HALF - lo ? lo + (jitk_end - p) : HALF;
    const i64 t = row / per_token, h = row - t * per_token;
    if (t != token) {
      token = t;
      const i64 pos = positions[t];
#if JITK_SOURCE_THETA
      rotates = true;
      for (i64 i = 0; i < HALF; ++i) {
        const T angle = T(pos) * inv_freq[i];
        cos_of[i] = jitk::cos(angle);
        sin_of[i] = jitk::sin(angle);
      }
#else
      // A position the table has no row for leaves the token's heads as they are.
      rotates = pos >= 0 && pos < max_position;
      if (rotates) {
        c = cos_sin + pos * R;
        s = c + HALF;
      }
#endif
    }
    if (rotates) rotate(h < heads ? q + t * q_stride + h * D : k + t * k_stride + (h - heads) * D, c, s, lo, hi);
    p += hi - lo;
  }
}
