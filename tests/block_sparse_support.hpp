// block_sparse_matmul's three products against float64 dense references, for any backend: the
// caller gives the memory (host vectors for the CPU, device arrays for the GPU) through `Run`.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/block_sparse.hpp"
#include "jit/kernels.hpp"
#include "gpu_support.hpp"
#include "test_support.hpp"

namespace block_sparse_support {

using Op = jit::kernels::BlockSparseMatmul::Op;


struct Case {
  std::int64_t m, k, n, block;
  double density;
  std::int64_t pad;  // added to every leading dimension
  double alpha, beta;
  std::int64_t out_pad = -1;  // the output's instead, where >= 0
};

// Dense K x N from the mask's blocks.
inline std::vector<double> dense(const jit::BlockMask& mask, const std::vector<double>& values) {
  const std::int64_t bs = mask.block(), N = mask.cols();
  std::vector<double> w(static_cast<std::size_t>(mask.rows() * N), 0.0);
  for (std::int64_t id = 0; id < mask.nnz(); ++id)
    for (std::int64_t i = 0; i < bs; ++i)
      for (std::int64_t j = 0; j < bs; ++j)
        w[static_cast<std::size_t>((mask.row_of(id) * bs + i) * N + mask.col_of(id) * bs + j)] =
            values[static_cast<std::size_t>(id * bs * bs + i * bs + j)];
  return w;
}

// The expected output storage for `op` given the inputs (as doubles, already rounded to the type).
inline std::vector<double> reference(Op op, const Case& c, const jit::BlockMask& mask, const std::vector<double>& a, std::int64_t lda,
                                     const std::vector<double>& b, std::int64_t ldb, std::vector<double> out, std::int64_t ldc) {
  const std::int64_t K = mask.rows(), N = mask.cols(), bs = mask.block();
  auto blend = [&](double& o, double v) { o = c.alpha * v + (c.beta == 0 ? 0 : c.beta * o); };
  if (op == Op::Forward || op == Op::BackwardInput) {
    const auto w = dense(mask, b);
    const std::int64_t inner = op == Op::Forward ? K : N, cols = op == Op::Forward ? N : K;
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        double sum = 0;
        for (std::int64_t k = 0; k < inner; ++k)
          sum += a[static_cast<std::size_t>(i * lda + k)] *
                 (op == Op::Forward ? w[static_cast<std::size_t>(k * N + j)] : w[static_cast<std::size_t>(j * N + k)]);
        blend(out[static_cast<std::size_t>(i * ldc + j)], sum);
      }
    return out;
  }
  for (std::int64_t id = 0; id < mask.nnz(); ++id)
    for (std::int64_t i = 0; i < bs; ++i)
      for (std::int64_t j = 0; j < bs; ++j) {
        double sum = 0;
        for (std::int64_t k = 0; k < c.m; ++k)
          sum += a[static_cast<std::size_t>(k * lda + mask.row_of(id) * bs + i)] * b[static_cast<std::size_t>(k * ldb + mask.col_of(id) * bs + j)];
        blend(out[static_cast<std::size_t>(id * bs * bs + i * bs + j)], sum);
      }
  return out;
}

// Shapes of a case's three matrices for `op`: a (rows x lda), b, out; b and out of the blocks are nnz*bs*bs.
struct Layout {
  std::int64_t a_rows, lda, b_size, ldb, out_size, ldc;
};
inline Layout layout(Op op, const Case& c, const jit::BlockMask& mask) {
  const std::int64_t K = mask.rows(), N = mask.cols(), values = mask.nnz() * mask.block() * mask.block();
  const std::int64_t out_pad = c.out_pad >= 0 ? c.out_pad : c.pad;
  switch (op) {
    case Op::Forward: return {c.m, K + c.pad, values, 0, c.m * (N + out_pad), N + out_pad};
    case Op::BackwardInput: return {c.m, N + c.pad, values, 0, c.m * (K + out_pad), K + out_pad};
    case Op::BackwardWeight: break;
  }
  return {c.m, K + c.pad, c.m * (N + c.pad), N + c.pad, values, 0};
}

inline const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {1, 48, 80, 16, 0.5, 0, 1, 0},     {7, 96, 64, 32, 0.3, 3, 1, 0},   {77, 128, 192, 64, 0.25, 8, 0.5, -1},
      {130, 64, 128, 64, 1.0, 0, 1, 0},  {33, 80, 48, 16, 0.6, 8, 2, 0.5}, {200, 192, 128, 32, 0.1, 0, 1, 1},
      // more 64-row tiles than an H100's persistent consumers (264): their snake goes round twice
      {2200, 64, 512, 64, 0.5, 8, 1, 0.5},
      // 64-wide blocks, the inputs' rows 16-byte aligned (Hopper's copy engine takes them) but not the
      // output's (ldc odd): Hopper's staged stores go element by element
      {65, 128, 64, 64, 0.5, 0, 1, 0.25, 3},
  };
  return all;
}

// Runs every case and op through `run` (which launches on the caller's memory and returns the
// output storage as doubles) and checks it against the reference within `tol`.
template <class T, class FromDouble, class Run>
void check_all(jit::DType dtype, double tol, FromDouble from_double, Run run) {
  for (Op op : {Op::Forward, Op::BackwardInput, Op::BackwardWeight})
    for (const Case& c : cases()) {
      const auto mask = jit::BlockMask::random(c.k, c.n, c.block, c.density, static_cast<std::uint64_t>(c.m * 31 + c.k));
      const Layout l = layout(op, c, mask);
      auto make = [&](std::int64_t n) {
        auto v = jitk_test::random_values<T>(static_cast<std::size_t>(std::max<std::int64_t>(1, n)), -1, 1, from_double);
        return v;
      };
      const std::int64_t b_rows = op == Op::BackwardWeight ? c.m : 1;
      auto a = make(l.a_rows * l.lda), b = make(op == Op::BackwardWeight ? b_rows * l.ldb : l.b_size), out = make(l.out_size);
      jit::kernels::BlockSparseMatmul::Params p;
      p.dtype = dtype;
      p.op = op;
      p.block_size = c.block;
      auto widen = [](const std::vector<T>& v) {
        std::vector<double> d;
        for (const T& x : v) d.push_back(jitk_test::as_double(x));
        return d;
      };
      const auto expected = reference(op, c, mask, widen(a), l.lda, widen(b), l.ldb, widen(out), l.ldc);
      INFO(jit::kernels::BlockSparseMatmul::op_name(op) << " m " << c.m << " k " << c.k << " n " << c.n << " block " << c.block
                                                         << " nnz " << mask.nnz() << " pad " << c.pad << " alpha " << c.alpha
                                                         << " beta " << c.beta);
      if (c.beta == 0) {  // beta = 0 must not read the output: what the op writes starts as NaN
        const T nan = from_double(NAN);
        if (op == Op::BackwardWeight) {
          std::fill(out.begin(), out.end(), nan);
        } else {
          const std::int64_t cols = op == Op::Forward ? mask.cols() : mask.rows();
          for (std::int64_t i = 0; i < c.m; ++i)
            for (std::int64_t j = 0; j < cols; ++j) out[static_cast<std::size_t>(i * l.ldc + j)] = nan;
        }
      }
      const std::vector<double> got = run(p, c, mask, a, l.lda, b, l.ldb, out, l.ldc);
      bool nan = false;
      for (double v : got) nan = nan || std::isnan(v);
      CHECK_FALSE(nan);
      CHECK(jitk_reference::relative_l2_error(got, expected) <= tol);
    }
}

}  // namespace block_sparse_support
