// Flash attention forward over variable-length batches (attention_prefill): the family descriptor.
#include <cstdlib>
#include <string>

#include "jit/family.hpp"
#include "support/logging.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {

// The largest group (query heads a kv head serves) a specialization takes: today's models use 1
// to 16 (Llama-3-70B: 8; multi-query attention: all heads, up to 128).
constexpr std::int64_t kMaxGroup = 256;
// Keys a window may reach back: any context a model runs.
constexpr std::int64_t kMaxWindow = std::int64_t{1} << 30;

// kernel_sources/attention_prefill/attention_prefill.cu, the generic text: a warp a 16-row slice of
// the block's tile_m query rows (mma.sync m16n8k16), Q resident, K and V tiles of tile_n keys each
// through shared memory, rows padded by 16 bytes (ldmatrix without bank conflicts).
TilePlan attention_cuda_plan(const ParamSet& p) {
  const std::int64_t d = int_param(p, "head_dim"), tm = int_param(p, "tile_m"), tn = int_param(p, "tile_n");
  const std::string tile = "tile_m = " + std::to_string(tm) + ", tile_n = " + std::to_string(tn);
  if (d % 16 != 0 || d > 256)
    return {"head_dim = " + std::to_string(d) + ": the CUDA text takes a multiple of 16 up to 256 (64, 96, 128, 256 ...)"};
  // 4 warps from 64 rows on, each taking tile_m / 64 slices of 16 rows; fewer rows: a warp a slice
  if (tm != 16 && tm != 32 && tm != 48 && tm != 64 && tm != 128 && tm != 192)
    return {tile + ": tile_m must be 16, 32, 48, 64, 128 or 192 on CUDA (4 warps of 16-row slices)"};
  if (tn < 16 || tn > 128 || tn % 16 != 0) return {tile + ": tile_n must be 16, 32, ... 128 on CUDA"};
  // A thread's accumulators: d / 2 of O and tile_n / 2 of the scores a slice; past 192 they spill.
  const std::int64_t slices = tm < 64 ? 1 : tm / 64;
  if (slices * (d / 2 + tn / 2) > 192)
    return {tile + ": head_dim " + std::to_string(d) + " takes " + std::to_string(slices * (d / 2 + tn / 2)) +
            " accumulators a thread; at most 192 (fewer rows or keys a tile)"};
  const std::int64_t shared = (tm + 2 * tn) * (d + 8) * 2;  // Q, K and V tiles of 16-bit elements
  if (shared > kMaxSharedBytes)
    return shared_memory_refused(tile + " at head_dim " + std::to_string(d) + " needs " + std::to_string(shared) +
                                     " bytes of shared memory",
                                 shared);
  TilePlan plan{"", static_cast<int>(tm < 64 ? tm / 16 * 32 : 128), shared, tm, 1, d};
  return plan;
}

// The default tiles, the fastest of the sweep in bench/results/2026-11-25-h100-attention.md: 128
// query rows (4 warps of two 16-row slices) by 64 keys; by 128 keys for heads up to 64 (280 against
// 258 TFLOP/s at head 64), 64 x 64 for heads over 128 (their O accumulators take twice the registers).
GpuLayout attention_cuda_tiles(const ParamSet& p, GpuLayout l) {
  const std::int64_t d = int_param(p, "head_dim");
  if (d <= 64) l.tile_n = 128;
  if (d > 128) l.tile_m = 64;
  return l;
}

// kernel_sources/attention_prefill/attention_prefill.cu's Hopper path: a producer warpgroup and
// tile_m / 64 consumer warpgroups (wgmma), K and V in stages of swizzled 64-element slabs.
// tma: cuda-sm90a-tma, whose producer is one thread issuing the copy engine's loads (24 registers
// against 56, the consumers get the rest), with one 8-byte mbarrier more; its tile_k is tile_n,
// the rows of the host's tensor-map boxes (64 elements of a head by tile_n keys).
TilePlan attention_hopper_plan(const ParamSet& p, bool tma) {
  const std::int64_t d = int_param(p, "head_dim"), tm = int_param(p, "tile_m"), tn = int_param(p, "tile_n");
  const std::string tile = "tile_m = " + std::to_string(tm) + ", tile_n = " + std::to_string(tn);
  if (d != 64 && d != 128 && d != 256) return {"head_dim = " + std::to_string(d) + ": cuda-sm90a takes 64, 128 and 256"};
  if (tm != 64 && tm != 128 && tm != 192) return {tile + ": tile_m must be 64, 128 or 192 on cuda-sm90a (64 rows a consumer warpgroup)"};
  if (tn != 64 && tn != 80 && tn != 128 && tn != 192 && tn != 256) return {tile + ": tile_n must be 64, 80, 128, 192 or 256 on cuda-sm90a"};
  // A consumer's registers (the producer keeps 56, or 24 with tma): O's d / 2, the scores'
  // tile_n / 2 and P's tile_n / 4, and 32 more (ptxas of NVRTC 13.0, sm_90a: 128 x 80 at head
  // 256 and 128 x 192 at head 128 fit 224 and 240 without a spill; 128 x 192 at head 128 spills
  // at 224, 128 x 256 at head 64 at 240).
  const std::int64_t consumers = tm / 64, threads = 128 * (consumers + 1), producer = tma ? 24 : 56;
  const std::int64_t regs =
      std::min<std::int64_t>(240, (65536 / threads / 8 * 8 * threads - 128 * producer) / (128 * consumers) / 8 * 8);
  const std::int64_t needs = d / 2 + 3 * tn / 4 + 32;
  if (needs > regs)
    return {tile + ": head_dim " + std::to_string(d) + " needs " + std::to_string(needs) + " registers a consumer thread; " +
            std::to_string(consumers) + " consumers have " + std::to_string(regs)};
  // Q's tile and two stages of K and V tiles (each stage with four 8-byte mbarriers), 1024 bytes of
  // alignment; then as many stages more, up to four, as fit (the text takes those it is built for)
  const auto shared_of = [&](std::int64_t stages) { return 2 * (tm * d + stages * 2 * tn * d) + stages * 4 * 8 + 1024 + (tma ? 8 : 0); };
  std::int64_t shared = shared_of(2);
  for (std::int64_t stages = 4; stages > 2; --stages)
    if (shared_of(stages) <= kMaxSharedBytes) {
      shared = shared_of(stages);
      break;
    }
  if (shared > kMaxSharedBytes)
    return shared_memory_refused(tile + " at head_dim " + std::to_string(d) + " needs " + std::to_string(shared) + " bytes of shared memory",
                                 shared);
  return {"", static_cast<int>(threads), shared, tm, 1, tma ? tn : d};
}
TilePlan attention_sm90a_plan(const ParamSet& p) { return attention_hopper_plan(p, false); }
TilePlan attention_sm90a_tma_plan(const ParamSet& p) { return attention_hopper_plan(p, true); }

// cuda-sm90a-tma ranks above cuda-sm90a (the default where the params suit both): on the H100 it
// ran 1.05-1.22x the cp.async text at every head size (bench/results/2026-11-26-h100-fa-tma.md).
// JITK_FA_TMA=0 ranks it below (taken only when asked for by name); another value than 0 or 1:
// one WARN, the default.
int attention_tma_priority() {
  const char* v = std::getenv("JITK_FA_TMA");
  if (!v || !*v || std::string(v) == "1") return 2;
  if (std::string(v) == "0") return 0;
  warn_once("fa-tma", "JITK_FA_TMA='" + printable(v) + "' is neither 0 nor 1; attention_prefill's cuda-sm90a-tma stays first on Hopper");
  return 2;
}

// Hopper's default tiles (H100, bench/results/2026-11-25-h100-attention.md): 128 x 128; 192 x 64
// for heads of 64 (398 against 348 TFLOP/s: three consumers), 128 x 64 for heads of 256.
GpuLayout attention_sm90a_tiles(const ParamSet& p, GpuLayout l) {
  const std::int64_t d = int_param(p, "head_dim");
  if (d <= 64) l.tile_m = 192, l.tile_n = 64;
  if (d > 128) l.tile_n = 64;
  return l;
}
// cuda-sm90a-tma's: the same, but 128 x 80 for heads of 256 (its consumers' 240 registers take
// them; H100, s8192: 698 / 626 TFLOP/s full / causal against 128 x 64's 633-672 / 591), and 192 x
// 128 for heads of 64 under a causal mask (FlashAttention-3's head-64 tile; three consumers of 160
// registers, which the cp.async text's 56-register producer leaves it short of; H100, s2048: 329
// against 192 x 64's 302 TFLOP/s in one call, bench/results/2026-11-26-h100-attention-causal-tiles.md;
// without a mask it is not measured yet).
GpuLayout attention_sm90a_tma_tiles(const ParamSet& p, GpuLayout l) {
  l = attention_sm90a_tiles(p, l);
  if (int_param(p, "head_dim") > 128) l.tile_n = 80;
  if (int_param(p, "head_dim") <= 64 && int_param(p, "causal") != 0) l.tile_n = 128;
  return l;
}

std::string attention_params_problem(const ParamSet& p) {
  const std::int64_t window = int_param(p, "window");
  if (window < 0) return "parameter 'window' = " + std::to_string(window) + "; allowed: 0 (none) or keys > 0";
  return "";
}

}  // namespace

std::vector<KernelSpec> attention_prefill_family() {
  const GpuLayout tiles{Kind::Tile, 256, 1, 1, 128, 64, 0, 1};
  Implementation cuda = cuda_generic("attention_prefill/attention_prefill.cu", tiles,
                                     "mma.sync tensor cores, a warp 16 query rows, online softmax (FlashAttention-2)");
  cuda.min_capability = 80;  // bf16 mma.sync, cp.async
  cuda.dtypes = {DType::f16, DType::bf16};
  cuda.tile_plan = attention_cuda_plan;
  cuda.tile_defaults = [layout = tiles](const ParamSet& p) { return attention_cuda_tiles(p, layout); };
  GpuLayout hopper_tiles{Kind::Tile, 384, 1, 1, 128, 128, 0, 2};
  hopper_tiles.aligned_rows = true;  // cp.async copies 16 bytes; other rows run the generic text
  Implementation hopper = sm90a_impl(cuda.file, hopper_tiles, attention_sm90a_plan,
                                     "Hopper: wgmma, a producer warpgroup and 64-row consumer warpgroups taking turns (ping-pong), softmax under P V, 2-3 K/V stages");
  hopper.tile_defaults = [hopper_tiles](const ParamSet& p) { return attention_sm90a_tiles(p, hopper_tiles); };
  // The same text with K and V through the copy engine: tensor maps over the packed K and V, made
  // at each launch from the ArgPack's matrices; a launch they cannot take (a base or a stride off
  // 16 bytes, no keys) runs the generic text, as unaligned rows do.
  GpuLayout tma_tiles = hopper_tiles;
  tma_tiles.tensor_maps = true;
  Implementation hopper_tma = sm90a_impl(cuda.file, tma_tiles, attention_sm90a_tma_plan,
                                         "Hopper as cuda-sm90a, K and V by the copy engine (TMA): a one-thread producer, more registers for the consumers");
  hopper_tma.name = "cuda-sm90a-tma";
  hopper_tma.priority = attention_tma_priority();
  hopper_tma.tile_defaults = [tma_tiles](const ParamSet& p) { return attention_sm90a_tma_tiles(p, tma_tiles); };
  Implementation hip = hip_generic(cuda);
  hip.note = "a thread a query row (AMD, hipRTC; compiled in CI, not run)";
  Implementation cpu = cpu_impl("attention_prefill/attention_prefill.cpp");
  cpu.note = "host CPU, all cores over the query rows; online softmax a row";
  KernelSpec prefill{
      "attention_prefill",
      "softmax(scale q k^T + mask) v over variable-length sequences (flash attention forward), GQA/MQA, causal, "
      "sliding window, with the rows' log-sum-exp",
      {dtype_param(),
       {"head_dim", {}, 1, kMaxHeadDim, "elements of one head"},
       {"causal", {}, 0, 1, "1: query i sees keys up to its position i + lk - lq (aligned to the bottom right)"},
       {"window", {}, 0, kMaxWindow, "keys before the query's position still seen (flash-attn's window left); 0: all"},
       {"group", {}, 1, kMaxGroup, "query heads a kv head serves: heads / kv_heads (1: multi-head; heads: multi-query)"},
       {"tile_m", {}, 0, 256, "GPU: query rows a block takes, a group's heads of tile_m / group tokens (0: the default)", false,
        std::int64_t{0}},
       {"tile_n", {}, 0, 256, "GPU: keys a step of the walk takes (0: the default)", false, std::int64_t{0}}},
      {std::move(cpu), std::move(cuda), std::move(hopper), std::move(hopper_tma), std::move(hip)}};
  prefill.params_check = attention_params_problem;
  return {std::move(prefill)};
}

}  // namespace jit::detail
