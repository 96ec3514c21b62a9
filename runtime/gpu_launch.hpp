// The grid and kernel parameters of a GPU launch, shared by the CUDA and HIP drivers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "jit/jit.hpp"
#include "jit/specializer.hpp"

namespace jit::detail {

// Built on the stack at each launch: the grid covering args.work_items with `shape`, and the
// parameter array the launch call takes (the descriptor's arguments, then the number of work
// items, the kernel's last parameter). Not copyable: params points into itself.
struct GpuLaunch {
  static constexpr std::int64_t kMaxGrid = 2147483647;

  GpuLaunch(const ArgPack& args, const LaunchShape& shape) : block(static_cast<unsigned>(shape.block)), items(args.work_items) {
    std::int64_t blocks = 0;
    if (shape.tile_m > 0) {  // a tile layout: blocks over rows x columns
      // in clusters: a cluster takes `cluster` vertically neighbouring tiles (rows of tiles rounded up)
      const std::int64_t tiles_m = (args.work_items + shape.tile_m - 1) / shape.tile_m;
      blocks = (tiles_m + shape.cluster - 1) / shape.cluster * shape.cluster * ((args.work_columns + shape.tile_n - 1) / shape.tile_n);
    } else {
      const std::int64_t elements = args.work_items * shape.elements_per_item;
      blocks = (elements + shape.items_per_block - 1) / shape.items_per_block;
    }
    if (blocks > kMaxGrid)
      throw Error(ErrorCode::InvalidArgument, "launch of " + std::to_string(args.work_items) + " items is too large for one grid");
    grid = static_cast<unsigned>(blocks);
    for (int i = 0; i < args.size(); ++i) params[i] = args.pointers()[i];
    params[args.size()] = &items;
    count = args.size() + 1;
  }
  // Appends a by-value parameter after the work count (tensor maps).
  void append(void* p) { params[count++] = p; }
  GpuLaunch(const GpuLaunch&) = delete;
  GpuLaunch& operator=(const GpuLaunch&) = delete;

  unsigned grid = 0;
  unsigned block;
  std::int64_t items;
  int count = 0;
  void* params[ArgPack::kMaxArgs + 3];
};

// Whether a launch's tiles alone would leave over half the SMs idle (decode's few rows).
inline bool leaves_sms_idle(std::int64_t tiles, int sm_count) { return tiles * 2 <= sm_count; }

// Blocks to share each tile's K walk (a cluster a tile, shape.max_split_k at most) when the tiles
// leave SMs idle (decode: 16 x 4096 is 32 tiles of 16 x 128 for 132 SMs): as many as fill the SMs
// (blocks_per_sm a piece),
// each keeping at least kMinSlicesPerSplit slices of tile_k to pipeline. 1: no split.
inline int split_k_for(std::int64_t tiles, std::int64_t depth, const LaunchShape& shape, int sm_count) {
  constexpr std::int64_t kMinSlicesPerSplit = 4;
  if (shape.max_split_k <= 1 || tiles <= 0 || depth <= 0 || shape.tile_k <= 0 || !leaves_sms_idle(tiles, sm_count)) return 1;
  const std::int64_t slices = (depth + shape.tile_k - 1) / shape.tile_k;
  // blocks the SMs hold at once: two an SM where the plan fits two (cuda-sm90a's 64 x 64 tiles up to 6 stages)
  const std::int64_t slots = static_cast<std::int64_t>(sm_count) * std::max(1, shape.blocks_per_sm);
  const std::int64_t split = std::min<std::int64_t>({shape.max_split_k, slots / tiles, slices / kMinSlicesPerSplit});
  return split < 2 ? 1 : static_cast<int>(split);
}

// A split lowered until the launch's clusters (one a tile, `split` blocks each) all run at once:
// active[s] is how many clusters of s blocks the device runs at once (the driver's
// cuOccupancyMaxActiveClusters; 0 where it could not say: taken as fitting). The GPCs hold whole
// clusters, so fewer clusters of 4 or 8 fit than 132 / 4 or 132 / 8 (a cluster's blocks share a
// GPC); one tile past them waits for a second wave and the launch takes twice the time (H100,
// 64 x 128 x 4096 tiles of 64 x 4096, split 4: 0.37 of the copy rate, where 64 x 64 split 2 ran
// at 0.58).
inline int split_that_fits(int split, std::int64_t tiles, const int (&active)[9]) {
  while (split > 1 && active[split] > 0 && tiles > active[split]) --split;
  return split;
}

// A stream-K launch: the grid's first dp_blocks blocks take a whole tile each, and sk_blocks more
// (at most a wave) share the K slices of the tiles past them. sk_blocks 0: a plain launch.
struct StreamK {
  std::int64_t dp_blocks = 0, sk_blocks = 0;
};

// Where `tiles` end in a partial wave (`wave`: the blocks the SMs run at once), the tiles of that
// wave go stream-K when it saves at least 1% of the launch: a wave of blocks each walks an equal
// share of their slices (at least kMinSlices each, so that the tiles' partial sums stay few).
inline StreamK stream_k_for(std::int64_t tiles, std::int64_t depth, const LaunchShape& shape, std::int64_t wave) {
  constexpr std::int64_t kMinSlices = 8;
  if (!shape.stream_k || wave <= 0 || tiles <= wave || depth <= 0 || shape.tile_k <= 0) return {};
  const std::int64_t slices = (depth + shape.tile_k - 1) / shape.tile_k, tail = tiles % wave;
  const std::int64_t waves = (tiles + wave - 1) / wave;
  if (tail == 0 || slices < kMinSlices || (wave - tail) * 100 < wave * waves) return {};
  const std::int64_t blocks = std::min(wave, tail * slices / kMinSlices);
  if (blocks <= tail) return {};  // no finer than whole tiles
  return {tiles - tail, blocks};
}

}  // namespace jit::detail
