// Checking an autotuning decision field by field (apart from the store, so the pack reader's
// fuzz target can use it without SQLite).
#include <cmath>
#include <string>
#include <utility>

#include "cache/tuning_store.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {

// Texts of a decision are names and params: short, one line, no control characters.
constexpr std::size_t kMaxTuningText = 64 << 10;
// A decision times at most this many candidates; no timing is longer than this (11.5 days).
constexpr std::int64_t kMaxCandidates = 1'000'000;
constexpr double kMaxMs = 1e9;
// Clocks of the machines a pack goes between may differ by this much.
constexpr std::int64_t kClockSkew = 86400;

}  // namespace

std::string tuning_row_problem(const TuningRow& r, std::int64_t now) {
  const std::pair<const char*, const std::string*> texts[] = {{"kernel", &r.kernel},   {"base_params", &r.base_params},
                                                              {"shape_class", &r.shape_class}, {"device", &r.device},
                                                              {"choice", &r.choice}};
  for (const auto& [name, text] : texts) {
    if (text->size() > kMaxTuningText) return std::string(name) + " is " + std::to_string(text->size()) + " bytes long";
    if (!is_plain_text(*text)) return std::string(name) + " has control characters or is not UTF-8";
  }
  if (r.kernel.empty() || r.device.empty() || r.choice.empty()) return "kernel, device and choice must not be empty";
  if (r.candidates < 1 || r.candidates > kMaxCandidates)
    return "candidates is " + std::to_string(r.candidates) + ", not in [1, " + std::to_string(kMaxCandidates) + "]";
  const std::pair<const char*, double> times[] = {{"best_ms", r.best_ms}, {"default_ms", r.default_ms}, {"tuning_ms", r.tuning_ms}};
  for (const auto& [name, ms] : times)
    if (!std::isfinite(ms) || ms < 0 || ms > kMaxMs)
      return std::string(name) + " is " + std::to_string(ms) + ", not a time in [0, " + std::to_string(kMaxMs) + "] ms";
  if (r.created < 0 || r.created > now + kClockSkew)
    return "created is " + std::to_string(r.created) + ", not a time between 1970 and now";
  return "";
}

}  // namespace jit::detail
