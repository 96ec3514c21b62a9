// Finding the headers a kernel text can include from a toolkit folder, and hashing their content.
#pragma once
#include <string>
#include <vector>

#include "jit/specializer.hpp"

namespace jit::detail {

// The targets of every `#include <x>` / `#include "x"` line of a text, whatever #if it sits under.
std::vector<std::string> included_names(const std::string& text);

// A hash of the path and content of every header in include_dir reachable from `roots` (following
// includes relative to each header's own folder too), skipping the unit's own headers. Hashing more
// headers than a compile reads is safe; fewer would not be. Ends with "(N toolkit headers)".
std::string fingerprint_includes(const std::vector<std::string>& roots, const std::string& include_dir,
                                 const std::vector<SourceFile>& unit_headers,
                                 std::vector<std::string>* paths_read = nullptr);

// The same fingerprint, remembered in `memo_file` together with each header's size, mtime and
// inode: while none of those change, later processes stat the headers instead of reading them
// (1 ms of stat instead of ~6 ms of reading for CUDA's fp16/bf16 headers).
std::string fingerprint_includes_memoized(const std::vector<std::string>& roots, const std::string& include_dir,
                                          const std::vector<SourceFile>& unit_headers,
                                          const std::string& memo_file);

}  // namespace jit::detail
