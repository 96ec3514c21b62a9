// Descriptors of the kernels jitk ships: their specialization parameters and typed launch arguments.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <tuple>
#include <vector>

#include "jit/block_sparse.hpp"
#include "jit/chain.hpp"
#include "jit/cuda.hpp"
#include "jit/jit.hpp"

namespace jit::kernels {

namespace detail {
// A task smaller than this many elements costs more to hand to a thread than to run.
inline constexpr std::int64_t kMinElementsPerTask = 16384;
inline void check_eps(std::string_view kernel, double eps) {
  if (!(eps > 0))
    throw Error(ErrorCode::InvalidArgument, std::string(kernel) + ": eps must be > 0, got " + std::to_string(eps));
}
inline std::int64_t rows_per_task(std::int64_t hidden) {
  return std::max<std::int64_t>(1, kMinElementsPerTask / std::max<std::int64_t>(1, hidden));
}
// Each tensor argument of a launch has the kernel's dtype, and is not null when there is work.
inline void check_tensors(std::string_view kernel, DType dtype, std::int64_t count,
                          std::initializer_list<std::pair<const char*, ConstPtr>> tensors) {
  for (const auto& [arg, p] : tensors) {
    jit::detail::check_dtype(kernel, arg, dtype, p.dtype);
    jit::detail::check_not_null(kernel, arg, p.data, count);
  }
}
// The type of a kernel's scalar arguments (eps, chain numbers): float, double for f64.
inline DType scalar_type(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }
// Appends the fusion chains' operands (after the kernel's own arguments, before the row count).
template <class P, class A> void pack_chains(std::string_view kernel, const P& p, const A& a, jit::detail::ArgPack& out) {
  jit::detail::pack_chain(kernel, "prologue", p.prologue, a.prologue, p.dtype, scalar_type(p.dtype), a.rows, out);
  jit::detail::pack_chain(kernel, "epilogue", p.epilogue, a.epilogue, p.dtype, scalar_type(p.dtype), a.rows, out);
}
}  // namespace detail

// y[i] = a * x[i] + y[i] for i in [0, n)
struct Saxpy {
  static constexpr const char* name = "saxpy";
  struct Params {
    DType dtype = DType::f32;
    auto fields() const { return std::tie(dtype); }
  };
  struct Args {
    std::int64_t n;
    double a;
    ConstPtr x;
    MutPtr y;
  };
  static ParamSet to_params(const Params& p) { return {{"dtype", std::string(dtype_name(p.dtype))}}; }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "n", a.n);
    detail::check_tensors(name, p.dtype, a.n, {{"x", a.x}, {"y", a.y}});
    out.add_scalar(a.a, p.dtype);
    out.add_pointer(a.x.data);
    out.add_pointer(a.y.data);
    out.work_items = a.n;
    out.min_grain = detail::kMinElementsPerTask;
  }
};

// Parameters shared by the row kernels: element type, the row length they are unrolled for, and
// the elementwise chains fused before and after the kernel's work (jit/chain.hpp; rms_norm,
// layer_norm, silu_and_mul and gelu_and_mul take them, the others refuse a non-empty chain).
struct RowParams {
  DType dtype = DType::f32;
  std::int64_t hidden = 0;
  Chain prologue = {};
  Chain epilogue = {};
  auto fields() const { return std::tie(dtype, hidden, prologue, epilogue); }
};
// An empty chain is left out, so a kernel without one keeps the key it always had.
inline void add_chains(ParamSet& s, const Chain& prologue, const Chain& epilogue) {
  if (!prologue.empty()) s.set("prologue", prologue.to_string());
  if (!epilogue.empty()) s.set("epilogue", epilogue.to_string());
}
inline ParamSet row_params(const RowParams& p) {
  ParamSet s{{"dtype", std::string(dtype_name(p.dtype))}, {"hidden", p.hidden}};
  add_chains(s, p.prologue, p.epilogue);
  return s;
}

// out[r, :] = silu(x[r, :hidden]) * x[r, hidden:]   (x is rows x 2*hidden, out is rows x hidden)
struct SiluAndMul {
  static constexpr const char* name = "silu_and_mul";
  using Params = RowParams;
  struct Args {
    std::int64_t rows;
    ConstPtr x;
    MutPtr out;
    Operands prologue = {};  // the prologue runs on x (rows x 2*hidden), the epilogue on out (rows x hidden)
    Operands epilogue = {};
  };
  static ParamSet to_params(const Params& p) { return row_params(p); }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) { pack_as(name, p, a, out); }
  template <class P> static void pack_as(std::string_view name, const P& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "rows", a.rows);
    detail::check_tensors(name, p.dtype, a.rows, {{"x", a.x}, {"out", a.out}});
    out.add_pointer(a.x.data);
    out.add_pointer(a.out.data);
    detail::pack_chains(name, p, a, out);
    out.work_items = a.rows;
    out.min_grain = detail::rows_per_task(2 * p.hidden);
  }
};

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight
struct RmsNorm {
  static constexpr const char* name = "rms_norm";
  using Params = RowParams;
  struct Args {
    std::int64_t rows;
    ConstPtr x;
    ConstPtr weight;
    MutPtr y;
    double eps = 1e-6;
    Operands prologue = {};  // the chains' operands (jit/chain.hpp), in step order
    Operands epilogue = {};
  };
  static ParamSet to_params(const Params& p) { return row_params(p); }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "rows", a.rows);
    detail::check_tensors(name, p.dtype, a.rows, {{"x", a.x}, {"weight", a.weight}, {"y", a.y}});
    detail::check_eps(name, a.eps);
    out.add_pointer(a.x.data);
    out.add_pointer(a.weight.data);
    out.add_pointer(a.y.data);
    out.add_scalar(a.eps, detail::scalar_type(p.dtype));
    detail::pack_chains(name, p, a, out);
    out.work_items = a.rows;
    out.min_grain = detail::rows_per_task(p.hidden);
  }
};

// y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max))
struct Softmax {
  static constexpr const char* name = "softmax";
  using Params = RowParams;
  struct Args {
    std::int64_t rows;
    ConstPtr x;
    MutPtr y;
  };
  static ParamSet to_params(const Params& p) { return row_params(p); }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) { pack_rows(name, p, a, out); }
  static void pack_rows(std::string_view name, const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "rows", a.rows);
    detail::check_tensors(name, p.dtype, a.rows, {{"x", a.x}, {"y", a.y}});
    out.add_pointer(a.x.data);
    out.add_pointer(a.y.data);
    out.work_items = a.rows;
    out.min_grain = detail::rows_per_task(p.hidden);
  }
};

// y[r, :] = x[r, :] - max - log(sum(exp(x[r, :] - max)))
struct LogSoftmax : Softmax {
  static constexpr const char* name = "log_softmax";
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) { pack_rows(name, p, a, out); }
};

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias
struct LayerNorm {
  static constexpr const char* name = "layer_norm";
  using Params = RowParams;
  struct Args {
    std::int64_t rows;
    ConstPtr x;
    ConstPtr weight;
    ConstPtr bias;
    MutPtr y;
    double eps = 1e-5;
    Operands prologue = {};  // the chains' operands (jit/chain.hpp), in step order
    Operands epilogue = {};
  };
  static ParamSet to_params(const Params& p) { return row_params(p); }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "rows", a.rows);
    detail::check_tensors(name, p.dtype, a.rows, {{"x", a.x}, {"weight", a.weight}, {"bias", a.bias}, {"y", a.y}});
    detail::check_eps(name, a.eps);
    out.add_pointer(a.x.data);
    out.add_pointer(a.weight.data);
    out.add_pointer(a.bias.data);
    out.add_pointer(a.y.data);
    out.add_scalar(a.eps, detail::scalar_type(p.dtype));
    detail::pack_chains(name, p, a, out);
    out.work_items = a.rows;
    out.min_grain = detail::rows_per_task(p.hidden);
  }
};

// out[r, :] = gelu(x[r, :hidden]) * x[r, hidden:]   (x is rows x 2*hidden); gelu as PyTorch's:
// exact (erf), or approximate = Tanh
struct GeluAndMul {
  static constexpr const char* name = "gelu_and_mul";
  enum class Approximate : std::uint8_t { None, Tanh };
  struct Params {
    DType dtype = DType::f32;
    std::int64_t hidden = 0;
    Approximate approximate = Approximate::None;
    Chain prologue = {};
    Chain epilogue = {};
    auto fields() const { return std::tie(dtype, hidden, approximate, prologue, epilogue); }
  };
  using Args = SiluAndMul::Args;
  static ParamSet to_params(const Params& p) {
    ParamSet s = row_params({p.dtype, p.hidden, p.prologue, p.epilogue});  // params are put in the kernel's order later
    s.set("approximate", std::string(p.approximate == Approximate::Tanh ? "tanh" : "none"));
    return s;
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) { SiluAndMul::pack_as(name, p, a, out); }
};

// residual[r, :] += x[r, :]; y[r, :] = residual[r, :] / sqrt(mean(residual[r, :]^2) + eps) * weight,
// in one pass (x and residual read once, residual and y written once)
struct FusedAddRmsNorm {
  static constexpr const char* name = "fused_add_rms_norm";
  using Params = RowParams;
  struct Args {
    std::int64_t rows;
    ConstPtr x;
    MutPtr residual;
    ConstPtr weight;
    MutPtr y;
    double eps = 1e-6;
  };
  static ParamSet to_params(const Params& p) { return row_params(p); }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "rows", a.rows);
    detail::check_tensors(name, p.dtype, a.rows, {{"x", a.x}, {"residual", a.residual}, {"weight", a.weight}, {"y", a.y}});
    detail::check_eps(name, a.eps);
    out.add_pointer(a.x.data);
    out.add_pointer(a.residual.data);
    out.add_pointer(a.weight.data);
    out.add_pointer(a.y.data);
    out.add_scalar(a.eps, detail::scalar_type(p.dtype));
    out.work_items = a.rows;
    out.min_grain = detail::rows_per_task(p.hidden);
  }
};

// One AdamW step in place, as torch.optim.AdamW: param *= 1 - lr * weight_decay; the moments
// move toward grad and grad^2; param -= lr / (1 - beta1^step) * m / (sqrt(v / (1 - beta2^step)) + eps).
// param, exp_avg and exp_avg_sq are f32 (f64 when dtype is f64); grad is dtype (f32, bf16, f16 on
// the GPU; f32, f64 on the CPU).
struct AdamW {
  static constexpr const char* name = "adamw";
  struct Params {
    DType dtype = DType::f32;  // the gradients'
    auto fields() const { return std::tie(dtype); }
  };
  struct Args {
    std::int64_t n;
    MutPtr param;
    ConstPtr grad;
    MutPtr exp_avg;
    MutPtr exp_avg_sq;
    double lr;
    std::int64_t step;  // 1 for the first step
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 1e-2;
  };
  static ParamSet to_params(const Params& p) { return {{"dtype", std::string(dtype_name(p.dtype))}}; }
  static DType master(const Params& p) { return detail::scalar_type(p.dtype); }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "n", a.n);
    detail::check_tensors(name, p.dtype, a.n, {{"grad", a.grad}});
    detail::check_tensors(name, master(p), a.n, {{"param", a.param}, {"exp_avg", a.exp_avg}, {"exp_avg_sq", a.exp_avg_sq}});
    auto fail = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, std::string(name) + ": " + what); };
    if (a.step < 1) fail("step must be >= 1 (the first step is 1), got " + std::to_string(a.step));
    if (!(a.lr >= 0)) fail("lr must be >= 0, got " + std::to_string(a.lr));
    if (!(a.beta1 >= 0 && a.beta1 < 1) || !(a.beta2 >= 0 && a.beta2 < 1))
      fail("beta1 and beta2 must be in [0, 1), got " + std::to_string(a.beta1) + " and " + std::to_string(a.beta2));
    if (!(a.eps > 0)) fail("eps must be > 0, got " + std::to_string(a.eps));
    if (!(a.weight_decay >= 0)) fail("weight_decay must be >= 0, got " + std::to_string(a.weight_decay));
    const double bc1 = 1 - std::pow(a.beta1, static_cast<double>(a.step));
    const double bc2 = 1 - std::pow(a.beta2, static_cast<double>(a.step));
    out.add_pointer(a.param.data);
    out.add_pointer(a.grad.data);
    out.add_pointer(a.exp_avg.data);
    out.add_pointer(a.exp_avg_sq.data);
    // 1 - beta in double: 1.0f - 0.999f is 1.3e-5 off 0.001 (torch computes it in double too)
    for (double v : {1 - a.lr * a.weight_decay, a.beta1, 1 - a.beta1, a.beta2, 1 - a.beta2, a.eps, a.lr / bc1, 1 / std::sqrt(bc2)})
      out.add_scalar(v, master(p));
    out.work_items = a.n;
    out.min_grain = detail::kMinElementsPerTask;
  }
};

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

// C = alpha * A B + beta * C, then the epilogue chain on C's elements (jit/chain.hpp; its tensors
// share C's shape and ldc, its vectors have N values). C is row-major M x N (ldc >= N); A is
// M x K and B is K x N, each row- or column-major. beta == 0 does not read C. Products
// accumulate in float (double for f64). The tile sizes and pipeline stages are specialization
// parameters; 0 takes the chosen implementation's default (CPU 4x64x256; CUDA 128x128x32, 3
// stages; Hopper's wgmma path 128x256x64, 4 stages), and get_tuned picks them per device.
// cluster_m = 2 runs Hopper's blocks in pairs along M that share B's slices (TMA multicast).
struct Gemm {
  static constexpr const char* name = "gemm";
  enum class Layout : std::uint8_t { RowMajor, ColMajor };
  struct Params {
    DType dtype = DType::f32;
    Layout a_layout = Layout::RowMajor;
    Layout b_layout = Layout::RowMajor;
    std::int64_t tile_m = 0;
    std::int64_t tile_n = 0;
    std::int64_t tile_k = 0;
    std::int64_t stages = 0;
    std::int64_t cluster_m = 0;
    Chain epilogue = {};
    auto fields() const { return std::tie(dtype, a_layout, b_layout, tile_m, tile_n, tile_k, stages, cluster_m, epilogue); }
  };
  struct Args {
    std::int64_t m, n, k;
    double alpha;
    ConstPtr a;
    std::int64_t lda;
    ConstPtr b;
    std::int64_t ldb;
    double beta;
    MutPtr c;
    std::int64_t ldc;
    Operands epilogue = {};
  };
  static ParamSet to_params(const Params& p) {
    auto layout = [](Layout l) { return std::string(l == Layout::ColMajor ? "col" : "row"); };
    ParamSet s{{"dtype", std::string(dtype_name(p.dtype))}, {"a_layout", layout(p.a_layout)}, {"b_layout", layout(p.b_layout)},
               {"tile_m", p.tile_m}, {"tile_n", p.tile_n}, {"tile_k", p.tile_k}, {"stages", p.stages},
               {"cluster_m", p.cluster_m}};
    add_chains(s, {}, p.epilogue);
    return s;
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    for (auto [what, v] : {std::pair{"m", a.m}, {"n", a.n}, {"k", a.k}}) jit::detail::check_non_negative(name, what, v);
    auto fail = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, std::string(name) + ": " + what); };
    auto check_ld = [&](const char* ld, std::int64_t value, std::int64_t least, const char* why) {
      if (value < std::max<std::int64_t>(1, least))
        fail(std::string(ld) + " = " + std::to_string(value) + " is less than " + why + " (" + std::to_string(least) + ")");
    };
    const bool a_row = p.a_layout == Layout::RowMajor, b_row = p.b_layout == Layout::RowMajor;
    check_ld("lda", a.lda, a_row ? a.k : a.m, a_row ? "k (A row-major)" : "m (A column-major)");
    check_ld("ldb", a.ldb, b_row ? a.n : a.k, b_row ? "n (B row-major)" : "k (B column-major)");
    check_ld("ldc", a.ldc, a.n, "n");
    const std::int64_t work = a.m * a.n;  // nothing is read or written when C is empty
    detail::check_tensors(name, p.dtype, work * a.k, {{"a", a.a}, {"b", a.b}});
    detail::check_tensors(name, p.dtype, work, {{"c", a.c}});
    const DType scalar = detail::scalar_type(p.dtype);
    out.add_i64(a.m);
    out.add_i64(a.n);
    out.add_i64(a.k);
    out.add_scalar(a.alpha, scalar);
    const int a_arg = out.size();
    out.add_pointer(a.a.data);
    out.add_i64(a.lda);
    const int b_arg = out.size();
    out.add_pointer(a.b.data);
    out.add_i64(a.ldb);
    out.add_scalar(a.beta, scalar);
    out.add_pointer(a.c.data);
    out.add_i64(a.ldc);
    jit::detail::pack_chain(name, "epilogue", p.epilogue, a.epilogue, p.dtype, scalar, work, out);
    out.work_items = work == 0 ? 0 : a.m;  // rows (the CPU splits them), by columns (GPU tiles)
    out.work_columns = a.n;
    out.work_depth = a.k;
    out.min_grain = 16;
    // The operands as rows of their contiguous dimension, for kernels that load through the copy engine.
    const std::int64_t e = static_cast<std::int64_t>(dtype_size(p.dtype));
    out.matrices[0] = {a.a.data, p.dtype, a_row ? a.k : a.m, a_row ? a.m : a.k, a.lda * e, a_row, a_arg};
    out.matrices[1] = {a.b.data, p.dtype, b_row ? a.n : a.k, b_row ? a.k : a.n, a.ldb * e, !b_row, b_arg};
    out.matrix_count = 2;
  }

  // ---- autotuning (jit/tuning.hpp: jit::get_tuned<Gemm>(params, {m, n, k})) ----
  struct Shape {
    std::int64_t m, n, k;
  };
  // The typed params of validated ones, and a shape from a manifest's numbers (`jitk warm --tune`).
  static Params from_params(const ParamSet& s) {
    auto text = [&](const char* name) { return std::get<std::string>(*s.find(name)); };
    auto number = [&](const char* name) { return std::get<std::int64_t>(*s.find(name)); };
    Params p;
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16})
      if (dtype_name(t) == text("dtype")) p.dtype = t;
    p.a_layout = text("a_layout") == "col" ? Layout::ColMajor : Layout::RowMajor;
    p.b_layout = text("b_layout") == "col" ? Layout::ColMajor : Layout::RowMajor;
    p.tile_m = number("tile_m"), p.tile_n = number("tile_n"), p.tile_k = number("tile_k"), p.stages = number("stages");
    if (s.find("cluster_m")) p.cluster_m = number("cluster_m");
    if (s.find("epilogue")) p.epilogue = Chain::parse(text("epilogue"));
    return p;
  }
  static constexpr const char* shape_names = "m, n, k";
  static Shape shape_of(const std::vector<std::int64_t>& v) {
    if (v.size() != 3 || v[0] < 1 || v[1] < 1 || v[2] < 1)
      throw Error(ErrorCode::InvalidArgument, "gemm: a shape is three positive numbers (m, n, k)");
    return {v[0], v[1], v[2]};
  }
  // Shapes share a decision when each of m, n, k rounds up to the same power of two (at least 16).
  static std::string shape_class(const Shape& s) {
    auto up = [](std::int64_t v) {
      std::int64_t p = 16;
      while (p < v) p *= 2;
      return std::to_string(p);
    };
    return "m<=" + up(s.m) + ",n<=" + up(s.n) + ",k<=" + up(s.k);
  }
  // The base tile, then tiles of other shapes for the target's implementations (a candidate no
  // implementation takes is skipped while tuning, with a note).
  static std::vector<Params> candidates(const Params& base, const Target& target) {
    using Tile = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;  // m, n, k, stages
    std::vector<Tile> tiles;
    if (target.backend == Backend::Cpu) {
      tiles = {{4, 64, 256, 0}, {2, 128, 256, 0}, {8, 32, 256, 0}, {4, 128, 128, 0}, {8, 64, 512, 0}, {1, 256, 256, 0}, {16, 64, 128, 0}};
    } else {
      tiles = {{128, 128, 32, 3}, {128, 128, 32, 4}, {128, 256, 32, 3}, {256, 128, 32, 3}, {64, 128, 32, 4},
               {128, 64, 32, 4},  {64, 64, 64, 4},   {128, 128, 64, 3}, {64, 64, 32, 6},
               {16, 128, 64, 4},  {16, 64, 64, 4}};  // the last two: decode's few rows (the launch splits their K on sm_90)
      if (base.dtype != DType::f32)  // Hopper's wgmma path (tile_k 64); on other GPUs no implementation takes them
        for (Tile t : {Tile{128, 256, 64, 4}, {128, 256, 64, 3}, {128, 128, 64, 5}, {128, 192, 64, 4}, {64, 256, 64, 5}, {128, 64, 64, 8},
                       {64, 128, 64, 6}, {64, 64, 64, 8}})  // the last two: more blocks when M is small (decode)
          tiles.push_back(t);
    }
    std::vector<Params> out = {base};
    for (auto [tm, tn, tk, st] : tiles) {
      Params p = base;
      p.tile_m = tm, p.tile_n = tn, p.tile_k = tk, p.stages = st;
      if (p.fields() != base.fields()) out.push_back(p);
    }
    // Hopper's two largest tiles in clusters of two (B multicast): on the H100 at 4096^3 within the
    // noise of one block (0.88-0.91 of cuBLAS either way), so the tuner decides per shape.
    if (target.backend != Backend::Cpu && base.dtype != DType::f32)
      for (Tile t : {Tile{128, 256, 64, 4}, {128, 256, 64, 3}}) {
        Params p = base;
        p.tile_m = std::get<0>(t), p.tile_n = std::get<1>(t), p.tile_k = std::get<2>(t), p.stages = std::get<3>(t), p.cluster_m = 2;
        if (p.fields() != base.fields()) out.push_back(p);
      }
    return out;
  }
  // Random inputs of the shape where the target runs (host or device memory), and the epilogue's operands.
  class TuningData {
   public:
    TuningData(const Params& p, const Shape& s, const Target& target) : p_(p), s_(s), target_(target) {
      a_ = make((p.a_layout == Layout::RowMajor ? s.m : s.k) * lda(), true);
      b_ = make((p.b_layout == Layout::RowMajor ? s.k : s.n) * ldb(), true);
      c_ = make(s.m * s.n, false);
      for (int i = 0; i < p.epilogue.size(); ++i) {
        const OperandKind k = step_operand(p.epilogue[i]);
        if (k == OperandKind::None) continue;
        if (k == OperandKind::Scalar) {
          epilogue_.add(1.0);
          continue;
        }
        extra_.push_back(make(k == OperandKind::Vector ? s.n : s.m * s.n, true));
        if (k == OperandKind::Output) epilogue_.add(MutPtr(extra_.back().data(), p.dtype));
        else epilogue_.add(ConstPtr(extra_.back().data(), p.dtype));
      }
    }
    void run(const Kernel<Gemm>& k) {
      const DType t = p_.dtype;
      k.launch({s_.m, s_.n, s_.k, 1.0, ConstPtr(a_.data(), t), lda(), ConstPtr(b_.data(), t), ldb(), 0.0, MutPtr(c_.data(), t), s_.n,
                epilogue_});
    }

   private:
    // Leading dimensions rounded up to 16 bytes, as a program's would be (an unaligned one would time
    // another implementation than the shape's usual, on Hopper).
    std::int64_t round16(std::int64_t v) const {
      const auto per = static_cast<std::int64_t>(16 / dtype_size(p_.dtype));
      return (v + per - 1) / per * per;
    }
    std::int64_t lda() const { return round16(p_.a_layout == Layout::RowMajor ? s_.k : s_.m); }
    std::int64_t ldb() const { return round16(p_.b_layout == Layout::RowMajor ? s_.n : s_.k); }
    // `count` elements (at least one) on the host or the device; filled with small values, not
    // zeros (they can run faster), when `fill`.
    class Buffer {
     public:
      Buffer(std::vector<unsigned char> host, const Target& t) : host_(std::move(host)) {
        if (t.backend == Backend::Cuda) device_ = std::make_shared<cuda::DeviceArray<unsigned char>>(host_, t.device);
      }
      void* data() { return device_ ? static_cast<void*>(device_->data()) : host_.data(); }

     private:
      std::vector<unsigned char> host_;
      std::shared_ptr<cuda::DeviceArray<unsigned char>> device_;
    };
    Buffer make(std::int64_t count, bool fill) const {
      const std::size_t n = static_cast<std::size_t>(std::max<std::int64_t>(1, count)), e = dtype_size(p_.dtype);
      std::vector<unsigned char> host(n * e, 0);
      for (std::size_t i = 0; fill && i < n; ++i) {
        const double x = static_cast<double>((i * 2654435761u) % 1000) / 1000.0 - 0.5;
        switch (p_.dtype) {
          case DType::f64: reinterpret_cast<double*>(host.data())[i] = x; break;
          case DType::f32: reinterpret_cast<float*>(host.data())[i] = static_cast<float>(x); break;
          case DType::f16: reinterpret_cast<std::uint16_t*>(host.data())[i] = to_half(static_cast<float>(x)).bits; break;
          case DType::bf16: reinterpret_cast<std::uint16_t*>(host.data())[i] = to_bfloat16(static_cast<float>(x)).bits; break;
        }
      }
      return Buffer(std::move(host), target_);
    }
    Params p_;
    Shape s_;
    Target target_;
    Buffer a_ = Buffer({}, {}), b_ = Buffer({}, {}), c_ = Buffer({}, {});
    std::vector<Buffer> extra_;
    Operands epilogue_;
  };
  static TuningData tuning_data(const Params& p, const Shape& s, const Target& target) {
    if (target.backend != Backend::Cpu && target.backend != Backend::Cuda)
      throw Error(ErrorCode::BackendUnavailable, "gemm: tuning on " + target.to_string() + ": gemm runs on the CPU and CUDA");
    return TuningData(p, s, target);
  }
};

// Matmul with W (K x N) block-sparse on a BlockMask's support (jit/block_sparse.hpp); the dense
// matrices are row-major. `op` is the product:
//   Forward         Y = alpha X W + beta Y        a = X (m x K), b = W's values, c = Y (m x N)
//   BackwardInput   dX = alpha dY W^T + beta dX   a = dY (m x N), b = W's values, c = dX (m x K)
//   BackwardWeight  dW = alpha X^T dY + beta dW   a = X, b = dY, c = dW's values (W's support only)
// W's values are its mask.nnz() blocks, block_size x block_size row-major each, in the mask's
// id order. `index` is mask.index() where the kernel runs (a device copy for GPU launches).
// beta == 0 does not read c. tile_m and stages: GPU tiles (0: the implementation's default).
struct BlockSparseMatmul {
  static constexpr const char* name = "block_sparse_matmul";
  enum class Op : std::uint8_t { Forward, BackwardInput, BackwardWeight };
  struct Params {
    DType dtype = DType::f32;
    Op op = Op::Forward;
    std::int64_t block_size = 64;
    std::int64_t tile_m = 0;
    std::int64_t stages = 0;
    auto fields() const { return std::tie(dtype, op, block_size, tile_m, stages); }
  };
  struct Args {
    std::int64_t m;  // rows of X and dY
    double alpha;
    ConstPtr a;
    std::int64_t lda;
    ConstPtr b;
    std::int64_t ldb;  // backward_weight: dY's; otherwise unused
    double beta;
    MutPtr c;
    std::int64_t ldc;  // forward, backward_input: Y's or dX's; backward_weight: unused
    const BlockMask* mask;
    const std::int32_t* index;
  };
  static const char* op_name(Op op) {
    return op == Op::Forward ? "forward" : op == Op::BackwardInput ? "backward_input" : "backward_weight";
  }
  static ParamSet to_params(const Params& p) {
    return {{"dtype", std::string(dtype_name(p.dtype))}, {"op", std::string(op_name(p.op))}, {"block_size", p.block_size},
            {"tile_m", p.tile_m}, {"stages", p.stages}};
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    auto fail = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, std::string(name) + ": " + what); };
    if (!a.mask) fail("no mask");
    const BlockMask& mask = *a.mask;
    if (mask.block() != p.block_size)
      fail("the mask's blocks are " + std::to_string(mask.block()) + " wide; the kernel was specialized for block_size " +
           std::to_string(p.block_size));
    if (!a.index) fail("no index (mask.index() where the kernel runs)");
    jit::detail::check_non_negative(name, "m", a.m);
    const std::int64_t K = mask.rows(), N = mask.cols(), bs = mask.block();
    auto check_ld = [&](const char* ld, std::int64_t value, std::int64_t least, const char* of) {
      if (value < least) fail(std::string(ld) + " = " + std::to_string(value) + " is less than " + of + " (" + std::to_string(least) + ")");
    };
    const std::int64_t values = mask.nnz() * bs * bs;
    switch (p.op) {
      case Op::Forward:
        check_ld("lda", a.lda, K, "X's columns, the mask's rows");
        check_ld("ldc", a.ldc, N, "Y's columns, the mask's columns");
        detail::check_tensors(name, p.dtype, a.m, {{"a", a.a}, {"c", ConstPtr(a.c)}});
        detail::check_tensors(name, p.dtype, values, {{"b", a.b}});
        break;
      case Op::BackwardInput:
        check_ld("lda", a.lda, N, "dY's columns, the mask's columns");
        check_ld("ldc", a.ldc, K, "dX's columns, the mask's rows");
        detail::check_tensors(name, p.dtype, a.m, {{"a", a.a}, {"c", ConstPtr(a.c)}});
        detail::check_tensors(name, p.dtype, values, {{"b", a.b}});
        break;
      case Op::BackwardWeight:
        check_ld("lda", a.lda, K, "X's columns, the mask's rows");
        check_ld("ldb", a.ldb, N, "dY's columns, the mask's columns");
        detail::check_tensors(name, p.dtype, a.m, {{"a", a.a}, {"b", a.b}});
        detail::check_tensors(name, p.dtype, values, {{"c", ConstPtr(a.c)}});
        break;
    }
    const DType scalar = detail::scalar_type(p.dtype);
    out.add_i64(a.m);
    out.add_i64(N);
    out.add_i64(K);
    out.add_scalar(a.alpha, scalar);
    out.add_pointer(a.a.data);
    out.add_i64(a.lda);
    out.add_pointer(a.b.data);
    out.add_i64(p.op == Op::BackwardWeight ? a.ldb : bs);
    out.add_scalar(a.beta, scalar);
    out.add_pointer(a.c.data);
    out.add_i64(p.op == Op::BackwardWeight ? bs : a.ldc);
    out.add_pointer(a.index);
    out.add_i64(mask.block_rows());
    out.add_i64(mask.block_cols());
    out.add_i64(mask.nnz());
    // forward: rows x Y's columns; backward_input: rows x dX's columns; backward_weight: the rows of dW's blocks
    const bool weight = p.op == Op::BackwardWeight;
    out.work_items = weight ? mask.nnz() * bs : a.m;
    out.work_columns = weight ? bs : p.op == Op::Forward ? N : K;
    if (!weight && a.m == 0) out.work_items = 0;
    if (weight && a.m == 0 && a.beta == 1) out.work_items = 0;  // dW += 0
    out.min_grain = weight ? bs : 8;
    // The operands as rows of their contiguous dimension, for kernels that load through the copy
    // engine: X or dY (m rows), then W's blocks (nnz * block rows of block) or dY.
    const std::int64_t e = static_cast<std::int64_t>(dtype_size(p.dtype));
    const std::int64_t a_cols = p.op == Op::BackwardInput ? N : K;
    // (X's columns are K for forward, dY's the contraction for backward_input; backward_weight reads
    // X's columns and dY's as M and N; W's blocks hold N in their rows for forward)
    out.matrices[0] = {a.a.data, p.dtype, a_cols, a.m, a.lda * e, !weight};
    out.matrices[1] = weight ? jit::detail::ArgPack::Matrix{a.b.data, p.dtype, N, a.m, a.ldb * e, false}
                             : jit::detail::ArgPack::Matrix{a.b.data, p.dtype, bs, mask.nnz() * bs, bs * e, p.op == Op::BackwardInput};
    out.matrix_count = 2;
  }
};

}  // namespace jit::kernels
