// Host conversions between float and the 16-bit float types (IEEE half, bfloat16), round to nearest even.
#include <cstdint>
#include <cstring>

#include "support/float16.hpp"

namespace jit {

namespace detail {
namespace {

float bits_to_float(std::uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace

std::uint16_t to_f16_bits(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  std::int32_t exp = static_cast<std::int32_t>((x >> 23) & 0xff) - 127 + 15;
  std::uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    std::uint32_t shift = static_cast<std::uint32_t>(14 - exp);
    std::uint32_t half = mant >> shift;
    std::uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = sign | (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<std::uint16_t>(half);
}

std::uint16_t to_bf16_bits(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1);  // round to nearest even
  return static_cast<std::uint16_t>(x >> 16);
}

}  // namespace detail

half to_half(float f) { return {detail::to_f16_bits(f)}; }
bfloat16 to_bfloat16(float f) { return {detail::to_bf16_bits(f)}; }
float to_float(bfloat16 b) { return detail::bits_to_float(static_cast<std::uint32_t>(b.bits) << 16); }
float to_float(half h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  std::uint32_t exp = (h.bits >> 10) & 0x1fu, mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return detail::bits_to_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return detail::bits_to_float(sign);
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -v : v;
  }
  return detail::bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace jit
