# Writes one C++ file that holds every kernel text of kernel_sources/ as a raw string (run at build
# time), named by its path under kernel_sources/ ("jitk_gpu.h", "rms_norm/rms_norm.cu"). Host code
# of the families (descriptor.cpp, *.hpp) and families.def/.cpp are not kernel text.
file(GLOB_RECURSE files RELATIVE ${DIR} ${DIR}/*)
list(FILTER files EXCLUDE REGEX "(^|/)descriptor\\.cpp$|\\.hpp$|^families\\.(def|cpp)$")
list(SORT files)
set(body "// Generated from kernel_sources/ by cmake/embed_kernel_sources.cmake; do not edit.\n#include \"jit/embedded_sources.hpp\"\nnamespace jit::detail {\nconst std::vector<EmbeddedSource>& embedded_sources() {\n  static const std::vector<EmbeddedSource> sources = {\n")
foreach(f ${files})
  file(READ ${DIR}/${f} content)
  string(FIND "${content}" ")jitk_embed\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${f} contains the raw-string delimiter )jitk_embed\"")
  endif()
  string(APPEND body "    {\"${f}\", R\"jitk_embed(${content})jitk_embed\"},\n")
endforeach()
string(APPEND body "  };\n  return sources;\n}\n}  // namespace jit::detail\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
