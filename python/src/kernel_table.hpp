// The shipped kernels Python reaches: one row a kernel, its Python signature and what the binding
// learned from its descriptor (the typed launch behind a type-erased interface).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "descriptor_reflection.hpp"
#include "jit/jit.hpp"
#include "signature.hpp"

namespace jitk_py {

// A kernel got for one set of params, launched from gathered values.
class TypedLaunch {
 public:
  virtual ~TypedLaunch() = default;
  virtual void launch(const Value* values, jit::Stream stream) const = 0;
  virtual jit::Backend backend() const = 0;
  virtual const std::string& cache_key() const = 0;
  virtual const std::string& implementation() const = 0;
  virtual jit::Origin origin() const = 0;
  virtual jit::ParamSet params() const = 0;  // the params it was specialized for (tuned ones for get_tuned)
};

struct KernelBinding {
  std::string kernel;
  std::string declaration;
  std::vector<FieldType> field_types;       // of the descriptor's Args, probed
  std::vector<ParamField> param_fields;     // of its Params, learned
  jit::ParamSet default_params;             // K::to_params of default Params
  // Throws jit::Error (the get's) or std::invalid_argument (params the descriptor cannot hold).
  std::unique_ptr<TypedLaunch> (*get)(const jit::ParamSet& params, const jit::Target& target, const jit::Selection& selection);
  // Kernels that can be tuned (jit/tuning.hpp); null for the others.
  std::unique_ptr<TypedLaunch> (*get_tuned)(const jit::ParamSet& params, const std::vector<std::int64_t>& shape,
                                            const jit::Target& target);
  const char* shape_names = nullptr;
};

// Every shipped kernel reachable from Python, in the catalog's order.
const std::vector<KernelBinding>& kernel_bindings();
// Shipped kernels left out, with why.
const std::vector<std::pair<std::string, std::string>>& kernels_not_bound();

}  // namespace jitk_py
