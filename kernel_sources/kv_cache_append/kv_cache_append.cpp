// kv_cache_append: each head row of k and v [tokens, kv_heads, D] is copied into k_cache and v_cache
// [num_pages, P, kv_heads, D] (k's and v's token rows k_stride and v_stride elements apart: packed,
// or column slices of a wider QKV row) at its token's slot (page * P + offset in the page); a slot outside
// [0, num_pages * P) is skipped. The work items are the rows' elements, so a call's range may
// start and end inside a row.
#include "jitk_cpu.h"

constexpr i64 D = JITK_HEAD_DIM;
constexpr i64 P = JITK_PAGE_SIZE;

// Elements [lo, hi) of one row. __restrict only binds on parameters (clang ignores it on locals),
// so the loop lives here.
static inline void copy_part(const T* __restrict from, T* __restrict to, i64 lo, i64 hi) {
  for (i64 i = lo; i < hi; ++i) to[i] = from[i];
}

JITK_CPU_KERNEL {
  const T* k = JITK_ARG(0, const T*);
  const T* v = JITK_ARG(1, const T*);
  const i64* slots = JITK_ARG(2, const i64*);
  T* k_cache = JITK_ARG(3, T*);
  T* v_cache = JITK_ARG(4, T*);
  const i64 kv_heads = JITK_ARG(5, i64);
  const i64 cache_slots = JITK_ARG(6, i64) * P;
  const i64 k_stride = JITK_ARG(7, i64);
  const i64 v_stride = JITK_ARG(8, i64);
  for (i64 e = jitk_begin; e < jitk_end;) {
    const i64 row = e / D, lo = e - row * D;
    const i64 hi = jitk_end - e < D - lo ? lo + (jitk_end - e) : D;
    const i64 t = row / kv_heads, h = row - t * kv_heads;
    const i64 slot = slots[t];
    if (slot >= 0 && slot < cache_slots) {  // else the token is padding (-1) or has no slot in the cache
      const i64 at = (slot * kv_heads + h) * D;
      copy_part(k + t * k_stride + h * D, k_cache + at, lo, hi);
      copy_part(v + t * v_stride + h * D, v_cache + at, lo, hi);
    }
    e += hi - lo;
  }
}
