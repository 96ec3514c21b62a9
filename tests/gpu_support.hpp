// What the GPU tests share: the skip line, the target, conversions of the element types to and
// from double, and the tolerances of device METHOD.md.
#pragma once
#include <cstdio>
#include <type_traits>

#include "jit/cuda.hpp"
#include "jit/jit.hpp"

namespace jitk_test {

// True when there is a GPU; otherwise prints the line ctest turns into "skipped".
inline bool have_gpu() {
  if (jit::cuda::available()) return true;
  std::printf("SKIPPED: no usable CUDA GPU: %s\n", jit::cuda::unavailable_reason().c_str());
  return false;
}

inline jit::Target gpu() { return jit::Target{jit::Backend::Cuda, "", 0}; }

inline double as_double(float v) { return v; }
inline double as_double(double v) { return v; }
inline double as_double(jit::half v) { return jit::to_float(v); }
inline double as_double(jit::bfloat16 v) { return jit::to_float(v); }
template <class T> T from_double(double v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return static_cast<T>(v);
  else if constexpr (std::is_same_v<T, jit::half>) return jit::to_half(static_cast<float>(v));
  else return jit::to_bfloat16(static_cast<float>(v));
}

// Tolerance on ||out - ref|| / ||ref|| (device METHOD.md): inputs are already rounded to T, so the
// error is the output rounding and float32 arithmetic.
template <class T> double tolerance() {
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  else if constexpr (std::is_same_v<T, jit::half>) return 2e-3;
  else return 1e-2;
}

}  // namespace jitk_test
