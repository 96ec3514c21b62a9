// The Redis tier: bounded, verified reads; leases with renewal; failures counted, said once, and waited out.
#include "cache/redis_tier.hpp"

#include <algorithm>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <random>
#include <thread>

#include "cache/blob_format.hpp"
#include "jit/error.hpp"
#include "support/logging.hpp"

namespace jit::detail {

struct RedisTier::Reply {
  int type = REDIS_REPLY_NIL;
  long long integer = 0;
  std::string str;
  std::vector<Reply> elements;
};

namespace {

using Clock = std::chrono::steady_clock;

timeval timeval_of(std::int64_t ms) {
  return {static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
}

// Copies the scalar part of a hiredis reply (freed right after); arrays are copied one level deep by the caller.
void copy_reply(const redisReply* r, std::string* out_str, long long* out_int, int* out_type) {
  *out_type = r->type;
  *out_int = r->integer;
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
    out_str->assign(r->str, r->len);
}

// hiredis writes with write(2): a server that died makes it raise SIGPIPE, which would end the
// program. A library must not change the process's signal handling, so the calling thread blocks
// SIGPIPE while it talks to Redis and takes back a SIGPIPE it caused before unblocking.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    if (!was_pending_) {
      const timespec none{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &none) == -1 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

// What compares a lease's value before touching it: only its holder renews or releases it.
constexpr const char* kRenewScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr const char* kReleaseScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

std::string lease_token() {
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  std::random_device rd;
  std::uint64_t r = (std::uint64_t{rd()} << 32) ^ rd();
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + std::to_string(r);
}

}  // namespace

// Held by the process compiling a key: renewed every third of its ttl by a thread, so a long
// compile keeps it and a dead holder loses it within one ttl; released (if still ours) when destroyed.
class RedisLease final : public FlightLease {
 public:
  RedisLease(std::shared_ptr<RedisTier> tier, std::string lease_key, std::string token)
      : tier_(std::move(tier)), key_(std::move(lease_key)), token_(std::move(token)) {
    renewer_ = std::thread([this] {
      const auto ttl = tier_->options_.lease_ttl_ms;
      std::unique_lock lock(mutex_);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(std::max<std::int64_t>(1, ttl / 3)), [this] { return done_; })) {
        lock.unlock();
        tier_->command({"EVAL", kRenewScript, "1", key_, token_, std::to_string(ttl)});
        lock.lock();
      }
    });
  }
  ~RedisLease() override {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    renewer_.join();
    tier_->command({"EVAL", kReleaseScript, "1", key_, token_});
  }

 private:
  std::shared_ptr<RedisTier> tier_;
  std::string key_, token_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread renewer_;
};

RedisTier::RedisTier(cache::RemoteOptions options, RedisAddress address)
    : options_(std::move(options)),
      address_(std::move(address)),
      writable_(options_.mode == cache::RemoteOptions::Mode::ReadWrite) {}

RedisTier::~RedisTier() {
  if (context_) redisFree(context_);
}

bool RedisTier::connect_locked(std::string* problem) {
  const timeval connect_tv = timeval_of(options_.connect_timeout_ms);
  redisContext* c = address_.socket_path.empty() ? redisConnectWithTimeout(address_.host.c_str(), address_.port, connect_tv)
                                                 : redisConnectUnixWithTimeout(address_.socket_path.c_str(), connect_tv);
  if (!c) {
    *problem = "cannot allocate a connection";
    return false;
  }
  if (c->err) {
    *problem = std::string("cannot connect: ") + c->errstr;
    redisFree(c);
    return false;
  }
  // Authentication and SELECT are bounded by the connect timeout too.
  redisSetTimeout(c, connect_tv);
  auto simple = [&](std::vector<std::string> argv, const char* what) {
    std::vector<const char*> p;
    std::vector<size_t> n;
    for (auto& a : argv) {
      p.push_back(a.data());
      n.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(p.size()), p.data(), n.data()));
    if (!r) {
      *problem = std::string(what) + " failed: " + (c->err ? c->errstr : "no reply");
      return false;
    }
    const bool ok = r->type == REDIS_REPLY_STATUS;
    if (!ok) *problem = std::string(what) + " refused: " + (r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "unexpected reply");
    freeReplyObject(r);
    return ok;
  };
  if (!address_.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!address_.user.empty()) auth.push_back(address_.user);
    auth.push_back(address_.password);
    if (!simple(auth, "AUTH")) {
      redisFree(c);
      return false;
    }
  }
  if (address_.db != 0 && !simple({"SELECT", std::to_string(address_.db)}, "SELECT")) {
    redisFree(c);
    return false;
  }
  redisSetTimeout(c, timeval_of(options_.command_timeout_ms));
  context_ = c;
  return true;
}

void RedisTier::fail_locked(const std::string& problem, bool quiet) {
  last_problem_ = problem;
  if (context_) {
    redisFree(context_);  // a context with an error cannot be used again
    context_ = nullptr;
  }
  if (quiet) return;
  ++counters_.errors;
  down_until_ = Clock::now() + std::chrono::milliseconds(options_.retry_ms);
  warn_once("remote-down " + address_.shown,
            "remote cache " + address_.shown + ": " + problem + "; kernels are found locally or compiled here (tried again after " +
                std::to_string(options_.retry_ms) + " ms; this warning is given once per process)");
  log().debug("remote cache {}: {}", address_.shown, problem);
}

std::optional<RedisTier::Reply> RedisTier::command(std::initializer_list<std::string_view> argv, bool quiet) {
  std::lock_guard lock(mutex_);
  SigpipeBlocked no_sigpipe;
  if (!quiet && Clock::now() < down_until_) return std::nullopt;
  if (!context_) {
    std::string problem;
    if (!connect_locked(&problem)) {
      fail_locked(problem, quiet);
      return std::nullopt;
    }
  }
  std::vector<const char*> p;
  std::vector<size_t> n;
  for (auto a : argv) {
    p.push_back(a.data());
    n.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(context_, static_cast<int>(p.size()), p.data(), n.data()));
  if (!r) {
    fail_locked(std::string(*argv.begin()) + " failed: " + (context_->err ? context_->errstr : "no reply"), quiet);
    return std::nullopt;
  }
  Reply out;
  copy_reply(r, &out.str, &out.integer, &out.type);
  if (r->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i < r->elements; ++i) {
      Reply e;
      copy_reply(r->element[i], &e.str, &e.integer, &e.type);
      out.elements.push_back(std::move(e));
    }
  freeReplyObject(r);
  if (out.type == REDIS_REPLY_ERROR) {
    fail_locked(std::string(*argv.begin()) + " refused: " + out.str, quiet);
    return std::nullopt;
  }
  return out;
}

void RedisTier::count(const char* field, std::int64_t by) {
  if (!writable_) return;  // a read-only consumer writes nothing, counters included
  command({"HINCRBY", "jitk:v1:stats", field, std::to_string(by)});
}

std::optional<std::vector<char>> RedisTier::read_verified(const std::string& key, const ArtifactMeta& meta) {
  // One byte past the limit tells an entry over it from one exactly at it, without reading it all.
  auto r = command({"GETRANGE", blob_key(key), "0", std::to_string(options_.max_entry_bytes)});
  if (!r) return std::nullopt;
  std::string why;
  if (r->type != REDIS_REPLY_STRING) {
    std::lock_guard lock(mutex_);
    fail_locked("GETRANGE: a reply that is not a string", false);
    return std::nullopt;
  }
  if (r->str.empty()) return std::nullopt;  // absent (GETRANGE of no key is "")
  counters_.bytes_read += static_cast<std::int64_t>(r->str.size());
  if (static_cast<std::int64_t>(r->str.size()) > options_.max_entry_bytes) {
    // Too large for this process, not bad: left for the processes whose limit it fits.
    warn_once("remote-too-large-read", "remote cache " + address_.shown + ": the entry for " + meta.kernel + " (" + meta.params +
                                           ") is larger than JITK_REMOTE_MAX_ENTRY (" + std::to_string(options_.max_entry_bytes) +
                                           " bytes); not read, compiling here");
    return std::nullopt;
  }
  BlobHeader h;
  if (why = check_blob_binding(r->str, key, &h); why.empty()) why = binding_mismatch(h, key, &meta);
  if (!why.empty()) {
    ++counters_.bad_entries;
    count("bad_entries");
    log().warn("remote cache {}: entry for {} ({} {}) not loaded: {}; {}", address_.shown, key, meta.kernel, meta.params, why,
               writable_ ? "deleting it, the fresh compile replaces it" : "compiling here (read-only: left as it is)");
    if (writable_) command({"DEL", blob_key(key)});
    return std::nullopt;
  }
  count("bytes_read", static_cast<std::int64_t>(r->str.size()));
  return std::vector<char>(r->str.begin() + static_cast<std::ptrdiff_t>(h.header_size), r->str.end());
}

std::optional<std::vector<char>> RedisTier::get(const std::string& key, const ArtifactMeta& meta, Count how) {
  auto payload = read_verified(key, meta);
  if (how == Count::Nothing) return payload;
  if (payload) {
    ++counters_.hits;
    count("hits");
  } else if (how == Count::HitsAndMisses) {
    ++counters_.misses;
    count("misses");
  }
  return payload;
}

bool RedisTier::put_blob(const std::string& key, const std::string& blob) {
  if (!writable_) return false;
  if (static_cast<std::int64_t>(blob.size()) > options_.max_entry_bytes) {
    warn_once("remote-too-large", "remote cache " + address_.shown + ": an artifact of " + std::to_string(blob.size()) +
                                      " bytes is over JITK_REMOTE_MAX_ENTRY; not stored there");
    return false;
  }
  if (!command({"SET", blob_key(key), blob})) return false;
  counters_.bytes_written += static_cast<std::int64_t>(blob.size());
  count("bytes_written", static_cast<std::int64_t>(blob.size()));
  return true;
}

bool RedisTier::put(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload, PutReason why) {
  if (!writable_) return false;
  std::string_view bytes(payload.data(), payload.size());
  std::string blob = encode_blob_header(key, meta, bytes);
  blob.append(bytes);
  if (!put_blob(key, blob)) return false;
  if (why == PutReason::Compiled) {
    ++counters_.compiles;
    count("compiles");
    command({"HINCRBY", "jitk:v1:compiles", key, "1"});
  }
  return true;
}

void RedisTier::remove(const std::string& key) {
  if (writable_) command({"DEL", blob_key(key)});
}

bool RedisTier::exists(const std::string& key) {
  auto r = command({"EXISTS", blob_key(key)});
  return r && r->type == REDIS_REPLY_INTEGER && r->integer > 0;
}

FlightClaim RedisTier::claim(const std::string& key, const ArtifactMeta& meta) {
  // A read-only consumer never holds a lease: it waits for a compile a writer holds one for, and
  // otherwise compiles for itself (keeping the artifact locally).
  const std::string token = lease_token();
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(options_.wait_ms);
  std::minstd_rand jitter(std::random_device{}());
  const auto poll = std::chrono::milliseconds(std::max<std::int64_t>(1, options_.poll_ms));
  auto backoff = std::min(std::chrono::milliseconds(5), poll);
  bool waited = false;
  for (;;) {
    auto r = writable_ ? command({"SET", lease_key(key), token, "NX", "PX", std::to_string(options_.lease_ttl_ms)})
                       : command({"EXISTS", lease_key(key)});
    if (!r) return {};  // down: compile here
    if (!writable_) {
      if (r->type != REDIS_REPLY_INTEGER) {
        std::lock_guard lock(mutex_);
        fail_locked("EXISTS: an unexpected reply", false);
        return {};
      }
      if (r->integer == 0) return {};  // nobody compiles it for the fleet
    } else if (r->type == REDIS_REPLY_STATUS) {
      // Ours. The holder before (if any) stores its blob before releasing: look once more.
      if (auto payload = read_verified(key, meta)) {
        command({"EVAL", kReleaseScript, "1", lease_key(key), token});
        ++counters_.hits;
        count("hits");
        return {std::move(payload), nullptr};
      }
      return {std::nullopt, std::make_unique<RedisLease>(shared_from_this(), lease_key(key), token)};
    }
    if (writable_ && r->type != REDIS_REPLY_NIL) {
      std::lock_guard lock(mutex_);
      fail_locked("SET NX: an unexpected reply", false);
      return {};
    }
    if (!waited) {
      waited = true;
      ++counters_.waits;
      count("waits");
      log().info("remote cache: {} ({}) is being compiled by another process; waiting for it", meta.kernel, meta.params);
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      ++counters_.wait_timeouts;
      count("wait_timeouts");
      warn_once("remote-wait " + key, "remote cache: waited " + std::to_string(options_.wait_ms) + " ms for another process's compile of " +
                                          meta.kernel + " (" + meta.params + "); compiling here (JITK_REMOTE_WAIT sets the bound)");
      return {};
    }
    // Backoff with up to a quarter of jitter, doubling to poll_ms (100 ms by default): a waiter sees the
    // holder's result within about poll_ms of its landing, and a fleet of waiters polls ~10 times a second each.
    auto sleep = std::min<Clock::duration>(backoff + std::chrono::milliseconds(jitter() % (backoff.count() / 4 + 1)), deadline - now);
    std::this_thread::sleep_for(sleep);
    backoff = std::clamp(backoff * 2, std::chrono::milliseconds(1), poll);
    auto e = command({"EXISTS", blob_key(key)});
    if (!e) return {};
    if (e->type == REDIS_REPLY_INTEGER && e->integer > 0) {
      if (auto payload = read_verified(key, meta)) {
        ++counters_.hits;
        count("hits");
        return {std::move(payload), nullptr};
      }
      // A bad entry: deleted by a writer (which then takes the lease); a reader cannot, so it compiles.
      if (!writable_) return {};
    }
  }
}

TierStats RedisTier::stats() {
  cache::RemoteStats f = fleet_stats();
  TierStats s;
  s.hits = f.hits;
  s.misses = f.misses;
  s.compiles = f.compiles;
  s.bytes = f.bytes_written;
  return s;
}

cache::RemoteStats RedisTier::local_stats() const {
  cache::RemoteStats s;
  s.url = address_.shown;
  s.mode = mode_name(options_.mode);
  s.hits = counters_.hits;
  s.misses = counters_.misses;
  s.compiles = counters_.compiles;
  s.waits = counters_.waits;
  s.wait_timeouts = counters_.wait_timeouts;
  s.errors = counters_.errors;
  s.bad_entries = counters_.bad_entries;
  s.bytes_read = counters_.bytes_read;
  s.bytes_written = counters_.bytes_written;
  return s;
}

cache::RemoteStats RedisTier::fleet_stats() {
  auto r = command({"HGETALL", "jitk:v1:stats"}, /*quiet=*/true);
  if (!r || r->type != REDIS_REPLY_ARRAY)
    throw Error(ErrorCode::CacheIo, "remote cache " + address_.shown + " cannot be reached (jitk remote ping says why)");
  cache::RemoteStats s;
  s.url = address_.shown;
  s.mode = mode_name(options_.mode);
  const std::pair<const char*, std::int64_t*> fields[] = {
      {"hits", &s.hits},     {"misses", &s.misses}, {"compiles", &s.compiles},       {"waits", &s.waits},
      {"wait_timeouts", &s.wait_timeouts}, {"errors", &s.errors}, {"bad_entries", &s.bad_entries},
      {"bytes_read", &s.bytes_read}, {"bytes_written", &s.bytes_written}};
  for (std::size_t i = 0; i + 1 < r->elements.size(); i += 2)
    for (const auto& [name, value] : fields)
      if (r->elements[i].str == name) *value = std::strtoll(r->elements[i + 1].str.c_str(), nullptr, 10);
  s.errors += counters_.errors;  // a process's failures never reach Redis: the fleet's are in each process's log
  return s;
}

std::string RedisTier::ping(double* round_trip_ms) {
  const auto t0 = Clock::now();
  std::string problem;
  {
    std::lock_guard lock(mutex_);
    SigpipeBlocked no_sigpipe;
    if (!context_ && !connect_locked(&problem)) return problem;
  }
  auto r = command({"PING"}, /*quiet=*/true);
  if (round_trip_ms) *round_trip_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!r) {
    std::lock_guard lock(mutex_);
    return last_problem_;
  }
  if (r->type != REDIS_REPLY_STATUS || r->str != "PONG") return "PING answered something that is not PONG";
  return "";
}

}  // namespace jit::detail
