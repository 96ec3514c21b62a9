// quickstart: gets every shipped kernel through jit::get on the default target (the GPU when one is
// usable, else the CPU), runs it on random data, checks it against a float64 reference, and prints
// how long the first get took (a cold compile or a disk-cache hit) and a second get (the memory
// tier). Run it twice with the same JITK_CACHE_DIR: the second run compiles nothing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/cache.hpp"
#include "jit/cuda.hpp"
#include "jit/kernels.hpp"

namespace kernels = jit::kernels;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

const bool on_gpu = jit::default_target().backend == jit::Backend::Cuda;

// Float data where the kernel runs: a host vector, mirrored in device memory on the GPU.
class Buffer {
 public:
  explicit Buffer(std::vector<float> host) : host_(std::move(host)) {
    if (on_gpu) device_ = std::make_unique<jit::cuda::DeviceArray<float>>(host_);
  }
  float* data() { return device_ ? device_->data() : host_.data(); }
  const std::vector<float>& result() {  // waits for the kernel and copies back from the GPU
    if (device_) {
      jit::cuda::synchronize();
      host_ = device_->download();
    }
    return host_;
  }

 private:
  std::vector<float> host_;
  std::unique_ptr<jit::cuda::DeviceArray<float>> device_;
};

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
  auto kernel = jit::get<K>(params);
  double first = ms_since(t0);
  bool compiled = kernel.origin() == jit::Origin::Compiled;
  t0 = clock_type::now();
  auto again = jit::get<K>(params);
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

const std::vector<float> nan_filled(std::size_t n) { return std::vector<float>(n, NAN); }

}  // namespace

int main() {
  try {
    std::printf("jitk quickstart: cache at %s, target %s\n", jit::cache::root().c_str(),
                jit::default_target().to_string().c_str());
    if (!on_gpu) std::printf("(no GPU: %s)\n", jit::cuda::unavailable_reason().c_str());
    auto start = clock_type::now();
    std::mt19937 rng(20261122);
    const std::int64_t rows = 257, hidden = 4096;
    const double tol = jitk_reference::tolerance<float>();
    int failures = 0;
    double first_result_ms = -1;

    {  // saxpy: the clock for "first result" covers the get and the run, not making the data
      const std::int64_t n = 1'000'003;
      auto x0 = random_floats(n, rng), y0 = random_floats(n, rng);
      auto ref = jitk_reference::saxpy(2.5, x0, y0);
      Buffer x(x0), y(y0);
      auto t0 = clock_type::now();
      auto [k, t] = timed_get<kernels::Saxpy>({jit::DType::f32});
      k(n, 2.5, x.data(), y.data());
      const auto& out = y.result();
      first_result_ms = ms_since(t0);
      failures += report("saxpy", t, jitk_reference::relative_l2_error(out, ref), tol);
    }
    {  // rms_norm
      auto [k, t] = timed_get<kernels::RmsNorm>({jit::DType::f32, hidden});
      auto x0 = random_floats(rows * hidden, rng), w0 = random_floats(hidden, rng, 0.5f, 1.5f);
      Buffer x(x0), w(w0), y(nan_filled(x0.size()));
      k(rows, x.data(), w.data(), y.data(), 1e-6);
      failures += report("rms_norm", t, jitk_reference::relative_l2_error(y.result(), jitk_reference::rms_norm(rows, hidden, x0, w0, 1e-6)), tol);
    }
    {  // softmax
      auto [k, t] = timed_get<kernels::Softmax>({jit::DType::f32, hidden});
      auto x0 = random_floats(rows * hidden, rng, -10.0f, 10.0f);
      Buffer x(x0), y(nan_filled(x0.size()));
      k(rows, x.data(), y.data());
      failures += report("softmax", t, jitk_reference::relative_l2_error(y.result(), jitk_reference::softmax(rows, hidden, x0)), tol);
    }
    {  // silu_and_mul
      auto [k, t] = timed_get<kernels::SiluAndMul>({jit::DType::f32, hidden});
      auto x0 = random_floats(rows * 2 * hidden, rng);
      Buffer x(x0), out(nan_filled(rows * hidden));
      k(rows, x.data(), out.data());
      failures += report("silu_and_mul", t, jitk_reference::relative_l2_error(out.result(), jitk_reference::silu_and_mul(rows, hidden, x0)), tol);
    }
    {  // a fusion chain: residual += x, then y = rms_norm(residual) * 0.5, as one kernel (docs/fusion-chains.md)
      auto [k, t] = timed_get<kernels::RmsNorm>({jit::DType::f32, hidden, "add>store", "mul_scalar"});
      auto x0 = random_floats(rows * hidden, rng), r0 = random_floats(rows * hidden, rng),
           w0 = random_floats(hidden, rng, 0.5f, 1.5f);
      Buffer x(x0), residual(r0), w(w0), y(nan_filled(x0.size()));
      jit::Operands prologue{residual.data(), residual.data()}, epilogue{0.5};
      k(rows, x.data(), w.data(), y.data(), 1e-6, prologue, epilogue);
      std::vector<double> sum = jitk_reference::add_rms_norm_sum(x0, r0);
      auto ref = jitk_reference::rms_norm(rows, hidden, sum, std::vector<double>(w0.begin(), w0.end()), 1e-6);
      for (double& v : ref) v *= 0.5;
      const double error = std::max(jitk_reference::relative_l2_error(y.result(), ref),
                                    jitk_reference::relative_l2_error(residual.result(), sum));
      failures += report("add>rms>scale", t, error, tol);
    }
    std::printf("first result (get + run of saxpy) after %.2f ms; whole run %.2f ms\n", first_result_ms, ms_since(start));
    try {
      auto s = jit::cache::stats();
      std::printf("cache: %lld entries, %lld compiles, %lld disk hits in total (jitk stats)\n",
                  static_cast<long long>(s.entries), static_cast<long long>(s.compiles), static_cast<long long>(s.hits));
    } catch (const jit::Error& e) {
      std::printf("cache: not on disk (%s)\n", e.what());
    }
    return failures ? 1 : 0;
  } catch (const jit::Error& e) {
    std::fprintf(stderr, "quickstart: %s: %s\n", jit::to_string(e.code()), e.what());
    return 1;
  }
}
