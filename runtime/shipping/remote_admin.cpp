// jit::cache's remote verbs: setting the remote, its counters, ping, pushing local artifacts to it.
#include "cache/process_tiers.hpp"
#include "jit/cache.hpp"
#include "jit/error.hpp"
#if JITK_WITH_REDIS
#include "cache/redis_tier.hpp"
#endif

namespace jit::cache {

namespace {
#if JITK_WITH_REDIS
detail::RedisTier* remote_tier() { return dynamic_cast<detail::RedisTier*>(detail::process_tiers().remote.get()); }
#endif
[[noreturn]] void no_remote() {
#if JITK_WITH_REDIS
  throw Error(ErrorCode::InvalidParams, "no remote cache is configured (set JITK_REMOTE=redis://host:port, see docs/fleet-cache.md)");
#else
  throw Error(ErrorCode::InvalidParams, "this build of jitk has no remote tier (built without hiredis)");
#endif
}
}  // namespace

void set_remote(const RemoteOptions& options) { detail::set_remote_options(options); }

std::optional<RemoteStats> remote_stats(bool fleet) {
#if JITK_WITH_REDIS
  if (auto* r = remote_tier()) return fleet ? r->fleet_stats() : r->local_stats();
#endif
  return std::nullopt;
}

std::string remote_ping(double* round_trip_ms) {
#if JITK_WITH_REDIS
  if (auto* r = remote_tier()) return r->ping(round_trip_ms);
#endif
  no_remote();
}

std::int64_t push_to_remote() {
#if JITK_WITH_REDIS
  auto* r = remote_tier();
  if (!r) no_remote();
  if (r->options().mode != RemoteOptions::Mode::ReadWrite)
    throw Error(ErrorCode::InvalidParams, "the remote cache " + r->name() + " is read-only here (JITK_REMOTE_MODE)");
  if (std::string why = r->ping(nullptr); !why.empty())
    throw Error(ErrorCode::CacheIo, "the remote cache " + r->name() + " cannot be reached: " + why);
  detail::DiskTier& disk = *detail::process_tiers().disk;
  std::int64_t pushed = 0;
  for (const auto& row : disk.rows()) {
    if (r->exists(row.key)) continue;
    auto blob = disk.read_blob(row.key);  // verified and bound to its key
    if (!blob) continue;
    if (!r->put_blob(row.key, std::string(blob->begin(), blob->end())))
      throw Error(ErrorCode::CacheIo, "the remote cache " + r->name() + " refused or failed a write after " +
                                          std::to_string(pushed) + " artifacts (the log says why)");
    ++pushed;
  }
  return pushed;
#else
  no_remote();
#endif
}

}  // namespace jit::cache
