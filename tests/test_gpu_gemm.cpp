// gemm on the GPU against a float64 CPU reference: every implementation that suits the device
// (the generic WMMA/SIMT text, Hopper's wgmma + TMA text), every layout it takes, odd sizes,
// leading dimensions past the minimum (aligned and not), alpha/beta, beta = 0 over poisoned C,
// an epilogue chain, tuning. Without a usable CUDA GPU each test prints "SKIPPED: <reason>".
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>

#include "../examples/reference_kernels.hpp"
#include "block_sparse_support.hpp"
#include "jit/cache.hpp"
#include "jit/cuda.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "jit/tuning.hpp"
#include "gated_gemm_support.hpp"
#include "gpu_support.hpp"
#include "qkv_gemm_support.hpp"
#include "support/logging.hpp"
#include "test_support.hpp"
#include <spdlog/sinks/ostream_sink.h>
#include <sstream>

namespace kernels = jit::kernels;
namespace ref = jitk_reference;
using Layout = kernels::Gemm::Layout;
using Catch::Matchers::Contains;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

using jitk_test::as_double;
using jitk_test::from_double;
using jitk_test::gpu;
using jitk_test::have_gpu;
using jitk_test::tolerance;

std::size_t at(Layout l, std::int64_t i, std::int64_t j, std::int64_t ld) {
  return static_cast<std::size_t>(l == Layout::RowMajor ? i * ld + j : j * ld + i);
}

struct Case {
  std::int64_t m, n, k;
  std::int64_t pad;  // added to each leading dimension
  double alpha, beta;
};

// Runs one gemm with implementation `impl` and compares all of C's storage (padding included: it
// must stay as it was) with the float64 reference on the same rounded inputs. epilogue
// "add_vec>gelu" (a bias vector) or "add" (a residual shaped like C, rows ldc apart, starting
// `offset` elements into its buffer: 1 leaves it 2-byte aligned only). c_pad >= 0: C's rows padded
// by c_pad alone, A's and B's rounded up to 8 elements (16 bytes, so that the copy engine takes
// them whatever C's are) plus c.pad.
template <class T>
double gemm_error(const kernels::Gemm::Params& p, const std::string& impl, const Case& c, const std::string& epilogue = "",
                  std::int64_t offset = 0, std::int64_t c_pad = -1) {
  const auto round8 = [&](std::int64_t v) { return c_pad >= 0 ? (v + 7) / 8 * 8 : v; };
  const std::int64_t lda = round8(p.a_layout == Layout::RowMajor ? c.k : c.m) + c.pad;
  const std::int64_t ldb = round8(p.b_layout == Layout::RowMajor ? c.n : c.k) + c.pad;
  const std::int64_t ldc = c.n + (c_pad >= 0 ? c_pad : c.pad);
  const auto rows_a = p.a_layout == Layout::RowMajor ? c.m : c.k, rows_b = p.b_layout == Layout::RowMajor ? c.k : c.n;
  auto make = [](std::int64_t n) {
    return jitk_test::random_values<T>(static_cast<std::size_t>(std::max<std::int64_t>(1, n)), -1, 1, [](double v) { return from_double<T>(v); });
  };
  const auto a = make(rows_a * lda), b = make(rows_b * ldb), bias = make(c.n), residual = make(c.m * ldc + offset);
  auto cv = make(c.m * ldc);
  std::vector<double> expected(cv.size());
  for (std::size_t i = 0; i < cv.size(); ++i) expected[i] = as_double(cv[i]);
  for (std::int64_t i = 0; i < c.m; ++i)
    for (std::int64_t j = 0; j < c.n; ++j) {
      double sum = 0;
      for (std::int64_t k = 0; k < c.k; ++k) sum += as_double(a[at(p.a_layout, i, k, lda)]) * as_double(b[at(p.b_layout, k, j, ldb)]);
      double v = c.alpha * sum + (c.beta == 0 ? 0 : c.beta * as_double(cv[static_cast<std::size_t>(i * ldc + j)]));
      // the epilogue steps in float64 on the value as stored in T (fused == unfused)
      if (epilogue == "add_vec>gelu") {
        const double g = as_double(from_double<T>(v)) + as_double(bias[static_cast<std::size_t>(j)]);
        v = 0.5 * g * std::erfc(-g / std::sqrt(2.0));
      } else if (epilogue == "add") {
        v = as_double(from_double<T>(v)) + as_double(residual[static_cast<std::size_t>(offset + i * ldc + j)]);
      } else {
        REQUIRE(epilogue.empty());
      }
      expected[static_cast<std::size_t>(i * ldc + j)] = v;
    }
  jit::cuda::DeviceArray<T> da(a), db(b), dbias(bias), dresidual(residual), dc(cv);
  if (c.beta == 0) {  // beta = 0 must not read C: poison its tile (NaN), keep the padding as it was
    std::vector<T> poisoned = cv;
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) poisoned[static_cast<std::size_t>(i * ldc + j)] = from_double<T>(NAN);
    dc.upload(poisoned);
  }
  kernels::Gemm::Params q = p;
  jit::Operands ops;
  if (!epilogue.empty()) {
    q.epilogue = jit::Chain::parse(epilogue);
    if (epilogue == "add") ops.add(jit::ConstPtr(dresidual.data() + offset, jit::dtype_of<T>()));
    else ops.add(jit::ConstPtr(dbias.data(), jit::dtype_of<T>()));
  }
  jit::Selection s;
  s.implementation = impl;
  auto k = jit::get<kernels::Gemm>(q, gpu(), s);
  REQUIRE(k.implementation() == impl);
  k(c.m, c.n, c.k, c.alpha, da.data(), lda, db.data(), ldb, c.beta, dc.data(), ldc, ops);
  jit::cuda::synchronize();
  std::vector<double> got;
  for (const T& v : dc.download()) got.push_back(as_double(v));
  for (double v : got)
    if (std::isnan(v)) return INFINITY;
  return ref::relative_l2_error(got, expected);
}

// A gated gemm (p.gate set; n B's columns, C n / 2 wide with c.pad past it) with implementation
// `impl` (empty: jit::get's choice) against the float64 reference over C's whole storage (its
// padding must stay); beta = 0 over C poisoned with NaN. epilogue "add": a tensor shaped like C.
template <class T>
double gated_error(const kernels::Gemm::Params& p, const std::string& impl, const Case& c, bool add = false) {
  const std::int64_t lda = (p.a_layout == Layout::RowMajor ? c.k : c.m) + c.pad;
  const std::int64_t ldb = (p.b_layout == Layout::RowMajor ? c.n : c.k) + c.pad;
  const std::int64_t ldc = c.n / 2 + c.pad;
  auto make = [](std::int64_t n) {
    return jitk_test::random_values<T>(static_cast<std::size_t>(std::max<std::int64_t>(1, n)), -1, 1, [](double v) { return from_double<T>(v); });
  };
  const auto a = make((p.a_layout == Layout::RowMajor ? c.m : c.k) * lda), b = make((p.b_layout == Layout::RowMajor ? c.k : c.n) * ldb);
  const auto extra = make(c.m * ldc);
  auto cv = make(c.m * ldc);
  auto doubles = [](const std::vector<T>& v) {
    std::vector<double> out;
    for (const T& x : v) out.push_back(as_double(x));
    return out;
  };
  const jitk_test::GatedProblem s{c.m, c.n, c.k, lda, ldb, ldc, c.alpha, c.beta};
  auto expected = jitk_test::gated_gemm_reference(p.gate, p.a_layout, p.b_layout, s, doubles(a), doubles(b), doubles(cv),
                                                  [](double v) { return as_double(from_double<T>(v)); });
  if (add)  // the chain on the value as stored in T (fused == unfused)
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n / 2; ++j) {
        const auto o = static_cast<std::size_t>(i * ldc + j);
        expected[o] = as_double(from_double<T>(expected[o])) + as_double(extra[o]);
      }
  if (c.beta == 0)
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n / 2; ++j) cv[static_cast<std::size_t>(i * ldc + j)] = from_double<T>(NAN);
  jit::cuda::DeviceArray<T> da(a), db(b), dextra(extra), dc(cv);
  kernels::Gemm::Params q = p;
  jit::Operands ops;
  if (add) {
    q.epilogue = "add";
    ops.add(jit::ConstPtr(dextra.data(), jit::dtype_of<T>()));
  }
  jit::Selection sel;
  sel.implementation = impl;
  auto k = jit::get<kernels::Gemm>(q, gpu(), sel);
  if (!impl.empty()) REQUIRE(k.implementation() == impl);
  k(c.m, c.n, c.k, c.alpha, da.data(), lda, db.data(), ldb, c.beta, dc.data(), ldc, ops);
  jit::cuda::synchronize();
  std::vector<double> got;
  for (const T& v : dc.download()) got.push_back(as_double(v));
  // relative L2, against C's norm floored at an RMS of 1e-2: act(g) * u is about g u / 2, and a
  // launch of one row and one k (every output a0^2 b b' / 2) can be all under f16's normal range,
  // where its subnormals' absolute steps (6e-8) are large relative errors (H100: 2.2e-3 for m = k = 1)
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num += (got[i] - expected[i]) * (got[i] - expected[i]);
    den += expected[i] * expected[i];
  }
  return std::sqrt(num / std::max(den, 1e-4 * static_cast<double>(got.size())));
}

kernels::Gemm::Params params(jit::DType t, Layout a, Layout b) {
  kernels::Gemm::Params p;
  p.dtype = t;
  p.a_layout = a;
  p.b_layout = b;
  return p;
}

// Whether cuda-sm90a takes bf16 gemm here (a Hopper GPU); prints the SKIPPED line when not.
bool have_hopper() {
  const auto impls = jit::implementations_for("gemm", gpu(), kernels::Gemm::to_params(params(jit::DType::bf16, Layout::RowMajor, Layout::ColMajor)));
  if (std::find(impls.begin(), impls.end(), "cuda-sm90a") != impls.end()) return true;
  std::printf("SKIPPED: not a Hopper GPU (no cuda-sm90a)\n");
  return false;
}

}  // namespace

TEMPLATE_TEST_CASE("GPU gemm matches the reference in every implementation, layout and odd size", "[gpu][gemm]", float, jit::half,
                   jit::bfloat16) {
  if (!have_gpu()) return;
  const jit::DType t = jit::dtype_of<TestType>();
  const Case cases[] = {{1, 1, 1, 0, 1, 0},          {7, 13, 5, 3, 1, 0},        {33, 65, 100, 8, 0.5, -1.5},
                        {130, 260, 333, 1, 1, 0},    {257, 129, 64, 16, 2, 0.25}, {129, 300, 77, 0, -1, 1}};
  int checked = 0;
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
      const auto p = params(t, la, lb);
      for (const auto& impl : jit::implementations_for("gemm", gpu(), kernels::Gemm::to_params(p)))
        for (const Case& c : cases) {
          INFO(impl << " a " << (la == Layout::RowMajor ? "row" : "col") << " b " << (lb == Layout::RowMajor ? "row" : "col") << " m "
                    << c.m << " n " << c.n << " k " << c.k << " pad " << c.pad << " alpha " << c.alpha << " beta " << c.beta);
          CHECK(gemm_error<TestType>(p, impl, c) <= tolerance<TestType>());
          ++checked;
        }
    }
  CHECK(checked >= 4 * 6);  // the generic text takes every layout
}

TEMPLATE_TEST_CASE("GPU gemm with several K slices, tiles and tile groups, in each implementation", "[gpu][gemm]", float,
                   jit::bfloat16) {
  if (!have_gpu()) return;
  const auto p = params(jit::dtype_of<TestType>(), Layout::RowMajor, Layout::ColMajor);
  for (const auto& impl : jit::implementations_for("gemm", gpu(), kernels::Gemm::to_params(p))) {
    INFO(impl);
    CHECK(gemm_error<TestType>(p, impl, {1100, 520, 1000, 8, 1, 0}) <= tolerance<TestType>());
  }
}

TEST_CASE("GPU gemm with tiles past its last whole wave finishes them stream-K, and matches", "[gpu][gemm]") {
  if (!have_gpu()) return;
  // f32's 128 x 256 tiles, one block an SM (132 on the H100). 1500 x 3000 x 300: 144 tiles, 12 past
  // the wave, whose 10 K slices (the last partial) 15 blocks share, 8 or so each: most tiles' sums
  // meet from two blocks. 256 x 17152 x 1024: 134 tiles, the 2 past the wave over 8 blocks of 8
  // slices, 4 a tile. Row-major A with B column-major and the reverse; unaligned leading dimensions,
  // beta over C, an epilogue. (The launch's choice is not observable here: on a device whose wave
  // differs the same shapes may run plainly, and still must match.)
  for (Layout la : {Layout::RowMajor, Layout::ColMajor}) {
    const Layout lb = la == Layout::RowMajor ? Layout::ColMajor : Layout::RowMajor;
    INFO("a " << (la == Layout::RowMajor ? "row" : "col"));
    CHECK(gemm_error<float>(params(jit::DType::f32, la, lb), "cuda", {1500, 3000, 300, 0, 1, 0}) <= tolerance<float>());
  }
  CHECK(gemm_error<float>(params(jit::DType::f32, Layout::RowMajor, Layout::ColMajor), "cuda", {256, 17152, 1024, 0, 1, 0}) <=
        tolerance<float>());
  CHECK(gemm_error<float>(params(jit::DType::f32, Layout::RowMajor, Layout::RowMajor), "cuda", {1500, 3001, 300, 3, 0.5, -1.5},
                          "add_vec>gelu") <= tolerance<float>());
}

TEST_CASE("GPU gemm in f32 packs its operands lying along K before the tiles read them, and matches", "[gpu][gemm]") {
  if (!have_gpu()) return;
  // JITK_GEMM_PACK=1 packs at any size (by default only where packing_for says: C's other side at
  // least 3072 and M N K at least 4096^2 x 1024): A row-major and B column-major are each
  // rewritten into scratch along M or N, then the text for A column-major B row-major runs. Every
  // layout (those along M and N pass through untouched), leading dimensions past the minimum and
  // unaligned, beta over C, an epilogue; then the same launches with packing off, and with the
  // sizes deciding (these are too small: nothing packed). Each packed launch logs at DEBUG what it
  // packed, which the test reads.
  struct Env {
    explicit Env(const char* v) { ::setenv("JITK_GEMM_PACK", v, 1); }
    ~Env() { ::unsetenv("JITK_GEMM_PACK"); }
  };
  std::ostringstream said;
  auto& logger = jit::detail::log();
  const auto level = logger.level();
  logger.sinks().push_back(std::make_shared<spdlog::sinks::ostream_sink_mt>(said));
  logger.set_level(spdlog::level::debug);
  for (const char* mode : {"1", "0", ""}) {
    Env env(mode);
    for (Layout la : {Layout::RowMajor, Layout::ColMajor})
      for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
        INFO("JITK_GEMM_PACK=" << mode << " a " << (la == Layout::RowMajor ? "row" : "col") << " b " << (lb == Layout::RowMajor ? "row" : "col"));
        said.str("");
        CHECK(gemm_error<float>(params(jit::DType::f32, la, lb), "cuda", {300, 257, 130, 0, 1, 0}) <= tolerance<float>());
        CHECK(gemm_error<float>(params(jit::DType::f32, la, lb), "cuda", {129, 1000, 77, 3, 0.5, -1.5}, "add_vec>gelu") <=
              tolerance<float>());
        const bool a = la == Layout::RowMajor, b = lb == Layout::ColMajor;
        const std::string what = a && b ? "A and B packed" : a ? "A packed" : "B packed";
        if (std::string(mode) == "1" && (a || b)) {
          CHECK_THAT(said.str(), Contains("gemm: " + what + " before a launch of 300 x 257 x 130"));
          CHECK_THAT(said.str(), Contains("gemm: " + what + " before a launch of 129 x 1000 x 77"));
        } else {
          CHECK_THAT(said.str(), !Contains("packed before a launch"));
        }
      }
  }
  logger.sinks().pop_back();
  logger.set_level(level);
}

TEST_CASE("GPU gemm tiles other than the default compute the same", "[gpu][gemm]") {
  if (!have_gpu()) return;
  using Tile = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  for (jit::DType t : {jit::DType::f32, jit::DType::bf16})
    for (auto [tm, tn, tk, st] : {Tile{64, 64, 16, 2}, {64, 128, 64, 4}, {256, 128, 32, 3}, {128, 64, 64, 6}, {128, 256, 64, 4}, {64, 192, 64, 3},
                                  // f32's other thread layout (a warp under 8 column groups) and padding (48 + 20)
                                  {16, 16, 16, 2}, {48, 32, 16, 3},
                                  // f32's 8 x 16 shares (tile_n 256), with and without a warp's 4 x 8 layout
                                  {128, 256, 32, 3}, {16, 256, 16, 2}}) {
      auto p = params(t, Layout::RowMajor, Layout::ColMajor);
      p.tile_m = tm, p.tile_n = tn, p.tile_k = tk, p.stages = st;
      for (const auto& impl : jit::implementations_for("gemm", gpu(), kernels::Gemm::to_params(p))) {
        INFO(impl << " tile " << tm << "x" << tn << "x" << tk << " stages " << st << " dtype " << jit::dtype_name(t));
        const Case c{300, 333, 200, 8, 1, 0};
        const double err = t == jit::DType::f32 ? gemm_error<float>(p, impl, c) : gemm_error<jit::bfloat16>(p, impl, c);
        CHECK(err <= (t == jit::DType::f32 ? 1e-5 : 1e-2));
      }
    }
}

TEST_CASE("GPU gemm in clusters of two blocks (B multicast to both) matches the reference", "[gpu][gemm]") {
  if (!have_gpu()) return;
  auto p = params(jit::DType::bf16, Layout::RowMajor, Layout::ColMajor);
  p.cluster_m = 2;
  if (jit::implementations_for("gemm", gpu(), kernels::Gemm::to_params(p)).empty()) {
    std::printf("SKIPPED: no implementation runs clusters on this GPU (cuda-sm90a needs sm_90)\n");
    return;
  }
  // odd numbers of tile rows (a cluster's second block then has none), K not a multiple of 64,
  // padded leading dimensions, beta over C and beta = 0 over poisoned C; the last case has more
  // pairs of tiles than the device runs clusters at once (the persistent loop)
  const Case cases[] = {{1, 1, 1, 0, 1, 0}, {129, 65, 70, 8, 1, 0}, {257, 300, 200, 0, 0.5, -1.5}, {2100, 2100, 100, 8, 1, 0}};
  using Tile = std::pair<std::int64_t, std::int64_t>;
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
      for (auto [tm, tn] : {Tile{0, 0}, {64, 64}, {128, 128}, {64, 192}}) {  // B's part: half a box of rows, or whole 64-wide boxes
        auto q = params(jit::DType::bf16, la, lb);
        q.cluster_m = 2, q.tile_m = tm, q.tile_n = tn;
        for (const Case& c : cases) {
          if (c.m > 1000 && (tm != 0 || la != Layout::RowMajor)) continue;  // the big case once a B layout
          INFO("a " << (la == Layout::RowMajor ? "row" : "col") << " b " << (lb == Layout::RowMajor ? "row" : "col") << " tile " << tm
                    << "x" << tn << " m " << c.m << " n " << c.n << " k " << c.k << " pad " << c.pad << " beta " << c.beta);
          CHECK(gemm_error<jit::bfloat16>(q, "cuda-sm90a", c) <= tolerance<jit::bfloat16>());
        }
      }
  // and with an epilogue: the same values as one block at a time
  const Case c{300, 333, 200, 8, 1, 0};
  CHECK(gemm_error<jit::bfloat16>(p, "cuda-sm90a", c, "add_vec>gelu") <= tolerance<jit::bfloat16>());
}

TEST_CASE("GPU gemm on cuda-sm90a stages C through shared memory where its plan has room, stores from registers where not, and matches",
          "[gpu][gemm][sm90_epilogue]") {
  if (!have_gpu() || !have_hopper()) return;
  // Staged: the default 128 x 256 x 4, 64 x 64 x 4 (two blocks an SM, both staging), 128 x 64 x 6,
  // 128 x 256 x 3, 128 x 128 x 6.
  // From registers: 128 x 128 x 7 and 64 x 64 x 7 (no room beside the stages; test_gemm.cpp checks
  // the plans). Odd sizes and edge tiles (rows past M, columns past N: a 16-byte piece cut short),
  // leading dimensions that are not a multiple of 8 (each element stored alone) or 16-byte aligned
  // ones padded, beta over C and beta = 0 over poisoned C.
  const Case cases[] = {{1, 1, 1, 0, 1, 0}, {65, 129, 70, 8, 1, 0}, {257, 300, 200, 0, 0.5, -1.5}, {130, 260, 333, 1, 1, 0.25}};
  using Tile = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
      for (auto [tm, tn, stages] : {Tile{0, 0, 0}, {64, 64, 4}, {128, 64, 6}, {128, 128, 7}, {64, 64, 7}, {128, 256, 3}, {128, 128, 6}}) {
        auto q = params(jit::DType::bf16, la, lb);
        q.tile_m = tm, q.tile_n = tn, q.tile_k = tm ? 64 : 0, q.stages = stages;
        for (const Case& c : cases) {
          INFO("a " << (la == Layout::RowMajor ? "row" : "col") << " b " << (lb == Layout::RowMajor ? "row" : "col") << " tile " << tm
                    << "x" << tn << " x " << stages << " m " << c.m << " n " << c.n << " k " << c.k << " pad " << c.pad << " beta "
                    << c.beta);
          CHECK(gemm_error<jit::bfloat16>(q, "cuda-sm90a", c) <= tolerance<jit::bfloat16>());
        }
      }
  // an epilogue chain over beta * C, staged (4, 6) and not (7); 128 x 256 x 3; f16
  using Plan = std::pair<std::int64_t, std::int64_t>;
  for (auto [tn, stages] : {Plan{128, 4}, {128, 6}, {128, 7}, {256, 3}}) {
    auto q = params(jit::DType::bf16, Layout::RowMajor, Layout::RowMajor);
    q.tile_m = 128, q.tile_n = tn, q.tile_k = 64, q.stages = stages;
    INFO("128 x " << tn << " x " << stages);
    CHECK(gemm_error<jit::bfloat16>(q, "cuda-sm90a", {300, 333, 200, 8, 1, 0.5}, "add_vec>gelu") <= tolerance<jit::bfloat16>());
    q.dtype = jit::DType::f16;
    CHECK(gemm_error<jit::half>(q, "cuda-sm90a", {300, 333, 200, 8, 1, 0}) <= tolerance<jit::half>());
  }
}

TEST_CASE("GPU gemm on cuda-sm90a adds beta * C and a residual in the staged copy-out, 16-byte pieces and element by element, and matches",
          "[gpu][gemm][sm90_epilogue]") {
  if (!have_gpu() || !have_hopper()) return;
  // The staged epilogue reads C (beta != 0) and the chain's tensors in its copy-out, chunks of 64
  // columns ahead: 16-byte pieces where C's rows (ldc a multiple of 8) and the chain's tensor are
  // 16-byte aligned, else element by element (ldc odd; the residual one element off). Rows past M
  // (M not a multiple of 64: a consumer with few or none), a piece cut short by C's last column
  // (n 300, 1001), one column, tiles of one 64-column chunk (64 x 64) and of four (the default 128 x
  // 256); 128 x 128 x 7 stores from registers (no staging room) for comparison. B row-major (the
  // decoder layer's) and column-major. A's and B's rows stay 16-byte aligned (the copy engine's:
  // else the generic text runs); `pad` here is C's alone (gemm_error's c_pad).
  const Case cases[] = {{1, 8, 64, 0, 1, 1},          {65, 300, 70, 4, 1, 1},     {130, 256, 200, 0, 0.5, -1.5},
                        {200, 1001, 129, 7, 1, 0.25}, {257, 520, 96, 1, 1, 1},    {63, 1, 64, 7, 1, 1},
                        {300, 264, 333, 8, -1, 0},    {129, 512, 64, 0, 2, 0},    {77, 136, 1000, 3, 1, 1}};
  using Tile = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
  for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
    for (auto [tm, tn, stages] : {Tile{0, 0, 0}, {64, 64, 4}, {128, 128, 7}}) {
      auto q = params(jit::DType::bf16, Layout::RowMajor, lb);
      q.tile_m = tm, q.tile_n = tn, q.tile_k = tm ? 64 : 0, q.stages = stages;
      for (const Case& c : cases)
        for (const char* epilogue : {"", "add"})
          for (std::int64_t offset : {0, 1}) {
            if (!*epilogue && offset) continue;
            if (!*epilogue && c.beta == 0) continue;  // the plain gemm: the test above
            INFO("b " << (lb == Layout::RowMajor ? "row" : "col") << " tile " << tm << "x" << tn << " x " << stages << " m " << c.m
                      << " n " << c.n << " k " << c.k << " pad " << c.pad << " alpha " << c.alpha << " beta " << c.beta << " epilogue '"
                      << epilogue << "' offset " << offset);
            CHECK(gemm_error<jit::bfloat16>(q, "cuda-sm90a", {c.m, c.n, c.k, 0, c.alpha, c.beta}, epilogue, offset, c.pad) <=
                  tolerance<jit::bfloat16>());
          }
    }
  // f16
  auto q = params(jit::DType::f16, Layout::RowMajor, Layout::RowMajor);
  CHECK(gemm_error<jit::half>(q, "cuda-sm90a", {300, 264, 333, 0, 1, 1}, "add", 0, 8) <= tolerance<jit::half>());
  // in place: the residual is C itself (y = x W + y through the chain, beta = 0), read
  // ahead of the stores; the padding stays
  using T = jit::bfloat16;
  const std::int64_t m = 300, n = 264, k = 336, ldc = 272;  // A and B rows 16-byte aligned (the copy engine takes them)
  auto make = [](std::int64_t count) {
    return jitk_test::random_values<T>(static_cast<std::size_t>(count), -1, 1, [](double v) { return from_double<T>(v); });
  };
  const auto a = make(m * k), b = make(k * n), c0 = make(m * ldc);
  std::vector<double> expected(c0.size());
  for (std::size_t i = 0; i < c0.size(); ++i) expected[i] = as_double(c0[i]);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t p = 0; p < k; ++p) sum += as_double(a[static_cast<std::size_t>(i * k + p)]) * as_double(b[static_cast<std::size_t>(p * n + j)]);
      const auto o = static_cast<std::size_t>(i * ldc + j);
      expected[o] = as_double(from_double<T>(sum)) + as_double(c0[o]);
    }
  jit::cuda::DeviceArray<T> da(a), db(b), dc(c0);
  auto p = params(jit::DType::bf16, Layout::RowMajor, Layout::RowMajor);
  p.epilogue = "add";
  for (std::int64_t tm : {0, 64}) {
    p.tile_m = tm, p.tile_n = tm, p.tile_k = tm, p.stages = tm ? 4 : 0;
    jit::Selection sel;
    sel.implementation = "cuda-sm90a";
    auto kernel = jit::get<kernels::Gemm>(p, gpu(), sel);
    dc.upload(c0);
    kernel(m, n, k, 1.0, da.data(), k, db.data(), n, 0.0, dc.data(), ldc, jit::Operands{jit::ConstPtr(dc.data(), jit::dtype_of<T>())});
    jit::cuda::synchronize();
    std::vector<double> got;
    for (const T& v : dc.download()) got.push_back(as_double(v));
    INFO("in place, tile " << tm);
    CHECK(ref::relative_l2_error(got, expected) <= tolerance<T>());
  }
}

namespace {
// One QKV gemm (rope and/or the KV-cache write in its epilogue) on cuda-sm90a against the float64
// reference: C padded by c_pad (odd: element by element) and poisoned with NaN, the caches
// poisoned with a value; slots a permutation with padding (-1) and slots past the cache; positions
// small and large. The worst error over C and both caches (infinity where NaN was read or left).
template <class T>
double qkv_gpu_error(const kernels::Gemm::Params& p, const jitk_test::qkv::Shape& s, Layout lb, bool rope, std::int64_t page_size,
                     std::int64_t c_pad) {
  const std::int64_t n = (s.heads + 2 * s.kv_heads) * s.head_dim, lda = (s.k + 7) / 8 * 8, ldb = lb == Layout::RowMajor ? n : lda;
  const std::int64_t ldc = n + c_pad;
  auto make = [](std::int64_t count, double lo, double hi) {
    return jitk_test::random_values<T>(static_cast<std::size_t>(std::max<std::int64_t>(1, count)), lo, hi,
                                       [](double v) { return from_double<T>(v); });
  };
  const auto a = make(s.m * lda, -1, 1), b = make((lb == Layout::RowMajor ? s.k : n) * ldb, -1, 1);
  auto c = make(s.m * ldc, -1, 1);
  for (std::int64_t r = 0; r < s.m; ++r)
    for (std::int64_t j = 0; j < n; ++j) c[static_cast<std::size_t>(r * ldc + j)] = from_double<T>(std::nan(""));
  const std::int64_t page = std::max<std::int64_t>(1, page_size), num_pages = (s.m + page - 1) / page + 1, slots_n = num_pages * page;
  std::vector<std::int64_t> positions(static_cast<std::size_t>(std::max<std::int64_t>(1, s.m))), slots(positions.size());
  for (std::int64_t r = 0; r < s.m; ++r) {
    positions[r] = r % 3 == 0 ? r : r % 3 == 1 ? 4093 + 7 * r : 0;
    slots[r] = r % 5 == 4 ? -1 : r % 7 == 6 ? slots_n + r : slots_n - 1 - r;
  }
  const std::size_t cache = static_cast<std::size_t>(std::max<std::int64_t>(1, slots_n * s.kv_heads * s.head_dim));
  const std::vector<T> k0(cache, from_double<T>(7)), v0(cache, from_double<T>(-7));
  auto wide = [](const std::vector<T>& v) {
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = as_double(v[i]);
    return out;
  };
  const auto e = jitk_test::qkv::reference(s, ldc, wide(a), Layout::RowMajor, lda, wide(b), lb, ldb, 1.0, rope, page_size, positions, 500000,
                                           slots, num_pages, wide(c), wide(k0), wide(v0),
                                           [](double v) { return as_double(from_double<T>(v)); });
  jit::cuda::DeviceArray<T> da(a), db(b), dc(c), dk(k0), dv(v0);
  jit::cuda::DeviceArray<std::int64_t> dpos(positions), dslots(slots);
  kernels::Gemm::Params q = p;
  q.rope = rope ? kernels::Gemm::Rope::NeoX : kernels::Gemm::Rope::None;
  q.head_dim = s.head_dim, q.page_size = page_size, q.b_layout = lb;
  auto kernel = jit::get<kernels::Gemm>(q, gpu());
  REQUIRE(kernel.implementation() == "cuda-sm90a");
  kernels::Gemm::Args args{s.m, n, s.k, 1.0, da.data(), lda, db.data(), ldb, 0.0, dc.data(), ldc};
  args.heads = s.heads, args.kv_heads = s.kv_heads;
  if (rope) args.positions = dpos.data(), args.theta = 500000;
  if (page_size > 0) args.slots = dslots.data(), args.num_pages = num_pages, args.k_cache = dk.data(), args.v_cache = dv.data();
  kernel.launch(args);
  jit::cuda::synchronize();
  double err = jitk_test::qkv::worst(wide(dc.download()), e.c);
  if (page_size > 0) err = std::max({err, jitk_test::qkv::worst(wide(dk.download()), e.k_cache), jitk_test::qkv::worst(wide(dv.download()), e.v_cache)});
  else if (wide(dk.download()) != wide(k0)) err = INFINITY;
  return err;
}
}  // namespace

TEST_CASE("GPU gemm on cuda-sm90a rotates q and k and writes the KV cache in its epilogue (QKV), and matches", "[gpu][gemm][qkv]") {
  if (!have_gpu() || !have_hopper()) return;
  // The default tiles (128 x 256: staged, the values packed two a register), 128 x 128 x 7 stages
  // (no staging room: from registers), 64-row tiles whose few tiles split K over a cluster
  // (store_split: a pair's partner summed from the cluster too), a cluster of two along M, head_dim
  // 64 and 128; rope and the cache together and alone; B row- and column-major; C's ldc a multiple
  // of 8 and odd (element by element); M not a multiple of 64, one row; the Llama-3-8B layer's shape.
  using T = jit::bfloat16;
  using jitk_test::qkv::Shape;
  struct Tile {
    std::int64_t m, n, stages, cluster;
  };
  const Tile tiles[] = {{0, 0, 0, 0}, {128, 128, 7, 1}, {64, 128, 8, 1}, {64, 256, 4, 1}, {128, 256, 4, 2}};
  const Shape shapes[] = {{1, 64, 4, 2, 128, 0}, {130, 200, 4, 2, 128, 0}, {17, 1000, 3, 1, 128, 0}, {300, 96, 2, 2, 128, 0}};
  const Shape small_heads[] = {{65, 136, 5, 3, 64, 0}, {64, 4096, 6, 1, 64, 0}};
  // every layout and epilogue on the default tiles, rope and the cache together on the others (each
  // params set is a compile of its own: ~8 s on the H100's host)
  for (const Tile& t : tiles)
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
      for (int what = 0; what < 3; ++what)
        for (std::int64_t c_pad : {0, 3}) {
          if (t.m != 0 && (lb != Layout::RowMajor || what != 0)) continue;
          auto p = params(jit::DType::bf16, Layout::RowMajor, lb);
          p.tile_m = t.m, p.tile_n = t.n, p.tile_k = t.m ? 64 : 0, p.stages = t.stages, p.cluster_m = t.cluster;
          const bool rope = what != 2;
          const std::int64_t page = what == 1 ? 0 : 16;
          for (const Shape& s : shapes) {
            INFO("tile " << t.m << "x" << t.n << " cluster " << t.cluster << " b " << (lb == Layout::RowMajor ? "row" : "col") << " rope "
                         << rope << " page " << page << " pad " << c_pad << " m " << s.m << " k " << s.k << " heads " << s.heads << "/"
                         << s.kv_heads);
            CHECK(qkv_gpu_error<T>(p, s, lb, rope, page, c_pad) <= 2 * tolerance<T>());
          }
          if (t.m == 0 && lb == Layout::RowMajor && what == 0)
            for (const Shape& s : small_heads) {
              INFO("head_dim 64, tile " << t.m << "x" << t.n << " m " << s.m << " rope " << rope << " page " << page << " pad " << c_pad);
              CHECK(qkv_gpu_error<T>(p, s, lb, rope, page, c_pad) <= 2 * tolerance<T>());
            }
        }
  // the Llama-3-8B layer's QKV projection (n 6144): decode's 64 rows (the few-rows route, 64 x 128
  // tiles, K 4096 split over clusters) and prefill's rows on the default tiles (K shortened: the
  // float64 reference runs on the host)
  for (auto [m, k] : {std::pair<std::int64_t, std::int64_t>{64, 4096}, {2048, 256}}) {
    INFO("llama m " << m << " k " << k);
    CHECK(qkv_gpu_error<T>(params(jit::DType::bf16, Layout::RowMajor, Layout::RowMajor), {m, k, 32, 8, 128, 0}, Layout::RowMajor, true, 16,
                           0) <= 2 * tolerance<T>());
  }
  // f16 too
  CHECK(qkv_gpu_error<jit::half>(params(jit::DType::f16, Layout::RowMajor, Layout::RowMajor), {100, 256, 4, 2, 128, 0}, Layout::RowMajor, true,
                                 16, 0) <= 2 * tolerance<jit::half>());
}

TEST_CASE("GPU gemm with few tiles splits K over a cluster's blocks and matches the reference", "[gpu][gemm]") {
  if (!have_gpu()) return;
  const std::string arch = jit::cuda::devices()[0].arch;
  if (std::stoi(arch.substr(3)) < 90) {
    std::printf("SKIPPED: K is split over clusters from sm_90 (this GPU: %s)\n", arch.c_str());
    return;
  }
  // On an H100's 132 SMs (gpu_launch.hpp's split_k_for): 16 x 129 in 16 x 64 tiles is 3 tiles,
  // split 8 at k = 2000 (32 slices of 64); m = 5 x n = 300 is 5 tiles, split 5 at k = 1400 (22
  // slices: 4, 4, 5, 4, 5); k = 700 splits in 2 (11 slices, 5 + 6); tile 16 x 128 x 32 at
  // n = 1000 is 8 tiles split 8 (32 slices, 4 each); f32's 16 x 64 tile has 16 threads of sums in
  // a warp; beta over C and beta = 0 over poisoned C; padded leading dimensions.
  const Case cases[] = {{16, 129, 2000, 0, 1, 0}, {5, 300, 1400, 8, 0.5, -1.5}, {16, 129, 700, 3, 1, 0}, {9, 1000, 1000, 0, 1, 0.25}};
  using Tile = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
      for (auto [tm, tn, tk] : {Tile{16, 64, 64}, {16, 128, 32}})
        for (const Case& c : cases) {
          INFO("a " << (la == Layout::RowMajor ? "row" : "col") << " b " << (lb == Layout::RowMajor ? "row" : "col") << " tile " << tm
                    << "x" << tn << "x" << tk << " m " << c.m << " n " << c.n << " k " << c.k << " pad " << c.pad << " beta " << c.beta);
          auto q = params(jit::DType::bf16, la, lb);
          q.tile_m = tm, q.tile_n = tn, q.tile_k = tk, q.stages = 3;
          CHECK(gemm_error<jit::bfloat16>(q, "cuda", c) <= tolerance<jit::bfloat16>());
          q.dtype = jit::DType::f32;
          CHECK(gemm_error<float>(q, "cuda", c) <= tolerance<float>());
        }
  // f32's 64 x 256 tile (8 x 16 sums a thread): 16 x 4096 is 16 tiles, split 8; a 128-row tile is
  // never split (the plan); the epilogue once, after the sum
  auto f = params(jit::DType::f32, Layout::RowMajor, Layout::ColMajor);
  f.tile_m = 64, f.tile_n = 256;
  CHECK(gemm_error<float>(f, "cuda", {16, 4096, 1024, 0, 1, 0}) <= tolerance<float>());
  f.tile_m = 128;
  CHECK(gemm_error<float>(f, "cuda", {16, 4096, 1024, 0, 1, 0}) <= tolerance<float>());
  auto h = params(jit::DType::bf16, Layout::RowMajor, Layout::ColMajor);
  h.tile_m = 16, h.tile_n = 64, h.tile_k = 64;
  CHECK(gemm_error<jit::bfloat16>(h, "cuda", {7, 333, 1500, 8, 1, 0}, "add_vec>gelu") <= tolerance<jit::bfloat16>());
}

TEST_CASE("GPU gemm on cuda-sm90a's default tiles runs few rows through the generic split tile or its own 64-row tile, and matches",
          "[gpu][gemm][split]") {
  if (!have_gpu()) return;
  if (!have_hopper()) return;
  const auto p = params(jit::DType::bf16, Layout::RowMajor, Layout::ColMajor);
  // m <= 64 with few 128 x 256 tiles: the route (16-, 32- or 64-row tiles, K split over clusters;
  // cuda-sm90a's own 64 x 64 tile for 17-32 rows from 3072 columns and 33-64 rows from 2048),
  // taken before the copy-engine fallback (m = 8's leading dimensions, 3 past the minimum, are not
  // 16-byte aligned; so are the 40-row case's, which the own-tile route's fallback takes); m = 65:
  // cuda-sm90a itself; explicit tiles: cuda-sm90a itself at every m (or, unaligned, the fallback).
  // Every layout, beta over C and beta = 0 over poisoned C, an epilogue.
  // 64 and 33 rows of 16384 columns and more: the 64 x 256 route, though the default tiles fill the SMs.
  const Case cases[] = {{16, 4096, 1024, 0, 1, 0}, {8, 296, 696, 3, 0.5, -1.5}, {30, 1000, 800, 0, 1, 0},
                        {64, 2000, 513, 0, 1, 0},  {65, 1000, 640, 8, 1, 0.25}, {48, 2048, 1000, 0, 1, 0},
                        {40, 3000, 700, 3, 0.5, -1.5}, {24, 3200, 640, 0, 1, 0}, {33, 4096, 4000, 8, 1, 0.25},
                        {64, 28672, 160, 0, 1, 0}, {33, 16400, 200, 8, 1, 0.25}};
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
      for (std::int64_t tm : {0, 128})
        for (const Case& c : cases) {
          INFO("a " << (la == Layout::RowMajor ? "row" : "col") << " b " << (lb == Layout::RowMajor ? "row" : "col") << " tile_m " << tm
                    << " m " << c.m << " n " << c.n << " k " << c.k << " beta " << c.beta);
          auto q = params(jit::DType::bf16, la, lb);
          if (tm) q.tile_m = tm, q.tile_n = 256, q.tile_k = 64, q.stages = 4;
          CHECK(gemm_error<jit::bfloat16>(q, "cuda-sm90a", c) <= tolerance<jit::bfloat16>());
        }
  CHECK(gemm_error<jit::bfloat16>(p, "cuda-sm90a", {16, 2048, 1000, 8, 1, 0}, "add_vec>gelu") <= tolerance<jit::bfloat16>());
  CHECK(gemm_error<jit::bfloat16>(p, "cuda-sm90a", {64, 4096, 1000, 0, 1, 0}, "add_vec>gelu") <= tolerance<jit::bfloat16>());
}

TEST_CASE("GPU gemm on cuda-sm90a's 64-row tiles splits K over a cluster where the tiles are few, matches, and repeats bit for bit",
          "[gpu][gemm][split]") {
  if (!have_gpu()) return;
  if (!have_hopper()) return;
  // 64 x 64 .. 64 x 256 tiles chosen by hand: few tiles for the SMs, so the launch runs each on a
  // cluster of blocks walking shares of K (gemm_sm90.cu, SPLIT_K) -- 2 to 8 of them, shares of
  // unequal slice counts (777: 13 slices over 3), a K that is not a multiple of 64, C's columns
  // not a multiple of 8 (the unit's tail written element by element), rows past M in the tile, and
  // one tile with too few slices to split (4). Every layout, beta over C and beta = 0 over C
  // poisoned with NaN, an unaligned ldc (pad 3), an epilogue chain; gated too (gate/up groups).
  const Case cases[] = {{64, 1000, 2500, 0, 1, 0},  {17, 520, 777, 8, 0.5, -1.5}, {1, 64, 256, 0, 1, 0},
                        {64, 2048, 1300, 3, 1, 0.25}, {40, 129, 3000, 0, 2, 0}};
  const std::int64_t tiles[][2] = {{64, 8}, {128, 6}, {192, 5}, {256, 4}};
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
      for (const auto& t : tiles)
        for (const Case& c : cases) {
          INFO("a " << (la == Layout::RowMajor ? "row" : "col") << " b " << (lb == Layout::RowMajor ? "row" : "col") << " tile 64x"
                    << t[0] << " m " << c.m << " n " << c.n << " k " << c.k << " pad " << c.pad << " beta " << c.beta);
          auto q = params(jit::DType::bf16, la, lb);
          q.tile_m = 64, q.tile_n = t[0], q.tile_k = 64, q.stages = t[1];
          CHECK(gemm_error<jit::bfloat16>(q, "cuda-sm90a", c) <= tolerance<jit::bfloat16>());
        }
  auto e = params(jit::DType::bf16, Layout::RowMajor, Layout::RowMajor);
  e.tile_m = 64, e.tile_n = 128, e.tile_k = 64, e.stages = 6;
  CHECK(gemm_error<jit::bfloat16>(e, "cuda-sm90a", {64, 4096, 1000, 0, 1, 0}, "add_vec>gelu") <= tolerance<jit::bfloat16>());
  CHECK(gemm_error<jit::bfloat16>(e, "cuda-sm90a", {33, 1000, 1000, 8, 1, 0.5}, "add_vec>gelu") <= tolerance<jit::bfloat16>());
  auto g = e;
  g.gate = kernels::Gemm::Gate::Silu;
  for (const Case& c : {Case{64, 2048, 2500, 0, 1, 0}, Case{17, 1008, 777, 8, 0.5, -1.5}}) {
    INFO("gated m " << c.m << " n " << c.n << " k " << c.k);
    CHECK(gated_error<jit::bfloat16>(g, "cuda-sm90a", c) <= tolerance<jit::bfloat16>());
    CHECK(gated_error<jit::bfloat16>(g, "cuda-sm90a", c, true) <= tolerance<jit::bfloat16>());
  }
  // the same launch twice gives the same bits: each block sums the cluster's partial sums in rank order
  using T = jit::bfloat16;
  const std::int64_t m = 64, n = 4096, k = 4096;
  auto make = [](std::int64_t count) {
    return jitk_test::random_values<T>(static_cast<std::size_t>(count), -1, 1, [](double v) { return from_double<T>(v); });
  };
  jit::cuda::DeviceArray<T> a(make(m * k)), b(make(k * n)), c1(make(m * n)), c2(make(m * n));
  auto kernel = jit::get<kernels::Gemm>(e, gpu());
  REQUIRE(kernel.implementation() == "cuda-sm90a");
  kernel(m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c1.data(), n);
  kernel(m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c2.data(), n);
  jit::cuda::synchronize();
  const auto x = c1.download(), y = c2.download();
  CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0);
}

TEST_CASE("GPU gemm on the generic text's default tiles runs few rows through its split tiles, and matches", "[gpu][gemm]") {
  if (!have_gpu()) return;
  // f32 (the generic text is its only GPU implementation) and bf16 asked of 'cuda': m <= 64 with few
  // default tiles routes to the 16-, 32- or 64-row tiles (K split over clusters on sm_90, f32's
  // 32 a slice); m = 65 and explicit tiles run as asked. Every layout, beta over C and over poisoned C.
  const Case cases[] = {{16, 4096, 1024, 0, 1, 0}, {8, 296, 696, 3, 0.5, -1.5}, {30, 1000, 800, 0, 1, 0},
                        {64, 2000, 513, 0, 1, 0},  {65, 1000, 640, 8, 1, 0.25}};
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
      for (const Case& c : cases) {
        INFO("a " << (la == Layout::RowMajor ? "row" : "col") << " b " << (lb == Layout::RowMajor ? "row" : "col") << " m " << c.m
                  << " n " << c.n << " k " << c.k << " beta " << c.beta);
        CHECK(gemm_error<float>(params(jit::DType::f32, la, lb), "cuda", c) <= tolerance<float>());
        CHECK(gemm_error<jit::bfloat16>(params(jit::DType::bf16, la, lb), "cuda", c) <= tolerance<jit::bfloat16>());
      }
  CHECK(gemm_error<float>(params(jit::DType::f32, Layout::RowMajor, Layout::ColMajor), "cuda", {16, 2048, 1000, 8, 1, 0},
                          "add_vec>gelu") <= tolerance<float>());
}

TEST_CASE("GPU gemm fuses a bias and gelu epilogue in every implementation", "[gpu][gemm][chains]") {
  if (!have_gpu()) return;
  const auto p = params(jit::DType::bf16, Layout::RowMajor, Layout::ColMajor);
  for (const auto& impl : jit::implementations_for("gemm", gpu(), kernels::Gemm::to_params(p))) {
    INFO(impl);
    CHECK(gemm_error<jit::bfloat16>(p, impl, {77, 200, 96, 8, 1, 0}, "add_vec>gelu") <= 1e-2);
    CHECK(gemm_error<jit::bfloat16>(p, impl, {64, 128, 64, 0, 0.5, 1}, "add_vec>gelu") <= 1e-2);
  }
}

TEST_CASE("GPU gemm on matrices the copy engine cannot take runs the generic text, with a warning", "[gpu][gemm]") {
  if (!have_gpu()) return;
  if (!have_hopper()) return;
  const auto p = params(jit::DType::bf16, Layout::RowMajor, Layout::ColMajor);
  // lda = 333: rows not 16-byte aligned; the default selection picks cuda-sm90a
  for (const Case& c : {Case{40, 50, 333, 0, 1, 0}, Case{129, 65, 77, 1, 1, 0.5}}) {
    INFO("m " << c.m << " n " << c.n << " k " << c.k << " pad " << c.pad);
    CHECK(gemm_error<jit::bfloat16>(p, "cuda-sm90a", c) <= 1e-2);
  }
}

TEST_CASE("GPU gemm refuses tiles an implementation cannot take, before compiling", "[gpu][gemm]") {
  if (!have_gpu()) return;
  auto p = params(jit::DType::bf16, Layout::RowMajor, Layout::RowMajor);
  p.tile_m = 96;  // not a multiple of 64
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>(p, gpu()), Contains("tile_m must be"));
  p.tile_m = 256, p.tile_n = 256;  // 1024 threads is the most; this is 1024 -- then shared memory
  p.tile_k = 128, p.stages = 6;
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>(p, gpu()), Contains("shared memory"));
  auto f = params(jit::DType::f32, Layout::RowMajor, Layout::RowMajor);
  f.tile_m = 256, f.tile_n = 128;  // 512 threads of 64 accumulators: they would spill
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>(f, gpu()), Contains("at most 256 threads"));
  auto q = params(jit::DType::bf16, Layout::RowMajor, Layout::RowMajor);
  jit::Selection s;
  s.implementation = "cuda-sm90a";
  q.tile_k = 32;
  const auto impls = jit::implementations_for("gemm", gpu());
  if (std::find(impls.begin(), impls.end(), "cuda-sm90a") != impls.end())
    CHECK_THROWS_WITH(jit::get<kernels::Gemm>(q, gpu(), s), Contains("tile_k must be 64"));
}

TEST_CASE("GPU gemm tuning times the candidates once, keeps the winner, and the winner computes right", "[gpu][gemm][tuning]") {
  if (!have_gpu()) return;
  const auto base = params(jit::DType::bf16, Layout::RowMajor, Layout::ColMajor);
  const kernels::Gemm::Shape shape{512, 512, 512};
  auto k = jit::get_tuned<kernels::Gemm>(base, shape, gpu());
  const auto rows = jit::cache::tuning();
  const auto mine = std::find_if(rows.begin(), rows.end(), [](const jit::TuningInfo& r) {
    return r.kernel == "gemm" && r.device.rfind("cuda", 0) == 0 && r.base_params.find("bf16") != std::string::npos;
  });
  REQUIRE(mine != rows.end());
  CHECK(mine->candidates > 4);
  CHECK(mine->best_ms > 0);
  CHECK(mine->best_ms <= mine->default_ms);
  CHECK(gemm_error<jit::bfloat16>(k.params(), k.implementation(), {512, 512, 512, 8, 1, 0}) <= 1e-2);
  // the second call reuses the decision: same params, nothing timed (no new row)
  auto again = jit::get_tuned<kernels::Gemm>(base, {500, 400, 300}, gpu());
  CHECK(kernels::Gemm::to_params(again.params()).to_string() == kernels::Gemm::to_params(k.params()).to_string());
  CHECK(jit::cache::tuning().size() == rows.size());
}

TEST_CASE("GPU: the tuners' stopwatch reads the device's clock (events), not the host's", "[gpu][gemm][tuning]") {
  if (!have_gpu()) return;
  auto p = params(jit::DType::bf16, Layout::RowMajor, Layout::ColMajor);
  const std::int64_t n = 2048;
  jit::cuda::DeviceArray<jit::bfloat16> a(static_cast<std::size_t>(n * n)), b(a.size()), c(a.size());
  for (auto* m : {&a, &b, &c}) m->fill_bytes(0);
  auto k = jit::get<kernels::Gemm>(p, gpu());
  auto run = [&] { k(n, n, n, 1.0, a.data(), n, b.data(), n, 0.0, c.data(), n); };
  run();
  jit::cuda::synchronize();
  jit::detail::Stopwatch watch(gpu());
  const auto host0 = std::chrono::steady_clock::now();
  watch.start();
  for (int i = 0; i < 20; ++i) run();
  const double device_ms = watch.stop_ms();
  const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host0).count();
  INFO("events " << device_ms << " ms, host clock " << host_ms << " ms for 20 gemms of 2048^3");
  CHECK(device_ms > 0);
  CHECK(device_ms <= host_ms * 1.01 + 0.01);  // the events lie inside the host's span
  CHECK(device_ms >= 0.3 * host_ms);         // ... and cover the work, not just one launch
}

TEMPLATE_TEST_CASE("GPU block_sparse_matmul's three products match dense references, in each implementation", "[gpu][block_sparse]",
                   float, jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  // each implementation where it takes the case (cuda-sm90a: 64-wide blocks, 16-bit), else the default choice
  for (std::string impl : {"cuda", "cuda-sm90a"})
    for (std::int64_t tile_m : {0, 64, 128}) {
      INFO(impl << " tile_m " << tile_m);
      block_sparse_support::check_all<TestType>(
          jit::dtype_of<TestType>(), tolerance<TestType>(), [](double v) { return from_double<TestType>(v); },
          [&](kernels::BlockSparseMatmul::Params p, const block_sparse_support::Case& c, const jit::BlockMask& mask,
              const std::vector<TestType>& a, std::int64_t lda, const std::vector<TestType>& b, std::int64_t ldb,
              const std::vector<TestType>& out, std::int64_t ldc) {
            p.tile_m = tile_m;
            jit::cuda::DeviceArray<TestType> da(a), db(b), dout(out);
            jit::cuda::DeviceArray<std::int32_t> index(mask.index());
            const auto impls = jit::implementations_for("block_sparse_matmul", gpu(), kernels::BlockSparseMatmul::to_params(p));
            jit::Selection s;
            if (std::find(impls.begin(), impls.end(), impl) != impls.end()) s.implementation = impl;
            auto k = jit::get<kernels::BlockSparseMatmul>(p, gpu(), s);
            k(c.m, c.alpha, da.data(), lda, db.data(), ldb, c.beta, dout.data(), ldc, &mask, index.data());
            std::vector<double> got;
            for (const TestType& v : dout.download()) got.push_back(as_double(v));
            return got;
          });
    }
}

TEST_CASE("GPU gemm with k = 0 and block_sparse_matmul with no blocks give beta * C in every implementation", "[gpu][gemm]") {
  if (!have_gpu()) return;
  for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
    const auto p = params(jit::DType::bf16, Layout::RowMajor, lb);
    for (const auto& impl : jit::implementations_for("gemm", gpu(), kernels::Gemm::to_params(p))) {
      INFO(impl);
      CHECK(gemm_error<jit::bfloat16>(p, impl, {5, 16, 0, 8, 1, 0.5}) <= 1e-2);  // the copy engine cannot take an empty K
    }
  }
  const jit::BlockMask mask(64, 128, 64, std::vector<std::uint8_t>(2, 0));
  jit::cuda::DeviceArray<std::int32_t> index(mask.index());
  std::vector<jit::bfloat16> host(3 * 128, jit::to_bfloat16(2.0f));
  jit::cuda::DeviceArray<jit::bfloat16> x(std::vector<jit::bfloat16>(3 * 64, jit::to_bfloat16(1.0f))), y(host), w(1);
  kernels::BlockSparseMatmul::Params bp;
  bp.dtype = jit::DType::bf16;
  for (const auto& impl : jit::implementations_for("block_sparse_matmul", gpu(), kernels::BlockSparseMatmul::to_params(bp))) {
    INFO(impl);
    y.upload(host);
    jit::Selection s;
    s.implementation = impl;
    jit::get<kernels::BlockSparseMatmul>(bp, gpu(), s)(3, 1.0, x.data(), 64, w.data(), 0, 0.5, y.data(), 128, &mask, index.data());
    for (const auto& v : y.download()) CHECK(jit::to_float(v) == 1.0f);
  }
}

// ---- the gated gemm (gate = silu, gelu, gelu_tanh; include/jit/kernels/gemm.hpp) ----------------

TEMPLATE_TEST_CASE("GPU gated gemm matches the float64 reference in every implementation, gate, layout and odd shape", "[gpu][gemm][gate]",
                   jit::half, jit::bfloat16) {
  if (!have_gpu()) return;
  const jit::DType t = jit::dtype_of<TestType>();
  // n: B's columns (a multiple of 16); odd m and k; edge tiles in M and N; padded leading dimensions
  // (8: still 16-byte rows; 3: not, which the Hopper text's copy engine cannot take)
  const Case cases[] = {{1, 16, 1, 0, 1, 0},       {7, 48, 5, 3, 1, 0},         {33, 80, 100, 8, 0.5, -1.5},
                        {130, 272, 333, 1, 1, 0},  {257, 528, 64, 16, 2, 0.25}, {129, 1040, 77, 0, -1, 1},
                        {300, 4096, 256, 0, 1, 0}};
  int checked = 0;
  for (auto g : {kernels::Gemm::Gate::Silu, kernels::Gemm::Gate::Gelu, kernels::Gemm::Gate::GeluTanh})
    for (Layout la : {Layout::RowMajor, Layout::ColMajor})
      for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
        auto p = params(t, la, lb);
        p.gate = g;
        for (const auto& impl : jit::implementations_for("gemm", gpu(), kernels::Gemm::to_params(p)))
          for (const Case& c : cases) {
            INFO(impl << " gate " << kernels::Gemm::gate_name(g) << " a " << (la == Layout::RowMajor ? "row" : "col") << " b "
                      << (lb == Layout::RowMajor ? "row" : "col") << " m " << c.m << " n " << c.n << " k " << c.k << " pad " << c.pad
                      << " alpha " << c.alpha << " beta " << c.beta);
            CHECK(gated_error<TestType>(p, impl, c) <= tolerance<TestType>());
            ++checked;
          }
      }
  CHECK(checked >= 3 * 4 * 7);  // the generic text takes every layout
}

TEST_CASE("GPU gated gemm in other tiles, few rows (split and own-tile routes), unaligned rows and an epilogue, and matches",
          "[gpu][gemm][gate][split]") {
  if (!have_gpu()) return;
  const auto silu = [](Layout a, Layout b) {
    auto p = params(jit::DType::bf16, a, b);
    p.gate = kernels::Gemm::Gate::Silu;
    return p;
  };
  const double tol = tolerance<jit::bfloat16>();
  // the default selection (cuda-sm90a on Hopper): few rows route to the generic split tiles or
  // cuda-sm90a's own 64 x 64 tile; unaligned leading dimensions (pad 3) to the generic text
  // (64 and 40 rows of 16384 columns and more: the 64 x 256 route, taken though the default tiles fill the SMs)
  const Case few[] = {{16, 4096, 1024, 0, 1, 0}, {8, 304, 696, 3, 0.5, -1.5}, {30, 1008, 800, 0, 1, 0}, {64, 2000, 513, 0, 1, 0},
                      {65, 1008, 640, 8, 1, 0.25}, {48, 2048, 1000, 0, 1, 0}, {40, 3008, 700, 3, 0.5, -1.5}, {24, 3200, 640, 0, 1, 0},
                      {64, 28672, 200, 0, 1, 0},   {40, 16400, 136, 0, 0.5, -1.5}};
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
      for (const Case& c : few) {
        INFO("a " << (la == Layout::RowMajor ? "row" : "col") << " b " << (lb == Layout::RowMajor ? "row" : "col") << " m " << c.m
                  << " n " << c.n << " k " << c.k << " pad " << c.pad << " beta " << c.beta);
        CHECK(gated_error<jit::bfloat16>(silu(la, lb), "", c) <= tol);
      }
  // every tile shape of each implementation's, with an epilogue (a tensor shaped like C)
  const std::int64_t tiles[][4] = {{128, 256, 64, 4}, {128, 128, 64, 5}, {128, 192, 64, 4}, {64, 256, 64, 5}, {64, 64, 64, 8}, {128, 256, 64, 3},
                                   {128, 128, 32, 3}, {64, 128, 32, 4},  {16, 128, 64, 4},  {64, 32, 32, 4},  {32, 16, 32, 3}};
  auto p = silu(Layout::RowMajor, Layout::RowMajor);
  for (const auto& impl : jit::implementations_for("gemm", gpu(), kernels::Gemm::to_params(p)))
    for (const auto& t : tiles) {
      auto q = p;
      q.tile_m = t[0], q.tile_n = t[1], q.tile_k = t[2], q.stages = t[3];
      jit::Selection sel;
      sel.implementation = impl;
      try {
        (void)jit::get<kernels::Gemm>(q, gpu(), sel);
      } catch (const jit::Error&) {
        continue;  // a tile this implementation does not take
      }
      for (const Case& c : {Case{200, 784, 300, 0, 1, 0}, Case{77, 400, 129, 8, 1, 0.5}}) {
        INFO(impl << " tile " << t[0] << "x" << t[1] << "x" << t[2] << " m " << c.m << " n " << c.n);
        CHECK(gated_error<jit::bfloat16>(q, impl, c) <= tol);
        CHECK(gated_error<jit::bfloat16>(q, impl, c, true) <= tol);
      }
    }
}

TEST_CASE("GPU gated gemm gives what the unfused pair gives (gemm, then silu_and_mul over rows of 16), and refuses f32", "[gpu][gemm][gate]") {
  if (!have_gpu()) return;
  using T = jit::bfloat16;
  const std::int64_t m = 300, n = 2048, k = 512;
  auto make = [](std::int64_t count) {
    return jitk_test::random_values<T>(static_cast<std::size_t>(count), -1, 1, [](double v) { return from_double<T>(v); });
  };
  jit::cuda::DeviceArray<T> a(make(m * k)), b(make(k * n)), fused(make(m * n / 2)), gu(make(m * n)), unfused(make(m * n / 2));
  auto p = params(jit::DType::bf16, Layout::RowMajor, Layout::RowMajor);
  auto plain = jit::get<kernels::Gemm>(p, gpu());
  p.gate = kernels::Gemm::Gate::Silu;
  auto gated = jit::get<kernels::Gemm>(p, gpu());
  CHECK(gated.implementation() == plain.implementation());
  gated(m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, fused.data(), n / 2);
  plain(m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, gu.data(), n);
  jit::get<kernels::SiluAndMul>({jit::DType::bf16, 8}, gpu())(m * n / 16, gu.data(), unfused.data());
  jit::cuda::synchronize();
  std::vector<double> want, got;
  for (const T& v : unfused.download()) want.push_back(as_double(v));
  for (const T& v : fused.download()) got.push_back(as_double(v));
  CHECK(ref::relative_l2_error(got, want) <= 1e-2);
  // f32 gated on a GPU: no implementation takes it, and the get says why
  auto f = params(jit::DType::f32, Layout::RowMajor, Layout::RowMajor);
  f.gate = kernels::Gemm::Gate::Silu;
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>(f, gpu()), Contains("f16 and bf16 only"));
}
