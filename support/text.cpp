// Escaping text from files for terminals and messages.
#include "support/text.hpp"

#include <cstdint>
#include <cstdio>

namespace jit::detail {
namespace {

// Length of the UTF-8 sequence at text[i] and its code point, or 0 when it is not well-formed
// (overlong forms, surrogates and values past U+10FFFF are not).
std::size_t utf8_at(std::string_view text, std::size_t i, char32_t* cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  std::size_t n;
  char32_t v, min;
  if (c < 0x80) return *cp = c, 1;
  if ((c & 0xe0) == 0xc0) n = 2, v = c & 0x1f, min = 0x80;
  else if ((c & 0xf0) == 0xe0) n = 3, v = c & 0x0f, min = 0x800;
  else if ((c & 0xf8) == 0xf0) n = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  if (i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return n;
}

// Code points a terminal acts on or that reorder what is shown: C0, DEL, C1, the bidirectional
// embeddings, overrides and isolates, and the line and paragraph separators.
bool is_control(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
         cp == 0x200e || cp == 0x200f || cp == 0x061c || cp == 0x2028 || cp == 0x2029;
}

}  // namespace

std::string printable(std::string_view text, bool keep_lines) {
  std::string out;
  out.reserve(text.size());
  char buf[16];
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_at(text, i, &cp);
    if (n == 0) {  // not UTF-8: the byte
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(text[i]));
      out += buf;
      ++i;
      continue;
    }
    if (cp == '\\') {
      out += "\\\\";
    } else if ((cp == '\n' || cp == '\t') && keep_lines) {
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (is_control(cp)) {
      std::snprintf(buf, sizeof buf, cp < 0x80 ? "\\x%02x" : "\\u{%04x}", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

bool is_plain_text(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_at(text, i, &cp);
    if (n == 0 || is_control(cp)) return false;
    i += n;
  }
  return true;
}

}  // namespace jit::detail
