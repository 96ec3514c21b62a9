// Gathers the kernel families listed in families.def into jitk's shipped kernels, in that order.
#include "jit/family.hpp"

namespace jit::detail {

#define JITK_FAMILY(family) std::vector<KernelSpec> family##_family();
#include "kernel_sources/families.def"
#undef JITK_FAMILY

std::vector<KernelDef> shipped_kernels() {
  std::vector<KernelDef> all;
  for (auto* family : {
#define JITK_FAMILY(family) &family##_family,
#include "kernel_sources/families.def"
#undef JITK_FAMILY
       })
    for (KernelDef& def : family()) all.push_back(std::move(def));
  return all;
}

}  // namespace jit::detail
