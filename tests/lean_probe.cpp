// A process the lean-start tests run (tests/test_lean_start.cpp): does one thing through jitk, then
// says whether LLVM and NVRTC are mapped into it.
// Usage: jitk_lean_probe stats | cuda-get | cpu-get | default-target | cuda-warm | cuda-available |
//        available-then-configure (PROBE_CACHE_DIR: the folder it configures)
// Prints "outcome=ok" or "outcome=error code=<kind>" with the message on the next line, then
// "llvm_mapped=0|1" and "nvrtc_mapped=0|1". cuda-warm (rms_norm f32 4096 for cuda:sm_90, no GPU
// needed) also prints "warm=compiled|cached|failed"; cuda-available "available=0|1".
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "jit/cache.hpp"
#include "jit/config.hpp"
#include "jit/cuda.hpp"
#include "jit/kernels.hpp"

namespace {

// Whether a library whose name holds any of `names` is among this process's mappings.
bool mapped(std::initializer_list<const char*> names) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    for (const char* n : names)
      if (line.find(n) != std::string::npos) return true;
  return false;
}

void run(const std::string& what) {
  using jit::kernels::RmsNorm;
  if (what == "stats") {
    jit::cache::stats();
  } else if (what == "default-target") {
    jit::default_target();
  } else if (what == "cuda-get") {
    jit::get<RmsNorm>({jit::DType::f32, 256}, jit::Target{jit::Backend::Cuda, "", 0});
  } else if (what == "cpu-get") {
    const std::int64_t rows = 3, hidden = 256;
    auto k = jit::get<RmsNorm>({jit::DType::f32, hidden}, jit::Target::cpu());
    std::vector<float> x(rows * hidden, 2.0f), w(hidden, 0.5f), y(x.size(), NAN);
    k(rows, x.data(), w.data(), y.data(), 1e-6);
    for (float v : y)
      if (std::fabs(v - 0.5f) > 1e-4f) throw jit::Error(jit::ErrorCode::Internal, "rms_norm gave " + std::to_string(v));
  } else if (what == "cuda-warm") {
    const jit::cache::WarmItem item{"rms_norm", jit::Target::parse("cuda:sm_90"), {{"dtype", std::string("f32")}, {"hidden", std::int64_t{4096}}},
                                    "probe"};
    const auto results = jit::cache::warm({item}, 1);
    const auto& r = results.at(0);
    using O = jit::cache::WarmResult::Outcome;
    std::printf("warm=%s\n", r.outcome == O::Compiled ? "compiled" : r.outcome == O::AlreadyCached ? "cached" : "failed");
    if (r.outcome == O::Failed) throw jit::Error(jit::ErrorCode::Internal, r.error);
  } else if (what == "cuda-available") {
    std::printf("available=%d\n", jit::cuda::available() ? 1 : 0);
  } else if (what == "available-then-configure") {  // a probe fixes no cache setting
    std::printf("available=%d\n", jit::cuda::available() ? 1 : 0);
    (void)jit::default_target();
    jit::Config config;
    config.cache_dir = std::getenv("PROBE_CACHE_DIR") ? std::getenv("PROBE_CACHE_DIR") : "/nonexistent";
    jit::configure(config);
    std::printf("configured=1\n");
  } else {
    throw jit::Error(jit::ErrorCode::InvalidParams, "unknown probe '" + what + "'");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int status = 0;
  try {
    run(argc > 1 ? argv[1] : "");
    std::printf("outcome=ok\n");
  } catch (const jit::Error& e) {
    std::printf("outcome=error code=%s\n%s\n", jit::to_string(e.code()), e.what());
    status = 2;
  }
  std::printf("llvm_mapped=%d\n", mapped({"libLLVM", "libclang-cpp"}) ? 1 : 0);
  std::printf("nvrtc_mapped=%d\n", mapped({"libnvrtc"}) ? 1 : 0);
  return status;
}
