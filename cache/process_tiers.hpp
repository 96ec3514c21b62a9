// The process's cache, built once from the environment: the one place that reads where and how artifacts are kept.
#pragma once
#include <memory>
#include <string>

#include <filesystem>
#include <optional>

#include "cache/cache_root.hpp"
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
// Whether process_tiers() was made (the cache settings are then fixed).
bool process_tiers_made();

// The tier a URL names ("file:///srv/jitk-cache"), by its scheme's row in one table; null, with
// one WARN, for a scheme no row has. Adding a tier kind (redis://) is adding a row.
std::shared_ptr<StorageTier> tier_for_url(const std::string& url);

// The remote tier options name: null (one WARN) for a URL that does not parse, mode off, or a build
// without hiredis.
std::shared_ptr<StorageTier> make_remote_tier(const cache::RemoteOptions& options);
// jit::cache::set_remote: throws Error{InvalidParams} once process_tiers() was made.
void set_remote_options(const cache::RemoteOptions& options);

// Where and how the process keeps artifacts: jit::configure's choice for each, else the environment's
// (JITK_CACHE_DIR / XDG_CACHE_HOME / HOME, JITK_CACHE_MODE, JITK_REMOTE*). Fixed once the tiers are made.
struct CacheSettings {
  std::filesystem::path root;
  CacheRoot::Access access = CacheRoot::Access::ReadWrite;
  cache::RemoteOptions remote;
  bool root_chosen = false, access_chosen = false, remote_chosen = false;  // by code, not the environment
};
// The settings the tiers were made with, or (before) would be made with now.
CacheSettings cache_settings();
// JITK_CACHE_MODE: read-write (rw), read-only (ro), memory (memory-only, off); unset: read-write. A word
// it does not know is one WARN and read-only (neither writing where one must not, nor a silent cold cache).
CacheRoot::Access cache_access_from_environment();
// Sets the root, mode and remote that are given (all or none), before the tiers are made. Once they are,
// a value different from the one in use throws Error{InvalidParams} and nothing changes; the same
// value is accepted (configure may be called again with what it set).
void set_cache_settings(const std::optional<std::filesystem::path>& root, std::optional<CacheRoot::Access> access,
                        const std::optional<cache::RemoteOptions>& remote);
// "read-write", "read-only", "memory-only".
const char* access_name(CacheRoot::Access access);
// read-write (rw), read-only (ro), memory-only (memory, off); nullopt for another word.
std::optional<CacheRoot::Access> access_from_word(const std::string& word);

}  // namespace jit::detail
