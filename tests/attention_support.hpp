// What the CPU and GPU tests of attention_prefill share: batches of sequences of odd lengths (a
// cached prefix, a chunk shorter than its keys, an empty sequence, queries outnumbering keys
// under a causal mask so that some rows see nothing), inputs with room between tokens (strides),
// and the check of o and lse against the float64 reference.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/kernels.hpp"
#include "test_support.hpp"

namespace jitk_test {

using Prefill = jit::kernels::AttentionPrefill;

struct AttnCase {
  std::vector<std::int32_t> lens_q, lens_k;  // per sequence
  std::int64_t kv_heads, group, head_dim;
  bool causal = false;
  std::int64_t window = 0;
  std::int64_t pad = 0;  // elements between tokens beyond heads x head_dim, in q, k and v (strides)
  std::string label() const {
    std::string s = "lens_q";
    for (auto l : lens_q) s += " " + std::to_string(l);
    s += ", lens_k";
    for (auto l : lens_k) s += " " + std::to_string(l);
    return s + ", kv_heads " + std::to_string(kv_heads) + ", group " + std::to_string(group) + ", head_dim " +
           std::to_string(head_dim) + (causal ? ", causal" : "") + ", window " + std::to_string(window) + ", pad " + std::to_string(pad);
  }
};

inline std::vector<std::int32_t> offsets(const std::vector<std::int32_t>& lens) {
  std::vector<std::int32_t> cu(lens.size() + 1, 0);
  std::partial_sum(lens.begin(), lens.end(), cu.begin() + 1);
  return cu;
}

// The shapes both backends run: every mask over sequences that are longer, shorter and as long as
// their keys, one empty; group 1, 4 and an odd 3.
inline std::vector<AttnCase> attention_cases(std::int64_t head_dim) {
  const std::vector<std::int32_t> q = {37, 1, 0, 70, 5}, k = {37, 50, 9, 131, 3};
  std::vector<AttnCase> out;
  for (bool causal : {false, true})
    for (std::int64_t window : {std::int64_t{0}, std::int64_t{17}})
      for (std::int64_t group : {std::int64_t{1}, std::int64_t{4}, std::int64_t{3}})
        out.push_back({q, k, 2, group, head_dim, causal, window, group == 3 ? 24 : 0});
  return out;
}

// The inputs of one case, in float64 (what the reference reads; the kernel gets them rounded to
// its type, and the reference is fed the rounded values).
struct AttnInputs {
  std::vector<std::int32_t> cu_q, cu_k;
  std::int64_t total_q = 0, total_k = 0, heads = 0, max_q = 0, q_stride = 0, kv_stride = 0;
  std::vector<double> q, k, v;
};

template <class Round> AttnInputs attention_inputs(const AttnCase& c, Round round) {
  AttnInputs in;
  in.cu_q = offsets(c.lens_q);
  in.cu_k = offsets(c.lens_k);
  in.total_q = in.cu_q.back();
  in.total_k = in.cu_k.back();
  in.heads = c.kv_heads * c.group;
  for (auto l : c.lens_q) in.max_q = std::max<std::int64_t>(in.max_q, l);
  in.q_stride = in.heads * c.head_dim + c.pad;
  in.kv_stride = c.kv_heads * c.head_dim + c.pad;
  // Scores of a few units: softmax neither flat nor one-hot.
  in.q = random_values<double>(static_cast<std::size_t>(in.total_q * in.q_stride), -1.5, 1.5, round);
  in.k = random_values<double>(static_cast<std::size_t>(in.total_k * in.kv_stride), -1.5, 1.5, round);
  in.v = random_values<double>(static_cast<std::size_t>(in.total_k * in.kv_stride), -3, 3, round);
  return in;
}

struct AttnExpected {
  std::vector<double> o, lse;
};
inline AttnExpected attention_expected(const AttnCase& c, const AttnInputs& in, double scale) {
  AttnExpected e;
  jitk_reference::attention_prefill(e.o, e.lse, in.q, in.k, in.v, in.cu_q, in.cu_k, c.kv_heads, c.group, c.head_dim, c.causal, c.window,
                                    scale, in.q_stride, in.kv_stride, in.kv_stride);
  return e;
}

// lse's error: a row that sees no key must read -inf exactly; the others by relative L2 (NaN: +inf).
inline double lse_error(const std::vector<double>& got, const std::vector<double>& expected) {
  std::vector<double> g, e;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::isinf(expected[i])) {
      if (!(std::isinf(got[i]) && got[i] < 0)) return std::numeric_limits<double>::infinity();
      continue;
    }
    g.push_back(got[i]);
    e.push_back(expected[i]);
  }
  return jitk_reference::relative_l2_error(g, e);
}

}  // namespace jitk_test
