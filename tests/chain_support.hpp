// Fusion chain cases shared by the CPU and GPU kernel tests: which chains to try on which kernel,
// and random operands for a chain with their float64 reference.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/chain.hpp"
#include "jit/kernels.hpp"

namespace jitk_test {

struct ChainCase {
  std::string kernel;  // rms_norm, layer_norm, silu_and_mul, gelu_and_mul
  std::string prologue;
  std::string epilogue;
};

// Together they use every step, on every kernel that takes chains, in both positions.
inline const std::vector<ChainCase>& chain_cases() {
  static const std::vector<ChainCase> cases = {
      {"rms_norm", "add>store", "mul_scalar"},  // residual add -> rms_norm -> scale
      {"rms_norm", "mul_vec>add_scalar>relu", "add>sigmoid>store>mul"},
      {"rms_norm", "", "gelu_tanh"},
      {"rms_norm", "silu", ""},
      {"layer_norm", "add_vec>tanh", "gelu>mul_vec"},
      {"layer_norm", "add>store", "add"},
      {"silu_and_mul", "add_vec", "mul_scalar>add"},  // the up/gate projection's bias, then a scale and a residual
      {"silu_and_mul", "add_scalar", "store>relu"},
      {"gelu_and_mul", "mul_scalar", "silu>store>add_scalar"},
  };
  return cases;
}

// Random operands of a chain over a rows x width tensor (vectors: width values), for a kernel of
// element type T, and the same in float64 for the reference. Outputs start poisoned.
template <class T> struct ChainOperands {
  std::vector<std::vector<T>> data;  // per operand; empty for a number
  std::vector<double> numbers;       // per operand; 0 for a pointer
  std::vector<jit::OperandKind> kinds;
  std::vector<jitk_reference::ChainOperand> reference;
};

// random(n, lo, hi) and poisoned(n) make a std::vector<T>; widen(T) gives its double.
template <class T, class Random, class Poisoned, class Widen>
ChainOperands<T> make_chain_operands(const jit::Chain& chain, std::int64_t rows, std::int64_t width, Random random,
                                     Poisoned poisoned, Widen widen) {
  ChainOperands<T> out;
  for (int i = 0; i < chain.size(); ++i) {
    const jit::OperandKind kind = jit::step_operand(chain[i]);
    if (kind == jit::OperandKind::None) continue;
    out.kinds.push_back(kind);
    jitk_reference::ChainOperand r;
    std::vector<T> values;
    double number = 0;
    if (kind == jit::OperandKind::Tensor) values = random(rows * width, 0.5, 1.5);
    if (kind == jit::OperandKind::Vector) values = random(width, 0.5, 1.5);
    if (kind == jit::OperandKind::Output) values = poisoned(rows * width);
    if (kind == jit::OperandKind::Scalar) number = 0.75;
    if (kind == jit::OperandKind::Tensor || kind == jit::OperandKind::Vector)
      for (const T& v : values) r.data.push_back(widen(v));
    r.number = number;
    out.data.push_back(std::move(values));
    out.numbers.push_back(number);
    out.reference.push_back(std::move(r));
  }
  return out;
}

// Runs one chain case through jit::get on `target` and returns each output's error against the
// float64 reference of the same steps run unfused: "y", then each stored tensor. Env gives
// random(n, lo, hi) and poisoned(n) (std::vector<T>), widen(T) -> double, upload(std::vector<T>)
// -> an array with data(), round(double) -> the double nearest as a T, and error(array, expected)
// (waiting for the device where there is one).
template <class T, class Env>
std::vector<std::pair<std::string, double>> run_chain_case(const ChainCase& c, std::int64_t hidden, std::int64_t rows,
                                                           const jit::Target& target, Env& env,
                                                           const jit::Selection& selection = {}) {
  namespace kernels = jit::kernels;
  namespace ref = jitk_reference;
  const jit::Chain pro = jit::Chain::parse(c.prologue), epi = jit::Chain::parse(c.epilogue);
  const bool gated = c.kernel == "silu_and_mul" || c.kernel == "gelu_and_mul";
  const std::int64_t width = gated ? 2 * hidden : hidden;  // the prologue's rows
  auto random = [&](std::int64_t n, double lo, double hi) { return env.random(n, lo, hi); };
  auto poisoned = [&](std::int64_t n) { return env.poisoned(n); };
  auto widen = [&](const T& v) { return env.widen(v); };
  auto pro_ops = make_chain_operands<T>(pro, rows, width, random, poisoned, widen);
  auto epi_ops = make_chain_operands<T>(epi, rows, hidden, random, poisoned, widen);
  const auto x = env.random(rows * width, -3, 3), w = env.random(hidden, 0.5, 1.5), b = env.random(hidden, -1, 1);

  // The reference: each step a pass of its own, the kernel between.
  std::vector<double> v;
  for (const T& e : x) v.push_back(env.widen(e));
  std::vector<double> wd, bd;
  for (const T& e : w) wd.push_back(env.widen(e));
  for (const T& e : b) bd.push_back(env.widen(e));
  ref::chain(c.prologue, v, width, pro_ops.reference);
  // The prologue's result is a tensor of T, as an unfused prologue kernel would have stored it.
  for (double& e : v) e = env.round(e);
  std::vector<double> expected = c.kernel == "rms_norm"       ? ref::rms_norm(rows, hidden, v, wd, 1e-5)
                                 : c.kernel == "layer_norm"   ? ref::layer_norm(rows, hidden, v, wd, bd, 1e-5)
                                 : c.kernel == "silu_and_mul" ? ref::silu_and_mul(rows, hidden, v)
                                                              : ref::gelu_and_mul(rows, hidden, v, false);
  ref::chain(c.epilogue, expected, hidden, epi_ops.reference);

  // The fused kernel.
  auto dx = env.upload(x), dw = env.upload(w), db = env.upload(b), dy = env.upload(env.poisoned(rows * hidden));
  using Array = decltype(dx);
  std::vector<Array> pro_arrays, epi_arrays;
  auto operands = [&](ChainOperands<T>& ops, std::vector<Array>& arrays) {
    arrays.reserve(ops.data.size());
    jit::Operands out;
    for (std::size_t i = 0; i < ops.data.size(); ++i) {
      arrays.push_back(env.upload(ops.data[i]));
      const jit::DType t = jit::dtype_of<T>();
      if (ops.kinds[i] == jit::OperandKind::Scalar) out.add(ops.numbers[i]);
      else if (ops.kinds[i] == jit::OperandKind::Output) out.add(jit::MutPtr(arrays.back().data(), t));
      else out.add(jit::ConstPtr(arrays.back().data(), t));
    }
    return out;
  };
  const jit::Operands po = operands(pro_ops, pro_arrays), eo = operands(epi_ops, epi_arrays);
  const jit::DType t = jit::dtype_of<T>();
  const jit::ConstPtr px(dx.data(), t), pw(dw.data(), t), pb(db.data(), t);
  const jit::MutPtr py(dy.data(), t);
  if (c.kernel == "rms_norm")
    jit::get<kernels::RmsNorm>({t, hidden, pro, epi}, target, selection)(rows, px, pw, py, 1e-5, po, eo);
  else if (c.kernel == "layer_norm")
    jit::get<kernels::LayerNorm>({t, hidden, pro, epi}, target, selection)(rows, px, pw, pb, py, 1e-5, po, eo);
  else if (c.kernel == "silu_and_mul")
    jit::get<kernels::SiluAndMul>({t, hidden, pro, epi}, target, selection)(rows, px, py, po, eo);
  else
    jit::get<kernels::GeluAndMul>({t, hidden, kernels::GeluAndMul::Approximate::None, pro, epi}, target, selection)(rows, px, py, po, eo);

  std::vector<std::pair<std::string, double>> errors = {{"y", env.error(dy, expected)}};
  for (std::size_t i = 0; i < pro_ops.kinds.size(); ++i)
    if (pro_ops.kinds[i] == jit::OperandKind::Output)
      errors.emplace_back("prologue store", env.error(pro_arrays[i], pro_ops.reference[i].stored));
  for (std::size_t i = 0; i < epi_ops.kinds.size(); ++i)
    if (epi_ops.kinds[i] == jit::OperandKind::Output)
      errors.emplace_back("epilogue store", env.error(epi_arrays[i], epi_ops.reference[i].stored));
  return errors;
}

// The params of a chain case's specialization (for warming them all at once).
inline jit::ParamSet chain_case_params(const ChainCase& c, jit::DType dtype, std::int64_t hidden) {
  jit::ParamSet p{{"dtype", std::string(jit::dtype_name(dtype))}, {"hidden", hidden}};
  if (c.kernel == "gelu_and_mul") p.set("approximate", std::string("none"));
  if (!c.prologue.empty()) p.set("prologue", c.prologue);
  if (!c.epilogue.empty()) p.set("epilogue", c.epilogue);
  return p;
}

}  // namespace jitk_test
