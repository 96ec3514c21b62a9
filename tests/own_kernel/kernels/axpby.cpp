// y = a * x + b * y on the CPU. jitk compiles it at first use for the dtype asked for (T).
#include "jitk_cpu.h"
#include "axpby_math.h"

JITK_CPU_KERNEL {
  JITK_ARGS  // n, x, y, a, b as axpby.hpp declares them
  for (i64 i = jitk_begin; i < jitk_end; ++i) y[i] = axpby(T(a), x[i], T(b), y[i]);
}
