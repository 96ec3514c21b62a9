// Autotuning decisions: where they are kept (the process's tuning store), which device they
// belong to, and the one-tuner-per-key lock (jit/tuning.hpp has the tuning itself).
#include "jit/tuning.hpp"
#include "jit/kernels.hpp"

#include <cstdlib>
#include <thread>

#include "cache/cache_key.hpp"
#include "cache/process_tiers.hpp"
#include "jit/cuda.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/get_kernel.hpp"
#include "support/logging.hpp"

namespace jit {
namespace detail {
namespace {

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

bool autotune_enabled() {
  const char* v = std::getenv("JITK_AUTOTUNE");
  return !(v && std::string(v) == "0");
}

// A decision holds for the same hardware seen the same way (each driver says what that is).
std::string device_identity(const Target& target) { return driver_for(target).device_identity(target); }

std::optional<std::string> find_tuning(const TuningKey& key) {
  try {
    if (auto row = process_tiers().tuning.find(key.kernel, key.base_params, key.shape_class, key.device))
      return row->choice;
  } catch (const Error& e) {
    warn_once("tuning-read", std::string("cannot read autotuning decisions from the cache index (tuning again): ") + e.what());
  }
  return std::nullopt;
}

void store_tuning(const TuningKey& key, const std::string& choice, std::int64_t candidates, double best_ms,
                  double default_ms, double tuning_ms) {
  log().info("autotuned {} ({}) for {} on {}: {} ({:.3f} ms; the base params {:.3f} ms; {} candidates timed in {:.0f} ms)",
             key.kernel, key.base_params, key.shape_class, key.device, choice, best_ms, default_ms, candidates, tuning_ms);
  try {
    if (!process_tiers().tuning.store({key.kernel, key.base_params, key.shape_class, key.device, choice, candidates, best_ms,
                                       default_ms, tuning_ms, now_seconds()}))
      warn_once("tuning-store", "the kernel cache is not on disk (or read-only): autotuning decisions last only for this process");
  } catch (const Error& e) {
    warn_once("tuning-store", std::string("cannot keep an autotuning decision in the cache index (it lasts for this process): ") + e.what());
  }
}

Stopwatch::Stopwatch(const Target& target) {
  if (target.backend == Backend::Cuda) events_ = std::make_unique<cuda::Timer>(target.device);
}
Stopwatch::~Stopwatch() = default;
void Stopwatch::start() {
  if (events_) return events_->start();
  t0_ = std::chrono::steady_clock::now();
}
double Stopwatch::stop_ms() {
  if (events_) return events_->stop_ms();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

const Tuner* tuner_for(std::string_view kernel) {
  static const Tuner gemm{kernels::Gemm::shape_names, check_shape<kernels::Gemm>, tune_erased<kernels::Gemm>};
  return kernel == kernels::Gemm::name ? &gemm : nullptr;
}

void note_skipped_candidate(const TuningKey& key, const std::string& params, const std::string& why) {
  log().warn("autotuning {} for {}: candidate ({}) left out: {}", key.kernel, key.shape_class, params, why);
}

bool artifact_on_disk(const std::string& kernel, const ParamSet& params, const Target& target) {
  return process_tiers().disk->has_valid_blob(resolve(kernel, params, target).key);
}

void drop_tuning_loser(const std::string& kernel, const ParamSet& params, const Target& target) try {
  if (!process_tiers().disk->writable()) return;  // nothing was kept on disk
  const Specialization s = resolve(kernel, params, target);
  // A decision (this one's or another process's, for another shape) that chose these params keeps them.
  const std::string text = s.params.to_string();
  for (const auto& row : process_tiers().tuning.rows())
    if (row.kernel == kernel && (row.choice == text || row.choice == params.to_string())) return;
  process_tiers().disk->remove(s.key);
  if (logging_at(spdlog::level::debug)) log().debug("autotuning {}: removed the losing candidate ({}) from the cache", kernel, text);
} catch (const std::exception& e) {
  warn_once("tuning-drop", std::string("autotuning: could not remove a losing candidate from the cache (it stays): ") + e.what());
}

TuningLock::TuningLock(const TuningKey& key) {
  const std::string id = KeyBuilder().add("tuning", key.kernel).add("base", key.base_params).add("shape", key.shape_class)
                             .add("device", key.device).finish().hex();
  std::unique_ptr<FileLock> lock = process_tiers().stack.lock("tune-" + id);
  held_ = std::shared_ptr<FileLock>(std::move(lock));
}

TuningLock::~TuningLock() = default;

}  // namespace detail

namespace cache {
std::vector<TuningInfo> tuning() {
  std::vector<TuningInfo> out;
  for (const auto& r : detail::process_tiers().tuning.rows())
    out.push_back({r.kernel, r.base_params, r.shape_class, r.device, r.choice, r.candidates, r.best_ms, r.default_ms,
                   r.tuning_ms, r.created});
  return out;
}
}  // namespace cache

}  // namespace jit
