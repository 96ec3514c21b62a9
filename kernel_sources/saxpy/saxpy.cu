// saxpy: y[i] = a * x[i] + y[i]; one 16-byte pack per thread when both pointers are aligned.
#include "jitk_gpu.h"

template <int W> __device__ void saxpy_packs(T a, const T* __restrict__ x, T* __restrict__ y, i64 n) {
  const i64 first = (static_cast<i64>(blockIdx.x) * JITK_BLOCK + threadIdx.x) * W;
  if (first + W <= n) {
    auto xv = jitk::load<W>(x + first);
    auto yv = jitk::load<W>(y + first);
    const float af = jitk::to_float(a);
#pragma unroll
    for (int k = 0; k < W; ++k) yv.v[k] = jitk::from_float<T>(af * jitk::to_float(xv.v[k]) + jitk::to_float(yv.v[k]));
    jitk::store<W>(y + first, yv);
  } else {
    for (i64 i = first; i < n; ++i) y[i] = jitk::from_float<T>(jitk::to_float(a) * jitk::to_float(x[i]) + jitk::to_float(y[i]));
  }
}

JITK_GPU_KERNEL(T a, const T* __restrict__ x, T* __restrict__ y, i64 n) {
  constexpr int W = jitk::vector_width<T>();
  // The grid covers n / W threads; an unaligned call gives each thread W scalars instead.
  if (jitk::aligned16(x) && jitk::aligned16(y)) saxpy_packs<W>(a, x, y, n);
  else {
    const i64 first = (static_cast<i64>(blockIdx.x) * JITK_BLOCK + threadIdx.x) * W;
    for (i64 i = first; i < first + W && i < n; ++i)
      y[i] = jitk::from_float<T>(jitk::to_float(a) * jitk::to_float(x[i]) + jitk::to_float(y[i]));
  }
}
