// Inspecting and maintaining the on-disk kernel cache, and warming it: what the jitk tool calls.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "jit/jit.hpp"

namespace jit::cache {

struct ArtifactInfo {
  std::string key;
  std::string kernel;
  std::string params;
  std::string backend;
  std::string arch;
  std::string compiler;
  std::int64_t size_bytes = 0;
  double compile_ms = 0;
  std::int64_t created = 0;    // unix seconds
  std::int64_t last_used = 0;  // unix seconds
  std::int64_t hits = 0;
  std::string implementation;  // "" for artifacts of cache format 1 (before implementations)
  int implementation_version = 0;
};

struct Stats {
  std::int64_t entries = 0;
  std::int64_t bytes = 0;
  std::int64_t hits = 0;      // artifacts found on disk by a process that needed them
  std::int64_t misses = 0;    // requests that found nothing on disk
  std::int64_t compiles = 0;  // artifacts compiled and stored
};

struct ClearResult {
  std::int64_t entries = 0;
  std::int64_t bytes = 0;
};

struct VerifyProblem {
  std::string key;
  std::string what;  // "blob missing", "checksum mismatch", "blob without index row", ...
};

struct BackendStatus {
  std::string name;
  bool available = false;
  std::string detail;  // the compiler/arch when available, the reason when not
};

std::filesystem::path root();
// "" when the cache is on disk, else why it runs from memory only.
std::string unavailable_reason();
std::vector<ArtifactInfo> list();
Stats stats();
ClearResult clear();
// Removes the artifacts of one kernel.
ClearResult clear_kernel(const std::string& kernel);
// Removes the artifacts of shipped kernels whose implementation this jitk no longer ships at
// that version (and those from before implementations). Artifacts of kernels or implementations
// it does not know (a program's own) are kept and reported: only that program knows them.
struct StaleResult {
  ClearResult removed;
  std::int64_t kept_unknown = 0;
  std::vector<std::string> unknown;  // "kernel/implementation", once each
};
StaleResult prune_stale();
// Evicts least recently used artifacts down to max_bytes, and those unused for older_than_seconds.
ClearResult prune(std::optional<std::int64_t> max_bytes, std::optional<std::int64_t> older_than_seconds);
// "2G", "500M", "64K", bytes -> bytes (powers of 1024); "30d", "12h", "45m", "90s" -> seconds.
std::optional<std::int64_t> parse_size(const std::string& text);
std::optional<std::int64_t> parse_age(const std::string& text);
// Checks every row against its blob and every blob against its row; with fix, drops what is bad.
std::vector<VerifyProblem> verify(bool fix);
std::vector<BackendStatus> backends();

// ---- warming -------------------------------------------------------------------------------------
struct WarmItem {
  std::string kernel;
  Target target;
  ParamSet params;
  std::string origin;  // "warm.toml: kernel #2" for messages
};

// Parses a manifest (TOML: [[kernel]] name, target, params; arrays expand to every combination).
// Throws jit::Error{Manifest} naming the entry and the problem; validates every combination.
std::vector<WarmItem> parse_manifest(const std::filesystem::path& file);

struct WarmResult {
  const WarmItem* item = nullptr;
  enum class Outcome { Compiled, AlreadyCached, Failed } outcome = Outcome::Failed;
  double ms = 0;
  std::string error;
};

// Compiles every item not already cached, `jobs` at a time; calls on_done once per item
// (from worker threads, one at a time).
std::vector<WarmResult> warm(const std::vector<WarmItem>& items, int jobs,
                             const std::function<void(const WarmResult&)>& on_done = {});

}  // namespace jit::cache
