// Sizes written by people read into bytes: JITK_CACHE_MAX_SIZE, JITK_SCRATCH_KEEP, jitk prune --max-size.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace jit::detail {

// "2G", "500M", "64K", "1.5G", "10MB", "4096" (bytes); nullopt for anything else or a negative size.
std::optional<std::int64_t> parse_size(const std::string& text);

}  // namespace jit::detail
