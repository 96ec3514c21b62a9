// axpby_app: runs the program's own kernel (axpby.hpp, kernels/axpby.cpp) on the CPU and checks it.
#include <cmath>
#include <cstdio>
#include <vector>

#include "axpby.hpp"

int main() {
  std::vector<float> x(1000), y(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * float(i), y[i] = 1.0f;
  try {
    auto k = jit::get<Axpby>({{"dtype", "f32"}}, jit::Target::cpu());
    k(x.size(), x.data(), y.data(), 3.0, 0.5);  // y = 3 x + 0.5 y
  } catch (const jit::Error& e) {
    std::fprintf(stderr, "axpby_app: %s\n", e.what());
    return 1;
  }
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::abs(y[i] - (1.5f * float(i) + 0.5f)) > 1e-4f * (1 + 1.5f * float(i))) {
      std::printf("axpby WRONG at %zu: %g\n", i, y[i]);
      return 1;
    }
  std::printf("axpby f32 OK\n");
  return 0;
}
