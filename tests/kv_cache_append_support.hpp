// What the CPU and GPU tests of kv_cache_append share: the shapes they run, slots as a model's
// scheduler hands them out (distinct, some padding, some past the cache), caches poisoned with one
// byte pattern, and the check: the whole cache equal, bit for bit, to the reference's.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "../examples/reference_kernels.hpp"
#include "jit/kernels.hpp"
#include "test_support.hpp"

namespace jitk_test {

using KvAppend = jit::kernels::KvCacheAppend;

struct KvShape {
  std::int64_t tokens, kv_heads, head_dim, page_size, num_pages;
  std::int64_t row_elements() const { return tokens * kv_heads * head_dim; }
  std::int64_t cache_elements() const { return num_pages * page_size * kv_heads * head_dim; }
};
// Odd sizes (METHOD.md): 37 tokens of 3 heads in 11 pages; heads that split into 16-byte packs
// (96, 128) and one that does not (5); a common page and an odd one.
inline const KvShape kKvShapes[] = {{37, 3, 96, 16, 11}, {37, 3, 128, 16, 11}, {37, 3, 5, 16, 11},
                                    {37, 3, 96, 7, 11},  {37, 3, 128, 7, 11},  {37, 3, 5, 7, 11}};
// Every cache byte before the append: a pattern no row holds (0xA5A5A5A5 is a small negative float).
inline constexpr unsigned char kKvPoison = 0xA5;

// One distinct slot a token in the cache's num_pages * page_size, then a few tokens marked -1
// (padding) and two past the cache (which must write nothing).
inline std::vector<std::int64_t> random_slots(const KvShape& s) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(s.num_pages * s.page_size));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  std::shuffle(all.begin(), all.end(), rng());
  std::vector<std::int64_t> slots(all.begin(), all.begin() + s.tokens);
  const std::int64_t past = s.num_pages * s.page_size;
  const std::int64_t marks[] = {-1, -1, -1, past, past + 1000};
  for (std::size_t i = 0; i < std::size(marks) && 1 + 7 * i < slots.size(); ++i) slots[1 + 7 * i] = marks[i];
  return slots;
}

template <class T> std::vector<T> poisoned(std::size_t n) {
  std::vector<T> v(n);
  std::memset(static_cast<void*>(v.data()), kKvPoison, n * sizeof(T));
  return v;
}

// The elements of got that differ in any bit from expected (0: the append wrote exactly the
// reference's slots, and touched nothing else).
template <class T> std::int64_t bit_differences(const std::vector<T>& got, const std::vector<T>& expected) {
  if (got.size() != expected.size()) return -1;
  std::int64_t n = 0;
  for (std::size_t i = 0; i < got.size(); ++i) n += std::memcmp(&got[i], &expected[i], sizeof(T)) != 0;
  return n;
}

}  // namespace jitk_test
