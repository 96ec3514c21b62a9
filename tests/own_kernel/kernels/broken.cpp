// A text with a mistake at line 6, for the test: the compile error names this file and line.
#include "jitk_cpu.h"

JITK_CPU_KERNEL {
  JITK_ARGS
  y[jitk_begin] = no_such_variable;
}
