// jitk.get from Python: params from Python values (the descriptor's defaults for switches left out),
// the target, the shipped kernel's binding or the registered kernel, and the Launcher over it.
#include "get.hpp"

#include <nanobind/stl/string.h>  // nb::cast<std::string>: the same caster in every file

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <variant>

#include "errors.hpp"
#include "jit/registry.hpp"
#include "launcher.hpp"
#include "module.hpp"
#include "user_kernels.hpp"

namespace jitk_py {

namespace {

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

}  // namespace

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
  if (const auto [f, d] = dim_on_unknown_param(sig, [&](const std::string& name) {
        return std::any_of(b.param_fields.begin(), b.param_fields.end(), [&](const auto& p) { return p.name == name; });
      });
      d)
    throw std::logic_error(b.kernel + ": the dimension '" + d->text + "' of its Python signature depends on '" + d->when_param +
                           "', which is not a param of its descriptor");
  for (std::size_t i = 0; i < b.param_fields.size(); ++i)
    if (b.param_fields[i].kind == ParamField::Kind::Unmapped)
      throw std::logic_error(b.kernel + ": field " + std::to_string(i) + " of its Params is not written by to_params in a way the binding reads");
  return parsed.emplace(b.kernel, std::move(sig)).first->second;
}

std::unique_ptr<Launcher> make_launcher(const std::string& kernel, const nb::dict& params, const std::optional<std::string>& target,
                                        const std::optional<std::string>& implementation, bool training,
                                        const std::optional<std::vector<std::int64_t>>& tune_shape, int device) {
  g_library_used = true;
  jit::Selection sel;
  if (implementation) sel.implementation = *implementation;
  if (training) sel.mode = jit::Mode::Training;
  const KernelBinding* b = find_binding(kernel);
  if (!b) {
    if (const UserKernel* uk = find_user_kernel(kernel); uk && !tune_shape)
      return make_user_launcher(kernel, *uk, params, parse_target(target, device), sel);
    unknown_kernel(kernel);
  }
  const Signature& sig = checked_signature(*b);
  const jit::ParamSet set = with_defaults(*b, param_set(kernel, params));
  const jit::Target t = parse_target(target, device);
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
  return std::make_unique<Launcher>(sig, std::move(k), t.device);
}

}  // namespace jitk_py
