// The key of a request named without rendering its text, remembered in the cache so that a later
// process's warm get goes from request to artifact without running the specializer.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "jit/compiler.hpp"
#include "jit/specializer.hpp"
#include "support/memo_store.hpp"

namespace jit::detail {

// A hash of everything the cache key hashes, with the rendered prelude stood in for by what renders
// it: this build of jitk (its build id) and the implementation's params. The texts are hashed as
// read now (a $JITK_KERNEL_DIR edit changes it), the compiler's id, arch, target and options as the
// compiler says, and the toolkit headers by `external_headers` (the compiler's fingerprint of them,
// taken from the unread texts). "" when a request has no such key: an implementation that is not
// jitk's own (a user's code renders it), one mapped for a scope, or a build without a build id.
std::string request_key(const SourceUnit& described, const UnitTexts& texts, Backend backend, const Compiler& compiler,
                        const std::string& external_headers, bool mapped);

// The key remembered for request_key; nullopt when none is, or the memo is not exactly one of ours.
std::optional<std::string> remembered_key(const MemoStore& memos, const std::string& request_key);
// Remembers it (a failure only costs a later process the specializer).
void remember_key(const MemoStore& memos, const std::string& request_key, const std::string& key);

// How many gets of this process found their artifact by a remembered key (tests, benches).
std::uint64_t remembered_key_hits();
void count_remembered_key_hit();

}  // namespace jit::detail
