// One AdamW step in place (its descriptor).
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// One AdamW step in place, as torch.optim.AdamW: param *= 1 - lr * weight_decay; the moments
// move toward grad and grad^2; param -= lr / (1 - beta1^step) * m / (sqrt(v / (1 - beta2^step)) + eps).
// param, exp_avg and exp_avg_sq are f32 (f64 when dtype is f64); grad is dtype (f32, bf16, f16 on
// the GPU; f32, f64 on the CPU).
struct AdamW {
  static constexpr const char* name = "adamw";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "n, param, grad, exp_avg, exp_avg_sq, lr, step, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2";
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

}  // namespace jit::kernels
