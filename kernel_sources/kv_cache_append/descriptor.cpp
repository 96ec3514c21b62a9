// Paged KV cache append (kv_cache_append): the family descriptor.
#include "jit/family.hpp"

namespace jit::detail {
namespace {

// The largest page a specialization takes (vLLM and FlashInfer use 16 to 256 tokens a page).
constexpr std::int64_t kMaxPageSize = 1024;

}  // namespace

std::vector<KernelSpec> kv_cache_append_family() {
  // The grid covers the elements of the new rows, W (one 16-byte pack) a thread.
  const GpuLayout elements{Kind::Elementwise, 256, 1};
  KernelSpec append{
      "kv_cache_append",
      "new k and v rows copied into a paged KV cache [pages, page_size, kv_heads, head_dim] at each token's slot",
      {dtype_param(),
       {"head_dim", {}, 1, kMaxHeadDim, "elements of one head (k's and v's rows are kv_heads x head_dim)"},
       {"page_size", {}, 1, kMaxPageSize, "tokens a cache page holds (slot = page * page_size + offset in the page)"}},
      generic_impls("kv_cache_append/kv_cache_append.cpp", "kv_cache_append/kv_cache_append.cu", elements,
                    "one thread a 16-byte pack of a row")};
  return {std::move(append)};
}

}  // namespace jit::detail
