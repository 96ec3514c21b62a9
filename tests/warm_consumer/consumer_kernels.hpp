// The consumer's own kernel, add_one: y[i] = x[i] + 1 (its descriptor, and the registration).
#pragma once
#include <jit/jit.hpp>

struct AddOne {
  static constexpr const char* name = "consumer_add_one";
  struct Params {
    jit::DType dtype = jit::DType::f32;
    auto fields() const { return std::tie(dtype); }
  };
  struct Args {
    std::int64_t n;
    jit::ConstPtr x;
    jit::MutPtr y;
  };
  static jit::ParamSet to_params(const Params& p) { return {{"dtype", std::string(jit::dtype_name(p.dtype))}}; }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_dtype(name, "x", p.dtype, a.x.dtype);
    jit::detail::check_dtype(name, "y", p.dtype, a.y.dtype);
    out.add_pointer(a.x.data);
    out.add_pointer(a.y.data);
    out.work_items = a.n;
  }
};

// Registers consumer_add_one (once per process; the program calls it before its first get).
void register_consumer_kernels();
