// Setting jitk up from code: where the cache lives and how it is used, the fleet's remote, the log level.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "jit/cache.hpp"

namespace jit {

// How the local disk cache is used. The remote (RemoteOptions::mode) has its own mode.
enum class CacheMode {
  ReadWrite,   // kernels are read from and stored in the cache root (the default)
  ReadOnly,    // kernels found there are used; nothing is created or written (new ones stay in memory)
  MemoryOnly,  // the disk is not touched; kernels last for the process
};

enum class LogLevel { Trace, Debug, Info, Warn, Error, Critical, Off };

// Each setting left empty keeps what the environment says (docs/jitk-tool.md lists the variables):
//   cache_dir   JITK_CACHE_DIR, else $XDG_CACHE_HOME/jitk, else ~/.cache/jitk
//   cache_mode  JITK_CACHE_MODE = read-write | read-only | memory-only
//   remote      JITK_REMOTE, JITK_REMOTE_MODE, JITK_REMOTE_* (the whole RemoteOptions replaces them)
//   log_level   JITK_LOG_LEVEL
// A setting given here wins over its environment variable: the program says what it needs, as
// omp_set_num_threads wins over OMP_NUM_THREADS.
struct Config {
  std::optional<std::filesystem::path> cache_dir;  // a relative one is made absolute now
  std::optional<CacheMode> cache_mode;
  std::optional<cache::RemoteOptions> remote;
  std::optional<LogLevel> log_level;
};

// Applies what `config` gives, all of it or (when it throws) none of it.
// - The log level applies at once, at any time.
// - The cache root, mode and remote are fixed when the cache is first used (the first jit::get or
//   jit::cache call). Before that they apply to it; after it, a value other than the one in use throws
//   Error{InvalidParams} naming it (the same value is accepted, so configure may be called again).
// An empty cache_dir, or one with a NUL character, throws Error{InvalidParams}.
void configure(const Config& config);

// What the process uses (after the first use) or would use now: every field set, and for each
// where it came from ("jit::configure", "JITK_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "default").
struct EffectiveConfig {
  Config config;
  std::string cache_dir_from, cache_mode_from, remote_from, log_level_from;
};
EffectiveConfig current_config();

// "read-write", "read-only", "memory-only" / "trace" ... "off"; and back (nullopt for another word).
const char* to_string(CacheMode mode);
const char* to_string(LogLevel level);
std::optional<CacheMode> parse_cache_mode(const std::string& word);
std::optional<LogLevel> parse_log_level(const std::string& word);

}  // namespace jit
