// jit::Error, ParamSet and the argument pack: the small value types behind the public API.
#include <cstring>
#include <string>

#include "jit/jit.hpp"

namespace jit {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidParams: return "invalid params";
    case ErrorCode::UnknownKernel: return "unknown kernel";
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::CompileFailed: return "compile failed";
    case ErrorCode::BackendUnavailable: return "backend unavailable";
    case ErrorCode::LoadFailed: return "load failed";
    case ErrorCode::Device: return "device error";
    case ErrorCode::CacheIo: return "cache i/o";
    case ErrorCode::Manifest: return "manifest";
    case ErrorCode::Internal: return "internal";
  }
  return "?";
}

Error::Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

ParamSet::ParamSet(std::initializer_list<std::pair<std::string, ParamValue>> values) {
  for (const auto& [k, v] : values) set(k, v);
}

void ParamSet::set(std::string name, ParamValue value) {
  for (auto& [k, v] : values_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  values_.emplace_back(std::move(name), std::move(value));
}

const ParamValue* ParamSet::find(std::string_view name) const {
  for (const auto& [k, v] : values_)
    if (k == name) return &v;
  return nullptr;
}

std::string ParamSet::to_string() const {
  std::string out;
  for (const auto& [k, v] : values_) {
    if (!out.empty()) out += ',';
    out += k + '=';
    if (const auto* n = std::get_if<std::int64_t>(&v)) out += std::to_string(*n);
    else out += std::get<std::string>(v);
  }
  return out;
}

namespace detail {
namespace {

float bits_to_float(std::uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

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

}  // namespace

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

namespace detail {

void ArgPack::add_bytes(const void* p, std::size_t n) {
  if (count_ >= kMaxArgs || n > sizeof storage_[0])
    throw Error(ErrorCode::Internal, "a kernel descriptor packed more than " + std::to_string(kMaxArgs) + " arguments");
  std::memcpy(storage_[count_], p, n);
  ptrs_[count_] = storage_[count_];
  ++count_;
}

void ArgPack::set_bytes(int i, const void* p, std::size_t n) {
  if (i < 0 || i >= count_ || n > sizeof storage_[0])
    throw Error(ErrorCode::Internal, "a kernel argument " + std::to_string(i) + " set that was never packed");
  std::memcpy(storage_[i], p, n);
}

ArgPack& ArgPack::operator=(const ArgPack& o) {
  if (this == &o) return *this;
  std::memcpy(storage_, o.storage_, sizeof storage_[0] * static_cast<std::size_t>(o.count_));
  for (int i = 0; i < o.count_; ++i) ptrs_[i] = storage_[i];
  count_ = o.count_;
  work_items = o.work_items, work_columns = o.work_columns, work_depth = o.work_depth, min_grain = o.min_grain;
  stream = o.stream;
  for (int i = 0; i < 2; ++i) matrices[i] = o.matrices[i];
  matrix_count = o.matrix_count;
  return *this;
}

void ArgPack::add_scalar(double v, DType t) {
  switch (t) {
    case DType::f64: add_bytes(&v, 8); break;
    case DType::f32: {
      float f = static_cast<float>(v);
      add_bytes(&f, 4);
      break;
    }
    case DType::f16: {
      std::uint16_t h = to_f16_bits(static_cast<float>(v));
      add_bytes(&h, 2);
      break;
    }
    case DType::bf16: {
      std::uint16_t h = to_bf16_bits(static_cast<float>(v));
      add_bytes(&h, 2);
      break;
    }
  }
}

void check_dtype(std::string_view kernel, std::string_view arg, DType expected, DType got) {
  if (expected != got)
    throw Error(ErrorCode::InvalidArgument, std::string(kernel) + ": argument '" + std::string(arg) + "' is " +
                                                std::string(dtype_name(got)) + " but the kernel was specialized for " +
                                                std::string(dtype_name(expected)));
}

void check_not_null(std::string_view kernel, std::string_view arg, const void* p, std::int64_t count) {
  if (count > 0 && p == nullptr)
    throw Error(ErrorCode::InvalidArgument, std::string(kernel) + ": argument '" + std::string(arg) + "' is null");
}

void check_non_negative(std::string_view kernel, std::string_view arg, std::int64_t v) {
  if (v < 0)
    throw Error(ErrorCode::InvalidArgument,
                std::string(kernel) + ": argument '" + std::string(arg) + "' = " + std::to_string(v) + " is negative");
}

}  // namespace detail
}  // namespace jit
