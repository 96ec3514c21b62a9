// Float64 references of the shipped kernels (each family's reference.hpp, gathered from
// kernel_sources/families.def at build time), the fusion chains' reference, and the relative L2
// error used to judge them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>
#include <string>
#include <vector>

#include "jitk/family_references.hpp"  // generated: kernel_sources/<family>/reference.hpp for each family

namespace jitk_reference {

// One operand of a fusion chain step: a tensor or per-column vector (data), a number, or what a
// store step wrote (stored).
struct ChainOperand {
  std::vector<double> data;
  double number = 0;
  std::vector<double> stored;
};

// A fusion chain ("add>store>gelu", jit/chain.hpp) run step by step over v (rows x width) in
// float64, each step a pass of its own as unfused kernels would run it; operands in step order.
inline void chain(const std::string& text, std::vector<double>& v, std::int64_t width, std::vector<ChainOperand>& operands) {
  std::size_t next = 0, start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('>', start);
    if (end == std::string::npos) end = text.size();
    const std::string step = text.substr(start, end - start);
    start = end + 1;
    auto each = [&](auto f) {
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = f(v[i], i);
    };
    const double kSqrt2OverPi = 0.7978845608028654;
    if (step == "add") each([&](double x, std::size_t i) { return x + operands[next].data[i]; });
    else if (step == "mul") each([&](double x, std::size_t i) { return x * operands[next].data[i]; });
    else if (step == "add_vec") each([&](double x, std::size_t i) { return x + operands[next].data[i % width]; });
    else if (step == "mul_vec") each([&](double x, std::size_t i) { return x * operands[next].data[i % width]; });
    else if (step == "add_scalar") each([&](double x, std::size_t) { return x + operands[next].number; });
    else if (step == "mul_scalar") each([&](double x, std::size_t) { return x * operands[next].number; });
    else if (step == "store") operands[next].stored = v;
    else if (step == "relu") each([](double x, std::size_t) { return x < 0 ? 0.0 : x; });
    else if (step == "silu") each([](double x, std::size_t) { return x / (1 + std::exp(-x)); });
    else if (step == "sigmoid") each([](double x, std::size_t) { return 1 / (1 + std::exp(-x)); });
    else if (step == "tanh") each([](double x, std::size_t) { return std::tanh(x); });
    else if (step == "gelu") each([](double x, std::size_t) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); });
    else if (step == "gelu_tanh")
      each([&](double x, std::size_t) { return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x))); });
    else throw std::invalid_argument("reference chain: unknown step '" + step + "'");
    const bool takes_operand = step.rfind("add", 0) == 0 || step.rfind("mul", 0) == 0 || step == "store";
    next += takes_operand;
  }
}

// ||out - ref|| / ||ref||; NaN anywhere (an unwritten, poisoned output) gives +inf.
template <class T> double relative_l2_error(const std::vector<T>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    double o = double(out[i]);
    if (std::isnan(o)) return std::numeric_limits<double>::infinity();
    num += (o - ref[i]) * (o - ref[i]);
    den += ref[i] * ref[i];
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

// The error a correct kernel stays under, per element type (device METHOD.md: float32 lands
// far under 1e-3).
template <class T> constexpr double tolerance() { return sizeof(T) == 8 ? 1e-12 : 1e-5; }

}  // namespace jitk_reference
