// jitk_consumer: gets the kernels warm.toml lists, checks each against a plain loop in double, and
// prints where it came from: "disk" (warmed at build time) or "compiled" (at run time).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

// Every public header compiles against the installed tree alone.
#include "jit/cache.hpp"
#include "jit/cuda.hpp"
#include "jit/jit.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"

namespace {

constexpr double kTolerance = 1e-5;  // relative L2 error, f32

double relative_l2_error(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(err / norm);
}

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.1f * static_cast<float>(i) + 1.0f);
  return v;
}

template <class K> int report(const jit::Kernel<K>& k, double error) {
  const bool ok = error <= kTolerance;
  std::printf("%-9s %-8s rel. error %.1e  %s\n", K::name, k.origin() == jit::Origin::DiskCache ? "disk" : "compiled",
              error, ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  setenv("JITK_CACHE_DIR", JITK_WARMED_CACHE_DIR, /*overwrite=*/0);  // the environment's wins
  try {
    std::printf("cache: %s\n", jit::cache::root().c_str());
    const jit::Target cpu = jit::Target::cpu();
    int failures = 0;
    {  // y = a * x + y
      const std::int64_t n = 1000;
      const double a = 2.5;
      auto x = ramp(n, 3.0f), y = ramp(n, -1.5f);
      std::vector<double> want(n);
      for (std::int64_t i = 0; i < n; ++i) want[i] = a * x[i] + y[i];
      auto k = jit::get<jit::kernels::Saxpy>({jit::DType::f32}, cpu);
      k(n, a, x.data(), y.data());
      failures += report(k, relative_l2_error(y, want));
    }
    {  // y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight
      const std::int64_t rows = 7, hidden = 333;
      const double eps = 1e-6;
      auto x = ramp(rows * hidden, 2.0f), w = ramp(hidden, 0.5f);
      std::vector<float> y(x.size(), NAN);
      std::vector<double> want(x.size());
      for (std::int64_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (std::int64_t i = 0; i < hidden; ++i) sum += double(x[r * hidden + i]) * x[r * hidden + i];
        const double scale = 1.0 / std::sqrt(sum / hidden + eps);
        for (std::int64_t i = 0; i < hidden; ++i) want[r * hidden + i] = x[r * hidden + i] * scale * w[i];
      }
      auto k = jit::get<jit::kernels::RmsNorm>({jit::DType::f32, hidden}, cpu);
      k(rows, x.data(), w.data(), y.data(), eps);
      failures += report(k, relative_l2_error(y, want));
    }
    return failures ? 1 : 0;
  } catch (const jit::Error& e) {
    std::fprintf(stderr, "jitk_consumer: %s: %s\n", jit::to_string(e.code()), e.what());
    return 1;
  }
}
