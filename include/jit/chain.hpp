// Fusion chains: elementwise steps run inside a row kernel before (prologue) or after (epilogue)
// its own work, so `residual add -> rms_norm -> scale` is one kernel and one pass over memory.
//
// A chain is part of a kernel's parameters (and of its cache key), written as step names joined
// by '>': "add>store", "add_vec>gelu", "mul_scalar". Each step works on every element v of the
// row, in float (double for f64), in order:
//   add, mul          v += t[i], v *= t[i]        t: a tensor shaped like the row's tensor (input)
//   add_vec, mul_vec  v += b[col], v *= b[col]    b: one value per column of the row (input)
//   add_scalar, mul_scalar  v += s, v *= s        s: a number given at launch
//   store             t[i] = v                    t: a tensor shaped like the row's (output);
//                                                 v continues as what was stored (rounded to the dtype)
//   relu, silu, gelu, gelu_tanh, sigmoid, tanh    v = f(v)
// The value between a prologue and the kernel, and between the kernel and its epilogue, is the
// kernel's dtype: the same as running the steps as separate kernels, without their memory passes.
// A launch gives one operand per step that takes one, in order (Args::prologue, Args::epilogue).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include "jit/jit.hpp"

namespace jit {

enum class Step : std::uint8_t { add, mul, add_vec, mul_vec, add_scalar, mul_scalar, store, relu, silu, gelu, gelu_tanh, sigmoid, tanh };

// What a step takes at launch.
enum class OperandKind : std::uint8_t { None, Tensor, Vector, Scalar, Output };

std::string_view step_name(Step s);
OperandKind step_operand(Step s);

class Chain {
 public:
  static constexpr int kMaxSteps = 8;
  static constexpr int kMaxOperands = 4;

  Chain() = default;
  Chain(std::initializer_list<Step> steps);           // throws Error{InvalidParams} past the limits
  Chain(const char* text) : Chain(parse(text)) {}     // "add>store"; "" is the empty chain
  static Chain parse(std::string_view text);          // throws Error{InvalidParams} naming the bad step

  bool empty() const { return size_ == 0; }
  int size() const { return size_; }
  Step operator[](int i) const { return steps_[static_cast<std::size_t>(i)]; }
  int operands() const;        // how many launch operands the steps take
  std::string to_string() const;  // the canonical text, "" when empty
  bool operator==(const Chain& o) const { return size_ == o.size_ && steps_ == o.steps_; }

 private:
  std::array<Step, kMaxSteps> steps_{};
  std::uint8_t size_ = 0;
};

// One launch operand of a chain step: a tensor or vector (typed pointer), an output tensor, or a number.
struct Operand {
  enum class Kind : std::uint8_t { None, Input, Output, Scalar };
  Kind kind = Kind::None;
  const void* data = nullptr;
  DType dtype = DType::f32;
  double value = 0;

  Operand() = default;
  Operand(ConstPtr p) : kind(Kind::Input), data(p.data), dtype(p.dtype) {}
  Operand(MutPtr p) : kind(Kind::Output), data(p.data), dtype(p.dtype) {}
  template <class T> Operand(const T* p) : Operand(ConstPtr(p)) {}
  template <class T, std::enable_if_t<!std::is_const_v<T>, int> = 0> Operand(T* p) : Operand(MutPtr(p)) {}
  Operand(double v) : kind(Kind::Scalar), value(v) {}
};

// The operands of one chain, in step order.
class Operands {
 public:
  Operands() = default;
  Operands(std::initializer_list<Operand> items);  // throws Error{InvalidArgument} past Chain::kMaxOperands
  void add(const Operand& o);  // throws Error{InvalidArgument} past Chain::kMaxOperands
  int size() const { return count_; }
  const Operand& operator[](int i) const { return items_[static_cast<std::size_t>(i)]; }

 private:
  std::array<Operand, Chain::kMaxOperands> items_{};
  int count_ = 0;
};

namespace detail {
// Checks a chain's operands against its steps (count, kind, dtype, null) and appends them to
// `out` (pointers, then numbers as `scalar_type`). `where` is "prologue" or "epilogue".
void pack_chain(std::string_view kernel, std::string_view where, const Chain& chain, const Operands& operands,
                DType dtype, DType scalar_type, std::int64_t rows, ArgPack& out);
}  // namespace detail

}  // namespace jit

template <> struct std::hash<jit::Chain> {
  std::size_t operator()(const jit::Chain& c) const noexcept {
    std::size_t h = static_cast<std::size_t>(c.size());
    for (int i = 0; i < c.size(); ++i) h = h * 31 + static_cast<std::size_t>(c[i]) + 1;
    return h;
  }
};
