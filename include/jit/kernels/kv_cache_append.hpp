// kv_cache_append: new k and v rows appended into a paged KV cache (its descriptor).
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// The new k and v rows [tokens, kv_heads, head_dim] copied into k_cache and v_cache [num_pages,
// page_size, kv_heads, head_dim] (contiguous, NHD as FlashInfer's and vLLM's paged caches): token t
// goes to slot slots[t] = page * page_size + offset in the page (vLLM's slot_mapping). A slot
// outside [0, num_pages * page_size) writes nothing: -1 marks padding, and slots live in device
// memory on a GPU, so the host cannot check them. Two tokens with one slot race; k and v must not
// overlap the caches. Token rows of k and v may lie further apart than kv_heads x head_dim: k_stride
// and v_stride (elements between consecutive tokens; 0: packed) read them in place as column
// slices of one QKV projection's output [tokens, (heads + 2 kv_heads) x head_dim] (k = qkv + heads
// x head_dim, v = k + kv_heads x head_dim, both strides the row's width).
struct KvCacheAppend {
  static constexpr const char* name = "kv_cache_append";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "tokens, kv_heads, num_pages, k, v, slots, k_cache, v_cache, k_stride = 0, v_stride = 0";
  struct Params {
    DType dtype = DType::f32;
    std::int64_t head_dim = 0;
    std::int64_t page_size = 0;
    auto fields() const { return std::tie(dtype, head_dim, page_size); }
  };
  struct Args {
    std::int64_t tokens;
    std::int64_t kv_heads;
    std::int64_t num_pages;
    ConstPtr k;                   // [tokens, kv_heads, head_dim]
    ConstPtr v;                   // [tokens, kv_heads, head_dim]
    const std::int64_t* slots;    // [tokens]
    MutPtr k_cache;               // [num_pages, page_size, kv_heads, head_dim]
    MutPtr v_cache;               // [num_pages, page_size, kv_heads, head_dim]
    std::int64_t k_stride = 0;    // elements between tokens of k; 0: kv_heads x head_dim (packed)
    std::int64_t v_stride = 0;    // elements between tokens of v; 0: kv_heads x head_dim (packed)
  };
  static ParamSet to_params(const Params& p) {
    return {{"dtype", std::string(dtype_name(p.dtype))}, {"head_dim", p.head_dim}, {"page_size", p.page_size}};
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "tokens", a.tokens);
    jit::detail::check_non_negative(name, "kv_heads", a.kv_heads);
    jit::detail::check_non_negative(name, "num_pages", a.num_pages);
    // a token's kv_heads x head_dim elements, and all tokens' rows, fit 64-bit counts
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    if (a.kv_heads > kMax / p.head_dim || (a.tokens > 0 && a.kv_heads * p.head_dim > kMax / a.tokens) ||
        (a.kv_heads > 0 && a.num_pages > kMax / p.page_size / a.kv_heads / p.head_dim))
      throw Error(ErrorCode::InvalidArgument, std::string(name) + ": tokens = " + std::to_string(a.tokens) + ", num_pages = " +
                                                  std::to_string(a.num_pages) + " of kv_heads = " + std::to_string(a.kv_heads) +
                                                  " heads of " + std::to_string(p.head_dim) + " elements pass a 64-bit count");
    const std::int64_t rows = a.tokens * a.kv_heads, width = a.kv_heads * p.head_dim;
    const std::int64_t k_stride = detail::token_stride(name, "k_stride", a.k_stride, width, a.tokens, p.dtype);
    const std::int64_t v_stride = detail::token_stride(name, "v_stride", a.v_stride, width, a.tokens, p.dtype);
    detail::check_tensors(name, p.dtype, rows, {{"k", a.k}, {"v", a.v}, {"k_cache", a.k_cache}, {"v_cache", a.v_cache}});
    jit::detail::check_not_null(name, "slots", a.slots, rows);
    out.add_pointer(a.k.data);
    out.add_pointer(a.v.data);
    out.add_pointer(a.slots);
    out.add_pointer(a.k_cache.data);
    out.add_pointer(a.v_cache.data);
    out.add_i64(a.kv_heads);
    out.add_i64(a.num_pages);
    out.add_i64(k_stride);
    out.add_i64(v_stride);
    out.work_items = rows * p.head_dim;  // the rows' elements (a GPU thread takes a 16-byte pack of them)
    out.min_grain = detail::kMinElementsPerTask;
  }
};

}  // namespace jit::kernels
