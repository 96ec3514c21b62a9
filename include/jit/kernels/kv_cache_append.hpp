// kv_cache_append: new k and v rows appended into a paged KV cache (its descriptor).
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// The new k and v rows [tokens, kv_heads, head_dim] copied into k_cache and v_cache [num_pages,
// page_size, kv_heads, head_dim] (contiguous, NHD as FlashInfer's and vLLM's paged caches): token t
// goes to slot slots[t] = page * page_size + offset in the page (vLLM's slot_mapping). A slot
// outside [0, num_pages * page_size) writes nothing: -1 marks padding, and slots live in device
// memory on a GPU, so the host cannot check them. Two tokens with one slot race; k and v must not
// overlap the caches.
struct KvCacheAppend {
  static constexpr const char* name = "kv_cache_append";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "tokens, kv_heads, num_pages, k, v, slots, k_cache, v_cache";
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
  };
  static ParamSet to_params(const Params& p) {
    return {{"dtype", std::string(dtype_name(p.dtype))}, {"head_dim", p.head_dim}, {"page_size", p.page_size}};
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "tokens", a.tokens);
    jit::detail::check_non_negative(name, "kv_heads", a.kv_heads);
    jit::detail::check_non_negative(name, "num_pages", a.num_pages);
    const std::int64_t rows = a.tokens * a.kv_heads;
    detail::check_tensors(name, p.dtype, rows, {{"k", a.k}, {"v", a.v}, {"k_cache", a.k_cache}, {"v_cache", a.v_cache}});
    jit::detail::check_not_null(name, "slots", a.slots, rows);
    out.add_pointer(a.k.data);
    out.add_pointer(a.v.data);
    out.add_pointer(a.slots);
    out.add_pointer(a.k_cache.data);
    out.add_pointer(a.v_cache.data);
    out.add_i64(a.kv_heads);
    out.add_i64(a.num_pages);
    out.work_items = rows * p.head_dim;  // the rows' elements (a GPU thread takes a 16-byte pack of them)
    out.min_grain = detail::kMinElementsPerTask;
  }
};

}  // namespace jit::kernels
