// Every shipped GPU kernel in f32, f16 and bf16 against a float64 CPU reference, on random inputs of odd
// sizes with poisoned outputs. Without a usable CUDA GPU each test prints "SKIPPED: <reason>".
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "../examples/decoder_layer.hpp"
#include "../examples/reference_kernels.hpp"
#include "chain_support.hpp"
#include "jit/cache.hpp"
#include "jit/cuda.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "jit/cuda/nvrtc_compiler.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/selection.hpp"
#include "gpu_support.hpp"
#include "attention_decode_support.hpp"
#include "attention_support.hpp"
#include "kv_cache_append_support.hpp"
#include "rotary_support.hpp"
#include "test_support.hpp"

namespace kernels = jit::kernels;
namespace ref = jitk_reference;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

using jitk_test::as_double;
using jitk_test::from_double;
using jitk_test::gpu;
using jitk_test::have_gpu;
using jitk_test::tolerance;

template <class T> std::vector<T> random_vector(std::size_t n, double lo = -3, double hi = 3) {
  return jitk_test::random_values<T>(n, lo, hi, [](double v) { return from_double<T>(v); });
}
template <class T> std::vector<double> widen(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = as_double(v[i]);
  return out;
}
// Relative L2 error, with f16's subnormal range as an absolute floor: below 6.1e-5 a half keeps
// only a few bits, so an output that small (gelu(-5) * 0.01) is judged against that floor, not
// against itself (a one-element row of such a value would otherwise read as a 5% error).
template <class T> double error_of(const jit::cuda::DeviceArray<T>& out, const std::vector<double>& expected) {
  jit::cuda::synchronize();
  const auto got = widen(out.download());
  if (!std::is_same_v<T, jit::half>) return ref::relative_l2_error(got, expected);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num += (got[i] - expected[i]) * (got[i] - expected[i]);
    den += std::max(expected[i] * expected[i], 6.1e-5 * 6.1e-5);
  }
  return std::sqrt(num / den);
}

constexpr unsigned char kPoison = 0xff;  // all-ones is NaN in f32, f16 and bf16
const std::int64_t kHidden[] = {1, 7, 1000, 4096, 4097};
const std::int64_t kRows[] = {1, 7, 33};

}  // namespace

// The quickstart (its kernels on the GPU when there is one) in new processes: a cold run, then a
// warm one whose every get finds its key remembered, loading through each CUDA loading path.
TEST_CASE("GPU kernels load through cuLibraryLoadData (JITK_CUDA_LOAD=library) and by remembered keys in new processes", "[gpu][warm]") {
  if (!jitk_test::have_gpu()) return;
  for (const char* how : {"library", "module"}) {
    jitk_test::TempDir cache;
    const std::string env = jitk_test::cache_env(cache) + " JITK_LOG_LEVEL=info JITK_CUDA_LOAD=" + how;
    auto first = jitk_test::run(JITK_TEST_QUICKSTART, env);
    INFO(how << ":\n" << first.output);
    CHECK(first.exit_code == 0);
    const int kernels = jitk_test::count_lines_with(first.output, "(cold compile)");
    CHECK(kernels >= 4);
    CHECK(first.output.find("no GPU") == std::string::npos);
    CHECK(first.output.find("loading with cuModuleLoadData") == std::string::npos);  // no fallback from library
    auto warm = jitk_test::run(JITK_TEST_QUICKSTART, env);
    INFO(warm.output);
    CHECK(warm.exit_code == 0);
    CHECK(jitk_test::count_lines_with(warm.output, "(disk cache hit)") == kernels);
    CHECK(jitk_test::count_lines_with(warm.output, "(key remembered)") == kernels);
  }
}

TEMPLATE_TEST_CASE("GPU saxpy matches the reference", "[gpu]", float, jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  auto k = jit::get<kernels::Saxpy>({jit::dtype_of<TestType>()}, gpu());
  for (std::int64_t n : {1LL, 7LL, 1000LL, 4097LL, 1'000'003LL}) {
    auto x = random_vector<TestType>(n), y = random_vector<TestType>(n);
    const double a = 1.25;
    auto expected = ref::saxpy(a, widen(x), widen(y));
    jit::cuda::DeviceArray<TestType> dx(x), dy(y);
    k(n, a, dx.data(), dy.data());
    INFO("n = " << n);
    CHECK(error_of(dy, expected) <= tolerance<TestType>());
  }
}

TEMPLATE_TEST_CASE("GPU saxpy on unaligned pointers takes the scalar path and is right", "[gpu]", float, jit::half) {
  if (!have_gpu()) return;
  auto k = jit::get<kernels::Saxpy>({jit::dtype_of<TestType>()}, gpu());
  const std::int64_t n = 4099;
  auto x = random_vector<TestType>(n + 1), y = random_vector<TestType>(n + 1);
  std::vector<TestType> xs(x.begin() + 1, x.end()), ys(y.begin() + 1, y.end());
  auto expected = ref::saxpy(0.5, widen(xs), widen(ys));
  expected.insert(expected.begin(), as_double(y[0]));  // element 0 untouched
  jit::cuda::DeviceArray<TestType> dx(x), dy(y);
  k(n, 0.5, dx.data() + 1, dy.data() + 1);
  CHECK(error_of(dy, expected) <= tolerance<TestType>());
}

TEMPLATE_TEST_CASE("GPU rms_norm matches the reference in every implementation that suits the device", "[gpu]", float,
                   jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  for (const auto& impl : jit::implementations_for("rms_norm", gpu())) {
    jit::Selection only;
    only.implementation = impl;
    for (std::int64_t hidden : {1LL, 7LL, 1000LL, 4096LL, 4097LL, 16384LL}) {
      auto k = jit::get<kernels::RmsNorm>({jit::dtype_of<TestType>(), hidden}, gpu(), only);
      REQUIRE(k.implementation() == impl);
      for (std::int64_t rows : kRows) {
        auto x = random_vector<TestType>(rows * hidden), w = random_vector<TestType>(hidden, 0.5, 1.5);
        jit::cuda::DeviceArray<TestType> dx(x), dw(w), dy(rows * hidden);
        dy.fill_bytes(kPoison);
        k(rows, dx.data(), dw.data(), dy.data(), 1e-5);
        INFO(impl << ": hidden = " << hidden << ", rows = " << rows);
        CHECK(error_of(dy, ref::rms_norm(rows, hidden, widen(x), widen(w), 1e-5)) <= tolerance<TestType>());
      }
    }
  }
}

TEST_CASE("on the GPU, rms_norm picks the most specialized implementation that suits the device", "[gpu]") {
  if (!have_gpu()) return;
  const int capability = jit::detail::capability_of_arch(jit::cuda::devices()[0].arch);
  auto k = jit::get<kernels::RmsNorm>({jit::DType::bf16, 4096}, gpu());
  CHECK(k.implementation() == (capability == 90 ? "cuda-sm90" : "cuda"));
  jit::Selection strict;
  strict.allow_fallback = false;
  if (capability == 90) {
    CHECK(jit::get<kernels::RmsNorm>({jit::DType::bf16, 4096}, gpu(), strict).implementation() == "cuda-sm90");
  } else {
    CHECK_THROWS_WITH(jit::get<kernels::RmsNorm>({jit::DType::bf16, 4096}, gpu(), strict),
                      Catch::Matchers::Contains("non-generic") && Catch::Matchers::Contains("cuda-sm90"));
  }
  // softmax has only the generic one: the strict get says what was missing
  CHECK_THROWS_WITH(jit::get<kernels::Softmax>({jit::DType::bf16, 4096}, gpu(), strict),
                    Catch::Matchers::Contains("non-generic"));
}

// A row kernel of one input and one output (softmax, log_softmax) over every hidden size and row
// count, against `reference(rows, hidden, x)`.
template <class K, class T, class Reference> void check_gpu_row_kernel(Reference reference) {
  for (std::int64_t hidden : kHidden) {
    auto k = jit::get<K>({jit::dtype_of<T>(), hidden}, gpu());
    for (std::int64_t rows : kRows) {
      auto x = random_vector<T>(rows * hidden, -8, 8);
      jit::cuda::DeviceArray<T> dx(x), dy(rows * hidden);
      dy.fill_bytes(kPoison);
      k(rows, dx.data(), dy.data());
      INFO("hidden = " << hidden << ", rows = " << rows);
      CHECK(error_of(dy, reference(rows, hidden, widen(x))) <= tolerance<T>());
    }
  }
}

TEMPLATE_TEST_CASE("GPU softmax matches the reference", "[gpu]", float, jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  check_gpu_row_kernel<kernels::Softmax, TestType>(
      [](std::int64_t rows, std::int64_t hidden, const std::vector<double>& x) { return ref::softmax(rows, hidden, x); });
}

TEMPLATE_TEST_CASE("GPU silu_and_mul matches the reference", "[gpu]", float, jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  for (std::int64_t hidden : kHidden) {
    auto k = jit::get<kernels::SiluAndMul>({jit::dtype_of<TestType>(), hidden}, gpu());
    for (std::int64_t rows : kRows) {
      auto x = random_vector<TestType>(rows * 2 * hidden, -6, 6);
      jit::cuda::DeviceArray<TestType> dx(x), dout(rows * hidden);
      dout.fill_bytes(kPoison);
      k(rows, dx.data(), dout.data());
      INFO("hidden = " << hidden << ", rows = " << rows);
      CHECK(error_of(dout, ref::silu_and_mul(rows, hidden, widen(x))) <= tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("GPU log_softmax matches the reference", "[gpu]", float, jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  check_gpu_row_kernel<kernels::LogSoftmax, TestType>(
      [](std::int64_t rows, std::int64_t hidden, const std::vector<double>& x) { return ref::log_softmax(rows, hidden, x); });
}

TEMPLATE_TEST_CASE("GPU layer_norm matches the reference", "[gpu]", float, jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  for (std::int64_t hidden : kHidden) {
    if (hidden == 1) continue;  // y is the bias: nothing to normalize
    auto k = jit::get<kernels::LayerNorm>({jit::dtype_of<TestType>(), hidden}, gpu());
    for (std::int64_t rows : kRows) {
      auto x = random_vector<TestType>(rows * hidden, 2, 8), w = random_vector<TestType>(hidden, 0.5, 1.5),
           b = random_vector<TestType>(hidden);
      jit::cuda::DeviceArray<TestType> dx(x), dw(w), db(b), dy(rows * hidden);
      dy.fill_bytes(kPoison);
      k(rows, dx.data(), dw.data(), db.data(), dy.data(), 1e-5);
      INFO("hidden = " << hidden << ", rows = " << rows);
      CHECK(error_of(dy, ref::layer_norm(rows, hidden, widen(x), widen(w), widen(b), 1e-5)) <= tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("GPU gelu_and_mul matches the reference, exact and tanh", "[gpu]", float, jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  using Approx = kernels::GeluAndMul::Approximate;
  for (Approx approx : {Approx::None, Approx::Tanh})
    for (std::int64_t hidden : kHidden) {
      auto k = jit::get<kernels::GeluAndMul>({jit::dtype_of<TestType>(), hidden, approx}, gpu());
      for (std::int64_t rows : kRows) {
        auto x = random_vector<TestType>(rows * 2 * hidden, -6, 6);
        jit::cuda::DeviceArray<TestType> dx(x), dout(rows * hidden);
        dout.fill_bytes(kPoison);
        k(rows, dx.data(), dout.data());
        INFO("tanh = " << (approx == Approx::Tanh) << ", hidden = " << hidden << ", rows = " << rows);
        CHECK(error_of(dout, ref::gelu_and_mul(rows, hidden, widen(x), approx == Approx::Tanh)) <= tolerance<TestType>());
      }
    }
}

TEMPLATE_TEST_CASE("GPU fused_add_rms_norm writes the sum and its rms_norm, in each implementation", "[gpu]", float,
                   jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  for (const auto& impl : jit::implementations_for("fused_add_rms_norm", gpu())) {
    jit::Selection only;
    only.implementation = impl;
    for (std::int64_t hidden : {1LL, 7LL, 1000LL, 4096LL, 4097LL, 16384LL}) {
      auto k = jit::get<kernels::FusedAddRmsNorm>({jit::dtype_of<TestType>(), hidden}, gpu(), only);
      for (std::int64_t rows : kRows) {
        auto x = random_vector<TestType>(rows * hidden), res = random_vector<TestType>(rows * hidden),
             w = random_vector<TestType>(hidden, 0.5, 1.5);
        auto sum = ref::add_rms_norm_sum(widen(x), widen(res));
        jit::cuda::DeviceArray<TestType> dx(x), dres(res), dw(w), dy(rows * hidden);
        dy.fill_bytes(kPoison);
        k(rows, dx.data(), dres.data(), dw.data(), dy.data(), 1e-5);
        INFO(impl << ": hidden = " << hidden << ", rows = " << rows);
        CHECK(error_of(dres, sum) <= tolerance<TestType>());
        CHECK(error_of(dy, ref::rms_norm(rows, hidden, sum, widen(w), 1e-5)) <= tolerance<TestType>());
      }
    }
  }
}

namespace {
template <class T> struct DeviceEnv {
  std::vector<T> random(std::int64_t n, double lo, double hi) { return random_vector<T>(static_cast<std::size_t>(n), lo, hi); }
  std::vector<T> poisoned(std::int64_t n) {
    std::vector<T> v(static_cast<std::size_t>(n));
    std::memset(static_cast<void*>(v.data()), kPoison, v.size() * sizeof(T));
    return v;
  }
  double widen(T v) { return as_double(v); }
  double round(double v) { return as_double(from_double<T>(v)); }
  jit::cuda::DeviceArray<T> upload(const std::vector<T>& v) { return jit::cuda::DeviceArray<T>(v); }
  double error(const jit::cuda::DeviceArray<T>& a, const std::vector<double>& expected) { return error_of(a, expected); }
};
}  // namespace

TEMPLATE_TEST_CASE("GPU fused chains match their steps run one by one, in every implementation", "[gpu][chains]", float,
                   jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  const std::int64_t hiddens[] = {7, 4096, 4097};
  // Compile the specializations side by side first (NVRTC takes ~0.4 s each).
  std::vector<jit::cache::WarmItem> items;
  for (const auto& c : jitk_test::chain_cases())
    for (std::int64_t hidden : hiddens)
      items.push_back({c.kernel, gpu(), jitk_test::chain_case_params(c, jit::dtype_of<TestType>(), hidden), "test"});
  jit::cache::warm(items, std::max(2u, std::thread::hardware_concurrency()));
  DeviceEnv<TestType> env;
  for (const auto& c : jitk_test::chain_cases()) {
    for (const auto& impl :
         jit::implementations_for(c.kernel, gpu(), jitk_test::chain_case_params(c, jit::dtype_of<TestType>(), 4096))) {
      jit::Selection only;
      only.implementation = impl;
      for (std::int64_t hidden : hiddens) {
        for (std::int64_t rows : {1LL, 33LL}) {
          INFO(c.kernel << " (" << impl << ") prologue '" << c.prologue << "' epilogue '" << c.epilogue
                        << "', hidden = " << hidden << ", rows = " << rows);
          for (const auto& [what, error] : jitk_test::run_chain_case<TestType>(c, hidden, rows, gpu(), env, only)) {
            INFO(what);
            CHECK(error <= tolerance<TestType>());
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("GPU adamw matches torch.optim.AdamW's update in float64, with f32 master weights", "[gpu]", float,
                   jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  auto k = jit::get<kernels::AdamW>({jit::dtype_of<TestType>()}, gpu());
  for (std::int64_t n : {1LL, 7LL, 1000LL, 4097LL, 1'000'003LL}) {
    auto param = random_vector<float>(n), m = random_vector<float>(n, -0.1, 0.1), v = random_vector<float>(n, 0, 0.01);
    std::vector<double> rp = widen(param), rm = widen(m), rv = widen(v);
    jit::cuda::DeviceArray<float> dp(param), dm(m), dv(v);
    for (std::int64_t step = 1; step <= 3; ++step) {
      auto grad = random_vector<TestType>(n, -1, 1);
      jit::cuda::DeviceArray<TestType> dg(grad);
      k(n, dp.data(), dg.data(), dm.data(), dv.data(), 1e-3, step, 0.9, 0.999, 1e-8, 0.01);
      ref::adamw(rp, widen(grad), rm, rv, 1e-3, step, 0.9, 0.999, 1e-8, 0.01);
      jit::cuda::synchronize();  // dg goes out of scope
    }
    INFO("n = " << n);
    // m = 0.9 m + 0.1 g can cancel: one element's relative error is its own cancellation (1.1e-5
    // seen at n = 1 in float); over many elements the L2 norm averages it out.
    const double tol = n >= 1000 ? 1e-5 : 1e-4;
    CHECK(error_of(dp, rp) <= tol);
    CHECK(error_of(dm, rm) <= tol);
    CHECK(error_of(dv, rv) <= tol);
  }
}

// rotary_embedding: q and k on the device, the untouched tail of each head poisoned and checked bit
// for bit; the theta source's float angle is off by up to position * 2^-24 radians (as torch's
// float cache), so f32 is judged at 1e-4 there.
template <class T>
void check_gpu_rotary(const jitk_test::RotaryShape& s, jitk_test::Rotary::Style style, jitk_test::Rotary::Source source, bool offset) {
  using Rotary = jitk_test::Rotary;
  const bool table = source == Rotary::Source::Table, neox = style == Rotary::Style::NeoX;
  auto kernel = jit::get<Rotary>({jit::dtype_of<T>(), s.head_dim, s.rotary_dim, style, source}, gpu());
  const std::int64_t max_position = jitk_test::kRotaryMaxPosition;
  auto positions = jitk_test::random_positions(s.tokens, max_position);
  // q and k as the kernel sees them (qs, ks: each head's untouched tail poisoned), then, for an
  // unaligned launch, behind one element of their own on the device
  auto qs = random_vector<T>(s.tokens * s.heads * s.head_dim), ks = random_vector<T>(s.tokens * s.kv_heads * s.head_dim);
  jitk_test::poison_tails(qs, s.head_dim, s.rotary_dim);
  jitk_test::poison_tails(ks, s.head_dim, s.rotary_dim);
  auto q = random_vector<T>(offset), k = random_vector<T>(offset);
  q.insert(q.end(), qs.begin(), qs.end());
  k.insert(k.end(), ks.begin(), ks.end());
  std::vector<double> cos_sin;
  if (table) cos_sin = jitk_test::rotary_table(max_position, s.rotary_dim, jitk_test::kRotaryTheta, [](double v) { return double(float(v)); });
  auto q_ref = widen(qs), k_ref = widen(ks);
  ref::rotary_embedding(q_ref, s.tokens, s.heads, s.head_dim, s.rotary_dim, neox, positions, jitk_test::kRotaryTheta, table ? &cos_sin : nullptr, max_position);
  ref::rotary_embedding(k_ref, s.tokens, s.kv_heads, s.head_dim, s.rotary_dim, neox, positions, jitk_test::kRotaryTheta, table ? &cos_sin : nullptr, max_position);
  jit::cuda::DeviceArray<T> dq(q), dk(k);
  jit::cuda::DeviceArray<std::int64_t> dpos(positions);
  jit::cuda::DeviceArray<float> dtable(table ? std::vector<float>(cos_sin.begin(), cos_sin.end()) : std::vector<float>(1));
  if (table)
    kernel(s.tokens, s.heads, s.kv_heads, dpos.data(), dq.data() + offset, dk.data() + offset, jitk_test::kRotaryTheta, dtable.data(), max_position);
  else
    kernel(s.tokens, s.heads, s.kv_heads, dpos.data(), dq.data() + offset, dk.data() + offset, jitk_test::kRotaryTheta);
  jit::cuda::synchronize();
  auto gq = dq.download(), gk = dk.download();
  INFO("head_dim " << s.head_dim << ", rotary_dim " << s.rotary_dim << ", " << (neox ? "neox" : "gptj") << ", "
                   << (table ? "table" : "theta") << (offset ? ", unaligned" : ""));
  const double tol = std::is_same_v<T, float> && !table ? 1e-4 : tolerance<T>();
  auto as_d = [](T v) { return as_double(v); };
  std::vector<T> gqs(gq.begin() + offset, gq.end()), gks(gk.begin() + offset, gk.end());
  CHECK(jitk_test::rotated_error(gqs, q_ref, s.head_dim, s.rotary_dim, as_d) <= tol);
  CHECK(jitk_test::rotated_error(gks, k_ref, s.head_dim, s.rotary_dim, as_d) <= tol);
  CHECK(jitk_test::tails_intact(gqs, qs, s.head_dim, s.rotary_dim));
  CHECK(jitk_test::tails_intact(gks, ks, s.head_dim, s.rotary_dim));
  if (offset) CHECK(std::memcmp(&gq[0], &q[0], sizeof(T)) == 0);  // the element before q is not touched
}

TEMPLATE_TEST_CASE("GPU rotary_embedding matches the reference: both styles and sources, full and partial rotary", "[gpu][rotary]", float,
                   jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  using Rotary = jitk_test::Rotary;
  for (const auto& shape : jitk_test::kRotaryShapes)
    for (auto style : {Rotary::Style::NeoX, Rotary::Style::GptJ})
      for (auto source : {Rotary::Source::Theta, Rotary::Source::Table}) {
        check_gpu_rotary<TestType>(shape, style, source, false);
        check_gpu_rotary<TestType>(shape, style, source, true);  // unaligned q and k: element by element
      }
  // many tokens: a grid of many blocks, threads in the last one past the end
  check_gpu_rotary<TestType>({4099, 32, 8, 128, 128}, Rotary::Style::NeoX, Rotary::Source::Theta, false);
  check_gpu_rotary<TestType>({4099, 32, 8, 128, 128}, Rotary::Style::GptJ, Rotary::Source::Table, false);
}

// rotary_embedding in place inside a fused QKV buffer on the device: [q | k | v] rows and `pad`
// elements more (v's columns and the padding poisoned, and they must stay so bit for bit). A pad
// that is not whole 16-byte packs sends every row down the element-by-element path.
template <class T> void check_gpu_rotary_fused(const jitk_test::RotaryShape& s, jitk_test::Rotary::Style style, jitk_test::Rotary::Source source,
                                               std::int64_t pad) {
  using Rotary = jitk_test::Rotary;
  const bool table = source == Rotary::Source::Table, neox = style == Rotary::Style::NeoX;
  auto kernel = jit::get<Rotary>({jit::dtype_of<T>(), s.head_dim, s.rotary_dim, style, source}, gpu());
  const std::int64_t max_position = jitk_test::kRotaryMaxPosition;
  const auto positions = jitk_test::random_positions(s.tokens, max_position);
  const std::int64_t qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim, stride = qw + 2 * kw + pad;
  auto q = random_vector<T>(s.tokens * qw), k = random_vector<T>(s.tokens * kw);
  jitk_test::poison_tails(q, s.head_dim, s.rotary_dim);
  jitk_test::poison_tails(k, s.head_dim, s.rotary_dim);
  const auto qkv = jitk_test::fused_rows<T>(s.tokens, stride, {{q, qw, 0}, {k, kw, qw}});
  std::vector<double> cos_sin;
  if (table) cos_sin = jitk_test::rotary_table(max_position, s.rotary_dim, jitk_test::kRotaryTheta, [](double v) { return double(float(v)); });
  auto q_ref = widen(q), k_ref = widen(k);
  ref::rotary_embedding(q_ref, s.tokens, s.heads, s.head_dim, s.rotary_dim, neox, positions, jitk_test::kRotaryTheta, table ? &cos_sin : nullptr, max_position);
  ref::rotary_embedding(k_ref, s.tokens, s.kv_heads, s.head_dim, s.rotary_dim, neox, positions, jitk_test::kRotaryTheta, table ? &cos_sin : nullptr, max_position);
  jit::cuda::DeviceArray<T> dqkv(qkv);
  jit::cuda::DeviceArray<std::int64_t> dpos(positions);
  jit::cuda::DeviceArray<float> dtable(table ? std::vector<float>(cos_sin.begin(), cos_sin.end()) : std::vector<float>(1));
  Rotary::Args a{s.tokens, s.heads, s.kv_heads, dpos.data(), dqkv.data(), dqkv.data() + qw, jitk_test::kRotaryTheta};
  if (table) a.cos_sin = dtable.data(), a.max_position = max_position;
  a.q_stride = a.k_stride = stride;
  kernel(a);
  const auto got = dqkv.download();
  INFO("head_dim " << s.head_dim << ", rotary_dim " << s.rotary_dim << ", " << (neox ? "neox" : "gptj") << ", " << (table ? "table" : "theta")
                   << ", stride " << stride);
  const double tol = std::is_same_v<T, float> && !table ? 1e-4 : tolerance<T>();
  auto as_d = [](T v) { return as_double(v); };
  const auto gq = jitk_test::gather_rows(got, s.tokens, qw, stride, 0), gk = jitk_test::gather_rows(got, s.tokens, kw, stride, qw);
  CHECK(jitk_test::rotated_error(gq, q_ref, s.head_dim, s.rotary_dim, as_d) <= tol);
  CHECK(jitk_test::rotated_error(gk, k_ref, s.head_dim, s.rotary_dim, as_d) <= tol);
  CHECK(jitk_test::tails_intact(gq, q, s.head_dim, s.rotary_dim));
  CHECK(jitk_test::tails_intact(gk, k, s.head_dim, s.rotary_dim));
  CHECK(jitk_test::changed_outside(got, qkv, stride, {{0, qw + kw}}) == 0);
}

TEMPLATE_TEST_CASE("GPU rotary_embedding rotates q and k in place inside a fused QKV buffer, touching nothing else", "[gpu][rotary]", float,
                   jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  using Rotary = jitk_test::Rotary;
  for (const auto& shape : jitk_test::kRotaryShapes)
    for (auto style : {Rotary::Style::NeoX, Rotary::Style::GptJ})
      for (auto source : {Rotary::Source::Theta, Rotary::Source::Table}) {
        check_gpu_rotary_fused<TestType>(shape, style, source, 0);  // whole packs: the 16-byte path
        check_gpu_rotary_fused<TestType>(shape, style, source, 3);  // rows off 16-byte alignment: element by element
      }
  // Llama-3-8B's row (32 + 2 x 8 heads of 128), many tokens
  check_gpu_rotary_fused<TestType>({4099, 32, 8, 128, 128}, Rotary::Style::NeoX, Rotary::Source::Theta, 0);
}

// kv_cache_append reading k and v in place from a fused QKV buffer on the device ([q | k | v] rows
// and `pad` more; q's columns and the padding poisoned, which must not reach the caches).
template <class T> void check_gpu_kv_append_fused(const jitk_test::KvShape& s, std::int64_t q_heads, std::int64_t pad) {
  auto kernel = jit::get<jitk_test::KvAppend>({jit::dtype_of<T>(), s.head_dim, s.page_size}, gpu());
  const auto slots = jitk_test::random_slots(s);
  const std::int64_t kw = s.kv_heads * s.head_dim, qw = q_heads * s.head_dim, stride = qw + 2 * kw + pad;
  const auto k = random_vector<T>(s.row_elements()), v = random_vector<T>(s.row_elements());
  const auto qkv = jitk_test::fused_rows<T>(s.tokens, stride, {{k, kw, qw}, {v, kw, qw + kw}});
  const auto cache = jitk_test::poisoned<T>(s.cache_elements());
  auto k_ref = cache, v_ref = cache;
  ref::kv_cache_append(k_ref, k, slots, s.kv_heads, s.head_dim, s.num_pages, s.page_size);
  ref::kv_cache_append(v_ref, v, slots, s.kv_heads, s.head_dim, s.num_pages, s.page_size);
  jit::cuda::DeviceArray<T> dqkv(qkv), dk_cache(cache), dv_cache(cache);
  jit::cuda::DeviceArray<std::int64_t> dslots(slots);
  jitk_test::KvAppend::Args a{s.tokens, s.kv_heads, s.num_pages, dqkv.data() + qw, dqkv.data() + qw + kw, dslots.data(), dk_cache.data(),
                              dv_cache.data()};
  a.k_stride = a.v_stride = stride;
  kernel(a);
  jit::cuda::synchronize();
  INFO("tokens " << s.tokens << ", kv_heads " << s.kv_heads << ", head_dim " << s.head_dim << ", page_size " << s.page_size << ", stride "
                 << stride);
  CHECK(jitk_test::bit_differences(dk_cache.download(), k_ref) == 0);
  CHECK(jitk_test::bit_differences(dv_cache.download(), v_ref) == 0);
}

// kv_cache_append: rows and poisoned caches on the device, the whole cache checked bit for bit
// against the reference; `offset` puts every buffer one element past 16-byte alignment (element by element).
template <class T> void check_gpu_kv_append(const jitk_test::KvShape& s, bool offset) {
  auto kernel = jit::get<jitk_test::KvAppend>({jit::dtype_of<T>(), s.head_dim, s.page_size}, gpu());
  const auto slots = jitk_test::random_slots(s);
  auto k = random_vector<T>(offset + s.row_elements()), v = random_vector<T>(offset + s.row_elements());
  const auto cache = jitk_test::poisoned<T>(offset + s.cache_elements());
  auto k_ref = cache, v_ref = cache;
  std::vector<T> k_ref_part(k_ref.begin() + offset, k_ref.end()), v_ref_part(v_ref.begin() + offset, v_ref.end());
  ref::kv_cache_append(k_ref_part, std::vector<T>(k.begin() + offset, k.end()), slots, s.kv_heads, s.head_dim, s.num_pages, s.page_size);
  ref::kv_cache_append(v_ref_part, std::vector<T>(v.begin() + offset, v.end()), slots, s.kv_heads, s.head_dim, s.num_pages, s.page_size);
  std::copy(k_ref_part.begin(), k_ref_part.end(), k_ref.begin() + offset);
  std::copy(v_ref_part.begin(), v_ref_part.end(), v_ref.begin() + offset);
  jit::cuda::DeviceArray<T> dk(k), dv(v), dk_cache(cache), dv_cache(cache);
  jit::cuda::DeviceArray<std::int64_t> dslots(slots);
  kernel(s.tokens, s.kv_heads, s.num_pages, dk.data() + offset, dv.data() + offset, dslots.data(), dk_cache.data() + offset,
         dv_cache.data() + offset);
  jit::cuda::synchronize();
  INFO("tokens " << s.tokens << ", kv_heads " << s.kv_heads << ", head_dim " << s.head_dim << ", page_size " << s.page_size
                 << ", num_pages " << s.num_pages << (offset ? ", unaligned" : ""));
  CHECK(jitk_test::bit_differences(dk_cache.download(), k_ref) == 0);  // the element before an unaligned cache too
  CHECK(jitk_test::bit_differences(dv_cache.download(), v_ref) == 0);
}

TEMPLATE_TEST_CASE("GPU kv_cache_append writes each token's rows at its slot and nothing else, bit for bit", "[gpu][kv_cache_append]",
                   float, jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  for (const auto& shape : jitk_test::kKvShapes) {
    check_gpu_kv_append<TestType>(shape, false);
    check_gpu_kv_append<TestType>(shape, true);  // unaligned buffers: element by element
  }
  // many tokens: a grid of many blocks, threads in the last one past the end
  check_gpu_kv_append<TestType>({4099, 8, 128, 16, 300}, false);
  // k and v in place in a fused QKV buffer: whole 16-byte packs a row (the packed path), and 3 more (element by element)
  for (const auto& shape : jitk_test::kKvShapes) {
    check_gpu_kv_append_fused<TestType>(shape, 5, 0);
    check_gpu_kv_append_fused<TestType>(shape, 2, 3);
  }
  check_gpu_kv_append_fused<TestType>({4099, 8, 128, 16, 300}, 32, 0);  // Llama-3-8B's row
}

// attention_decode: random q and caches on the device, pages shuffled over the pool, NaN-filled o
// and lse, checked against the float64 reference; with and without a workspace (split contexts).
// q_extra >= 0: q read in place from rows of heads x head_dim + q_extra elements (k's and v's
// columns of a fused QKV buffer and padding, all NaN: none may reach o).
template <class T> void check_gpu_decode(const jitk_test::DecodeShape& s, bool split, std::int64_t q_extra = -1, std::int64_t warps = 0) {
  using jitk_test::Decode;
  const Decode::Params params{jit::dtype_of<T>(), s.head_dim, s.page_size, s.group, s.q_len, warps};
  auto kernel = jit::get<Decode>(params, gpu());
  const auto tables = jitk_test::decode_tables(s);
  const auto q = random_vector<T>(s.q_elements(), -2, 2);
  const auto k = random_vector<T>(tables.cache_elements(s), -2, 2), v = random_vector<T>(tables.cache_elements(s), -2, 2);
  const double scale = 1 / std::sqrt(double(s.head_dim));
  const std::int64_t max_context = *std::max_element(s.contexts.begin(), s.contexts.end());
  const std::size_t ws_bytes = split ? Decode::workspace_bytes(params, s.batch(), s.kv_heads, max_context) : 0;
  const std::int64_t q_width = s.heads() * s.head_dim, q_stride = q_extra >= 0 ? q_width + q_extra : q_width;
  const auto q_rows = jitk_test::fused_rows<T>(s.batch() * s.q_len, q_stride, {{q, q_width, 0}});
  jit::cuda::DeviceArray<T> dq(q_rows), dk(k), dv(v), dout(static_cast<std::size_t>(s.q_elements()));
  jit::cuda::DeviceArray<float> dlse(static_cast<std::size_t>(s.batch() * s.q_len * s.heads()));
  jit::cuda::DeviceArray<std::int32_t> dtable(tables.block_table), dcontexts(s.contexts);
  jit::cuda::DeviceArray<unsigned char> workspace(std::max<std::size_t>(ws_bytes, 1));
  workspace.fill_bytes(0);
  dout.fill_bytes(kPoison);
  dlse.fill_bytes(kPoison);
  Decode::Args args{s.batch(), s.kv_heads, tables.num_pages, tables.max_pages, dq.data(), dk.data(), dv.data(),
                    dtable.data(), dcontexts.data(), dout.data(), dlse.data(), scale, max_context};
  if (q_extra >= 0) args.q_stride = q_stride;
  if (ws_bytes > 0) {
    args.workspace = workspace.data();
    args.workspace_size = ws_bytes;
  }
  const auto expected = ref::attention_decode(widen(q), widen(k), widen(v), tables.block_table, s.contexts, s.q_len, s.kv_heads,
                                              s.group, s.head_dim, s.page_size, tables.max_pages, scale);
  INFO("kv_heads " << s.kv_heads << ", group " << s.group << ", q_len " << s.q_len << ", head_dim " << s.head_dim << ", page_size "
                   << s.page_size << ", batch " << s.batch() << (ws_bytes ? ", split" : "") << ", q_stride " << q_stride << ", warps "
                   << warps);
  for (int round = 0; round < (ws_bytes ? 2 : 1); ++round) {  // a second launch over the same workspace: counters reset
    kernel(args);
    CHECK(error_of(dout, expected.o) <= tolerance<T>());
    const auto lse = dlse.download();
    double worst = 0;
    for (std::size_t i = 0; i < lse.size(); ++i)
      worst = std::max(worst, std::isinf(expected.lse[i]) ? (std::isinf(lse[i]) && lse[i] < 0 ? 0.0 : INFINITY)
                                                          : std::isnan(lse[i]) ? INFINITY : std::abs(lse[i] - expected.lse[i]));
    CHECK(worst <= 1e-3);
  }
}

TEMPLATE_TEST_CASE("GPU attention_decode matches the reference over odd contexts, shuffled pages, 1-8 new tokens, GQA and splits",
                   "[gpu][attention_decode]", float, jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  for (const auto& shape : jitk_test::decode_shapes()) {
    if ((shape.page_size & (shape.page_size - 1)) != 0) continue;  // the GPU takes pages of a power of two
    check_gpu_decode<TestType>(shape, false);
    check_gpu_decode<TestType>(shape, true);
  }
  // the bench's shape, smaller: 32 heads over 8, pages of 16, a context split over many blocks
  check_gpu_decode<TestType>({8, 4, 1, 128, 16, {8191, 300, 5000, 1}}, true);
  // q in place in a fused QKV buffer ([q | k | v] rows, and a 16-byte pack more): the decoder layer's way
  for (const auto& shape : jitk_test::decode_shapes()) {
    if ((shape.page_size & (shape.page_size - 1)) != 0) continue;
    const std::int64_t kv_columns = 2 * shape.kv_heads * shape.head_dim;
    check_gpu_decode<TestType>(shape, false, kv_columns);
    check_gpu_decode<TestType>(shape, true, kv_columns + 16 / static_cast<std::int64_t>(sizeof(TestType)));
  }
  check_gpu_decode<TestType>({8, 4, 1, 128, 16, {8191, 300, 5000, 1}}, true, 2 * 8 * 128);
}

// The block's size sets how many steps of K and V the text stages in shared memory and how many
// keys a thread takes a step (down to one step, each waiting for its own loads: f32, head_dim 256,
// 16 warps): every depth over odd contexts, pages of 16-64, 1-8 new tokens.
TEMPLATE_TEST_CASE("GPU attention_decode with 1 to 16 warps a block matches the reference", "[gpu][attention_decode]", float,
                   jit::bfloat16) {
  if (!have_gpu()) return;
  const std::vector<jitk_test::DecodeShape> shapes = {
      {2, 4, 1, 128, 16, {37, 1, 255, 5, 1000}}, {1, 1, 2, 256, 32, {999, 3, 0}}, {2, 8, 1, 64, 64, {300, 17, 64}},
      {1, 2, 4, 64, 16, {41, 8, 100}},           {1, 1, 3, 96, 16, {41, 3}}};
  for (const std::int64_t warps : {1, 2, 8, 16})
    for (const auto& shape : shapes) {
      check_gpu_decode<TestType>(shape, false, -1, warps);
      check_gpu_decode<TestType>(shape, true, -1, warps);
    }
}

// f16 and bf16 take the tensor cores where head_dim is a multiple of 16 (tiles of 8 keys a warp):
// pages smaller than a tile (1-4 keys: each key's page looked up) and of one tile (8; 16-64 above);
// head_dims of an odd number of 16-column steps (48, 80: the last step of q k and p v a half
// ldmatrix) and 256 (tensor cores at 1 and 2 warps, not at 4); 1-8 rows of 16; 1, 2, 4 and 8 warps.
TEMPLATE_TEST_CASE("GPU attention_decode in 16-bit types matches the reference over pages of 1 to 8 keys and head_dims of 16 to 256",
                   "[gpu][attention_decode]", jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  for (const std::int64_t page : {1, 4, 8})
    for (const auto& shape : std::vector<jitk_test::DecodeShape>{{2, 4, 1, 128, page, {37, 1, 255, 5, 1000}},
                                                                 {1, 2, 4, 48, page, {41, 8, 100}},
                                                                 {2, 8, 1, 80, page, {300, 17, 9}},
                                                                 {1, 1, 8, 16, page, {8, 130, 9}},
                                                                 {1, 3, 2, 256, page, {77, 2}}}) {
      check_gpu_decode<TestType>(shape, false);
      check_gpu_decode<TestType>(shape, true);
    }
  for (const std::int64_t warps : {1, 8}) check_gpu_decode<TestType>({2, 4, 1, 128, 4, {37, 1, 255, 5, 1000}}, true, -1, warps);
  for (const std::int64_t warps : {1, 2}) check_gpu_decode<TestType>({1, 3, 2, 256, 2, {77, 2, 300}}, true, -1, warps);
}

// The same masking in f16 and bf16 (the tensor-core text where head_dim is a multiple of 16), over
// pages smaller than its tile of 8 keys and larger: only the keys of page 1 are read.
TEMPLATE_TEST_CASE("GPU attention_decode in 16-bit types masks pages outside the pool and keys past the table", "[gpu][attention_decode]",
                   jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  using jitk_test::Decode;
  constexpr std::int64_t d = 16;
  for (const std::int64_t page : {4, 16}) {
    INFO("page_size " << page);
    auto kernel = jit::get<Decode>({jit::dtype_of<TestType>(), d, page, 1, 1}, gpu());
    std::vector<TestType> q(d, from_double<TestType>(1)), k(static_cast<std::size_t>(2 * page * d), from_double<TestType>(0));
    std::vector<TestType> v(k.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = from_double<TestType>(double(i / d));  // key j's value: j
    jit::cuda::DeviceArray<TestType> dq(q), dk(k), dv(v), dout(d);
    jit::cuda::DeviceArray<float> dlse(1);
    dout.fill_bytes(kPoison);
    jit::cuda::DeviceArray<std::int32_t> table(std::vector<std::int32_t>{1, 1000000, -5}), contexts(std::vector<std::int32_t>{1000});
    kernel(Decode::Args{1, 1, 2, 3, dq.data(), dk.data(), dv.data(), table.data(), contexts.data(), dout.data(), dlse.data(), 1.0});
    const auto out = widen(dout.download());
    for (std::int64_t i = 0; i < d; ++i) CHECK(out[static_cast<std::size_t>(i)] == Approx(double(page) + double(page - 1) / 2));
    CHECK(dlse.download()[0] == Approx(std::log(double(page))));
  }
}

TEST_CASE("GPU attention_decode masks pages outside the pool and keys past the table, reading nothing there", "[gpu][attention_decode]") {
  if (!have_gpu()) return;
  using jitk_test::Decode;
  auto kernel = jit::get<Decode>({jit::DType::f32, 8, 4, 1, 1}, gpu());
  std::vector<float> k(2 * 4 * 8, 0.0f), v(2 * 4 * 8);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i / 8);  // key j's value: j
  jit::cuda::DeviceArray<float> dq(std::vector<float>(8, 1.0f)), dk(k), dv(v), dout(8), dlse(1);
  dout.fill_bytes(kPoison);
  // page 1, then a page past the pool and a negative one; the context runs past the table's 12 keys
  jit::cuda::DeviceArray<std::int32_t> table(std::vector<std::int32_t>{1, 1000000, -5}), contexts(std::vector<std::int32_t>{100});
  kernel(Decode::Args{1, 1, 2, 3, dq.data(), dk.data(), dv.data(), table.data(), contexts.data(), dout.data(), dlse.data(), 1.0});
  const auto out = dout.download();
  CHECK(out[0] == Approx(5.5));  // keys 0..3 of page 1 (values 4..7, equal scores)
  CHECK(out[7] == Approx(5.5));
  CHECK(dlse.download()[0] == Approx(std::log(4.0)));
}

TEST_CASE("a GPU launch on the caller's stream runs there", "[gpu]") {
  if (!have_gpu()) return;
  auto k = jit::get<kernels::Softmax>({jit::DType::f32, 4096}, gpu());
  jit::cuda::OwnedStream stream;
  const std::int64_t rows = 64;
  auto x = random_vector<float>(rows * 4096);
  jit::cuda::DeviceArray<float> dx(x), dy(rows * 4096);
  dy.fill_bytes(kPoison);
  k(stream, rows, dx.data(), dy.data());
  stream.synchronize();
  CHECK(ref::relative_l2_error(dy.download(), ref::softmax(rows, 4096, x)) <= 1e-5);
}

TEST_CASE("a jitk launch works whatever CUDA context the caller made current, and leaves the caller's current", "[gpu]") {
  if (!have_gpu()) return;
  // the driver's own context calls, as another library (a framework with contexts of its own) makes them
  void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(cuda);
  using Ctx = void*;
  const auto create = reinterpret_cast<int (*)(Ctx*, unsigned, int)>(::dlsym(cuda, "cuCtxCreate_v2"));
  const auto destroy = reinterpret_cast<int (*)(Ctx)>(::dlsym(cuda, "cuCtxDestroy_v2"));
  const auto get_current = reinterpret_cast<int (*)(Ctx*)>(::dlsym(cuda, "cuCtxGetCurrent"));
  REQUIRE((create && destroy && get_current));
  auto k = jit::get<kernels::Saxpy>({jit::DType::f32}, gpu());
  const std::int64_t n = 1000;
  std::vector<float> x(n, 1.0f), y(n, 2.0f);
  jit::cuda::DeviceArray<float> dx(x), dy(y);
  k(n, 1.0, dx.data(), dy.data());  // jitk's context made current here (the thread had none, or its own)
  jit::cuda::synchronize();
  Ctx mine = nullptr;
  REQUIRE(create(&mine, 0, 0) == 0);  // a context of the caller's, made current by its creation
  // jitk's kernel runs in jitk's context (once, it was remembered as current and the launch failed
  // against the caller's), and the caller's is current again after it
  CHECK_NOTHROW(k(n, 1.0, dx.data(), dy.data()));
  Ctx now = nullptr;
  CHECK(get_current(&now) == 0);
  CHECK(now == mine);
  jit::cuda::synchronize();
  CHECK(get_current(&now) == 0);
  CHECK(now == mine);
  CHECK(dy.download() == std::vector<float>(n, 4.0f));
  CHECK(destroy(mine) == 0);
  ::dlclose(cuda);
}

TEST_CASE("jitk launches captured into a CUDA graph replay the same work, and read what the buffers hold at replay", "[gpu]") {
  if (!have_gpu()) return;
  auto saxpy = jit::get<kernels::Saxpy>({jit::DType::f32}, gpu());
  auto softmax = jit::get<kernels::Softmax>({jit::DType::f32, 1000}, gpu());
  jit::cuda::OwnedStream stream;
  const std::int64_t rows = 37, n = rows * 1000;
  auto x = random_vector<float>(static_cast<std::size_t>(n)), y0 = random_vector<float>(static_cast<std::size_t>(n));
  jit::cuda::DeviceArray<float> dx(x), dy(y0), dz(static_cast<std::size_t>(n));
  dz.fill_bytes(kPoison);
  auto step = [&] {
    saxpy(stream, n, 0.5, dx.data(), dy.data());  // y = 0.5 x + y
    softmax(stream, rows, dy.data(), dz.data());
  };
  auto graph = jit::cuda::Graph::capture(stream, step);
  stream.synchronize();
  CHECK(dy.download() == y0);  // capturing ran nothing
  std::vector<double> y(y0.begin(), y0.end());
  for (int replay = 0; replay < 3; ++replay) {
    graph.replay(stream);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = double(float(0.5f * x[i] + float(y[i])));
  }
  stream.synchronize();
  const auto got_y = dy.download();
  CHECK(ref::relative_l2_error(got_y, y) <= 1e-6);
  CHECK(ref::relative_l2_error(dz.download(), ref::softmax(rows, 1000, std::vector<float>(got_y.begin(), got_y.end()))) <= 1e-5);
  // a failed launch inside the capture ends it, throws, and leaves the stream usable
  CHECK_THROWS_AS(jit::cuda::Graph::capture(stream, [&] { saxpy(stream, -1, 0.5, dx.data(), dy.data()); }), jit::Error);
  step();
  stream.synchronize();
}

TEST_CASE("the decoder layer on the GPU (bf16) matches the float64 layer: prefill, decode, and a decode step replayed as a graph",
          "[gpu][layer]") {
  if (!have_gpu()) return;
  using jitk_example::LayerConfig;
  using B = jit::bfloat16;
  const LayerConfig c;  // hidden 256, 4 query heads on 2 kv heads of 64, MLP 512, pages of 16
  const std::int64_t batch = 3, seqlen = 37;
  const auto w = jitk_example::random_weights<B>(c, 7);
  jitk_example::DecoderLayer<B> layer(c, w, batch, seqlen + 2, true);
  jitk_example::ReferenceCache cache;
  auto inputs = [&](std::int64_t n) {
    return jitk_test::random_values<double>(static_cast<std::size_t>(n), -2, 2, [](double v) { return jitk_example::widen(jitk_example::narrow<B>(v)); });
  };
  auto widened = [](const std::vector<B>& v) {
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = jitk_example::widen(v[i]);
    return out;
  };
  const auto x = inputs(batch * seqlen * c.hidden);
  const auto expected = jitk_example::layer_reference(c, w, x, batch, seqlen, {0, 0, 0}, cache);
  CHECK(jitk_reference::relative_l2_error(widened(layer.prefill(jitk_example::narrowed<B>(x), seqlen)), expected) <= 2e-2);
  const auto xd = inputs(batch * c.hidden);
  const auto want = jitk_example::layer_reference(c, w, xd, batch, 1, {seqlen, seqlen, seqlen}, cache);
  CHECK(jitk_reference::relative_l2_error(widened(layer.decode(jitk_example::narrowed<B>(xd), std::vector<std::int32_t>(batch, seqlen))), want) <= 2e-2);
  // the same step as a graph: inputs put in place, the graph replayed, the same output
  auto& step = layer.prepare_decode(std::vector<std::int32_t>(batch, seqlen));
  step.x.upload(jitk_example::narrowed<B>(xd));
  jit::cuda::OwnedStream stream;
  auto graph = jit::cuda::Graph::capture(stream, [&] { layer.run(step, stream); });
  step.y.upload(std::vector<B>(step.y.host().size(), jit::to_bfloat16(std::nanf(""))));
  graph.replay(stream);
  stream.synchronize();
  CHECK(jitk_reference::relative_l2_error(widened(step.y.host()), want) <= 2e-2);
  // on Hopper the QKV gemm rotates q and k and writes the cache in its epilogue; the unfused kernels
  // (rotary_embedding, kv_cache_append) give the same layer
  const auto hopper = jit::implementations_for("gemm", jit::default_target(),
                                               jit::kernels::Gemm::to_params(jit::kernels::Gemm::Params{jit::DType::bf16}));
  CHECK(layer.fused_qkv() == (std::find(hopper.begin(), hopper.end(), "cuda-sm90a") != hopper.end()));
  {
    jitk_example::DecoderLayer<B> unfused_qkv(c, w, batch, seqlen + 2, true);
    unfused_qkv.use_fused_qkv(false);
    jitk_example::ReferenceCache again;
    CHECK(jitk_reference::relative_l2_error(widened(unfused_qkv.prefill(jitk_example::narrowed<B>(x), seqlen)),
                                            jitk_example::layer_reference(c, w, x, batch, seqlen, {0, 0, 0}, again)) <= 2e-2);
    const auto unfused_step = unfused_qkv.decode(jitk_example::narrowed<B>(xd), std::vector<std::int32_t>(batch, seqlen));
    CHECK(jitk_reference::relative_l2_error(widened(unfused_step), want) <= 2e-2);
  }
  if (layer.fused_qkv()) {  // decode takes the unfused kernels by default; fused for every step too
    CHECK(!layer.fused_qkv(batch));
    jitk_example::DecoderLayer<B> fused_qkv(c, w, batch, seqlen + 2, true);
    fused_qkv.use_fused_qkv(true);
    jitk_example::ReferenceCache again;
    CHECK(jitk_reference::relative_l2_error(widened(fused_qkv.prefill(jitk_example::narrowed<B>(x), seqlen)),
                                            jitk_example::layer_reference(c, w, x, batch, seqlen, {0, 0, 0}, again)) <= 2e-2);
    const auto fused_step = fused_qkv.decode(jitk_example::narrowed<B>(xd), std::vector<std::int32_t>(batch, seqlen));
    CHECK(jitk_reference::relative_l2_error(widened(fused_step), want) <= 2e-2);
  }
  // the MLP as one gated gemm (the default on a GPU in bf16) and unfused: both match
  CHECK(layer.fused_mlp());
  jitk_example::DecoderLayer<B> unfused(c, w, batch, seqlen + 2, true);
  unfused.use_unfused_mlp(true);
  jitk_example::ReferenceCache again;
  CHECK(jitk_reference::relative_l2_error(widened(unfused.prefill(jitk_example::narrowed<B>(x), seqlen)),
                                          jitk_example::layer_reference(c, w, x, batch, seqlen, {0, 0, 0}, again)) <= 2e-2);
}

TEST_CASE("the GPU is the default target when present, and jitk ls shows its arch", "[gpu]") {
  if (!have_gpu()) return;
  CHECK(jit::default_target().backend == jit::Backend::Cuda);
  auto k = jit::get<kernels::Saxpy>({jit::DType::f32});
  CHECK(k.backend() == jit::Backend::Cuda);
  auto r = jitk_test::run(std::string(JITK_TOOL) + " ls", "JITK_CACHE_DIR='" + cache_dir.str() + "'");
  CHECK_THAT(r.output, Catch::Matchers::Contains(jit::cuda::devices()[0].arch));
}

TEST_CASE("a GPU row longer than the kernels keep in registers is refused before compiling", "[gpu]") {
  if (!have_gpu()) return;
  CHECK_THROWS_WITH(jit::get<kernels::RmsNorm>({jit::DType::f32, 40000}, gpu()),
                    Catch::Matchers::Contains("hidden") && Catch::Matchers::Contains("40000"));
}

TEST_CASE("the PTX fallback (for a GPU newer than NVRTC) compiles, loads through the driver's JIT and runs", "[gpu]") {
  if (!have_gpu()) return;
  const auto arch = jit::cuda::devices()[0].arch;
  jit::detail::NvrtcCompiler ptx_compiler(arch, /*force_ptx=*/true);
  REQUIRE_FALSE(ptx_compiler.emits_cubin());
  const auto& def = jit::detail::find_kernel("saxpy");
  auto unit = jit::detail::specialize(def, {{"dtype", std::string("f32")}}, jit::Backend::Cuda);
  auto artifact = ptx_compiler.compile(unit);
  CHECK(std::string(artifact.bytes.begin(), artifact.bytes.end()).find(".target") != std::string::npos);
  const jit::Target target{jit::Backend::Cuda, "", 0};
  auto kernel = jit::detail::driver_for(target).load(artifact.bytes, unit, target, "ptx-test");
  const std::int64_t n = 4099;
  auto x = random_vector<float>(n), y = random_vector<float>(n);
  auto expected = ref::saxpy(0.75, widen(x), widen(y));
  jit::cuda::DeviceArray<float> dx(x), dy(y);
  jit::detail::ArgPack pack;
  jit::kernels::Saxpy::pack({jit::DType::f32}, {n, 0.75, dx.data(), dy.data()}, pack);
  kernel->launch(pack);
  CHECK(error_of(dy, expected) <= 1e-5);
}

// Every visible GPU gets the same specialization at once, one thread a device: the fleet's
// single flight in one process -- one compile an architecture, the others load it (a kernel is
// loaded once a device), and each device computes the right rows (its own SM count and context).
TEST_CASE("a kernel used on every GPU at once compiles once per architecture and runs on each device", "[gpu]") {
  if (!have_gpu()) return;
  const auto devices = jit::cuda::devices();
  if (devices.size() < 2) {
    std::printf("SKIPPED: %zu GPU visible; the multi-GPU case needs two or more\n", devices.size());
    return;
  }
  const std::int64_t hidden = 3079, rows = 37;  // a specialization no other case asks for: the first get compiles
  const std::size_t n = devices.size();
  std::vector<jit::Origin> origins(n, jit::Origin::DiskCache);
  std::vector<double> errors(n, INFINITY), gemm_errors(n, INFINITY);
  std::vector<std::string> failures(n);
  std::vector<std::thread> threads;
  for (std::size_t d = 0; d < n; ++d)
    threads.emplace_back([&, d] {
      try {
        const jit::Target target{jit::Backend::Cuda, "", static_cast<int>(d)};
        const int device = static_cast<int>(d);
        auto k = jit::get<kernels::RmsNorm>({jit::DType::bf16, hidden}, target);
        origins[d] = k.origin();
        auto x = random_vector<jit::bfloat16>(rows * hidden), w = random_vector<jit::bfloat16>(hidden, 0.5, 1.5);
        jit::cuda::DeviceArray<jit::bfloat16> dx(rows * hidden, device), dw(hidden, device), dy(rows * hidden, device);
        dx.upload(x), dw.upload(w);
        dy.fill_bytes(kPoison);
        k(rows, dx.data(), dw.data(), dy.data(), 1e-5);
        jit::cuda::synchronize(device);
        errors[d] = ref::relative_l2_error(widen(dy.download()), ref::rms_norm(rows, hidden, widen(x), widen(w), 1e-5));
        // a persistent gemm (Hopper's: A row-major, B column-major) sizes its grid by the device it runs on
        const std::int64_t m = 129, nn = 301, kk = 257;
        using L = kernels::Gemm::Layout;
        auto g = jit::get<kernels::Gemm>({jit::DType::bf16, L::RowMajor, L::ColMajor}, target);
        auto a = random_vector<jit::bfloat16>(m * kk), b = random_vector<jit::bfloat16>(kk * nn);
        jit::cuda::DeviceArray<jit::bfloat16> da(m * kk, device), db(kk * nn, device), dc(m * nn, device);
        da.upload(a), db.upload(b);
        dc.fill_bytes(kPoison);
        g(m, nn, kk, 1.0, da.data(), kk, db.data(), kk, 0.0, dc.data(), nn);  // B[p, j] at b[j * kk + p]
        jit::cuda::synchronize(device);
        std::vector<double> want(static_cast<std::size_t>(m * nn), 0.0);
        const auto wa = widen(a), wb = widen(b);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t p = 0; p < kk; ++p)
            for (std::int64_t j = 0; j < nn; ++j) want[i * nn + j] += wa[i * kk + p] * wb[j * kk + p];
        gemm_errors[d] = ref::relative_l2_error(widen(dc.download()), want);
      } catch (const std::exception& e) {
        failures[d] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  std::map<std::string, int> compiled;  // arch -> compiles of the rms_norm specialization
  for (std::size_t d = 0; d < n; ++d) {
    INFO("device " << d << " (" << devices[d].name << ", " << devices[d].arch << ")");
    CHECK(failures[d].empty());
    INFO(failures[d]);
    CHECK(errors[d] <= tolerance<jit::bfloat16>());
    CHECK(gemm_errors[d] <= tolerance<jit::bfloat16>());
    compiled[devices[d].arch] += origins[d] == jit::Origin::Compiled ? 1 : 0;
  }
  for (const auto& [arch, count] : compiled) {
    INFO(arch);
    CHECK(count == 1);
  }
}

TEST_CASE("a named CUDA arch is warmed with no device visible, and a get then loads it from disk", "[gpu]") {
  if (!have_gpu()) return;
  const auto arch = jit::cuda::devices()[0].arch;
  jitk_test::TempDir dir;
  jitk_test::write_file(dir.path() / "m.toml", "[[kernel]]\nname = \"rms_norm\"\ntarget = \"cuda:" + arch +
                                                   "\"\nparams = { dtype = \"bf16\", hidden = 2312 }\n");
  // CUDA_VISIBLE_DEVICES= hides every GPU from the tool: NVRTC alone compiles
  auto r = jitk_test::run(std::string(JITK_TOOL) + " warm " + (dir.path() / "m.toml").string(),
                          "CUDA_VISIBLE_DEVICES= JITK_CACHE_DIR='" + cache_dir.str() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Matchers::Contains("1 compiled"));
  auto k = jit::get<kernels::RmsNorm>({jit::DType::bf16, 2312}, gpu());
  CHECK(k.origin() == jit::Origin::DiskCache);
}

// attention_prefill: q, k and v on the device (optionally one element past 16-byte alignment: the
// element-by-element loads), o and lse poisoned, checked against the float64 reference.
// poison_last: every k element of the last sequence is +inf and every v element NaN, and only the
// sequences before it are checked: a tile that runs past a sequence's end reads the next one's
// rows, and nothing of them may reach the result (a P of 0 times a NaN is NaN).
template <class T>
void check_gpu_prefill(const jitk_test::AttnCase& c, std::int64_t tile_m = 0, std::int64_t tile_n = 0, std::int64_t offset = 0,
                       const std::string& impl = "", bool poison_last = false) {
  using Prefill = jitk_test::Prefill;
  jit::Selection only;
  only.implementation = impl;
  const auto in = jitk_test::attention_inputs(c, [](double x) { return as_double(from_double<T>(x)); });
  const double scale = 1.0 / std::sqrt(double(c.head_dim));
  const auto expected = jitk_test::attention_expected(c, in, scale);
  auto kernel = jit::get<Prefill>({jit::dtype_of<T>(), c.head_dim, c.causal, c.window, c.group, tile_m, tile_n}, gpu(), only);
  if (!impl.empty()) REQUIRE(kernel.implementation() == impl);
  const auto narrow = [&](const std::vector<double>& x) {
    std::vector<T> out(static_cast<std::size_t>(offset) + x.size(), from_double<T>(0.0));
    for (std::size_t i = 0; i < x.size(); ++i) out[offset + i] = from_double<T>(x[i]);
    return out;
  };
  auto hk = narrow(in.k), hv = narrow(in.v);
  if (poison_last)
    for (std::size_t i = static_cast<std::size_t>(offset + in.cu_k[in.cu_k.size() - 2] * in.kv_stride); i < hk.size(); ++i) {
      hk[i] = from_double<T>(std::numeric_limits<double>::infinity());
      hv[i] = from_double<T>(std::nan(""));
    }
  jit::cuda::DeviceArray<T> dq(narrow(in.q)), dk(hk), dv(hv);
  std::vector<T> poison(static_cast<std::size_t>(offset) + expected.o.size());
  std::memset(static_cast<void*>(poison.data()), kPoison, poison.size() * sizeof(T));
  jit::cuda::DeviceArray<T> dout(poison);
  std::vector<float> lse_poison(expected.lse.size(), std::nanf(""));
  jit::cuda::DeviceArray<float> dlse(lse_poison);
  jit::cuda::DeviceArray<std::int32_t> dcu_q(in.cu_q), dcu_k(in.cu_k);
  kernel.launch({static_cast<std::int64_t>(c.lens_q.size()), c.kv_heads, in.max_q, in.total_q, in.total_k, dq.data() + offset,
                 dk.data() + offset, dv.data() + offset, dout.data() + offset, dlse.data(), dcu_q.data(), dcu_k.data(), scale, in.q_stride,
                 in.kv_stride, in.kv_stride, in.cu_q.data(), in.cu_k.data()});
  jit::cuda::synchronize();
  const auto o = dout.download();
  const auto lse = dlse.download();
  // poison_last: the tokens before the last sequence's (o's rows first, lse's in each head's row)
  const std::int64_t tokens = poison_last ? in.cu_q[in.cu_q.size() - 2] : in.total_q;
  std::vector<double> got, want, got_lse, want_lse;
  for (std::int64_t i = 0; i < tokens * in.heads * c.head_dim; ++i) {
    got.push_back(as_double(o[offset + i]));
    want.push_back(expected.o[i]);
  }
  for (std::int64_t h = 0; h < in.heads; ++h)
    for (std::int64_t i = 0; i < tokens; ++i) {
      got_lse.push_back(lse[h * in.total_q + i]);
      want_lse.push_back(expected.lse[h * in.total_q + i]);
    }
  INFO(kernel.implementation() << ": " << c.label() << ", tile " << tile_m << "x" << tile_n << (offset ? ", unaligned" : "")
                               << (poison_last ? ", the last sequence's k and v poisoned" : ""));
  CHECK(ref::relative_l2_error(got, want) <= tolerance<T>());
  CHECK(jitk_test::lse_error(got_lse, want_lse) <= 1e-5);
}

TEMPLATE_TEST_CASE("GPU attention_prefill matches the reference in every implementation that suits the device: masks, groups, "
                   "strides, ragged batches, head sizes", "[gpu][attention]", jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  for (const auto& impl : jit::implementations_for("attention_prefill", gpu()))
    for (std::int64_t d : {64, 96, 128, 256}) {
      if (impl.rfind("cuda-sm90a", 0) == 0 && d == 96) continue;  // Hopper's texts take 64, 128 and 256 (96 runs the generic one)
      for (const auto& c : jitk_test::attention_cases(d)) check_gpu_prefill<TestType>(c, 0, 0, 0, impl);
    }
}

// Hopper's texts on this device: cuda-sm90a (cp.async) and cuda-sm90a-tma (the copy engine).
std::vector<std::string> hopper_texts() {
  std::vector<std::string> out;
  for (const auto& impl : jit::implementations_for("attention_prefill", gpu()))
    if (impl.rfind("cuda-sm90a", 0) == 0) out.push_back(impl);
  if (out.empty()) std::printf("SKIPPED: no Hopper GPU (cuda-sm90a)\n");
  return out;
}

TEMPLATE_TEST_CASE("GPU attention_prefill on Hopper with other tiles and unaligned buffers", "[gpu][attention][sm90a]", jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  const jitk_test::AttnCase causal_gqa{{300, 1, 517}, {300, 700, 517}, 2, 4, 128, true, 0, 0};
  const jitk_test::AttnCase windowed{{300, 1, 517}, {300, 700, 517}, 2, 2, 64, true, 100, 8};
  for (const auto& impl : hopper_texts()) {
    for (auto [tm, tn] : {std::pair{64, 64}, {128, 64}, {64, 128}}) check_gpu_prefill<TestType>(causal_gqa, tm, tn, 0, impl);
    for (auto [tm, tn] : {std::pair{192, 64}, {128, 192}, {64, 192}}) check_gpu_prefill<TestType>(windowed, tm, tn, 0, impl);
    check_gpu_prefill<TestType>(causal_gqa, 0, 0, 1, impl);  // every buffer one element off 16 bytes (the generic text runs it)
    check_gpu_prefill<TestType>({{6, 3}, {2, 0}, 1, 1, 64, true, 0, 0}, 0, 0, 0, impl);  // rows that see no key
    check_gpu_prefill<TestType>({{2000}, {2000}, 1, 1, 256, false, 0, 0}, 0, 0, 0, impl);  // many tiles, both stages reused
  }
}

// A sequence that ends inside a key tile, followed by one whose k is +inf and v NaN everywhere: the
// tile's rows past the end are the next sequence's (the copy engine loads whole boxes of the packed
// tensor), and the sequences before it must come out exact. Every implementation, every head size
// Hopper takes, causal and not, ragged query lengths, padded strides.
TEMPLATE_TEST_CASE("GPU attention_prefill never lets the next sequence's keys or values into a sequence that ends inside a tile",
                   "[gpu][attention][sm90a]", jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  for (const auto& impl : jit::implementations_for("attention_prefill", gpu()))
    for (std::int64_t d : {64, 128, 256}) {
      // the texts that copy row by row (zeros past the end) at one head size; the copy engine's at each
      if (d != 128 && impl != "cuda-sm90a-tma") continue;
      for (bool causal : {false, true}) {
        check_gpu_prefill<TestType>({{300, 77, 130}, {517, 77, 200}, 2, 2, d, causal, 0, 0}, 0, 0, 0, impl, true);
        check_gpu_prefill<TestType>({{5, 200}, {130, 300}, 1, 4, d, causal, 0, 8}, 0, 0, 0, impl, true);
      }
    }
}

// The copy engine's text on the shapes every implementation runs (every mask, groups 1, 3 and 4,
// padded strides, an empty sequence, rows that see no key) at heads 64 and 256 (128: the test of
// every implementation), head 256 by 80 keys (its default) and head 128 by 192 keys, which only it
// takes (240 registers a consumer).
TEMPLATE_TEST_CASE("GPU attention_prefill's copy-engine text (cuda-sm90a-tma) matches the reference on every mask and at its widest tiles",
                   "[gpu][attention][sm90a]", jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  const auto impls = hopper_texts();
  if (std::find(impls.begin(), impls.end(), "cuda-sm90a-tma") == impls.end()) return;
  for (std::int64_t d : {64, 256})
    for (const auto& c : jitk_test::attention_cases(d)) check_gpu_prefill<TestType>(c, 0, 0, 0, "cuda-sm90a-tma");
  check_gpu_prefill<TestType>({{700, 1, 517, 0, 260}, {700, 900, 517, 3, 1000}, 2, 4, 256, true, 0, 0}, 128, 80, 0, "cuda-sm90a-tma");
  check_gpu_prefill<TestType>({{650, 33, 517}, {650, 1200, 517}, 2, 1, 256, false, 0, 8}, 128, 80, 0, "cuda-sm90a-tma");
  for (bool causal : {false, true})
    check_gpu_prefill<TestType>({{700, 1, 517, 0, 260}, {700, 900, 517, 3, 1000}, 2, 4, 128, causal, 0, 0}, 128, 192, 0, "cuda-sm90a-tma");
}

// The Hopper text's pipeline over many key tiles (every stage reused several times, the consumers
// taking turns, each tile's Q K^T issued beside the previous one's P V) at each head size: ragged
// batches whose sequences end inside a tile, queries fewer than keys (bottom-right causal), GQA,
// a window, padded strides.
TEMPLATE_TEST_CASE("GPU attention_prefill's Hopper text walks many key tiles at every head size", "[gpu][attention][sm90a]", jit::half,
                   jit::bfloat16) {
  if (!have_gpu()) return;
  for (const auto& impl : hopper_texts()) {
    for (std::int64_t d : {64, 128, 256}) {
      check_gpu_prefill<TestType>({{700, 1, 517, 0, 260}, {700, 900, 517, 3, 1000}, 2, 4, d, true, 0, 0}, 0, 0, 0, impl);
      check_gpu_prefill<TestType>({{650, 33, 517}, {650, 1200, 517}, 2, 1, d, false, 0, 8}, 0, 0, 0, impl);
      check_gpu_prefill<TestType>({{600, 300}, {600, 900}, 1, 3, d, true, 200, 0}, 0, 0, 0, impl);
    }
    // key tiles of 80: five 16-key steps of P V, 80-row slabs
    for (std::int64_t d : {128, 256})
      check_gpu_prefill<TestType>({{700, 1, 517, 0, 260}, {700, 900, 517, 3, 1000}, 2, 4, d, true, 0, 0}, 128, 80, 0, impl);
  }
}

TEMPLATE_TEST_CASE("GPU attention_prefill's generic text with other tiles, long sequences and unaligned buffers", "[gpu][attention]", jit::half,
                   jit::bfloat16) {
  if (!have_gpu()) return;
  const jitk_test::AttnCase causal_gqa{{300, 1, 517}, {300, 700, 517}, 2, 4, 128, true, 0, 0};
  const jitk_test::AttnCase windowed{{300, 1, 517}, {300, 700, 517}, 2, 2, 64, true, 100, 8};
  for (auto [tm, tn] : {std::pair{16, 16}, {32, 128}, {64, 32}, {128, 32}, {48, 64}}) {
    check_gpu_prefill<TestType>(causal_gqa, tm, tn, 0, "cuda");
    check_gpu_prefill<TestType>(windowed, tm, tn, 0, "cuda");
  }
  check_gpu_prefill<TestType>(windowed, 192, 64, 0, "cuda");  // three slices a warp
  check_gpu_prefill<TestType>(causal_gqa, 0, 0, 1, "cuda");  // every buffer one element off 16 bytes
  check_gpu_prefill<TestType>({{33}, {33}, 1, 16, 128, true, 0, 0});  // multi-query: 16 heads on one kv head
  check_gpu_prefill<TestType>({{6, 3}, {2, 0}, 1, 1, 64, true, 0, 0}, 0, 0, 0, "cuda");  // rows that see no key: o = 0, lse = -inf
}

// Under a causal mask the generic text's blocks take the row tiles heaviest first, in sections of
// (sequence, kv head) pairs whose K and V fit 32 MB: 3 sequences of 6296 keys (2098 on average, at
// head 256: 2 MB a pair) on 3 kv heads are 9 pairs, a section of 8 and one of 1. Every row tile of
// every pair must still be walked once: ragged sequences (the short one's tiles past its end),
// queries fewer than keys (bottom-right causal), GQA, a window, one and four row tiles a pair, and
// every implementation (the Hopper texts keep one pair after another) on the same shapes.
TEMPLATE_TEST_CASE("GPU attention_prefill's causal blocks, heaviest first in sections with a partial last one, cover every row tile once",
                   "[gpu][attention]", jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  const jitk_test::AttnCase sections{{64, 64, 10}, {4096, 2100, 100}, 3, 1, 256, true, 0, 0};
  const jitk_test::AttnCase windowed{{64, 64, 10}, {4096, 2100, 100}, 3, 2, 256, true, 1000, 8};
  for (const auto& impl : jit::implementations_for("attention_prefill", gpu())) {
    check_gpu_prefill<TestType>(sections, 0, 0, 0, impl);
    check_gpu_prefill<TestType>(windowed, 0, 0, 0, impl);
    if (impl == "cuda") check_gpu_prefill<TestType>(sections, 16, 16, 0, impl);  // four row tiles a pair
  }
}

TEST_CASE("GPU attention_prefill writes NaN rows for a sequence longer than max_seqlen_q", "[gpu][attention]") {
  if (!have_gpu()) return;
  auto kernel = jit::get<jitk_test::Prefill>({jit::DType::bf16, 64, true, 0, 4, 16, 16}, gpu());
  // 1 kv head, 4 query heads: sequence 1 has 40 queries though max_seqlen_q says 8 (two row tiles
  // of 16 cover 8 tokens; the last block fills the other 32)
  const std::int64_t total = 45, row = 4 * 64;
  jit::cuda::DeviceArray<jit::bfloat16> q(std::vector<jit::bfloat16>(total * row, from_double<jit::bfloat16>(0.5)));
  jit::cuda::DeviceArray<jit::bfloat16> k(std::vector<jit::bfloat16>(total * 64, from_double<jit::bfloat16>(0.25)));
  jit::cuda::DeviceArray<jit::bfloat16> o(std::vector<jit::bfloat16>(total * row, from_double<jit::bfloat16>(-7)));
  jit::cuda::DeviceArray<std::int32_t> cu(std::vector<std::int32_t>{0, 5, 45});
  kernel.launch({2, 1, 8, total, total, q.data(), k.data(), k.data(), o.data(), jit::MutPtr{}, cu.data(), cu.data(), 0.125});
  const auto out = o.download();
  int nan = 0, right = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double x = as_double(out[i]);
    if (i < static_cast<std::size_t>(5 * row)) right += x == 0.25;
    else nan += std::isnan(x);
  }
  CHECK(right == 5 * row);
  CHECK(nan == 40 * row);
}

// Hopper's texts under a causal mask at their default tiles (192 x 128 at head 64 for the copy
// engine's) on a launch of many rows for few tokens: 2 sequences x 8 kv heads x 64 query heads a group
// (a float64 reference of seconds); 66 tokens are 33 row tiles of 128 at head 128 (an odd count) and
// 22 of 192 at head 64; ragged and bottom-right causal (queries fewer than keys), a window with
// padded strides.
TEST_CASE("GPU attention_prefill on Hopper, causal, default tiles: a group of 64 query heads, an odd row-tile count, bottom-right causal, a window",
          "[gpu][attention][sm90a]") {
  if (!have_gpu()) return;
  for (const auto& impl : hopper_texts()) {
    check_gpu_prefill<jit::bfloat16>({{40, 66}, {80, 66}, 8, 64, 128, true, 0, 0}, 0, 0, 0, impl);
    check_gpu_prefill<jit::bfloat16>({{40, 66}, {80, 66}, 8, 64, 64, true, 0, 0}, 0, 0, 0, impl);
    check_gpu_prefill<jit::bfloat16>({{66, 40}, {66, 80}, 8, 64, 128, true, 30, 8}, 0, 0, 0, impl);
  }
}

// The same on Hopper's texts at their default tiles under a causal mask (192 x 128 at head 64 for the
// copy engine's): max_seqlen_q = 300 covers 3 row tiles of 128 at head 128 and 2 of 192 at head 64;
// sequence 0 (5 tokens) has rows in tile 0 alone, sequence 1 (700 tokens) more than the grid covers:
// NaN in every row of o and lse, the last tile's block filling those past the grid.
TEST_CASE("GPU attention_prefill on Hopper, causal, default tiles: NaN rows for a sequence longer than max_seqlen_q", "[gpu][attention][sm90a]") {
  if (!have_gpu()) return;
  for (const auto& impl : hopper_texts())
    for (std::int64_t d : {64, 128}) {
      jit::Selection only;
      only.implementation = impl;
      auto kernel = jit::get<jitk_test::Prefill>({jit::DType::bf16, d, true, 0, 1, 0, 0}, gpu(), only);
      REQUIRE(kernel.implementation() == impl);
      const std::int64_t total = 705, heads = 4, row = heads * d;
      jit::cuda::DeviceArray<jit::bfloat16> q(std::vector<jit::bfloat16>(total * row, from_double<jit::bfloat16>(0.5)));
      jit::cuda::DeviceArray<jit::bfloat16> k(std::vector<jit::bfloat16>(total * row, from_double<jit::bfloat16>(0.25)));
      jit::cuda::DeviceArray<jit::bfloat16> o(std::vector<jit::bfloat16>(total * row, from_double<jit::bfloat16>(-7)));
      jit::cuda::DeviceArray<float> lse(std::vector<float>(heads * total, -7.0f));
      jit::cuda::DeviceArray<std::int32_t> cu(std::vector<std::int32_t>{0, 5, 705});
      kernel.launch({2, heads, 300, total, total, q.data(), k.data(), k.data(), o.data(), lse.data(), cu.data(), cu.data(), 0.125});
      jit::cuda::synchronize();
      const auto out = o.download();
      const auto lse_out = lse.download();
      int nan = 0, right = 0, nan_lse = 0, right_lse = 0;
      for (std::size_t i = 0; i < out.size(); ++i) {
        const double x = as_double(out[i]);
        if (i < static_cast<std::size_t>(5 * row)) right += x == 0.25;
        else nan += std::isnan(x);
      }
      // every key scores 0.5 x 0.25 x d x 0.125: token i's lse is that + ln(i + 1)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t i = 0; i < total; ++i) {
          const double x = lse_out[h * total + i];
          if (i < 5) right_lse += std::abs(x - (0.5 * 0.25 * double(d) * 0.125 + std::log(double(i + 1)))) < 1e-3;
          else nan_lse += std::isnan(x);
        }
      INFO(impl << ", head_dim " << d);
      CHECK(right == 5 * row);
      CHECK(nan == 700 * row);
      CHECK(right_lse == 5 * heads);
      CHECK(nan_lse == 700 * heads);
    }
}
