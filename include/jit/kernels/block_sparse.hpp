// block_sparse_matmul: matmul with a block-sparse W on a BlockMask's support (its descriptor).
#pragma once
#include "jit/kernels/common.hpp"
#include "jit/block_sparse.hpp"

namespace jit::kernels {

// Matmul with W (K x N) block-sparse on a BlockMask's support (jit/block_sparse.hpp); the dense
// matrices are row-major. `op` is the product:
//   Forward         Y = alpha X W + beta Y        a = X (m x K), b = W's values, c = Y (m x N)
//   BackwardInput   dX = alpha dY W^T + beta dX   a = dY (m x N), b = W's values, c = dX (m x K)
//   BackwardWeight  dW = alpha X^T dY + beta dW   a = X, b = dY, c = dW's values (W's support only)
// W's values are its mask.nnz() blocks, block_size x block_size row-major each, in the mask's
// id order. `index` is mask.index() where the kernel runs (a device copy for GPU launches).
// beta == 0 does not read c. tile_m and stages: GPU tiles (0: the implementation's default).
struct BlockSparseMatmul {
  static constexpr const char* name = "block_sparse_matmul";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "m, alpha, a, lda, b, ldb, beta, c, ldc, mask, index";
  enum class Op : std::uint8_t { Forward, BackwardInput, BackwardWeight };
  struct Params {
    DType dtype = DType::f32;
    Op op = Op::Forward;
    std::int64_t block_size = 64;
    std::int64_t tile_m = 0;
    std::int64_t stages = 0;
    auto fields() const { return std::tie(dtype, op, block_size, tile_m, stages); }
  };
  struct Args {
    std::int64_t m;  // rows of X and dY
    double alpha;
    ConstPtr a;
    std::int64_t lda;
    ConstPtr b;
    std::int64_t ldb;  // backward_weight: dY's; otherwise unused
    double beta;
    MutPtr c;
    std::int64_t ldc;  // forward, backward_input: Y's or dX's; backward_weight: unused
    const BlockMask* mask;
    const std::int32_t* index;
  };
  static const char* op_name(Op op) {
    return op == Op::Forward ? "forward" : op == Op::BackwardInput ? "backward_input" : "backward_weight";
  }
  static ParamSet to_params(const Params& p) {
    return {{"dtype", std::string(dtype_name(p.dtype))}, {"op", std::string(op_name(p.op))}, {"block_size", p.block_size},
            {"tile_m", p.tile_m}, {"stages", p.stages}};
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    auto fail = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, std::string(name) + ": " + what); };
    if (!a.mask) fail("no mask");
    const BlockMask& mask = *a.mask;
    if (mask.block() != p.block_size)
      fail("the mask's blocks are " + std::to_string(mask.block()) + " wide; the kernel was specialized for block_size " +
           std::to_string(p.block_size));
    if (!a.index) fail("no index (mask.index() where the kernel runs)");
    jit::detail::check_non_negative(name, "m", a.m);
    const std::int64_t K = mask.rows(), N = mask.cols(), bs = mask.block();
    auto check_ld = [&](const char* ld, std::int64_t value, std::int64_t least, const char* of) {
      if (value < least) fail(std::string(ld) + " = " + std::to_string(value) + " is less than " + of + " (" + std::to_string(least) + ")");
    };
    const std::int64_t values = mask.nnz() * bs * bs;
    switch (p.op) {
      case Op::Forward:
        check_ld("lda", a.lda, K, "X's columns, the mask's rows");
        check_ld("ldc", a.ldc, N, "Y's columns, the mask's columns");
        detail::check_tensors(name, p.dtype, a.m, {{"a", a.a}, {"c", ConstPtr(a.c)}});
        detail::check_tensors(name, p.dtype, values, {{"b", a.b}});
        break;
      case Op::BackwardInput:
        check_ld("lda", a.lda, N, "dY's columns, the mask's columns");
        check_ld("ldc", a.ldc, K, "dX's columns, the mask's rows");
        detail::check_tensors(name, p.dtype, a.m, {{"a", a.a}, {"c", ConstPtr(a.c)}});
        detail::check_tensors(name, p.dtype, values, {{"b", a.b}});
        break;
      case Op::BackwardWeight:
        check_ld("lda", a.lda, K, "X's columns, the mask's rows");
        check_ld("ldb", a.ldb, N, "dY's columns, the mask's columns");
        detail::check_tensors(name, p.dtype, a.m, {{"a", a.a}, {"b", a.b}});
        detail::check_tensors(name, p.dtype, values, {{"c", ConstPtr(a.c)}});
        break;
    }
    const DType scalar = detail::scalar_type(p.dtype);
    out.add_i64(a.m);
    out.add_i64(N);
    out.add_i64(K);
    out.add_scalar(a.alpha, scalar);
    out.add_pointer(a.a.data);
    out.add_i64(a.lda);
    out.add_pointer(a.b.data);
    out.add_i64(p.op == Op::BackwardWeight ? a.ldb : bs);
    out.add_scalar(a.beta, scalar);
    out.add_pointer(a.c.data);
    out.add_i64(p.op == Op::BackwardWeight ? bs : a.ldc);
    out.add_pointer(a.index);
    out.add_i64(mask.block_rows());
    out.add_i64(mask.block_cols());
    out.add_i64(mask.nnz());
    // forward: rows x Y's columns; backward_input: rows x dX's columns; backward_weight: the rows of dW's blocks
    const bool weight = p.op == Op::BackwardWeight;
    out.work_items = weight ? mask.nnz() * bs : a.m;
    out.work_columns = weight ? bs : p.op == Op::Forward ? N : K;
    if (!weight && a.m == 0) out.work_items = 0;
    if (weight && a.m == 0 && a.beta == 1) out.work_items = 0;  // dW += 0
    out.min_grain = weight ? bs : 8;
    // The operands as rows of their contiguous dimension, for kernels that load through the copy
    // engine: X or dY (m rows), then W's blocks (nnz * block rows of block) or dY.
    const std::int64_t e = static_cast<std::int64_t>(dtype_size(p.dtype));
    const std::int64_t a_cols = p.op == Op::BackwardInput ? N : K;
    // (X's columns are K for forward, dY's the contraction for backward_input; backward_weight reads
    // X's columns and dY's as M and N; W's blocks hold N in their rows for forward)
    out.matrices[0] = {a.a.data, p.dtype, a_cols, a.m, a.lda * e, !weight};
    out.matrices[1] = weight ? jit::detail::ArgPack::Matrix{a.b.data, p.dtype, N, a.m, a.ldb * e, false}
                             : jit::detail::ArgPack::Matrix{a.b.data, p.dtype, bs, mask.nnz() * bs, bs * e, p.op == Op::BackwardInput};
    out.matrix_count = 2;
  }
};

}  // namespace jit::kernels
