// Sizes and ages written by people, read strictly into bytes and seconds: JITK_CACHE_MAX_SIZE,
// JITK_SCRATCH_KEEP, jitk prune --max-size and --older-than.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace jit::detail {

// What parse_size and parse_age accept, for messages that refuse a value.
inline constexpr const char* kSizeForms =
    "a plain number of bytes, or a number with a unit K, M, G or T (powers of 1024, an optional B after it), "
    "e.g. 4096, 64K, 500M, 1.5G, 10MB";
inline constexpr const char* kAgeForms = "a whole number with a unit s, m, h or d, e.g. 90s, 45m, 12h, 30d";

// "2G", "500M", "64K", "1.5G", "10MB", "4096" (bytes). nullopt for anything else: signs, spaces,
// hex, exponents, a fraction of a byte, or more than INT64_MAX bytes; `why` then says what is wrong.
std::optional<std::int64_t> parse_size(const std::string& text, std::string* why = nullptr);

// "30d", "12h", "45m", "90s" -> seconds; the same strictness (whole numbers, a unit required).
std::optional<std::int64_t> parse_age(const std::string& text, std::string* why = nullptr);

}  // namespace jit::detail
