// The process's cache, built once from the environment: the one place that reads where and how artifacts are kept.
#pragma once
#include <memory>
#include <string>

#include "cache/disk_tier.hpp"
#include "cache/tier_stack.hpp"
#include "cache/tuning_store.hpp"
#include "jit/cache.hpp"

namespace jit::detail {

// Everything else is handed what it uses from here: the get path the stack, the admin functions
// (jitk ls, prune, clear, export, import) the disk tier, autotuning the tuning store.
struct ProcessTiers {
  std::shared_ptr<DiskTier> disk;  // $JITK_CACHE_DIR (or XDG / ~/.cache/jitk), $JITK_CACHE_MAX_SIZE
  TuningStore tuning;              // in the disk tier's index
  TierStack stack;                 // the disk tier, the remote, then each tier $JITK_REMOTE_CACHE names
  std::shared_ptr<StorageTier> remote;  // $JITK_REMOTE or jit::cache::set_remote's (a RedisTier); may be null
};

// Made at first use (a few stats: the index opens at its first use, which a disk hit does not have).
ProcessTiers& process_tiers();

// The tier a URL names ("file:///srv/jitk-cache"), by its scheme's row in one table; null, with
// one WARN, for a scheme no row has. Adding a tier kind (redis://) is adding a row.
std::shared_ptr<StorageTier> tier_for_url(const std::string& url);

// The remote tier options name: null (one WARN) for a URL that does not parse, mode off, or a build
// without hiredis.
std::shared_ptr<StorageTier> make_remote_tier(const cache::RemoteOptions& options);
// jit::cache::set_remote: throws Error{InvalidParams} once process_tiers() was made.
void set_remote_options(const cache::RemoteOptions& options);

}  // namespace jit::detail
