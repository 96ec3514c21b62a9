// Record mode: with JITK_RECORD=FILE, every specialization a program asks for is appended to FILE
// as a warm manifest entry, once (deduplicated across threads and processes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "jit/jit.hpp"

namespace jit::detail {

// Appends the entry unless FILE already has it. `target` names the architecture compiled for, so
// the file warms that device elsewhere. Never throws: a file that cannot be written is one WARN.
void record_use(const std::string& kernel, const ParamSet& params, const Target& target);

// The manifest text of one entry (its first line is the deduplication signature).
// With tune_shape: the entry also says `tune = [[numbers]]` (jitk warm --tune tunes params for it).
std::string manifest_entry(const std::string& kernel, const ParamSet& params, const Target& target,
                           const std::vector<std::int64_t>* tune_shape = nullptr);

}  // namespace jit::detail
