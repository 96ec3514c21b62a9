// A kernel got from Python, called on arrays: the call's arguments checked against the kernel's
// signature and gathered into its launch values, the dimensions bound from the arrays' shapes.
#pragma once
#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "jit/jit.hpp"
#include "kernel_table.hpp"
#include "signature.hpp"

namespace jitk_py {

namespace nb = nanobind;

// Where a name of the signature's dimensions gets its value: a param (fixed for the launcher) or the call's arrays.
struct DimSlots {
  std::vector<std::string> names;
  std::vector<std::int64_t> fixed;  // per name: its param's value
  std::vector<char> is_fixed;
  int slot(const std::string& n) {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == n) return static_cast<int>(i);
    names.push_back(n), fixed.push_back(0), is_fixed.push_back(0);
    return static_cast<int>(names.size() - 1);
  }
};

class Launcher {
 public:
  // `device`: the GPU the kernel was got for (its target's device); arrays on another are refused.
  Launcher(Signature sig, std::unique_ptr<TypedLaunch> kernel, int device = 0);

  // Gathers the call's values into `values` (one per field), checking every argument.
  void gather(const nb::args& args, const nb::kwargs& kwargs, std::vector<Value>& values, std::vector<ArrayView>& views,
              jit::Stream& stream) const;

  void launch(const std::vector<Value>& values, jit::Stream stream) const { kernel_->launch(values.data(), stream); }

  const Signature& signature() const { return sig_; }
  const TypedLaunch& kernel() const { return *kernel_; }

  // The framework whose arrays this call got, set by __call__ from the first array's type.
  nb::handle first_gpu_array = nb::handle();

 private:
  jit::DType elem_dtype(const Field& f) const;
  std::pair<int, int> elem_code(const Field& f) const;
  void check_array(const Field& f, const ArrayView& a) const;
  void bind_dims(std::span<const char> present, const std::vector<ArrayView>& views, std::int64_t* dims, char* known) const;
  std::string bindings_text(const DimExpr& e, const std::vector<int>& sl, const std::int64_t* dims, const char* known) const;
  void gather_chain(const Field& f, const jit::Chain& chain, PyObject* given, Value& out, std::vector<ArrayView>& views) const;
  jit::Stream pick_stream(nb::handle stream_arg, const std::vector<ArrayView>& views, std::span<const char> present) const;
  jit::Stream current_stream(int device) const;

  Signature sig_;
  std::unique_ptr<TypedLaunch> kernel_;
  int device_ = 0;
  jit::DType dtype_ = jit::DType::f32;
  DimSlots slots_;
  std::vector<std::vector<std::vector<int>>> dim_slots_;  // [field][dim][factor] -> slot
  std::vector<int> field_slot_;
  std::vector<char> layouts_col_;
  std::vector<std::pair<int, jit::Chain>> chains_;
};

// Kernel.__call__: gathers and launches, without the GIL for long CPU launches.
void call_launcher(Launcher& l, const nb::args& args, const nb::kwargs& kwargs);
// Seconds a launch takes from C++ (the values gathered once) and from Python, `iterations` times each.
nb::dict time_launches(Launcher& l, int iterations, const nb::args& args, const nb::kwargs& kwargs);

}  // namespace jitk_py
