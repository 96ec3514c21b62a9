// The kernels jitk ships: their parameters, what values each allows, and which text implements them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "jit/jit.hpp"

namespace jit::detail {

struct ParamSpec {
  std::string name;
  std::vector<std::string> choices;  // a text parameter when non-empty, else an integer in [min, max]
  std::int64_t min = 0;
  std::int64_t max = 0;
  std::string doc;
  bool is_text() const { return !choices.empty(); }
  std::string allowed() const;  // "one of f32, f64" / "an integer in [1, 65536]"
};

// How a GPU launch covers the work: one block per row, or one thread per 16-byte pack of elements.
enum class GpuShape { PerRow, Elementwise };

struct KernelDef {
  std::string name;
  std::string summary;
  std::string cpu_source;  // file in kernel_sources/
  std::string gpu_source;  // CUDA/HIP text in kernel_sources/
  GpuShape gpu_shape = GpuShape::Elementwise;
  std::vector<ParamSpec> params;
  int version = 1;  // bumped when the text changes meaning; part of the cache key
};

// The element types each backend's text implements.
const std::vector<std::string>& dtypes_for(Backend backend);
// GPU row kernels keep a row in registers; longer rows than this are refused.
inline constexpr std::int64_t kGpuMaxHidden = 32768;

const std::vector<KernelDef>& kernel_catalog();
// Throws Error{UnknownKernel} listing the kernels that exist.
const KernelDef& find_kernel(std::string_view name);
// Checks every parameter (unknown, missing, wrong type, out of range) before anything is
// compiled and returns them in the definition's order. Throws Error{InvalidParams}.
// With a backend, also checks what that backend's text supports (dtype, row length).
ParamSet validate_params(const KernelDef& def, const ParamSet& given);
ParamSet validate_params(const KernelDef& def, const ParamSet& given, Backend backend);

}  // namespace jit::detail
