// What an artifact is, beside its payload: the fields every tier keeps with it and the index lists.
#pragma once
#include <cstdint>
#include <string>

namespace jit::detail {

// An index row carries one of these (IndexRow derives from it), so a field added here is stored,
// listed and restored everywhere without a copy by hand to forget.
struct ArtifactMeta {
  std::string kernel, params, backend, arch, compiler;
  double compile_ms = 0;
  std::string implementation;  // "" in rows of format 1 (before implementations)
  std::int64_t implementation_version = 0;
};

}  // namespace jit::detail
