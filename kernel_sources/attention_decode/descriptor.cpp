// Paged decode attention (attention_decode): the family descriptor.
#include "jit/family.hpp"

namespace jit::detail {
namespace {

// The largest page a specialization takes (vLLM and FlashInfer use 16 to 256 tokens a page).
constexpr std::int64_t kMaxPageSize = 1024;
// GPU limits: a head's packs spread over at most a warp's lanes twice (registers hold 8 rows x 2
// packs of sums a thread), and pages of a power of two up to 256 tokens (a shift to find a key's page).
constexpr std::int64_t kGpuMaxHeadDim = 256;
constexpr std::int64_t kGpuMaxPageSize = 256;
constexpr std::int64_t kDefaultWarps = 4;
constexpr std::int64_t kMaxWarps = 16;
// Query rows a block holds (AttentionDecode::kRowsPerItem), and the shared memory a block may
// declare statically.
constexpr std::int64_t kRowsPerBlock = 8;
constexpr std::int64_t kStaticSharedBytes = 48 * 1024;

// One block a work item (sequence, kv head, row chunk, split); its warps share the item's keys.
TilePlan decode_gpu_plan(const ParamSet& p) {
  const std::int64_t head_dim = int_param(p, "head_dim"), page_size = int_param(p, "page_size");
  const std::int64_t warps = int_param(p, "warps") == 0 ? kDefaultWarps : int_param(p, "warps");
  if (head_dim % 8 != 0 || head_dim > kGpuMaxHeadDim)
    return {"head_dim = " + std::to_string(head_dim) + ": on the GPU a multiple of 8 up to " + std::to_string(kGpuMaxHeadDim)};
  if (page_size > kGpuMaxPageSize || (page_size & (page_size - 1)) != 0)
    return {"page_size = " + std::to_string(page_size) + ": on the GPU a power of two up to " + std::to_string(kGpuMaxPageSize)};
  if (warps > kMaxWarps) return {"warps = " + std::to_string(warps) + ": at most " + std::to_string(kMaxWarps)};
  // the warps' partial rows meet in static shared memory: warps x rows x head_dim floats
  const std::int64_t rows = std::min<std::int64_t>(kRowsPerBlock, int_param(p, "group") * int_param(p, "q_len"));
  const std::int64_t staging = warps * rows * (head_dim + 2) * 4;
  if (staging > kStaticSharedBytes)
    return shared_memory_refused("warps = " + std::to_string(warps) + " x " + std::to_string(rows) + " rows x head_dim " +
                                     std::to_string(head_dim) + " need " + std::to_string(staging) + " bytes of shared memory",
                                 staging, kStaticSharedBytes);
  return {"", static_cast<int>(warps * 32), 0, 1, 1, 1};
}

}  // namespace

std::vector<KernelSpec> attention_decode_family() {
  Implementation cpu = cpu_impl("attention_decode/attention_decode.cpp");
  Implementation cuda = cuda_generic("attention_decode/attention_decode.cu", {Kind::Tile, 128, 4, 1, 1, 1, 1, 1},
                                     "a block per (sequence, kv head, split); f16/bf16: each warp 8-key tiles on mma.sync, else 16-byte packs of its keys for the group's rows");
  cuda.min_capability = 80;
  cuda.tile_plan = decode_gpu_plan;
  Implementation hip = hip_generic(cuda);
  KernelSpec decode{
      "attention_decode",
      "o = softmax(scale q k^T) v for 1-8 new tokens a sequence over a paged KV cache [pages, page_size, kv_heads, head_dim]",
      {dtype_param(),
       {"head_dim", {}, 1, kMaxHeadDim, "elements of one head"},
       {"page_size", {}, 1, kMaxPageSize, "tokens a cache page holds"},
       {"group", {}, 1, 64, "query heads a kv head (GQA; 1: multi-head)"},
       {"q_len", {}, 1, 8, "new tokens a sequence (1: decode; more: speculative decoding, chunked prefill)"},
       {"warps", {}, 0, kMaxWarps, "GPU: warps a block (0: the default, 4)", false, ParamValue{std::int64_t{0}}}},
      {std::move(cpu), std::move(cuda), std::move(hip)}};
  return {std::move(decode)};
}

}  // namespace jit::detail
