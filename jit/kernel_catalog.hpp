// The kernels jitk knows (shipped, then the user's), their parameters and implementations, and
// the validation of parameters.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jit/jit.hpp"
#include "jit/registry.hpp"

namespace jit::detail {

using jit::Implementation;
using jit::ParamSpec;
using KernelDef = jit::KernelSpec;

// GPU row kernels keep a row in registers; longer rows than this are refused.
inline constexpr std::int64_t kGpuMaxHidden = 32768;

// An immutable view of every kernel; a registration publishes a new one. Views are never freed,
// so references into one stay valid for the life of the process.
struct Registry {
  std::uint64_t generation = 0;
  std::size_t shipped = 0;  // kernels[0, shipped) are jitk's own
  std::vector<std::size_t> shipped_implementations;  // of kernels[i]: implementations[0, this) are jitk's own
  std::vector<KernelDef> kernels;
};
const Registry& registry();
// jitk's own kernels, every family of kernel_sources/families.def in its order (defined by
// kernel_sources/families.cpp: the catalog reaches the families by this call, not by their headers).
std::vector<KernelDef> shipped_kernels();
const std::vector<KernelDef>& kernel_catalog();  // registry().kernels
// Whether param `name` is the text `value` (false where it is absent or a number).
bool text_is(const ParamSet& p, const char* name, const char* value);
// A tiled kernel's tile params; the first four in (m, n, k, stages) order.
inline constexpr const char* kTileParams[] = {"tile_m", "tile_n", "tile_k", "stages", "cluster_m"};
// Whether every tile param `params` holds is 0 (the implementation's defaults).
bool at_default_tiles(const ParamSet& params);
// Throws Error{UnknownKernel} listing the kernels that exist.
const KernelDef& find_kernel(std::string_view name);
// Whether `name` is one of jitk's own kernels (not a user's).
bool is_shipped_kernel(std::string_view name);
// Whether implementation `impl` of kernel `kernel` is jitk's own (not one a user added to it): all
// its code (validation, layout, tile plan) is then in this build of jitk.
bool is_shipped_implementation(std::string_view kernel, std::string_view impl);

// Throw Error{InvalidParams} naming what is wrong; publish a new registry view.
void add_kernel(KernelDef def);
void add_implementation(std::string_view kernel, Implementation impl);
// Checks an implementation on its own (name, text, range, layout); "" when sound.
std::string implementation_problem(const Implementation& impl);

// Checks every parameter (unknown, missing, wrong type, out of range) before anything is
// compiled and returns them in the definition's order. Throws Error{InvalidParams}.
ParamSet validate_params(const KernelDef& def, const ParamSet& given);
// ... and that some implementation on `backend` takes them (dtype, GPU row length).
ParamSet validate_params(const KernelDef& def, const ParamSet& given, Backend backend);
// Why `impl` cannot take these (validated) params, or "".
std::string params_problem(const Implementation& impl, const ParamSet& params);
// `problem` (the generic implementation's reason for refusing params), followed by the reasons of
// the backend's specialized implementations it names (gemm's QKV epilogue: "runs on cuda-sm90a
// only", and cuda-sm90a's own: a tile that cannot hold a head).
std::string with_named_reasons(const KernelDef& def, Backend backend, const ParamSet& params, std::string problem);
// The fields of an InvalidParams error about these params: the kernel and params, and, where
// `impl`'s tile plan refused them for lack of shared memory, required and limit (impl may be nullptr).
ErrorFields params_error_fields(const std::string& kernel, const Implementation* impl, const ParamSet& params);
// The fields of a refusal to load a kernel that needs more shared memory a block than the device gives.
ErrorFields shared_memory_error_fields(const std::string& kernel, const std::string& params, std::int64_t required,
                                       std::int64_t limit);
// Tile layouts: the params with tile_m, tile_n, tile_k and stages of 0 (or absent) replaced by
// the implementation's defaults; other layouts: the params unchanged.
ParamSet resolve_tile(const Implementation& impl, const ParamSet& params);
// Tile layouts: the implementation's plan for these params (resolved here).
TilePlan tile_plan(const Implementation& impl, const ParamSet& params);
// The element types an implementation takes.
std::vector<std::string> dtypes_of(const KernelDef& def, const Implementation& impl);

// The generic implementation for a backend (raw baselines in benches and tests). Throws
// Error{BackendUnavailable} when the kernel has none there.
const Implementation& generic_implementation(const KernelDef& def, Backend backend);

}  // namespace jit::detail
