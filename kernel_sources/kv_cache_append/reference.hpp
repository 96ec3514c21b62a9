// kv_cache_append, exactly: the reference its tests judge the kernel by (a copy, so no float64).
#pragma once
#include <cstdint>
#include <vector>

namespace jitk_reference {

// rows [tokens, kv_heads, head_dim] copied into cache [num_pages, page_size, kv_heads, head_dim] at
// each token's slot (page * page_size + offset in the page); a slot outside [0, num_pages * page_size)
// (-1: padding) writes nothing.
template <class T>
void kv_cache_append(std::vector<T>& cache, const std::vector<T>& rows, const std::vector<std::int64_t>& slots, std::int64_t kv_heads,
                     std::int64_t head_dim, std::int64_t num_pages, std::int64_t page_size) {
  const std::int64_t row_len = kv_heads * head_dim;
  for (std::size_t t = 0; t < slots.size(); ++t) {
    const std::int64_t slot = slots[t];
    if (slot < 0 || slot >= num_pages * page_size) continue;
    for (std::int64_t i = 0; i < row_len; ++i)
      cache[static_cast<std::size_t>(slot * row_len + i)] = rows[static_cast<std::size_t>(std::int64_t(t) * row_len + i)];
  }
}

}  // namespace jitk_reference
