// The library's spdlog logger and warn-once bookkeeping.
#include "runtime/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace jit::detail {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("jitk", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[jitk %L] %v");
    auto level = spdlog::level::warn;
    std::string unknown;
    if (const char* env = std::getenv("JITK_LOG_LEVEL"); env && *env) {
      std::string word(env);
      for (auto& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (word == "warning") word = "warn";
      level = spdlog::level::from_str(word);
      // from_str answers "off" for a word it does not know; only honour a real "off".
      if (level == spdlog::level::off && word != "off") {
        level = spdlog::level::warn;
        unknown = env;
      }
    }
    l->set_level(level);
    l->flush_on(spdlog::level::warn);
    if (!unknown.empty())
      l->warn("JITK_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, critical, off); using warn", unknown);
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
