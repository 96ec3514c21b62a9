// layer_norm in float64: the reference its tests judge the kernel by.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace jitk_reference {

template <class T>
std::vector<double> layer_norm(std::int64_t rows, std::int64_t hidden, const std::vector<T>& x, const std::vector<T>& w,
                               const std::vector<T>& b, double eps) {
  std::vector<double> out(static_cast<std::size_t>(rows * hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t i = 0; i < hidden; ++i) mean += double(x[r * hidden + i]);
    mean /= double(hidden);
    for (std::int64_t i = 0; i < hidden; ++i) var += (double(x[r * hidden + i]) - mean) * (double(x[r * hidden + i]) - mean);
    const double inv = 1.0 / std::sqrt(var / double(hidden) + eps);
    for (std::int64_t i = 0; i < hidden; ++i)
      out[r * hidden + i] = (double(x[r * hidden + i]) - mean) * inv * double(w[i]) + double(b[i]);
  }
  return out;
}

}  // namespace jitk_reference
