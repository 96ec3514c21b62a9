// silu_and_mul and gelu_and_mul in float64: the references their tests judge the kernels by.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace jitk_reference {

template <class T> std::vector<double> silu_and_mul(std::int64_t rows, std::int64_t hidden, const std::vector<T>& x) {
  std::vector<double> out(static_cast<std::size_t>(rows * hidden));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < hidden; ++i) {
      double g = x[r * 2 * hidden + i], u = x[r * 2 * hidden + hidden + i];
      out[r * hidden + i] = g / (1.0 + std::exp(-g)) * u;
    }
  return out;
}


// gelu(x[:, :hidden]) * x[:, hidden:]; tanh: the tanh approximation (PyTorch approximate="tanh").
template <class T>
std::vector<double> gelu_and_mul(std::int64_t rows, std::int64_t hidden, const std::vector<T>& x, bool tanh_approx) {
  std::vector<double> out(static_cast<std::size_t>(rows * hidden));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < hidden; ++i) {
      const double g = x[r * 2 * hidden + i], u = x[r * 2 * hidden + hidden + i];
      // 0.5 g (1 + tanh(z)) and 0.5 g (1 + erf(g / sqrt 2)), written without their cancellation for g < 0
      const double z = 0.7978845608028654 * (g + 0.044715 * g * g * g);
      const double gelu = tanh_approx ? g / (1 + std::exp(-2 * z)) : 0.5 * g * std::erfc(-g / std::sqrt(2.0));
      out[r * hidden + i] = gelu * u;
    }
  return out;
}

}  // namespace jitk_reference
