// Float64 reference implementations of the shipped kernels, and the relative L2 error used to judge them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>
#include <string>
#include <vector>

namespace jitk_reference {

template <class T> std::vector<double> saxpy(double a, const std::vector<T>& x, const std::vector<T>& y) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = a * double(x[i]) + double(y[i]);
  return out;
}

template <class T> std::vector<double> silu_and_mul(std::int64_t rows, std::int64_t hidden, const std::vector<T>& x) {
  std::vector<double> out(static_cast<std::size_t>(rows * hidden));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < hidden; ++i) {
      double g = x[r * 2 * hidden + i], u = x[r * 2 * hidden + hidden + i];
      out[r * hidden + i] = g / (1.0 + std::exp(-g)) * u;
    }
  return out;
}

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

// residual + x, and rms_norm of that sum.
template <class T>
std::vector<double> add_rms_norm_sum(const std::vector<T>& x, const std::vector<T>& residual) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = double(x[i]) + double(residual[i]);
  return out;
}

// One AdamW step (torch.optim.AdamW) in float64: param, m and v updated in place.
template <class G>
void adamw(std::vector<double>& param, const std::vector<G>& grad, std::vector<double>& m, std::vector<double>& v,
           double lr, std::int64_t step, double beta1, double beta2, double eps, double weight_decay) {
  const double bc1 = 1 - std::pow(beta1, double(step)), bc2 = 1 - std::pow(beta2, double(step));
  for (std::size_t i = 0; i < param.size(); ++i) {
    const double g = double(grad[i]);
    param[i] *= 1 - lr * weight_decay;
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    param[i] -= lr / bc1 * m[i] / (std::sqrt(v[i] / bc2) + eps);
  }
}

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
