// The gemm family's routing policy on CUDA: which launches of its texts another variant of the
// same family serves better (the CUDA driver carries out the routes; this says which).
#pragma once
#include <string>
#include <string_view>

#include "jit/registry.hpp"

namespace jit::detail {

// A gemm in f32 on its generic CUDA text at the default tiles (every tile param 0): which operands
// lie along K (A row-major, B column-major) and may be packed along M or N before a large launch
// (the CUDA driver's routes; runtime/gpu_launch.hpp's packing_for decides each launch).
struct AlongK {
  bool a = false, b = false;
};
AlongK packable_along_k(std::string_view kernel, const Implementation& impl, const ParamSet& params);
// "A and B", "A" or "B" (empty for neither).
std::string operands_text(AlongK operands);

}  // namespace jit::detail
