// Sizes written by people ("2G", "500M", "64K", "1.5G", bytes) read into bytes.
#include "support/units.hpp"

#include <string>

namespace jit::detail {

std::optional<std::int64_t> parse_size(const std::string& text) {
  std::size_t used = 0;
  double value;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b') && unit.size() > 1) unit.pop_back();
  double scale = 1;
  if (unit.empty() || unit == "B" || unit == "b") scale = 1;
  else if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else return std::nullopt;
  if (!(value >= 0) || value * scale > 9.0e18) return std::nullopt;
  return static_cast<std::int64_t>(value * scale);
}

}  // namespace jit::detail
