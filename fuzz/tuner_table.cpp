// The fuzzers compile the parsers alone, not the runtime: a manifest's `tune` shapes are checked
// through this table, which names the same tunable kernels as runtime/tuning.cpp but cannot tune.
#include "jit/kernels.hpp"
#include "jit/tuning.hpp"

namespace jit::detail {
const Tuner* tuner_for(std::string_view kernel) {
  static const Tuner gemm{kernels::Gemm::shape_names, check_shape<kernels::Gemm>, nullptr};
  return kernel == kernels::Gemm::name ? &gemm : nullptr;
}
}  // namespace jit::detail
