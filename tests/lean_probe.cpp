// A process the lean-start tests run (tests/test_lean_start.cpp): does one thing through jitk, then
// says whether LLVM is mapped into it. Usage: jitk_lean_probe stats | cuda-get | cpu-get | default-target
// Prints "outcome=ok" or "outcome=error code=<kind>" with the message on the next line, then
// "llvm_mapped=0|1".
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "jit/cache.hpp"
#include "jit/kernels.hpp"

namespace {

// Whether libLLVM or libclang-cpp is among this process's mappings.
bool llvm_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("libLLVM") != std::string::npos || line.find("libclang-cpp") != std::string::npos) return true;
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
  std::printf("llvm_mapped=%d\n", llvm_mapped() ? 1 : 0);
  return status;
}
