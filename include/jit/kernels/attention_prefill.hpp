// attention_prefill: flash attention forward over variable-length batches (its descriptor).
#pragma once
#include <algorithm>
#include <string>

#include "jit/kernels/common.hpp"

namespace jit::kernels {

// Softmax attention, forward, over a batch of sequences of different lengths packed along the
// token axis (flash-attn's varlen layout):
//   q [total_q, heads, head_dim], k and v [total_k, kv_heads, head_dim] (rows of a token may be
//   further apart than heads x head_dim: q_stride, k_stride, v_stride, in elements; 0 = packed),
//   sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1, its keys
//   cu_seqlens_k[b] .. cu_seqlens_k[b+1] - 1 (int32, batch + 1 offsets each, as flash-attn's).
//   o [total_q, heads, head_dim] (packed) = softmax(scale * q k^T + mask) v, per head; query head
//   h reads kv head h / group (grouped-query and multi-query attention: heads = kv_heads * group;
//   the GPU takes a group's query heads into one tile, so each K/V tile is loaded once per group).
//   lse [heads, total_q] (f32; f64 for f64; null: not written) = log-sum-exp of the row's scaled
//   scores, natural log (flash-attn's softmax_lse), -inf for a row that sees no key (its o is 0).
// Masks, with query i of a sequence of lq queries and lk keys at position i + lk - lq (aligned to
// the bottom right, as flash-attn >= 2.1: a chunk of new queries after a cached prefix):
//   causal: key j is seen when j <= i + lk - lq;
//   window w > 0: key j is seen when j >= i + lk - lq - w (flash-attn's window_size left; keys
//   after the position too when not causal).
// Offsets that do not increase or pass total_q / total_k are checked on the host when the caller
// hands them there (Args::host_cu_seqlens_q/_k); the GPU kernel skips a sequence whose offsets are
// out of range, so it never reads or writes outside the buffers, whatever the device holds.
struct AttentionPrefill {
  static constexpr const char* name = "attention_prefill";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "batch, kv_heads, max_seqlen_q, total_q, total_k, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, scale, q_stride = 0, k_stride = 0, v_stride = 0, host_cu_seqlens_q = nullptr, host_cu_seqlens_k = nullptr";
  struct Params {
    DType dtype = DType::bf16;
    std::int64_t head_dim = 128;
    bool causal = false;
    std::int64_t window = 0;  // 0: no window
    std::int64_t group = 1;   // query heads a kv head serves (heads / kv_heads)
    std::int64_t tile_m = 0;  // query rows a GPU block takes (a group's heads of tile_m / group tokens); 0: the default
    std::int64_t tile_n = 0;  // keys a step of the walk takes; 0: the default
    auto fields() const { return std::tie(dtype, head_dim, causal, window, group, tile_m, tile_n); }
  };
  struct Args {
    std::int64_t batch;
    std::int64_t kv_heads;
    std::int64_t max_seqlen_q;  // the longest sequence's queries (the grid covers it)
    std::int64_t total_q;       // rows of q and o
    std::int64_t total_k;       // rows of k and v
    ConstPtr q;
    ConstPtr k;
    ConstPtr v;
    MutPtr o;
    MutPtr lse;                          // may be null
    const std::int32_t* cu_seqlens_q;    // [batch + 1], where the kernel runs (device memory on a GPU)
    const std::int32_t* cu_seqlens_k;    // [batch + 1]
    double scale;                        // softmax scale, e.g. 1 / sqrt(head_dim)
    std::int64_t q_stride = 0, k_stride = 0, v_stride = 0;  // elements between tokens; 0: heads x head_dim (packed)
    // The same offsets in host memory, when the caller has them (vLLM and flash-attn callers do):
    // checked before the launch (increasing from 0, ending at total_q / total_k, no sequence's
    // queries longer than max_seqlen_q). On the CPU backend they may be the same arrays.
    const std::int32_t* host_cu_seqlens_q = nullptr;
    const std::int32_t* host_cu_seqlens_k = nullptr;
  };
  static ParamSet to_params(const Params& p) {
    ParamSet s{{"dtype", std::string(dtype_name(p.dtype))},
               {"head_dim", p.head_dim},
               {"causal", std::int64_t{p.causal ? 1 : 0}},
               {"window", p.window},
               {"group", p.group}};
    if (p.tile_m != 0) s.set("tile_m", p.tile_m);
    if (p.tile_n != 0) s.set("tile_n", p.tile_n);
    return s;
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out);
};

// Throws InvalidArgument (naming the sequence and the offsets) unless cu_seqlens [batch + 1] rises
// from 0 to `total` without falling and no sequence is longer than `max_len` (0: no bound).
// `what` names the array in the message ("cu_seqlens_q").
inline void check_seqlens(std::string_view kernel, const char* what, const std::int32_t* cu_seqlens, std::int64_t batch,
                          std::int64_t total, std::int64_t max_len) {
  const auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::InvalidArgument, std::string(kernel) + ": " + what + " " + why);
  };
  if (batch > 0 && cu_seqlens[0] != 0) fail("[0] = " + std::to_string(cu_seqlens[0]) + "; the first offset must be 0");
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = std::int64_t{cu_seqlens[b + 1]} - cu_seqlens[b];
    const std::string at = "[" + std::to_string(b) + "] = " + std::to_string(cu_seqlens[b]) + ", [" + std::to_string(b + 1) +
                           "] = " + std::to_string(cu_seqlens[b + 1]);
    if (len < 0) fail(at + ": offsets must not decrease (sequence " + std::to_string(b) + ")");
    if (max_len > 0 && len > max_len)
      fail(at + ": sequence " + std::to_string(b) + " has " + std::to_string(len) + " tokens, more than max_seqlen_q = " +
           std::to_string(max_len));
  }
  if (batch > 0 && cu_seqlens[batch] != total)
    fail("[" + std::to_string(batch) + "] = " + std::to_string(cu_seqlens[batch]) + ": the last offset must be the token count " +
         std::to_string(total));
}

inline void AttentionPrefill::pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
  auto fail = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, std::string(name) + ": " + what); };
  jit::detail::check_non_negative(name, "batch", a.batch);
  jit::detail::check_non_negative(name, "kv_heads", a.kv_heads);
  jit::detail::check_non_negative(name, "max_seqlen_q", a.max_seqlen_q);
  jit::detail::check_non_negative(name, "total_q", a.total_q);
  jit::detail::check_non_negative(name, "total_k", a.total_k);
  // Offsets are int32, so no count of tokens passes INT32_MAX; a token's row must be addressable.
  constexpr std::int64_t kMaxTokens = 2147483647;
  for (auto [what, v] : {std::pair{"total_q", a.total_q}, {"total_k", a.total_k}, {"batch", a.batch}})
    if (v > kMaxTokens) fail(std::string(what) + " = " + std::to_string(v) + " is more than int32 offsets can index (" + std::to_string(kMaxTokens) + ")");
  if (a.kv_heads > kMaxTokens / (p.group * p.head_dim))
    fail("kv_heads = " + std::to_string(a.kv_heads) + ": a token's row of kv_heads x group x head_dim elements passes " + std::to_string(kMaxTokens));
  const std::int64_t heads = a.kv_heads * p.group, row = heads * p.head_dim, kv_row = a.kv_heads * p.head_dim;
  if (!(a.scale > 0) || !std::isfinite(a.scale)) fail("scale must be a finite number > 0, got " + std::to_string(a.scale));
  // 0: packed; less than a token's row, or rows past a 64-bit byte offset: refused
  const std::int64_t q_stride = detail::token_stride(name, "q_stride", a.q_stride, row, a.total_q, p.dtype),
                     k_stride = detail::token_stride(name, "k_stride", a.k_stride, kv_row, a.total_k, p.dtype),
                     v_stride = detail::token_stride(name, "v_stride", a.v_stride, kv_row, a.total_k, p.dtype);
  const bool work = a.batch > 0 && a.kv_heads > 0 && a.total_q > 0;
  // the launch covers max_seqlen_q rows a sequence: 0 with queries given would write none of o
  if (work && a.max_seqlen_q < 1)
    fail("max_seqlen_q = " + std::to_string(a.max_seqlen_q) + " with total_q = " + std::to_string(a.total_q) +
         " queries: it must be the longest sequence's query count (at least 1), or no row of o is written");
  detail::check_tensors(name, p.dtype, work ? a.total_q : 0, {{"q", a.q}, {"o", a.o}});
  detail::check_tensors(name, p.dtype, work ? a.total_k : 0, {{"k", a.k}, {"v", a.v}});
  if (a.lse.data) jit::detail::check_dtype(name, "lse", detail::scalar_type(p.dtype), a.lse.dtype);
  jit::detail::check_not_null(name, "cu_seqlens_q", a.cu_seqlens_q, work ? 1 : 0);
  jit::detail::check_not_null(name, "cu_seqlens_k", a.cu_seqlens_k, work ? 1 : 0);
  if (a.host_cu_seqlens_q) check_seqlens(name, "cu_seqlens_q", a.host_cu_seqlens_q, a.batch, a.total_q, a.max_seqlen_q);
  if (a.host_cu_seqlens_k) check_seqlens(name, "cu_seqlens_k", a.host_cu_seqlens_k, a.batch, a.total_k, 0);
  out.add_pointer(a.q.data);
  out.add_pointer(a.k.data);
  out.add_pointer(a.v.data);
  out.add_pointer(a.o.data);
  out.add_pointer(a.lse.data);
  out.add_pointer(a.cu_seqlens_q);
  out.add_pointer(a.cu_seqlens_k);
  out.add_i64(a.batch);
  out.add_i64(a.kv_heads);
  out.add_i64(a.total_q);
  out.add_i64(a.total_k);
  out.add_i64(q_stride);
  out.add_i64(k_stride);
  out.add_i64(v_stride);
  out.add_scalar(a.scale, detail::scalar_type(p.dtype));
  // the rows the launch covers (no sequence is longer than total_q): a longer sequence reads NaN
  const std::int64_t rows = work ? std::min(a.max_seqlen_q, a.total_q) * p.group : 0;
  out.add_i64(rows);
  // A GPU block takes tile_m of one (sequence, kv head)'s rows: its group's query heads of
  // tile_m / group tokens. Work items are those rows of the longest sequence, work columns the
  // (sequence, kv head) pairs; a block past its sequence's rows returns at once.
  out.work_items = rows;
  out.work_columns = a.batch * a.kv_heads;
  // Rows the GPU copies 16 bytes at a time (Hopper's text; others run the generic one)
  const auto off16 = [&](const void* ptr, std::int64_t stride) {
    return reinterpret_cast<std::uintptr_t>(ptr) % 16 != 0 || (stride * static_cast<std::int64_t>(dtype_size(p.dtype))) % 16 != 0;
  };
  out.unaligned = off16(a.q.data, q_stride) || off16(a.k.data, k_stride) || off16(a.v.data, v_stride);
  // K and V for a text that loads them through the copy engine (cuda-sm90a-tma): rows of a
  // token's kv_heads x head_dim elements, k_stride / v_stride apart; others ignore them
  const std::int64_t e = static_cast<std::int64_t>(dtype_size(p.dtype));
  out.matrices[0] = {a.k.data, p.dtype, kv_row, a.total_k, k_stride * e, false, -1};
  out.matrices[1] = {a.v.data, p.dtype, kv_row, a.total_k, v_stride * e, false, -1};
  out.matrix_count = 2;
  out.min_grain = 1;
}

}  // namespace jit::kernels
