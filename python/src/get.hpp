// jitk.get from Python: a kernel's name, its params as Python values and a target, checked, to a
// Launcher (a shipped kernel's binding or a kernel registered from Python).
#pragma once
#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jit/jit.hpp"
#include "kernel_table.hpp"
#include "signature.hpp"

namespace jitk_py {

namespace nb = nanobind;

class Launcher;

// The params of a Python dict (int, bool or str values); a bad value raises TypeError or ValueError.
jit::ParamSet param_set(const std::string& kernel, const nb::dict& params);
// The shipped kernel's binding; null for any other name.
const KernelBinding* find_binding(const std::string& kernel);
// The signature of a binding, checked against the descriptor's Args once.
const Signature& checked_signature(const KernelBinding& b);

// The kernel specialized for the params on the target (tuned for `tune_shape` when given); device -1: the target's.
std::unique_ptr<Launcher> make_launcher(const std::string& kernel, const nb::dict& params, const std::optional<std::string>& target,
                                        const std::optional<std::string>& implementation, bool training,
                                        const std::optional<std::vector<std::int64_t>>& tune_shape, int device);

}  // namespace jitk_py
