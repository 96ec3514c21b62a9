// Writes the code of a specialization's fusion chains (jit/chain.hpp) for the prelude.
#pragma once
#include <string>

#include "jit/jit.hpp"

namespace jit::detail {

// The `jitk_chain` struct and the JITK_CHAIN_PARAMS / JITK_CHAIN_ARGS macros (GPU) or
// jitk_chain::from(args) (CPU) for the params' "prologue" and "epilogue" (each may be absent: its
// functions then do nothing). Needs T and the backend header already included.
std::string chain_code(const ParamSet& params, bool gpu);

}  // namespace jit::detail
