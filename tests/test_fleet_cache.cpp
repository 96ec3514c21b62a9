// The fleet cache: many processes, each with its own local cache, sharing one redis-server that the test starts.
#include <cstring>
#include <nlohmann/json.hpp>

#include "cache/remote_address.hpp"
#include "fleet_support.hpp"
#include "jit/cache.hpp"
#include "jit/kernels.hpp"

using Catch::Matchers::Contains;
using jitk_test::kClient;
using jitk_test::run;
using jitk_test::TempDir;

using namespace jitk_fleet;

TEST_CASE("remote URLs are taken apart, and bad ones are refused with the reason", "[fleet][url]") {
  std::string problem;
  auto a = jit::detail::parse_redis_url("redis://alice:s%40cret@cache.internal:6380/3", &problem);
  REQUIRE(a);
  CHECK(a->host == "cache.internal");
  CHECK(a->port == 6380);
  CHECK(a->user == "alice");
  CHECK(a->password == "s@cret");
  CHECK(a->db == 3);
  CHECK(a->shown == "redis://alice:***@cache.internal:6380/3");  // never the password
  auto u = jit::detail::parse_redis_url("unix:///run/redis/redis.sock", &problem);
  REQUIRE(u);
  CHECK(u->socket_path == "/run/redis/redis.sock");
  auto v6 = jit::detail::parse_redis_url("redis://[::1]:7000", &problem);
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->port == 7000);
  for (const char* bad : {"redis://", "redis://host:0", "redis://host:99999", "redis://host:port", "redis://host:6379/x",
                          "http://host:6379", "unix://relative.sock", "redis://user:@host:1", "redis://a:b%4@host:1",
                          "redis://[::1:6379", "redis://host\n:6379", "redis://host:6379/-1"}) {
    INFO(bad);
    problem.clear();
    CHECK_FALSE(jit::detail::parse_redis_url(bad, &problem));
    CHECK_FALSE(problem.empty());
  }
}

TEST_CASE("16 processes started together, each with its own empty cache, compile each kernel once in the whole fleet", "[fleet][concurrency]") {
  REQUIRE_REDIS();
  RedisServer redis;
  constexpr int kProcesses = 16;
  Fleet f = run_fleet(redis, kProcesses);
  INFO(f.outputs);
  CHECK(f.exit_failures == 0);
  CHECK(f.wrong == 0);
  CHECK(f.ok == 4 * kProcesses);
  CHECK(f.compiled == 4);  // the four kernels, once each in the fleet
  auto compiles = redis.compiles();
  CHECK(compiles.size() == 4);
  for (const auto& [key, n] : compiles) CHECK(n == 1);
  CHECK(redis.blob_keys().size() == 4);
  CHECK(redis.stat("hits") == 4 * (kProcesses - 1));

  // A process of the fleet started later finds all four in the remote and compiles nothing.
  TempDir later;
  auto r = run(kClient, redis.env(later));
  CHECK(jitk_test::count_lines_with(r.output, " disk ok") == 4);
}

TEST_CASE("redis-server killed while a fleet warms: every process still finishes correct", "[fleet][failure]") {
  REQUIRE_REDIS();
  RedisServer redis;
  Fleet f = run_fleet(redis, 8, "", "JITK_REMOTE_TIMEOUT=500ms", [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    redis.kill();
  });
  INFO(f.outputs);
  CHECK(f.exit_failures == 0);
  CHECK(f.wrong == 0);
  CHECK(f.ok == 4 * 8);
}

TEST_CASE("a remote that refuses, asks for a password or is not there: kernels compile here, one warning", "[fleet][failure]") {
  REQUIRE_REDIS();
  RedisServer locked({"--requirepass", "pw-of-the-server"});
  TempDir missing_dir;
  for (const std::string& url : {"unix://" + (missing_dir.path() / "none.sock").string(),  // no such socket
                                std::string("redis://nobody:not-the-password@127.0.0.1:1"),  // refused
                                locked.url()}) {  // NOAUTH
    TempDir cache;
    auto r = run(kClient, jitk_test::cache_env(cache) + " JITK_REMOTE='" + url + "'");
    INFO(url << "\n" << r.output);
    CHECK(r.exit_code == 0);
    CHECK(jitk_test::count_lines_with(r.output, " compiled ok") == 4);
    CHECK(jitk_test::count_lines_with(r.output, "remote cache") == 1);
    CHECK_THAT(r.output, !Contains("not-the-password"));  // a password never reaches a log
  }
}

TEST_CASE("a server that answers garbage is a failure said once, never a crash or a hang", "[fleet][failure]") {
  TempDir dir;
  const std::string sock = (dir.path() / "garbage.sock").string();
  // A listener that answers every connection with bytes that are not RESP.
  if (std::system("command -v python3 > /dev/null 2>&1") != 0) {
    std::printf("SKIPPED: python3 not found for the garbage server\n");
    return;
  }
  pid_t pid = 0;
  {
    std::vector<std::string> args{"python3", "-c",
                                  "import socket\ns=socket.socket(socket.AF_UNIX)\ns.bind('" + sock +
                                      "')\ns.listen(64)\nwhile True:\n c,_=s.accept()\n try:\n  c.recv(65536); c.sendall(b'%garbage\\x00\\xff' * 100)\n "
                                      "except Exception: pass\n c.close()\n"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environment()) == 0);
  }
  for (int i = 0; i < 100 && !std::filesystem::exists(sock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  TempDir cache;
  auto r = run(kClient, jitk_test::cache_env(cache) + " JITK_REMOTE='unix://" + sock + "' JITK_REMOTE_TIMEOUT=500ms");
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(jitk_test::count_lines_with(r.output, " compiled ok") == 4);
  CHECK(jitk_test::count_lines_with(r.output, "remote cache") == 1);
}

TEST_CASE("a poisoned remote entry (another key's blob, truncated, garbage, oversized) is detected, never loaded, replaced", "[fleet][trust]") {
  REQUIRE_REDIS();
  RedisServer redis;
  TempDir first, second;
  REQUIRE(run(kClient + " saxpy", redis.env(first)).exit_code == 0);
  const std::string saxpy = redis.blob_keys().at(0);
  REQUIRE(run(kClient + " rms_norm", redis.env(second)).exit_code == 0);
  auto keys = redis.blob_keys();
  REQUIRE(keys.size() == 2);
  const std::string rms = keys[0] == saxpy ? keys[1] : keys[0];
  const std::string good = redis.command({"GET", "jitk:v1:blob:" + saxpy});
  const std::string other = redis.command({"GET", "jitk:v1:blob:" + rms});

  const std::map<std::string, std::string> poisons = {
      {"another key's blob", other},
      {"truncated", good.substr(0, good.size() / 2)},
      {"garbage", std::string(4096, '\x5a')},
      {"one flipped payload byte", [&] { std::string b = good; b[b.size() - 3] ^= 0x40; return b; }()},
      {"header only", good.substr(0, 130)},
  };
  for (const auto& [what, poison] : poisons) {
    INFO(what);
    redis.command({"SET", "jitk:v1:blob:" + saxpy, poison});
    const auto bad_before = redis.stat("bad_entries");
    TempDir fresh;
    auto r = run(kClient + " saxpy", redis.env(fresh));
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Contains("saxpy compiled ok"));  // not loaded: compiled here
    CHECK_THAT(r.output, Contains("not loaded"));
    CHECK(redis.stat("bad_entries") == bad_before + 1);
    // Replaced by the fresh compile: the next process loads it.
    CHECK(redis.command({"GET", "jitk:v1:blob:" + saxpy}) != poison);
    TempDir next;
    CHECK_THAT(run(kClient + " saxpy", redis.env(next)).output, Contains("saxpy disk ok"));
  }
  // An entry over this process's size limit is not read, and left for the processes it fits.
  TempDir fresh;
  auto r = run(kClient + " saxpy", redis.env(fresh, "JITK_REMOTE_MAX_ENTRY=" + std::to_string(good.size() / 2)));
  INFO(r.output);
  CHECK_THAT(r.output, Contains("saxpy compiled ok"));
  CHECK_THAT(r.output, Contains("JITK_REMOTE_MAX_ENTRY"));
  CHECK(redis.command({"EXISTS", "jitk:v1:blob:" + saxpy}) == "1");
}

TEST_CASE("a lease holder that died: the others compile once, within the lease ttl plus one compile", "[fleet][lease]") {
  REQUIRE_REDIS();
  RedisServer redis;
  const std::string key = saxpy_key();
  // A holder that took the lease and died: nobody renews it, it expires after its ttl.
  constexpr int kTtlMs = 3000;
  redis.command({"SET", "jitk:v1:lease:" + key, "dead-host:1:1", "PX", std::to_string(kTtlMs)});
  const auto t0 = std::chrono::steady_clock::now();
  Fleet f = run_fleet(redis, 6, "saxpy");
  const double s = seconds_since(t0);
  INFO(f.outputs);
  CHECK(f.exit_failures == 0);
  CHECK(f.ok == 6);
  CHECK(f.compiled == 1);  // the one that took the expired lease; the others waited for it
  CHECK(redis.compiles()[key] == 1);
  CHECK(redis.stat("waits") >= 1);
  CHECK(s >= kTtlMs / 1000.0 - 0.5);  // they waited for the lease...
  CHECK(s < kTtlMs / 1000.0 + 30);    // ...and no longer than it plus one compile (generous: a busy machine)
}

TEST_CASE("a waiter looks for the holder's result as often as JITK_REMOTE_POLL says, no more", "[fleet][lease]") {
  REQUIRE_REDIS();
  RedisServer redis;
  const std::string key = saxpy_key();
  // A holder's lease that expires after 1.5 s: the waiter looks for the blob (EXISTS) until then, then
  // takes the lease and compiles. Its looks start 5 ms apart and double up to the poll interval.
  struct Case {
    std::string poll;
    long at_least, at_most;
  };
  for (const Case& c : {Case{"20ms", 20, 200}, Case{"400ms", 1, 15}}) {
    redis.command({"DEL", "jitk:v1:blob:" + key});
    redis.command({"CONFIG", "RESETSTAT"});
    redis.command({"SET", "jitk:v1:lease:" + key, "holder-host:1:1", "PX", "1500"});
    TempDir fresh;
    auto r = run(kClient + " saxpy", redis.env(fresh, "JITK_REMOTE_POLL=" + c.poll));
    INFO(r.output);
    CHECK_THAT(r.output, Contains("saxpy compiled ok"));
    const std::string stats = redis.command({"INFO", "commandstats"});
    const auto at = stats.find("cmdstat_exists:calls=");
    REQUIRE(at != std::string::npos);
    const long looks = std::stol(stats.substr(at + std::strlen("cmdstat_exists:calls=")));
    INFO("JITK_REMOTE_POLL=" << c.poll << ": " << looks << " looks in 1.5 s");
    CHECK(looks >= c.at_least);
    CHECK(looks <= c.at_most);
  }
}

TEST_CASE("a lease held past the wait bound: the waiters compile for themselves", "[fleet][lease]") {
  REQUIRE_REDIS();
  RedisServer redis;
  const std::string key = saxpy_key();
  redis.command({"SET", "jitk:v1:lease:" + key, "stuck-host:1:1", "PX", "600000"});
  const auto t0 = std::chrono::steady_clock::now();
  Fleet f = run_fleet(redis, 3, "saxpy", "JITK_REMOTE_WAIT=1s");
  INFO(f.outputs);
  CHECK(f.exit_failures == 0);
  CHECK(f.ok == 3);
  // Each one that reached the bound compiled for itself; one that started later may find its blob.
  CHECK(f.compiled >= 1);
  CHECK(redis.stat("wait_timeouts") == f.compiled);
  CHECK(seconds_since(t0) < 60);
  CHECK_THAT(f.outputs, Contains("JITK_REMOTE_WAIT"));
}

TEST_CASE("a read-only consumer loads from the remote and writes nothing to it", "[fleet][mode]") {
  REQUIRE_REDIS();
  RedisServer redis;
  TempDir producer;
  REQUIRE(run(kClient + " saxpy", redis.env(producer)).exit_code == 0);
  const std::string stats_before = redis.command({"HGETALL", "jitk:v1:stats"});
  TempDir consumer;
  auto r = run(kClient + " saxpy rms_norm", redis.env(consumer, "JITK_REMOTE_MODE=read-only"));
  INFO(r.output);
  CHECK_THAT(r.output, Contains("saxpy disk ok"));
  CHECK_THAT(r.output, Contains("rms_norm compiled ok"));
  CHECK(redis.blob_keys().size() == 1);  // rms_norm was not pushed
  CHECK(redis.command({"HGETALL", "jitk:v1:stats"}) == stats_before);
  TempDir off;
  auto o = run(kClient + " saxpy", redis.env(off, "JITK_REMOTE_MODE=off"));
  CHECK_THAT(o.output, Contains("saxpy compiled ok"));
  auto bad = run(kClient + " saxpy", redis.env(off, "JITK_REMOTE_MODE=sometimes"));
  CHECK_THAT(bad.output, Contains("JITK_REMOTE_MODE"));
  CHECK(bad.exit_code == 0);
}

TEST_CASE("jitk explain prints every component of a key, the key a compile stores under, and refuses bad params", "[fleet][tool]") {
  auto r = run(jitk_test::kTool + " explain saxpy dtype=f32");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* part : {"\nformat: ", "\nkernel: saxpy", "\nimplementation: ", "\nimplementation version: ", "\nparams: dtype=f32",
                           "\nbackend: cpu", "\ncompiler: ", "\narch: ", "\ntarget: ", "\nsource ", "xxh3-128 ", "\njitk version: ",
                           "\nkey: "})
    CHECK_THAT("\n" + r.output, Contains(part));
  // The same request on the same machine explains to the same text: diffable.
  CHECK(run(jitk_test::kTool + " explain saxpy dtype=f32").output == r.output);
  // And the key is the one a process stores the artifact under.
  TempDir cache;
  REQUIRE(run(kClient + " saxpy", jitk_test::cache_env(cache)).exit_code == 0);
  auto blobs = jitk_test::blob_files(cache.path());
  REQUIRE(blobs.size() == 1);
  CHECK(blobs[0].filename().string() == saxpy_key());

  for (const char* bad : {"dtype", "=f32", "dtype=f99", "hidden=1,dtype=f32,"}) {
    auto b = run(jitk_test::kTool + " explain saxpy '" + std::string(bad) + "'");
    INFO(bad << ": " << b.output);
    CHECK(b.exit_code == 2);
    CHECK_THAT(b.output, Contains("jitk: error"));
  }
}

TEST_CASE("jit::cache::set_remote before the first get: the process uses that remote, and afterwards it is refused", "[fleet][api]") {
  REQUIRE_REDIS();
  RedisServer redis;
  jitk_test::own_cache_dir();  // an empty local cache of this test's own
  jit::cache::RemoteOptions options;
  options.url = redis.url();
  options.lease_ttl_ms = 2000;
  jit::cache::set_remote(options);
  auto k = jit::get<jit::kernels::Saxpy>({jit::DType::f32}, jit::Target::cpu());
  const std::int64_t n = 1000;
  std::vector<float> x(n, 1.0f), y(n, 2.0f);
  k(n, 3.0, x.data(), y.data());
  CHECK(y[n - 1] == 5.0f);
  CHECK(redis.blob_keys() == std::vector<std::string>{k.cache_key()});
  auto mine = jit::cache::remote_stats(/*fleet=*/false);
  REQUIRE(mine);
  CHECK(mine->url == redis.url());
  CHECK(mine->mode == "read-write");
  CHECK(mine->compiles == 1);
  CHECK(jit::cache::remote_stats(/*fleet=*/true)->compiles == 1);
  CHECK(jit::cache::remote_ping().empty());
  CHECK_THROWS_AS(jit::cache::set_remote(options), jit::Error);
}

TEST_CASE("a read-only consumer waits for the compile a writer holds the lease for, and loads its result", "[fleet][mode]") {
  REQUIRE_REDIS();
  RedisServer redis;
  TempDir producer;
  REQUIRE(run(kClient + " saxpy", redis.env(producer)).exit_code == 0);
  const std::string key = saxpy_key();
  const std::string blob = redis.command({"GET", "jitk:v1:blob:" + key});
  REQUIRE(!blob.empty());
  redis.command({"DEL", "jitk:v1:blob:" + key});
  // A writer compiling it: the consumer waits instead of compiling; the blob lands after a second.
  redis.command({"SET", "jitk:v1:lease:" + key, "writer-host:1:1", "PX", "30000"});
  TempDir consumer;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = std::async(std::launch::async, [&] { return run(kClient + " saxpy", redis.env(consumer, "JITK_REMOTE_MODE=read-only JITK_LOG_LEVEL=info")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  redis.command({"SET", "jitk:v1:blob:" + key, blob});
  redis.command({"DEL", "jitk:v1:lease:" + key});
  auto out = r.get();
  INFO(out.output);
  CHECK(out.exit_code == 0);
  CHECK_THAT(out.output, Contains("saxpy disk ok"));
  CHECK_THAT(out.output, Contains("being compiled by another process; waiting for it"));
  CHECK(seconds_since(t0) >= 1.4);
  CHECK(seconds_since(t0) < 30);
}

TEST_CASE("jitk remote push and import --push fill the remote from a local cache, and jitk remote ping and stats report it", "[fleet][tool]") {
  REQUIRE_REDIS();
  RedisServer redis;
  const std::string& tool = jitk_test::kTool;
  TempDir local;
  REQUIRE(run(kClient + " saxpy rms_norm", jitk_test::cache_env(local)).exit_code == 0);  // compiled without the remote
  CHECK(redis.blob_keys().empty());
  auto pushed = run(tool + " remote push", redis.env(local));
  INFO(pushed.output);
  CHECK(pushed.exit_code == 0);
  CHECK_THAT(pushed.output, Contains("pushed 2 artifacts"));
  CHECK_THAT(run(tool + " remote push", redis.env(local)).output, Contains("pushed 0 artifacts"));
  TempDir fresh;
  CHECK(jitk_test::count_lines_with(run(kClient + " saxpy rms_norm", redis.env(fresh)).output, " disk ok") == 2);
  auto refused = run(tool + " remote push", redis.env(local, "JITK_REMOTE_MODE=read-only"));
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Contains("read-only"));

  // A pack imported with --push reaches the remote too.
  TempDir third, importer, pack_dir;
  REQUIRE(run(kClient + " softmax", jitk_test::cache_env(third)).exit_code == 0);
  const std::string pack = (pack_dir.path() / "k.jitkpack").string();
  REQUIRE(run(tool + " export '" + pack + "'", jitk_test::cache_env(third)).exit_code == 0);
  auto imported = run(tool + " import --push '" + pack + "'", redis.env(importer));
  INFO(imported.output);
  CHECK(imported.exit_code == 0);
  CHECK_THAT(imported.output, Contains("pushed 1 artifacts"));
  CHECK(redis.blob_keys().size() == 3);

  auto stats = run(tool + " stats --json", redis.env(fresh));
  INFO(stats.output);
  auto j = nlohmann::json::parse(stats.output);
  CHECK(j["remote"]["hits"].get<int>() == 2);
  CHECK(j["remote"]["bytes_written"].get<long>() > 0);
  auto ping = run(tool + " remote ping", redis.env(fresh));
  CHECK(ping.exit_code == 0);
  CHECK_THAT(ping.output, Contains("PONG"));
  redis.kill();
  auto down = run(tool + " remote ping", redis.env(fresh));
  CHECK(down.exit_code == 1);
  CHECK_THAT(down.output, Contains("unreachable"));
  CHECK_THAT(run(tool + " stats", redis.env(fresh)).output, Contains("remote:      unreachable"));
}
