// Small text helpers for messages.
#pragma once
#include <string>
#include <vector>

namespace jit::detail {

// "a, b, c"
inline std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace jit::detail
