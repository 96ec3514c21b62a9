// Finding and opening the CPU backend module (libjitk_cpu.so: clang + LLVM ORC).
#pragma once
#include <memory>
#include <string>

#include "runtime/backend_driver.hpp"

namespace jit::detail {

// The module file that open_cpu_module would open and its identity (path, device, inode, size,
// mtime): "" when there is none. A change of module changes it.
std::string cpu_module_identity();

struct CpuModule {
  std::unique_ptr<BackendDriver> driver;  // null when it could not be opened
  std::string reason;                     // why not: names the file and where it was looked for
};
// Opens the module ($JITK_CPU_MODULE, else beside libjitk, else the install libdir) and makes its
// driver; the module stays open for the life of the process.
CpuModule open_cpu_module();

}  // namespace jit::detail
