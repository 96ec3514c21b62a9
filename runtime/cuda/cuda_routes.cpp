// The routes of a CUDA launch: the fallback to the generic text and the gemm family's routes, made here.
#include "runtime/cuda/cuda_routes.hpp"

#include "jit/kernel_catalog.hpp"
#include "runtime/get_kernel.hpp"
#include "support/logging.hpp"

namespace jit::detail {

const LoadedKernel& Fallback::get() const {
  std::call_once(once, [&] {
    const KernelDef& def = find_kernel(kernel);
    const Implementation& generic = generic_implementation(def, Backend::Cuda);
    ParamSet p = params;
    // Tiles the generic text cannot take (Hopper's deeper stages, say) fall back to its defaults.
    if (implementation.empty() && !params_problem(generic, p).empty())
      for (const char* tile : kTileParams)
        if (p.find(tile)) p.set(tile, std::int64_t{0});
    Selection s;
    s.implementation = implementation.empty() ? generic.name : implementation;
    loaded = get_kernel(kernel, p, target, s).kernel;  // throws (and is tried again next time) when it cannot
    log().log(warn ? spdlog::level::warn : spdlog::level::info, "{}: {}; launches like it run implementation '{}' ({})", kernel,
              why, s.implementation, p.to_string());
  });
  return *loaded;
}

std::vector<std::unique_ptr<Fallback>> few_rows_routes(const SourceUnit& unit, const Target& target) {
  std::vector<std::unique_ptr<Fallback>> routes;
  const std::vector<FewRowsRoute> policy = few_rows_params(unit.params);  // the family's
  if (policy.empty()) return routes;
  const KernelDef& def = find_kernel(unit.kernel);
  const Implementation& generic = generic_implementation(def, Backend::Cuda);
  if (!unit.shape.tensor_maps && unit.implementation != generic.name) return routes;
  const Implementation* own = nullptr;
  for (const Implementation& impl : def.implementations)
    if (impl.name == unit.implementation) own = &impl;
  for (const FewRowsRoute& r : policy) {
    if (r.own) {  // the launching text's own tile: only where that text takes it (gemm's cuda-sm90a routes on cuda-sm90a)
      if (unit.kernel != "gemm" || !own || own == &generic || !params_problem(*own, r.params).empty()) continue;
    } else if (!params_problem(generic, r.params).empty() || tile_plan(generic, r.params).max_split_k <= 1) {
      return {};
    }
    auto route = std::make_unique<Fallback>();
    route->kernel = unit.kernel;
    route->params = r.params;
    route->max_rows = r.max_rows;
    route->min_rows = r.min_rows;
    route->min_columns = r.min_columns;
    route->any_tiles = r.any_tiles;
    if (r.own) route->implementation = unit.implementation;
    route->target = target;
    route->why = "launches of " + std::to_string(r.min_rows + 1) + " to " + std::to_string(r.max_rows) + " rows" +
                 (r.min_columns ? " and at least " + std::to_string(r.min_columns) + " columns" : std::string()) +
                 (r.any_tiles ? std::string(" (tiles of 64 rows read the weights faster)")
                              : std::string(" whose tiles would leave over half the SMs idle")) +
                 " (" + unit.params.to_string() + ")";
    route->warn = false;
    routes.push_back(std::move(route));
  }
  return routes;
}

bool has_pack_entry(const SourceUnit& unit) {
  // gemm.cu defines jitk_pack for f32 only
  return unit.kernel == "gemm" && text_is(unit.params, "dtype", "f32") &&
         unit.implementation == generic_implementation(find_kernel(unit.kernel), Backend::Cuda).name;
}

PackRoutes pack_routes(const SourceUnit& unit, const Target& target) {
  PackRoutes out;
  if (!has_pack_entry(unit)) return out;
  const Implementation& generic = generic_implementation(find_kernel(unit.kernel), Backend::Cuda);
  const AlongK along = packable_along_k(unit.kernel, generic, unit.params);
  const auto [a_along_k, b_along_k] = along;
  for (PackRoute& r : pack_route_params(unit.params, along)) {  // the family's
    if (!params_problem(generic, r.params).empty()) continue;
    auto route = std::make_unique<Fallback>();
    route->kernel = unit.kernel;
    route->params = std::move(r.params);
    route->target = target;
    route->why = "large launches with " + operands_text({r.a, r.b}) + " packed along " +
                 (r.a && r.b ? "M and N" : r.a ? "M" : "N") + " first (" + unit.params.to_string() + ")";
    route->warn = false;
    out.routes[(r.a ? 1 : 0) + (r.b ? 2 : 0) - 1] = std::move(route);
  }
  out.a_along_k = a_along_k && (out.routes[0] || out.routes[2]);
  out.b_along_k = b_along_k && (out.routes[1] || out.routes[2]);
  return out;
}

}  // namespace jit::detail
