// saxpy: y = a * x + y (its descriptor: params and typed launch arguments).
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// y[i] = a * x[i] + y[i] for i in [0, n)
struct Saxpy {
  static constexpr const char* name = "saxpy";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "n, a, x, y";
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

}  // namespace jit::kernels
