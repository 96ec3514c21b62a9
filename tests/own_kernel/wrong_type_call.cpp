// Must not compile: x is declared jit::in<"x"> (const T*, T a floating type), the call passes int*.
#include <vector>

#include "axpby.hpp"

int main() {
  std::vector<int> x(10);
  std::vector<float> y(10);
  auto k = jit::get<Axpby>({{"dtype", "f32"}}, jit::Target::cpu());
  k(x.size(), x.data(), y.data(), 1.0, 1.0);
}
