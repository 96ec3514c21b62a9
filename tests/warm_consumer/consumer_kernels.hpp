// The consumer's own kernel, add_one: y[i] = x[i] + 1, declared with jitk's public API
// (jit/user_kernel.hpp), and the registration the program and `jitk warm --kernels` both call.
#pragma once
#include <jit/user_kernel.hpp>

struct AddOne : jit::UserKernel<AddOne, jit::count<"n">, jit::in<"x">, jit::out<"y">> {
  static constexpr const char* name = "consumer_add_one";
  static jit::KernelDeclaration declaration() {
    return {.summary = "y = x + 1",
            .params = {jit::dtype_param({"f32", "f64"}, "f32")},
            .texts = {jit::cpu_text("consumer_add_one.cpp", R"(#include "jitk_cpu.h"
JITK_CPU_KERNEL {
  JITK_ARGS  // n, x, y
  for (i64 i = jitk_begin; i < jitk_end; ++i) y[i] = x[i] + T(1);
}
)")}};
  }
};

// Registers consumer_add_one (the program calls it before its first get; the module exports it).
void register_consumer_kernels();
