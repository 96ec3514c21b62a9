// The declaration of the program's own kernel: y = a * x + b * y, its text in kernels/axpby.cpp.
#pragma once
#include <jit/user_kernel.hpp>

struct Axpby : jit::UserKernel<Axpby,                     // the arguments, in call order:
                               jit::count<"n">,           //   std::int64_t: the elements, split over the threads
                               jit::in<"x">,              //   const T*, T = the dtype parameter's type
                               jit::out<"y">,             //   T*
                               jit::scalar<"a", double>,  //   double
                               jit::scalar<"b", double>> {
  static constexpr const char* name = "axpby";
  static jit::KernelDeclaration declaration() {
    return {.summary = "y = a * x + b * y",
            .params = {jit::dtype_param({"f32", "f64"})},
            .texts = {jit::cpu_file("axpby.cpp")},
            .search_path = {AXPBY_KERNELS}};
  }
};
