// Helpers of the fleet-cache tests: a redis-server of the test's own, and a fleet of client processes.
#pragma once
#include <catch2/catch.hpp>
#include <hiredis/hiredis.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.hpp"

namespace jitk_fleet {

using jitk_test::kClient;
using jitk_test::run;
using jitk_test::TempDir;


inline char** environment() { return environ; }

// A redis-server of the test's own: a temp folder, a unix socket, nothing persisted, killed at the end.
class RedisServer {
 public:
  static bool available() { return std::system("command -v redis-server > /dev/null 2>&1") == 0; }

  explicit RedisServer(std::vector<std::string> extra = {}) {
    socket_ = (dir_.path() / "redis.sock").string();
    std::vector<std::string> args{"redis-server", "--port", "0", "--unixsocket", socket_, "--save", "", "--appendonly", "no",
                                  "--dir", dir_.str(), "--logfile", (dir_.path() / "redis.log").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    password_ = extra.size() == 2 && extra[0] == "--requirepass" ? extra[1] : "";
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(posix_spawnp(&pid_, "redis-server", nullptr, nullptr, argv.data(), environment()) == 0);
    // Bounded: ready within 10 s or the test fails.
    for (int i = 0; i < 200 && !ping(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(ping());
  }
  ~RedisServer() { kill(); }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  std::string url() const { return "unix://" + socket_; }
  // The environment for a client process: its own empty local cache, this remote.
  std::string env(const TempDir& cache, const std::string& more = "") const {
    return jitk_test::cache_env(cache) + " JITK_REMOTE='" + url() + "' " + more;
  }

  // A command's reply as text (integers as decimal, arrays joined by '\n'); "" for nil.
  std::string command(const std::vector<std::string>& args) const {
    redisContext* c = redisConnectUnix(socket_.c_str());
    REQUIRE((c && !c->err));
    std::vector<const char*> p;
    std::vector<size_t> n;
    for (const auto& a : args) {
      p.push_back(a.data());
      n.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(p.size()), p.data(), n.data()));
    REQUIRE(r);
    std::string out;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR) out.assign(r->str, r->len);
    if (r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
    if (r->type == REDIS_REPLY_ARRAY)
      for (size_t i = 0; i < r->elements; ++i) out += (i ? "\n" : "") + std::string(r->element[i]->str ? r->element[i]->str : "", r->element[i]->len);
    freeReplyObject(r);
    redisFree(c);
    return out;
  }
  std::vector<std::string> lines(const std::vector<std::string>& args) const {
    std::vector<std::string> out;
    std::istringstream in(command(args));
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  // The cache keys with a blob in the remote.
  std::vector<std::string> blob_keys() const {
    std::vector<std::string> keys;
    for (const auto& k : lines({"KEYS", "jitk:v1:blob:*"})) keys.push_back(k.substr(std::string("jitk:v1:blob:").size()));
    return keys;
  }
  // key -> how many times the fleet compiled it.
  std::map<std::string, int> compiles() const {
    auto l = lines({"HGETALL", "jitk:v1:compiles"});
    std::map<std::string, int> out;
    for (std::size_t i = 0; i + 1 < l.size(); i += 2) out[l[i]] = std::stoi(l[i + 1]);
    return out;
  }
  std::int64_t stat(const std::string& field) const {
    std::string v = command({"HGET", "jitk:v1:stats", field});
    return v.empty() ? 0 : std::stoll(v);
  }

 private:
  bool ping() const {
    redisContext* c = redisConnectUnix(socket_.c_str());
    bool ok = c && !c->err;
    if (ok) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      // A server asking for a password answers NOAUTH: it is up.
      ok = r && (r->type == REDIS_REPLY_STATUS || (!password_.empty() && r->type == REDIS_REPLY_ERROR));
      if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
  }
  TempDir dir_;
  std::string socket_, password_;
  pid_t pid_ = -1;
};

#define REQUIRE_REDIS()                                                                      \
  do {                                                                                       \
    if (!RedisServer::available()) {                                                         \
      std::printf("SKIPPED: redis-server not found (Debian: apt-get install redis-server)\n"); \
      return;                                                                                \
    }                                                                                        \
  } while (0)

struct Fleet {
  int exit_failures = 0, ok = 0, wrong = 0, compiled = 0;
  std::string outputs;
};

// n client processes started together, each with its own empty local cache.
inline Fleet run_fleet(const RedisServer& redis, int n, const std::string& kernels = "", const std::string& more_env = "",
                const std::function<void()>& meanwhile = {}) {
  std::vector<std::unique_ptr<TempDir>> caches;
  std::vector<std::future<jitk_test::CommandResult>> runs;
  for (int i = 0; i < n; ++i) {
    caches.push_back(std::make_unique<TempDir>());
    const std::string env = redis.env(*caches.back(), more_env);
    runs.push_back(std::async(std::launch::async, [env, kernels] { return run(kClient + " " + kernels, env); }));
  }
  if (meanwhile) meanwhile();
  Fleet f;
  for (auto& r : runs) {
    auto res = r.get();
    f.exit_failures += res.exit_code != 0;
    f.ok += static_cast<int>(jitk_test::count_lines_with(res.output, " ok\n"));
    f.wrong += static_cast<int>(jitk_test::count_lines_with(res.output, "WRONG"));
    f.compiled += static_cast<int>(jitk_test::count_lines_with(res.output, " compiled ok"));
    f.outputs += res.output + "----\n";
  }
  return f;
}

// The cache key of the client's saxpy (f32 on the CPU), as `jitk explain` gives it.
inline std::string saxpy_key() {
  auto r = run(jitk_test::kTool + " explain saxpy dtype=f32");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto at = r.output.rfind("\nkey: ");
  REQUIRE(at != std::string::npos);
  return r.output.substr(at + 6, 32);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace jitk_fleet
