// softmax and log_softmax in float64: the references their tests judge the kernels by.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace jitk_reference {

// The max of row r and the sum of exp(x - max) over it.
template <class T> std::pair<double, double> max_and_exp_sum(const std::vector<T>& x, std::int64_t r, std::int64_t hidden) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < hidden; ++i) m = std::max(m, double(x[r * hidden + i]));
  double sum = 0;
  for (std::int64_t i = 0; i < hidden; ++i) sum += std::exp(double(x[r * hidden + i]) - m);
  return {m, sum};
}

template <class T> std::vector<double> softmax(std::int64_t rows, std::int64_t hidden, const std::vector<T>& x) {
  std::vector<double> out(static_cast<std::size_t>(rows * hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto [m, sum] = max_and_exp_sum(x, r, hidden);
    for (std::int64_t i = 0; i < hidden; ++i) out[r * hidden + i] = std::exp(double(x[r * hidden + i]) - m) / sum;
  }
  return out;
}

template <class T> std::vector<double> log_softmax(std::int64_t rows, std::int64_t hidden, const std::vector<T>& x) {
  std::vector<double> out(static_cast<std::size_t>(rows * hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto [m, sum] = max_and_exp_sum(x, r, hidden);
    const double log_sum = std::log(sum);
    for (std::int64_t i = 0; i < hidden; ++i) out[r * hidden + i] = double(x[r * hidden + i]) - m - log_sum;
  }
  return out;
}

}  // namespace jitk_reference
