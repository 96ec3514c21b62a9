// softmax and log_softmax: the family descriptor.
#include "jit/family.hpp"

namespace jit::detail {

std::vector<KernelSpec> softmax_family() {
  // At most 256 threads a row: at hidden 16384 (bf16) this was 9-13% faster on the H100 than 512.
  const GpuLayout block_per_row{Kind::BlockPerRow, 256, 4};
  const char* row = "one block per row, row in registers";
  return {
      {"softmax", "numerically stable softmax of each row", {dtype_param(), hidden_param()},
       generic_impls("softmax/softmax.cpp", "softmax/softmax.cu", block_per_row, row)},
      {"log_softmax", "y = x - max - log(sum(exp(x - max))), per row", {dtype_param(), hidden_param()},
       generic_impls("softmax/softmax.cpp", "softmax/softmax.cu", block_per_row, row)}};
}

}  // namespace jit::detail
