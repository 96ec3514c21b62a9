// axpby_checks: what a mistake looks like. A text that does not compile (kernels/broken.cpp) and a
// call whose pointer is of another element type than the kernel's dtype; prints each error.
#include <cstdio>
#include <vector>

#include "axpby.hpp"

struct Broken : jit::UserKernel<Broken, jit::count<"n">, jit::out<"y">> {
  static constexpr const char* name = "broken";
  static jit::KernelDeclaration declaration() {
    return {.summary = "does not compile", .params = {jit::dtype_param()}, .texts = {jit::cpu_file("broken.cpp")},
            .search_path = {AXPBY_KERNELS}};
  }
};

int main() {
  int caught = 0;
  try {
    jit::get<Broken>({{"dtype", "f64"}}, jit::Target::cpu());
  } catch (const jit::Error& e) {
    std::printf("compile error: %s\n", e.what());
    caught += e.kind() == jit::ErrorKind::CompileFailed;
  }
  try {
    std::vector<double> x(10);
    std::vector<float> y(10);
    auto k = jit::get<Axpby>({{"dtype", "f32"}}, jit::Target::cpu());
    k(x.size(), jit::ConstPtr(x.data(), jit::DType::f64), y.data(), 1.0, 1.0);  // e.g. a tensor's pointer and dtype
  } catch (const jit::Error& e) {
    std::printf("wrong type: %s\n", e.what());
    caught += e.kind() == jit::ErrorKind::InvalidArgument;
  }
  return caught == 2 ? 0 : 1;
}
