// What the shipped kernels' descriptors share: argument checks, task sizes, the row kernels' params.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <tuple>
#include <vector>

#include "jit/chain.hpp"
#include "jit/cuda.hpp"
#include "jit/jit.hpp"

namespace jit::kernels {

namespace detail {
// A task smaller than this many elements costs more to hand to a thread than to run.
inline constexpr std::int64_t kMinElementsPerTask = 16384;
inline void check_eps(std::string_view kernel, double eps) {
  if (!(eps > 0))
    throw Error(ErrorCode::InvalidArgument, std::string(kernel) + ": eps must be > 0, got " + std::to_string(eps));
}
inline std::int64_t rows_per_task(std::int64_t hidden) {
  return std::max<std::int64_t>(1, kMinElementsPerTask / std::max<std::int64_t>(1, hidden));
}
// Each tensor argument of a launch has the kernel's dtype, and is not null when there is work.
inline void check_tensors(std::string_view kernel, DType dtype, std::int64_t count,
                          std::initializer_list<std::pair<const char*, ConstPtr>> tensors) {
  for (const auto& [arg, p] : tensors) {
    jit::detail::check_dtype(kernel, arg, dtype, p.dtype);
    jit::detail::check_not_null(kernel, arg, p.data, count);
  }
}
// Whether `rows` rows of `width` elements, `stride` apart (width <= stride, all >= 0), of `dtype`
// end within a 64-bit byte offset: (rows - 1) x stride + width elements, their bytes included.
inline bool rows_fit_offsets(std::int64_t rows, std::int64_t width, std::int64_t stride, DType dtype) {
  const std::int64_t limit = std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(std::max<std::size_t>(1, dtype_size(dtype)));
  if (rows <= 0 || width <= 0) return true;
  if (width > limit) return false;
  return rows == 1 || stride <= (limit - width) / (rows - 1);
}
// The elements between consecutive token rows of a tensor whose rows hold `packed` elements (heads
// x head_dim): `given`, or `packed` when given is 0 (the packed layout). A larger stride reads or
// writes the rows in place inside a wider buffer (q, k and v as column slices of one QKV gemm's
// output, [tokens, (heads + 2 kv_heads) x head_dim]); the elements between rows are never touched.
// Throws InvalidArgument for a negative stride, one smaller than the packed row, or one whose rows
// (tokens of them, of `dtype`) span more bytes than a 64-bit offset holds.
inline std::int64_t token_stride(std::string_view kernel, const char* arg, std::int64_t given, std::int64_t packed, std::int64_t tokens,
                                 DType dtype) {
  const auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::InvalidArgument, std::string(kernel) + ": " + arg + " = " + std::to_string(given) + " " + why);
  };
  if (given < 0) fail("is negative; allowed: 0 (packed rows) or at least a token's heads x head_dim = " + std::to_string(packed));
  if (given != 0 && given < packed)
    fail("is less than a token's heads x head_dim = " + std::to_string(packed) + " (rows would overlap); 0 means packed");
  const std::int64_t stride = given == 0 ? packed : given;
  if (!rows_fit_offsets(tokens, packed, stride, dtype)) fail("over " + std::to_string(tokens) + " tokens spans more than a 64-bit byte offset holds");
  return stride;
}
// Whether two sets of `n` rows share an element: rows t of a at a + t * a_stride, a_width
// elements long, and likewise b (strides and widths in elements of `elem` bytes, strides at least
// the widths). Rows that interleave in one buffer (q and k of a fused QKV output) do not.
inline bool strided_rows_overlap(const void* a, std::int64_t a_width, std::int64_t a_stride, const void* b, std::int64_t b_width,
                                 std::int64_t b_stride, std::int64_t n, std::size_t elem) {
  if (!a || !b || n <= 0 || a_width <= 0 || b_width <= 0) return false;
  const auto e = static_cast<std::int64_t>(elem);
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  // byte spans first (separate buffers end here): [a, a + (n-1) sa + wa) against b's
  const auto span = [&](std::int64_t width, std::int64_t stride) { return static_cast<std::uintptr_t>(((n - 1) * stride + width) * e); };
  if (pa + span(a_width, a_stride) <= pb || pb + span(b_width, b_stride) <= pa) return false;
  // d: b's offset from a in bytes. Row t of a and row u of b meet when -wb < d + (u sb - t sa) < wa.
  const std::int64_t d = static_cast<std::int64_t>(pb - pa), wa = a_width * e, wb = b_width * e;
  if (a_stride == b_stride) {  // u - t = j in [-(n-1), n-1]: the first j with d + j s > -wb is the only candidate
    const std::int64_t s = a_stride * e;
    const std::int64_t num = -wb - d;  // j > num / s
    std::int64_t j = num >= 0 ? num / s + 1 : -((-num) / s);
    if (j * s <= num) ++j;
    j = std::max(j, -(n - 1));
    return j <= n - 1 && d + j * s < wa;
  }
  for (std::int64_t t = 0; t < n; ++t) {  // rows of a, each against the rows of b that can reach it
    const std::int64_t at = t * a_stride * e - d;  // row t of a, from b's start
    const std::int64_t sb = b_stride * e;
    std::int64_t u = (at - wb) >= 0 ? (at - wb) / sb : 0;
    for (; u < n && u * sb < at + wa; ++u)
      if (u * sb + wb > at) return true;
  }
  return false;
}
// The type of a kernel's scalar arguments (eps, chain numbers): float, double for f64.
inline DType scalar_type(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }
// Appends the fusion chains' operands (after the kernel's own arguments, before the row count).
template <class P, class A> void pack_chains(std::string_view kernel, const P& p, const A& a, jit::detail::ArgPack& out) {
  jit::detail::pack_chain(kernel, "prologue", p.prologue, a.prologue, p.dtype, scalar_type(p.dtype), a.rows, out);
  jit::detail::pack_chain(kernel, "epilogue", p.epilogue, a.epilogue, p.dtype, scalar_type(p.dtype), a.rows, out);
}
}  // namespace detail

// Parameters shared by the row kernels: element type, the row length they are unrolled for, and
// the elementwise chains fused before and after the kernel's work (jit/chain.hpp; rms_norm,
// layer_norm, silu_and_mul and gelu_and_mul take them, the others refuse a non-empty chain).
struct RowParams {
  DType dtype = DType::f32;
  std::int64_t hidden = 0;
  Chain prologue = {};
  Chain epilogue = {};
  auto fields() const { return std::tie(dtype, hidden, prologue, epilogue); }
};
// An empty chain is left out, so a kernel without one keeps the key it always had.
inline void add_chains(ParamSet& s, const Chain& prologue, const Chain& epilogue) {
  if (!prologue.empty()) s.set("prologue", prologue.to_string());
  if (!epilogue.empty()) s.set("epilogue", epilogue.to_string());
}
inline ParamSet row_params(const RowParams& p) {
  ParamSet s{{"dtype", std::string(dtype_name(p.dtype))}, {"hidden", p.hidden}};
  add_chains(s, p.prologue, p.epilogue);
  return s;
}

}  // namespace jit::kernels
