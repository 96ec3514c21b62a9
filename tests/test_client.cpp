// A client process for the tests: gets kernels through jit::get, runs them on random data, checks them
// against the float64 reference and prints one line per kernel: "<name> compiled|disk ok|WRONG".
// Usage: jitk_test_client [saxpy] [rms_norm] [softmax] [silu_and_mul]   (default: all four, f32)
//        jitk_test_client soak SECONDS THREADS   (mixed get / clear / prune / verify; prints a summary)
//        jitk_test_client gemm-tuned M N K      (gemm through jit::get_tuned; prints the chosen params)
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/cache.hpp"
#include "jit/kernels.hpp"
#include "jit/tuning.hpp"

namespace {

// One generator per thread: the soak calls random_floats from many threads at once.
thread_local std::mt19937 rng(std::random_device{}());

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

// One soak thread: random gets of many specializations (each checked), and now and then a clear,
// a prune or a verify, until the deadline. Counts errors (exceptions) and wrong results.
struct SoakCounts {
  std::atomic<long> gets{0}, clears{0}, prunes{0}, verifies{0}, errors{0}, wrong{0};
};

void soak_thread(std::chrono::steady_clock::time_point deadline, unsigned seed, SoakCounts& counts) {
  using namespace jit::kernels;
  std::mt19937 r(seed);
  std::uniform_int_distribution<int> op(0, 99), hidden_pick(0, 199), kind(0, 3);
  while (std::chrono::steady_clock::now() < deadline) {
    int o = op(r);
    try {
      if (o < 80) {
        const std::int64_t rows = 3, hidden = 40 + 8 * hidden_pick(r);  // 200 row lengths x 4 kernels: compiles keep coming
        auto x = random_floats(rows * 2 * hidden), w = random_floats(hidden);
        std::vector<float> y(rows * hidden, NAN);
        double err = 0;
        switch (kind(r)) {
          case 0: {
            auto k = jit::get<RmsNorm>({jit::DType::f32, hidden}, jit::Target::cpu());
            k(rows, x.data(), w.data(), y.data(), 1e-5);
            x.resize(rows * hidden);
            err = jitk_reference::relative_l2_error(y, jitk_reference::rms_norm(rows, hidden, x, w, 1e-5));
            break;
          }
          case 1: {
            auto k = jit::get<Softmax>({jit::DType::f32, hidden}, jit::Target::cpu());
            k(rows, x.data(), y.data());
            x.resize(rows * hidden);
            err = jitk_reference::relative_l2_error(y, jitk_reference::softmax(rows, hidden, x));
            break;
          }
          case 2: {
            auto k = jit::get<SiluAndMul>({jit::DType::f32, hidden}, jit::Target::cpu());
            k(rows, x.data(), y.data());
            err = jitk_reference::relative_l2_error(y, jitk_reference::silu_and_mul(rows, hidden, x));
            break;
          }
          default: {
            auto k = jit::get<RmsNorm>({jit::DType::f64, hidden}, jit::Target::cpu());
            std::vector<double> xd(x.begin(), x.begin() + rows * hidden), wd(w.begin(), w.end()), yd(rows * hidden, NAN);
            k(rows, xd.data(), wd.data(), yd.data(), 1e-5);
            err = jitk_reference::relative_l2_error(yd, jitk_reference::rms_norm(rows, hidden, xd, wd, 1e-5)) / 1e7;
            break;
          }
        }
        ++counts.gets;
        if (!(err <= jitk_reference::tolerance<float>())) ++counts.wrong;
      } else if (o < 84) {
        jit::cache::clear();
        ++counts.clears;
      } else if (o < 92) {
        jit::cache::prune(std::int64_t{20000}, std::nullopt);
        ++counts.prunes;
      } else {
        // Stores and clears hold the maintenance lock, so even mid-flight the cache is consistent.
        for (const auto& p : jit::cache::verify(false)) {
          ++counts.errors;
          std::printf("soak verify problem: %s: %s\n", p.key.c_str(), p.what.c_str());
        }
        ++counts.verifies;
      }
    } catch (const std::exception& e) {
      ++counts.errors;
      std::printf("soak error: %s\n", e.what());
    }
  }
}

int soak(int seconds, int threads) {
  SoakCounts counts;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(soak_thread, deadline, std::random_device{}(), std::ref(counts));
  for (auto& t : pool) t.join();
  std::printf("soak gets=%ld clears=%ld prunes=%ld verifies=%ld errors=%ld wrong=%ld\n", counts.gets.load(),
              counts.clears.load(), counts.prunes.load(), counts.verifies.load(), counts.errors.load(), counts.wrong.load());
  return counts.errors == 0 && counts.wrong == 0 ? 0 : 1;
}

}  // namespace

// Gets gemm (f32) autotuned for an m x n x k problem and prints "gemm-tuned <the chosen params>".
int gemm_tuned(std::int64_t m, std::int64_t n, std::int64_t k) {
  auto kernel = jit::get_tuned<jit::kernels::Gemm>({}, {m, n, k}, jit::Target::cpu());
  std::printf("gemm-tuned %s\n", jit::kernels::Gemm::to_params(kernel.params()).to_string().c_str());
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "soak") return soak(std::atoi(argv[2]), std::atoi(argv[3]));
  if (argc == 5 && std::string(argv[1]) == "gemm-tuned") return gemm_tuned(std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]));
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
