// The path of one jit::get: validate, specialize, key, memory tier, the cache's tiers, single-flight compile, load.
#include <chrono>
#include <future>
#include <mutex>
#include <unordered_map>

#include "cache/cache_key.hpp"
#include "cache/process_tiers.hpp"
#include "cache/tier_stack.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/specializer.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/get_kernel.hpp"
#include "runtime/request_key.hpp"
#include "support/logging.hpp"
#include "runtime/shipping/record.hpp"
#include "runtime/selection.hpp"

namespace jit::detail {
namespace {

using LoadedPtr = std::shared_ptr<const LoadedKernel>;
struct Built {
  LoadedPtr kernel;
  Origin origin = Origin::Compiled;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Loaded kernels by content key; an entry is a future so that threads asking for a key being
// built wait for the one build instead of starting their own.
class LoadedKernels {
 public:
  // Returns the kernel for key, building it with `build` if no thread has (or is).
  template <class Build> Built get_or_build(const std::string& key, Build&& build) {
    std::promise<Built> promise;
    std::shared_future<Built> future;
    {
      std::lock_guard lock(mutex_);
      auto it = map_.find(key);
      if (it != map_.end()) {
        future = it->second;
      } else {
        map_.emplace(key, promise.get_future().share());
        future = {};
      }
    }
    if (future.valid()) return future.get();
    try {
      Built built = build();
      promise.set_value(built);
      return built;
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        map_.erase(key);  // a later call tries again
      }
      promise.set_exception(std::current_exception());
      throw;
    }
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<Built>> map_;
};

LoadedKernels& loaded_kernels() {
  static LoadedKernels k;
  return k;
}

}  // namespace

ArtifactMeta meta_of(const Specialization& s) {
  return {.kernel = s.unit.kernel,
          .params = s.unit.params_text,
          .backend = std::string(backend_name(s.target.backend)),
          .arch = s.compiler->arch(),
          .compiler = s.compiler->id(),
          .compile_ms = 0,  // known after a compile
          .implementation = s.unit.implementation,
          .implementation_version = s.unit.implementation_version};
}

namespace {

LoadedPtr load_hit(const TierStack& tiers, const Specialization& s, const std::optional<TierStack::Hit>& hit, const char* how,
                   std::chrono::steady_clock::time_point t0) {
  if (!hit) return nullptr;
  try {
    double read_ms = ms_since(t0);
    LoadedPtr k = s.driver->load(hit->payload, s.unit, s.target, s.key);
    if (logging_at(spdlog::level::info))
      log().info("loaded {} ({}) for {} from the {} cache{} in {:.3f} ms (read and verify {:.3f} ms)", s.unit.kernel,
                 s.unit.params_text, s.target.to_string(), hit->tier, how, ms_since(t0), read_ms);
    return k;
  } catch (const Error& e) {
    log().warn("cache: artifact {} ({} {}) verified but failed to load ({}); dropping it and rebuilding", s.key,
               s.unit.kernel, s.unit.params_text, e.what());
    tiers.remove(s.key);
    return nullptr;
  }
}

LoadedPtr load_from_tiers(const TierStack& tiers, const Specialization& s, Count count, const char* how) {
  auto t0 = std::chrono::steady_clock::now();
  return load_hit(tiers, s, tiers.get(s.key, meta_of(s), count), how, t0);
}

// Compiles s and stores the artifact in every tier; the caller holds the key's lock.
CompiledArtifact compile_and_store(const TierStack& tiers, const Specialization& s, bool* stored = nullptr) {
  CompiledArtifact artifact = s.compiler->compile(s.unit);
  if (logging_at(spdlog::level::info))
    log().info("compiled {} ({}) for {} in {:.1f} ms", s.unit.kernel, s.unit.params_text, s.target.to_string(),
               artifact.compile_ms);
  if (!artifact.log.empty()) log().debug("compiler log for {}:\n{}", s.unit.kernel, artifact.log);
  ArtifactMeta meta = meta_of(s);
  meta.compile_ms = artifact.compile_ms;
  bool ok = tiers.put(s.key, meta, artifact.bytes, PutReason::Compiled);
  if (stored) *stored = ok;
  return artifact;
}

Built build(const Specialization& s, const TierStack& tiers) {
  if (LoadedPtr k = load_from_tiers(tiers, s, Count::Hits, "")) return {k, Origin::DiskCache};
  auto lock = tiers.lock(s.key);  // one compile per key across processes; the rest wait here
  if (LoadedPtr k = load_from_tiers(tiers, s, Count::HitsAndMisses, " after waiting for another process"))
    return {k, Origin::DiskCache};
  // One process of the fleet compiles; the others wait here for its artifact (a remote tier's lease).
  auto t0 = std::chrono::steady_clock::now();
  TierStack::Claim claim = tiers.claim(s.key, meta_of(s));
  if (LoadedPtr k = load_hit(tiers, s, claim.hit, " after waiting for another machine", t0)) return {k, Origin::DiskCache};
  return {s.driver->load(compile_and_store(tiers, s).bytes, s.unit, s.target, s.key), Origin::Compiled};
}

}  // namespace

std::vector<KeyPart> key_parts(const Specialization& s) {
  std::vector<KeyPart> parts{{"format", std::to_string(kCacheFormatVersion)},
                             {"kernel", s.unit.kernel},
                             {"implementation", s.unit.implementation},
                             {"implementation version", std::to_string(s.unit.implementation_version)},
                             {"params", s.unit.params_text},
                             {"backend", std::string(backend_name(s.target.backend))},
                             {"compiler", s.compiler->id()},
                             {"arch", s.compiler->arch()},
                             {"target", s.compiler->target_fingerprint()}};
  for (const auto& o : s.compiler->options()) parts.push_back({"option", o});
  parts.push_back({"source " + s.unit.main.name, s.unit.main.text});
  for (const auto& h : s.unit.headers) parts.push_back({"header " + h.name, h.text});
  parts.push_back({"external headers", s.compiler->external_headers_fingerprint(s.unit)});
  return parts;
}

namespace {

// What a request resolves to short of its text: params validated, the compiler and implementation chosen.
struct Chosen {
  const KernelDef* def = nullptr;
  ParamSet canonical;
  const BackendDriver* driver = nullptr;
  const Compiler* compiler = nullptr;
  Selected selected;
};

Chosen choose_for(std::string_view kernel, const ParamSet& params, const Target& target, const Selection& selection) {
  Chosen c;
  c.def = &find_kernel(kernel);
  c.canonical = validate_params(*c.def, params);
  c.driver = &compiling_driver_for(target);
  c.compiler = &c.driver->compiler(target);
  c.selected = select_implementation(*c.def, c.canonical, target, capability_of_arch(c.compiler->arch()), selection);
  const Implementation& impl = c.selected.impl;
  // (a target naming "sm_90a" has the suffix already)
  if (!impl.arch_suffix.empty() && target.backend != Backend::Cpu && !c.compiler->arch().ends_with(impl.arch_suffix))
    c.compiler = &c.driver->compiler(Target{target.backend, c.compiler->arch() + impl.arch_suffix, target.device});
  return c;
}

Specialization specialize_chosen(Chosen c, const Target& target, UnitTexts texts) {
  Specialization s;
  s.target = target;
  s.driver = c.driver;
  s.compiler = c.compiler;
  s.reason = c.selected.reason;
  s.unit = specialize(*c.def, c.selected.impl, c.canonical, std::move(texts));
  s.params = std::move(c.canonical);
  if (logging_at(spdlog::level::info))
    log().info("{} ({}) for {}: implementation '{}' v{} ({})", c.def->name, s.unit.params_text, target.to_string(),
               c.selected.impl.name, c.selected.impl.version, c.selected.reason);
  KeyBuilder key;
  for (const auto& part : key_parts(s)) key.add(part.name, part.value);
  s.key = key.finish().hex();
  return s;
}

// The external-headers fingerprint of the texts as they are, before rendering: the texts are lent
// to a unit for it and given back, not copied (a compiler without external headers reads none).
std::string unrendered_fingerprint(const Compiler& compiler, const SourceUnit& described, UnitTexts& texts) {
  SourceUnit u = described;  // its texts are empty
  u.main = std::move(texts.text);
  u.headers = std::move(texts.headers);
  struct GiveBack {
    SourceUnit& u;
    UnitTexts& texts;
    ~GiveBack() { texts.text = std::move(u.main), texts.headers = std::move(u.headers); }
  } give_back{u, texts};
  return compiler.external_headers_fingerprint(u);
}

}  // namespace

Specialization resolve(std::string_view kernel, const ParamSet& params, const Target& target, const Selection& selection) {
  Chosen c = choose_for(kernel, params, target, selection);
  UnitTexts texts = unit_texts(*c.def, c.selected.impl);
  return specialize_chosen(std::move(c), target, std::move(texts));
}

WarmOutcome ensure_on_disk(const Specialization& s, const TierStack& tiers) {
  const ArtifactMeta meta = meta_of(s);
  if (tiers.get(s.key, meta, Count::Nothing)) return WarmOutcome::AlreadyCached;
  auto lock = tiers.lock(s.key);
  // Counts the miss; a damaged leftover has been dropped by the look before.
  if (tiers.get(s.key, meta, Count::HitsAndMisses)) return WarmOutcome::AlreadyCached;
  TierStack::Claim claim = tiers.claim(s.key, meta);
  if (claim.hit) return WarmOutcome::AlreadyCached;
  bool stored = false;
  compile_and_store(tiers, s, &stored);
  return stored ? WarmOutcome::CompiledAndStored : WarmOutcome::CompiledNotStored;
}

WarmOutcome ensure_on_disk(const Specialization& s) { return ensure_on_disk(s, process_tiers().stack); }

KernelHandle get_kernel(std::string_view kernel, const ParamSet& params, const Target& target, const Selection& selection) {
  return get_kernel(kernel, params, target, selection, process_tiers().stack);
}

namespace {

// A remembered key that did not lead to a loaded kernel: the get takes the whole path.
struct NotWarm {};

std::string loaded_key_of(const std::string& key, const Target& target) {
  // The same artifact loaded on two devices is two loaded kernels.
  return key + "@" + std::string(backend_name(target.backend)) + ":" + std::to_string(target.device);
}

KernelHandle handle_of(const Specialization& s, Built b) {
  // The target as compiled for (the device's arch), so the record warms that device elsewhere.
  Target recorded = s.target;
  if (recorded.arch.empty() && s.target.backend != Backend::Cpu) recorded.arch = s.compiler->arch();
  record_use(s.unit.kernel, s.params, recorded);
  return {std::move(b.kernel), s.key, b.origin, s.unit.implementation};
}

}  // namespace

KernelHandle get_kernel(std::string_view kernel, const ParamSet& params, const Target& target, const Selection& selection,
                        const TierStack& tiers) {
  // No thread is started on this path: opening the cache is a few stats (its index opens at its
  // first use, which a disk hit does not have), and a thread start costs more than that.
  Chosen c = choose_for(kernel, params, target, selection);
  driver_for(target);  // resolve may compile for a device elsewhere; a get must also run here (throws why not)
  UnitTexts texts = unit_texts(*c.def, c.selected.impl);

  // A warm get: the key remembered for this request (by its unrendered inputs) names the artifact;
  // the blob is still verified against the key and what it must be, and loaded like any other.
  const MemoStore* memos = tiers.request_keys();
  std::string request;
  std::string unrendered_headers;  // the toolkit fingerprint the request key holds
  SourceUnit described = describe_unit(*c.def, c.selected.impl, c.canonical);
  if (memos) {
    unrendered_headers = unrendered_fingerprint(*c.compiler, described, texts);
    request = request_key(described, texts, target.backend, *c.compiler, unrendered_headers, c.selected.mapped);
  }
  if (!request.empty())
    if (std::optional<std::string> key = remembered_key(*memos, request)) {
      Specialization s;
      s.target = target;
      s.params = c.canonical;
      s.driver = c.driver;
      s.compiler = c.compiler;
      s.unit = std::move(described);  // not used after: a miss renders the unit whole
      s.reason = c.selected.reason;
      s.key = std::move(*key);
      if (logging_at(spdlog::level::info))
        log().info("{} ({}) for {}: implementation '{}' v{} ({})", c.def->name, s.unit.params_text, target.to_string(),
                   c.selected.impl.name, c.selected.impl.version, c.selected.reason);
      try {
        Built b = loaded_kernels().get_or_build(loaded_key_of(s.key, target), [&]() -> Built {
          if (LoadedPtr k = load_from_tiers(tiers, s, Count::Hits, " (key remembered)")) return {k, Origin::DiskCache};
          throw NotWarm{};
        });
        count_remembered_key_hit();
        return handle_of(s, std::move(b));
      } catch (const NotWarm&) {
        log().debug("{} ({}): the remembered key {} found no artifact; resolving it whole", s.unit.kernel, s.unit.params_text, s.key);
      }
    }

  Specialization s = specialize_chosen(std::move(c), target, std::move(texts));
  Built b;
  for (;;) {
    try {
      b = loaded_kernels().get_or_build(loaded_key_of(s.key, target), [&] { return build(s, tiers); });
      break;
    } catch (const NotWarm&) {
      // Another thread's remembered key found no artifact for this key while this one waited on it:
      // its entry is gone, so this thread builds (or waits for the next) instead.
    }
  }
  // Remembered only where the unrendered texts reach the same toolkit headers as the rendered unit
  // (the prelude includes none of the toolkit's), so that the request key changes whenever the key does.
  if (!request.empty() && unrendered_headers == s.compiler->external_headers_fingerprint(s.unit)) remember_key(*memos, request, s.key);
  return handle_of(s, std::move(b));
}

}  // namespace jit::detail

namespace jit {

namespace {
// A named architecture needs no device (e.g. "cuda:sm_90" asked on a machine without one).
int capability_of_target(const Target& target) {
  std::string arch = target.arch;
  if (arch.empty() && target.backend != Backend::Cpu) arch = detail::driver_for(target).compiler(target).arch();
  return detail::capability_of_arch(arch);
}
}  // namespace

Choice choose(std::string_view kernel, const ParamSet& params, const Target& target, const Selection& selection) {
  using namespace detail;
  const KernelDef& def = find_kernel(kernel);
  ParamSet canonical = validate_params(def, params);
  Selected chosen = select_implementation(def, canonical, target, capability_of_target(target), selection);
  return {def.name, chosen.impl.name, chosen.impl.version, chosen.fallback, chosen.reason};
}

std::vector<std::string> implementations_for(std::string_view kernel, const Target& target, const ParamSet& params) {
  const auto& def = detail::find_kernel(kernel);
  const int capability = target.backend == Backend::Cpu ? 0 : capability_of_target(target);
  const bool check_params = !params.values().empty();
  const ParamSet canonical = check_params ? detail::validate_params(def, params) : ParamSet{};
  std::vector<std::string> out;
  for (const auto& i : def.implementations)
    if (i.backend == target.backend &&
        (target.backend == Backend::Cpu || (capability >= i.min_capability && capability <= i.max_capability)) &&
        (!check_params || detail::params_problem(i, canonical).empty()))
      out.push_back(i.name);
  return out;
}

}  // namespace jit
