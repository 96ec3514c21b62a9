// Every shipped CPU kernel against a float64 reference on random inputs of odd sizes, with poisoned outputs.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <thread>

#include "../examples/reference_kernels.hpp"
#include "jit/cache.hpp"
#include "jit/kernels.hpp"
#include "test_support.hpp"

namespace kernels = jit::kernels;
namespace ref = jitk_reference;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

template <class T> std::vector<T> random_vector(std::size_t n, double lo = -3, double hi = 3) {
  return jitk_test::random_values<T>(n, lo, hi, [](double v) { return static_cast<T>(v); });
}

template <class T> std::vector<T> poisoned(std::size_t n) { return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN()); }

const std::int64_t kOddSizes[] = {1, 7, 1000, 4097};
const std::int64_t kOddRows[] = {1, 7, 33};

}  // namespace

TEMPLATE_TEST_CASE("saxpy matches the reference", "[kernels]", float, double) {
  auto k = jit::get<kernels::Saxpy>({jit::dtype_of<TestType>()}, jit::Target::cpu());
  for (std::int64_t n : {1LL, 7LL, 1000LL, 4097LL, 1'000'003LL}) {
    auto x = random_vector<TestType>(n), y = random_vector<TestType>(n);
    double a = std::uniform_real_distribution<double>(-2, 2)(jitk_test::rng());
    auto expected = ref::saxpy(a, x, y);
    k(n, a, x.data(), y.data());
    INFO("n = " << n);
    CHECK(ref::relative_l2_error(y, expected) <= ref::tolerance<TestType>());
  }
}

TEMPLATE_TEST_CASE("rms_norm matches the reference", "[kernels]", float, double) {
  for (std::int64_t hidden : kOddSizes) {
    auto k = jit::get<kernels::RmsNorm>({jit::dtype_of<TestType>(), hidden}, jit::Target::cpu());
    for (std::int64_t rows : kOddRows) {
      auto x = random_vector<TestType>(rows * hidden), w = random_vector<TestType>(hidden, 0.5, 1.5);
      auto y = poisoned<TestType>(rows * hidden);
      k(rows, x.data(), w.data(), y.data(), 1e-5);
      INFO("hidden = " << hidden << ", rows = " << rows);
      CHECK(ref::relative_l2_error(y, ref::rms_norm(rows, hidden, x, w, 1e-5)) <= ref::tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("softmax matches the reference, also for large and equal inputs", "[kernels]", float, double) {
  for (std::int64_t hidden : kOddSizes) {
    auto k = jit::get<kernels::Softmax>({jit::dtype_of<TestType>(), hidden}, jit::Target::cpu());
    for (std::int64_t rows : kOddRows) {
      auto x = random_vector<TestType>(rows * hidden, -30, 30);
      x[0] = static_cast<TestType>(80);  // exp(80) overflows float without the max subtraction
      auto y = poisoned<TestType>(rows * hidden);
      k(rows, x.data(), y.data());
      INFO("hidden = " << hidden << ", rows = " << rows);
      CHECK(ref::relative_l2_error(y, ref::softmax(rows, hidden, x)) <= ref::tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("silu_and_mul matches the reference", "[kernels]", float, double) {
  for (std::int64_t hidden : kOddSizes) {
    auto k = jit::get<kernels::SiluAndMul>({jit::dtype_of<TestType>(), hidden}, jit::Target::cpu());
    for (std::int64_t rows : kOddRows) {
      auto x = random_vector<TestType>(rows * 2 * hidden, -12, 12);
      auto out = poisoned<TestType>(rows * hidden);
      k(rows, x.data(), out.data());
      INFO("hidden = " << hidden << ", rows = " << rows);
      CHECK(ref::relative_l2_error(out, ref::silu_and_mul(rows, hidden, x)) <= ref::tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("log_softmax matches the reference, also for large inputs", "[kernels]", float, double) {
  for (std::int64_t hidden : kOddSizes) {
    auto k = jit::get<kernels::LogSoftmax>({jit::dtype_of<TestType>(), hidden}, jit::Target::cpu());
    for (std::int64_t rows : kOddRows) {
      auto x = random_vector<TestType>(rows * hidden, -30, 30);
      x[0] = static_cast<TestType>(80);
      auto y = poisoned<TestType>(rows * hidden);
      k(rows, x.data(), y.data());
      INFO("hidden = " << hidden << ", rows = " << rows);
      CHECK(ref::relative_l2_error(y, ref::log_softmax(rows, hidden, x)) <= ref::tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("layer_norm matches the reference, also with a large mean", "[kernels]", float, double) {
  for (std::int64_t hidden : kOddSizes) {
    auto k = jit::get<kernels::LayerNorm>({jit::dtype_of<TestType>(), hidden}, jit::Target::cpu());
    for (std::int64_t rows : kOddRows) {
      // a mean far from 0 (100 +- 3): E[x^2] - mean^2 would lose the variance's digits
      auto x = random_vector<TestType>(rows * hidden, 97, 103), w = random_vector<TestType>(hidden, 0.5, 1.5),
           b = random_vector<TestType>(hidden);
      auto y = poisoned<TestType>(rows * hidden);
      k(rows, x.data(), w.data(), b.data(), y.data(), 1e-5);
      INFO("hidden = " << hidden << ", rows = " << rows);
      if (hidden > 1)
        CHECK(ref::relative_l2_error(y, ref::layer_norm(rows, hidden, x, w, b, 1e-5)) <= ref::tolerance<TestType>());
      else  // one element: (x - mean) is 0, y is the bias
        CHECK(ref::relative_l2_error(y, ref::layer_norm(rows, hidden, x, w, b, 1e-5)) <= 1e-6);
    }
  }
}

TEMPLATE_TEST_CASE("gelu_and_mul matches the reference, exact and tanh", "[kernels]", float, double) {
  using Approx = kernels::GeluAndMul::Approximate;
  for (Approx approx : {Approx::None, Approx::Tanh}) {
    for (std::int64_t hidden : kOddSizes) {
      auto k = jit::get<kernels::GeluAndMul>({jit::dtype_of<TestType>(), hidden, approx}, jit::Target::cpu());
      for (std::int64_t rows : kOddRows) {
        auto x = random_vector<TestType>(rows * 2 * hidden, -8, 8);
        auto out = poisoned<TestType>(rows * hidden);
        k(rows, x.data(), out.data());
        INFO("tanh = " << (approx == Approx::Tanh) << ", hidden = " << hidden << ", rows = " << rows);
        CHECK(ref::relative_l2_error(out, ref::gelu_and_mul(rows, hidden, x, approx == Approx::Tanh)) <=
              ref::tolerance<TestType>());
      }
    }
  }
}

TEMPLATE_TEST_CASE("fused_add_rms_norm writes the sum and its rms_norm, as the two kernels would", "[kernels]", float, double) {
  for (std::int64_t hidden : kOddSizes) {
    auto k = jit::get<kernels::FusedAddRmsNorm>({jit::dtype_of<TestType>(), hidden}, jit::Target::cpu());
    for (std::int64_t rows : kOddRows) {
      auto x = random_vector<TestType>(rows * hidden), residual = random_vector<TestType>(rows * hidden),
           w = random_vector<TestType>(hidden, 0.5, 1.5);
      auto sum = ref::add_rms_norm_sum(x, residual);
      std::vector<double> wd(w.begin(), w.end());
      auto y = poisoned<TestType>(rows * hidden);
      k(rows, x.data(), residual.data(), w.data(), y.data(), 1e-5);
      INFO("hidden = " << hidden << ", rows = " << rows);
      CHECK(ref::relative_l2_error(residual, sum) <= ref::tolerance<TestType>());
      CHECK(ref::relative_l2_error(y, ref::rms_norm(rows, hidden, sum, wd, 1e-5)) <= ref::tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("adamw matches torch.optim.AdamW's update in float64, step after step", "[kernels]", float, double) {
  auto k = jit::get<kernels::AdamW>({jit::dtype_of<TestType>()}, jit::Target::cpu());
  for (std::int64_t n : {1LL, 7LL, 1000LL, 4097LL, 1'000'003LL}) {
    auto param = random_vector<TestType>(n), m = random_vector<TestType>(n, -0.1, 0.1),
         v = random_vector<TestType>(n, 0, 0.01);
    std::vector<double> rp(param.begin(), param.end()), rm(m.begin(), m.end()), rv(v.begin(), v.end());
    for (std::int64_t step = 1; step <= 3; ++step) {
      auto grad = random_vector<TestType>(n, -1, 1);
      k(n, param.data(), grad.data(), m.data(), v.data(), 1e-3, step, 0.9, 0.999, 1e-8, 0.01);
      ref::adamw(rp, grad, rm, rv, 1e-3, step, 0.9, 0.999, 1e-8, 0.01);
    }
    INFO("n = " << n);
    // m = 0.9 m + 0.1 g can cancel: for a few elements allow their own cancellation (see the GPU test)
    const double tol = n >= 1000 ? ref::tolerance<TestType>() : 10 * ref::tolerance<TestType>();
    CHECK(ref::relative_l2_error(param, rp) <= tol);
    CHECK(ref::relative_l2_error(m, rm) <= tol);
    CHECK(ref::relative_l2_error(v, rv) <= tol);
  }
}

TEST_CASE("adamw refuses a step, rate or type it cannot honour, before touching anything", "[kernels]") {
  auto k = jit::get<kernels::AdamW>({jit::DType::f32}, jit::Target::cpu());
  std::vector<float> p(8, 1.0f), g(8, 0.5f), m(8), v(8);
  std::vector<double> gd(8);
  CHECK_THROWS_WITH(k(8, p.data(), g.data(), m.data(), v.data(), 1e-3, 0), Catch::Matchers::Contains("step must be >= 1"));
  CHECK_THROWS_WITH(k(8, p.data(), g.data(), m.data(), v.data(), 1e-3, 1, 0.9, 1.0), Catch::Matchers::Contains("beta1 and beta2"));
  CHECK_THROWS_WITH(k(8, p.data(), g.data(), m.data(), v.data(), 1e-3, 1, 0.9, 0.999, 0.0), Catch::Matchers::Contains("eps"));
  CHECK_THROWS_WITH(k(8, p.data(), gd.data(), m.data(), v.data(), 1e-3, 1), Catch::Matchers::Contains("'grad' is f64"));
  CHECK(p[0] == 1.0f);
  CHECK(m[0] == 0.0f);
}

TEST_CASE("a kernel launched with zero work writes nothing", "[kernels]") {
  auto k = jit::get<kernels::Softmax>({jit::DType::f32, 7}, jit::Target::cpu());
  std::vector<float> y(7, 42.0f);
  k(0, static_cast<const float*>(nullptr), y.data());
  CHECK(y[0] == 42.0f);
}

TEST_CASE("launch arguments that do not fit the specialization are refused, not run", "[kernels]") {
  auto k = jit::get<kernels::RmsNorm>({jit::DType::f32, 64}, jit::Target::cpu());
  std::vector<float> x(64), w(64), y(64);
  std::vector<double> xd(64);
  CHECK_THROWS_WITH(k(1, xd.data(), w.data(), y.data(), 1e-6),
                    Catch::Matchers::Contains("'x' is f64") && Catch::Matchers::Contains("specialized for f32"));
  CHECK_THROWS_WITH(k(1, x.data(), static_cast<const float*>(nullptr), y.data(), 1e-6), Catch::Matchers::Contains("'weight' is null"));
  CHECK_THROWS_WITH(k(-1, x.data(), w.data(), y.data(), 1e-6), Catch::Matchers::Contains("negative"));
  CHECK_THROWS_WITH(k(1, x.data(), w.data(), y.data(), 0.0), Catch::Matchers::Contains("eps"));
}

TEST_CASE("threads asking for the same new kernel at once share one compile", "[kernels][concurrency]") {
  auto before = jit::cache::stats().compiles;
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> keys(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { keys[t] = jit::get<kernels::Softmax>({jit::DType::f64, 12345}, jit::Target::cpu()).cache_key(); });
  for (auto& t : threads) t.join();
  CHECK(jit::cache::stats().compiles == before + 1);
  for (const auto& k : keys) CHECK(k == keys[0]);
}

TEST_CASE("the hot path returns the same kernel without compiling again", "[kernels]") {
  auto a = jit::get<kernels::Saxpy>({jit::DType::f32}, jit::Target::cpu());
  auto compiles = jit::cache::stats().compiles;
  for (int i = 0; i < 1000; ++i) CHECK(jit::get<kernels::Saxpy>({jit::DType::f32}, jit::Target::cpu()).cache_key() == a.cache_key());
  CHECK(jit::cache::stats().compiles == compiles);
}

TEST_CASE("different specializations get different keys", "[kernels]") {
  auto a = jit::get<kernels::RmsNorm>({jit::DType::f32, 7}, jit::Target::cpu());
  auto b = jit::get<kernels::RmsNorm>({jit::DType::f32, 1000}, jit::Target::cpu());
  auto c = jit::get<kernels::RmsNorm>({jit::DType::f64, 7}, jit::Target::cpu());
  CHECK(a.cache_key() != b.cache_key());
  CHECK(a.cache_key() != c.cache_key());
}

TEST_CASE("a compile error names the kernel and params and shows the compiler log and numbered source", "[kernels]") {
  jitk_test::TempDir override_dir;
  auto text = jitk_test::read_file(std::string(JITK_SOURCE_DIR) + "/kernel_sources/rms_norm/rms_norm.cpp");
  text += "\nthis is not C++;\n";
  jitk_test::write_file(override_dir.path() / "rms_norm/rms_norm.cpp", text);
  ::setenv("JITK_KERNEL_DIR", override_dir.str().c_str(), 1);
  auto expect = [&](const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::CompileFailed);
    std::string what = e.what();
    CHECK_THAT(what, Catch::Matchers::Contains("rms_norm (dtype=f32,hidden=777)") &&
                         Catch::Matchers::Contains("compiler log") && Catch::Matchers::Contains("error:") &&
                         Catch::Matchers::Contains("| this is not C++;") && Catch::Matchers::Contains(override_dir.str()));
  };
  try {
    jit::get<kernels::RmsNorm>({jit::DType::f32, 777}, jit::Target::cpu());
    FAIL("a broken kernel text compiled");
  } catch (const jit::Error& e) {
    expect(e);
  }
  ::unsetenv("JITK_KERNEL_DIR");
  // the shipped text still works for the same params: the failure was not cached
  auto k = jit::get<kernels::RmsNorm>({jit::DType::f32, 777}, jit::Target::cpu());
  CHECK(k.origin() == jit::Origin::Compiled);
}
