// What the shipped kernels' descriptors share: argument checks, task sizes, the row kernels' params.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <tuple>
#include <vector>

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

}  // namespace jit::kernels
