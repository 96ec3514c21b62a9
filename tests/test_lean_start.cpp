// The CPU backend is a module (libjitk_cpu.so) opened at the first CPU compile or load: processes that
// run no CPU kernel never map LLVM, one that does maps it, and a missing or broken module is a clear
// error that names it, while everything else keeps working.
#include <catch2/catch.hpp>

#include "tests/test_support.hpp"

using namespace jitk_test;

namespace {

const std::string kProbe = JITK_LEAN_PROBE;

// A cache with one CPU kernel in it, compiled by another process.
const TempDir& warm_cache() {
  static TempDir dir;
  static const bool warmed = [] {
    auto r = run(kClient + " rms_norm", cache_env(dir));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return true;
  }();
  (void)warmed;
  return dir;
}

CommandResult probe(const std::string& what, const std::string& env = "") {
  return run(kProbe + " " + what, cache_env(warm_cache()) + " " + env);
}

}  // namespace

TEST_CASE("libjitk itself links no LLVM or clang", "[lean]") {
  auto r = run("readelf -d '" + std::string(JITK_LIBRARY_FILE) + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("(NEEDED)") != std::string::npos);
  CHECK(r.output.find("libLLVM") == std::string::npos);
  CHECK(r.output.find("libclang") == std::string::npos);
}

TEST_CASE("reading the cache's stats on a warm cache never maps LLVM", "[lean]") {
  auto r = probe("stats");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("llvm_mapped=0") != std::string::npos);
}

TEST_CASE("asking for the default target never maps LLVM", "[lean]") {
  auto r = probe("default-target");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("llvm_mapped=0") != std::string::npos);
}

TEST_CASE("`jitk stats` loads no LLVM library", "[lean]") {
  // The dynamic loader's own account of every library it maps, at start and by dlopen.
  auto r = run(kTool + " stats", cache_env(warm_cache()) + " LD_DEBUG=files");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("entries:") != std::string::npos);
  CHECK(r.output.find("file=libsqlite3") != std::string::npos);  // the account is there to read
  CHECK(r.output.find("libLLVM") == std::string::npos);
  CHECK(r.output.find("libclang-cpp") == std::string::npos);
}

TEST_CASE("a process that gets a CUDA kernel maps no LLVM, whether or not a GPU is there", "[lean]") {
  auto r = probe("cuda-get");
  INFO(r.output);
  // Without a GPU the get fails with the reason; with one it succeeds: LLVM stays out either way.
  CHECK((r.output.find("outcome=ok") != std::string::npos ||
         r.output.find("outcome=error code=backend unavailable") != std::string::npos));
  CHECK(r.output.find("llvm_mapped=0") != std::string::npos);
}

TEST_CASE("a CPU kernel opens the CPU module, maps LLVM and runs", "[lean]") {
  auto r = probe("cpu-get");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("outcome=ok") != std::string::npos);
  CHECK(r.output.find("llvm_mapped=1") != std::string::npos);
}

TEST_CASE("a missing CPU module is a clear error naming where it was looked for", "[lean]") {
  TempDir nowhere;
  const std::string path = (nowhere.path() / "no-such-dir" / "libjitk_cpu.so").string();
  auto r = probe("cpu-get", "JITK_CPU_MODULE='" + path + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("outcome=error code=backend unavailable") != std::string::npos);
  CHECK(r.output.find("CPU backend module") != std::string::npos);
  CHECK(r.output.find(path) != std::string::npos);
  CHECK(r.output.find("JITK_CPU_MODULE") != std::string::npos);
  CHECK(r.output.find("llvm_mapped=0") != std::string::npos);

  SECTION("and `jitk info` says the same for the CPU backend") {
    auto info = run(kTool + " info", cache_env(warm_cache()) + " JITK_CPU_MODULE='" + path + "'");
    INFO(info.output);
    CHECK(info.output.find(path) != std::string::npos);
  }
  SECTION("while the cache's stats and a CUDA get are unaffected") {
    auto stats = probe("stats", "JITK_CPU_MODULE='" + path + "'");
    INFO(stats.output);
    CHECK(stats.exit_code == 0);
    auto cuda = probe("cuda-get", "JITK_CPU_MODULE='" + path + "'");
    INFO(cuda.output);
    CHECK(cuda.output.find("CPU backend module") == std::string::npos);
  }
}

TEST_CASE("a CPU module that is not a shared library is a clear error naming it", "[lean]") {
  TempDir dir;
  const auto path = dir.path() / "libjitk_cpu.so";
  write_file(path, "this is no ELF file\n");
  auto r = probe("cpu-get", "JITK_CPU_MODULE='" + path.string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("outcome=error code=backend unavailable") != std::string::npos);
  CHECK(r.output.find("CPU backend module " + path.string() + " cannot be loaded") != std::string::npos);
}

TEST_CASE("a shared library that is not jitk's CPU module is refused, naming what it lacks", "[lean]") {
  auto r = probe("cpu-get", "JITK_CPU_MODULE='" + std::string(JITK_LIBRARY_FILE) + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("outcome=error code=backend unavailable") != std::string::npos);
  CHECK(r.output.find("is not jitk's (it lacks jitk_cpu_module_abi, jitk_cpu_make_driver)") != std::string::npos);
}
