// LayerNorm: the family descriptor.
#include "jit/family.hpp"

namespace jit::detail {

std::vector<KernelSpec> layer_norm_family() {
  // At most 256 threads a row: at hidden 16384 (bf16) this was 9-13% faster on the H100 than 512.
  const GpuLayout block_per_row{Kind::BlockPerRow, 256, 4};
  const char* row = "one block per row, row in registers";
  return {
      {"layer_norm", "y = (x - mean) / sqrt(var + eps) * weight + bias, per row",
       {dtype_param(), hidden_param(), prologue_param(), epilogue_param()},
       generic_impls("layer_norm/layer_norm.cpp", "layer_norm/layer_norm.cu", block_per_row, row)}};
}

}  // namespace jit::detail
