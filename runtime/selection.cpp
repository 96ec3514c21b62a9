// Implementation selection and the scoped, per-thread kernel mappings.
#include "runtime/selection.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "cache/cache_key.hpp"
#include "support/field_count.hpp"
#include "support/logging.hpp"

namespace jit {

struct KernelMapping::Frame {
  Snapshot parent;
  std::vector<std::pair<std::string, Implementation>> entries;
  std::uint64_t id = 0;
};

}  // namespace jit

namespace jit::detail {
namespace {

thread_local KernelMapping::Snapshot t_mapping;

// Every field of an implementation goes into its frame's id (Implementation::fields()), so mappings
// that differ anywhere never share memo entries.
static_assert(field_count<Implementation>() == listed_count<Implementation>(),
              "Implementation::fields() must list every field: frame_id hashes what it lists");
static_assert(field_count<GpuLayout>() == listed_count<GpuLayout>(),
              "GpuLayout::fields() must list every field: frame_id hashes what it lists");

template <class T>
  requires std::is_arithmetic_v<T> || std::is_enum_v<T>
void add_field(KeyBuilder& key, T v) {
  key.add("number", std::to_string(static_cast<long long>(v)));
}
void add_field(KeyBuilder& key, const std::string& v) { key.add("text", v); }
void add_field(KeyBuilder& key, const std::vector<std::string>& v) {
  key.add("texts", std::to_string(v.size()));
  for (const auto& s : v) key.add("text", s);
}
void add_field(KeyBuilder& key, const std::vector<DType>& v) {
  std::string types;
  for (DType t : v) types += std::string(dtype_name(t)) + ",";
  key.add("dtypes", types);
}
// A plain function is itself wherever it is copied: its address stands for it. Other callables
// cannot be compared, so each gets a number of its own (the choice documented at Implementation).
template <class R, class... A> void add_field(KeyBuilder& key, const std::function<R(A...)>& f) {
  static std::atomic<std::uint64_t> callables{0};
  if (!f) key.add("function", "none");
  else if (auto* plain = f.template target<R (*)(A...)>())
    key.add("function", std::to_string(reinterpret_cast<std::uintptr_t>(*plain)));
  else
    key.add("callable", std::to_string(++callables));
}
void add_field(KeyBuilder& key, const GpuLayout& layout);
template <class Tuple> void add_fields(KeyBuilder& key, const Tuple& fields) {
  std::apply([&](const auto&... f) { (add_field(key, f), ...); }, fields);
}
void add_field(KeyBuilder& key, const GpuLayout& layout) { add_fields(key, layout.fields()); }

// A frame's id is a hash of its content and its parent's id, so the same mapping made again (a
// guard in a loop) finds the kernels the last one loaded in the memory tier instead of resolving
// them again. 0 is "no mapping".
std::uint64_t frame_id(const KernelMapping::Frame& f) {
  KeyBuilder key;
  key.add("parent", std::to_string(f.parent ? f.parent->id : 0));
  for (const auto& [kernel, impl] : f.entries) {
    key.add("kernel", kernel);
    add_fields(key, impl.fields());
  }
  return key.finish().low | 1;
}

std::string range_text(const Implementation& i) {
  auto bound = [](int c) { return c >= kAnyCapability ? std::string("max") : std::to_string(c); };
  return "[" + bound(i.min_capability) + ", " + bound(i.max_capability) + "]";
}

std::int64_t width(const Implementation& i) {
  return static_cast<std::int64_t>(i.max_capability) - i.min_capability;
}

// Why `impl` does not suit this get, or "".
std::string rejection(const Implementation& impl, const ParamSet& params, const Target& target, int capability,
                      const Selection& sel) {
  if (impl.backend != target.backend) return "";  // not a candidate at all; not worth a line
  if (!sel.implementation.empty() && impl.name != sel.implementation) return "not the one asked for";
  if (target.backend != Backend::Cpu && (capability < impl.min_capability || capability > impl.max_capability))
    return "capability " + std::to_string(capability) + " is outside " + range_text(impl);
  if (sel.mode == Mode::Training && !impl.training) return "no backward (inference only)";
  if (sel.mode == Mode::Inference && !impl.inference) return "training only";
  if (std::string p = params_problem(impl, params); !p.empty()) return p;
  if (!sel.allow_fallback && impl.generic) return "generic, and fallback is refused";
  return "";
}

// Among impls (in registration order), the chosen one, or nullptr; `why_not` collects the rest.
const Implementation* pick(const std::vector<const Implementation*>& impls, const ParamSet& params,
                           const Target& target, int capability, const Selection& sel, std::string* why_not,
                           std::string* param_problem) {
  const Implementation* best = nullptr;
  for (const Implementation* i : impls) {
    if (i->backend != target.backend) continue;
    std::string no = rejection(*i, params, target, capability, sel);
    if (!no.empty()) {
      *why_not += (why_not->empty() ? "" : "; ") + ("'" + i->name + "' " + range_text(*i) + ": " + no);
      if (param_problem->empty() && !params_problem(*i, params).empty()) *param_problem = params_problem(*i, params);
      continue;
    }
    // Narrowest range first, then priority; a later registration wins a full tie.
    if (!best || width(*i) < width(*best) || (width(*i) == width(*best) && i->priority >= best->priority)) best = i;
  }
  return best;
}

// One line: why `chosen` (why_not: the candidates passed over, and why).
std::string describe_choice(const Implementation& chosen, const std::vector<const Implementation*>& impls,
                            const ParamSet& params, const Target& target, int capability, const Selection& sel,
                            const std::string& why_not) {
  std::string rivals;
  bool alone = true;
  for (const Implementation* i : impls) {
    if (i->backend != target.backend || i == &chosen) continue;
    alone = false;
    if (rejection(*i, params, target, capability, sel).empty())
      rivals += (rivals.empty() ? "" : ", ") + ("'" + i->name + "' " + range_text(*i) + " priority " + std::to_string(i->priority));
  }
  std::string why = "range " + range_text(chosen) + ", priority " + std::to_string(chosen.priority) + ": ";
  if (alone) return why + "the only implementation for " + std::string(backend_name(target.backend));
  if (!rivals.empty()) why += "narrowest range, then highest priority, among those that suit (also: " + rivals + ")";
  else why += chosen.generic ? "the generic fallback" : "the only one that suits";
  if (!why_not.empty()) why += "; passed over: " + why_not;
  return why;
}

}  // namespace

int capability_of_arch(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return 0;
  try {
    return std::stoi(arch.substr(3));
  } catch (...) {
    return 0;
  }
}

Selected select_implementation(const KernelDef& def, const ParamSet& params, const Target& target, int capability,
                               const Selection& sel) {
  const std::string where = def.name + " for " + target.to_string() +
                            (target.backend == Backend::Cpu ? "" : " (capability " + std::to_string(capability) + ")");
  // A mapping of this thread first: the innermost frame that maps this kernel.
  for (const KernelMapping::Frame* f = t_mapping.get(); f; f = f->parent.get()) {
    std::vector<const Implementation*> mapped;
    for (const auto& [kernel, impl] : f->entries)
      if (kernel == def.name) mapped.push_back(&impl);
    if (mapped.empty()) continue;
    std::string why_not, param_problem;
    if (const Implementation* i = pick(mapped, params, target, capability, sel, &why_not, &param_problem)) {
      Selected out{*i, i->generic, true, "mapped for this scope: '" + i->name + "' v" + std::to_string(i->version)};
      return out;
    }
    if (logging_at(spdlog::level::info))
      log().info("{}: the scope's mapping has nothing that suits ({}); choosing among the registered ones", where,
                 why_not.empty() ? "no implementation for this backend" : why_not);
    break;
  }
  std::vector<const Implementation*> all;
  for (const auto& i : def.implementations) all.push_back(&i);
  std::string why_not, param_problem;
  const Implementation* best = pick(all, params, target, capability, sel, &why_not, &param_problem);
  if (!best) {
    if (!sel.implementation.empty() &&
        std::none_of(all.begin(), all.end(), [&](const Implementation* i) { return i->name == sel.implementation; })) {
      std::string names;
      for (const auto* i : all) names += (names.empty() ? "" : ", ") + i->name;
      throw Error(ErrorCode::InvalidParams,
                  def.name + " has no implementation '" + sel.implementation + "'; it has: " + names);
    }
    // Every candidate refused the params themselves: that is a parameter error.
    bool only_params = !param_problem.empty() &&
                       std::all_of(all.begin(), all.end(), [&](const Implementation* i) {
                         return i->backend != target.backend || !params_problem(*i, params).empty();
                       });
    if (only_params) {
      const auto refusing = std::find_if(all.begin(), all.end(), [&](const Implementation* i) {
        return i->backend == target.backend && params_problem(*i, params) == param_problem;
      });
      const bool generic = refusing != all.end() && (*refusing)->generic;
      throw Error(ErrorCode::InvalidParams,
                  def.name + " on " + std::string(backend_name(target.backend)) + ": " +
                      (generic ? with_named_reasons(def, target.backend, params, param_problem) : param_problem),
                  params_error_fields(def.name, refusing == all.end() ? nullptr : *refusing, params));
    }
    std::string wanted = !sel.implementation.empty() ? "implementation '" + sel.implementation + "'" : "an implementation";
    if (sel.mode == Mode::Training) wanted += " for training (one with a backward)";
    if (!sel.allow_fallback) wanted += sel.mode == Mode::Training ? " that is specialized (non-generic)" : ", specialized (non-generic)";
    throw Error(ErrorCode::BackendUnavailable,
                where + " needs " + wanted + ", and none suits; " +
                    (why_not.empty() ? "it has no implementation for " + std::string(backend_name(target.backend))
                                     : "considered: " + why_not));
  }
  return {*best, best->generic, false, describe_choice(*best, all, params, target, capability, sel, why_not)};
}

std::uint64_t selection_context() {
  // The registry's generation (a new registration) and this thread's mapping: either changes
  // what a get may choose, so both are part of the memory tier's key.
  const std::uint64_t frame = t_mapping ? t_mapping->id : 0;
  return (registry().generation << 40) ^ frame;
}

}  // namespace jit::detail

namespace jit {

std::string_view mode_name(Mode m) { return m == Mode::Training ? "training" : "inference"; }

void register_kernel(KernelSpec spec) { detail::add_kernel(std::move(spec)); }

void register_implementation(std::string_view kernel, Implementation impl) {
  detail::add_implementation(kernel, std::move(impl));
}

std::vector<KernelSpec> registered_kernels() { return detail::kernel_catalog(); }

KernelMapping::KernelMapping(std::vector<std::pair<std::string, Implementation>> mapping) {
  for (const auto& [kernel, impl] : mapping) {
    const auto& def = detail::find_kernel(kernel);  // throws for an unknown kernel
    if (auto problem = detail::implementation_problem(impl); !problem.empty())
      throw Error(ErrorCode::InvalidParams, "cannot map " + def.name + " to '" + impl.name + "': " + problem);
  }
  auto frame = std::make_shared<Frame>();
  frame->parent = detail::t_mapping;
  frame->entries = std::move(mapping);
  frame->id = detail::frame_id(*frame);
  previous_ = detail::t_mapping;
  installed_ = frame.get();
  detail::t_mapping = std::move(frame);
}

KernelMapping::KernelMapping(Snapshot adopt) {
  previous_ = detail::t_mapping;
  installed_ = adopt.get();
  detail::t_mapping = std::move(adopt);
}

KernelMapping::~KernelMapping() {
  if (detail::t_mapping.get() != installed_)
    detail::warn_once("mapping-order", "a jit::KernelMapping was destroyed while a mapping made after it was still alive; "
                                       "restoring the mappings from before it");
  detail::t_mapping = std::move(previous_);
}

KernelMapping::Snapshot KernelMapping::current() { return detail::t_mapping; }

}  // namespace jit
