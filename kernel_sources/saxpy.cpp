// saxpy: y[i] = a * x[i] + y[i] for i in [begin, end).
#include "jitk_cpu.h"

JITK_CPU_KERNEL {
  const T a = JITK_ARG(0, T);
  const T* __restrict x = JITK_ARG(1, const T*);
  T* __restrict y = JITK_ARG(2, T*);
  for (i64 i = jitk_begin; i < jitk_end; ++i) y[i] = a * x[i] + y[i];
}
