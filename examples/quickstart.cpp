// quickstart: gets every shipped kernel through jit::get, runs it on random data, checks it against
// a float64 reference, and prints how long the first get took (a cold compile or a disk-cache hit)
// and a second get (the memory tier). Run it twice with the same JITK_CACHE_DIR: the second run
// compiles nothing.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/cache.hpp"
#include "jit/kernels.hpp"

namespace kernels = jit::kernels;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float lo = -3.0f, float hi = 3.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Timing {
  double first_get_ms, second_get_ms;
  bool compiled;
};

// Gets K twice: the first get compiles or loads from disk, the second hits the memory tier.
template <class K> std::pair<jit::Kernel<K>, Timing> timed_get(const typename K::Params& params) {
  auto t0 = clock_type::now();
  auto kernel = jit::get<K>(params, jit::Target::cpu());
  double first = ms_since(t0);
  bool compiled = kernel.origin() == jit::Origin::Compiled;
  t0 = clock_type::now();
  auto again = jit::get<K>(params, jit::Target::cpu());
  double second = ms_since(t0);
  (void)again;
  return {kernel, Timing{first, second, compiled}};
}

int report(const char* name, const Timing& t, double error, double tolerance) {
  bool ok = error <= tolerance;
  std::printf("%-13s %-18s first get %9.3f ms   memory-tier get %7.4f ms   rel. error %.1e  %s\n", name,
              t.compiled ? "(cold compile)" : "(disk cache hit)", t.first_get_ms, t.second_get_ms, error,
              ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  try {
    std::printf("jitk quickstart: cache at %s, target %s\n", jit::cache::root().c_str(),
                jit::Target::cpu().to_string().c_str());
    auto start = clock_type::now();
    std::mt19937 rng(20261122);
    const std::int64_t rows = 257, hidden = 4096;
    const double tol = jitk_reference::tolerance<float>();
    int failures = 0;
    double first_result_ms = -1;

    {  // saxpy: the clock for "first result" covers the get and the run, not making the data
      const std::int64_t n = 1'000'003;
      auto x = random_floats(n, rng), y = random_floats(n, rng);
      auto ref = jitk_reference::saxpy(2.5, x, y);
      auto t0 = clock_type::now();
      auto [k, t] = timed_get<kernels::Saxpy>({jit::DType::f32});
      k(n, 2.5, x.data(), y.data());
      first_result_ms = ms_since(t0);
      failures += report("saxpy", t, jitk_reference::relative_l2_error(y, ref), tol);
    }
    {  // rms_norm
      auto [k, t] = timed_get<kernels::RmsNorm>({jit::DType::f32, hidden});
      auto x = random_floats(rows * hidden, rng), w = random_floats(hidden, rng, 0.5f, 1.5f);
      std::vector<float> y(x.size(), NAN);
      k(rows, x.data(), w.data(), y.data(), 1e-6);
      failures += report("rms_norm", t, jitk_reference::relative_l2_error(y, jitk_reference::rms_norm(rows, hidden, x, w, 1e-6)), tol);
    }
    {  // softmax
      auto [k, t] = timed_get<kernels::Softmax>({jit::DType::f32, hidden});
      auto x = random_floats(rows * hidden, rng, -10.0f, 10.0f);
      std::vector<float> y(x.size(), NAN);
      k(rows, x.data(), y.data());
      failures += report("softmax", t, jitk_reference::relative_l2_error(y, jitk_reference::softmax(rows, hidden, x)), tol);
    }
    {  // silu_and_mul
      auto [k, t] = timed_get<kernels::SiluAndMul>({jit::DType::f32, hidden});
      auto x = random_floats(rows * 2 * hidden, rng);
      std::vector<float> out(rows * hidden, NAN);
      k(rows, x.data(), out.data());
      failures += report("silu_and_mul", t, jitk_reference::relative_l2_error(out, jitk_reference::silu_and_mul(rows, hidden, x)), tol);
    }
    auto s = jit::cache::stats();
    std::printf("first result (get + run of saxpy) after %.2f ms; whole run %.2f ms\n", first_result_ms, ms_since(start));
    std::printf("cache: %lld entries, %lld compiles, %lld disk hits in total (jitk stats)\n",
                static_cast<long long>(s.entries), static_cast<long long>(s.compiles), static_cast<long long>(s.hits));
    return failures ? 1 : 0;
  } catch (const jit::Error& e) {
    std::fprintf(stderr, "quickstart: %s: %s\n", jit::to_string(e.code()), e.what());
    return 1;
  }
}
