// Building the process's tiers from the environment, and the table of tier schemes.
#include "cache/process_tiers.hpp"

#include <cstdlib>
#include <sstream>

#include "cache/cache_root.hpp"
#include "support/logging.hpp"
#include "support/text.hpp"
#include "support/units.hpp"

namespace jit::detail {
namespace {

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
    auto disk = std::make_shared<DiskTier>(cache_root_path(), size_limit_from_environment());
    std::vector<std::shared_ptr<StorageTier>> lookup{disk};
    if (const char* urls = std::getenv("JITK_REMOTE_CACHE"); urls && *urls) {
      std::istringstream in(urls);
      for (std::string url; in >> url;)
        if (auto tier = tier_for_url(url)) lookup.push_back(std::move(tier));
    }
    // Single flight across processes uses the local disk's locks: a process compiles once per
    // machine; a fleet-wide lock is the remote tier's business, if ever.
    TierStack stack(std::move(lookup), [disk](const std::string& key) { return disk->lock(key); });
    TuningStore tuning([disk]() -> SqliteIndex& { return disk->index(); },
                       [disk](const std::string& why) { disk->give_up_busy(why); });
    return ProcessTiers{disk, std::move(tuning), std::move(stack)};
  }();
  return tiers;
}

}  // namespace jit::detail
