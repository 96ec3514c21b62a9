// attention_decode on the CPU: each call takes work items (sequence, kv head, row chunk, split)
// and, for the chunk's query rows (group heads x new tokens), the softmax-weighted sum of the
// values of the keys its split covers, read through the block table (q's tokens q_stride elements
// apart, o packed). Without a split it writes o
// (and lse); with one it writes its partial (sum, max, weights) into the workspace, and the last
// item of a (sequence, kv head, chunk) to finish merges them, as the GPU text does.
#include "jitk_cpu.h"

constexpr i64 D = JITK_HEAD_DIM;
constexpr i64 P = JITK_PAGE_SIZE;
constexpr i64 G = JITK_GROUP;
constexpr i64 QL = JITK_Q_LEN;
constexpr i64 R = G * QL;                // query rows of a (sequence, kv head)
constexpr i64 RC = R < 8 ? R : 8;        // rows an item takes: AttentionDecode::rows_per_item
constexpr i64 CHUNKS = (R + RC - 1) / RC;
#if JITK_DTYPE_F64
typedef double Acc;
#else
typedef float Acc;
#endif

struct Tables {
  const i32* block_table;
  const i32* context_lens;
  i64 kv_heads, num_pages, max_pages;
};

// The address of key j's row (head kvh) in a cache, or nullptr where its page is not in the pool.
static inline const T* key_row(const T* cache, const Tables& t, i64 seq, i64 kvh, i64 j) {
  const i64 page = t.block_table[seq * t.max_pages + j / P];
  if (page < 0 || page >= t.num_pages) return nullptr;
  return cache + ((page * P + j % P) * t.kv_heads + kvh) * D;
}

static inline Acc dot(const T* __restrict a, const T* __restrict b) {
  return jitk::reduce_sum<Acc>(D, [&](i64 i) { return Acc(a[i]) * Acc(b[i]); });
}
static inline void axpy(Acc* __restrict acc, Acc w, const T* __restrict v) {
  for (i64 i = 0; i < D; ++i) acc[i] += w * Acc(v[i]);
}
static inline void axpy_partial(Acc* __restrict acc, Acc w, const Acc* __restrict part) {
  for (i64 i = 0; i < D; ++i) acc[i] += w * part[i];
}
static inline void scale_row(Acc* __restrict acc, Acc w) {
  for (i64 i = 0; i < D; ++i) acc[i] *= w;
}

// A row's running softmax: acc = sum of exp(s - m) v over the keys seen, m the largest score,
// l = sum of exp(s - m); m = -inf and l = 0 before any key.
struct RowState {
  Acc m, l;
};
static inline void add_key(Acc* __restrict acc, RowState& st, Acc s, const T* __restrict v) {
  if (s > st.m) {
    const Acc shrink = jitk::exp(st.m - s);  // ~0 for the first key, whose acc and l are 0
    scale_row(acc, shrink);
    st.l = st.l * shrink + 1;
    st.m = s;
    axpy(acc, 1, v);
  } else {
    const Acc w = jitk::exp(s - st.m);
    st.l += w;
    axpy(acc, w, v);
  }
}

// The item's rows over keys [begin, ends[r]) each, key by key so that each K and V row is read
// once for all of them (as the GPU text does).
static void attend(const T* q, const i64* q_at, i64 rows, const T* k_cache, const T* v_cache, const Tables& t, i64 seq, i64 kvh,
                   i64 begin, const i64* ends, Acc scale, Acc (*acc)[D], RowState* st) {
  i64 last = begin;
  for (i64 r = 0; r < rows; ++r) {
    st[r] = {-__builtin_inf(), 0};
    for (i64 i = 0; i < D; ++i) acc[r][i] = 0;
    last = ends[r] > last ? ends[r] : last;
  }
  for (i64 j = begin; j < last; ++j) {
    const T* k = key_row(k_cache, t, seq, kvh, j);
    if (!k) continue;  // a page outside the pool: masked
    const T* v = key_row(v_cache, t, seq, kvh, j);
    for (i64 r = 0; r < rows; ++r)
      if (j < ends[r]) add_key(acc[r], st[r], dot(q + q_at[r], k) * scale, v);
  }
}

// Row r of a (sequence, kv head)'s R rows is new token r / G of head kvh * G + r % G.
static inline i64 row_index(i64 seq, i64 kvh, i64 r, i64 kv_heads) {
  return (seq * QL + r / G) * (kv_heads * G) + kvh * G + r % G;
}

static void write_row(T* o, float* lse, i64 at, const Acc* acc, Acc m, Acc l) {
  const Acc inv = l > 0 ? Acc(1) / l : Acc(0);
  for (i64 i = 0; i < D; ++i) o[at * D + i] = T(acc[i] * inv);
  if (lse) lse[at] = l > 0 ? float(m + jitk::log(l)) : -__builtin_inff();
}

JITK_CPU_KERNEL {
  const T* q = JITK_ARG(0, const T*);
  const T* k_cache = JITK_ARG(1, const T*);
  const T* v_cache = JITK_ARG(2, const T*);
  const Tables t{JITK_ARG(3, const i32*), JITK_ARG(4, const i32*), JITK_ARG(9, i64), JITK_ARG(10, i64), JITK_ARG(11, i64)};
  T* o = JITK_ARG(5, T*);
  float* lse = JITK_ARG(6, float*);
  char* workspace = JITK_ARG(7, char*);
  const Acc scale = JITK_ARG(8, T);
  const i64 splits = JITK_ARG(12, i64);
  const i64 pages_per_split = JITK_ARG(13, i64);
  const i64 batch = JITK_ARG(14, i64);
  const i64 q_stride = JITK_ARG(15, i64);  // elements between q's tokens (packed: heads x D)
  // workspace: the items' partials [item][RC][D + 2] (sums, then max and weight), then one
  // counter a (sequence, kv head, chunk): its items done so far
  Acc* partials = reinterpret_cast<Acc*>(workspace);
  u32* counters = reinterpret_cast<u32*>(partials + batch * t.kv_heads * CHUNKS * splits * RC * (D + 2));
  Acc acc[RC][D];  // the item's rows' sums (RC x head_dim on the stack: 64 KB at most)
  RowState st[RC];
  for (i64 item = jitk_begin; item < jitk_end; ++item) {
    const i64 split = item % splits, pair = item / splits;  // pair: (sequence, kv head, chunk)
    const i64 chunk = pair % CHUNKS, kvh = pair / CHUNKS % t.kv_heads, seq = pair / CHUNKS / t.kv_heads;
    i64 context = t.context_lens[seq];
    context = context < 0 ? 0 : context;
    const i64 keys = context < t.max_pages * P ? context : t.max_pages * P;  // keys past the table: masked
    const i64 begin = split * pages_per_split * P;
    // the last split runs to the end, whatever max_context the split was sized for
    const i64 split_end = split == splits - 1 ? keys : (split + 1) * pages_per_split * P;
    const i64 rows = R - chunk * RC < RC ? R - chunk * RC : RC;
    i64 at[RC], q_at[RC], ends[RC];
    for (i64 r = 0; r < rows; ++r) {
      const i64 row = chunk * RC + r;
      const i64 seen = context - QL + row / G + 1;  // keys this row's token sees
      i64 end = split_end < seen ? split_end : seen;
      ends[r] = end < keys ? end : keys;
      at[r] = row_index(seq, kvh, row, t.kv_heads);
      q_at[r] = (seq * QL + row / G) * q_stride + (kvh * G + row % G) * D;  // the row's first element in q
    }
    attend(q, q_at, rows, k_cache, v_cache, t, seq, kvh, begin, ends, scale, acc, st);
    for (i64 r = 0; r < rows; ++r) {
      if (!workspace) {
        write_row(o, lse, at[r], acc[r], st[r].m, st[r].l);
        continue;
      }
      Acc* part = partials + (item * RC + r) * (D + 2);
      for (i64 i = 0; i < D; ++i) part[i] = acc[r][i];
      part[D] = st[r].m;
      part[D + 1] = st[r].l;
    }
    // the last of the pair's items to finish sees the others' partials (acquire-release count)
    if (!workspace || __atomic_fetch_add(&counters[pair], 1u, __ATOMIC_ACQ_REL) != splits - 1) continue;
    for (i64 r = 0; r < rows; ++r) {
      const Acc* first = partials + (pair * splits * RC + r) * (D + 2);
      const i64 stride = RC * (D + 2);  // from one split's partial of the row to the next's
      Acc m = -__builtin_inf();
      for (i64 s = 0; s < splits; ++s) m = first[s * stride + D] > m ? first[s * stride + D] : m;
      Acc l = 0;
      Acc* sum = acc[0];
      for (i64 i = 0; i < D; ++i) sum[i] = 0;
      for (i64 s = 0; s < splits; ++s) {
        const Acc* part = first + s * stride;
        if (part[D + 1] == 0) continue;  // saw no key
        const Acc w = jitk::exp(part[D] - m);
        l += w * part[D + 1];
        axpy_partial(sum, w, part);
      }
      write_row(o, lse, row_index(seq, kvh, chunk * RC + r, t.kv_heads), sum, m, l);
    }
    __atomic_store_n(&counters[pair], 0u, __ATOMIC_RELAXED);  // ready for the next launch
  }
}
