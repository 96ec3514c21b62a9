// layer_norm of each row (its descriptor).
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias
struct LayerNorm {
  static constexpr const char* name = "layer_norm";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "rows, x, weight, bias, y, eps = 1e-5, prologue = {}, epilogue = {}";
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

}  // namespace jit::kernels
