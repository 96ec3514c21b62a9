// What the CPU and GPU tests of attention_decode share: the shapes they run (odd contexts, pages
// shuffled over the pool, rows that see no key) and the tables a scheduler would hand out.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/kernels.hpp"
#include "test_support.hpp"

namespace jitk_test {

using Decode = jit::kernels::AttentionDecode;

struct DecodeShape {
  std::int64_t kv_heads, group, q_len, head_dim, page_size;
  std::vector<std::int32_t> contexts;  // one a sequence, its new tokens included
  std::int64_t batch() const { return static_cast<std::int64_t>(contexts.size()); }
  std::int64_t heads() const { return kv_heads * group; }
  std::int64_t q_elements() const { return batch() * q_len * heads() * head_dim; }
};

// The paged cache of a shape: each sequence's pages drawn without replacement from a shuffled
// pool with spare pages (never read), and the table's unused entries past each context set to a
// page far outside the pool (never read either: the kernel reads only the pages a context covers).
struct DecodeTables {
  std::int64_t max_pages = 0, num_pages = 0;
  std::vector<std::int32_t> block_table;
  std::int64_t cache_elements(const DecodeShape& s) const { return num_pages * s.page_size * s.kv_heads * s.head_dim; }
};
inline constexpr std::int32_t kUnusedPage = 1 << 30;

inline DecodeTables decode_tables(const DecodeShape& s) {
  DecodeTables t;
  std::int64_t used = 0;
  for (auto c : s.contexts) {
    const std::int64_t pages = (c + s.page_size - 1) / s.page_size;
    t.max_pages = std::max(t.max_pages, pages + 1);  // one entry to spare a row
    used += pages;
  }
  t.num_pages = used + 3;
  std::vector<std::int32_t> pool(static_cast<std::size_t>(t.num_pages));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng());
  t.block_table.assign(static_cast<std::size_t>(s.batch() * t.max_pages), kUnusedPage);
  std::size_t next = 0;
  for (std::int64_t b = 0; b < s.batch(); ++b)
    for (std::int64_t i = 0; i < (s.contexts[static_cast<std::size_t>(b)] + s.page_size - 1) / s.page_size; ++i)
      t.block_table[static_cast<std::size_t>(b * t.max_pages + i)] = pool[next++];
  return t;
}

// Odd shapes (METHOD.md): contexts not page-aligned, one page or less, several hundred pages (a
// split), contexts shorter than q_len (rows that see no key), 0 (a sequence with nothing).
inline std::vector<DecodeShape> decode_shapes() {
  std::vector<DecodeShape> shapes;
  for (std::int64_t head_dim : {64, 96, 128})
    for (std::int64_t group : {1, 4, 8})
      for (std::int64_t q_len : {1, 3, 8})
        shapes.push_back({2, group, q_len, head_dim, 16, {37, 1, 255, 5}});
  shapes.push_back({3, 4, 1, 128, 16, {1000, 17, 4097}});  // long: split contexts
  shapes.push_back({2, 8, 2, 64, 7, {999, 2, 1, 0}});      // an odd page; a row with no key; an empty sequence
  shapes.push_back({1, 16, 8, 40, 32, {3, 700}});          // 128 rows: 16 chunks of 8
  shapes.push_back({2, 1, 8, 256, 64, {8, 9, 4000}});      // head_dim 256; contexts of exactly q_len
  return shapes;
}

}  // namespace jitk_test
