// rotary_embedding: rotary position embedding in place on q and k (its descriptor).
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// Rotary position embedding, in place on q [tokens, heads, head_dim] and k [tokens, kv_heads,
// head_dim] (contiguous heads; kv_heads may differ from heads, and be 0 with k null). In each head,
// pair j of the first rotary_dim elements turns by the angle positions[t] * inv_freq[j]:
//   x[a] <- x[a] cos - x[b] sin,  x[b] <- x[b] cos + x[a] sin
// with (a, b) = (j, j + rotary_dim/2) (Style::NeoX, half-split) or (2j, 2j+1) (Style::GptJ,
// interleaved); elements rotary_dim.. of a head are left as they are. Source::Theta computes
// inv_freq[j] = 1 / theta^(2j/rotary_dim) and the angles in float (double for f64), as torch's
// RotaryEmbedding does; Source::Table reads cos and sin from cos_sin [max_position, rotary_dim]
// (row p: rotary_dim/2 cosines, then rotary_dim/2 sines), f32 (f64 for f64) whatever the dtype.
// A position outside [0, max_position) leaves its token's heads as they are: positions live in
// device memory on a GPU, so the host cannot check them.
// Token rows may lie further apart than heads x head_dim: q_stride and k_stride (elements between
// consecutive tokens; 0: packed) let q and k be rotated in place as column slices of one QKV
// projection's output [tokens, (heads + 2 kv_heads) x head_dim] (q = qkv, k = qkv + heads x
// head_dim, both strides the row's width); the elements between rows are never read or written.
// q's rows and k's rows must not share an element (checked: InvalidArgument).
struct RotaryEmbedding {
  static constexpr const char* name = "rotary_embedding";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "tokens, heads, kv_heads, positions, q, k, theta = 10000, cos_sin = {}, max_position = 0, q_stride = 0, k_stride = 0";
  enum class Style : std::uint8_t { NeoX, GptJ };
  enum class Source : std::uint8_t { Theta, Table };
  struct Params {
    DType dtype = DType::f32;
    std::int64_t head_dim = 0;
    std::int64_t rotary_dim = 0;  // even, <= head_dim
    Style style = Style::NeoX;
    Source source = Source::Theta;
    auto fields() const { return std::tie(dtype, head_dim, rotary_dim, style, source); }
  };
  struct Args {
    std::int64_t tokens;
    std::int64_t heads;
    std::int64_t kv_heads;
    const std::int64_t* positions;  // [tokens]
    MutPtr q;
    MutPtr k;
    double theta = 10000;        // Source::Theta
    ConstPtr cos_sin = {};       // Source::Table; null otherwise
    std::int64_t max_position = 0;  // Source::Table: cos_sin's rows
    std::int64_t q_stride = 0;      // elements between tokens of q; 0: heads x head_dim (packed)
    std::int64_t k_stride = 0;      // elements between tokens of k; 0: kv_heads x head_dim (packed)
  };
  static ParamSet to_params(const Params& p) {
    return {{"dtype", std::string(dtype_name(p.dtype))},
            {"head_dim", p.head_dim},
            {"rotary_dim", p.rotary_dim},
            {"style", std::string(p.style == Style::GptJ ? "gptj" : "neox")},
            {"source", std::string(p.source == Source::Table ? "table" : "theta")}};
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    auto fail = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, std::string(name) + ": " + what); };
    jit::detail::check_non_negative(name, "tokens", a.tokens);
    jit::detail::check_non_negative(name, "heads", a.heads);
    jit::detail::check_non_negative(name, "kv_heads", a.kv_heads);
    // a token's heads x head_dim elements, and the pairs of all tokens, fit 64-bit counts
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    if (a.heads > kMax / 2 / p.head_dim || a.kv_heads > kMax / 2 / p.head_dim ||
        (a.tokens > 0 && (a.heads + a.kv_heads) * p.head_dim > kMax / a.tokens))
      fail("tokens = " + std::to_string(a.tokens) + " x (heads + kv_heads) = " + std::to_string(a.heads) + " + " +
           std::to_string(a.kv_heads) + " heads of " + std::to_string(p.head_dim) + " elements pass a 64-bit count");
    const std::int64_t pairs = a.tokens * (a.heads + a.kv_heads) * (p.rotary_dim / 2);
    const std::int64_t q_width = a.heads * p.head_dim, k_width = a.kv_heads * p.head_dim;
    const std::int64_t q_stride = detail::token_stride(name, "q_stride", a.q_stride, q_width, a.tokens, p.dtype);
    // k absent: its stride is not used (Python passes 1 for a missing array's)
    const std::int64_t k_stride = a.kv_heads > 0 && a.k.data ? detail::token_stride(name, "k_stride", a.k_stride, k_width, a.tokens, p.dtype) : 0;
    detail::check_tensors(name, p.dtype, a.tokens * a.heads, {{"q", a.q}});
    if (a.k.data || a.kv_heads > 0) detail::check_tensors(name, p.dtype, a.tokens * a.kv_heads, {{"k", a.k}});  // k may be absent
    jit::detail::check_not_null(name, "positions", a.positions, pairs);
    if (pairs > 0 && detail::strided_rows_overlap(a.q.data, q_width, q_stride, a.k.data, k_width, k_stride, a.tokens, dtype_size(p.dtype)))
      fail("q's and k's rows share elements (q_stride = " + std::to_string(q_stride) + ", k_stride = " + std::to_string(k_stride) +
           ", k " + std::to_string(static_cast<long long>(reinterpret_cast<std::uintptr_t>(a.k.data) - reinterpret_cast<std::uintptr_t>(a.q.data))) +
           " bytes from q): each would be rotated twice; in a fused QKV row, k starts heads x head_dim elements after q");
    const DType table_type = detail::scalar_type(p.dtype);
    if (p.source == Source::Table) {
      if (pairs > 0 && !a.cos_sin.data) fail("source = table needs the cos_sin table (max_position x rotary_dim), got null");
      if (pairs > 0 && a.max_position < 1) fail("source = table needs max_position >= 1 (cos_sin's rows), got " + std::to_string(a.max_position));
      if (a.cos_sin.data) jit::detail::check_dtype(name, "cos_sin", table_type, a.cos_sin.dtype);
    } else {
      if (a.cos_sin.data) fail("cos_sin is given but source = theta computes cos and sin (specialize with source = table to read it)");
      if (!(a.theta > 0) || !std::isfinite(a.theta)) fail("theta must be a finite number > 0, got " + std::to_string(a.theta));
    }
    out.add_pointer(a.q.data);
    out.add_pointer(a.k.data);
    out.add_pointer(a.positions);
    out.add_pointer(a.cos_sin.data);
    out.add_scalar(a.theta, table_type);
    out.add_i64(a.max_position);
    out.add_i64(a.heads);
    out.add_i64(a.kv_heads);
    out.add_i64(q_stride);
    out.add_i64(k_stride);
    out.work_items = pairs;
    out.min_grain = detail::kMinElementsPerTask / 2;  // a pair is two elements
  }
};

}  // namespace jit::kernels
