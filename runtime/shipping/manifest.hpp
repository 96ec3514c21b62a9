// Parsing warm manifests from text: no file, no backend, no cache (so it can be fuzzed on its own).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jit/cache.hpp"

namespace jit::detail {

// A manifest lists specializations: one larger than this is not one (parse_manifest refuses it unread).
inline constexpr std::int64_t kMaxManifestBytes = 16 << 20;

// TOML text -> expanded, validated items; entries without a target get fallback_target.
// Throws Error{Manifest} naming the entry (origin: kernel #N (name)) and the problem.
std::vector<cache::WarmItem> parse_manifest_text(std::string_view text, const std::string& origin,
                                                 const Target& fallback_target);

}  // namespace jit::detail
