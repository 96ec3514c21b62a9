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

// The gated gemm's layout (jit::kernels::Gemm, gate = silu / gelu / gelu_tanh): B's columns in
// groups of 16, 8 gate columns then the 8 up columns they pair with. Output column j's gate column
// is gate_column(j), its up column gate_column(j) + 8.
inline std::int64_t gate_column(std::int64_t j) { return j / 8 * 16 + j % 8; }
// A weight [rows, 2 hidden] of gate columns then up columns (gate | up, row-major) in that layout
// (hidden a multiple of 8), and back.
template <class T> std::vector<T> interleave_gate_up(const std::vector<T>& w, std::int64_t rows, std::int64_t hidden) {
  std::vector<T> out(w.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < hidden; ++j) {
      out[r * 2 * hidden + gate_column(j)] = w[r * 2 * hidden + j];
      out[r * 2 * hidden + gate_column(j) + 8] = w[r * 2 * hidden + hidden + j];
    }
  return out;
}
template <class T> std::vector<T> deinterleave_gate_up(const std::vector<T>& w, std::int64_t rows, std::int64_t hidden) {
  std::vector<T> out(w.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < hidden; ++j) {
      out[r * 2 * hidden + j] = w[r * 2 * hidden + gate_column(j)];
      out[r * 2 * hidden + hidden + j] = w[r * 2 * hidden + gate_column(j) + 8];
    }
  return out;
}
// silu_and_mul over rows of x in the gated gemm's layout ([rows, 2 hidden], hidden a multiple of 8):
// out [rows, hidden].
template <class T> std::vector<double> silu_and_mul_interleaved(std::int64_t rows, std::int64_t hidden, const std::vector<T>& x) {
  return silu_and_mul(rows, hidden, deinterleave_gate_up(x, rows, hidden));
}

}  // namespace jitk_reference
