// Launcher: a Python call's arguments checked against the kernel's signature and gathered into its
// launch values; the launch itself, with the GIL released for long CPU kernels.
#include "launcher.hpp"

#include <nanobind/stl/string.h>  // nb::cast<std::string>: the same caster in every file

#include <algorithm>
#include <chrono>
#include <cstring>
#include <variant>

#include "errors.hpp"

namespace jitk_py {

namespace {

std::string type_text(int code, int bits) {
  ArrayView v;
  v.code = static_cast<std::uint8_t>(code), v.bits = static_cast<std::uint8_t>(bits);
  return v.dtype_name();
}

std::string strides_text(const ArrayView& a) {
  std::string s = "(";
  for (int i = 0; i < a.ndim; ++i) s += (i ? ", " : "") + std::to_string(a.strides[i]);
  return s + (a.ndim == 1 ? ",)" : ")");
}

std::string dims_text(const Field& f) {
  std::string s = "[";
  for (std::size_t d = 0; d < f.dims.size(); ++d) s += (d ? ", " : "") + f.dims[d].text;
  return s + "]";
}

// The current stream of the framework (torch, CuPy) the array belongs to.
jit::Stream current_stream_of(nb::handle array, int device) {
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

// A CPU launch whose largest array has this many bytes runs without the GIL (about 20 us of work).
constexpr std::int64_t kReleaseGilBytes = 256 * 1024;

thread_local std::vector<Value> t_values;
thread_local std::vector<ArrayView> t_views;

}  // namespace

Launcher::Launcher(Signature sig, std::unique_ptr<TypedLaunch> kernel, int device)
    : sig_(std::move(sig)), kernel_(std::move(kernel)), device_(device) {
  const jit::ParamSet params = kernel_->params();
  if (const jit::ParamValue* d = params.find("dtype"); d && std::holds_alternative<std::string>(*d)) {
    const std::string& t = std::get<std::string>(*d);
    for (jit::DType x : {jit::DType::f16, jit::DType::bf16, jit::DType::f32, jit::DType::f64})
      if (jit::dtype_name(x) == t) dtype_ = x;
  }
  // a dimension that depends on a param: the branch that holds for this kernel's params
  for (Field& f : sig_.fields)
    for (DimExpr& d : f.dims) {
      if (d.when_param.empty()) continue;
      const jit::ParamValue* v = params.find(d.when_param);
      if (!v)
        throw jit::Error(jit::ErrorCode::InvalidParams, sig_.kernel + ": the dimension '" + d.text + "' of argument '" + f.name +
                                                            "' depends on param '" + d.when_param + "', which the kernel does not have");
      const std::string value = std::holds_alternative<std::string>(*v) ? std::get<std::string>(*v)
                                : std::holds_alternative<std::int64_t>(*v) ? std::to_string(std::get<std::int64_t>(*v))
                                                                           : std::string();
      if ((value == d.when_value) != d.when_equal) {
        DimExpr other = std::move(d.otherwise[0]);
        d = std::move(other);
      } else {
        d.text = d.text.substr(0, d.text.find(" if "));
        d.when_param.clear(), d.otherwise.clear();
      }
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


void Launcher::gather(const nb::args& args, const nb::kwargs& kwargs, std::vector<Value>& values, std::vector<ArrayView>& views,
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

jit::DType Launcher::elem_dtype(const Field& f) const {
  switch (f.elem) {
    case ElemRule::Scalar: return dtype_ == jit::DType::f64 ? jit::DType::f64 : jit::DType::f32;
    case ElemRule::F32: return jit::DType::f32;
    default: return dtype_;
  }
}
// (code, bits) the field's element type is.
std::pair<int, int> Launcher::elem_code(const Field& f) const {
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

void Launcher::check_array(const Field& f, const ArrayView& a) const {
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
  // a GPU kernel reads and writes its own device's memory: an array on another GPU is refused
  if (backend != jit::Backend::Cpu && a.device_known && a.device_id != device_)
    value_error(where() + " is on " + a.device_name() + ", but the kernel was got for device " + std::to_string(device_) +
                " (get it with device=" + std::to_string(a.device_id) + ")");
  const bool col = !f.layout_param.empty() && layouts_col_[&f - sig_.fields.data()];
  if (col ? !a.f_contiguous() : !a.c_contiguous())
    value_error(where() + " must be " + (col ? "column-major (Fortran-contiguous, " + f.layout_param + " = col)" : std::string("contiguous")) +
                ", got strides (in elements) " + strides_text(a));
}

// Binds every count the present arrays' shapes give, solving products with one unknown factor, and
// checks every dimension against what is known; an error names the array, the dimension and both values.
void Launcher::bind_dims(std::span<const char> present, const std::vector<ArrayView>& views, std::int64_t* dims, char* known) const {
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
        bool overflow = false;
        int unknown = -1, unknowns = 0;
        for (int s : sl) {
          if (known[s]) overflow = __builtin_mul_overflow(product, dims[s], &product) || overflow;
          else unknown = s, ++unknowns;
        }
        const auto mismatch = [&](const std::string& expected) {
          value_error(kname + ": argument '" + f.name + "' has shape " + a.shape_text() + "; " +
                      (e.flat ? std::string("its size") : "dimension " + std::to_string(d)) + " (" + e.text + ") must be " +
                      expected + " " + bindings_text(e, sl, dims, known) + ", got " + std::to_string(got) + " (expected shape " +
                      dims_text(f) + ")");
        };
        if (overflow) mismatch("a size that fits 64 bits");  // never reached by real arrays: a param too large
        if (product < 0) mismatch("a size >= 0");
        const std::int64_t div = e.divisor;
        if (unknowns == 0) {
          std::int64_t want = 0;
          if (product % div != 0) mismatch("whole, but " + std::to_string(product) + " / " + std::to_string(div) + " is not");
          if (__builtin_add_overflow(product / div, e.offset, &want)) mismatch("a size that fits 64 bits");
          if (want != got) mismatch(std::to_string(want));
        } else if (unknowns == 1) {
          // got = product * x / div + offset: x = (got - offset) * div / product, exactly
          const std::int64_t rest = got - e.offset;
          std::int64_t scaled = 0;
          if (rest < 0 || __builtin_mul_overflow(rest, div, &scaled) || (product != 0 && scaled % product != 0))
            mismatch(e.offset ? "at least " + std::to_string(e.offset)
                              : div == 1 ? "a multiple of " + std::to_string(product)
                                         : "a multiple of " + std::to_string(product) + " / " + std::to_string(div));
          if (product == 0) continue;  // 0 x anything: nothing to learn
          dims[unknown] = scaled / product, known[unknown] = 1, progress = true;
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
std::string Launcher::bindings_text(const DimExpr& e, const std::vector<int>& sl, const std::int64_t* dims, const char* known) const {
  std::string s;
  for (std::size_t k = 0; k < sl.size(); ++k)
    if (known[sl[k]]) s += (s.empty() ? "" : ", ") + e.names[k] + " = " + std::to_string(dims[sl[k]]);
  return s.empty() ? "" : "(" + s + ")";
}


void Launcher::gather_chain(const Field& f, const jit::Chain& chain, PyObject* given, Value& out, std::vector<ArrayView>& views) const {
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
jit::Stream Launcher::pick_stream(nb::handle stream_arg, const std::vector<ArrayView>& views, std::span<const char> present) const {
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

jit::Stream Launcher::current_stream(int device) const {
  if (!first_gpu_array.is_valid()) return {};
  return current_stream_of(first_gpu_array, device);
}

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

}  // namespace jitk_py
