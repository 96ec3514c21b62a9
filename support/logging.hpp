// jitk's logger (spdlog, stderr, level from JITK_LOG_LEVEL: trace, debug, info, warn (default), error, off).
#pragma once
#include <spdlog/spdlog.h>

#include <string_view>

namespace jit::detail {

// Made at its first use and never destroyed (objects logging from their destructors at exit are
// safe). Making it costs ~0.07 ms, so a path that may log nothing asks logging_at() first.
spdlog::logger& log();
// Whether a message at `level` would be written (JITK_LOG_LEVEL, read once; makes no logger).
bool logging_at(spdlog::level::level_enum level);
// The level from now on, whatever JITK_LOG_LEVEL says (jit::configure); any thread, any time.
void set_log_level(spdlog::level::level_enum level);
// The level in effect: set_log_level's, else JITK_LOG_LEVEL's, else warn.
spdlog::level::level_enum log_level();
// Logs at WARN the first time `topic` is seen in this process; later calls are silent.
void warn_once(std::string_view topic, const std::string& message);

}  // namespace jit::detail
