// The gated gemm (gate = silu, gelu, gelu_tanh: an MLP's gate/up projection with its activation in
// the epilogue) on the CPU against a float64 reference: every gate and layout, odd M and K, tiles
// that do and do not divide the shape, leading dimensions past the minimum, alpha/beta, beta = 0 over
// a poisoned C, an epilogue chain on C's elements, the same result as the unfused pair over the
// same layout, and what it refuses (before running, with C untouched). The GPU cases are in
// test_gpu_gemm.cpp; where the CUDA implementations take it is decided on the host (below).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "../examples/reference_kernels.hpp"
#include "gated_gemm_support.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "jit/tuning.hpp"
#include "runtime/get_kernel.hpp"
#include "test_support.hpp"

namespace kernels = jit::kernels;
namespace ref = jitk_reference;
using Catch::Matchers::Contains;
using Layout = kernels::Gemm::Layout;
using Gate = kernels::Gemm::Gate;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

template <class T> std::vector<T> random_vector(std::size_t n) {
  return jitk_test::random_values<T>(n, -1, 1, [](double v) { return static_cast<T>(v); });
}
template <class T> std::vector<double> doubles(const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); }
const char* name_of(Layout l) { return l == Layout::RowMajor ? "row" : "col"; }

struct Case {
  std::int64_t m, n, k, pad;
  double alpha, beta;
};

// One gated gemm on the CPU against the reference, over C's whole storage (its padding must stay);
// beta = 0: C's M x N / 2 poisoned with NaN, which must not be read. epilogue: "" or "add>mul_vec"
// (a tensor shaped like C with its ldc, a vector of N / 2).
template <class T> double gated_error(const kernels::Gemm::Params& p, const Case& c, const std::string& epilogue = "") {
  const std::int64_t lda = (p.a_layout == Layout::RowMajor ? c.k : c.m) + c.pad;
  const std::int64_t ldb = (p.b_layout == Layout::RowMajor ? c.n : c.k) + c.pad;
  const std::int64_t ldc = c.n / 2 + c.pad;
  const auto one = [](std::int64_t n) { return static_cast<std::size_t>(std::max<std::int64_t>(1, n)); };
  const auto a = random_vector<T>(one((p.a_layout == Layout::RowMajor ? c.m : c.k) * lda));
  const auto b = random_vector<T>(one((p.b_layout == Layout::RowMajor ? c.k : c.n) * ldb));
  const auto add = random_vector<T>(one(c.m * ldc)), scale = random_vector<T>(one(c.n / 2));
  auto cv = random_vector<T>(one(c.m * ldc));
  const std::vector<double> old = doubles(cv);
  if (c.beta == 0)
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n / 2; ++j) cv[static_cast<std::size_t>(i * ldc + j)] = std::numeric_limits<T>::quiet_NaN();
  const jitk_test::GatedProblem s{c.m, c.n, c.k, lda, ldb, ldc, c.alpha, c.beta};
  auto expected = jitk_test::gated_gemm_reference(p.gate, p.a_layout, p.b_layout, s, doubles(a), doubles(b), old,
                                                  [](double v) { return static_cast<double>(static_cast<T>(v)); });
  kernels::Gemm::Params q = p;
  jit::Operands ops;
  if (!epilogue.empty()) {
    q.epilogue = jit::Chain::parse(epilogue);
    ops = {add.data(), scale.data()};
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n / 2; ++j) {
        const auto o = static_cast<std::size_t>(i * ldc + j);
        expected[o] = (static_cast<double>(static_cast<T>(expected[o])) + double(add[o])) * double(scale[static_cast<std::size_t>(j)]);
      }
  }
  auto k = jit::get<kernels::Gemm>(q, jit::Target::cpu());
  k(c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, cv.data(), ldc, ops);
  for (T v : cv)
    if (std::isnan(static_cast<double>(v))) return INFINITY;
  return ref::relative_l2_error(cv, expected);
}

kernels::Gemm::Params gated(jit::DType t, Gate g, Layout a = Layout::RowMajor, Layout b = Layout::RowMajor) {
  kernels::Gemm::Params p{t, a, b};
  p.gate = g;
  return p;
}

}  // namespace

TEMPLATE_TEST_CASE("a gated gemm matches the float64 reference: every gate, layout, tile and odd shape", "[kernels][gemm][gate]", float,
                   double) {
  const jit::DType t = jit::dtype_of<TestType>();
  const double tol = sizeof(TestType) == 8 ? 1e-12 : 2e-5;
  // n: B's columns, a multiple of 16 (C has n / 2); odd m and k; tiles that divide n or leave an edge tile
  const Case cases[] = {{1, 16, 1, 0, 1, 0}, {7, 48, 5, 3, 1, 0}, {33, 80, 129, 1, 0.5, -1.5}, {100, 336, 31, 8, 1, 0.25},
                        {17, 512, 64, 0, -2, 0}};
  const std::int64_t tiles[][3] = {{0, 0, 0}, {3, 16, 7}, {1, 32, 1}, {5, 48, 13}, {16, 256, 64}};
  for (Gate g : {Gate::Silu, Gate::Gelu, Gate::GeluTanh})
    for (Layout la : {Layout::RowMajor, Layout::ColMajor})
      for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
        for (const auto& tile : tiles) {
          auto p = gated(t, g, la, lb);
          p.tile_m = tile[0], p.tile_n = tile[1], p.tile_k = tile[2];
          for (const Case& c : cases) {
            INFO("gate " << kernels::Gemm::gate_name(g) << " A " << name_of(la) << " B " << name_of(lb) << " tile " << tile[0] << "x"
                         << tile[1] << "x" << tile[2] << " m n k " << c.m << " " << c.n << " " << c.k << " pad " << c.pad << " alpha "
                         << c.alpha << " beta " << c.beta);
            CHECK(gated_error<TestType>(p, c) <= tol);
          }
        }
}

TEST_CASE("a gated gemm runs its epilogue chain on C's elements (C's shape and ldc, N / 2 columns)", "[kernels][gemm][gate][chains]") {
  for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
    for (const Case& c : {Case{9, 64, 20, 5, 1, 0}, Case{70, 160, 33, 0, 0.5, 1}}) {
      INFO("B " << name_of(lb) << " m " << c.m << " n " << c.n << " beta " << c.beta);
      CHECK(gated_error<float>(gated(jit::DType::f32, Gate::Silu, Layout::RowMajor, lb), c, "add>mul_vec") <= 2e-5);
      CHECK(gated_error<double>(gated(jit::DType::f64, Gate::Gelu, Layout::RowMajor, lb), c, "add>mul_vec") <= 1e-12);
    }
}

TEST_CASE("a gated gemm gives what the unfused pair gives on the same layout: gemm, then silu_and_mul over rows of 16",
          "[kernels][gemm][gate]") {
  const std::int64_t m = 37, n = 320, k = 50;
  const auto a = random_vector<float>(m * k), b = random_vector<float>(k * n);
  std::vector<float> fused(static_cast<std::size_t>(m * n / 2), NAN), gu(static_cast<std::size_t>(m * n), NAN), unfused(fused.size(), NAN);
  jit::get<kernels::Gemm>(gated(jit::DType::f32, Gate::Silu), jit::Target::cpu())(m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, fused.data(),
                                                                                  n / 2);
  jit::get<kernels::Gemm>({jit::DType::f32}, jit::Target::cpu())(m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, gu.data(), n);
  // each row of gu is n / 16 rows of silu_and_mul's x with hidden 8: [8 gate | 8 up]
  jit::get<kernels::SiluAndMul>({jit::DType::f32, 8}, jit::Target::cpu())(m * n / 16, gu.data(), unfused.data());
  CHECK(ref::relative_l2_error(fused, std::vector<double>(unfused.begin(), unfused.end())) <= 1e-6);
  // and both are the float64 silu_and_mul of the product in the plain layout (gate | up)
  std::vector<double> product(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t kk = 0; kk < k; ++kk)
      for (std::int64_t j = 0; j < n; ++j) product[i * n + j] += double(a[i * k + kk]) * double(b[kk * n + j]);
  const auto plain = ref::deinterleave_gate_up(product, m, n / 2);
  CHECK(ref::relative_l2_error(fused, ref::silu_and_mul(m, n / 2, plain)) <= 2e-5);
}

TEST_CASE("a gated gemm refuses what its layout cannot hold, before running and leaving C as it was", "[kernels][gemm][gate]") {
  std::vector<float> a(4096, 1.0f), b(4096, 1.0f), c(4096, 42.0f);
  auto k = jit::get<kernels::Gemm>(gated(jit::DType::f32, Gate::Silu), jit::Target::cpu());
  // n odd, even but not a multiple of 16, or 8: no whole group of 8 gate and 8 up columns
  for (std::int64_t n : {15, 24, 8, 17, 40}) {
    INFO("n " << n);
    CHECK_THROWS_WITH(k(4, n, 4, 1.0, a.data(), 4, b.data(), n, 0.0, c.data(), n), Contains("n = " + std::to_string(n)) &&
                                                                                        Contains("multiple of 16"));
  }
  // C has n / 2 columns: ldc >= n / 2 (n / 2 itself is fine, less is not)
  CHECK_THROWS_WITH(k(4, 32, 4, 1.0, a.data(), 4, b.data(), 32, 0.0, c.data(), 15), Contains("ldc = 15 is less than n / 2"));
  CHECK_THROWS_WITH(k(4, 32, 4, 1.0, a.data(), 4, b.data(), 16, 0.0, c.data(), 16), Contains("ldb = 16 is less than n"));
  CHECK_THROWS_WITH(k(4, 32, 4, 1.0, a.data(), 4, b.data(), 32, 0.0, static_cast<float*>(nullptr), 16), Contains("'c' is null"));
  for (float v : c) REQUIRE(v == 42.0f);
  // C of exactly n / 2 columns, written, and nothing past it
  k(4, 32, 4, 1.0, a.data(), 4, b.data(), 32, 0.0, c.data(), 16);
  CHECK(c[63] == Approx(4 / (1 + std::exp(-4.0)) * 4).epsilon(1e-5));
  CHECK(c[64] == 42.0f);
  // m or n = 0: nothing read or written
  k(0, 32, 4, 1.0, static_cast<const float*>(nullptr), 4, static_cast<const float*>(nullptr), 32, 0.0, static_cast<float*>(nullptr), 16);
  k(4, 0, 4, 1.0, static_cast<const float*>(nullptr), 4, static_cast<const float*>(nullptr), 1, 0.0, static_cast<float*>(nullptr), 1);
  // a tile that would split a group: refused by name before compiling
  auto p = gated(jit::DType::f32, Gate::Silu);
  p.tile_n = 24;
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>(p, jit::Target::cpu()), Contains("gate = silu: tile_n = 24 must be a multiple of 16"));
  // a gate the kernel does not have: the choices named
  jit::ParamSet bad = kernels::Gemm::to_params(gated(jit::DType::f32, Gate::Silu));
  bad.set("gate", std::string("relu"));
  CHECK_THROWS_WITH(jit::detail::get_kernel("gemm", bad, jit::Target::cpu()), Contains("'gate' = 'relu'") && Contains("silu"));
}

TEST_CASE("a gated gemm's gate is in its key, and gemms without one keep gate = none", "[kernels][gemm][gate]") {
  const auto plain = jit::get<kernels::Gemm>({jit::DType::f32}, jit::Target::cpu());
  const auto silu = jit::get<kernels::Gemm>(gated(jit::DType::f32, Gate::Silu), jit::Target::cpu());
  const auto gelu = jit::get<kernels::Gemm>(gated(jit::DType::f32, Gate::Gelu), jit::Target::cpu());
  CHECK(plain.cache_key() != silu.cache_key());
  CHECK(silu.cache_key() != gelu.cache_key());
  // a params set without gate means none (the same key)
  jit::ParamSet without = kernels::Gemm::to_params({jit::DType::f32});
  jit::ParamSet kept;
  for (const auto& [name, value] : without.values())
    if (name != "gate") kept.set(name, value);
  CHECK(jit::detail::get_kernel("gemm", kept, jit::Target::cpu()).key == jit::detail::get_kernel("gemm", without, jit::Target::cpu()).key);
  CHECK(kernels::Gemm::from_params(kernels::Gemm::to_params(gated(jit::DType::f32, Gate::GeluTanh))).gate == Gate::GeluTanh);
}

TEST_CASE("gemm's texts take the gate's mapping from jitk_gate.h, which no other kernel's unit holds (their keys do not change with it)",
          "[kernels][gemm][gate]") {
  const auto has_gate_header = [](const jit::detail::Specialization& s) {
    for (const auto& h : s.unit.headers)
      if (h.name == "jitk_gate.h") return h.text.find("JITK_GATE_ACTIVATION") != std::string::npos;
    return false;
  };
  CHECK(has_gate_header(jit::detail::resolve("gemm", kernels::Gemm::to_params(gated(jit::DType::f32, Gate::Gelu)), jit::Target::cpu())));
  CHECK(has_gate_header(jit::detail::resolve("gemm", kernels::Gemm::to_params({jit::DType::f64}), jit::Target::cpu())));
  CHECK_FALSE(has_gate_header(jit::detail::resolve("rms_norm", kernels::RmsNorm::to_params({jit::DType::f32, 64}), jit::Target::cpu())));
}

TEST_CASE("the gated gemm on CUDA: cuda-sm90a and the generic text's 16-bit tiles take it, f32 is refused by name", "[kernels][gemm][gate]") {
  // decided on the host, no GPU needed
  const jit::Target hopper = jit::Target::parse("cuda:sm_90"), ampere = jit::Target::parse("cuda:sm_80");
  const jit::ParamSet bf16 = kernels::Gemm::to_params(gated(jit::DType::bf16, Gate::Silu, Layout::RowMajor, Layout::RowMajor));
  CHECK(jit::choose("gemm", bf16, hopper).implementation == "cuda-sm90a");
  CHECK(jit::choose("gemm", bf16, ampere).implementation == "cuda");
  const jit::ParamSet f32 = kernels::Gemm::to_params(gated(jit::DType::f32, Gate::Silu));
  CHECK(jit::implementations_for("gemm", hopper, f32).empty());
  CHECK_THROWS_WITH(jit::choose("gemm", f32, ampere), Contains("gate = silu: f16 and bf16 only on CUDA"));
  // the generic text's tiles hold whole groups: tile_n 16 and 32 are fine, 48 too (a multiple of 16)
  const auto& def = jit::detail::find_kernel("gemm");
  const jit::Implementation* generic = nullptr;
  for (const auto& i : def.implementations)
    if (i.name == "cuda") generic = &i;
  REQUIRE(generic != nullptr);
  for (std::int64_t tn : {16, 32, 64, 128}) {
    auto p = gated(jit::DType::bf16, Gate::Silu);
    p.tile_m = 64, p.tile_n = tn, p.tile_k = 32, p.stages = 3;
    INFO("tile_n " << tn);
    CHECK(jit::detail::params_problem(*generic, kernels::Gemm::to_params(p)).empty());
  }
}

TEST_CASE("a gated gemm tunes its tiles for a shape it can run, and refuses one it cannot before timing anything",
          "[kernels][gemm][gate][tuning]") {
  const auto p = gated(jit::DType::f32, Gate::Silu);
  CHECK_THROWS_WITH(jit::get_tuned<kernels::Gemm>(p, {64, 40, 32}, jit::Target::cpu()),
                    Contains("n = 40") && Contains("multiple of 16"));
  auto tuned = jit::get_tuned<kernels::Gemm>(p, {33, 96, 20}, jit::Target::cpu());
  CHECK(tuned.params().gate == Gate::Silu);
  CHECK(tuned.params().tile_n % 16 == 0);
  const auto a = random_vector<float>(33 * 20), b = random_vector<float>(20 * 96);
  std::vector<float> got(33 * 48, NAN), want(33 * 48, NAN);
  tuned(33, 96, 20, 1.0, a.data(), 20, b.data(), 96, 0.0, got.data(), 48);
  jit::get<kernels::Gemm>(p, jit::Target::cpu())(33, 96, 20, 1.0, a.data(), 20, b.data(), 96, 0.0, want.data(), 48);
  CHECK(ref::relative_l2_error(got, std::vector<double>(want.begin(), want.end())) <= 1e-5);
}
