// block_sparse_matmul: the family descriptor. Its GPU texts are the gemm family's (gemm.cu,
// gemm_sm90.cu) walking only the blocks present; its CPU text is its own.
#include "kernel_sources/gemm/tile_plans.hpp"

namespace jit::detail {
namespace {

// block_sparse_matmul on gemm.cu: a tile is tile_m rows by one block column, walking the blocks
// of that column (forward) or row (backward_input) one block of K a slice; backward_weight's tile
// is one block of dW, walking M in 32-row slices. Slices: X and dY row-major; W's blocks row-major
// (forward) or read transposed (backward_input); X read transposed (backward_weight).
TilePlan block_sparse_cuda_plan(const ParamSet& p) {
  const std::int64_t bs = int_param(p, "block_size");
  if (bs != 16 && bs != 32 && bs != 64) return {"block_size = " + std::to_string(bs) + ": 16, 32 or 64"};
  if (text_is(p, "op", "backward_weight")) return cuda_tile_plan(p, false, true, bs, bs, 32);
  return cuda_tile_plan(p, true, text_is(p, "op", "forward"), int_param(p, "tile_m"), bs, bs);
}
// kernel_sources/gemm/gemm_sm90.cu's block_sparse_matmul: 64-wide blocks (128-byte rows). forward and
// backward_input: tiles of tile_m rows (64, 128, 256: wgmma's N) by one block column, two consumer
// warpgroups taking them in turn (one block an SM), each staging its finished tile (tile_m x 64)
// in shared memory on its way to C; backward_weight: one consumer, its tile a block of dW, two
// blocks an SM where shared memory fits twice.
TilePlan block_sparse_sm90a_plan(const ParamSet& p) {
  const std::int64_t bs = int_param(p, "block_size"), stages = int_param(p, "stages");
  if (bs != 64) return {"block_size = " + std::to_string(bs) + ": cuda-sm90a takes 64 (the others run on 'cuda')"};
  if (stages < 2 || stages > 8) return {"stages = " + std::to_string(stages) + ": 2 to 8 on cuda-sm90a"};
  if (text_is(p, "op", "backward_weight")) {
    const std::int64_t shared = sm90_shared_bytes(stages, 64, 64);
    return {"", 256, shared, 64, 64, 64, 2 * shared <= kMaxSharedBytes ? 2 : 1};
  }
  const std::int64_t tm = int_param(p, "tile_m");
  if (tm != 64 && tm != 128 && tm != 256) return {"tile_m = " + std::to_string(tm) + ": 64, 128 or 256 on cuda-sm90a"};
  const std::int64_t shared = sm90_shared_bytes(stages, 64, tm, tm);
  if (shared > kMaxSharedBytes)
    return shared_memory_refused("tile_m = " + std::to_string(tm) + " x " + std::to_string(stages) + " stages needs " +
                                     std::to_string(shared) + " bytes of shared memory; at most " + std::to_string(kMaxSharedBytes),
                                 shared);
  return {"", 384, shared, tm, 64, 64, 1};
}
TilePlan block_sparse_cpu_plan(const ParamSet& p) {
  const std::int64_t bs = int_param(p, "block_size");
  if (bs != 16 && bs != 32 && bs != 64) return {"block_size = " + std::to_string(bs) + ": 16, 32 or 64"};
  return {"", 0, 0, int_param(p, "tile_m"), bs, bs};
}

}  // namespace

std::vector<KernelSpec> block_sparse_family() {
  Implementation cpu = cpu_impl("block_sparse/block_sparse.cpp");
  cpu.layout = {Kind::Tile, 256, 4, 1, 16, 64, 64, 1};
  cpu.tile_plan = block_sparse_cpu_plan;
  cpu.note = "host CPU, all cores; only the blocks present";
  Implementation cuda = cuda_generic("gemm/gemm.cu", {Kind::Tile, 256, 4, 1, 128, 64, 64, 3}, "");
  cuda.min_capability = 80;
  cuda.tile_plan = block_sparse_cuda_plan;
  // 16-bit 32-wide blocks default to 256-row tiles (4 warps of 64 x 32): on the H100, bf16 4096^3 at
  // 50/75/90% sparsity, three alternated runs, 4-11% faster than 128 rows for forward and
  // backward_input (64 rows: 10-15% slower); backward_weight's tile is one block of dW either way.
  cuda.tile_defaults = [layout = cuda.layout](const ParamSet& p) {
    GpuLayout l = layout;
    if (!text_is(p, "dtype", "f32") && int_param(p, "block_size") == 32) l.tile_m = 256;
    return l;
  };
  cuda.note = "gemm.cu's tiles walking only the blocks present (WMMA f16/bf16, SIMT f32)";
  std::vector<Implementation> impls = {
      std::move(cpu), std::move(cuda),
      hopper_impl({Kind::Tile, 384, 4, 1, 256, 64, 64, 4}, block_sparse_sm90a_plan,
                      "Hopper, 64-wide blocks: gemm_sm90.cu's wgmma + TMA pipeline walking only the blocks present")};
  return {
      {"block_sparse_matmul", "X W, dY W^T, or X^T dY on W's support, W block-sparse (BlockMask)",
       {{"dtype", {"f32", "f64", "f16", "bf16"}, 0, 0, "element type (accumulation in float, double for f64)"},
        {"op", {"forward", "backward_input", "backward_weight"}, 0, 0, "the product: X W, dY W^T, or X^T dY on W's support"},
        {"block_size", {}, 16, 64, "the mask's blocks: 16, 32 or 64"},
        {"tile_m", {}, 0, 256, "GPU: rows of X a block covers (0: the default)", false, std::int64_t{0}},
        {"stages", {}, 0, 8, "GPU: blocks of W in flight in shared memory (0: the default)", false, std::int64_t{0}}},
       std::move(impls)}};
}

}  // namespace jit::detail
