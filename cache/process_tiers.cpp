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
std::atomic<bool> g_tiers_made{false};

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

ProcessTiers& process_tiers() {
  static ProcessTiers tiers = [] {
    std::optional<cache::RemoteOptions> chosen;
    {
      std::lock_guard lock(g_remote_mutex);
      g_tiers_made = true;
      chosen = g_remote_options;
    }
    auto disk = std::make_shared<DiskTier>(cache_root_path(), size_limit_from_environment());
    std::vector<std::shared_ptr<StorageTier>> lookup{disk};
    // Memory, local disk, then the fleet's remote, then JITK_REMOTE_CACHE's tiers.
    std::shared_ptr<StorageTier> remote = make_remote_tier(chosen ? *chosen : cache::remote_options_from_environment());
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
