// The text of a hits journal, written and parsed strictly.
#include "cache/hits_journal.hpp"

#include "cache/blob_format.hpp"

namespace jit::detail {

std::optional<std::int64_t> small_number(std::string_view s) {
  if (s.empty() || s.size() > 13) return std::nullopt;
  std::int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > kMaxJournalNumber) return std::nullopt;
  return v;
}

std::string journal_text(const std::vector<std::pair<std::string, std::int64_t>>& hits, std::int64_t misses) {
  std::string text(kJournalHeader);
  text += "misses " + std::to_string(misses) + "\n";
  for (const auto& [key, when] : hits) text += "hit " + key + " " + std::to_string(when) + "\n";
  return text;
}

std::optional<Journal> parse_journal(std::string_view text) {
  if (text.substr(0, kJournalHeader.size()) != kJournalHeader) return std::nullopt;
  text.remove_prefix(kJournalHeader.size());
  Journal j;
  bool first = true;
  while (!text.empty()) {
    const auto end = text.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    if (first) {
      if (line.substr(0, 7) != "misses ") return std::nullopt;
      auto n = small_number(line.substr(7));
      if (!n) return std::nullopt;
      j.misses = *n;
      first = false;
      continue;
    }
    if (line.size() < 38 || line.substr(0, 4) != "hit " || line[36] != ' ') return std::nullopt;
    const std::string key(line.substr(4, 32));
    auto when = small_number(line.substr(37));
    if (!is_cache_key(key) || !when || j.hits.size() >= kMaxJournalHits) return std::nullopt;
    j.hits.emplace_back(key, *when);
  }
  if (first) return std::nullopt;
  return j;
}

}  // namespace jit::detail
