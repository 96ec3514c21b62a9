// jit::configure: the cache root, cache mode, remote and log level from code, over the environment's.
#include "jit/config.hpp"

#include <atomic>
#include <cstdlib>

#include "cache/process_tiers.hpp"
#include "jit/error.hpp"
#include "support/logging.hpp"

namespace jit {
namespace {

using detail::CacheRoot;

// One row per level: the public name, spdlog's, the word.
struct LevelRow {
  LogLevel level;
  spdlog::level::level_enum spd;
  const char* word;
};
constexpr LevelRow kLevels[] = {
    {LogLevel::Trace, spdlog::level::trace, "trace"}, {LogLevel::Debug, spdlog::level::debug, "debug"},
    {LogLevel::Info, spdlog::level::info, "info"},    {LogLevel::Warn, spdlog::level::warn, "warn"},
    {LogLevel::Error, spdlog::level::err, "error"},   {LogLevel::Critical, spdlog::level::critical, "critical"},
    {LogLevel::Off, spdlog::level::off, "off"},
};

CacheRoot::Access access_of(CacheMode mode) {
  switch (mode) {
    case CacheMode::ReadWrite: return CacheRoot::Access::ReadWrite;
    case CacheMode::ReadOnly: return CacheRoot::Access::ReadOnly;
    case CacheMode::MemoryOnly: return CacheRoot::Access::None;
  }
  throw Error(ErrorCode::InvalidParams, "jit::configure: cache_mode " + std::to_string(static_cast<int>(mode)) + " is not a CacheMode");
}

CacheMode mode_of(CacheRoot::Access access) {
  switch (access) {
    case CacheRoot::Access::ReadWrite: return CacheMode::ReadWrite;
    case CacheRoot::Access::ReadOnly: return CacheMode::ReadOnly;
    case CacheRoot::Access::None: return CacheMode::MemoryOnly;
  }
  return CacheMode::ReadWrite;
}

const LevelRow& row_of(LogLevel level) {
  for (const auto& r : kLevels)
    if (r.level == level) return r;
  throw Error(ErrorCode::InvalidParams, "jit::configure: log_level " + std::to_string(static_cast<int>(level)) + " is not a LogLevel");
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

std::atomic<bool> g_level_chosen{false};

}  // namespace

const char* to_string(CacheMode mode) { return detail::access_name(access_of(mode)); }
const char* to_string(LogLevel level) { return row_of(level).word; }

std::optional<CacheMode> parse_cache_mode(const std::string& word) {
  if (auto access = detail::access_from_word(word)) return mode_of(*access);
  return std::nullopt;
}

std::optional<LogLevel> parse_log_level(const std::string& word) {
  for (const auto& r : kLevels)
    if (word == r.word) return r.level;
  if (word == "warning") return LogLevel::Warn;
  return std::nullopt;
}

void configure(const Config& config) {
  // Everything checked before anything changes: a call that throws leaves the process as it was.
  std::optional<std::filesystem::path> root;
  if (config.cache_dir) {
    const std::string text = config.cache_dir->string();
    if (text.empty()) throw Error(ErrorCode::InvalidParams, "jit::configure: cache_dir is empty");
    if (text.find('\0') != std::string::npos)
      throw Error(ErrorCode::InvalidParams, "jit::configure: cache_dir holds a NUL character");
    std::error_code ec;
    root = std::filesystem::absolute(*config.cache_dir, ec).lexically_normal();
    if (ec) throw Error(ErrorCode::InvalidParams, "jit::configure: cache_dir " + text + " cannot be made absolute: " + ec.message());
  }
  std::optional<CacheRoot::Access> access;
  if (config.cache_mode) access = access_of(*config.cache_mode);
  const LevelRow* level = config.log_level ? &row_of(*config.log_level) : nullptr;
  detail::set_cache_settings(root, access, config.remote);  // throws when the cache is in use and they differ
  if (level) {
    detail::set_log_level(level->spd);
    g_level_chosen = true;
  }
}

EffectiveConfig current_config() {
  const detail::CacheSettings s = detail::cache_settings();
  EffectiveConfig out;
  out.config.cache_dir = s.root;
  out.cache_dir_from = s.root_chosen                ? "jit::configure"
                       : env_set("JITK_CACHE_DIR")  ? "JITK_CACHE_DIR"
                       : env_set("XDG_CACHE_HOME")  ? "XDG_CACHE_HOME"
                       : env_set("HOME")            ? "HOME"
                                                    : "default";
  out.config.cache_mode = mode_of(s.access);
  out.cache_mode_from = s.access_chosen ? "jit::configure" : env_set("JITK_CACHE_MODE") ? "JITK_CACHE_MODE" : "default";
  out.config.remote = s.remote;
  out.remote_from = s.remote_chosen ? "jit::configure" : env_set("JITK_REMOTE") ? "JITK_REMOTE" : "default";
  const auto spd = detail::log_level();
  for (const auto& r : kLevels)
    if (r.spd == spd) out.config.log_level = r.level;
  out.log_level_from = g_level_chosen ? "jit::configure" : env_set("JITK_LOG_LEVEL") ? "JITK_LOG_LEVEL" : "default";
  return out;
}

}  // namespace jit
