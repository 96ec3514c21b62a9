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
// device memory on a GPU, so the host cannot check them. q and k must not overlap.
struct RotaryEmbedding {
  static constexpr const char* name = "rotary_embedding";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "tokens, heads, kv_heads, positions, q, k, theta = 10000, cos_sin = {}, max_position = 0";
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
    const std::int64_t pairs = a.tokens * (a.heads + a.kv_heads) * (p.rotary_dim / 2);
    detail::check_tensors(name, p.dtype, a.tokens * a.heads, {{"q", a.q}});
    if (a.k.data || a.kv_heads > 0) detail::check_tensors(name, p.dtype, a.tokens * a.kv_heads, {{"k", a.k}});  // k may be absent
    jit::detail::check_not_null(name, "positions", a.positions, pairs);
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
    out.work_items = pairs;
    out.min_grain = detail::kMinElementsPerTask / 2;  // a pair is two elements
  }
};

}  // namespace jit::kernels
