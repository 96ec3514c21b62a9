// What a kernel family's descriptor (kernel_sources/<family>/descriptor.cpp) builds from: the
// implementations most kernels share (CPU, generic CUDA, its HIP twin), common parameters, and the
// small readers of validated params that tile plans use.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "jit/jit.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/registry.hpp"

namespace jit::detail {

using Kind = GpuLayout::Kind;
inline const std::vector<DType> kCpuTypes = {DType::f32, DType::f64};
inline const std::vector<DType> kGpuTypes = {DType::f32, DType::f16, DType::bf16};

// Rows longer than this are not unrolled by specialization; the largest hidden size in use by
// today's models is 16384 (and 2x that for gated MLPs).
inline constexpr std::int64_t kMaxHidden = 1 << 20;
// The largest attention head a specialization takes (today's models: 64 to 256): rotary and the
// KV cache's kernels share it.
inline constexpr std::int64_t kMaxHeadDim = 1024;

inline ParamSpec dtype_param() { return {"dtype", {"f32", "f64", "f16", "bf16"}, 0, 0, "element type"}; }
inline ParamSpec hidden_param() { return {"hidden", {}, 1, kMaxHidden, "row length the kernel is specialized for"}; }
inline ParamSpec prologue_param() { return {"prologue", {}, 0, 0, "elementwise steps fused before the kernel's work", true}; }
inline ParamSpec epilogue_param() { return {"epilogue", {}, 0, 0, "elementwise steps fused after the kernel's work", true}; }

inline Implementation cpu_impl(std::string file) {
  Implementation i;
  i.name = "cpu";
  i.backend = Backend::Cpu;
  i.generic = true;
  i.file = std::move(file);
  i.dtypes = kCpuTypes;
  i.note = "host CPU, all cores, vectorized for its exact features";
  return i;
}

// The CUDA text every NVIDIA GPU from sm_70 on runs.
inline Implementation cuda_generic(std::string file, GpuLayout layout, std::string note) {
  Implementation i;
  i.name = "cuda";
  i.backend = Backend::Cuda;
  i.min_capability = 70;
  i.generic = true;
  i.file = std::move(file);
  i.dtypes = kGpuTypes;
  i.layout = layout;
  i.note = std::move(note);
  return i;
}

// The same text for AMD GPUs through hipRTC. A gfx arch has no capability number (capability_of_arch
// gives 0), so the range is every one.
inline Implementation hip_generic(const Implementation& cuda) {
  Implementation i = cuda;
  i.name = "hip";
  i.backend = Backend::Hip;
  i.min_capability = 0;
  i.max_capability = kAnyCapability;
  i.note = cuda.note + " (AMD, hipRTC)";
  return i;
}

// The implementations every shipped kernel has: the CPU's, the generic CUDA text and its HIP twin.
inline std::vector<Implementation> generic_impls(std::string cpu_file, std::string gpu_file, GpuLayout layout, std::string note) {
  Implementation cuda = cuda_generic(std::move(gpu_file), layout, std::move(note));
  Implementation hip = hip_generic(cuda);
  return {cpu_impl(std::move(cpu_file)), std::move(cuda), std::move(hip)};
}

// A Hopper-only text (sm_90a: wgmma, setmaxnreg), f16 and bf16, preferred where it suits the
// params (priority 1), tiles from its plan.
inline Implementation sm90a_impl(std::string file, GpuLayout layout, std::function<TilePlan(const ParamSet&)> plan, std::string note) {
  Implementation i;
  i.name = "cuda-sm90a";
  i.backend = Backend::Cuda;
  i.min_capability = i.max_capability = 90;
  i.arch_suffix = "a";
  i.priority = 1;
  i.file = std::move(file);
  i.dtypes = {DType::f16, DType::bf16};
  i.layout = layout;
  i.tile_plan = std::move(plan);
  i.note = std::move(note);
  return i;
}

inline std::int64_t int_param(const ParamSet& p, const char* name) { return std::get<std::int64_t>(*p.find(name)); }
// Blocks a cluster the params ask for: cluster_m (resolved; 1 where the kernel has no such param).
inline std::int64_t cluster_of(const ParamSet& p) { return p.find("cluster_m") ? int_param(p, "cluster_m") : 1; }
// The plans of implementations that launch no clusters.
inline std::string no_cluster_problem(const ParamSet& p) {
  const std::int64_t c = cluster_of(p);
  return c == 1 ? "" : "cluster_m = " + std::to_string(c) + ": only cuda-sm90a (Hopper) runs blocks in clusters";
}
inline std::string tile_text(const ParamSet& p) {
  return "tile " + std::to_string(int_param(p, "tile_m")) + "x" + std::to_string(int_param(p, "tile_n")) + "x" +
         std::to_string(int_param(p, "tile_k"));
}

// Shared memory the Hopper parts have at most (sm_90: 227 KB a block); a device with less is
// told at load time.
inline constexpr std::int64_t kMaxSharedBytes = 227 * 1024;

// A plan refused because its tile needs `required` bytes of shared memory a block, more than `limit`.
inline TilePlan shared_memory_refused(std::string problem, std::int64_t required, std::int64_t limit = kMaxSharedBytes) {
  TilePlan plan{std::move(problem)};
  plan.shared_bytes = required;
  plan.shared_limit = limit;
  return plan;
}

}  // namespace jit::detail
