// Building the process's tiers from the environment, and the table of tier schemes.
#include "cache/process_tiers.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "cache/cache_root.hpp"
#include "cache/remote_address.hpp"
#if JITK_WITH_REDIS
#include "cache/redis_tier.hpp"
#endif
#include "jit/error.hpp"
#include "support/logging.hpp"
#include "support/text.hpp"
#include "support/units.hpp"

namespace jit::detail {
namespace {

// The remote options set_remote gave before the tiers were made (else the environment's).
std::mutex g_remote_mutex;
std::optional<cache::RemoteOptions> g_remote_options;
std::optional<std::filesystem::path> g_root;           // jit::configure's cache root
std::optional<CacheRoot::Access> g_access;             // jit::configure's cache mode
std::optional<CacheSettings> g_made_with;               // set when the tiers are made
std::atomic<bool> g_tiers_made{false};

// What the tiers would be made with now; under g_remote_mutex.
CacheSettings settings_now() {
  if (g_made_with) return *g_made_with;
  return {g_root ? *g_root : cache_root_path(), g_access ? *g_access : cache_access_from_environment(),
          g_remote_options ? *g_remote_options : cache::remote_options_from_environment(), g_root.has_value(),
          g_access.has_value(), g_remote_options.has_value()};
}

// A root as CacheRoot opens it: absolute, normal, no trailing separator (to compare two namings).
std::filesystem::path normal_root(const std::filesystem::path& root) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(root, ec).lexically_normal();
  if (ec) p = root.lexically_normal();
  if (p.filename().empty() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

bool same_remote(const cache::RemoteOptions& a, const cache::RemoteOptions& b) {
  return a.url == b.url && a.mode == b.mode && a.connect_timeout_ms == b.connect_timeout_ms &&
         a.command_timeout_ms == b.command_timeout_ms && a.lease_ttl_ms == b.lease_ttl_ms && a.wait_ms == b.wait_ms && a.poll_ms == b.poll_ms &&
         a.retry_ms == b.retry_ms && a.max_entry_bytes == b.max_entry_bytes;
}

std::shared_ptr<StorageTier> redis_tier(const std::string& url) {
  cache::RemoteOptions options;
  {
    std::lock_guard lock(g_remote_mutex);
    options = g_remote_options ? *g_remote_options : cache::remote_options_from_environment();
  }
  options.url = url;
  return make_remote_tier(options);
}

struct TierScheme {
  const char* scheme;  // before "://"
  const char* what;    // for the warning that lists the schemes there are
  std::shared_ptr<StorageTier> (*make)(const std::string& url, const std::string& rest);
};

// One row per kind of tier a URL can name.
const TierScheme kTierSchemes[] = {
    {"file", "a cache folder of the same layout, e.g. on a shared file system (file:///srv/jitk-cache)",
     [](const std::string& url, const std::string& path) -> std::shared_ptr<StorageTier> {
       return std::make_shared<DiskTier>(path, std::nullopt, url);
     }},
    {"redis", "a Redis server shared by a fleet (redis://[user:password@]host:port[/db]; docs/fleet-cache.md)",
     [](const std::string& url, const std::string&) { return redis_tier(url); }},
    {"unix", "a Redis server on a unix socket (unix:///run/redis/redis.sock)",
     [](const std::string& url, const std::string&) { return redis_tier(url); }},
};

std::optional<std::int64_t> size_limit_from_environment() {
  const char* limit = std::getenv("JITK_CACHE_MAX_SIZE");
  if (!limit || !*limit) return std::nullopt;
  std::string why;
  auto bytes = parse_size(limit, &why);
  if (!bytes)
    warn_once("cache-max-size", "JITK_CACHE_MAX_SIZE='" + printable(limit) + "' is not a size (" + why + "; give " + kSizeForms +
                                    "); the cache has no size limit");
  return bytes;
}

}  // namespace

std::shared_ptr<StorageTier> make_remote_tier(const cache::RemoteOptions& options) {
  if (options.url.empty() || options.mode == cache::RemoteOptions::Mode::Off) return nullptr;
  std::string problem;
  auto address = parse_redis_url(options.url, &problem);
  if (!address) {
    // Never echo credentials, nor control characters to a terminal.
    std::string shown = options.url.find('@') == std::string::npos ? options.url.substr(0, 200) : "(a URL with credentials)";
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    warn_once("remote-url", "remote cache '" + shown + "' is not used: " + problem +
                                " (redis://[user:password@]host:port[/db] or unix:///path)");
    return nullptr;
  }
#if JITK_WITH_REDIS
  return std::make_shared<RedisTier>(options, std::move(*address));
#else
  warn_once("remote-unbuilt", "the remote cache " + address->shown +
                                  " is not used: this build of jitk has no remote tier (built without hiredis; install "
                                  "libhiredis-dev and rebuild)");
  return nullptr;
#endif
}

void set_remote_options(const cache::RemoteOptions& options) {
  std::lock_guard lock(g_remote_mutex);
  if (g_tiers_made)
    throw Error(ErrorCode::InvalidParams, "jit::cache::set_remote: the cache is already in use in this process; call it "
                                          "before the first jit::get or cache call");
  g_remote_options = options;
}

const char* access_name(CacheRoot::Access access) {
  switch (access) {
    case CacheRoot::Access::ReadWrite: return "read-write";
    case CacheRoot::Access::ReadOnly: return "read-only";
    case CacheRoot::Access::None: return "memory-only";
  }
  return "?";
}

std::optional<CacheRoot::Access> access_from_word(const std::string& m) {
  if (m == "read-write" || m == "rw") return CacheRoot::Access::ReadWrite;
  if (m == "read-only" || m == "ro") return CacheRoot::Access::ReadOnly;
  if (m == "memory-only" || m == "memory" || m == "off") return CacheRoot::Access::None;
  return std::nullopt;
}

CacheRoot::Access cache_access_from_environment() {
  const char* mode = std::getenv("JITK_CACHE_MODE");
  if (!mode || !*mode) return CacheRoot::Access::ReadWrite;
  const std::string m = mode;
  if (auto access = access_from_word(m)) return *access;
  warn_once("cache-mode", "JITK_CACHE_MODE='" + printable(m) + "' is not read-write, read-only or memory-only: the cache is read-only");
  return CacheRoot::Access::ReadOnly;
}

CacheSettings cache_settings() {
  std::lock_guard lock(g_remote_mutex);
  return settings_now();
}

void set_cache_settings(const std::optional<std::filesystem::path>& root, std::optional<CacheRoot::Access> access,
                        const std::optional<cache::RemoteOptions>& remote) {
  std::lock_guard lock(g_remote_mutex);
  if (g_made_with) {
    std::string changed;
    if (root && normal_root(*root) != normal_root(g_made_with->root))
      changed += "cache root " + printable(g_made_with->root.string()) + " -> " + printable(root->string());
    if (access && *access != g_made_with->access)
      changed += std::string(changed.empty() ? "" : ", ") + "cache mode " + access_name(g_made_with->access) + " -> " + access_name(*access);
    if (remote && !same_remote(*remote, g_made_with->remote)) changed += std::string(changed.empty() ? "" : ", ") + "remote";
    if (!changed.empty())
      throw Error(ErrorCode::InvalidParams, "jit::configure: the cache is already in use in this process (" + changed +
                                                "): the cache root, mode and remote can only be set before the first jit::get or "
                                                "cache call (the log level may be changed at any time)");
    return;
  }
  if (root) g_root = normal_root(*root);
  if (access) g_access = *access;
  if (remote) g_remote_options = *remote;
}

std::shared_ptr<StorageTier> tier_for_url(const std::string& url) {
  const auto sep = url.find("://");
  const std::string scheme = sep == std::string::npos ? "" : url.substr(0, sep);
  for (const auto& row : kTierSchemes)
    if (scheme == row.scheme) return row.make(url, url.substr(sep + 3));
  std::string known;
  for (const auto& row : kTierSchemes) known += std::string(known.empty() ? "" : "; ") + row.scheme + ":// (" + row.what + ")";
  warn_once("cache-tier-url " + url, "cache tier '" + url + "' is not used: jitk knows the schemes " + known);
  return nullptr;
}

bool process_tiers_made() { return g_tiers_made.load(); }

ProcessTiers& process_tiers() {
  static ProcessTiers tiers = [] {
    CacheSettings chosen;
    {
      std::lock_guard lock(g_remote_mutex);
      chosen = settings_now();
      g_made_with = chosen;
      g_tiers_made = true;
    }
    auto disk = std::make_shared<DiskTier>(chosen.root, size_limit_from_environment(), "disk", chosen.access);
    std::vector<std::shared_ptr<StorageTier>> lookup{disk};
    // Memory, local disk, then the fleet's remote, then JITK_REMOTE_CACHE's tiers.
    std::shared_ptr<StorageTier> remote = make_remote_tier(chosen.remote);
    if (remote) lookup.push_back(remote);
    if (const char* urls = std::getenv("JITK_REMOTE_CACHE"); urls && *urls) {
      std::istringstream in(urls);
      for (std::string url; in >> url;)
        if (auto tier = tier_for_url(url)) lookup.push_back(std::move(tier));
    }
    // Single flight across processes uses the local disk's locks: a process compiles once per
    // machine; a fleet-wide lock is the remote tier's business, if ever.
    TierStack stack(std::move(lookup), [disk](const std::string& key) { return disk->lock(key); });
    // JITK_REQUEST_KEYS=0: every get renders its text (A/B measurements of the warm path).
    const std::string request_keys = std::getenv("JITK_REQUEST_KEYS") ? std::getenv("JITK_REQUEST_KEYS") : "";
    if (!request_keys.empty() && request_keys != "0" && request_keys != "1")
      warn_once("request-keys", "JITK_REQUEST_KEYS='" + printable(request_keys) + "' is neither 0 nor 1; remembered request keys stay on");
    if (request_keys != "0") stack.set_request_keys(disk->memos("keys"));
    TuningStore tuning([disk]() -> SqliteIndex& { return disk->index(); },
                       [disk](const std::string& why) { disk->give_up_busy(why); });
    return ProcessTiers{disk, std::move(tuning), std::move(stack), std::move(remote)};
  }();
  return tiers;
}

}  // namespace jit::detail
