// rms_norm and fused_add_rms_norm in float64: the references their tests judge the kernels by.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace jitk_reference {

template <class T>
std::vector<double> rms_norm(std::int64_t rows, std::int64_t hidden, const std::vector<T>& x, const std::vector<T>& w,
                             double eps) {
  std::vector<double> out(static_cast<std::size_t>(rows * hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t i = 0; i < hidden; ++i) ss += double(x[r * hidden + i]) * double(x[r * hidden + i]);
    double inv = 1.0 / std::sqrt(ss / double(hidden) + eps);
    for (std::int64_t i = 0; i < hidden; ++i) out[r * hidden + i] = double(x[r * hidden + i]) * inv * double(w[i]);
  }
  return out;
}


// residual + x, and rms_norm of that sum.
template <class T>
std::vector<double> add_rms_norm_sum(const std::vector<T>& x, const std::vector<T>& residual) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = double(x[i]) + double(residual[i]);
  return out;
}

}  // namespace jitk_reference
