// Parameters checked before anything is compiled: against the kernel's declaration, then against
// what an implementation takes (dtype, tiles, row length).
#include <algorithm>

#include "jit/chain.hpp"
#include "jit/family.hpp"
#include "jit/kernel_catalog.hpp"
#include "support/text.hpp"

namespace jit::detail {

bool text_is(const ParamSet& p, const char* name, const char* value) {
  const auto* v = p.find(name);
  return v && std::holds_alternative<std::string>(*v) && std::get<std::string>(*v) == value;
}

bool at_default_tiles(const ParamSet& params) {
  for (const char* tile : kTileParams)
    if (const ParamValue* v = params.find(tile); v && std::holds_alternative<std::int64_t>(*v) && std::get<std::int64_t>(*v) != 0)
      return false;
  return true;
}

}  // namespace jit::detail

namespace jit {
std::string ParamSpec::allowed() const {
  if (chain) return "a chain of steps joined by '>' (e.g. add>store; see jit/chain.hpp), or nothing";
  if (is_text()) return "one of " + detail::join(choices);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}
}  // namespace jit

namespace jit::detail {

std::vector<std::string> dtypes_of(const KernelDef& def, const Implementation& impl) {
  std::vector<std::string> out;
  for (const auto& p : def.params)
    if (p.name == "dtype")
      for (const auto& c : p.choices)
        if (impl.dtypes.empty() ||
            std::any_of(impl.dtypes.begin(), impl.dtypes.end(), [&](DType t) { return dtype_name(t) == c; }))
          out.push_back(c);
  return out;
}

std::string params_problem(const Implementation& impl, const ParamSet& params) {
  if (!impl.fusion && (params.find("prologue") || params.find("epilogue")))
    return "takes no fusion chains (prologue, epilogue)";
  // No dtypes named: every type the backend's prelude can name (the CPU's has no 16-bit floats).
  const std::vector<DType>& dtypes = !impl.dtypes.empty() ? impl.dtypes : impl.backend == Backend::Cpu ? kCpuTypes : kGpuTypes;
  if (const auto* d = params.find("dtype")) {
    const auto& dtype = std::get<std::string>(*d);
    if (std::none_of(dtypes.begin(), dtypes.end(), [&](DType t) { return dtype_name(t) == dtype; })) {
      std::vector<std::string> names;
      for (DType t : dtypes) names.emplace_back(dtype_name(t));
      return "parameter 'dtype' = '" + dtype + "' is not supported; allowed: one of " + join(names);
    }
  }
  if (impl.layout.kind == Kind::Tile) {
    if (!impl.tile_plan) return "has a tile layout but no tile plan";
    if (std::string problem = tile_plan(impl, params).problem; !problem.empty()) return problem;
  }
  if (const auto* h = params.find("hidden");
      h && impl.backend != Backend::Cpu && impl.layout.kind != Kind::Elementwise && std::get<std::int64_t>(*h) > kGpuMaxHidden)
    return "parameter 'hidden' = " + std::to_string(std::get<std::int64_t>(*h)) +
           " is out of range; allowed: an integer in [1, " + std::to_string(kGpuMaxHidden) + "]";
  return "";
}

ErrorFields shared_memory_error_fields(const std::string& kernel, const std::string& params, std::int64_t required,
                                       std::int64_t limit) {
  ErrorFields f;
  f.kernel = kernel;
  f.params = params;
  f.resource = ResourceLimit{"shared memory bytes a block", required, limit};
  return f;
}

ErrorFields params_error_fields(const std::string& kernel, const Implementation* impl, const ParamSet& params) {
  if (impl && impl->layout.kind == Kind::Tile && impl->tile_plan)
    if (const TilePlan plan = tile_plan(*impl, params); !plan.problem.empty() && plan.shared_limit > 0)
      return shared_memory_error_fields(kernel, params.to_string(), plan.shared_bytes, plan.shared_limit);
  ErrorFields f;
  f.kernel = kernel;
  f.params = params.to_string();
  return f;
}

ParamSet resolve_tile(const Implementation& impl, const ParamSet& params) {
  if (impl.layout.kind != Kind::Tile) return params;
  ParamSet out = params;
  const GpuLayout l = impl.tile_defaults ? impl.tile_defaults(params) : impl.layout;
  for (auto [name, fallback] : {std::pair<const char*, int>{"tile_m", l.tile_m}, {"tile_n", l.tile_n}, {"tile_k", l.tile_k}, {"stages", l.stages},
                                {"cluster_m", 1}}) {
    const auto* v = params.find(name);
    if (v && std::get<std::int64_t>(*v) == 0) out.set(name, std::int64_t{fallback});
  }
  return out;
}

TilePlan tile_plan(const Implementation& impl, const ParamSet& params) {
  if (!impl.tile_plan) return {"has no tile plan"};
  return impl.tile_plan(resolve_tile(impl, params));
}

const Implementation& generic_implementation(const KernelDef& def, Backend backend) {
  for (const auto& i : def.implementations)
    if (i.backend == backend && i.generic) return i;
  throw Error(ErrorCode::BackendUnavailable,
              def.name + " has no generic implementation for " + std::string(backend_name(backend)));
}

std::string with_named_reasons(const KernelDef& def, Backend backend, const ParamSet& params, std::string problem) {
  const std::string generic = problem;
  for (const auto& impl : def.implementations)
    if (impl.backend == backend && !impl.generic && generic.find(impl.name) != std::string::npos)
      if (std::string own = params_problem(impl, params); !own.empty()) problem += "; implementation '" + impl.name + "': " + own;
  return problem;
}

ParamSet validate_params(const KernelDef& def, const ParamSet& given, Backend backend) {
  ParamSet out = validate_params(def, given);
  std::string first_problem;
  const Implementation* refusing = nullptr;
  bool any = false;
  for (const auto& impl : def.implementations) {
    if (impl.backend != backend) continue;
    any = true;
    std::string problem = params_problem(impl, out);
    if (problem.empty()) return out;
    if (first_problem.empty() || impl.generic) first_problem = problem, refusing = &impl;
  }
  if (!any)
    throw Error(ErrorCode::BackendUnavailable,
                def.name + " has no implementation for " + std::string(backend_name(backend)));
  if (refusing && refusing->generic) first_problem = with_named_reasons(def, backend, out, first_problem);
  throw Error(ErrorCode::InvalidParams, def.name + " on " + std::string(backend_name(backend)) + ": " + first_problem,
              params_error_fields(def.name, refusing, out));
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
    if (spec.chain) {
      if (!v) continue;
      const auto* text = std::get_if<std::string>(v);
      if (!text) fail("parameter '" + spec.name + "' = " + std::to_string(std::get<std::int64_t>(*v)) +
                      " is a number; allowed: " + spec.allowed());
      Chain chain;
      try {
        chain = Chain::parse(*text);
      } catch (const Error& e) {
        fail("parameter '" + spec.name + "': " + e.what());
      }
      if (!chain.empty()) out.set(spec.name, chain.to_string());
      continue;
    }
    if (!v && spec.fallback) v = &*spec.fallback;
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
  if (def.params_check)
    if (std::string problem = def.params_check(out); !problem.empty()) fail(problem);
  return out;
}

}  // namespace jit::detail
