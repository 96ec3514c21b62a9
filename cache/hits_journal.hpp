// The text of a hits journal: the hit counts a process that never opened the index leaves in
// <root>/hits/ for the next one that does (docs/cache-format.md, "Hits are written lazily").
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jit::detail {

inline constexpr std::string_view kJournalHeader = "jitk-hits 1\n";
inline constexpr std::size_t kMaxJournalHits = 4096;                // more: the process writes the index itself
inline constexpr std::int64_t kMaxJournalNumber = 1'000'000'000'000;  // a count or time past this is not ours

struct Journal {
  std::vector<std::pair<std::string, std::int64_t>> hits;  // key, last used (unix seconds)
  std::int64_t misses = 0;
};

// A decimal number of at most 13 digits in [0, kMaxJournalNumber]; nullopt otherwise (a sign, a
// space, any other character, nothing).
std::optional<std::int64_t> small_number(std::string_view s);

// "jitk-hits 1", "misses <n>", then "hit <key> <last used>" a hit (unsealed: the caller seals it).
std::string journal_text(const std::vector<std::pair<std::string, std::int64_t>>& hits, std::int64_t misses);

// Exactly what journal_text writes, with keys that are cache keys and at most kMaxJournalHits hits
// (after its checksum line is checked); nullopt otherwise.
std::optional<Journal> parse_journal(std::string_view text);

}  // namespace jit::detail
