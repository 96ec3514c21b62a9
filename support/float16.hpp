// Float to the bits of the 16-bit float types, round to nearest even (jit::to_half and
// jit::to_bfloat16 in include/jit/jit.hpp are the public face; launches convert scalars with these).
#pragma once
#include <cstdint>

#include "jit/jit.hpp"

namespace jit::detail {

std::uint16_t to_f16_bits(float f);
std::uint16_t to_bf16_bits(float f);

}  // namespace jit::detail
