// The gated gemm (jit::kernels::Gemm with gate = silu, gelu or gelu_tanh) in float64, for the CPU
// and GPU tests: B's columns in groups of 16, 8 gate then 8 up (jitk_reference::gate_column).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/kernels.hpp"

namespace jitk_test {

inline double gate_activation(jit::kernels::Gemm::Gate gate, double g) {
  using Gate = jit::kernels::Gemm::Gate;
  switch (gate) {
    case Gate::Gelu: return 0.5 * g * std::erfc(-g / std::sqrt(2.0));
    case Gate::GeluTanh: return g / (1 + std::exp(-2 * 0.7978845608028654 * (g + 0.044715 * g * g * g)));
    default: return g / (1 + std::exp(-g));
  }
}

struct GatedProblem {
  std::int64_t m, n, k;  // n: B's columns (C has n / 2)
  std::int64_t lda, ldb, ldc;
  double alpha, beta;
};

// C's whole storage after the gated gemm: C[r, j] (j < n / 2) = act(g) * u + beta * C[r, j], g and u
// alpha times the sums of gate column gate_column(j) and up column gate_column(j) + 8, each passed
// through round() (the dtype's rounding: the kernel rounds them as the unfused pair would store
// them); the rest of C's storage (padding) as it was. `c` holds C's old values (beta == 0: unread).
template <class Round>
std::vector<double> gated_gemm_reference(jit::kernels::Gemm::Gate gate, jit::kernels::Gemm::Layout la, jit::kernels::Gemm::Layout lb,
                                         const GatedProblem& s, const std::vector<double>& a, const std::vector<double>& b,
                                         const std::vector<double>& c, Round round) {
  using Layout = jit::kernels::Gemm::Layout;
  auto at = [](Layout l, std::int64_t i, std::int64_t j, std::int64_t ld) {
    return static_cast<std::size_t>(l == Layout::RowMajor ? i * ld + j : j * ld + i);
  };
  std::vector<double> out = c;
  for (std::int64_t i = 0; i < s.m; ++i)
    for (std::int64_t j = 0; j < s.n / 2; ++j) {
      const std::int64_t gc = jitk_reference::gate_column(j);
      double g = 0, u = 0;
      for (std::int64_t k = 0; k < s.k; ++k) {
        const double x = a[at(la, i, k, s.lda)];
        g += x * b[at(lb, k, gc, s.ldb)];
        u += x * b[at(lb, k, gc + 8, s.ldb)];
      }
      const std::size_t o = static_cast<std::size_t>(i * s.ldc + j);
      out[o] = gate_activation(gate, round(s.alpha * g)) * round(s.alpha * u) + (s.beta == 0 ? 0 : s.beta * c[o]);
    }
  return out;
}

}  // namespace jitk_test
