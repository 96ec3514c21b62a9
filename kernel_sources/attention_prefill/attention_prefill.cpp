// attention_prefill on the CPU: the work items are the rows of the longest sequence's (token,
// query head of a group) pairs, as the GPU's; a call takes its range of them for every
// (sequence, kv head), so the group's rows of a token read each key and value row together.
// Each row walks its keys KB at a time: scores, then an online softmax into O's accumulators.
#include "jitk_cpu.h"

constexpr i64 D = JITK_HEAD_DIM;
constexpr i64 G = JITK_GROUP;
constexpr bool kCausal = JITK_CAUSAL != 0;
constexpr i64 kWindow = JITK_WINDOW;
constexpr i64 KB = 64;  // keys a step of a row's walk

static inline T dot(const T* __restrict a, const T* __restrict b) {
  return jitk::reduce_sum<T>(D, [&](i64 i) { return a[i] * b[i]; });
}
static inline void scale_add(T* __restrict acc, T c, T p, const T* __restrict v) {
  for (i64 i = 0; i < D; ++i) acc[i] = acc[i] * c + p * v[i];
}

JITK_CPU_KERNEL {
  const T* q = JITK_ARG(0, const T*);
  const T* k = JITK_ARG(1, const T*);
  const T* v = JITK_ARG(2, const T*);
  T* o = JITK_ARG(3, T*);
  T* lse = JITK_ARG(4, T*);
  const i32* cu_q = JITK_ARG(5, const i32*);
  const i32* cu_k = JITK_ARG(6, const i32*);
  const i64 batch = JITK_ARG(7, i64);
  const i64 kv_heads = JITK_ARG(8, i64);
  const i64 total_q = JITK_ARG(9, i64);
  const i64 total_k = JITK_ARG(10, i64);
  const i64 q_stride = JITK_ARG(11, i64);
  const i64 k_stride = JITK_ARG(12, i64);
  const i64 v_stride = JITK_ARG(13, i64);
  const T scale = JITK_ARG(14, T);
  // the work items: the rows of the longest sequence, max_seqlen_q * G (appended after the arguments)
  const i64 rows = JITK_ARG(15, i64);
  const i64 heads = kv_heads * G;
  for (i64 b = 0; b < batch; ++b) {
    const i64 q0 = cu_q[b], q1 = cu_q[b + 1], k0 = cu_k[b], k1 = cu_k[b + 1];
    // offsets out of range: nothing is touched (the host checks what it can before the launch)
    if (q0 < 0 || q1 < q0 || q1 > total_q || k0 < 0 || k1 < k0 || k1 > total_k) continue;
    const i64 lq = q1 - q0, lk = k1 - k0, shift = lk - lq;
    if (lq * G > rows) {  // more queries than max_seqlen_q covers: NaN rows, never a silent partial result
      const i64 fill_end = jitk_end == rows ? lq * G : jitk_end;  // the last range fills those past the work too
      for (i64 kvh = 0; kvh < kv_heads; ++kvh)
        for (i64 r = jitk_begin; r < fill_end; ++r) {
          const i64 token = r / G, head = kvh * G + r % G;
          for (i64 i = 0; i < D; ++i) o[((q0 + token) * heads + head) * D + i] = __builtin_nan("");
          if (lse) lse[head * total_q + q0 + token] = __builtin_nan("");
        }
      continue;
    }
    const i64 end = jitk_end < lq * G ? jitk_end : lq * G;
    for (i64 kvh = 0; kvh < kv_heads; ++kvh)
      for (i64 r = jitk_begin; r < end; ++r) {
        const i64 token = r / G, head = kvh * G + r % G;
        const T* qr = q + (q0 + token) * q_stride + head * D;
        i64 first = 0, last = lk;  // the keys the row sees: [first, last)
        if (kCausal && token + shift + 1 < last) last = token + shift + 1;
        if (kWindow > 0 && token + shift - kWindow > first) first = token + shift - kWindow;
        T acc[D];
        for (i64 i = 0; i < D; ++i) acc[i] = 0;
        T m = 0, sum = 0;
        bool seen = false;
        for (i64 j0 = first; j0 < last; j0 += KB) {
          const i64 n = last - j0 < KB ? last - j0 : KB;
          T s[KB];
          T block_max = 0;
          for (i64 j = 0; j < n; ++j) {
            s[j] = dot(qr, k + (k0 + j0 + j) * k_stride + kvh * D) * scale;
            block_max = j == 0 || s[j] > block_max ? s[j] : block_max;
          }
          const T next = seen && m > block_max ? m : block_max;
          const T c = seen ? jitk::exp(m - next) : T(0);
          sum *= c;
          for (i64 j = 0; j < n; ++j) {
            const T p = jitk::exp(s[j] - next);
            sum += p;
            scale_add(acc, j == 0 ? c : T(1), p, v + (k0 + j0 + j) * v_stride + kvh * D);
          }
          m = next;
          seen = true;
        }
        const T inv = sum > T(0) ? T(1) / sum : T(0);
        T* orow = o + ((q0 + token) * heads + head) * D;
        for (i64 i = 0; i < D; ++i) orow[i] = acc[i] * inv;
        if (lse) lse[head * total_q + q0 + token] = sum > T(0) ? m + jitk::log(sum) : -__builtin_inf();
      }
  }
}
