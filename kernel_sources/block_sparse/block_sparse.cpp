// block_sparse_matmul on the CPU, W (K x N) block-sparse with BLOCK_SIZE blocks (values: the
// present blocks, row-major each, in block-row order; `index` as jit/block_sparse.hpp lays it out):
//   forward          Y = alpha X W + beta Y      work items: rows of X
//   backward_input   dX = alpha dY W^T + beta dX work items: rows of dY
//   backward_weight  dW = alpha X^T dY + beta dW on W's support; work items: rows of dW's blocks
// Each walks only the blocks present; beta == 0 does not read the output.
#include "jitk_cpu.h"

constexpr i64 BS = JITK_BLOCK_SIZE;

static inline void put(T* __restrict__ out, const T* acc, T alpha, T beta) {
  for (i64 n = 0; n < BS; ++n) out[n] = beta == T(0) ? alpha * acc[n] : alpha * acc[n] + beta * out[n];
}

JITK_CPU_KERNEL {
  const i64 M = JITK_ARG(0, i64);
  const T alpha = JITK_ARG(3, T);
  const T* __restrict__ a = JITK_ARG(4, const T*);
  const i64 lda = JITK_ARG(5, i64);
  const T* __restrict__ b = JITK_ARG(6, const T*);
  const i64 ldb = JITK_ARG(7, i64);
  const T beta = JITK_ARG(8, T);
  T* __restrict__ c = JITK_ARG(9, T*);
  const i64 ldc = JITK_ARG(10, i64);
  const int* index = JITK_ARG(11, const int*);
  const i64 block_rows = JITK_ARG(12, i64), block_cols = JITK_ARG(13, i64), nnz = JITK_ARG(14, i64);
  const int* row_ptr = index;
  const int* col_of = row_ptr + block_rows + 1;
  const int* row_of = col_of + nnz;
  const int* col_ptr = row_of + nnz;
  const int* by_col = col_ptr + block_cols + 1;
  (void)M, (void)ldb, (void)row_ptr, (void)col_ptr, (void)by_col;
  T acc[BS];
#if JITK_OP_FORWARD
  for (i64 i = jitk_begin; i < jitk_end; ++i)
    for (i64 j = 0; j < block_cols; ++j) {
      for (i64 n = 0; n < BS; ++n) acc[n] = T(0);
      for (i64 e = col_ptr[j]; e < col_ptr[j + 1]; ++e) {
        const i64 id = by_col[e];
        const T* __restrict__ x = a + i * lda + row_of[id] * BS;
        const T* __restrict__ w = b + id * BS * BS;
        for (i64 k = 0; k < BS; ++k)
          for (i64 n = 0; n < BS; ++n) acc[n] += x[k] * w[k * BS + n];
      }
      put(c + i * ldc + j * BS, acc, alpha, beta);
    }
#elif JITK_OP_BACKWARD_INPUT
  for (i64 i = jitk_begin; i < jitk_end; ++i)
    for (i64 r = 0; r < block_rows; ++r) {
      for (i64 n = 0; n < BS; ++n) acc[n] = T(0);
      for (i64 id = row_ptr[r]; id < row_ptr[r + 1]; ++id) {
        const T* __restrict__ dy = a + i * lda + col_of[id] * BS;
        const T* __restrict__ w = b + id * BS * BS;
        for (i64 n = 0; n < BS; ++n) {
          T sum = T(0);
          for (i64 k = 0; k < BS; ++k) sum += dy[k] * w[n * BS + k];
          acc[n] += sum;
        }
      }
      put(c + i * ldc + r * BS, acc, alpha, beta);
    }
#else
  for (i64 item = jitk_begin; item < jitk_end; ++item) {
    const i64 id = item / BS, r = item % BS;
    for (i64 n = 0; n < BS; ++n) acc[n] = T(0);
    const i64 xcol = row_of[id] * BS + r, dycol = col_of[id] * BS;
    for (i64 k = 0; k < M; ++k) {
      const T x = a[k * lda + xcol];
      const T* __restrict__ dy = b + k * ldb + dycol;
      for (i64 n = 0; n < BS; ++n) acc[n] += x * dy[n];
    }
    put(c + id * BS * BS + r * BS, acc, alpha, beta);
  }
#endif
}
