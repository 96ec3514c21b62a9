// Inspecting and maintaining the on-disk kernel cache, and warming it: what the jitk tool calls.
#pragma once
#include <atomic>
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
  // How a launch covers the work, as the implementation's layout gives it for these params
  // ("row/block 256 thr", "256 thr x 8 elem", "all cores"); "" when the kernel or its
  // implementation is no longer known to this jitk.
  std::string launch;
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

// ---- the fleet cache: a remote tier on Redis behind the local one (docs/fleet-cache.md) -----------
// Looked in after memory and the local disk; a kernel found there is verified (integrity and its
// binding to the key) before it is kept locally and loaded. On a remote miss one process of the fleet
// compiles (it holds a lease) while the others wait for its result. A remote that fails never fails a
// jit::get: one WARN per process, then local compiles.
struct RemoteOptions {
  // redis://[user:password@]host:port[/db] or unix:///path/to/redis.sock; "" for none.
  std::string url;
  enum class Mode { ReadWrite, ReadOnly, Off } mode = Mode::ReadWrite;
  std::int64_t connect_timeout_ms = 300;   // connecting (and authenticating)
  std::int64_t command_timeout_ms = 2000;  // any one command's reply
  std::int64_t lease_ttl_ms = 10000;       // a compiling process renews its lease every third of it
  std::int64_t wait_ms = 120000;           // longest wait for another process's compile
  std::int64_t poll_ms = 100;              // a waiter looks at least this often (its looks start at 5 ms, doubling)
  std::int64_t retry_ms = 5000;            // after a failure, the remote is left alone this long
  std::int64_t max_entry_bytes = std::int64_t{256} << 20;  // larger entries are not read (nor written)
};
// From JITK_REMOTE, JITK_REMOTE_MODE (read-write, read-only, off), JITK_REMOTE_CONNECT_TIMEOUT,
// JITK_REMOTE_TIMEOUT, JITK_REMOTE_LEASE_TTL, JITK_REMOTE_WAIT, JITK_REMOTE_POLL, JITK_REMOTE_RETRY (ms, or "2s", "500ms")
// and JITK_REMOTE_MAX_ENTRY (a size). A value that does not parse is one WARN and its default.
RemoteOptions remote_options_from_environment();
// The remote the process uses instead of the environment's. Call before the first jit::get (or
// cache call); afterwards it throws Error{InvalidParams}. A URL that does not parse, or a build
// without hiredis, is one WARN and no remote tier.
void set_remote(const RemoteOptions& options);
// Counters of the remote: the fleet's (kept in Redis by every process) or this process's.
struct RemoteStats {
  std::string url;  // password hidden
  std::string mode;  // "read-write", "read-only"
  std::int64_t hits = 0, misses = 0, compiles = 0, waits = 0, wait_timeouts = 0, errors = 0, bad_entries = 0;
  std::int64_t bytes_read = 0, bytes_written = 0;
};
// nullopt when this process has no remote tier. fleet: the counters in Redis (throws Error{CacheIo}
// when it cannot be reached), else this process's own.
std::optional<RemoteStats> remote_stats(bool fleet);
// Connects, authenticates and PINGs; "" on success, else why not. Throws Error{InvalidParams}
// when no remote is configured.
std::string remote_ping(double* round_trip_ms = nullptr);
// Copies every verified local artifact the remote lacks into it; returns how many. Throws
// Error{CacheIo} when no remote is configured, it is read-only or cannot be reached.
std::int64_t push_to_remote();

// ---- explaining a key: why two machines miss each other's artifacts -----------------------------
struct KeyComponent {
  std::string name;   // "kernel", "params", "backend", "arch", "compiler", "option", "source saxpy.cpp", ...
  std::string value;  // texts (sources, headers) as their XXH3-128 and size; the rest whole
};
// Every component the cache key of kernel(params) on target is made of, in hashing order, then
// "jitk version" (not hashed: the format and implementation versions are) and last "key". Two
// machines' lists, diffed, show why one misses what the other compiled. Compiles nothing.
std::vector<KeyComponent> explain_key(const std::string& kernel, const std::string& params_text, const Target& target);

// ---- shipping a warmed cache: one file ------------------------------------------------------------
struct ExportResult {
  std::int64_t artifacts = 0;
  std::int64_t tuning = 0;            // autotuning decisions packed (the target's devices only, with --target)
  std::int64_t bytes = 0;             // payload bytes packed
  std::vector<std::string> skipped;   // damaged or missing blobs, one line each
};
// Packs the artifacts (and their index rows) of the cache, or of one target's ("cuda", "cuda:sm_90",
// "cpu"), into `file`, written whole or not at all. Throws Error{CacheIo}.
ExportResult export_pack(const std::filesystem::path& file, const std::optional<Target>& target = std::nullopt);

struct ImportResult {
  std::int64_t imported = 0;
  std::int64_t already = 0;          // the cache had them
  std::int64_t tuning_imported = 0;  // autotuning decisions merged (one the index has for the same key is kept)
  std::int64_t tuning_already = 0;
  std::vector<std::string> stale;    // not imported: this jitk or this machine's compiler would never use them
  std::vector<std::string> unchecked;  // imported without a compiler check (backend not usable here)
};
// Verifies the whole pack (format, every checksum) before merging anything: a damaged pack throws
// Error{CacheIo} and nothing is merged. Artifacts of implementation versions this jitk does not
// ship, or compiled by another compiler version than this machine's, are left out as stale.
ImportResult import_pack(const std::filesystem::path& file);

// ---- warming -------------------------------------------------------------------------------------
struct WarmItem {
  std::string kernel;
  Target target;
  ParamSet params;
  std::string origin;  // "warm.toml: kernel #2" for messages
  // `tune = [[m, n, k], ...]`: shapes `jitk warm --tune` tunes these params for (jit/tuning.hpp)
  std::vector<std::vector<std::int64_t>> tune;
};

// Parses a manifest (TOML: [[kernel]] name, target, params; arrays expand to every combination;
// optional tune = [[m, n, k], ...] on kernels that can be tuned).
// Throws jit::Error{Manifest} naming the entry and the problem; validates every combination.
std::vector<WarmItem> parse_manifest(const std::filesystem::path& file);

struct WarmResult {
  const WarmItem* item = nullptr;
  // NotStarted: `cancel` was set before a worker took the item.
  enum class Outcome { Compiled, AlreadyCached, Failed, NotStarted } outcome = Outcome::NotStarted;
  double ms = 0;
  std::string error;
};

// Compiles every item not already cached, `jobs` at a time; calls on_done once per item that was
// started (from worker threads, one at a time). Once *cancel is true no item is started; those
// running finish and are stored whole (a store is a rename: nothing is ever half-written).
std::vector<WarmResult> warm(const std::vector<WarmItem>& items, int jobs,
                             const std::function<void(const WarmResult&)>& on_done = {},
                             const std::atomic<bool>* cancel = nullptr);

}  // namespace jit::cache
