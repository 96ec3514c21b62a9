// A client process for the tests: gets kernels through jit::get, runs them on random data, checks them
// against the float64 reference and prints one line per kernel: "<name> compiled|disk ok|WRONG".
// Usage: jitk_test_client [saxpy] [rms_norm] [softmax] [silu_and_mul]   (default: all four, f32)
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/kernels.hpp"

namespace {

std::mt19937 rng(std::random_device{}());

std::vector<float> random_floats(std::size_t n) {
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

template <class K> bool report(const char* name, const jit::Kernel<K>& k, double err) {
  bool ok = err <= jitk_reference::tolerance<float>();
  std::printf("%s %s %s\n", name, k.origin() == jit::Origin::Compiled ? "compiled" : "disk", ok ? "ok" : "WRONG");
  return ok;
}

bool run(const std::string& name) {
  using namespace jit::kernels;
  const std::int64_t rows = 5, hidden = 333, n = 4097;
  if (name == "saxpy") {
    auto k = jit::get<Saxpy>({jit::DType::f32}, jit::Target::cpu());
    auto x = random_floats(n), y = random_floats(n);
    auto ref = jitk_reference::saxpy(1.5, x, y);
    k(n, 1.5, x.data(), y.data());
    return report("saxpy", k, jitk_reference::relative_l2_error(y, ref));
  }
  if (name == "rms_norm") {
    auto k = jit::get<RmsNorm>({jit::DType::f32, hidden}, jit::Target::cpu());
    auto x = random_floats(rows * hidden), w = random_floats(hidden);
    std::vector<float> y(x.size(), NAN);
    k(rows, x.data(), w.data(), y.data(), 1e-5);
    return report("rms_norm", k, jitk_reference::relative_l2_error(y, jitk_reference::rms_norm(rows, hidden, x, w, 1e-5)));
  }
  if (name == "softmax") {
    auto k = jit::get<Softmax>({jit::DType::f32, hidden}, jit::Target::cpu());
    auto x = random_floats(rows * hidden);
    std::vector<float> y(x.size(), NAN);
    k(rows, x.data(), y.data());
    return report("softmax", k, jitk_reference::relative_l2_error(y, jitk_reference::softmax(rows, hidden, x)));
  }
  if (name == "silu_and_mul") {
    auto k = jit::get<SiluAndMul>({jit::DType::f32, hidden}, jit::Target::cpu());
    auto x = random_floats(rows * 2 * hidden);
    std::vector<float> out(rows * hidden, NAN);
    k(rows, x.data(), out.data());
    return report("silu_and_mul", k, jitk_reference::relative_l2_error(out, jitk_reference::silu_and_mul(rows, hidden, x)));
  }
  std::fprintf(stderr, "unknown kernel %s\n", name.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names(argv + 1, argv + argc);
  if (names.empty()) names = {"saxpy", "rms_norm", "softmax", "silu_and_mul"};
  bool ok = true;
  try {
    for (const auto& n : names) ok = run(n) && ok;
  } catch (const jit::Error& e) {
    std::printf("error %s: %s\n", jit::to_string(e.code()), e.what());
    return 2;
  }
  return ok ? 0 : 1;
}
