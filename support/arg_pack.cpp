// ArgPack: a launch's arguments as the compiled kernel receives them.
#include <cstring>

#include "support/float16.hpp"

namespace jit::detail {

void ArgPack::add_bytes(const void* p, std::size_t n) {
  Values& v = values_;
  if (v.count >= kMaxArgs || n > sizeof v.storage[0])
    throw Error(ErrorCode::Internal, "a kernel descriptor packed more than " + std::to_string(kMaxArgs) + " arguments");
  std::memcpy(v.storage[v.count], p, n);
  v.ptrs[v.count] = v.storage[v.count];
  ++v.count;
}

void ArgPack::set_bytes(int i, const void* p, std::size_t n) {
  if (i < 0 || i >= values_.count || n > sizeof values_.storage[0])
    throw Error(ErrorCode::Internal, "a kernel argument " + std::to_string(i) + " set that was never packed");
  std::memcpy(values_.storage[i], p, n);
}

ArgPack::Values& ArgPack::Values::operator=(const Values& o) {
  if (this == &o) return *this;
  std::memcpy(storage, o.storage, sizeof storage[0] * static_cast<std::size_t>(o.count));
  for (int i = 0; i < o.count; ++i) ptrs[i] = storage[i];
  count = o.count;
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
}  // namespace jit::detail
