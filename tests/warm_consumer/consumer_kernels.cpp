// The consumer's own kernels, registered by the program and by `jitk warm --kernels` (the module).
#include "consumer_kernels.hpp"

#include <jit/kernel_module.hpp>
#include <jit/registry.hpp>

void register_consumer_kernels() {
  static const bool done = [] {
    jit::Implementation cpu;
    cpu.name = "cpu";
    cpu.backend = jit::Backend::Cpu;
    cpu.generic = true;
    cpu.file = "consumer_add_one.cpp";
    cpu.text = R"(#include "jitk_cpu.h"
JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  T* y = JITK_ARG(1, T*);
  for (i64 i = jitk_begin; i < jitk_end; ++i) y[i] = x[i] + T(1);
}
)";
    cpu.dtypes = {jit::DType::f32, jit::DType::f64};
    jit::register_kernel({"consumer_add_one", "y = x + 1", {{"dtype", {"f32", "f64"}, 0, 0, "element type"}}, {cpu}});
    return true;
  }();
  (void)done;
}

JITK_KERNEL_MODULE(register_consumer_kernels)
