// saxpy: y[i] = a * x[i] + y[i] for i in [begin, end).
#include "jitk_cpu.h"

// __restrict only binds on parameters (clang ignores it on locals), so the loop lives here.
static inline void saxpy_range(T a, const T* __restrict x, T* __restrict y, i64 begin, i64 end) {
  for (i64 i = begin; i < end; ++i) y[i] = a * x[i] + y[i];
}

JITK_CPU_KERNEL {
  saxpy_range(JITK_ARG(0, T), JITK_ARG(1, const T*), JITK_ARG(2, T*), jitk_begin, jitk_end);
}
