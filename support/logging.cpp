// The library's spdlog logger and warn-once bookkeeping.
#include "support/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace jit::detail {

namespace {

struct Level {
  spdlog::level::level_enum level = spdlog::level::warn;
  std::string unknown;  // a JITK_LOG_LEVEL that is not a level
};

const Level& configured_level() {
  static const Level l = [] {
    Level l;
    if (const char* env = std::getenv("JITK_LOG_LEVEL"); env && *env) {
      std::string word(env);
      for (auto& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (word == "warning") word = "warn";
      l.level = spdlog::level::from_str(word);
      // from_str answers "off" for a word it does not know; only honour a real "off".
      if (l.level == spdlog::level::off && word != "off") {
        l.level = spdlog::level::warn;
        l.unknown = env;
      }
    }
    return l;
  }();
  return l;
}

// jit::configure's level (set_log_level), which wins over JITK_LOG_LEVEL; -1: none set.
std::atomic<int> g_chosen_level{-1};

spdlog::level::level_enum effective_level() {
  const int chosen = g_chosen_level.load(std::memory_order_relaxed);
  return chosen >= 0 ? static_cast<spdlog::level::level_enum>(chosen) : configured_level().level;
}

}  // namespace

bool logging_at(spdlog::level::level_enum level) {
  const Level& l = configured_level();
  if (!l.unknown.empty() && g_chosen_level.load(std::memory_order_relaxed) < 0) log();  // says once that the setting was not understood
  const auto now = effective_level();
  return level >= now && now != spdlog::level::off;
}

void set_log_level(spdlog::level::level_enum level) {
  g_chosen_level.store(static_cast<int>(level), std::memory_order_relaxed);
  log().set_level(level);
}

spdlog::level::level_enum log_level() { return effective_level(); }

spdlog::logger& log() {
  static spdlog::logger* logger = [] {
    const Level& level = configured_level();
    auto* l = new spdlog::logger("jitk", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[jitk %L] %v");
    l->set_level(effective_level());
    l->flush_on(spdlog::level::warn);
    if (!level.unknown.empty() && g_chosen_level.load() < 0)
      l->warn("JITK_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, critical, off); using warn",
              level.unknown);
    return l;
  }();
  return *logger;
}

void warn_once(std::string_view topic, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> seen;
  {
    std::lock_guard lock(mutex);
    if (!seen.emplace(topic).second) return;
  }
  log().warn("{}", message);
}

}  // namespace jit::detail
