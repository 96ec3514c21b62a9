// saxpy in float64: the reference its tests and the quickstart judge the kernels by.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace jitk_reference {

template <class T> std::vector<double> saxpy(double a, const std::vector<T>& x, const std::vector<T>& y) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = a * double(x[i]) + double(y[i]);
  return out;
}

}  // namespace jitk_reference
