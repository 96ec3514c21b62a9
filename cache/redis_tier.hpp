// The remote tier on Redis (hiredis): blobs shared by a fleet, and the lease that makes one machine compile each.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "cache/remote_address.hpp"
#include "cache/storage_tier.hpp"

struct redisContext;

namespace jit::detail {

// Keys, all under one namespace so a Redis can be shared and a format change starts afresh:
//   jitk:v1:blob:<key>   the whole blob (header binding it to its key, then the payload)
//   jitk:v1:lease:<key>  "<host>:<pid>:<random>" while one process compiles key (SET NX PX, renewed)
//   jitk:v1:stats        fleet counters (HINCRBY): hits, misses, compiles, waits, ...
//   jitk:v1:compiles     per key: how many times the fleet compiled it (1 when single flight works)
// Everything read is untrusted: bounded (max_entry_bytes), verified as a local blob is, and a bad
// entry is counted, logged, never loaded, deleted (read-write) and replaced by the fresh compile.
// A failure (refused, timeout, auth, a reply that is not what was asked) is one WARN per process,
// counted; the remote is then left alone for retry_ms and every lookup is a miss meanwhile.
class RedisTier final : public StorageTier, public std::enable_shared_from_this<RedisTier> {
 public:
  RedisTier(cache::RemoteOptions options, RedisAddress address);
  ~RedisTier() override;
  RedisTier(const RedisTier&) = delete;
  RedisTier& operator=(const RedisTier&) = delete;

  std::string name() const override { return address_.shown; }
  std::optional<std::vector<char>> get(const std::string& key, const ArtifactMeta& meta, Count count) override;
  bool put(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload, PutReason why) override;
  void remove(const std::string& key) override;
  TierStats stats() override;
  FlightClaim claim(const std::string& key, const ArtifactMeta& meta) override;

  // A whole blob (header and payload) as a pack carries it, checked and bound to key, then SET.
  // False when read-only or down.
  bool put_blob(const std::string& key, const std::string& blob);
  bool exists(const std::string& key);
  // "" when it connects, authenticates and answers PING; else why not (not counted, no WARN).
  std::string ping(double* round_trip_ms);
  cache::RemoteStats local_stats() const;
  // Throws Error{CacheIo} when the remote cannot be reached.
  cache::RemoteStats fleet_stats();
  const cache::RemoteOptions& options() const { return options_; }

 private:
  friend class RedisLease;
  struct Reply;
  // Runs one command (argv of binary-safe strings) under the connection's mutex; nullopt after a
  // failure (counted, one WARN, remote left alone for retry_ms). quiet: no WARN, no backoff (ping).
  std::optional<Reply> command(std::initializer_list<std::string_view> argv, bool quiet = false);
  bool connect_locked(std::string* problem);
  void fail_locked(const std::string& problem, bool quiet);
  void count(const char* field, std::int64_t by = 1);
  std::string blob_key(const std::string& key) const { return "jitk:v1:blob:" + key; }
  std::string lease_key(const std::string& key) const { return "jitk:v1:lease:" + key; }
  // GETRANGE bounded by max_entry_bytes, verified; a bad entry is dropped.
  std::optional<std::vector<char>> read_verified(const std::string& key, const ArtifactMeta& meta);

  cache::RemoteOptions options_;
  RedisAddress address_;
  bool writable_;
  std::mutex mutex_;  // the connection: one command at a time
  redisContext* context_ = nullptr;
  std::string last_problem_;
  std::chrono::steady_clock::time_point down_until_{};
  struct Counters {
    std::atomic<std::int64_t> hits{0}, misses{0}, compiles{0}, waits{0}, wait_timeouts{0}, errors{0}, bad_entries{0},
        bytes_read{0}, bytes_written{0};
  } counters_;
};

}  // namespace jit::detail
