// libFuzzer target: any bytes as the text of a hits journal (cache/hits_journal.cpp), after its
// checksum line. The parser must accept or refuse, never crash; what it accepts is within its
// bounds, names only cache keys, and reads back the same from the text journal_text writes for it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cache/blob_format.hpp"
#include "cache/hits_journal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace jit::detail;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)small_number(text.substr(0, 20));
  auto j = parse_journal(text);
  if (!j) return 0;
  if (j->misses < 0 || j->misses > kMaxJournalNumber || j->hits.size() > kMaxJournalHits) std::abort();
  for (const auto& [key, when] : j->hits)
    if (!is_cache_key(key) || when < 0 || when > kMaxJournalNumber) std::abort();
  auto again = parse_journal(journal_text(j->hits, j->misses));
  if (!again || again->misses != j->misses || again->hits != j->hits) std::abort();
  return 0;
}
