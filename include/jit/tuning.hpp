// Autotuning: jit::get_tuned<K>(base, shape) times K's candidate specializations (tile sizes,
// say) for this class of shapes on this device once, keeps the winner in the cache index, and
// returns it. Later gets in the process, later processes and other programs sharing the cache
// reuse the decision without timing again. JITK_AUTOTUNE=0 returns the base params unchanged.
//
// A descriptor that can be tuned gives:
//   struct Shape;                                         what the work's size is (gemm: m, n, k)
//   static std::string shape_class(const Shape&);         shapes that share a decision ("m<=1024,...")
//   static std::vector<Params> candidates(const Params&, const Target&); base first, then the variants to try
//   static TuningData tuning_data(const Params&, const Shape&, const Target&);
//     synthetic inputs of that shape, with run(const Kernel<K>&) launching on them
// and, to be tuned from a manifest (`jitk warm --tune`):
//   static Params from_params(const ParamSet&);              the typed params of validated ones
//   static Shape shape_of(const std::vector<std::int64_t>&); a shape from numbers (throws when wrong)
//   static std::vector<std::int64_t> numbers_of(const Shape&); and back (JITK_RECORD writes them)
//   static constexpr const char* shape_names;                what the numbers are ("m, n, k")
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jit/jit.hpp"

namespace jit::cuda {
class Timer;
}

namespace jit {

// One decision, as `jitk ls --tuning` shows it.
struct TuningInfo {
  std::string kernel;
  std::string base_params;  // what was asked for
  std::string shape_class;
  std::string device;       // "cpu x86-64-v4 (AMD EPYC, 2 threads)", "cuda sm_90 (NVIDIA H100 80GB HBM3, driver 13000)"
  std::string choice;       // the params that won
  std::int64_t candidates = 0;
  double best_ms = 0, default_ms = 0, tuning_ms = 0;  // the winner's time, the base params' time, the whole tuning
  std::int64_t created = 0;                           // unix seconds
};

namespace cache {
std::vector<TuningInfo> tuning();  // every decision in the cache index
}  // namespace cache

namespace detail {

struct TuningKey {
  std::string kernel, base_params, shape_class, device;
};
bool autotune_enabled();  // JITK_AUTOTUNE is not "0"
std::string device_identity(const Target& target);
std::optional<std::string> find_tuning(const TuningKey& key);  // the winner's params text
// Stores the decision (an INFO line says it); a cache that is not on disk keeps it nowhere (WARN once).
void store_tuning(const TuningKey& key, const std::string& choice, std::int64_t candidates, double best_ms,
                  double default_ms, double tuning_ms);
// The time of the work queued between start() and stop_ms(), on the device's own clock: CUDA
// events on the default stream (where the tuners' launches queue); the host's steady clock on the
// CPU, whose launches return when done. (No kernel tunes on HIP yet.)
class Stopwatch {
 public:
  explicit Stopwatch(const Target& target);
  ~Stopwatch();
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;
  void start();
  double stop_ms();

 private:
  std::unique_ptr<cuda::Timer> events_;  // CUDA targets only
  std::chrono::steady_clock::time_point t0_;
};
void note_skipped_candidate(const TuningKey& key, const std::string& params, const std::string& why);

// While alive, jit::get on this thread records nothing under JITK_RECORD: tuning's candidates are
// not what the program uses (get_tuned records the tuned use itself).
class NotRecorded {
 public:
  NotRecorded();
  ~NotRecorded();
  NotRecorded(const NotRecorded&) = delete;
  NotRecorded& operator=(const NotRecorded&) = delete;
};
// JITK_RECORD: appends the entry of the winner (what the program runs), and one that warms `base`
// and tunes it for `shape` (its numbers) with `jitk warm --tune`.
void record_tuned_use(const std::string& kernel, const ParamSet& base, const std::vector<std::int64_t>& shape,
                      const ParamSet& winner, const Target& target);
// Whether the process's disk cache holds a verified artifact for kernel(params) on target.
bool artifact_on_disk(const std::string& kernel, const ParamSet& params, const Target& target);
// Removes a losing candidate's artifact (blob and index row) from the process's disk cache, unless a
// tuning decision in the index chose it. Never throws (a failure is one WARN).
void drop_tuning_loser(const std::string& kernel, const ParamSet& params, const Target& target);

// One process tunes a key at a time; others wait and then read its decision.
class TuningLock {
 public:
  explicit TuningLock(const TuningKey& key);
  ~TuningLock();
  TuningLock(const TuningLock&) = delete;
  TuningLock& operator=(const TuningLock&) = delete;

 private:
  std::shared_ptr<void> held_;
};

inline constexpr double kSampleMs = 2.0;

template <class K> typename K::Params tune(const TuningKey& key, const typename K::Params& base,
                                            const std::vector<typename K::Params>& candidates,
                                            const typename K::Shape& shape, const Target& target) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto data = K::tuning_data(base, shape, target);
  Stopwatch watch(target);
  typename K::Params best = base;
  double best_ms = std::numeric_limits<double>::infinity(), default_ms = 0;
  NotRecorded quiet;
  // The candidates this tuning compiled: those that lose are removed from the cache afterwards (one
  // that was there before was asked for by someone else, and stays).
  std::vector<typename K::Params> compiled_here;
  for (const auto& c : candidates) {
    std::vector<double> times;
    try {
      if (!artifact_on_disk(K::name, K::to_params(c), target)) compiled_here.push_back(c);
      auto k = get<K>(c, target);
      watch.start();
      data.run(k);  // warm-up (and the first touch of the data)
      // Each sample at least kSampleMs long, so short kernels are not timed by the clock's noise;
      // the median of five.
      const double once = watch.stop_ms();
      const int runs = static_cast<int>(std::clamp(kSampleMs / std::max(once, 1e-3), 1.0, 1000.0));
      for (int rep = 0; rep < 5; ++rep) {
        watch.start();
        for (int r = 0; r < runs; ++r) data.run(k);
        times.push_back(watch.stop_ms() / runs);
      }
    } catch (const Error& e) {
      note_skipped_candidate(key, K::to_params(c).to_string(), e.what());
      continue;
    }
    std::sort(times.begin(), times.end());
    const double ms = times[times.size() / 2];
    if (c.fields() == base.fields()) default_ms = ms;
    if (ms < best_ms) best_ms = ms, best = c;
  }
  const double tuning_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  store_tuning(key, K::to_params(best).to_string(), static_cast<std::int64_t>(candidates.size()), best_ms, default_ms, tuning_ms);
  for (const auto& c : compiled_here)
    if (c.fields() != best.fields()) drop_tuning_loser(K::name, K::to_params(c), target);
  return best;
}

}  // namespace detail

// The kernel for `base` with the best of K::candidates(base) for this shape's class on `target`,
// tuned once (the first call for a class on a device times every candidate) and remembered.
template <class K>
Kernel<K> get_tuned(const typename K::Params& base, const typename K::Shape& shape, const Target& target = default_target()) {
  using Params = typename K::Params;
  if (!detail::autotune_enabled()) return get<K>(base, target);
  const detail::TuningKey key{K::name, K::to_params(base).to_string(), K::shape_class(shape), detail::device_identity(target)};
  const std::string id = key.base_params + "|" + key.shape_class + "|" + key.device;
  static std::mutex mutex;
  static std::unordered_map<std::string, Params> decided;  // this process's decisions
  {
    std::lock_guard lock(mutex);
    if (auto it = decided.find(id); it != decided.end()) return get<K>(it->second, target);
  }
  const auto candidates = K::candidates(base, target);
  auto known = [&]() -> std::optional<Params> {
    if (auto choice = detail::find_tuning(key))
      for (const auto& c : candidates)
        if (K::to_params(c).to_string() == *choice) return c;
    return std::nullopt;  // none yet, or a choice that is no longer a candidate: tune again
  };
  std::optional<Params> chosen = known();
  if (!chosen) {
    detail::TuningLock lock(key);
    chosen = known();  // another process may have decided while this one waited
    if (!chosen) chosen = detail::tune<K>(key, base, candidates, shape, target);
  }
  {
    std::lock_guard lock(mutex);
    decided.emplace(id, *chosen);
  }
  // JITK_RECORD: the tuned use (the winner; base and shape), once per decision in a process. The
  // winner's get may be answered from memory (tuning loaded it), which records nothing itself.
  if constexpr (requires { K::numbers_of(shape); })
    detail::record_tuned_use(K::name, K::to_params(base), K::numbers_of(shape), K::to_params(*chosen), target);
  return get<K>(*chosen, target);
}

// ---- tuning without the descriptor's type (manifests, the jitk tool) ----
struct TuneOutcome {
  std::string shape_class;
  std::string choice;   // the params that won
  bool reused = false;  // the decision was in the cache index already: nothing was timed
};
namespace detail {
template <class K> TuneOutcome tune_erased(const ParamSet& base, const std::vector<std::int64_t>& numbers, const Target& target) {
  const typename K::Params p = K::from_params(base);
  const typename K::Shape shape = K::shape_of(numbers);
  const TuningKey key{K::name, K::to_params(p).to_string(), K::shape_class(shape), device_identity(target)};
  const bool known = find_tuning(key).has_value();
  auto k = get_tuned<K>(p, shape, target);
  return {key.shape_class, K::to_params(k.params()).to_string(), known && autotune_enabled()};
}
template <class K> void check_shape(const std::vector<std::int64_t>& numbers) { K::shape_of(numbers); }
struct Tuner {
  const char* shape_names;                                // "m, n, k"
  void (*check_shape)(const std::vector<std::int64_t>&);  // throws Error naming what is wrong
  TuneOutcome (*tune)(const ParamSet& base, const std::vector<std::int64_t>& shape, const Target& target);
};
// The shipped kernels that can be tuned from a manifest (gemm); nullptr for the others.
const Tuner* tuner_for(std::string_view kernel);
}  // namespace detail

}  // namespace jit
