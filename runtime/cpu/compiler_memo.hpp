// What the CPU compiler contributes to a cache key (its id, arch, target fingerprint and options),
// remembered in the cache root so that a process whose CPU kernels are all cached never opens the
// CPU module (LLVM) to learn it.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "support/memo_store.hpp"

namespace jit::detail {

struct CompilerFacts {
  std::string id, arch, target_fingerprint;
  std::vector<std::string> options;
};

// What the facts hold for: the module's identity, this jitk's, and the host CPU's as the cpuid
// instruction reports it (vendor, family, model, feature bits, enabled register state). "" where
// the CPU cannot be identified that way (not x86-64) or there is no module: nothing is remembered.
std::string compiler_facts_stamp(const std::string& module_identity);

// The memo the facts are kept in (in the cache root).
inline constexpr const char* kCompilerFactsMemo = "cpu-compiler-facts";
// The facts remembered under `stamp` in memos; nullopt when absent, for another stamp, or malformed.
std::optional<CompilerFacts> read_compiler_facts(const MemoStore& memos, const std::string& stamp);
// Remembers them (atomically); a failure only costs a later process the module.
void write_compiler_facts(const MemoStore& memos, const std::string& stamp, const CompilerFacts& facts);

// The host CPU's model name, from /proc/cpuinfo ("unknown CPU" where it has none).
std::string cpu_model_name();

}  // namespace jit::detail
