// list ISAs known to libamd_comgr.so.2; build: gcc -o comgr_isas comgr_isas.c -lamd_comgr
#include <amd_comgr.h>
#include <stdio.h>
int main(void) {
  size_t maj = 0, min = 0; amd_comgr_get_version(&maj, &min);
  size_t n = 0; amd_comgr_get_isa_count(&n);
  printf("comgr version %zu.%zu, %zu ISAs:\n", maj, min, n);
  for (size_t i = 0; i < n; ++i) { const char* s = 0; amd_comgr_get_isa_name(i, &s); printf("%s\n", s); }
  return 0;
}
