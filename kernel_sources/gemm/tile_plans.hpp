// The gemm family's tile plans that block-sparse matmul's implementations share (its texts are
// gemm.cu and gemm_sm90.cu too).
#pragma once
#include <cstdint>
#include <string>

#include "jit/family.hpp"

namespace jit::detail {

// kernel_sources/gemm/gemm.cu's launch for a tile_m x tile_n tile walking tile_k slices, `stages` deep,
// A and B slices kept in their global layout (rows padded by 16 bytes), f32's as rows of K. f16/bf16:
// warps of min(64, tile_m) x min(32, tile_n) (WMMA 16x16x16 fragments), C staged through shared
// memory (float) for the epilogue; f32: 8 x 8 a thread (8 x 16 from tile_n 256), at least one warp.
TilePlan cuda_tile_plan(const ParamSet& p, bool a_row, bool b_row, std::int64_t tm, std::int64_t tn, std::int64_t tk);

// gemm_sm90.cu's shared memory: `stages` slots of a_rows + b_rows rows of 64 16-bit elements
// (128-byte rows), 1024 bytes of slack to align them to the swizzle's period, the two consumers'
// staging areas of staged_rows rows of 64 each (block-sparse's transposed tiles), then the full and
// empty mbarriers of each stage and the two consumers' turn barriers.
// gemm's (not block-sparse's) epilogue staging, rows of 64 a consumer, where it fits.
inline constexpr std::int64_t kSm90EpilogueRows = 64;
std::int64_t sm90_shared_bytes(std::int64_t stages, std::int64_t a_rows, std::int64_t b_rows, std::int64_t staged_rows = 0);

// The Hopper text (gemm_sm90.cu) as an implementation of a tiled kernel: sm_90a, f16 and bf16,
// loads through tensor maps.
Implementation hopper_impl(GpuLayout layout, TilePlan (*plan)(const ParamSet&), std::string note);

}  // namespace jit::detail
