// The typed descriptors jitk ships (include/jit/kernels/) read as data: their params' defaults and
// their launch arguments, for manifests (an omitted param takes its default) and the generated docs.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "jit/jit.hpp"
#include "jit/registry.hpp"

namespace jit::detail {

struct ArgInfo {
  std::string name;
  std::string default_value;  // "" when the caller must give it
  std::string type;           // "int", "float", "const T*", "T*", "const i32*", "Operands", ... (T: the dtype's type)
};

struct DescriptorInfo {
  std::string kernel;      // "rms_norm"
  std::string descriptor;  // "RmsNorm" (jit::kernels::)
  ParamSet defaults;       // K::to_params(K::Params{}): what jit::get<K>({}) asks for
  std::vector<ArgInfo> args;
};

// One row per shipped descriptor, in the catalog's order of families.
const std::vector<DescriptorInfo>& shipped_descriptors();
// nullptr for a kernel without a shipped typed descriptor (a program's own).
const DescriptorInfo* shipped_descriptor(std::string_view kernel);

// The value a param left out takes: the declaration's fallback, else the shipped descriptor's default
// where the declaration allows it (dtype f32; not head_dim 0). nullptr: it must be given (and for a
// chain, whose absence is no chain).
const ParamValue* omitted_param_value(std::string_view kernel, const ParamSpec& spec);

}  // namespace jit::detail
