// Kernels registered from Python: their spec (params, the CPU text) registered with the library, and
// their launch, which packs the gathered values in the signature's order.
#include "user_kernels.hpp"

#include <nanobind/stl/string.h>  // nb::cast<std::string>: the same caster in every file

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "get.hpp"
#include "jit/registry.hpp"
#include "kernel_table.hpp"
#include "launcher.hpp"
#include "module.hpp"

namespace jitk_py {

namespace {

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

}  // namespace

const UserKernel* find_user_kernel(const std::string& name) {
  const auto it = user_kernels().find(name);
  return it == user_kernels().end() ? nullptr : &it->second;
}

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
  if (find_binding(name) || find_user_kernel(name))
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
  if (const auto [f, d] = dim_on_unknown_param(uk.sig, [&](const std::string& param) {
        return std::any_of(spec.params.begin(), spec.params.end(), [&](const auto& p) { return p.name == param; });
      });
      d)
    throw jit::Error(jit::ErrorCode::InvalidParams, name + ": the dimension '" + d->text + "' of '" + f->name + "' depends on '" +
                                                        d->when_param + "', which is not one of its params");
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
  return std::make_unique<Launcher>(uk.sig, std::make_unique<UserLaunch>(uk, std::move(h), set), t.device);
}

}  // namespace jitk_py
