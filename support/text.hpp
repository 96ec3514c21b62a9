// Small text helpers for messages.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace jit::detail {

// "a, b, c"
inline std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Text read from a cache, a pack or a manifest, made safe to show on a terminal: control
// characters (C0, DEL, C1), bytes that are not UTF-8 and the bidirectional overrides are written
// as escapes (\n, \x1b, \u{202e}), and a backslash as \\, so nothing in it can move the cursor,
// recolour or retitle the terminal, or hide text. With keep_lines, newlines and tabs pass (a
// compiler log), everything else is escaped still.
std::string printable(std::string_view text, bool keep_lines = false);

// Whether text is UTF-8 without any of the characters printable escapes (a backslash is fine):
// what a name or field read from a file must be.
bool is_plain_text(std::string_view text);

}  // namespace jit::detail
