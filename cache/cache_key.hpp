// The cache key: the XXH3-128 hash (support/hashing.hpp) of everything that changes a compiled
// binary, and the format versions that go into it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "support/hashing.hpp"

namespace jit::detail {

// Bumped whenever the index schema or the key recipe changes (2: implementations, name and
// version, in the key and the index; format-1 indexes are migrated in place).
inline constexpr int kCacheFormatVersion = 2;
// Bumped whenever the blob layout changes (2: the header names key, kernel, params, backend, target,
// compiler and implementation). A blob of another layout is a miss: rebuilt, not an error.
inline constexpr int kBlobFormatVersion = 2;

}  // namespace jit::detail
