// Gated activations (silu_and_mul, gelu_and_mul): the family descriptor.
#include "jit/family.hpp"

namespace jit::detail {

std::vector<KernelSpec> gated_activation_family() {
  const GpuLayout elementwise{Kind::Elementwise, 256, 1};
  return {
      {"silu_and_mul", "out = silu(x[:, :hidden]) * x[:, hidden:]",
       {dtype_param(), hidden_param(), prologue_param(), epilogue_param()},
       generic_impls("gated_activation/gated_activation.cpp", "gated_activation/gated_activation.cu", elementwise, "one 16-byte pack per thread")},
      {"gelu_and_mul", "out = gelu(x[:, :hidden]) * x[:, hidden:] (erf, or the tanh approximation)",
       {dtype_param(), hidden_param(), {"approximate", {"none", "tanh"}, 0, 0, "gelu as erf (none) or tanh, as PyTorch's"},
        prologue_param(), epilogue_param()},
       generic_impls("gated_activation/gated_activation.cpp", "gated_activation/gated_activation.cu", elementwise, "one 16-byte pack per thread")}};
}

}  // namespace jit::detail
