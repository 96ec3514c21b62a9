// block_sparse_matmul on the CPU: forward, backward_input and backward_weight against float64 dense
// references on random masks (block sizes 16, 32, 64; densities 0.1 to 1), odd row counts, padded
// leading dimensions, alpha/beta, beta = 0 over NaN; and the mask and argument errors.
#include "block_sparse_support.hpp"
#include "jit/cache.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/specializer.hpp"

namespace kernels = jit::kernels;
namespace bss = block_sparse_support;
using Catch::Matchers::Contains;

namespace {
const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

template <class T> std::vector<double> run_cpu(const kernels::BlockSparseMatmul::Params& p, const bss::Case& c, const jit::BlockMask& mask,
                                               const std::vector<T>& a, std::int64_t lda, const std::vector<T>& b, std::int64_t ldb,
                                               std::vector<T> out, std::int64_t ldc) {
  auto k = jit::get<kernels::BlockSparseMatmul>(p, jit::Target::cpu());
  k(c.m, c.alpha, a.data(), lda, b.data(), ldb, c.beta, out.data(), ldc, &mask, mask.index().data());
  return std::vector<double>(out.begin(), out.end());
}
}  // namespace

TEMPLATE_TEST_CASE("block_sparse_matmul's three products match dense references on the CPU", "[kernels][block_sparse]", float, double) {
  const double tol = sizeof(TestType) == 8 ? 1e-12 : 2e-5;
  bss::check_all<TestType>(sizeof(TestType) == 8 ? jit::DType::f64 : jit::DType::f32, tol,
                           [](double v) { return static_cast<TestType>(v); },
                           [](auto&&... args) { return run_cpu<TestType>(args...); });
}

TEST_CASE("BlockMask builds row-wise and column-wise indexes and refuses what it cannot hold", "[kernels][block_sparse]") {
  // 2 x 3 blocks: present (0,1), (1,0), (1,2)
  const jit::BlockMask mask(32, 48, 16, {0, 1, 0, 1, 0, 1});
  CHECK(mask.nnz() == 3);
  CHECK(mask.density() == Approx(0.5));
  // row_ptr [0 1 3], col_of [1 0 2], row_of [0 1 1], col_ptr [0 1 2 3], by_col [1 0 2],
  // rows_by_count [1 0] (row 1 holds two blocks), cols_by_count [0 1 2] (one each: in order)
  CHECK(mask.index() == std::vector<std::int32_t>{0, 1, 3, 1, 0, 2, 0, 1, 1, 0, 1, 2, 3, 1, 0, 2, 1, 0, 0, 1, 2});
  CHECK(mask.row_of(2) == 1);
  CHECK(mask.col_of(2) == 2);
  CHECK_THROWS_WITH(jit::BlockMask(30, 48, 16, {}), Contains("multiple of the block"));
  CHECK_THROWS_WITH(jit::BlockMask(32, 48, 24, {}), Contains("16, 32 or 64"));
  CHECK_THROWS_WITH(jit::BlockMask(32, 48, 16, {1, 1}), Contains("need 6"));
}

TEST_CASE("block_sparse_matmul refuses a mask of another block size, short leading dimensions, no index", "[kernels][block_sparse]") {
  const auto mask = jit::BlockMask::random(64, 64, 32, 0.5);
  std::vector<float> x(10 * 64), w(static_cast<std::size_t>(mask.nnz() * 32 * 32)), y(10 * 64);
  kernels::BlockSparseMatmul::Params p;
  p.block_size = 16;
  auto k16 = jit::get<kernels::BlockSparseMatmul>(p, jit::Target::cpu());
  CHECK_THROWS_WITH(k16(10, 1.0, x.data(), 64, w.data(), 0, 0.0, y.data(), 64, &mask, mask.index().data()), Contains("block_size 16"));
  p.block_size = 32;
  auto k = jit::get<kernels::BlockSparseMatmul>(p, jit::Target::cpu());
  CHECK_THROWS_WITH(k(10, 1.0, x.data(), 63, w.data(), 0, 0.0, y.data(), 64, &mask, mask.index().data()), Contains("lda = 63"));
  CHECK_THROWS_WITH(k(10, 1.0, x.data(), 64, w.data(), 0, 0.0, y.data(), 64, &mask, nullptr), Contains("no index"));
  CHECK_THROWS_WITH(k(10, 1.0, x.data(), 64, w.data(), 0, 0.0, y.data(), 64, nullptr, nullptr), Contains("no mask"));
  p.block_size = 48;
  CHECK_THROWS_WITH(jit::get<kernels::BlockSparseMatmul>(p, jit::Target::cpu()), Contains("16, 32 or 64"));
}

TEST_CASE("block_sparse_matmul with no blocks present: forward and backward_input give beta * C, backward_weight has nothing to write",
          "[kernels][block_sparse]") {
  const jit::BlockMask mask(32, 64, 16, std::vector<std::uint8_t>(8, 0));
  REQUIRE(mask.nnz() == 0);
  std::vector<float> x(5 * 32, 1.0f), y(5 * 64, 2.0f), w(1, 0.0f);
  kernels::BlockSparseMatmul::Params p;
  p.block_size = 16;
  auto k = jit::get<kernels::BlockSparseMatmul>(p, jit::Target::cpu());
  k(5, 1.0, x.data(), 32, w.data(), 0, 0.5, y.data(), 64, &mask, mask.index().data());
  for (float v : y) CHECK(v == 1.0f);
  p.op = kernels::BlockSparseMatmul::Op::BackwardWeight;
  auto kw = jit::get<kernels::BlockSparseMatmul>(p, jit::Target::cpu());
  kw(5, 1.0, x.data(), 32, y.data(), 64, 0.0, w.data(), 0, &mask, mask.index().data());
  CHECK(w[0] == 0.0f);  // untouched: there is no block to write
  CHECK_THROWS_WITH(jit::BlockMask(std::int64_t{1} << 40, std::int64_t{1} << 40, 64, {}), Contains("too many blocks"));
}

TEST_CASE("block_sparse_matmul's generic CUDA text tiles 16-bit 32-wide blocks 256 rows by default, others 128", "[kernels][block_sparse]") {
  const auto& def = jit::detail::find_kernel("block_sparse_matmul");
  const auto& cuda = jit::detail::generic_implementation(def, jit::Backend::Cuda);
  auto tile_m = [&](jit::DType t, std::int64_t block, std::int64_t chosen = 0) {
    kernels::BlockSparseMatmul::Params p;
    p.dtype = t, p.block_size = block, p.tile_m = chosen;
    const jit::ParamSet resolved = jit::detail::resolve_tile(cuda, kernels::BlockSparseMatmul::to_params(p));
    return std::get<std::int64_t>(*resolved.find("tile_m"));
  };
  CHECK(tile_m(jit::DType::bf16, 32) == 256);
  CHECK(tile_m(jit::DType::f16, 32) == 256);
  CHECK(tile_m(jit::DType::bf16, 64) == 128);
  CHECK(tile_m(jit::DType::bf16, 16) == 128);
  CHECK(tile_m(jit::DType::f32, 32) == 128);  // SIMT: not measured at 256
  CHECK(tile_m(jit::DType::bf16, 32, 64) == 64);  // a tile chosen by hand stays
  CHECK_THAT(jit::detail::describe_launch(cuda, kernels::BlockSparseMatmul::to_params({jit::DType::bf16, kernels::BlockSparseMatmul::Op::Forward, 32})),
             Contains("tile 256x32x32"));
}
