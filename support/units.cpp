// Sizes and ages written by people read into bytes and seconds, with every overflow checked.
#include "support/units.hpp"

#include <limits>

namespace jit::detail {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::nullopt_t refuse(std::string* why, std::string what) {
  if (why) *why = std::move(what);
  return std::nullopt;
}

// Leading digits of text from `at` as a whole number; nullopt past kMax. Moves `at` past them.
std::optional<std::int64_t> whole_number(const std::string& text, std::size_t& at) {
  std::int64_t n = 0;
  for (; at < text.size() && is_digit(text[at]); ++at) {
    const int d = text[at] - '0';
    if (n > (kMax - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  return n;
}

}  // namespace

std::optional<std::int64_t> parse_size(const std::string& text, std::string* why) {
  std::size_t at = 0;
  if (text.empty() || !is_digit(text[0])) return refuse(why, "it does not start with a digit");
  const auto whole = whole_number(text, at);
  if (!whole) return refuse(why, "it is larger than " + std::to_string(kMax) + " bytes");
  // The fraction as digits/10^n (at most 18 digits are kept: finer than a byte of a terabyte).
  std::int64_t frac = 0, frac_scale = 1;
  const bool has_fraction = at < text.size() && text[at] == '.';
  if (has_fraction) {
    ++at;
    if (at >= text.size() || !is_digit(text[at])) return refuse(why, "a '.' must be followed by digits");
    for (; at < text.size() && is_digit(text[at]); ++at)
      if (frac_scale < 1'000'000'000'000'000'000LL) {
        frac = frac * 10 + (text[at] - '0');
        frac_scale *= 10;
      }
  }
  std::string unit = text.substr(at);
  if (unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'b')) unit.pop_back();
  std::int64_t scale;
  if (unit.empty() || unit == "B" || unit == "b") scale = 1;
  else if (unit == "K" || unit == "k") scale = 1LL << 10;
  else if (unit == "M" || unit == "m") scale = 1LL << 20;
  else if (unit == "G" || unit == "g") scale = 1LL << 30;
  else if (unit == "T" || unit == "t") scale = 1LL << 40;
  else return refuse(why, "'" + text.substr(at) + "' is not a unit");
  if (has_fraction && scale == 1) return refuse(why, "a number of bytes is whole");
  if (*whole > kMax / scale) return refuse(why, "it is larger than " + std::to_string(kMax) + " bytes");
  const std::int64_t bytes = *whole * scale;
  // frac/frac_scale of scale, rounded down; both < 2^63, so the product fits 128 bits.
  const auto part = static_cast<std::int64_t>(static_cast<__int128>(frac) * scale / frac_scale);
  if (part > kMax - bytes) return refuse(why, "it is larger than " + std::to_string(kMax) + " bytes");
  return bytes + part;
}

std::optional<std::int64_t> parse_age(const std::string& text, std::string* why) {
  std::size_t at = 0;
  if (text.empty() || !is_digit(text[0])) return refuse(why, "it does not start with a digit");
  const auto n = whole_number(text, at);
  if (!n) return refuse(why, "it is longer than " + std::to_string(kMax / 86400) + " days");
  if (at + 1 != text.size()) return refuse(why, at == text.size() ? "it has no unit" : "'" + text.substr(at) + "' is not a unit");
  std::int64_t scale;
  switch (text[at]) {
    case 's': scale = 1; break;
    case 'm': scale = 60; break;
    case 'h': scale = 3600; break;
    case 'd': scale = 86400; break;
    default: return refuse(why, "'" + text.substr(at) + "' is not a unit");
  }
  if (*n > kMax / scale) return refuse(why, "it is longer than " + std::to_string(kMax / 86400) + " days");
  return *n * scale;
}

}  // namespace jit::detail
