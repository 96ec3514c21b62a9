// A module of a program's own kernels: a shared library whose one exported function registers them,
// so that `jitk warm --kernels lib.so` (and CMake's jitk_warm(... KERNELS lib)) can warm them too.
//
//   // my_kernels.cpp, built as add_library(my_kernels SHARED my_kernels.cpp) and linked by the program
//   void register_my_kernels() { jit::register_kernel({...}); }
//   JITK_KERNEL_MODULE(register_my_kernels)
//
// The program calls register_my_kernels() itself before its first get; jitk warm calls it through
// the module. The same registration in both gives the same cache keys.
#pragma once
#include <filesystem>

// Exports `extern "C" void jitk_register_kernels()` calling `fn()`.
#define JITK_KERNEL_MODULE(fn) \
  extern "C" __attribute__((visibility("default"))) void jitk_register_kernels() { fn(); }

namespace jit {

// Opens the shared library at `path` (kept open for the process) and calls its jitk_register_kernels.
// Throws Error{InvalidParams} naming the file when it cannot be opened or has no such function, and
// whatever the registration throws (a name taken twice: the module was loaded already).
void load_kernel_module(const std::filesystem::path& path);

}  // namespace jit
