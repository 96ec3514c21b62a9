// jitk's logger (spdlog, stderr, level from JITK_LOG_LEVEL: trace, debug, info, warn (default), error, off).
#pragma once
#include <spdlog/spdlog.h>

#include <string_view>

namespace jit::detail {

spdlog::logger& log();
// Logs at WARN the first time `topic` is seen in this process; later calls are silent.
void warn_once(std::string_view topic, const std::string& message);

}  // namespace jit::detail
