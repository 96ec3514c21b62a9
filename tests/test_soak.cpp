// The soak (ctest label slow, about a minute): processes x threads mixing get, clear, prune and verify
// on one cache; zero errors, zero wrong results, and a consistent cache after.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <future>

#include "test_support.hpp"

using jitk_test::run;
using jitk_test::TempDir;

TEST_CASE("4 processes x 8 threads mixing get, clear, prune and verify: no errors, no wrong results", "[soak]") {
  TempDir cache;
  auto env = jitk_test::cache_env(cache);
  constexpr int kProcesses = 4, kThreads = 8, kSeconds = 45;
  std::vector<std::future<jitk_test::CommandResult>> procs;
  for (int p = 0; p < kProcesses; ++p)
    procs.push_back(std::async(std::launch::async, [&] {
      return run(std::string(JITK_TEST_CLIENT) + " soak " + std::to_string(kSeconds) + " " + std::to_string(kThreads), env);
    }));
  for (auto& f : procs) {
    auto r = f.get();
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("errors=0 wrong=0") != std::string::npos);
    CHECK(r.output.find("gets=0 ") == std::string::npos);
  }
  auto verify = run(std::string(JITK_TOOL) + " verify", env);
  INFO(verify.output);
  CHECK(verify.exit_code == 0);
  auto after = run(std::string(JITK_TEST_CLIENT), env);
  CHECK(after.exit_code == 0);
}
