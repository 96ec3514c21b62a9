// Kernels registered from Python (jitk.register_kernel): a CPU text with a Python signature, launched
// through the same Launcher as the shipped kernels.
#pragma once
#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <string>

#include "jit/jit.hpp"
#include "signature.hpp"

namespace jitk_py {

namespace nb = nanobind;

class Launcher;

// Its launch packs the signature's fields in order (arrays as pointers, counts and integers as
// int64, numbers in the kernel's scalar type), all but the `work` count, which is the range the
// kernel covers (the CPU text's jitk_begin .. jitk_end).
struct UserKernel {
  Signature sig;
  int work = -1;  // the field holding the work count
  std::int64_t min_grain = 1;
};

// The kernel registered under the name; null when none is (it stays registered for the process).
const UserKernel* find_user_kernel(const std::string& name);

// Registers the kernel with the library; throws jit::Error (InvalidParams) for an unsound one, registering nothing.
void register_user_kernel(const std::string& name, const std::string& summary, const nb::dict& params,
                          const std::string& signature, const std::string& work, const std::string& cpu_text,
                          std::int64_t min_grain);

std::unique_ptr<Launcher> make_user_launcher(const std::string& kernel, const UserKernel& uk, const nb::dict& params,
                                             const jit::Target& t, const jit::Selection& sel);

}  // namespace jitk_py
