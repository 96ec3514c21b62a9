// kv_cache_append: each head row of k and v [tokens, kv_heads, D] is copied into k_cache and v_cache
// [num_pages, P, kv_heads, D] (k's and v's token rows k_stride and v_stride elements apart: packed,
// or column slices of a wider QKV row) at its token's slot (page * P + offset in the page); a slot outside
// [0, num_pages * P) is skipped. The grid covers the rows' elements, W a thread: one 16-byte pack
// of k and one of v where the head splits into packs and the buffers are aligned, else element by element.
#include "jitk_gpu.h"

enum : i64 { D = JITK_HEAD_DIM };
enum : i64 { P = JITK_PAGE_SIZE };
enum : int { W = jitk::vector_width<T>() };
// A thread's W elements lie in one row, and its packs are 16-byte aligned when the buffers are.
enum : bool { kPackable = i64{D} % i64{W} == 0 };

// Where element e of the new rows (e counting the packed rows' elements) goes in a cache (at, or
// -1 where its token's slot is not in the cache), and its token (t).
struct Place {
  i64 at, t;
};
__device__ inline Place cache_index(i64 e, const i64* slots, i64 kv_heads, i64 cache_slots) {
  const i64 row = e / D;
  // 32-bit division where it fits (every model's today): 64-bit division is a long subroutine.
  const i64 t = row <= 0xffffffffLL && kv_heads <= 0xffffffffLL
                    ? static_cast<i64>(static_cast<unsigned>(row) / static_cast<unsigned>(kv_heads))
                    : row / kv_heads;
  const i64 slot = slots[t];
  if (slot < 0 || slot >= cache_slots) return {-1, t};
  return {(slot * kv_heads + row - t * kv_heads) * D + (e - row * D), t};
}

JITK_GPU_KERNEL(const T* __restrict__ k, const T* __restrict__ v, const i64* __restrict__ slots, T* __restrict__ k_cache,
                T* __restrict__ v_cache, i64 kv_heads, i64 num_pages, i64 k_stride, i64 v_stride, i64 n) {
  const i64 first = (static_cast<i64>(blockIdx.x) * JITK_BLOCK + threadIdx.x) * W;
  if (first >= n) return;
  const i64 cache_slots = num_pages * P;
  // element e of token t is e + t * (stride - kv_heads * D) into k or v: the padding between rows
  // (0 for packed rows: the packed case's address, e, costs one multiply-add more)
  const i64 k_pad = k_stride - kv_heads * D, v_pad = v_stride - kv_heads * D;
  if constexpr (kPackable) {
    // n is a whole number of rows, so a thread's W elements are all there; each row starts 16-byte
    // aligned when the buffers do and the strides are whole packs (packed rows always are)
    if (jitk::aligned16(k) && jitk::aligned16(v) && jitk::aligned16(k_cache) && jitk::aligned16(v_cache) && k_stride % W == 0 &&
        v_stride % W == 0) {
      const Place c = cache_index(first, slots, kv_heads, cache_slots);
      if (c.at < 0) return;
      const auto kp = jitk::load<W>(k + first + c.t * k_pad), vp = jitk::load<W>(v + first + c.t * v_pad);
      jitk::store<W>(k_cache + c.at, kp);
      jitk::store<W>(v_cache + c.at, vp);
      return;
    }
  }
  for (i64 e = first; e < first + W && e < n; ++e) {
    const Place c = cache_index(e, slots, kv_heads, cache_slots);
    if (c.at < 0) continue;
    k_cache[c.at] = k[e + c.t * k_pad];
    v_cache[c.at] = v[e + c.t * v_pad];
  }
}
