// softmax and log_softmax of each row (their descriptors).
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max))
struct Softmax {
  static constexpr const char* name = "softmax";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "rows, x, y";
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

}  // namespace jit::kernels
