// What the CPU and GPU tests of rotary_embedding share: the shapes they run, fresh positions and
// tables, heads whose untouched tail is poisoned, and the two checks (the rotated part against the
// float64 reference, the tail bit for bit).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/kernels.hpp"
#include "test_support.hpp"

namespace jitk_test {

using Rotary = jit::kernels::RotaryEmbedding;

struct RotaryShape {
  std::int64_t tokens, heads, kv_heads, head_dim, rotary_dim;
};
// Odd sizes (METHOD.md): 37 tokens of 5 q heads and 1 k head; full and partial rotary, and a half
// (10 pairs) that splits into no 16-byte packs.
inline const RotaryShape kRotaryShapes[] = {{37, 5, 1, 64, 64},  {37, 5, 1, 96, 96},  {37, 5, 1, 128, 128},
                                            {37, 5, 1, 128, 32}, {37, 5, 1, 96, 32},  {37, 5, 1, 80, 20}};
inline constexpr std::int64_t kRotaryMaxPosition = 4096;
inline constexpr double kRotaryTheta = 10000;

inline std::vector<std::int64_t> random_positions(std::int64_t tokens, std::int64_t max_position) {
  std::uniform_int_distribution<std::int64_t> d(1, max_position - 1);  // 1..: position 0 rotates nothing
  std::vector<std::int64_t> p(static_cast<std::size_t>(tokens));
  for (auto& x : p) x = d(rng());
  return p;
}

// cos_sin [max_position, rotary_dim] as a model's cache holds it: cosines, then sines, of
// p * theta^(-2j/rotary_dim); rounded to the table's type by `round` (the reference reads the rounded values).
template <class Round> std::vector<double> rotary_table(std::int64_t max_position, std::int64_t rotary_dim, double theta, Round round) {
  const std::int64_t half = rotary_dim / 2;
  std::vector<double> t(static_cast<std::size_t>(max_position * rotary_dim));
  for (std::int64_t p = 0; p < max_position; ++p)
    for (std::int64_t j = 0; j < half; ++j) {
      const double angle = double(p) * std::pow(theta, -2.0 * double(j) / double(rotary_dim));
      t[p * rotary_dim + j] = round(std::cos(angle));
      t[p * rotary_dim + half + j] = round(std::sin(angle));
    }
  return t;
}

// Every head's elements rotary_dim.. set to all-ones bytes (NaN in every float type): the kernel
// must leave them, bit for bit, and never mix them into the rotated part.
template <class T> void poison_tails(std::vector<T>& x, std::int64_t head_dim, std::int64_t rotary_dim) {
  for (std::size_t h = 0; h < x.size() / static_cast<std::size_t>(head_dim); ++h)
    std::memset(static_cast<void*>(x.data() + h * head_dim + rotary_dim), 0xff, static_cast<std::size_t>(head_dim - rotary_dim) * sizeof(T));
}

// ||got - expected|| / ||expected|| over the rotated parts of the heads; NaN gives +inf.
template <class T, class Widen>
double rotated_error(const std::vector<T>& got, const std::vector<double>& expected, std::int64_t head_dim, std::int64_t rotary_dim, Widen widen) {
  std::vector<double> g, e;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (static_cast<std::int64_t>(i % head_dim) < rotary_dim) {
      g.push_back(widen(got[i]));
      e.push_back(expected[i]);
    }
  return jitk_reference::relative_l2_error(g, e);
}

// Whether every element outside the rotated parts is what it was, bit for bit.
template <class T> bool tails_intact(const std::vector<T>& got, const std::vector<T>& before, std::int64_t head_dim, std::int64_t rotary_dim) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (static_cast<std::int64_t>(i % head_dim) >= rotary_dim && std::memcmp(&got[i], &before[i], sizeof(T)) != 0) return false;
  return true;
}

}  // namespace jitk_test
