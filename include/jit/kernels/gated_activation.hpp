// silu_and_mul and gelu_and_mul: gated activations of a row's two halves.
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// out[r, :] = silu(x[r, :hidden]) * x[r, hidden:]   (x is rows x 2*hidden, out is rows x hidden)
struct SiluAndMul {
  static constexpr const char* name = "silu_and_mul";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "rows, x, out, prologue = {}, epilogue = {}";
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
  static constexpr const char* arg_names = SiluAndMul::arg_names;
  static ParamSet to_params(const Params& p) {
    ParamSet s = row_params({p.dtype, p.hidden, p.prologue, p.epilogue});  // params are put in the kernel's order later
    s.set("approximate", std::string(p.approximate == Approximate::Tanh ? "tanh" : "none"));
    return s;
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) { SiluAndMul::pack_as(name, p, a, out); }
};

}  // namespace jit::kernels
