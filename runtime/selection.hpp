// Picking one implementation of a kernel for a target: ranges, priority, fallback, scoped mappings.
#pragma once
#include <cstdint>
#include <string>

#include "jit/kernel_catalog.hpp"
#include "jit/registry.hpp"

namespace jit::detail {

struct Selected {
  Implementation impl;  // a copy: a scoped mapping's implementation may not outlive the get
  bool fallback = false;
  bool mapped = false;  // from a KernelMapping of this thread
  std::string reason;
};

// capability: the device's (CUDA: 90 for sm_90); 0 on the CPU. Throws Error: InvalidParams when
// no implementation takes the params, BackendUnavailable when none suits the target or mode (or
// only a generic one does and fallback is refused), naming what was missing.
Selected select_implementation(const KernelDef& def, const ParamSet& params, const Target& target, int capability,
                               const Selection& selection);

// 90 from "sm_90" / "sm_90a"; 0 for anything else (the CPU).
int capability_of_arch(const std::string& arch);

}  // namespace jit::detail
