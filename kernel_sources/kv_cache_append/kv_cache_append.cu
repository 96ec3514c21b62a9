// kv_cache_append: each head row of k and v [tokens, kv_heads, D] is copied into k_cache and v_cache
// [num_pages, P, kv_heads, D] at its token's slot (page * P + offset in the page); a slot outside
// [0, num_pages * P) is skipped. The grid covers the rows' elements, W a thread: one 16-byte pack
// of k and one of v where the head splits into packs and the buffers are aligned, else element by element.
#include "jitk_gpu.h"

constexpr i64 D = JITK_HEAD_DIM;
constexpr i64 P = JITK_PAGE_SIZE;
constexpr int W = jitk::kVector<T>;
// A thread's W elements lie in one row, and its packs are 16-byte aligned when the buffers are.
constexpr bool kPackable = D % W == 0;

// Where element e of the new rows goes in a cache, or -1 where its token's slot is not in the cache.
__device__ inline i64 cache_index(i64 e, const i64* slots, i64 kv_heads, i64 cache_slots) {
  const i64 row = e / D;
  // 32-bit division where it fits (every model's today): 64-bit division is a long subroutine.
  const i64 t = row <= 0xffffffffLL && kv_heads <= 0xffffffffLL
                    ? static_cast<i64>(static_cast<unsigned>(row) / static_cast<unsigned>(kv_heads))
                    : row / kv_heads;
  const i64 slot = slots[t];
  if (slot < 0 || slot >= cache_slots) return -1;
  return (slot * kv_heads + row - t * kv_heads) * D + (e - row * D);
}

JITK_GPU_KERNEL(const T* __restrict__ k, const T* __restrict__ v, const i64* __restrict__ slots, T* __restrict__ k_cache,
                T* __restrict__ v_cache, i64 kv_heads, i64 num_pages, i64 n) {
  const i64 first = (static_cast<i64>(blockIdx.x) * JITK_BLOCK + threadIdx.x) * W;
  if (first >= n) return;
  const i64 cache_slots = num_pages * P;
  if constexpr (kPackable) {
    // n is a whole number of rows, so a thread's W elements are all there
    if (jitk::aligned16(k) && jitk::aligned16(v) && jitk::aligned16(k_cache) && jitk::aligned16(v_cache)) {
      const i64 at = cache_index(first, slots, kv_heads, cache_slots);
      if (at < 0) return;
      const auto kp = jitk::load<W>(k + first), vp = jitk::load<W>(v + first);
      jitk::store<W>(k_cache + at, kp);
      jitk::store<W>(v_cache + at, vp);
      return;
    }
  }
  for (i64 e = first; e < first + W && e < n; ++e) {
    const i64 at = cache_index(e, slots, kv_heads, cache_slots);
    if (at < 0) continue;
    k_cache[at] = k[e];
    v_cache[at] = v[e];
  }
}
