// saxpy: the family descriptor (y = a * x + y).
#include "jit/family.hpp"

namespace jit::detail {

std::vector<KernelSpec> saxpy_family() {
  const GpuLayout elementwise{Kind::Elementwise, 256, 1};
  return {
      {"saxpy", "y = a * x + y", {dtype_param()},
       generic_impls("saxpy/saxpy.cpp", "saxpy/saxpy.cu", elementwise, "one 16-byte pack per thread")}};
}

}  // namespace jit::detail
