// The catalog: the families of kernel_sources/ gathered into one registry (jitk's kernels, then the
// user's), published copy-on-write so readers take no lock, and looked up by name.
#include "jit/kernel_catalog.hpp"

#include "jit/family.hpp"
#include "support/text.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <memory>
#include <mutex>

namespace jit::detail {

namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::islower(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string spec_problem(const KernelDef& def) {
  if (!is_identifier(def.name)) return "a kernel name is lower case letters, digits and _ (got '" + def.name + "')";
  std::vector<std::string> seen;
  for (const auto& p : def.params) {
    if (!is_identifier(p.name)) return "parameter name '" + p.name + "' is not lower case letters, digits and _";
    if (std::find(seen.begin(), seen.end(), p.name) != seen.end()) return "parameter '" + p.name + "' is declared twice";
    seen.push_back(p.name);
    for (const auto& c : p.choices)
      if (c.empty() || !std::all_of(c.begin(), c.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }))
        return "parameter '" + p.name + "' has choice '" + c + "': choices are letters, digits and _";
    if (p.chain && !p.choices.empty()) return "parameter '" + p.name + "' is a chain: it has no choices";
    if (!p.is_text() && !p.chain && p.min > p.max) return "parameter '" + p.name + "' has min > max";
    if (p.fallback) {  // a value the parameter itself allows
      const auto* n = std::get_if<std::int64_t>(&*p.fallback);
      const auto* t = std::get_if<std::string>(&*p.fallback);
      const bool ok = p.chain ? false
                      : p.is_text() ? t && std::find(p.choices.begin(), p.choices.end(), *t) != p.choices.end()
                                    : n && *n >= p.min && *n <= p.max;
      if (!ok) return "parameter '" + p.name + "' has a fallback it does not allow (" + p.allowed() + ")";
    }
  }
  if (def.implementations.empty()) return "it has no implementation";
  seen.clear();
  for (const auto& i : def.implementations) {
    if (auto problem = implementation_problem(i); !problem.empty()) return problem;
    if (std::find(seen.begin(), seen.end(), i.name) != seen.end()) return "implementation '" + i.name + "' is declared twice";
    seen.push_back(i.name);
  }
  return "";
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::atomic<const Registry*>& current_registry() {
  static std::atomic<const Registry*> current = [] {
    auto* r = new Registry;
    r->kernels = shipped_kernels();
    r->shipped = r->kernels.size();
    for (const auto& k : r->kernels) r->shipped_implementations.push_back(k.implementations.size());
    return r;
  }();
  return current;
}

// Publishes `next` (made from the current view under the registry mutex). Old views stay alive.
void publish(std::unique_ptr<Registry> next) {
  static std::vector<std::unique_ptr<const Registry>> retired;
  const Registry* old = current_registry().load();
  next->generation = old->generation + 1;
  retired.emplace_back(old);
  current_registry().store(next.release(), std::memory_order_release);
}

}  // namespace

const Registry& registry() { return *current_registry().load(std::memory_order_acquire); }
const std::vector<KernelDef>& kernel_catalog() { return registry().kernels; }

bool is_shipped_kernel(std::string_view name) {
  const Registry& r = registry();
  for (std::size_t i = 0; i < r.shipped; ++i)
    if (r.kernels[i].name == name) return true;
  return false;
}

bool is_shipped_implementation(std::string_view kernel, std::string_view impl) {
  const Registry& r = registry();
  for (std::size_t i = 0; i < r.shipped; ++i) {
    if (r.kernels[i].name != kernel) continue;
    const auto& impls = r.kernels[i].implementations;
    for (std::size_t j = 0; j < r.shipped_implementations[i] && j < impls.size(); ++j)
      if (impls[j].name == impl) return true;
    return false;
  }
  return false;
}

std::string implementation_problem(const Implementation& i) {
  const std::string who = "implementation '" + i.name + "'";
  if (i.name.empty() || !std::all_of(i.name.begin(), i.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      }))
    return "an implementation name is letters, digits, '-', '_' and '.' (got '" + i.name + "')";
  if (i.file.empty()) return who + " names no file (the text's name, also what $JITK_KERNEL_DIR may override)";
  if (i.min_capability > i.max_capability) return who + ": capability range [" + std::to_string(i.min_capability) + ", " +
                                                  std::to_string(i.max_capability) + "] is empty";
  if (!i.inference && !i.training) return who + " suits no mode (neither inference nor training)";
  if (i.version < 1) return who + ": version must be >= 1";
  if (i.layout.kind == Kind::Tile) {
    const auto& l = i.layout;
    if (!i.tile_plan) return who + " has a tile layout but no tile plan";
    if (l.tile_m < 1 || l.tile_n < 1 || l.tile_k < 1 || l.stages < 1) return who + ": default tile sizes and stages must be >= 1";
  } else if (i.backend != Backend::Cpu) {
    const auto& l = i.layout;
    if (l.block < 32 || l.block > 1024 || l.block % 32 != 0)
      return who + ": block of " + std::to_string(l.block) + " threads; use a multiple of 32 in [32, 1024]";
    if (l.kind == Kind::BlockPerRow && (l.packs_per_thread < 1 || l.packs_per_thread > 32))
      return who + ": packs_per_thread must be in [1, 32]";
    if (l.kind == Kind::BlockPerRow && (l.row_arrays < 1 || l.row_arrays > 4)) return who + ": row_arrays must be in [1, 4]";
  }
  return "";
}

void add_kernel(KernelDef def) {
  std::lock_guard lock(registry_mutex());
  if (auto problem = spec_problem(def); !problem.empty())
    throw Error(ErrorCode::InvalidParams, "cannot register kernel '" + def.name + "': " + problem);
  const Registry& now = registry();
  for (const auto& k : now.kernels)
    if (k.name == def.name) throw Error(ErrorCode::InvalidParams, "cannot register kernel '" + def.name + "': the name is taken");
  auto next = std::make_unique<Registry>(now);
  next->kernels.push_back(std::move(def));
  publish(std::move(next));
}

void add_implementation(std::string_view kernel, Implementation impl) {
  std::lock_guard lock(registry_mutex());
  const KernelDef& def = find_kernel(kernel);
  const std::string what = "cannot add implementation '" + impl.name + "' to " + def.name + ": ";
  if (auto problem = implementation_problem(impl); !problem.empty()) throw Error(ErrorCode::InvalidParams, what + problem);
  for (const auto& i : def.implementations)
    if (i.name == impl.name) throw Error(ErrorCode::InvalidParams, what + "the name is taken");
  auto next = std::make_unique<Registry>(registry());
  for (auto& k : next->kernels)
    if (k.name == kernel) k.implementations.push_back(std::move(impl));
  publish(std::move(next));
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

}  // namespace jit::detail
