// The fleet cache at the size the issue names: 64 processes warming the same kernels at once.
#include "fleet_support.hpp"

using namespace jitk_fleet;

TEST_CASE("64 processes started together, each with its own empty cache, compile each kernel once (the fleet cold start printed)", "[fleet][slow]") {
  REQUIRE_REDIS();
  // One node's cold start: one process, an empty local cache, no remote.
  TempDir alone;
  const auto t_alone = std::chrono::steady_clock::now();
  REQUIRE(run(kClient, jitk_test::cache_env(alone)).exit_code == 0);
  const double one_node = seconds_since(t_alone);

  RedisServer redis;
  constexpr int kProcesses = 64;
  const auto t0 = std::chrono::steady_clock::now();
  Fleet f = run_fleet(redis, kProcesses);
  const double fleet = seconds_since(t0);
  INFO(f.outputs);
  CHECK(f.exit_failures == 0);
  CHECK(f.wrong == 0);
  CHECK(f.ok == 4 * kProcesses);
  CHECK(f.compiled == 4);
  auto compiles = redis.compiles();
  CHECK(compiles.size() == 4);
  for (const auto& [key, n] : compiles) CHECK(n == 1);
  // On one machine the 64 processes share its cores, so the ratio says more about the machine than
  // about the fleet: printed, not checked (on a cluster each process has its node).
  std::printf("fleet cold start: one process %.2f s, %d processes %.2f s (%.2fx) on %u cores\n", one_node, kProcesses, fleet,
              fleet / one_node, std::thread::hardware_concurrency());
}
