// ArgPack: a launch's arguments as the compiled kernel receives them.
#include <cstring>

#include "support/float16.hpp"

namespace jit::detail {

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
}  // namespace jit::detail
