// attention_decode in float64: the reference its tests and bench judge the kernels by.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace jitk_reference {

struct DecodeResult {
  std::vector<double> o;    // [batch * q_len, heads, head_dim]
  std::vector<double> lse;  // [batch * q_len, heads]
};

// Query i of sequence s (context c = context_lens[s]) at position c - q_len + i attends to keys
// 0 .. c - q_len + i of its kv head (head / group), key j at page block_table[s][j / page_size],
// row j % page_size. A row that sees no key: o = 0, lse = -inf. The tables must be valid.
template <class T>
DecodeResult attention_decode(const std::vector<T>& q, const std::vector<T>& k_cache, const std::vector<T>& v_cache,
                              const std::vector<std::int32_t>& block_table, const std::vector<std::int32_t>& context_lens,
                              std::int64_t q_len, std::int64_t kv_heads, std::int64_t group, std::int64_t head_dim,
                              std::int64_t page_size, std::int64_t max_pages, double scale) {
  const std::int64_t batch = static_cast<std::int64_t>(context_lens.size()), heads = kv_heads * group, D = head_dim;
  DecodeResult r{std::vector<double>(static_cast<std::size_t>(batch * q_len * heads * D)),
                 std::vector<double>(static_cast<std::size_t>(batch * q_len * heads))};
  auto at = [&](const std::vector<T>& cache, std::int64_t s, std::int64_t j, std::int64_t kvh, std::int64_t i) {
    const std::int64_t page = block_table[static_cast<std::size_t>(s * max_pages + j / page_size)];
    return static_cast<double>(cache[static_cast<std::size_t>(((page * page_size + j % page_size) * kv_heads + kvh) * D + i)]);
  };
  for (std::int64_t s = 0; s < batch; ++s)
    for (std::int64_t t = 0; t < q_len; ++t)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t row = (s * q_len + t) * heads + h, kvh = h / group;
        const std::int64_t seen = std::max<std::int64_t>(0, context_lens[static_cast<std::size_t>(s)] - q_len + t + 1);
        std::vector<double> scores(static_cast<std::size_t>(seen));
        double m = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < seen; ++j) {
          double dot = 0;
          for (std::int64_t i = 0; i < D; ++i) dot += static_cast<double>(q[static_cast<std::size_t>(row * D + i)]) * at(k_cache, s, j, kvh, i);
          scores[static_cast<std::size_t>(j)] = dot * scale;
          m = std::max(m, dot * scale);
        }
        double l = 0;
        for (std::int64_t j = 0; j < seen; ++j) {
          const double w = std::exp(scores[static_cast<std::size_t>(j)] - m);
          l += w;
          for (std::int64_t i = 0; i < D; ++i) r.o[static_cast<std::size_t>(row * D + i)] += w * at(v_cache, s, j, kvh, i);
        }
        for (std::int64_t i = 0; i < D && l > 0; ++i) r.o[static_cast<std::size_t>(row * D + i)] /= l;
        r.lse[static_cast<std::size_t>(row)] = l > 0 ? m + std::log(l) : -std::numeric_limits<double>::infinity();
      }
  return r;
}

}  // namespace jitk_reference
