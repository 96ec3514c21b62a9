// AdamW: the family descriptor.
#include "jit/family.hpp"

namespace jit::detail {

std::vector<KernelSpec> adamw_family() {
  const GpuLayout elementwise{Kind::Elementwise, 256, 1};
  return {
      {"adamw", "one AdamW step in place: float master weights and moments (double for f64), dtype gradients",
       {{"dtype", {"f32", "f64", "f16", "bf16"}, 0, 0, "the gradients' element type"}},
       generic_impls("adamw/adamw.cpp", "adamw/adamw.cu", elementwise, "one 16-byte pack of gradients per thread")}};
}

}  // namespace jit::detail
