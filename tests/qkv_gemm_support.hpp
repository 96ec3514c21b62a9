// gemm's QKV epilogue (rope = neox, page_size > 0): the float64 reference its CPU and GPU tests
// share (test_qkv_gemm.cpp, test_gpu_gemm.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/kernels.hpp"

namespace jitk_test::qkv {

using Layout = jit::kernels::Gemm::Layout;
namespace ref = jitk_reference;

struct Shape {
  std::int64_t m, k, heads, kv_heads, head_dim, pad;
};

// What a launch should write: C (ldc wide) and the two caches, in float64 from the same inputs.
struct Expected {
  std::vector<double> c, k_cache, v_cache;
};
inline Expected reference(const Shape& s, std::int64_t ldc, const std::vector<double>& a, Layout la, std::int64_t lda,
                   const std::vector<double>& b, Layout lb, std::int64_t ldb, double alpha, bool rope, std::int64_t page_size,
                   const std::vector<std::int64_t>& positions, double theta, const std::vector<std::int64_t>& slots,
                   std::int64_t num_pages, const std::vector<double>& c_before, const std::vector<double>& k_before,
                   const std::vector<double>& v_before, double (*round)(double)) {
  const std::int64_t n = (s.heads + 2 * s.kv_heads) * s.head_dim, hd = s.head_dim;
  Expected e{c_before, k_before, v_before};
  std::vector<double> rows(static_cast<std::size_t>(s.m * n));
  for (std::int64_t r = 0; r < s.m; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t i = 0; i < s.k; ++i)
        sum += a[la == Layout::RowMajor ? r * lda + i : i * lda + r] * b[lb == Layout::RowMajor ? i * ldb + j : j * ldb + i];
      rows[r * n + j] = round(alpha * sum);  // as the plain gemm stores it
    }
  if (rope) {  // q's and k's heads: one [m, heads + kv_heads, hd] array in the reference's layout, per row
    std::vector<double> qk(static_cast<std::size_t>(s.m * (s.heads + s.kv_heads) * hd));
    for (std::int64_t r = 0; r < s.m; ++r)
      for (std::int64_t j = 0; j < (s.heads + s.kv_heads) * hd; ++j) qk[r * (s.heads + s.kv_heads) * hd + j] = rows[r * n + j];
    ref::rotary_embedding(qk, s.m, s.heads + s.kv_heads, hd, hd, true, positions, theta);
    for (std::int64_t r = 0; r < s.m; ++r)
      for (std::int64_t j = 0; j < (s.heads + s.kv_heads) * hd; ++j) rows[r * n + j] = qk[r * (s.heads + s.kv_heads) * hd + j];
  }
  for (std::int64_t r = 0; r < s.m; ++r) {
    for (std::int64_t j = 0; j < n; ++j) e.c[r * ldc + j] = rows[r * n + j];
    if (page_size == 0 || slots[r] < 0 || slots[r] >= num_pages * page_size) continue;
    for (std::int64_t h = 0; h < s.kv_heads; ++h)
      for (std::int64_t i = 0; i < hd; ++i) {
        e.k_cache[(slots[r] * s.kv_heads + h) * hd + i] = rows[r * n + (s.heads + h) * hd + i];
        e.v_cache[(slots[r] * s.kv_heads + h) * hd + i] = rows[r * n + (s.heads + s.kv_heads + h) * hd + i];
      }
  }
  return e;
}

// The largest error of got against want over every element, relative to want's largest magnitude;
// infinity where one is NaN and the other is not (a poisoned element read, or one not written).
inline double worst(const std::vector<double>& got, const std::vector<double>& want) {
  double scale = 1e-30, err = 0;
  for (double w : want)
    if (!std::isnan(w)) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i];
    if (std::isnan(g) != std::isnan(want[i])) return INFINITY;
    if (!std::isnan(g)) err = std::max(err, std::abs(g - want[i]) / scale);
  }
  return err;
}

}  // namespace jitk_test::qkv
