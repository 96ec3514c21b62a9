// Where a CUDA launch goes instead of its own kernel: the same kernel in the generic text (launches
// the copy engine cannot take), or in another variant its family's routing policy names (few
// rows, packed operands), each got at the first launch that needs it.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/jit.hpp"
#include "jit/specializer.hpp"
#include "kernel_sources/gemm/routes.hpp"

namespace jit::detail {

// For a kernel that loads through tensor maps: the same kernel in the backend's generic
// implementation, got at the first launch that needs it (`why`, logged then: at WARN for a launch
// the text cannot take, at INFO for one the generic text runs faster).
struct Fallback {
  std::string kernel;
  ParamSet params;  // the generic text's; tiles it cannot take fall back to its defaults
  Target target;
  std::string why;
  std::int64_t max_rows = 0;     // a few-rows route: the most rows of a launch it takes,
  std::int64_t min_rows = 0;     // more than this many,
  std::int64_t min_columns = 0;  // and at least this many columns
  bool any_tiles = false;        // also where the launch's own tiles would fill the SMs (FewRowsRoute)
  std::string implementation;    // the implementation to run (empty: the backend's generic one)
  bool warn = true;
  mutable std::once_flag once;
  mutable std::shared_ptr<const LoadedKernel> loaded;
  // The route's kernel, got (compiled or loaded) at its first use; throws, and is tried again, when it cannot be had.
  const LoadedKernel& get() const;
};

// The few-rows routes of a unit (empty where its family names none or the generic text cannot split K).
std::vector<std::unique_ptr<Fallback>> few_rows_routes(const SourceUnit& unit, const Target& target);

// An f32 gemm on the generic text at its default tiles, with an operand lying along K (A
// row-major, B column-major): the same gemm with the packed operands along M or N, for the
// launches packing_for packs (A alone, B alone, both: routes 0, 1, 2), each compiled at its first
// use. The generic text's f32 tiles transpose an operand lying along K slice by slice, which on
// the H100 at 4096^3 cost A row-major B column-major 0.86 of cuBLAS against 0.93 for A
// column-major B row-major; packed first (the transposes included) 0.92.
struct PackRoutes {
  bool a_along_k = false, b_along_k = false;
  std::unique_ptr<Fallback> routes[3];
  const Fallback* route(Packing p) const { return p.a || p.b ? routes[(p.a ? 1 : 0) + (p.b ? 2 : 0) - 1].get() : nullptr; }
};
PackRoutes pack_routes(const SourceUnit& unit, const Target& target);
// Whether the unit's module has the packing kernel (jitk_pack: the generic CUDA gemm text's, f32). Looking
// a missing function up costs the driver about 0.02 ms a load (H100), so only these modules are asked.
bool has_pack_entry(const SourceUnit& unit);

}  // namespace jit::detail
