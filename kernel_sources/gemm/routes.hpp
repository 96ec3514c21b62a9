// The gemm family's routing policy on CUDA: which launches of its texts another variant of the
// same kernel serves better, and with which params (runtime/cuda carries the routes out; this file
// only says which).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jit/registry.hpp"

namespace jit::detail {

// A gemm in f32 on its generic CUDA text at the default tiles (every tile param 0): which operands
// lie along K (A row-major, B column-major) and may be packed along M or N before a large launch.
struct AlongK {
  bool a = false, b = false;
};
AlongK packable_along_k(std::string_view kernel, const Implementation& impl, const ParamSet& params);
// "A and B", "A" or "B" (empty for neither).
std::string operands_text(AlongK operands);

// Which of an f32 gemm launch's operands lying along K (A row-major, B column-major: a_along_k,
// b_along_k) to pack, i.e. rewrite along M or N into scratch first, so that the generic text's
// tiles read them without transposing each slice on the way into shared memory. Rewriting A
// moves 8 M K bytes against the product's 2 M N K FLOPs, so it pays where N is large (B: where M
// is), and where the product is large enough that the extra launches do not show. On the H100 the
// transposes run at ~2.6 TB/s: at 4096^3 they cost 1.7% each and the tiles gained 2-10% (A row B
// col 0.87 -> 0.92 of cuBLAS); packed against unpacked, A row B col: 3072^3 +4%, 4096x4096x1024
// +4%, 6144^3 +7%, 8192^3 +8%, but 2048^3 -3% (the transposes 3.4% each there); A row B row
// 3072^3 +2%, 8192^3 +3%.
struct Packing {
  bool a = false, b = false;
};
inline Packing packing_for(std::int64_t m, std::int64_t n, std::int64_t k, bool a_along_k, bool b_along_k) {
  constexpr std::int64_t kMinOther = 3072;              // the other side of C: a transpose under 2.3% of the product
  constexpr double kMinProduct = 4096.0 * 4096 * 1024;  // multiply-adds: ~0.7 ms of f32 tiles on the H100
  if (m <= 0 || n <= 0 || k <= 0 || static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) < kMinProduct) return {};
  return {a_along_k && n >= kMinOther, b_along_k && m >= kMinOther};
}

// The same gemm with packed operands: for A alone, B alone, both (routes 0, 1, 2), the params of the
// variant that takes them laid along M or N (a_layout col, b_layout row); absent where that operand
// does not lie along K.
struct PackRoute {
  bool a = false, b = false;
  ParamSet params;
};
std::vector<PackRoute> pack_route_params(const ParamSet& params, AlongK along);

// Launches of few rows (decode) whose default tiles would leave over half the SMs idle, tried in
// order, the first that takes the launch's rows and columns serving it:
// - on cuda-sm90a (f16 / bf16), launches of 33-64 rows and at least 16384 columns, whether or not the
//   default tiles fill the SMs (`any_tiles`): cuda-sm90a's own 64 x 256 x 64 tile, 4 stages. On the
//   H100 the Llama-3-8B layer's gated gate/up projection at 64 rows (64 x 28672 x 4096) read its
//   weights at 0.815 of the copy rate on the default 128 x 256 tiles (112 tiles, half of each one's
//   rows empty), 0.901 on 64 x 256 (bench/results/2026-11-26-h100-decode-gemm.md).
// - on cuda-sm90a (f16 / bf16), launches of 17-32 rows and at least 3072 columns, or of 33-64 rows
//   and at least 2048 columns: cuda-sm90a's own 64 x 64 x 64 tile, 8 stages deep (`own`). On the
//   H100 (jitk_layer_bench --sweep-few-rows, bench/results/2026-11-25-h100-decoder-layer.md), 64 rows
//   x n 4096: 0.0364 -> 0.0200 ms (k 4096), 0.0878 -> 0.0511 (k 14336); 48 rows x 2048 x 14336
//   0.0553 -> 0.0426; 32 rows x 4096 x 4096 0.0287 -> 0.0227. Fewer columns, or 16 rows: the split
//   tiles below were as fast or faster (1024 columns: 0.035 against 0.043 ms at k 14336). Where its
//   tiles are still few (64 x 4096: 64 tiles), the launch splits their K over clusters of 2
//   (gemm_sm90.cu, SPLIT_K): 64 x 4096 x 4096 0.54 -> 0.58 of the copy rate, x 14336 0.75 -> 0.83.
// - the generic text's few-rows tiles (tile_m = 16, 32, 64: the first that holds the launch's
//   rows), whose K the launch splits over a cluster (sm_90).
// Empty where the caller chose tiles or the kernel has none.
struct FewRowsRoute {
  std::int64_t max_rows = 0;
  ParamSet params;
  std::int64_t min_rows = 0;     // takes launches of more rows than this
  std::int64_t min_columns = 0;  // and of at least this many columns (N)
  bool own = false;              // the launching implementation's text, not the generic one
  bool any_tiles = false;        // also where the default tiles would fill the SMs (else only where they leave half idle)
};
inline constexpr std::int64_t kFewRows = 64;  // rows at most of a launch the few-rows routes take
std::vector<FewRowsRoute> few_rows_params(const ParamSet& params);
// Whether a few-rows route takes a launch of `rows` x `columns` whose default tiles would leave
// over half the SMs idle (`idle`) or not.
inline bool few_rows_route_takes(std::int64_t rows, std::int64_t columns, bool idle, std::int64_t min_rows, std::int64_t max_rows,
                                 std::int64_t min_columns, bool any_tiles) {
  return rows <= kFewRows && rows > min_rows && rows <= max_rows && columns >= min_columns && (idle || any_tiles);
}

}  // namespace jit::detail
