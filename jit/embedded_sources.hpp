// Kernel text compiled into the library from kernel_sources/ (generated at build time).
#pragma once
#include <string_view>
#include <vector>

namespace jit::detail {
struct EmbeddedSource {
  std::string_view file;
  std::string_view text;
};
const std::vector<EmbeddedSource>& embedded_sources();
}  // namespace jit::detail
