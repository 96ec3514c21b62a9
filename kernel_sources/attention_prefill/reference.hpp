// attention_prefill in float64: the reference its tests judge the kernel by.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace jitk_reference {

// o [total_q, heads, head_dim] and lse [heads, total_q] of softmax(scale q k^T + mask) v, per
// sequence b (queries cu_q[b] .. cu_q[b+1] - 1, keys cu_k[b] .. cu_k[b+1] - 1) and head h (kv head
// h / group). q, k, v: token rows q_stride, k_stride, v_stride elements apart. Query i of lq sits
// at position i + lk - lq; causal hides keys after it, a window w > 0 keys before position - w. A
// row that sees no key: o = 0, lse = -inf.
inline void attention_prefill(std::vector<double>& o, std::vector<double>& lse, const std::vector<double>& q,
                              const std::vector<double>& k, const std::vector<double>& v, const std::vector<std::int32_t>& cu_q,
                              const std::vector<std::int32_t>& cu_k, std::int64_t kv_heads, std::int64_t group, std::int64_t head_dim,
                              bool causal, std::int64_t window, double scale, std::int64_t q_stride, std::int64_t k_stride,
                              std::int64_t v_stride) {
  const std::int64_t heads = kv_heads * group, total_q = cu_q.back(), d = head_dim;
  o.assign(static_cast<std::size_t>(total_q * heads * d), 0.0);
  lse.assign(static_cast<std::size_t>(heads * total_q), -std::numeric_limits<double>::infinity());
  std::vector<double> s;
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const std::int64_t q0 = cu_q[b], lq = cu_q[b + 1] - q0, k0 = cu_k[b], lk = cu_k[b + 1] - k0;
    for (std::int64_t i = 0; i < lq; ++i)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t kvh = h / group, pos = i + lk - lq;
        const double* qr = &q[static_cast<std::size_t>((q0 + i) * q_stride + h * d)];
        s.assign(static_cast<std::size_t>(lk), -std::numeric_limits<double>::infinity());
        double m = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < lk; ++j) {
          if ((causal && j > pos) || (window > 0 && j < pos - window)) continue;
          const double* kr = &k[static_cast<std::size_t>((k0 + j) * k_stride + kvh * d)];
          double dot = 0;
          for (std::int64_t e = 0; e < d; ++e) dot += qr[e] * kr[e];
          s[static_cast<std::size_t>(j)] = dot * scale;
          m = std::max(m, dot * scale);
        }
        if (m == -std::numeric_limits<double>::infinity()) continue;
        double sum = 0;
        double* orow = &o[static_cast<std::size_t>(((q0 + i) * heads + h) * d)];
        for (std::int64_t j = 0; j < lk; ++j) {
          const double p = std::exp(s[static_cast<std::size_t>(j)] - m);
          if (p == 0) continue;
          sum += p;
          const double* vr = &v[static_cast<std::size_t>((k0 + j) * v_stride + kvh * d)];
          for (std::int64_t e = 0; e < d; ++e) orow[e] += p * vr[e];
        }
        for (std::int64_t e = 0; e < d; ++e) orow[e] /= sum;
        lse[static_cast<std::size_t>(h * total_q + q0 + i)] = m + std::log(sum);
      }
  }
}

}  // namespace jitk_reference
