// Finding the headers a kernel text can include from a toolkit folder, and hashing their content.
#pragma once
#include <string>
#include <vector>

#include "jit/specializer.hpp"
#include "support/memo_store.hpp"

namespace jit::detail {

// The targets of every `#include <x>` / `#include "x"` line of a text, whatever #if it sits under.
std::vector<std::string> included_names(const std::string& text);

// A hash of the path and content of every header in include_dir reachable from `roots` (following
// includes relative to each header's own folder too), skipping the unit's own headers. Hashing more
// headers than a compile reads is safe; fewer would not be. Ends with "(N toolkit headers)".
std::string fingerprint_includes(const std::vector<std::string>& roots, const std::string& include_dir,
                                 const std::vector<SourceFile>& unit_headers,
                                 std::vector<std::string>* paths_read = nullptr);

// The same fingerprint, remembered as memo `memo_name` together with each header's device, inode,
// size and mtime and those of the folders they sit in: while none of those change, later processes
// stat the headers instead of reading them. A memo that is missing, torn, damaged or for other
// headers is recomputed (and rewritten); nothing in it is trusted without the stamps matching.
std::string fingerprint_includes_memoized(const std::vector<std::string>& roots, const std::string& include_dir,
                                          const std::vector<SourceFile>& unit_headers, const MemoStore& memos,
                                          const std::string& memo_name);

}  // namespace jit::detail
