// jitk._jitk: the nanobind module behind the jitk Python package: kernels got by name and launched on
// arrays (checked against the kernel's signature), the cache tools, and jitk's errors as Python's.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "arrays.hpp"
#include "jit/cache.hpp"
#include "jit/config.hpp"
#include "jit/registry.hpp"
#include "kernel_table.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace jitk_py {

namespace {

std::atomic<bool> g_library_used{false};  // configure() is too late once the library read its settings

// ---- errors ---------------------------------------------------------------------------------------
PyObject* g_error = nullptr;           // jitk.Error(RuntimeError)
PyObject* g_params_error = nullptr;    // jitk.ParamsError(Error, ValueError): a bad kernel name or params
PyObject* g_argument_error = nullptr;  // jitk.ArgumentError(Error, ValueError): a launch argument the kernel refuses

void raise_jit_error(const jit::Error& e) {
  PyObject* type = g_error;
  if (e.kind() == jit::ErrorCode::InvalidParams || e.kind() == jit::ErrorCode::UnknownKernel) type = g_params_error;
  if (e.kind() == jit::ErrorCode::InvalidArgument) type = g_argument_error;
  nb::object exc = nb::steal(PyObject_CallFunction(type, "s", e.what()));
  if (!exc.is_valid()) return;  // the call set its own error
  nb::setattr(exc, "kind", nb::str(jit::to_string(e.kind())));
  nb::setattr(exc, "message", nb::str(e.message().c_str()));
  nb::setattr(exc, "kernel", nb::str(e.kernel().c_str()));
  nb::setattr(exc, "params", nb::str(e.params().c_str()));
  nb::setattr(exc, "log", nb::str(e.log().c_str()));
  nb::list options;
  for (const auto& o : e.options()) options.append(nb::str(o.c_str()));
  nb::setattr(exc, "options", options);
  PyErr_SetObject(type, exc.ptr());
}

[[noreturn]] void type_error(const std::string& s) { throw nb::type_error(s.c_str()); }
[[noreturn]] void value_error(const std::string& s) { throw nb::value_error(s.c_str()); }

// ---- params from Python values -----------------------------------------------------------------------
jit::ParamSet param_set(const std::string& kernel, const nb::dict& params) {
  jit::ParamSet s;
  for (auto [key, value] : params) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    if (PyBool_Check(value.ptr())) s.set(name, std::int64_t{value.ptr() == Py_True ? 1 : 0});
    else if (PyLong_Check(value.ptr())) {
      long long v = PyLong_AsLongLong(value.ptr());
      if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        value_error(kernel + ": param " + name + " = " + nb::cast<std::string>(nb::repr(value)) + " does not fit 64 bits");
      }
      s.set(name, std::int64_t{v});
    } else if (PyUnicode_Check(value.ptr())) s.set(name, nb::cast<std::string>(value));
    else
      type_error(kernel + ": param " + name + " must be an int, a bool or a str, got " +
                 nb::cast<std::string>(nb::str(value.type().attr("__name__"))) + " " + nb::cast<std::string>(nb::repr(value)));
  }
  return s;
}

const KernelBinding* find_binding(const std::string& kernel) {
  for (const auto& b : kernel_bindings())
    if (b.kernel == kernel) return &b;
  return nullptr;
}

[[noreturn]] void unknown_kernel(const std::string& kernel) {
  for (const auto& [name, why] : kernels_not_bound())
    if (name == kernel) throw jit::Error(jit::ErrorCode::UnknownKernel, kernel + " is not reachable from Python: " + why);
  for (const auto& spec : jit::registered_kernels())
    if (spec.name == kernel)
      throw jit::Error(jit::ErrorCode::UnknownKernel,
                       kernel + " is registered, but has no Python signature (only the shipped kernels have one)");
  std::string known;
  for (const auto& b : kernel_bindings()) known += (known.empty() ? "" : ", ") + b.kernel;
  throw jit::Error(jit::ErrorCode::UnknownKernel, "unknown kernel '" + kernel + "'; known: " + known);
}

// ---- the launcher --------------------------------------------------------------------------------
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

struct Stream {
  enum class Source : std::uint8_t { None, Torch, Cupy } source = Source::None;
};

class Launcher {
 public:
  Launcher(Signature sig, std::unique_ptr<TypedLaunch> kernel) : sig_(std::move(sig)), kernel_(std::move(kernel)) {
    const jit::ParamSet params = kernel_->params();
    if (const jit::ParamValue* d = params.find("dtype"); d && std::holds_alternative<std::string>(*d)) {
      const std::string& t = std::get<std::string>(*d);
      for (jit::DType x : {jit::DType::f16, jit::DType::bf16, jit::DType::f32, jit::DType::f64})
        if (jit::dtype_name(x) == t) dtype_ = x;
    }
    layouts_col_.assign(sig_.fields.size(), 0);
    dim_slots_.resize(sig_.fields.size());
    field_slot_.assign(sig_.fields.size(), -1);
    for (std::size_t i = 0; i < sig_.fields.size(); ++i) {
      const Field& f = sig_.fields[i];
      if (f.source == Field::Source::Dim) field_slot_[i] = slots_.slot(f.name);
      if (f.source == Field::Source::Int) field_slot_[i] = slots_.slot(f.name);
      for (const auto& d : f.dims) {
        std::vector<int> s;
        for (const auto& n : d.names) s.push_back(slots_.slot(n));
        dim_slots_[i].push_back(std::move(s));
      }
      if (!f.layout_param.empty())
        if (const jit::ParamValue* v = params.find(f.layout_param); v && *v == jit::ParamValue(std::string("col"))) layouts_col_[i] = 1;
      if (f.source == Field::Source::Chain) {
        if (const jit::ParamValue* v = params.find(f.name); v && std::holds_alternative<std::string>(*v))
          chains_.emplace_back(static_cast<int>(i), jit::Chain::parse(std::get<std::string>(*v)));
      }
    }
    for (const auto& [name, value] : params.values())
      if (std::holds_alternative<std::int64_t>(value))
        for (std::size_t s = 0; s < slots_.names.size(); ++s)
          if (slots_.names[s] == name) slots_.fixed[s] = std::get<std::int64_t>(value), slots_.is_fixed[s] = 1;
  }

  // Gathers the call's values into `values` (one per field), checking every argument.
  void gather(const nb::args& args, const nb::kwargs& kwargs, std::vector<Value>& values, std::vector<ArrayView>& views,
              jit::Stream& stream) const {
    const std::size_t nf = sig_.fields.size();
    const std::string& kname = sig_.kernel;
    // the caller's arguments by field
    PyObject* given[32] = {};
    if (args.size() > sig_.user_order.size())
      type_error(kname + "() takes at most " + std::to_string(sig_.user_order.size()) + " arguments " + sig_.python_signature() +
                 ", got " + std::to_string(args.size()));
    for (std::size_t j = 0; j < args.size(); ++j) given[sig_.user_order[j]] = args[j].ptr();
    nb::handle stream_arg;
    for (auto [key, value] : kwargs) {
      const char* k = PyUnicode_AsUTF8(key.ptr());
      if (!k) throw nb::python_error();
      if (std::strcmp(k, "stream") == 0) {
        stream_arg = value;
        continue;
      }
      int at = -1;
      for (int idx : sig_.user_order)
        if (sig_.fields[static_cast<std::size_t>(idx)].name == k) at = idx;
      if (at < 0) type_error(kname + "() got an unexpected argument '" + k + "'; it takes " + sig_.python_signature());
      if (given[at]) type_error(kname + "() got two values for argument '" + std::string(k) + "'");
      given[at] = value.ptr();
    }
    values.assign(nf, Value{});
    views.clear();
    views.reserve(nf + jit::Chain::kMaxOperands * 2);  // a chain's operands are added after: no reallocation
    views.resize(nf);
    char present_flags[32] = {};
    std::span<char> present(present_flags, nf);
    // scalars, and the arrays read
    for (std::size_t i = 0; i < nf; ++i) {
      const Field& f = sig_.fields[i];
      PyObject* o = given[i];
      if (f.source == Field::Source::Int || f.source == Field::Source::Float) {
        if (!o) {
          if (!f.has_default) type_error(kname + "() is missing argument '" + f.name + "'; it takes " + sig_.python_signature());
          values[i].i = static_cast<std::int64_t>(f.default_value), values[i].d = f.default_value;
          continue;
        }
        if (f.source == Field::Source::Int) {
          if (!PyLong_Check(o) || PyBool_Check(o))
            type_error(kname + ": argument '" + f.name + "' must be an int, got " + Py_TYPE(o)->tp_name);
          long long v = PyLong_AsLongLong(o);
          if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            value_error(kname + ": argument '" + f.name + "' does not fit 64 bits");
          }
          values[i].i = v;
        } else {
          double v = PyFloat_AsDouble(o);
          if (v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            type_error(kname + ": argument '" + f.name + "' must be a number, got " + Py_TYPE(o)->tp_name);
          }
          values[i].d = v;
        }
      } else if (f.source == Field::Source::Array || f.source == Field::Source::Buffer) {
        if (!o || o == Py_None) {
          if (!f.optional) type_error(kname + "() is missing array '" + f.name + "'; it takes " + sig_.python_signature());
          continue;
        }
        if (!view_array(o, f.output, views[i]))
          type_error(kname + ": argument '" + f.name + "' must be an array (DLPack or __cuda_array_interface__), got " +
                     Py_TYPE(o)->tp_name);
        present[i] = 1;
        check_array(f, views[i]);
        values[i].p = views[i].data;
      }
    }
    // the counts the arrays' shapes give
    std::int64_t dims[64];
    char known[64];
    const std::size_t ns = slots_.names.size();
    for (std::size_t s = 0; s < ns; ++s) dims[s] = slots_.fixed[s], known[s] = slots_.is_fixed[s];
    for (std::size_t i = 0; i < nf; ++i)
      if (sig_.fields[i].source == Field::Source::Int) dims[field_slot_[i]] = values[i].i, known[field_slot_[i]] = 1;
    bind_dims(present, views, dims, known);
    // the derived fields
    for (std::size_t i = 0; i < nf; ++i) {
      const Field& f = sig_.fields[i];
      Value& v = values[i];
      switch (f.source) {
        case Field::Source::Dim: v.i = known[field_slot_[i]] ? dims[field_slot_[i]] : 0; break;
        case Field::Source::Array: v.dtype = elem_dtype(f); break;
        case Field::Source::HostPtr: {
          const int o = f.other_index;
          v.p = present[o] && views[o].on_host() ? views[o].data : nullptr;
          break;
        }
        case Field::Source::IsHost: v.b = present[f.other_index] && views[f.other_index].on_host(); break;
        case Field::Source::Ld: {
          const ArrayView& a = views[f.other_index];
          std::int64_t ld = 1;
          if (present[f.other_index] && a.ndim >= 1) {
            if (layouts_col_[f.other_index]) ld = a.shape[0];
            else
              for (int d = 1; d < a.ndim; ++d) ld *= a.shape[d];
          }
          v.i = std::max<std::int64_t>(1, ld);
          break;
        }
        case Field::Source::Nbytes: {
          const ArrayView& a = views[f.other_index];
          v.i = present[f.other_index] ? a.size * (a.bits / 8) : 0;
          break;
        }
        default: break;
      }
    }
    for (const auto& [i, chain] : chains_) gather_chain(sig_.fields[static_cast<std::size_t>(i)], chain, given[i], values[i], views);
    if (chains_.empty())
      for (std::size_t i = 0; i < nf; ++i)
        if (sig_.fields[i].source == Field::Source::Chain && given[i] && given[i] != Py_None) {
          nb::handle h(given[i]);
          if (!nb::isinstance<nb::sequence>(h) || nb::len(h) != 0)
            value_error(kname + ": argument '" + sig_.fields[i].name + "' gives operands, but the kernel was got without a " +
                        sig_.fields[i].name + " chain (jitk.get(..., " + sig_.fields[i].name + "=\"...\"))");
        }
    stream = pick_stream(stream_arg, views, present);
  }

  void launch(const std::vector<Value>& values, jit::Stream stream) const { kernel_->launch(values.data(), stream); }

  const Signature& signature() const { return sig_; }
  const TypedLaunch& kernel() const { return *kernel_; }

 private:
  jit::DType elem_dtype(const Field& f) const {
    switch (f.elem) {
      case ElemRule::Scalar: return dtype_ == jit::DType::f64 ? jit::DType::f64 : jit::DType::f32;
      case ElemRule::F32: return jit::DType::f32;
      default: return dtype_;
    }
  }
  // (code, bits) the field's element type is.
  std::pair<int, int> elem_code(const Field& f) const {
    switch (f.elem) {
      case ElemRule::I32: return {0, 32};
      case ElemRule::I64: return {0, 64};
      case ElemRule::Any: return {-1, 0};
      default: break;
    }
    switch (elem_dtype(f)) {
      case jit::DType::f16: return {2, 16};
      case jit::DType::bf16: return {4, 16};
      case jit::DType::f32: return {2, 32};
      case jit::DType::f64: return {2, 64};
    }
    return {2, 32};
  }
  static std::string type_text(int code, int bits) {
    ArrayView v;
    v.code = static_cast<std::uint8_t>(code), v.bits = static_cast<std::uint8_t>(bits);
    return v.dtype_name();
  }

  void check_array(const Field& f, const ArrayView& a) const {
    const std::string& kname = sig_.kernel;
    const auto where = [&] { return kname + ": argument '" + f.name + "'"; };  // built only for a message
    if (f.source == Field::Source::Array) {
      const auto [code, bits] = elem_code(f);
      if (code >= 0 && (a.code != code || a.bits != bits))
        type_error(where() + " must be " + type_text(code, bits) + ", got " + a.dtype_name());
      if (!f.dims.empty() && !f.dims[0].flat && a.ndim != static_cast<int>(f.dims.size()))
        value_error(where() + " must have " + std::to_string(f.dims.size()) + " dimensions " + dims_text(f) + ", got shape " + a.shape_text());
    }
    if (a.readonly) value_error(where() + " is written, but the array is read-only");
    // device
    const jit::Backend backend = kernel_->backend();
    const bool ok = backend == jit::Backend::Cpu ? a.on_host()
                    : backend == jit::Backend::Cuda ? a.device_type == 2
                                                    : a.device_type == 10;
    if (!ok)
      value_error(where() + " is on " + a.device_name() + ", but the kernel runs on " + std::string(jit::backend_name(backend)) +
                  " (" + kernel_->implementation() + ")");
    const bool col = !f.layout_param.empty() && layouts_col_[&f - sig_.fields.data()];
    if (col ? !a.f_contiguous() : !a.c_contiguous())
      value_error(where() + " must be " + (col ? "column-major (Fortran-contiguous, " + f.layout_param + " = col)" : std::string("contiguous")) +
                  ", got strides (in elements) " + strides_text(a));
  }

  static std::string strides_text(const ArrayView& a) {
    std::string s = "(";
    for (int i = 0; i < a.ndim; ++i) s += (i ? ", " : "") + std::to_string(a.strides[i]);
    return s + (a.ndim == 1 ? ",)" : ")");
  }
  static std::string dims_text(const Field& f) {
    std::string s = "[";
    for (std::size_t d = 0; d < f.dims.size(); ++d) s += (d ? ", " : "") + f.dims[d].text;
    return s + "]";
  }

  // Binds every count the present arrays' shapes give, solving products with one unknown factor, and
  // checks every dimension against what is known; an error names the array, the dimension and both values.
  void bind_dims(std::span<const char> present, const std::vector<ArrayView>& views, std::int64_t* dims, char* known) const {
    const std::string& kname = sig_.kernel;
    const std::size_t nf = sig_.fields.size();
    for (int pass = 0; pass < 4; ++pass) {
      bool progress = false, pending = false;
      for (std::size_t i = 0; i < nf; ++i) {
        const Field& f = sig_.fields[i];
        if (f.source != Field::Source::Array || !present[i]) continue;
        const ArrayView& a = views[i];
        for (std::size_t d = 0; d < f.dims.size(); ++d) {
          const DimExpr& e = f.dims[d];
          const std::vector<int>& sl = dim_slots_[i][d];
          const std::int64_t got = e.flat ? a.size : a.shape[d];
          std::int64_t product = e.coef;
          int unknown = -1, unknowns = 0;
          for (int s : sl) {
            if (known[s]) product *= dims[s];
            else unknown = s, ++unknowns;
          }
          const auto mismatch = [&](const std::string& expected) {
            value_error(kname + ": argument '" + f.name + "' has shape " + a.shape_text() + "; " +
                        (e.flat ? std::string("its size") : "dimension " + std::to_string(d)) + " (" + e.text + ") must be " +
                        expected + " " + bindings_text(e, sl, dims, known) + ", got " + std::to_string(got) + " (expected shape " +
                        dims_text(f) + ")");
          };
          if (unknowns == 0) {
            if (product + e.offset != got) mismatch(std::to_string(product + e.offset));
          } else if (unknowns == 1) {
            const std::int64_t rest = got - e.offset;
            if (rest < 0 || (product != 0 && rest % product != 0))
              mismatch(e.offset ? "at least " + std::to_string(e.offset) : "a multiple of " + std::to_string(product));
            if (product == 0) continue;  // 0 x anything: nothing to learn
            dims[unknown] = rest / product, known[unknown] = 1, progress = true;
          } else {
            pending = true;
          }
        }
      }
      if (!pending) return;
      if (!progress) break;
    }
    value_error(kname + ": the arrays' shapes leave a dimension unknown; the kernel takes " + sig_.python_signature());
  }
  std::string bindings_text(const DimExpr& e, const std::vector<int>& sl, const std::int64_t* dims, const char* known) const {
    std::string s;
    for (std::size_t k = 0; k < sl.size(); ++k)
      if (known[sl[k]]) s += (s.empty() ? "" : ", ") + e.names[k] + " = " + std::to_string(dims[sl[k]]);
    return s.empty() ? "" : "(" + s + ")";
  }

  void gather_chain(const Field& f, const jit::Chain& chain, PyObject* given, Value& out, std::vector<ArrayView>& views) const {
    const std::string& kname = sig_.kernel;
    const std::string where = kname + ": " + f.name + " operands";
    std::vector<jit::OperandKind> kinds;
    for (int s = 0; s < chain.size(); ++s)
      if (jit::step_operand(chain[s]) != jit::OperandKind::None) kinds.push_back(jit::step_operand(chain[s]));
    nb::handle h(given ? given : Py_None);
    std::size_t n = 0;
    if (!h.is_none()) {
      if (!nb::isinstance<nb::sequence>(h) || nb::isinstance<nb::str>(h))
        type_error(where + " must be a sequence (one a step that takes one: " + chain.to_string() + ")");
      n = nb::len(h);
    }
    if (n != kinds.size())
      type_error(where + ": the chain " + chain.to_string() + " takes " + std::to_string(kinds.size()) + ", got " + std::to_string(n));
    const ArrayView& like = views[static_cast<std::size_t>(f.other_index)];
    const std::int64_t last = like.ndim ? like.shape[like.ndim - 1] : 1, like_size = like.size;  // views grows below
    for (std::size_t j = 0; j < n; ++j) {
      nb::object item = h[j];
      const std::string which = where + " [" + std::to_string(j) + "]";
      if (kinds[j] == jit::OperandKind::Scalar) {
        double v = PyFloat_AsDouble(item.ptr());
        if (v == -1.0 && PyErr_Occurred()) {
          PyErr_Clear();
          type_error(which + " must be a number, got " + Py_TYPE(item.ptr())->tp_name);
        }
        out.operands.add(jit::Operand(v));
        continue;
      }
      views.emplace_back();
      ArrayView& a = views.back();
      const bool write = kinds[j] == jit::OperandKind::Output;
      if (!view_array(item, write, a)) type_error(which + " must be an array, got " + Py_TYPE(item.ptr())->tp_name);
      Field op;
      op.name = f.name + "[" + std::to_string(j) + "]";
      op.source = Field::Source::Array;
      op.output = write;
      check_array(op, a);
      const std::int64_t want = kinds[j] == jit::OperandKind::Vector ? last : like_size;
      if (a.size != want)
        value_error(which + " has " + std::to_string(a.size) + " elements; it must have " + std::to_string(want) + " (" +
                    (kinds[j] == jit::OperandKind::Vector ? "the last dimension" : "the size") + " of '" + f.other + "')");
      if (write) out.operands.add(jit::MutPtr(const_cast<void*>(a.data), dtype_));
      else out.operands.add(jit::ConstPtr(a.data, dtype_));
    }
  }

  // The caller's stream: `stream=` (an int handle, or an object with .cuda_stream (torch) or .ptr
  // (CuPy)); else, for GPU arrays, the current stream of the framework of the first one.
  jit::Stream pick_stream(nb::handle stream_arg, const std::vector<ArrayView>& views, std::span<const char> present) const {
    if (stream_arg.is_valid() && !stream_arg.is_none()) {
      nb::handle h = stream_arg;
      nb::object attr;
      if (nb::hasattr(h, "cuda_stream")) attr = h.attr("cuda_stream"), h = attr;
      else if (nb::hasattr(h, "ptr")) attr = h.attr("ptr"), h = attr;
      if (!PyLong_Check(h.ptr())) type_error(sig_.kernel + ": stream must be an int handle, a torch or a CuPy stream");
      return jit::Stream{reinterpret_cast<void*>(static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(h.ptr())))};
    }
    if (kernel_->backend() == jit::Backend::Cpu) return {};
    for (std::size_t i = 0; i < views.size() && i < present.size(); ++i) {
      if (present[i] && views[i].device_type == 2) return current_stream(views[i].device_id);
    }
    return {};
  }

 public:
  // The framework whose arrays this call got, set by __call__ from the first array's type.
  static jit::Stream current_stream_of(nb::handle array, int device) {
    static nb::object torch_stream, cupy_stream;
    const char* mod = nullptr;
    nb::object module = nb::borrow(array.type().attr("__module__"));
    mod = PyUnicode_AsUTF8(module.ptr());
    if (mod && std::strncmp(mod, "torch", 5) == 0) {
      if (!torch_stream.is_valid()) torch_stream = nb::module_::import_("torch").attr("_C").attr("_cuda_getCurrentRawStream");
      return jit::Stream{reinterpret_cast<void*>(static_cast<std::uintptr_t>(nb::cast<std::uint64_t>(torch_stream(device))))};
    }
    if (mod && std::strncmp(mod, "cupy", 4) == 0) {
      if (!cupy_stream.is_valid()) cupy_stream = nb::module_::import_("cupy").attr("cuda").attr("get_current_stream");
      return jit::Stream{reinterpret_cast<void*>(static_cast<std::uintptr_t>(nb::cast<std::uint64_t>(cupy_stream().attr("ptr"))))};
    }
    return {};
  }
  nb::handle first_gpu_array = nb::handle();

 private:
  jit::Stream current_stream(int device) const {
    if (!first_gpu_array.is_valid()) return {};
    return current_stream_of(first_gpu_array, device);
  }

  Signature sig_;
  std::unique_ptr<TypedLaunch> kernel_;
  jit::DType dtype_ = jit::DType::f32;
  DimSlots slots_;
  std::vector<std::vector<std::vector<int>>> dim_slots_;  // [field][dim][factor] -> slot
  std::vector<int> field_slot_;
  std::vector<char> layouts_col_;
  std::vector<std::pair<int, jit::Chain>> chains_;
};

// The signature of a binding, checked against the descriptor's Args once.
const Signature& checked_signature(const KernelBinding& b) {
  static std::unordered_map<std::string, Signature> parsed;
  if (auto it = parsed.find(b.kernel); it != parsed.end()) return it->second;
  Signature sig = parse_signature(b.kernel, b.declaration);
  if (sig.fields.size() != b.field_types.size())
    throw std::logic_error(b.kernel + ": its Python signature names " + std::to_string(sig.fields.size()) +
                           " fields; the descriptor's Args has " + std::to_string(b.field_types.size()));
  for (std::size_t i = 0; i < sig.fields.size(); ++i) {
    const FieldType want = sig.fields[i].expected, have = b.field_types[i];
    const bool pointer_like = (want == FieldType::I32Ptr) && (have == FieldType::I32Ptr || have == FieldType::I64Ptr);
    if (want != have && !pointer_like)
      throw std::logic_error(b.kernel + ": field " + std::to_string(i) + " ('" + sig.fields[i].name + "') of its Python signature is " +
                             std::string(field_type_name(want)) + "; the descriptor's is " + std::string(field_type_name(have)));
  }
  for (std::size_t i = 0; i < b.param_fields.size(); ++i)
    if (b.param_fields[i].kind == ParamField::Kind::Unmapped)
      throw std::logic_error(b.kernel + ": field " + std::to_string(i) + " of its Params is not written by to_params in a way the binding reads");
  return parsed.emplace(b.kernel, std::move(sig)).first->second;
}

// Params the caller left out take the descriptor's defaults where they are switches: a text param's
// (style=neox, a_layout=row, approximate=none) or an integer's of 0 or 1 (causal, window, group, q_len),
// when the kernel allows that value. dtype and sizes (hidden, head_dim) stay the caller's to give.
jit::ParamSet with_defaults(const KernelBinding& b, jit::ParamSet set) {
  const auto specs = jit::registered_kernels();
  const jit::KernelSpec* spec = nullptr;
  for (const auto& s : specs)
    if (s.name == b.kernel) spec = &s;
  if (!spec) return set;
  for (const auto& [name, value] : b.default_params.values()) {
    if (name == "dtype" || set.find(name)) continue;
    for (const auto& p : spec->params) {
      if (p.name != name || p.chain) continue;
      bool ok = false;
      if (p.is_text() && std::holds_alternative<std::string>(value))
        for (const auto& c : p.choices) ok = ok || c == std::get<std::string>(value);
      if (!p.is_text() && std::holds_alternative<std::int64_t>(value)) {
        const std::int64_t v = std::get<std::int64_t>(value);
        ok = (v == 0 || v == 1) && v >= p.min && v <= p.max;
      }
      if (ok) set.set(name, value);
    }
  }
  return set;
}

jit::Target parse_target(const std::optional<std::string>& target, int device) {
  jit::Target t = !target || target->empty() ? jit::default_target() : jit::Target::parse(*target);
  if (device < -1) throw jit::Error(jit::ErrorCode::InvalidParams, "device must be >= 0, got " + std::to_string(device));
  if (device >= 0) {
    if (t.backend == jit::Backend::Cpu && device != 0)
      throw jit::Error(jit::ErrorCode::InvalidParams, "the CPU target has no device " + std::to_string(device));
    t.device = device;
  }
  return t;
}

// ---- kernels registered from Python ------------------------------------------------------------------
// Their launch packs the signature's fields in order (arrays as pointers, counts and integers as
// int64, numbers in the kernel's scalar type), all but the `work` count, which is the range the
// kernel covers (the CPU text's jitk_begin .. jitk_end).
struct UserKernel {
  Signature sig;
  int work = -1;  // the field holding the work count
  std::int64_t min_grain = 1;
};
std::unordered_map<std::string, UserKernel>& user_kernels() {
  static std::unordered_map<std::string, UserKernel> kernels;
  return kernels;
}

class UserLaunch final : public TypedLaunch {
 public:
  UserLaunch(const UserKernel& k, jit::detail::KernelHandle handle, jit::ParamSet params)
      : kernel_(k), handle_(std::move(handle)), params_(std::move(params)) {
    if (const jit::ParamValue* d = params_.find("dtype"); d && *d == jit::ParamValue(std::string("f64"))) scalar_ = jit::DType::f64;
  }
  void launch(const Value* values, jit::Stream stream) const override {
    jit::detail::ArgPack pack;
    for (std::size_t i = 0; i < kernel_.sig.fields.size(); ++i) {
      if (static_cast<int>(i) == kernel_.work) continue;
      const Field& f = kernel_.sig.fields[i];
      const Value& v = values[i];
      switch (f.expected) {
        case FieldType::F64: pack.add_scalar(v.d, scalar_); break;
        case FieldType::Bool: pack.add_i64(v.b ? 1 : 0); break;
        case FieldType::I64: case FieldType::Size: pack.add_i64(v.i); break;
        default: pack.add_pointer(v.p);
      }
    }
    pack.work_items = values[kernel_.work].i;
    pack.min_grain = kernel_.min_grain;
    pack.stream = stream;
    handle_.kernel->launch(pack);
  }
  jit::Backend backend() const override { return handle_.kernel->backend(); }
  const std::string& cache_key() const override { return handle_.key; }
  const std::string& implementation() const override { return handle_.implementation; }
  jit::Origin origin() const override { return handle_.origin; }
  jit::ParamSet params() const override { return params_; }

 private:
  const UserKernel& kernel_;
  jit::detail::KernelHandle handle_;
  jit::ParamSet params_;
  jit::DType scalar_ = jit::DType::f32;
};

void register_user_kernel(const std::string& name, const std::string& summary, const nb::dict& params,
                          const std::string& signature, const std::string& work, const std::string& cpu_text,
                          std::int64_t min_grain) {
  g_library_used = true;
  Signature sig;
  try {
    sig = parse_signature(name, signature);
  } catch (const std::invalid_argument& e) {
    throw jit::Error(jit::ErrorCode::InvalidParams, e.what());
  }
  UserKernel uk;
  for (std::size_t i = 0; i < sig.fields.size(); ++i) {
    const Field& f = sig.fields[i];
    if (f.name == work) uk.work = static_cast<int>(i);
    if (f.source == Field::Source::Chain || f.source == Field::Source::Buffer)
      throw jit::Error(jit::ErrorCode::InvalidParams, name + ": a registered kernel's signature takes arrays, counts and numbers, not '" + f.name + "'");
    if (f.source == Field::Source::Array && f.elem != ElemRule::Kernel && f.elem != ElemRule::Scalar)
      throw jit::Error(jit::ErrorCode::InvalidParams, name + ": '" + f.name + "': a registered kernel's arrays have the kernel's dtype (or /acc)");
  }
  if (uk.work < 0 || sig.fields[static_cast<std::size_t>(uk.work)].source != Field::Source::Dim)
    throw jit::Error(jit::ErrorCode::InvalidParams, name + ": work = '" + work + "' must name a count of the signature (e.g. rows)");
  if (min_grain < 1) throw jit::Error(jit::ErrorCode::InvalidParams, name + ": min_grain must be >= 1");
  uk.min_grain = min_grain;
  uk.sig = std::move(sig);
  if (find_binding(name) || user_kernels().count(name))
    throw jit::Error(jit::ErrorCode::InvalidParams, "cannot register kernel '" + name + "': the name is taken");
  jit::KernelSpec spec;
  spec.name = name;
  spec.summary = summary;
  std::vector<jit::DType> dtypes;
  for (auto [key, value] : params) {
    jit::ParamSpec p;
    p.name = nb::cast<std::string>(nb::str(key));
    if (nb::isinstance<nb::tuple>(value) && nb::len(value) == 2 && PyLong_Check(value[0].ptr()) && PyLong_Check(value[1].ptr())) {
      p.min = nb::cast<std::int64_t>(value[0]);
      p.max = nb::cast<std::int64_t>(value[1]);
    } else if (nb::isinstance<nb::sequence>(value) && !nb::isinstance<nb::str>(value)) {
      for (nb::handle c : value) p.choices.push_back(nb::cast<std::string>(c));
      if (p.choices.empty()) throw jit::Error(jit::ErrorCode::InvalidParams, name + ": param '" + p.name + "' has no choices");
    } else {
      throw jit::Error(jit::ErrorCode::InvalidParams, name + ": param '" + p.name +
                                                          "' is a list of its text values or a (min, max) pair of integers");
    }
    if (p.name == "dtype")
      for (const auto& c : p.choices)
        for (jit::DType d : {jit::DType::f32, jit::DType::f64})
          if (jit::dtype_name(d) == c) dtypes.push_back(d);
    spec.params.push_back(std::move(p));
  }
  jit::Implementation cpu;
  cpu.name = "cpu";
  cpu.backend = jit::Backend::Cpu;
  cpu.generic = true;
  cpu.file = name + ".cpp";
  cpu.text = cpu_text;
  cpu.dtypes = dtypes;
  spec.implementations.push_back(std::move(cpu));
  jit::register_kernel(std::move(spec));  // throws, registering nothing, when the spec is unsound
  user_kernels().emplace(name, std::move(uk));
}

std::unique_ptr<Launcher> make_user_launcher(const std::string& kernel, const UserKernel& uk, const nb::dict& params,
                                             const jit::Target& t, const jit::Selection& sel) {
  const jit::ParamSet set = param_set(kernel, params);
  jit::detail::KernelHandle h = jit::detail::get_kernel(kernel, set, t, sel);
  return std::make_unique<Launcher>(uk.sig, std::make_unique<UserLaunch>(uk, std::move(h), set));
}

std::unique_ptr<Launcher> make_launcher(const std::string& kernel, const nb::dict& params, const std::optional<std::string>& target,
                                        const std::optional<std::string>& implementation, bool training,
                                        const std::optional<std::vector<std::int64_t>>& tune_shape, int device) {
  g_library_used = true;
  const KernelBinding* b = find_binding(kernel);
  if (!b) {
    if (auto it = user_kernels().find(kernel); it != user_kernels().end() && !tune_shape) {
      jit::Selection sel;
      if (implementation) sel.implementation = *implementation;
      if (training) sel.mode = jit::Mode::Training;
      return make_user_launcher(kernel, it->second, params, parse_target(target, device), sel);
    }
    unknown_kernel(kernel);
  }
  const Signature& sig = checked_signature(*b);
  const jit::ParamSet set = with_defaults(*b, param_set(kernel, params));
  const jit::Target t = parse_target(target, device);
  jit::Selection sel;
  if (implementation) sel.implementation = *implementation;
  if (training) sel.mode = jit::Mode::Training;
  jit::choose(kernel, set, t, sel);  // the library's own checks and messages for the params
  std::unique_ptr<TypedLaunch> k;
  try {
    if (tune_shape) {
      if (!b->get_tuned) throw jit::Error(jit::ErrorCode::InvalidParams, kernel + " cannot be tuned (get_tuned takes gemm)");
      k = b->get_tuned(set, *tune_shape, t);
    } else {
      k = b->get(set, t, sel);
    }
  } catch (const std::invalid_argument& e) {
    throw jit::Error(jit::ErrorCode::InvalidParams, e.what());
  }
  return std::make_unique<Launcher>(sig, std::move(k));
}

// A CPU launch whose largest array has this many bytes runs without the GIL (about 20 us of work).
constexpr std::int64_t kReleaseGilBytes = 256 * 1024;

thread_local std::vector<Value> t_values;
thread_local std::vector<ArrayView> t_views;

void call_launcher(Launcher& l, const nb::args& args, const nb::kwargs& kwargs) {
  jit::Stream stream;
  // the first GPU array's framework picks the stream
  l.first_gpu_array = nb::handle();
  std::vector<Value>& values = t_values;
  std::vector<ArrayView>& views = t_views;
  struct Release {  // drop the imports (and their references) when the call ends
    std::vector<ArrayView>& v;
    ~Release() { v.clear(); }
  } release{views};
  if (l.kernel().backend() != jit::Backend::Cpu) {
    for (std::size_t j = 0; j < args.size() && !l.first_gpu_array.is_valid(); ++j)
      if (!PyFloat_Check(args[j].ptr()) && !PyLong_Check(args[j].ptr())) l.first_gpu_array = args[j];
    if (!l.first_gpu_array.is_valid())
      for (auto [k, v] : kwargs)
        if (!PyFloat_Check(v.ptr()) && !PyLong_Check(v.ptr()) && !v.is_none()) {
          l.first_gpu_array = v;
          break;
        }
  }
  l.gather(args, kwargs, values, views, stream);
  // CPU kernels run to completion on jitk's thread pool: long ones without the GIL, so other Python
  // threads run meanwhile. Short ones (and GPU launches, which only enqueue) keep it: handing it over
  // costs more than they take.
  std::int64_t largest = 0;
  for (const auto& v : views) largest = std::max(largest, v.size * (v.bits / 8));
  if (l.kernel().backend() == jit::Backend::Cpu && largest >= kReleaseGilBytes) {
    nb::gil_scoped_release unlocked;
    l.launch(values, stream);
  } else {
    l.launch(values, stream);
  }
}

// Seconds a launch takes from C++ (the values gathered once) and from Python, `iterations` times each.
nb::dict time_launches(Launcher& l, int iterations, const nb::args& args, const nb::kwargs& kwargs) {
  using clock = std::chrono::steady_clock;
  jit::Stream stream;
  std::vector<Value> values;
  std::vector<ArrayView> views;
  l.gather(args, kwargs, values, views, stream);
  l.launch(values, stream);
  const std::vector<Value> gathered = values;
  auto t0 = clock::now();
  for (int i = 0; i < iterations; ++i) l.launch(gathered, stream);
  const double cpp = std::chrono::duration<double>(clock::now() - t0).count() / iterations;
  t0 = clock::now();
  for (int i = 0; i < iterations; ++i) {
    l.gather(args, kwargs, values, views, stream);
  }
  const double gather = std::chrono::duration<double>(clock::now() - t0).count() / iterations;
  nb::dict out;
  out["cpp_launch_s"] = cpp;
  out["gather_s"] = gather;
  return out;
}

nb::dict artifact_dict(const jit::cache::ArtifactInfo& a) {
  nb::dict d;
  d["key"] = a.key, d["kernel"] = a.kernel, d["params"] = a.params, d["backend"] = a.backend, d["arch"] = a.arch;
  d["compiler"] = a.compiler, d["size_bytes"] = a.size_bytes, d["compile_ms"] = a.compile_ms, d["created"] = a.created;
  d["last_used"] = a.last_used, d["hits"] = a.hits, d["implementation"] = a.implementation;
  d["implementation_version"] = a.implementation_version, d["launch"] = a.launch;
  return d;
}

nb::dict clear_dict(const jit::cache::ClearResult& r) {
  nb::dict d;
  d["entries"] = r.entries, d["bytes"] = r.bytes;
  return d;
}

}  // namespace

}  // namespace jitk_py

NB_MODULE(_jitk, m) {
  using namespace jitk_py;
  m.doc() = "jitk's C++ core: kernels by name, launched on arrays; the cache tools";

  g_error = PyErr_NewExceptionWithDoc("jitk.Error", "A jitk failure: .kind, .message, .kernel, .params, .log, .options",
                                      PyExc_RuntimeError, nullptr);
  nb::object bases_p = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_params_error = PyErr_NewExceptionWithDoc("jitk.ParamsError", "An unknown kernel, or params it does not take", bases_p.ptr(), nullptr);
  g_argument_error = PyErr_NewExceptionWithDoc("jitk.ArgumentError", "A launch argument the kernel refuses", bases_p.ptr(), nullptr);
  m.attr("Error") = nb::handle(g_error);
  m.attr("ParamsError") = nb::handle(g_params_error);
  m.attr("ArgumentError") = nb::handle(g_argument_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const jit::Error& e) {
      raise_jit_error(e);
    }
  });

  nb::class_<Launcher>(m, "Kernel", "A kernel specialized for its params on one target; call it on arrays")
      .def("__call__", &call_launcher, "args"_a, "kwargs"_a, nb::sig("def __call__(self, *args, stream=None, **kwargs) -> None"))
      .def("_time_launches", &time_launches)
      .def_prop_ro("name", [](const Launcher& l) { return l.signature().kernel; })
      .def_prop_ro("signature", [](const Launcher& l) { return l.signature().kernel + l.signature().python_signature(); })
      .def_prop_ro("params", [](const Launcher& l) { return l.kernel().params().to_string(); })
      .def_prop_ro("cache_key", [](const Launcher& l) { return l.kernel().cache_key(); })
      .def_prop_ro("implementation", [](const Launcher& l) { return l.kernel().implementation(); })
      .def_prop_ro("backend", [](const Launcher& l) { return std::string(jit::backend_name(l.kernel().backend())); })
      .def_prop_ro("origin", [](const Launcher& l) { return l.kernel().origin() == jit::Origin::Compiled ? "compiled" : "disk cache"; })
      .def("__repr__", [](const Launcher& l) {
        return "<jitk.Kernel " + l.signature().kernel + " [" + l.kernel().params().to_string() + "] on " +
               std::string(jit::backend_name(l.kernel().backend())) + " (" + l.kernel().implementation() + ")>";
      });

  m.def("_get",
        [](const std::string& kernel, const nb::dict& params, const std::optional<std::string>& target,
           const std::optional<std::string>& implementation, bool training, int device) {
          return make_launcher(kernel, params, target, implementation, training, std::nullopt, device);
        },
        "kernel"_a, "params"_a, "target"_a = nb::none(), "implementation"_a = nb::none(), "training"_a = false,
        "device"_a = -1);
  m.def("_get_tuned",
        [](const std::string& kernel, const nb::dict& params, const std::vector<std::int64_t>& shape,
           const std::optional<std::string>& target, int device) {
          return make_launcher(kernel, params, target, std::nullopt, false, shape, device);
        },
        "kernel"_a, "params"_a, "shape"_a, "target"_a = nb::none(), "device"_a = -1);
  m.def("_kernels", [] {
    nb::list out;
    const auto specs = jit::registered_kernels();
    for (const auto& b : kernel_bindings()) {
      const Signature& sig = checked_signature(b);
      nb::dict d;
      d["name"] = b.kernel;
      d["signature"] = sig.python_signature();
      d["declaration"] = b.declaration;
      d["tunable"] = b.get_tuned != nullptr;
      d["shape_names"] = b.shape_names ? std::string(b.shape_names) : std::string();
      nb::list params;
      for (const auto& s : specs)
        if (s.name == b.kernel) {
          d["summary"] = s.summary;
          for (const auto& p : s.params) {
            nb::dict pd;
            pd["name"] = p.name, pd["allowed"] = p.allowed(), pd["doc"] = p.doc, pd["optional"] = p.chain || p.fallback.has_value();
            pd["choices"] = p.choices;
            params.append(pd);
          }
        }
      d["params"] = params;
      nb::list args;
      for (int idx : sig.user_order) {
        const Field& f = sig.fields[static_cast<std::size_t>(idx)];
        nb::dict a;
        a["name"] = f.name;
        a["kind"] = f.source == Field::Source::Array ? (f.output ? "out" : "in")
                    : f.source == Field::Source::Int ? "int"
                    : f.source == Field::Source::Float ? "float"
                    : f.source == Field::Source::Chain ? "chain"
                                                        : "buffer";
        a["optional"] = f.optional || f.has_default || f.source == Field::Source::Chain;
        if (f.has_default) a["default"] = f.default_value;
        nb::list dims;
        for (const auto& e : f.dims) dims.append(e.text);
        a["dims"] = dims;
        a["dtype"] = f.elem == ElemRule::Scalar ? "acc" : f.elem == ElemRule::I32 ? "i32" : f.elem == ElemRule::I64 ? "i64" : f.elem == ElemRule::F32 ? "f32" : "dtype";
        args.append(a);
      }
      d["args"] = args;
      out.append(d);
    }
    return out;
  });
  m.def("_register_kernel", &register_user_kernel, "name"_a, "summary"_a, "params"_a, "signature"_a, "work"_a,
        "cpu"_a, "min_grain"_a = 1);
  m.def("_registered_signature", [](const std::string& name) -> std::optional<std::string> {
    if (auto it = user_kernels().find(name); it != user_kernels().end()) return name + it->second.sig.python_signature();
    return std::nullopt;
  });
  m.def("_not_bound", [] { return kernels_not_bound(); });
  m.def("_catalog", [] {  // every kernel this process knows (shipped, then registered)
    std::vector<std::string> names;
    for (const auto& s : jit::registered_kernels()) names.push_back(s.name);
    return names;
  });
  m.def("_library_used", [] { return g_library_used.load(); });
  // jitk.configure: validated in Python; jit::configure throws InvalidParams once the cache is in
  // use and a value differs (the log level applies at any time).
  m.def("_configure", [](const std::optional<std::string>& cache_dir, const std::optional<std::string>& log_level,
                         const std::optional<std::string>& cache_mode) {
    jit::Config config;
    if (cache_dir) config.cache_dir = *cache_dir;
    if (log_level) {
      const auto level = jit::parse_log_level(*log_level);
      if (!level) throw jit::Error(jit::ErrorCode::InvalidParams, "log_level '" + *log_level + "' is not a level");
      config.log_level = *level;
    }
    if (cache_mode) {
      const auto mode = jit::parse_cache_mode(*cache_mode);
      if (!mode) throw jit::Error(jit::ErrorCode::InvalidParams, "cache_mode '" + *cache_mode + "' is not a cache mode");
      config.cache_mode = *mode;
    }
    jit::configure(config);
  });
  m.def("default_target", [] {
    g_library_used = true;
    return jit::default_target().to_string();
  });

  // ---- the cache tools: the functions the jitk tool calls --------------------------------------
  nb::module_ c = m.def_submodule("_cache");
  c.def("root", [] {
    g_library_used = true;
    return jit::cache::root().string();
  });
  c.def("unavailable_reason", [] {
    g_library_used = true;
    return jit::cache::unavailable_reason();
  });
  c.def("stats", [] {
    g_library_used = true;
    const auto s = jit::cache::stats();
    nb::dict d;
    d["entries"] = s.entries, d["bytes"] = s.bytes, d["hits"] = s.hits, d["misses"] = s.misses, d["compiles"] = s.compiles;
    return d;
  });
  c.def("ls", [] {
    g_library_used = true;
    nb::list out;
    for (const auto& a : jit::cache::list()) out.append(artifact_dict(a));
    return out;
  });
  c.def("clear", [](const std::optional<std::string>& kernel) {
    g_library_used = true;
    return clear_dict(kernel ? jit::cache::clear_kernel(*kernel) : jit::cache::clear());
  }, "kernel"_a = nb::none());
  c.def("prune", [](const std::optional<std::int64_t>& max_bytes, const std::optional<std::int64_t>& older_than_s) {
    g_library_used = true;
    return clear_dict(jit::cache::prune(max_bytes, older_than_s));
  }, "max_bytes"_a = nb::none(), "older_than_s"_a = nb::none());
  c.def("prune_stale", [] {
    g_library_used = true;
    const auto r = jit::cache::prune_stale();
    nb::dict d = clear_dict(r.removed);
    d["kept_unknown"] = r.kept_unknown;
    d["unknown"] = r.unknown;
    return d;
  });
  c.def("parse_size", &jit::cache::parse_size);
  c.def("parse_age", &jit::cache::parse_age);
  c.def("verify", [](bool fix) {
    g_library_used = true;
    nb::list out;
    for (const auto& p : jit::cache::verify(fix)) out.append(nb::make_tuple(p.key, p.what));
    return out;
  }, "fix"_a = false);
  c.def("backends", [] {
    g_library_used = true;
    nb::list out;
    for (const auto& b : jit::cache::backends()) {
      nb::dict d;
      d["name"] = b.name, d["available"] = b.available, d["detail"] = b.detail;
      out.append(d);
    }
    return out;
  });
  c.def("warm", [](const std::string& manifest, int jobs) {
    g_library_used = true;
    const auto items = jit::cache::parse_manifest(manifest);
    std::vector<jit::cache::WarmResult> results;
    {
      nb::gil_scoped_release unlocked;
      results = jit::cache::warm(items, std::max(1, jobs));
    }
    nb::list out;
    for (const auto& r : results) {
      nb::dict d;
      d["kernel"] = r.item ? r.item->kernel : std::string();
      d["target"] = r.item ? r.item->target.to_string() : std::string();
      d["params"] = r.item ? r.item->params.to_string() : std::string();
      d["origin"] = r.item ? r.item->origin : std::string();
      d["outcome"] = r.outcome == jit::cache::WarmResult::Outcome::Compiled        ? "compiled"
                     : r.outcome == jit::cache::WarmResult::Outcome::AlreadyCached ? "cached"
                     : r.outcome == jit::cache::WarmResult::Outcome::Failed        ? "failed"
                                                                                   : "not started";
      d["ms"] = r.ms, d["error"] = r.error;
      out.append(d);
    }
    return out;
  }, "manifest"_a, "jobs"_a = 1);
  c.def("export_pack", [](const std::string& file, const std::optional<std::string>& target) {
    g_library_used = true;
    std::optional<jit::Target> t;
    if (target) t = jit::Target::parse(*target);
    const auto r = jit::cache::export_pack(file, t);
    nb::dict d;
    d["artifacts"] = r.artifacts, d["tuning"] = r.tuning, d["bytes"] = r.bytes, d["skipped"] = r.skipped;
    return d;
  }, "file"_a, "target"_a = nb::none());
  c.def("import_pack", [](const std::string& file) {
    g_library_used = true;
    const auto r = jit::cache::import_pack(file);
    nb::dict d;
    d["imported"] = r.imported, d["already"] = r.already, d["tuning_imported"] = r.tuning_imported;
    d["tuning_already"] = r.tuning_already, d["stale"] = r.stale, d["unchecked"] = r.unchecked;
    return d;
  }, "file"_a);
}
