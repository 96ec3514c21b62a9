// rms_norm and fused_add_rms_norm (their descriptors: params and typed launch arguments).
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight
struct RmsNorm {
  static constexpr const char* name = "rms_norm";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "rows, x, weight, y, eps = 1e-6, prologue = {}, epilogue = {}";
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


// residual[r, :] += x[r, :]; y[r, :] = residual[r, :] / sqrt(mean(residual[r, :]^2) + eps) * weight,
// in one pass (x and residual read once, residual and y written once)
struct FusedAddRmsNorm {
  static constexpr const char* name = "fused_add_rms_norm";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "rows, x, residual, weight, y, eps = 1e-6";
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

}  // namespace jit::kernels
