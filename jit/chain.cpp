// Fusion chains: the step table, parsing and printing chains, and checking a launch's chain operands.
#include "jit/chain.hpp"

#include <algorithm>
#include <iterator>

namespace jit {
namespace {

struct StepInfo {
  Step step;
  std::string_view name;
  OperandKind operand;
};

constexpr StepInfo kSteps[] = {
    {Step::add, "add", OperandKind::Tensor},
    {Step::mul, "mul", OperandKind::Tensor},
    {Step::add_vec, "add_vec", OperandKind::Vector},
    {Step::mul_vec, "mul_vec", OperandKind::Vector},
    {Step::add_scalar, "add_scalar", OperandKind::Scalar},
    {Step::mul_scalar, "mul_scalar", OperandKind::Scalar},
    {Step::store, "store", OperandKind::Output},
    {Step::relu, "relu", OperandKind::None},
    {Step::silu, "silu", OperandKind::None},
    {Step::gelu, "gelu", OperandKind::None},
    {Step::gelu_tanh, "gelu_tanh", OperandKind::None},
    {Step::sigmoid, "sigmoid", OperandKind::None},
    {Step::tanh, "tanh", OperandKind::None},
};

static_assert(std::size(kSteps) == static_cast<std::size_t>(Step::tanh) + 1, "a step without a row in kSteps");
const StepInfo& info(Step s) { return kSteps[static_cast<std::size_t>(s)]; }

std::string step_list() {
  std::string out;
  for (const auto& s : kSteps) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string_view operand_description(OperandKind k) {
  switch (k) {
    case OperandKind::Tensor: return "an input tensor shaped like the row's (ConstPtr)";
    case OperandKind::Vector: return "an input vector, one value per column (ConstPtr)";
    case OperandKind::Scalar: return "a number";
    case OperandKind::Output: return "an output tensor shaped like the row's (MutPtr)";
    case OperandKind::None: break;
  }
  return "nothing";
}

}  // namespace

std::string_view step_name(Step s) { return info(s).name; }
OperandKind step_operand(Step s) { return info(s).operand; }

Chain::Chain(std::initializer_list<Step> steps) {
  if (steps.size() > kMaxSteps)
    throw Error(ErrorCode::InvalidParams, "a chain has at most " + std::to_string(kMaxSteps) + " steps, got " +
                                              std::to_string(steps.size()));
  for (Step s : steps) steps_[size_++] = s;
  if (operands() > kMaxOperands)
    throw Error(ErrorCode::InvalidParams, "chain '" + to_string() + "' takes " + std::to_string(operands()) +
                                              " operands; a chain takes at most " + std::to_string(kMaxOperands));
}

Chain Chain::parse(std::string_view text) {
  Chain chain;
  const std::string whole(text);
  text = trim(text);
  if (text.empty()) return chain;
  while (true) {
    const auto end = text.find('>');
    const std::string_view name = trim(text.substr(0, end));
    const auto* found = std::find_if(std::begin(kSteps), std::end(kSteps), [&](const StepInfo& s) { return s.name == name; });
    if (found == std::end(kSteps))
      throw Error(ErrorCode::InvalidParams, "chain '" + whole + "': unknown step '" + std::string(name) +
                                                "'; steps are joined by '>' and are: " + step_list());
    if (chain.size_ == kMaxSteps)
      throw Error(ErrorCode::InvalidParams, "chain '" + whole + "' has more than " + std::to_string(kMaxSteps) + " steps");
    chain.steps_[chain.size_++] = found->step;
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  if (chain.operands() > kMaxOperands)
    throw Error(ErrorCode::InvalidParams, "chain '" + whole + "' takes " + std::to_string(chain.operands()) +
                                              " operands; a chain takes at most " + std::to_string(kMaxOperands));
  return chain;
}

int Chain::operands() const {
  int n = 0;
  for (int i = 0; i < size_; ++i) n += step_operand(steps_[i]) != OperandKind::None;
  return n;
}

std::string Chain::to_string() const {
  std::string out;
  for (int i = 0; i < size_; ++i) out += (i ? ">" : "") + std::string(step_name(steps_[i]));
  return out;
}

Operands::Operands(std::initializer_list<Operand> items) {
  for (const auto& o : items) add(o);
}

void Operands::add(const Operand& o) {
  if (count_ == Chain::kMaxOperands)
    throw Error(ErrorCode::InvalidArgument, "a chain takes at most " + std::to_string(Chain::kMaxOperands) + " operands");
  items_[static_cast<std::size_t>(count_++)] = o;
}

namespace detail {

void pack_chain(std::string_view kernel, std::string_view where, const Chain& chain, const Operands& operands,
                DType dtype, DType scalar_type, std::int64_t rows, ArgPack& out) {
  const std::string who = std::string(kernel) + " " + std::string(where) + " '" + chain.to_string() + "'";
  if (operands.size() != chain.operands())
    throw Error(ErrorCode::InvalidArgument, who + " takes " + std::to_string(chain.operands()) + " operand(s), got " +
                                                std::to_string(operands.size()));
  int next = 0;
  for (int i = 0; i < chain.size(); ++i) {
    const OperandKind want = step_operand(chain[i]);
    if (want == OperandKind::None) continue;
    const Operand& o = operands[next++];
    const std::string arg = std::string(where) + " operand " + std::to_string(next) + " (" + std::string(step_name(chain[i])) + ")";
    const bool fits = want == OperandKind::Scalar   ? o.kind == Operand::Kind::Scalar
                      : want == OperandKind::Output ? o.kind == Operand::Kind::Output
                                                    : o.kind == Operand::Kind::Input || o.kind == Operand::Kind::Output;
    if (!fits)
      throw Error(ErrorCode::InvalidArgument, std::string(kernel) + ": " + arg + " must be " +
                                                  std::string(operand_description(want)));
    if (want == OperandKind::Scalar) continue;
    check_dtype(kernel, arg, dtype, o.dtype);
    check_not_null(kernel, arg, o.data, rows);
  }
  // Pointers and numbers go in step order, as the generated kernel parameters expect.
  next = 0;
  for (int i = 0; i < chain.size(); ++i) {
    if (step_operand(chain[i]) == OperandKind::None) continue;
    const Operand& o = operands[next++];
    if (o.kind == Operand::Kind::Scalar) out.add_scalar(o.value, scalar_type);
    else out.add_pointer(o.data);
  }
}

}  // namespace detail
}  // namespace jit
