// The catalog of shipped kernels and the validation of their parameters.
#include "jit/kernel_catalog.hpp"

#include <algorithm>

namespace jit::detail {
namespace {

// Rows longer than this are not unrolled by specialization; the largest hidden size in use by
// today's models is 16384 (and 2x that for gated MLPs).
constexpr std::int64_t kMaxHidden = 1 << 20;

ParamSpec dtype_param() { return {"dtype", {"f32", "f64", "f16", "bf16"}, 0, 0, "element type"}; }
ParamSpec hidden_param() { return {"hidden", {}, 1, kMaxHidden, "row length the kernel is specialized for"}; }

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string ParamSpec::allowed() const {
  if (is_text()) return "one of " + join(choices);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

const std::vector<KernelDef>& kernel_catalog() {
  static const std::vector<KernelDef> catalog = {
      {"saxpy", "y = a * x + y", "saxpy.cpp", "saxpy.cu", GpuShape::Elementwise, {dtype_param()}, 1},
      {"silu_and_mul", "out = silu(x[:, :hidden]) * x[:, hidden:]", "silu_and_mul.cpp", "silu_and_mul.cu",
       GpuShape::Elementwise, {dtype_param(), hidden_param()}, 1},
      {"rms_norm", "y = x / sqrt(mean(x^2) + eps) * weight, per row", "rms_norm.cpp", "rms_norm.cu",
       GpuShape::PerRow, {dtype_param(), hidden_param()}, 1},
      {"softmax", "numerically stable softmax of each row", "softmax.cpp", "softmax.cu", GpuShape::PerRow,
       {dtype_param(), hidden_param()}, 1},
  };
  return catalog;
}

const KernelDef& find_kernel(std::string_view name) {
  const auto& all = kernel_catalog();
  auto it = std::find_if(all.begin(), all.end(), [&](const KernelDef& d) { return d.name == name; });
  if (it != all.end()) return *it;
  std::vector<std::string> names;
  for (const auto& d : all) names.push_back(d.name);
  throw Error(ErrorCode::UnknownKernel,
              "unknown kernel '" + std::string(name) + "'; jitk has: " + join(names));
}

const std::vector<std::string>& dtypes_for(Backend backend) {
  static const std::vector<std::string> cpu = {"f32", "f64"}, gpu = {"f32", "f16", "bf16"};
  return backend == Backend::Cpu ? cpu : gpu;
}

ParamSet validate_params(const KernelDef& def, const ParamSet& given, Backend backend) {
  ParamSet out = validate_params(def, given);
  auto fail = [&](const std::string& what) {
    throw Error(ErrorCode::InvalidParams, def.name + " on " + std::string(backend_name(backend)) + ": " + what);
  };
  if (const auto* d = out.find("dtype")) {
    const auto& allowed = dtypes_for(backend);
    const auto& dtype = std::get<std::string>(*d);
    if (std::find(allowed.begin(), allowed.end(), dtype) == allowed.end())
      fail("parameter 'dtype' = '" + dtype + "' is not supported; allowed: one of " + join(allowed));
  }
  if (const auto* h = out.find("hidden"); h && backend != Backend::Cpu && def.gpu_shape == GpuShape::PerRow &&
                                          std::get<std::int64_t>(*h) > kGpuMaxHidden)
    fail("parameter 'hidden' = " + std::to_string(std::get<std::int64_t>(*h)) +
         " is out of range; allowed: an integer in [1, " + std::to_string(kGpuMaxHidden) + "]");
  return out;
}

ParamSet validate_params(const KernelDef& def, const ParamSet& given) {
  auto fail = [&](const std::string& what) {
    throw Error(ErrorCode::InvalidParams, def.name + ": " + what);
  };
  for (const auto& [name, value] : given.values()) {
    bool known = std::any_of(def.params.begin(), def.params.end(), [&](const ParamSpec& s) { return s.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& s : def.params) names.push_back(s.name);
      fail("unknown parameter '" + name + "'; it takes: " + join(names));
    }
  }
  ParamSet out;
  for (const auto& spec : def.params) {
    const ParamValue* v = given.find(spec.name);
    if (!v) fail("missing parameter '" + spec.name + "' (" + spec.doc + "): give " + spec.allowed());
    if (spec.is_text()) {
      const auto* s = std::get_if<std::string>(v);
      if (!s) fail("parameter '" + spec.name + "' = " + std::to_string(std::get<std::int64_t>(*v)) +
                   " is a number; allowed: " + spec.allowed());
      if (std::find(spec.choices.begin(), spec.choices.end(), *s) == spec.choices.end())
        fail("parameter '" + spec.name + "' = '" + *s + "' is not supported; allowed: " + spec.allowed());
    } else {
      const auto* n = std::get_if<std::int64_t>(v);
      if (!n) fail("parameter '" + spec.name + "' = '" + std::get<std::string>(*v) +
                   "' is text; allowed: " + spec.allowed());
      if (*n < spec.min || *n > spec.max)
        fail("parameter '" + spec.name + "' = " + std::to_string(*n) + " is out of range; allowed: " + spec.allowed());
    }
    out.set(spec.name, *v);
  }
  return out;
}

}  // namespace jit::detail
