// gemm on the CPU against a float64 reference: every layout, odd sizes, tiles that do and do not
// divide them, leading dimensions past the minimum, alpha/beta, beta = 0 over NaN, an epilogue chain.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <thread>

#include "../examples/reference_kernels.hpp"
#include "jit/cache.hpp"
#include "jit/kernel_catalog.hpp"
#include "kernel_sources/gemm/routes.hpp"
#include "kernel_sources/gemm/tile_plans.hpp"
#include "runtime/gpu_launch.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "jit/specializer.hpp"
#include "jit/tuning.hpp"
#include "test_support.hpp"

namespace kernels = jit::kernels;
namespace ref = jitk_reference;
using Catch::Matchers::Contains;
using Layout = kernels::Gemm::Layout;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

template <class T> std::vector<T> random_vector(std::size_t n) {
  return jitk_test::random_values<T>(n, -1, 1, [](double v) { return static_cast<T>(v); });
}

// Element (i, j) of an r x c matrix stored row- or column-major with leading dimension ld.
std::size_t at(Layout l, std::int64_t i, std::int64_t j, std::int64_t ld) {
  return static_cast<std::size_t>(l == Layout::RowMajor ? i * ld + j : j * ld + i);
}

struct Shape {
  std::int64_t m, n, k;
};

template <class T>
void check_gemm(const kernels::Gemm::Params& p, Shape s, double alpha, double beta, std::int64_t pad) {
  const std::int64_t lda = (p.a_layout == Layout::RowMajor ? s.k : s.m) + pad;
  const std::int64_t ldb = (p.b_layout == Layout::RowMajor ? s.n : s.k) + pad;
  const std::int64_t ldc = s.n + pad;
  auto a = random_vector<T>(static_cast<std::size_t>(std::max<std::int64_t>(1, (p.a_layout == Layout::RowMajor ? s.m : s.k) * lda)));
  auto b = random_vector<T>(static_cast<std::size_t>(std::max<std::int64_t>(1, (p.b_layout == Layout::RowMajor ? s.k : s.n) * ldb)));
  auto c = random_vector<T>(static_cast<std::size_t>(std::max<std::int64_t>(1, s.m * ldc)));
  if (beta == 0) std::fill(c.begin(), c.end(), std::numeric_limits<T>::quiet_NaN());  // must not be read
  // the reference over C's whole storage: padding columns stay as they were
  std::vector<double> expected(c.begin(), c.end());
  for (std::int64_t i = 0; i < s.m; ++i)
    for (std::int64_t j = 0; j < s.n; ++j) {
      double sum = 0;
      for (std::int64_t k = 0; k < s.k; ++k)
        sum += double(a[at(p.a_layout, i, k, lda)]) * double(b[at(p.b_layout, k, j, ldb)]);
      expected[static_cast<std::size_t>(i * ldc + j)] = alpha * sum + (beta == 0 ? 0 : beta * double(c[static_cast<std::size_t>(i * ldc + j)]));
    }
  if (beta == 0)  // NaN stays in the padding, which the check then skips
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = s.n; j < ldc; ++j) expected[static_cast<std::size_t>(i * ldc + j)] = 0, c[static_cast<std::size_t>(i * ldc + j)] = 0;
  auto k = jit::get<kernels::Gemm>(p, jit::Target::cpu());
  k(s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  const double tol = sizeof(T) == 8 ? 1e-12 : 2e-5;
  CHECK(ref::relative_l2_error(c, expected) <= tol);
}

}  // namespace

TEMPLATE_TEST_CASE("gemm matches the reference in every layout, tile and odd size", "[kernels][gemm]", float, double) {
  const Shape shapes[] = {{1, 1, 1}, {7, 13, 5}, {33, 65, 129}, {100, 257, 31}};
  const std::int64_t tiles[][3] = {{4, 64, 256}, {1, 1, 1}, {3, 17, 7}, {16, 256, 64}};
  for (Layout la : {Layout::RowMajor, Layout::ColMajor})
    for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
      for (const auto& t : tiles) {
        kernels::Gemm::Params p{jit::dtype_of<TestType>(), la, lb, t[0], t[1], t[2]};
        for (const auto& s : shapes) {
          INFO("A " << (la == Layout::RowMajor ? "row" : "col") << ", B " << (lb == Layout::RowMajor ? "row" : "col")
                    << ", tile " << t[0] << "x" << t[1] << "x" << t[2] << ", m n k = " << s.m << " " << s.n << " " << s.k);
          check_gemm<TestType>(p, s, 1.0, 0.0, 0);
          check_gemm<TestType>(p, s, -0.5, 1.5, 3);
        }
      }
}

TEST_CASE("gemm with an epilogue chain: bias and activation in the same pass", "[kernels][gemm][chains]") {
  const std::int64_t m = 37, n = 70, kk = 19;
  auto a = random_vector<float>(m * kk), b = random_vector<float>(kk * n), bias = random_vector<float>(n);
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  kernels::Gemm::Params p;
  p.epilogue = "add_vec>gelu";
  auto k = jit::get<kernels::Gemm>(p, jit::Target::cpu());
  k(m, n, kk, 1.0, a.data(), kk, b.data(), n, 0.0, c.data(), n, jit::Operands{bias.data()});
  std::vector<double> expected(c.size());
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = bias[j];
      for (std::int64_t q = 0; q < kk; ++q) sum += double(a[i * kk + q]) * double(b[q * n + j]);
      expected[i * n + j] = 0.5 * sum * std::erfc(-sum / std::sqrt(2.0));
    }
  CHECK(ref::relative_l2_error(c, expected) <= 2e-5);
}

TEST_CASE("gemm refuses shapes, strides and tiles it cannot honour, before running", "[kernels][gemm]") {
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 42.0f);
  auto k = jit::get<kernels::Gemm>({}, jit::Target::cpu());
  CHECK_THROWS_WITH(k(4, 4, 4, 1.0, a.data(), 3, b.data(), 4, 0.0, c.data(), 4), Contains("lda = 3 is less than k"));
  CHECK_THROWS_WITH(k(4, 4, 4, 1.0, a.data(), 4, b.data(), 4, 0.0, c.data(), 2), Contains("ldc = 2 is less than n"));
  CHECK_THROWS_WITH(k(-1, 4, 4, 1.0, a.data(), 4, b.data(), 4, 0.0, c.data(), 4), Contains("negative"));
  CHECK_THROWS_WITH(k(4, 4, 4, 1.0, static_cast<const float*>(nullptr), 4, b.data(), 4, 0.0, c.data(), 4), Contains("'a' is null"));
  // sizes whose products pass int64 (m x n wrapped to INT64_MIN once let null operands through to
  // the kernel), and strides whose rows pass a 64-bit byte offset, are refused
  const auto nul = static_cast<const float*>(nullptr);
  CHECK_THROWS_WITH(k(std::int64_t{1} << 32, std::int64_t{1} << 31, 1, 1.0, nul, 1, nul, std::int64_t{1} << 31, 0.0,
                      static_cast<float*>(nullptr), std::int64_t{1} << 31),
                    Contains("64-bit"));
  // m x n x k = 2^63 (once wrapped negative: the null check skipped): the null operand is named
  CHECK_THROWS_WITH(k(std::int64_t{1} << 21, std::int64_t{1} << 21, std::int64_t{1} << 21, 1.0, nul, std::int64_t{1} << 21, nul,
                      std::int64_t{1} << 21, 0.0, c.data(), std::int64_t{1} << 21),
                    Contains("'a' is null"));
  CHECK_THROWS_WITH(k(4, 4, 4, 1.0, a.data(), std::int64_t{1} << 62, b.data(), 4, 0.0, c.data(), 4), Contains("A: 4 rows") && Contains("64-bit"));
  CHECK(c[0] == 42.0f);
  kernels::Gemm::Params big;
  big.tile_m = 64;
  big.tile_n = 256;
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>(big, jit::Target::cpu()), Contains("at most 4096"));
  // an empty product writes nothing; k = 0 scales C by beta
  k(0, 4, 4, 1.0, static_cast<const float*>(nullptr), 4, static_cast<const float*>(nullptr), 4, 0.0, static_cast<float*>(nullptr), 4);
  k(2, 4, 0, 1.0, static_cast<const float*>(nullptr), 1, static_cast<const float*>(nullptr), 4, 0.5, c.data(), 4);
  CHECK(c[0] == 21.0f);
  CHECK(c[8] == 42.0f);
}

TEST_CASE("gemm's tile sizes are part of the key", "[kernels][gemm]") {
  auto a = jit::get<kernels::Gemm>({jit::DType::f32, Layout::RowMajor, Layout::RowMajor, 4, 64, 256}, jit::Target::cpu());
  auto b = jit::get<kernels::Gemm>({jit::DType::f32, Layout::RowMajor, Layout::RowMajor, 8, 64, 256}, jit::Target::cpu());
  auto c = jit::get<kernels::Gemm>({jit::DType::f32, Layout::RowMajor, Layout::ColMajor, 4, 64, 256}, jit::Target::cpu());
  CHECK(a.cache_key() != b.cache_key());
  CHECK(a.cache_key() != c.cache_key());
}

// ---- autotuning (jit/tuning.hpp) ---------------------------------------------------------------

TEST_CASE("get_tuned times gemm's tiles once for a shape class, keeps the winner, and computes right", "[kernels][gemm][tuning]") {
  jit::cache::clear();  // no decisions from earlier cases
  const kernels::Gemm::Params base;
  auto k = jit::get_tuned<kernels::Gemm>(base, {200, 300, 100}, jit::Target::cpu());
  auto rows = jit::cache::tuning();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kernel == "gemm");
  CHECK(rows[0].shape_class == "m<=256,n<=512,k<=128");
  CHECK(rows[0].candidates == static_cast<std::int64_t>(kernels::Gemm::candidates(base, jit::Target{}).size()));
  CHECK(rows[0].choice == kernels::Gemm::to_params(k.params()).to_string());
  CHECK(rows[0].best_ms > 0);
  CHECK(rows[0].best_ms <= rows[0].default_ms);
  CHECK_THAT(rows[0].device, Contains("cpu "));
  // another shape of the same class: the same kernel, nothing timed again
  auto again = jit::get_tuned<kernels::Gemm>(base, {250, 260, 65}, jit::Target::cpu());
  CHECK(again.cache_key() == k.cache_key());
  CHECK(jit::cache::tuning().size() == 1);
  CHECK(jit::cache::tuning()[0].created == rows[0].created);
  // a different class is tuned on its own
  jit::get_tuned<kernels::Gemm>(base, {8, 8, 8}, jit::Target::cpu());
  CHECK(jit::cache::tuning().size() == 2);
  // the tuned kernel is a gemm like any other
  const std::int64_t m = 61, n = 77, kk = 45;
  auto a = random_vector<float>(m * kk), b = random_vector<float>(kk * n);
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  k(m, n, kk, 1.0, a.data(), kk, b.data(), n, 0.0, c.data(), n);
  std::vector<double> expected(c.size());
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t q = 0; q < kk; ++q) expected[i * n + j] += double(a[i * kk + q]) * double(b[q * n + j]);
  CHECK(ref::relative_l2_error(c, expected) <= 2e-5);
}

TEST_CASE("a tuning decision is reused by the next process, shown by jitk ls --tuning, removed by jitk clear", "[tool][gemm][tuning]") {
  jitk_test::TempDir cache;
  const auto env = jitk_test::cache_env(cache) + " JITK_LOG_LEVEL=info";
  auto first = jitk_test::run(jitk_test::kClient + " gemm-tuned 300 200 100", env);
  INFO(first.output);
  CHECK(first.exit_code == 0);
  CHECK_THAT(first.output, Contains("autotuned gemm") && Contains("gemm-tuned dtype=f32"));
  auto second = jitk_test::run(jitk_test::kClient + " gemm-tuned 290 210 90", env);
  INFO(second.output);
  CHECK_THAT(second.output, !Contains("autotuned"));
  auto choice = [](const std::string& out) { return out.substr(out.find("gemm-tuned ")); };
  CHECK(choice(second.output) == choice(first.output));
  auto ls = jitk_test::run(jitk_test::kTool + " ls --tuning", jitk_test::cache_env(cache));
  CHECK_THAT(ls.output, Contains("gemm (dtype=f32,a_layout=row,b_layout=row,tile_m=0,tile_n=0,tile_k=0,stages=0,cluster_m=0,gate=none,rope=none,head_dim=0,page_size=0) for m<=512,n<=256,k<=128") &&
                            Contains("1 tuning decisions"));
  CHECK(jitk_test::run(jitk_test::kTool + " clear", jitk_test::cache_env(cache)).exit_code == 0);
  CHECK_THAT(jitk_test::run(jitk_test::kTool + " ls --tuning", jitk_test::cache_env(cache)).output, Contains("0 tuning decisions"));
}

TEST_CASE("the tuners' stopwatch times the CPU's work on the host clock", "[kernels][tuning]") {
  jit::detail::Stopwatch watch(jit::Target::cpu());
  watch.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double ms = watch.stop_ms();
  CHECK(ms >= 19.0);
  CHECK(ms < 2000.0);
}

TEST_CASE("JITK_AUTOTUNE=0 gives the base params without timing anything", "[kernels][gemm][tuning]") {
  jit::cache::clear();
  ::setenv("JITK_AUTOTUNE", "0", 1);
  kernels::Gemm::Params base;
  base.tile_m = 3;
  auto k = jit::get_tuned<kernels::Gemm>(base, {100, 100, 100}, jit::Target::cpu());
  ::unsetenv("JITK_AUTOTUNE");
  CHECK(k.params().tile_m == 3);
  CHECK(jit::cache::tuning().empty());
}

TEST_CASE("with no cache on disk, get_tuned still tunes, and keeps the decision for the process only, saying so", "[tool][gemm][tuning]") {
  jitk_test::TempDir dir;
  jitk_test::write_file(dir.path() / "file", "not a folder");
  const std::string env = "JITK_CACHE_DIR='" + (dir.path() / "file" / "jitk").string() + "'";
  auto r = jitk_test::run(jitk_test::kClient + " gemm-tuned 64 64 64", env);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("gemm-tuned dtype=f32") && Contains("autotuning decisions last only for this process"));
}

TEST_CASE("gemm's tile params may be left out of a params set: they mean 0, the implementation's defaults", "[kernels][gemm]") {
  const auto& spec = [] {
    for (const auto& k : jit::registered_kernels())
      if (k.name == "gemm") return k;
    throw std::runtime_error("no gemm");
  }();
  CHECK(spec.params.size() == 13);  // with gate, rope, head_dim and page_size (all with fallbacks)
  // the type-erased path a manifest takes: only dtype and layouts given
  jit::ParamSet given{{"dtype", std::string("f32")}, {"a_layout", std::string("row")}, {"b_layout", std::string("col")}};
  jit::ParamSet typed = kernels::Gemm::to_params({jit::DType::f32, Layout::RowMajor, Layout::ColMajor});
  const auto a = jit::detail::get_kernel("gemm", given, jit::Target::cpu());
  const auto b = jit::detail::get_kernel("gemm", typed, jit::Target::cpu());
  CHECK(a.key == b.key);  // the same specialization, the same key
  // a user's kernel cannot declare a fallback its own range refuses
  jit::KernelSpec bad{"bad_fallback", "x", {{"n", {}, 1, 4, "n", false, std::int64_t{9}}}, {}};
  CHECK_THROWS_WITH(jit::register_kernel(bad), Contains("has a fallback it does not allow"));
}

TEST_CASE("gemm's cluster_m: Hopper runs pairs of blocks, the other implementations refuse it by name", "[kernels][gemm]") {
  kernels::Gemm::Params p{jit::DType::bf16, Layout::RowMajor, Layout::ColMajor};
  p.cluster_m = 2;
  const jit::ParamSet params = kernels::Gemm::to_params(p);
  const jit::Target hopper = jit::Target::parse("cuda:sm_90"), ampere = jit::Target::parse("cuda:sm_80");
  // decided on the host, no GPU needed: only the Hopper text takes clusters
  CHECK(jit::implementations_for("gemm", hopper, params) == std::vector<std::string>{"cuda-sm90a"});
  CHECK(jit::choose("gemm", params, hopper).implementation == "cuda-sm90a");
  CHECK_THROWS_WITH(jit::choose("gemm", params, ampere), Contains("cluster_m = 2: only cuda-sm90a (Hopper) runs blocks in clusters"));
  // the launch says so; cluster_m = 0 and 1 are one block at a time, and the same launch
  const auto& def = jit::detail::find_kernel("gemm");
  const jit::Implementation* sm90 = nullptr;
  for (const auto& i : def.implementations)
    if (i.name == "cuda-sm90a") sm90 = &i;
  REQUIRE(sm90 != nullptr);
  const jit::ParamSet resolved = jit::detail::validate_params(def, params, jit::Backend::Cuda);
  CHECK_THAT(jit::detail::describe_launch(*sm90, resolved), Contains("clusters of 2"));
  const jit::TilePlan plan = jit::detail::tile_plan(*sm90, resolved);
  CHECK(plan.cluster == 2);
  CHECK(plan.blocks_per_sm == 1);
  p.cluster_m = 0;
  CHECK(jit::detail::tile_plan(*sm90, kernels::Gemm::to_params(p)).cluster == 1);
  p.cluster_m = 1;
  CHECK_THAT(jit::detail::describe_launch(*sm90, kernels::Gemm::to_params(p)), !Contains("cluster"));
  // 64-wide tiles run two blocks an SM, but one in clusters
  p.tile_n = 64;
  CHECK(jit::detail::tile_plan(*sm90, kernels::Gemm::to_params(p)).blocks_per_sm == 2);
  p.cluster_m = 2;
  CHECK(jit::detail::tile_plan(*sm90, kernels::Gemm::to_params(p)).blocks_per_sm == 1);
  // on the CPU: refused before any compile, with the reason; past the range: the range
  kernels::Gemm::Params cpu{jit::DType::f32};
  cpu.cluster_m = 2;
  try {
    jit::get<kernels::Gemm>(cpu, jit::Target::cpu());
    FAIL("cluster_m = 2 was taken on the CPU");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::InvalidParams);
    CHECK_THAT(std::string(e.what()), Contains("cluster_m = 2") && Contains("cuda-sm90a"));
  }
  cpu.cluster_m = 3;
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>(cpu, jit::Target::cpu()), Contains("cluster_m") && Contains("[0, 2]"));
  cpu.cluster_m = 1;
  CHECK_NOTHROW(jit::get<kernels::Gemm>(cpu, jit::Target::cpu()));
}

TEST_CASE("cuda-sm90a's plans give the epilogue room to stage C where it fits beside the stages", "[kernels][gemm]") {
  const auto& def = jit::detail::find_kernel("gemm");
  const jit::Implementation* sm90 = nullptr;
  for (const auto& i : def.implementations)
    if (i.name == "cuda-sm90a") sm90 = &i;
  REQUIRE(sm90 != nullptr);
  auto plan = [&](std::int64_t tm, std::int64_t tn, std::int64_t stages, std::int64_t cluster = 0) {
    kernels::Gemm::Params p{jit::DType::bf16};
    p.tile_m = tm, p.tile_n = tn, p.tile_k = 64, p.stages = stages, p.cluster_m = cluster;
    return jit::detail::tile_plan(*sm90, jit::detail::validate_params(def, kernels::Gemm::to_params(p), jit::Backend::Cuda));
  };
  using jit::detail::sm90_shared_bytes;
  const std::int64_t staged = jit::detail::kSm90EpilogueRows;
  CHECK(staged == 64);  // the text's EPI_BYTES: two consumers' 64 x 64
  CHECK(sm90_shared_bytes(4, 128, 256, staged) - sm90_shared_bytes(4, 128, 256) == 2 * 64 * 64 * 2);
  // shared memory: the slots, and the epilogue's staging where it fits (twice for two blocks an SM)
  CHECK(plan(128, 256, 4).shared_bytes == sm90_shared_bytes(4, 128, 256, staged));
  CHECK(plan(128, 256, 4, 2).shared_bytes == sm90_shared_bytes(4, 128, 256, staged));  // clusters too
  CHECK(plan(64, 256, 5).shared_bytes == sm90_shared_bytes(5, 64, 256, staged));
  CHECK(plan(64, 64, 4).blocks_per_sm == 2);
  CHECK(plan(64, 64, 4).shared_bytes == sm90_shared_bytes(4, 64, 64, staged));
  CHECK(plan(64, 64, 6).shared_bytes == sm90_shared_bytes(6, 64, 64, staged));  // 2 x 113 KB
  CHECK(plan(64, 64, 7).blocks_per_sm == 2);  // 2 x 129 KB with the staging would not fit: without it
  CHECK(plan(64, 64, 7).shared_bytes == sm90_shared_bytes(7, 64, 64));
  // 128 x 128 x 6: 198 KB of slots, 214 KB with the staging; x 7 stages: 231 KB of slots alone
  CHECK(plan(128, 128, 6).shared_bytes == sm90_shared_bytes(6, 128, 128, staged));
  CHECK(plan(128, 128, 7).shared_bytes == sm90_shared_bytes(7, 128, 128));
  CHECK(plan(128, 128, 7).problem.empty());
  CHECK(sm90_shared_bytes(7, 128, 128, staged) > jit::detail::kMaxSharedBytes);
  // 64-row tiles (decode) may split K over a cluster of up to 8 where the launch's tiles are few;
  // 128-row tiles and clusters along M never do
  for (std::int64_t tn : {64, 128, 192, 256}) {
    INFO("64 x " << tn);
    CHECK(plan(64, tn, 4).max_split_k == 8);
    CHECK(plan(64, tn, 4, 2).max_split_k == 1);
    CHECK(plan(128, tn, 4).max_split_k == 1);
    // the split's partial sums (64 x (tile_n + 8) floats) fit in the slots of the fewest stages
    CHECK(64 * (tn + 8) * 4 <= 2 * (64 + tn) * 64 * 2);
  }
}

TEST_CASE("a launch in clusters covers every tile row pair: odd numbers of tile rows round up", "[kernels][gemm]") {
  jit::detail::LaunchShape shape;
  shape.tile_m = 128, shape.tile_n = 256, shape.block = 384;
  auto grid = [&](std::int64_t m, std::int64_t n, int cluster) {
    shape.cluster = cluster;
    jit::detail::ArgPack args;
    args.work_items = m, args.work_columns = n;
    return jit::detail::GpuLaunch(args, shape).grid;
  };
  CHECK(grid(128, 2048, 1) == 8);
  CHECK(grid(128, 2048, 2) == 16);  // one tile row: each column's pair has a second block with nothing to store
  CHECK(grid(300, 300, 2) == 8);    // 3 tile rows -> 2 pairs, 2 columns
  CHECK(grid(256, 256, 2) == 2);
  CHECK(grid(1, 1, 2) == 2);
}

TEST_CASE("a launch splits K over a cluster only when its tiles leave most SMs idle", "[kernels][gemm]") {
  jit::detail::LaunchShape shape;
  shape.tile_m = 16, shape.tile_n = 128, shape.tile_k = 64, shape.max_split_k = 8;
  using jit::detail::split_k_for;
  const int sms = 132;
  CHECK(split_k_for(32, 4096, shape, sms) == 4);   // decode 16 x 4096 x 4096: 32 tiles -> 128 blocks
  CHECK(split_k_for(2, 4096, shape, sms) == 8);    // at most 8 a cluster
  CHECK(split_k_for(2, 700, shape, sms) == 2);     // 11 slices: at least 4 each
  CHECK(split_k_for(2, 255, shape, sms) == 1);     // 4 slices: nothing to share
  CHECK(split_k_for(66, 4096, shape, sms) == 2);   // half the SMs busy: two each fill them
  CHECK(split_k_for(67, 4096, shape, sms) == 1);   // over half: tiles enough
  CHECK(split_k_for(32, 0, shape, sms) == 1);      // K unknown (or empty)
  shape.max_split_k = 1;
  CHECK(split_k_for(2, 4096, shape, sms) == 1);    // a plan that cannot split
  shape.max_split_k = 8;
  CHECK(split_k_for(5, 22 * 64, shape, sms) == 5);  // not a power of two: 22 slices as 4 + 4 + 5 + 4 + 5
  // a plan that fits two blocks an SM (cuda-sm90a's 64 x 64 tiles): twice the blocks
  shape.tile_m = 64, shape.tile_n = 64, shape.blocks_per_sm = 2;
  CHECK(split_k_for(64, 4096, shape, sms) == 4);   // decode's o projection, 64 x 4096 x 4096: 256 blocks
  shape.blocks_per_sm = 1;
  CHECK(split_k_for(64, 4096, shape, sms) == 2);
}

TEST_CASE("gemm's few-rows routes: decode on cuda-sm90a takes 64-row tiles, gate/up's wide ones even where the default tiles fill the SMs",
          "[kernels][gemm]") {
  using jit::detail::FewRowsRoute;
  const auto routes = jit::detail::few_rows_params(kernels::Gemm::to_params(kernels::Gemm::Params{jit::DType::bf16}));
  // the first route that takes a launch of m x n whose default tiles leave half the SMs idle (idle) or not
  auto pick = [&](std::int64_t m, std::int64_t n, bool idle) -> const FewRowsRoute* {
    for (const auto& r : routes)
      if (jit::detail::few_rows_route_takes(m, n, idle, r.min_rows, r.max_rows, r.min_columns, r.any_tiles)) return &r;
    return nullptr;
  };
  auto tile = [](const FewRowsRoute* r) {
    REQUIRE(r != nullptr);
    const auto at = [&](const char* name) { return std::get<std::int64_t>(*r->params.find(name)); };
    return std::to_string(at("tile_m")) + "x" + std::to_string(at("tile_n")) + "x" + std::to_string(at("tile_k")) + "x" +
           std::to_string(at("stages")) + (r->own ? " own" : " generic");
  };
  CHECK(tile(pick(64, 28672, false)) == "64x256x64x4 own");  // the Llama-3-8B MLP's gate/up at batch 64: 112 default tiles
  CHECK(tile(pick(33, 16384, true)) == "64x256x64x4 own");
  CHECK(tile(pick(64, 4096, true)) == "64x64x64x8 own");     // o, down (K split over clusters of 2 at launch)
  CHECK(tile(pick(64, 6144, true)) == "64x64x64x8 own");     // qkv
  CHECK(tile(pick(32, 4096, true)) == "64x64x64x8 own");
  CHECK(tile(pick(16, 4096, true)) == "16x128x64x4 generic");
  CHECK(tile(pick(64, 1024, true)) == "64x128x64x4 generic");
  CHECK(pick(64, 4096, false) == nullptr);   // the default tiles fill the SMs: only the wide route is taken then
  CHECK(pick(32, 28672, false) == nullptr);  // 17-32 rows: not measured there
  CHECK(pick(65, 28672, false) == nullptr);
  CHECK(pick(65, 4096, true) == nullptr);
  // explicit tiles and f32 (no cuda-sm90a): no own routes
  kernels::Gemm::Params tiled{jit::DType::bf16};
  tiled.tile_m = 64, tiled.tile_n = 64, tiled.tile_k = 64, tiled.stages = 8;
  CHECK(jit::detail::few_rows_params(kernels::Gemm::to_params(tiled)).empty());
  for (const auto& r : jit::detail::few_rows_params(kernels::Gemm::to_params(kernels::Gemm::Params{jit::DType::f32}))) CHECK_FALSE(r.own);
}

TEST_CASE("a split launch lowers its split until every tile's cluster runs at once", "[kernels][gemm]") {
  using jit::detail::split_that_fits;
  int active[9] = {0, 0, 66, 44, 30, 24, 18, 14, 14};  // clusters of each size the device runs at once
  CHECK(split_that_fits(4, 32, active) == 3);   // 32 clusters of 4 do not fit (30): of 3 they do (44)
  CHECK(split_that_fits(4, 30, active) == 4);
  CHECK(split_that_fits(8, 16, active) == 6);   // 14 clusters of 8 or of 7 at once; of 6, 18: 16 tiles fit
  CHECK(split_that_fits(2, 64, active) == 2);
  CHECK(split_that_fits(2, 67, active) == 1);   // no cluster of 2 for each: no split
  CHECK(split_that_fits(1, 500, active) == 1);
  int unknown[9] = {};
  CHECK(split_that_fits(8, 16, unknown) == 8);  // the driver could not say: as chosen
}

TEST_CASE("a launch finishes the tiles past its last whole wave stream-K only where that saves time", "[kernels][gemm]") {
  jit::detail::LaunchShape shape;
  shape.tile_m = 128, shape.tile_n = 256, shape.tile_k = 32, shape.stream_k = true;
  using jit::detail::stream_k_for;
  const std::int64_t wave = 132;
  auto sk = stream_k_for(512, 4096, shape, wave);  // f32 4096^3: 3 waves + 116 tiles
  CHECK(sk.dp_blocks == 396);
  CHECK(sk.sk_blocks == 132);
  sk = stream_k_for(144, 300, shape, wave);  // 12 tiles past a wave, 10 slices: 8 slices a block at least
  CHECK(sk.dp_blocks == 132);
  CHECK(sk.sk_blocks == 15);
  CHECK(stream_k_for(528, 4096, shape, wave).sk_blocks == 0);  // whole waves
  CHECK(stream_k_for(100, 4096, shape, wave).sk_blocks == 0);  // under a wave
  CHECK(stream_k_for(1055, 4096, shape, wave).sk_blocks == 0);  // 7 waves + 131 tiles: saves under 1%
  CHECK(stream_k_for(512, 224, shape, wave).sk_blocks == 0);   // 7 slices: too few to share
  CHECK(stream_k_for(133, 256, shape, wave).sk_blocks == 0);   // 1 tile's 8 slices: no finer than whole tiles
  CHECK(stream_k_for(512, 4096, shape, 0).sk_blocks == 0);     // the driver cannot say how many blocks run at once
  shape.stream_k = false;
  CHECK(stream_k_for(512, 4096, shape, wave).sk_blocks == 0);  // a plan without it
}

TEST_CASE("a copy of a launch's arguments holds its own values, and one can be set without touching the original", "[kernels][gemm]") {
  jit::detail::ArgPack args;
  int x = 0, y = 0;
  args.add_i64(7);
  args.add_pointer(&x);
  args.add_i64(100);
  args.work_items = 5, args.work_columns = 6, args.work_depth = 7, args.min_grain = 8;
  args.stream.handle = &y;
  args.matrices[0].arg = 1;
  args.matrices[1].inner = 9;
  args.matrix_count = 2;
  jit::detail::ArgPack copy = args;
  REQUIRE(copy.size() == 3);
  for (int i = 0; i < copy.size(); ++i) CHECK(copy.pointers()[i] != args.pointers()[i]);  // its own storage
  copy.set_pointer(1, &y);
  copy.set_i64(2, 200);
  auto i64_at = [](const jit::detail::ArgPack& p, int i) { return *static_cast<const std::int64_t*>(p.pointers()[i]); };
  auto ptr_at = [](const jit::detail::ArgPack& p, int i) { return *static_cast<void* const*>(p.pointers()[i]); };
  CHECK(i64_at(copy, 0) == 7);
  CHECK(ptr_at(copy, 1) == &y);
  CHECK(i64_at(copy, 2) == 200);
  CHECK(ptr_at(args, 1) == &x);  // the original as it was
  CHECK(i64_at(args, 2) == 100);
  // Every other field as it was, whether copied, assigned over another pack, or moved.
  jit::detail::ArgPack assigned;
  assigned.add_i64(1);
  assigned = args;
  jit::detail::ArgPack moved_from = args;
  jit::detail::ArgPack moved = std::move(moved_from);
  for (const jit::detail::ArgPack* p : {&copy, &assigned, &moved}) {
    CHECK(p->work_items == 5);
    CHECK(p->work_columns == 6);
    CHECK(p->work_depth == 7);
    CHECK(p->min_grain == 8);
    CHECK(p->stream.handle == &y);
    CHECK(p->matrices[0].arg == 1);
    CHECK(p->matrices[1].inner == 9);
    CHECK(p->matrix_count == 2);
  }
  const auto inside = [](const jit::detail::ArgPack& p, int i) {
    const auto* at = static_cast<const char*>(p.pointers()[i]);
    return at >= reinterpret_cast<const char*>(&p) && at < reinterpret_cast<const char*>(&p + 1);
  };
  for (const jit::detail::ArgPack* p : {&assigned, &moved}) {
    REQUIRE(p->size() == 3);
    for (int i = 0; i < 3; ++i) CHECK(inside(*p, i));  // its own storage
    CHECK(ptr_at(*p, 1) == &x);
    CHECK(i64_at(*p, 2) == 100);
  }
  CHECK_THROWS_AS(copy.set_i64(3, 1), jit::Error);  // never packed
  copy = copy;  // self-assignment keeps it
  CHECK(i64_at(copy, 2) == 200);
}

TEST_CASE("the generic CUDA text's f32 gemm at default tiles says which operands it packs, and other params pack none", "[kernels][gemm]") {
  const auto& def = jit::detail::find_kernel("gemm");
  const auto& cuda = jit::detail::generic_implementation(def, jit::Backend::Cuda);
  auto launch = [&](jit::DType t, Layout a, Layout b, std::int64_t tile_m = 0) {
    kernels::Gemm::Params p;
    p.dtype = t, p.a_layout = a, p.b_layout = b, p.tile_m = tile_m, p.tile_n = tile_m ? 128 : 0;
    return jit::detail::describe_launch(cuda, kernels::Gemm::to_params(p), "gemm");
  };
  const Layout row = Layout::RowMajor, col = Layout::ColMajor;
  CHECK_THAT(launch(jit::DType::f32, row, col), Contains("packs A and B along M/N when large"));
  CHECK_THAT(launch(jit::DType::f32, row, row), Contains("packs A along M/N when large"));
  CHECK_THAT(launch(jit::DType::f32, col, col), Contains("packs B along M/N when large"));
  CHECK_THAT(launch(jit::DType::f32, col, row), !Contains("packs"));       // nothing lies along K
  CHECK_THAT(launch(jit::DType::f32, row, col, 128), !Contains("packs"));  // tiles chosen by hand
  CHECK_THAT(launch(jit::DType::bf16, row, col), !Contains("packs"));      // 16-bit reads any layout as it is
  CHECK(jit::detail::packable_along_k("block_sparse_matmul", cuda, kernels::Gemm::to_params({})).a == false);
}

TEST_CASE("a large f32 launch packs its operands lying along K, a small one or one along M and N does not", "[kernels][gemm]") {
  using jit::detail::packing_for;
  auto is = [](jit::detail::Packing p, bool a, bool b) { return p.a == a && p.b == b; };
  CHECK(is(packing_for(4096, 4096, 4096, true, true), true, true));     // A row-major, B column-major: both
  CHECK(is(packing_for(4096, 4096, 4096, true, false), true, false));   // A row-major, B row-major: A
  CHECK(is(packing_for(4096, 4096, 4096, false, true), false, true));   // B column-major
  CHECK(is(packing_for(4096, 4096, 4096, false, false), false, false)); // nothing lies along K
  CHECK(is(packing_for(4096, 4096, 1024, true, true), true, true));    // the smallest product packed
  CHECK(is(packing_for(4096, 4096, 1023, true, true), false, false));   // under it
  CHECK(is(packing_for(2048, 2048, 2048, true, true), false, false));   // 2048^3: the transposes cost more than they save
  CHECK(is(packing_for(3072, 3072, 3072, true, true), true, true));     // 3072^3: they pay
  CHECK(is(packing_for(8192, 3071, 4096, true, true), false, true));    // the other side just short of 3072
  CHECK(is(packing_for(16384, 2048, 4096, true, true), false, true));   // N small: A's transpose would cost 3.4%; B's pays
  CHECK(is(packing_for(2048, 16384, 4096, true, true), true, false));   // M small: B's would not pay
  CHECK(is(packing_for(4096, 4096, 0, true, true), false, false));      // K = 0: nothing to read
  CHECK(is(packing_for(0, 4096, 4096, true, true), false, false));
}
