// Where the cache lives ($JITK_CACHE_DIR, $XDG_CACHE_HOME/jitk, ~/.cache/jitk) and making it, 0700.
#pragma once
#include <filesystem>
#include <string>

namespace jit::detail {

std::filesystem::path cache_root_path();
// Creates the root (0700) and its subfolders; returns "" when usable, else why not. When the only
// problem is that an existing, trusted root cannot be written (a read-only mount, a shipped
// pre-warmed cache), *read_only is set: its artifacts can still be read.
std::string prepare_cache_root(const std::filesystem::path& root, bool* read_only = nullptr);

}  // namespace jit::detail
