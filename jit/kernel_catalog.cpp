// The catalog of shipped kernels and the validation of their parameters.
#include "jit/kernel_catalog.hpp"

#include "jit/chain.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <memory>
#include <mutex>

namespace jit::detail {
namespace {

// Rows longer than this are not unrolled by specialization; the largest hidden size in use by
// today's models is 16384 (and 2x that for gated MLPs).
constexpr std::int64_t kMaxHidden = 1 << 20;

ParamSpec dtype_param() { return {"dtype", {"f32", "f64", "f16", "bf16"}, 0, 0, "element type"}; }
ParamSpec hidden_param() { return {"hidden", {}, 1, kMaxHidden, "row length the kernel is specialized for"}; }
ParamSpec prologue_param() { return {"prologue", {}, 0, 0, "elementwise steps fused before the kernel's work", true}; }
ParamSpec epilogue_param() { return {"epilogue", {}, 0, 0, "elementwise steps fused after the kernel's work", true}; }

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

bool text_is(const ParamSet& p, const char* name, const char* value) {
  const auto* v = p.find(name);
  return v && std::holds_alternative<std::string>(*v) && std::get<std::string>(*v) == value;
}

bool at_default_tiles(const ParamSet& params) {
  for (const char* tile : kTileParams)
    if (const ParamValue* v = params.find(tile); v && std::holds_alternative<std::int64_t>(*v) && std::get<std::int64_t>(*v) != 0)
      return false;
  return true;
}

AlongK packable_along_k(std::string_view kernel, const Implementation& impl, const ParamSet& params) {
  if (kernel != "gemm" || impl.backend != Backend::Cuda || !impl.generic || !text_is(params, "dtype", "f32") || !at_default_tiles(params))
    return {};
  return {text_is(params, "a_layout", "row"), text_is(params, "b_layout", "col")};
}

std::string operands_text(AlongK operands) { return operands.a && operands.b ? "A and B" : operands.a ? "A" : operands.b ? "B" : ""; }

}  // namespace jit::detail

namespace jit {
std::string ParamSpec::allowed() const {
  if (chain) return "a chain of steps joined by '>' (e.g. add>store; see jit/chain.hpp), or nothing";
  if (is_text()) return "one of " + detail::join(choices);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}
}  // namespace jit

namespace jit::detail {
namespace {

using Kind = GpuLayout::Kind;
const std::vector<DType> kCpuTypes = {DType::f32, DType::f64};
const std::vector<DType> kGpuTypes = {DType::f32, DType::f16, DType::bf16};

Implementation cpu_impl(std::string file) {
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
Implementation cuda_generic(std::string file, GpuLayout layout, std::string note) {
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
Implementation hip_generic(const Implementation& cuda) {
  Implementation i = cuda;
  i.name = "hip";
  i.backend = Backend::Hip;
  i.min_capability = 0;
  i.max_capability = kAnyCapability;
  i.note = cuda.note + " (AMD, hipRTC)";
  return i;
}

// The implementations every shipped kernel has: the CPU's, the generic CUDA text and its HIP twin.
std::vector<Implementation> generic_impls(std::string cpu_file, std::string gpu_file, GpuLayout layout, std::string note) {
  Implementation cuda = cuda_generic(std::move(gpu_file), layout, std::move(note));
  Implementation hip = hip_generic(cuda);
  return {cpu_impl(std::move(cpu_file)), std::move(cuda), std::move(hip)};
}

std::int64_t int_param(const ParamSet& p, const char* name) { return std::get<std::int64_t>(*p.find(name)); }
// Blocks a cluster the params ask for: cluster_m (resolved; 1 where the kernel has no such param).
std::int64_t cluster_of(const ParamSet& p) { return p.find("cluster_m") ? int_param(p, "cluster_m") : 1; }
// The plans of implementations that launch no clusters.
std::string no_cluster_problem(const ParamSet& p) {
  const std::int64_t c = cluster_of(p);
  return c == 1 ? "" : "cluster_m = " + std::to_string(c) + ": only cuda-sm90a (Hopper) runs blocks in clusters";
}
std::string tile_text(const ParamSet& p) {
  return "tile " + std::to_string(int_param(p, "tile_m")) + "x" + std::to_string(int_param(p, "tile_n")) + "x" +
         std::to_string(int_param(p, "tile_k"));
}

// Shared memory the Hopper parts have at most (sm_90: 227 KB a block); a device with less is
// told at load time.
constexpr std::int64_t kMaxSharedBytes = 227 * 1024;

TilePlan gemm_cpu_plan(const ParamSet& p) {
  if (std::string problem = no_cluster_problem(p); !problem.empty()) return {problem};
  const std::int64_t tm = int_param(p, "tile_m"), tn = int_param(p, "tile_n");
  if (tm > 64) return {"tile_m = " + std::to_string(tm) + " is over 64 on the CPU"};
  if (tm * tn > 4096) return {"tile_m * tile_n = " + std::to_string(tm * tn) + " accumulators; at most 4096 on the CPU"};
  return {"", 0, 0, tm, tn, int_param(p, "tile_k")};
}

// kernel_sources/gemm.cu's launch for a tile_m x tile_n tile walking tile_k slices, `stages` deep,
// A and B slices kept in their global layout (rows padded by 16 bytes), f32's as rows of K. f16/bf16:
// warps of min(64, tile_m) x min(32, tile_n) (WMMA 16x16x16 fragments), C staged through shared
// memory (float) for the epilogue; f32: 8 x 8 a thread (8 x 16 from tile_n 256), at least one warp.
TilePlan cuda_tile_plan(const ParamSet& p, bool a_row, bool b_row, std::int64_t tm, std::int64_t tn, std::int64_t tk) {
  const std::int64_t stages = int_param(p, "stages");
  const bool f32 = text_is(p, "dtype", "f32");
  const std::string tile = "tile " + std::to_string(tm) + "x" + std::to_string(tn) + "x" + std::to_string(tk);
  if (tm < 16 || tn < 16 || tm % 16 || tn % 16 || (tm > 64 && tm % 64) || (tn > 32 && tn % 32))
    return {tile + ": tile_m must be 16, 32, 48, 64 or a multiple of 64, and tile_n 16 or a multiple of 32, on CUDA"};
  if (tk % 16 || tk > 128) return {tile + ": tile_k must be a multiple of 16, at most 128, on CUDA"};
  if (stages < 2 || stages > 6) return {"stages = " + std::to_string(stages) + ": 2 to 6 on CUDA"};
  // f32: 8 x 8 accumulators a thread, 8 x 16 where tile_n >= 256 (one block an SM, up to 255 registers)
  const std::int64_t f32_cols = tn >= 256 ? 16 : 8;
  const std::int64_t threads = f32 ? std::max<std::int64_t>(32, tm * tn / (8 * f32_cols))
                                   : (tm / std::min<std::int64_t>(64, tm)) * (tn / std::min<std::int64_t>(32, tn)) * 32;
  if (threads > 1024) return {tile + ": over 1024 threads"};
  // f32's shares hold 64 or 128 accumulators: past 256 threads a block they would spill
  if (f32 && threads > 256)
    return {tile + ": f32 takes at most 256 threads a block (tile_m * tile_n up to 16384, 32768 from tile_n 256)"};
  const std::int64_t elem = f32 ? 4 : 2;
  // Rows padded by 16 bytes; f32 keeps both slices as rows of K, padded to 4 mod 32 words.
  const auto padded = [&](std::int64_t n) { return f32 ? n + (36 - n % 32) % 32 : n + 16 / elem; };
  const std::int64_t a_tile = f32 ? tk * padded(tm) : a_row ? tm * padded(tk) : tk * padded(tm);
  const std::int64_t b_tile = f32 ? tk * padded(tn) : b_row ? tk * padded(tn) : tn * padded(tk);
  // `stages` slots an operand, but where f32 transposes one (A row-major, B column-major) through
  // stages - 1 buffers of its slice and two slots: where the slice divides into whole warps' 16 x 32
  // units (kernel_sources/gemm.cu, SmemTranspose and stageable()).
  const auto region = [&](bool transposed, std::int64_t outer, std::int64_t slot) {
    const bool staged = f32 && transposed && threads % 32 == 0 && outer % 16 == 0 && tk % 32 == 0 &&
                        (outer / 16 * (tk / 32)) % (threads / 32) == 0;
    return staged ? (stages - 1) * outer * tk + 2 * slot : stages * slot;
  };
  const std::int64_t pipeline = (region(a_row, tm, a_tile) + region(!b_row, tn, b_tile)) * elem;
  const std::int64_t staging = f32 ? 0 : tm * (tn + 4) * 4;
  TilePlan plan{"", static_cast<int>(threads), std::max(pipeline, staging), tm, tn, tk};
  if (plan.shared_bytes > kMaxSharedBytes)
    return {tile + " x " + std::to_string(stages) + " stages needs " + std::to_string(plan.shared_bytes) +
            " bytes of shared memory; at most " + std::to_string(kMaxSharedBytes)};
  return plan;
}

// Blocks that may split one gemm tile's K on sm_90 (a cluster; 8 is the portable cluster size),
// for tiles of at most kMaxSplitRows rows: decode's. Larger tiles are for M that fills the SMs, and
// the split's code cost f32's 128x256 tile 4-7% on the H100 (its registers went from 207 to 255).
constexpr int kMaxSplitK = 8;
constexpr std::int64_t kMaxSplitRows = 64;

TilePlan gemm_cuda_plan(const ParamSet& p) {
  if (std::string problem = no_cluster_problem(p); !problem.empty()) return {problem};
  const std::int64_t tm = int_param(p, "tile_m"), tn = int_param(p, "tile_n");
  TilePlan plan = cuda_tile_plan(p, text_is(p, "a_layout", "row"), text_is(p, "b_layout", "row"), tm, tn, int_param(p, "tile_k"));
  if (!plan.problem.empty()) return plan;
  // f32 tiles for M that fills the SMs, one block an SM (tile_n 256: 255 registers): the last partial
  // wave is finished stream-K (the 128x256 tile at 4096^3 is 512 tiles for 132 SMs: 3.88 waves, the
  // SMs 96.6% busy; on the H100 0.83-0.90 -> 0.86-0.93 of cuBLAS). Not at two blocks an SM (its
  // second K walk spilled 32-88 bytes under 128 registers), not 16-bit (the generic WMMA text read
  // 0.240 -> 0.226 with it).
  if (tm > kMaxSplitRows) {
    plan.stream_k = text_is(p, "dtype", "f32") && tn >= 256;
    return plan;
  }
  // A split tile's sums meet in shared memory as floats (f32's too: they live in registers otherwise).
  const std::int64_t staging = tm * (tn + 4) * 4;
  if (staging > kMaxSharedBytes)
    return {tile_text(p) + ": its sums (" + std::to_string(staging) + " bytes as floats) do not fit shared memory"};
  plan.shared_bytes = std::max(plan.shared_bytes, staging);
  plan.max_split_k = kMaxSplitK;
  return plan;
}

// block_sparse_matmul on gemm.cu: a tile is tile_m rows by one block column, walking the blocks
// of that column (forward) or row (backward_input) one block of K a slice; backward_weight's tile
// is one block of dW, walking M in 32-row slices. Slices: X and dY row-major; W's blocks row-major
// (forward) or read transposed (backward_input); X read transposed (backward_weight).
TilePlan block_sparse_cuda_plan(const ParamSet& p) {
  const std::int64_t bs = int_param(p, "block_size");
  if (bs != 16 && bs != 32 && bs != 64) return {"block_size = " + std::to_string(bs) + ": 16, 32 or 64"};
  if (text_is(p, "op", "backward_weight")) return cuda_tile_plan(p, false, true, bs, bs, 32);
  return cuda_tile_plan(p, true, text_is(p, "op", "forward"), int_param(p, "tile_m"), bs, bs);
}

// gemm_sm90.cu's shared memory: `stages` slots of a_rows + b_rows rows of 64 16-bit elements
// (128-byte rows), 1024 bytes of slack to align them to the swizzle's period, the two consumers'
// staging areas of staged_rows rows of 64 each (block-sparse's transposed tiles), then the full and
// empty mbarriers of each stage and the two consumers' turn barriers.
std::int64_t sm90_shared_bytes(std::int64_t stages, std::int64_t a_rows, std::int64_t b_rows, std::int64_t staged_rows = 0) {
  return stages * (a_rows + b_rows) * 64 * 2 + 2 * staged_rows * 64 * 2 + 1024 + 16 * stages + 16;
}

// kernel_sources/gemm_sm90.cu's block_sparse_matmul: 64-wide blocks (128-byte rows). forward and
// backward_input: tiles of tile_m rows (64, 128, 256: wgmma's N) by one block column, two consumer
// warpgroups taking them in turn (one block an SM), each staging its finished tile (tile_m x 64)
// in shared memory on its way to C; backward_weight: one consumer, its tile a block of dW, two
// blocks an SM where shared memory fits twice.
TilePlan block_sparse_sm90a_plan(const ParamSet& p) {
  const std::int64_t bs = int_param(p, "block_size"), stages = int_param(p, "stages");
  if (bs != 64) return {"block_size = " + std::to_string(bs) + ": cuda-sm90a takes 64 (the others run on 'cuda')"};
  if (stages < 2 || stages > 8) return {"stages = " + std::to_string(stages) + ": 2 to 8 on cuda-sm90a"};
  if (text_is(p, "op", "backward_weight")) {
    const std::int64_t shared = sm90_shared_bytes(stages, 64, 64);
    return {"", 256, shared, 64, 64, 64, 2 * shared <= kMaxSharedBytes ? 2 : 1};
  }
  const std::int64_t tm = int_param(p, "tile_m");
  if (tm != 64 && tm != 128 && tm != 256) return {"tile_m = " + std::to_string(tm) + ": 64, 128 or 256 on cuda-sm90a"};
  const std::int64_t shared = sm90_shared_bytes(stages, 64, tm, tm);
  if (shared > kMaxSharedBytes)
    return {"tile_m = " + std::to_string(tm) + " x " + std::to_string(stages) + " stages needs " + std::to_string(shared) +
            " bytes of shared memory; at most " + std::to_string(kMaxSharedBytes)};
  return {"", 384, shared, tm, 64, 64, 1};
}

TilePlan block_sparse_cpu_plan(const ParamSet& p) {
  const std::int64_t bs = int_param(p, "block_size");
  if (bs != 16 && bs != 32 && bs != 64) return {"block_size = " + std::to_string(bs) + ": 16, 32 or 64"};
  return {"", 0, 0, int_param(p, "tile_m"), bs, bs};
}

// kernel_sources/gemm_sm90.cu: a producer warpgroup loads A and B tiles (64 elements of K, or 64 of M
// or N for a transposed operand, in 128-byte swizzled rows) through tensor maps; tile_m / 64 consumer warpgroups each multiply 64 rows by
// the whole tile_n with wgmma.
TilePlan gemm_sm90a_plan(const ParamSet& p) {
  const std::int64_t tm = int_param(p, "tile_m"), tn = int_param(p, "tile_n"), tk = int_param(p, "tile_k");
  const std::int64_t stages = int_param(p, "stages");
  if (tk != 64) return {tile_text(p) + ": tile_k must be 64 (128-byte swizzled rows) on cuda-sm90a"};
  if (tm != 64 && tm != 128) return {tile_text(p) + ": tile_m must be 64 or 128 on cuda-sm90a (one warpgroup per 64 rows)"};
  if (tn % 64 || tn < 64) return {tile_text(p) + ": tile_n must be 64, 128, 192 or 256 on cuda-sm90a"};
  if (stages < 2 || stages > 8) return {"stages = " + std::to_string(stages) + ": 2 to 8 on cuda-sm90a"};
  const std::int64_t cluster = cluster_of(p);
  if (cluster != 1 && cluster != 2) return {"cluster_m = " + std::to_string(cluster) + ": 1 or 2 on cuda-sm90a"};
  const std::int64_t shared = sm90_shared_bytes(stages, tm, tn);  // tk is 64 (checked above)
  // Two blocks an SM for 64-wide tiles (few accumulators) where their shared memory fits twice
  // (not in clusters: the text takes those one an SM).
  const bool two = cluster == 1 && tn <= 64 && 2 * shared <= kMaxSharedBytes;
  TilePlan plan{"", static_cast<int>(128 * (tm / 64 + 1)), shared, tm, tn, tk, two ? 2 : 1, static_cast<int>(cluster)};
  if (plan.shared_bytes > kMaxSharedBytes)
    return {tile_text(p) + " x " + std::to_string(stages) + " stages needs " + std::to_string(plan.shared_bytes) +
            " bytes of shared memory; at most " + std::to_string(kMaxSharedBytes)};
  return plan;
}

// The Hopper text (gemm_sm90.cu) as an implementation of a tiled kernel: sm_90a, f16 and bf16,
// loads through tensor maps.
Implementation hopper_impl(GpuLayout layout, TilePlan (*plan)(const ParamSet&), std::string note) {
  Implementation i;
  i.name = "cuda-sm90a";
  i.backend = Backend::Cuda;
  i.min_capability = i.max_capability = 90;
  i.arch_suffix = "a";
  i.priority = 1;
  i.file = "gemm_sm90.cu";
  i.dtypes = {DType::f16, DType::bf16};
  i.layout = layout;
  i.layout.tensor_maps = true;
  i.tile_plan = plan;
  i.note = std::move(note);
  return i;
}

std::vector<Implementation> gemm_impls() {
  Implementation cpu = cpu_impl("gemm.cpp");
  cpu.version = 2;  // v2: tile params of 0 take the defaults; rows as work items
  cpu.layout = {Kind::Tile, 256, 4, 1, 4, 64, 256, 1};
  cpu.tile_plan = gemm_cpu_plan;
  cpu.note = "host CPU, all cores; a tile_m x tile_n block of C in vector registers";
  Implementation cuda = cuda_generic("gemm.cu", {Kind::Tile, 256, 4, 1, 128, 128, 32, 3}, "");
  cuda.min_capability = 80;  // cp.async, bf16 WMMA
  cuda.tile_plan = gemm_cuda_plan;
  // f32 defaults to 128x256 (8 x 16 a thread): on the H100 0.69 of cuBLAS against 0.64 for 128x128
  // (bench/results/2026-11-23-h100-gemm.md)
  cuda.tile_defaults = [layout = cuda.layout](const ParamSet& p) {
    GpuLayout l = layout;
    if (text_is(p, "dtype", "f32")) l.tile_n = 256;
    return l;
  };
  cuda.note = "any layout; WMMA tensor cores (f16, bf16), 8x8 or 8x16 a thread (f32); cp.async stages";
  return {std::move(cpu), std::move(cuda),
          hopper_impl({Kind::Tile, 384, 4, 1, 128, 256, 64, 4}, gemm_sm90a_plan,
                      "Hopper: wgmma, TMA loads, a producer warpgroup, persistent; any layout")};
}

std::vector<Implementation> block_sparse_impls() {
  Implementation cpu = cpu_impl("block_sparse.cpp");
  cpu.layout = {Kind::Tile, 256, 4, 1, 16, 64, 64, 1};
  cpu.tile_plan = block_sparse_cpu_plan;
  cpu.note = "host CPU, all cores; only the blocks present";
  Implementation cuda = cuda_generic("gemm.cu", {Kind::Tile, 256, 4, 1, 128, 64, 64, 3}, "");
  cuda.min_capability = 80;
  cuda.tile_plan = block_sparse_cuda_plan;
  // 16-bit 32-wide blocks default to 256-row tiles (4 warps of 64 x 32): on the H100, bf16 4096^3 at
  // 50/75/90% sparsity, three alternated runs, 4-11% faster than 128 rows for forward and
  // backward_input (64 rows: 10-15% slower); backward_weight's tile is one block of dW either way.
  cuda.tile_defaults = [layout = cuda.layout](const ParamSet& p) {
    GpuLayout l = layout;
    if (!text_is(p, "dtype", "f32") && int_param(p, "block_size") == 32) l.tile_m = 256;
    return l;
  };
  cuda.note = "gemm.cu's tiles walking only the blocks present (WMMA f16/bf16, SIMT f32)";
  return {std::move(cpu), std::move(cuda),
          hopper_impl({Kind::Tile, 384, 4, 1, 256, 64, 64, 4}, block_sparse_sm90a_plan,
                      "Hopper, 64-wide blocks: gemm_sm90.cu's wgmma + TMA pipeline walking only the blocks present")};
}

std::vector<KernelDef> shipped_kernels() {
  const GpuLayout elementwise{Kind::Elementwise, 256, 1};
  // At most 256 threads a row: at hidden 16384 (bf16) this was 9-13% faster on the H100 than 512.
  const GpuLayout block_per_row{Kind::BlockPerRow, 256, 4};
  Implementation rms_sm90;
  rms_sm90.name = "cuda-sm90";
  rms_sm90.backend = Backend::Cuda;
  rms_sm90.min_capability = rms_sm90.max_capability = 90;
  rms_sm90.priority = 1;
  rms_sm90.version = 2;  // v2: rms_norm.cu's text (JITK_IMPLEMENTATION_CUDA_SM90), with the fusion chains
  rms_sm90.file = "rms_norm.cu";
  rms_sm90.dtypes = kGpuTypes;
  rms_sm90.layout = {Kind::BlockPerRow, 1024, 8};
  rms_sm90.note = "Hopper: twice the row per thread (half the threads to reduce over), streaming loads of x";
  // With a residual-add prologue it measured 0.85 of copy against the generic text's 0.99 (H100,
  // bf16, hidden 2048..8192): chains go to the generic text.
  rms_sm90.fusion = false;
  const char* row = "one block per row, row in registers";

  return {
      {"saxpy", "y = a * x + y", {dtype_param()},
       generic_impls("saxpy.cpp", "saxpy.cu", elementwise, "one 16-byte pack per thread")},
      {"silu_and_mul", "out = silu(x[:, :hidden]) * x[:, hidden:]",
       {dtype_param(), hidden_param(), prologue_param(), epilogue_param()},
       generic_impls("gated_activation.cpp", "gated_activation.cu", elementwise, "one 16-byte pack per thread")},
      {"rms_norm", "y = x / sqrt(mean(x^2) + eps) * weight, per row",
       {dtype_param(), hidden_param(), prologue_param(), epilogue_param()},
       [&] {
         auto impls = generic_impls("rms_norm.cpp", "rms_norm.cu", block_per_row, row);
         impls.push_back(rms_sm90);
         return impls;
       }()},
      {"softmax", "numerically stable softmax of each row", {dtype_param(), hidden_param()},
       generic_impls("softmax.cpp", "softmax.cu", block_per_row, row)},
      {"log_softmax", "y = x - max - log(sum(exp(x - max))), per row", {dtype_param(), hidden_param()},
       generic_impls("softmax.cpp", "softmax.cu", block_per_row, row)},
      {"layer_norm", "y = (x - mean) / sqrt(var + eps) * weight + bias, per row",
       {dtype_param(), hidden_param(), prologue_param(), epilogue_param()},
       generic_impls("layer_norm.cpp", "layer_norm.cu", block_per_row, row)},
      {"gelu_and_mul", "out = gelu(x[:, :hidden]) * x[:, hidden:] (erf, or the tanh approximation)",
       {dtype_param(), hidden_param(), {"approximate", {"none", "tanh"}, 0, 0, "gelu as erf (none) or tanh, as PyTorch's"},
        prologue_param(), epilogue_param()},
       generic_impls("gated_activation.cpp", "gated_activation.cu", elementwise, "one 16-byte pack per thread")},
      {"adamw", "one AdamW step in place: float master weights and moments (double for f64), dtype gradients",
       {{"dtype", {"f32", "f64", "f16", "bf16"}, 0, 0, "the gradients' element type"}},
       generic_impls("adamw.cpp", "adamw.cu", elementwise, "one 16-byte pack of gradients per thread")},
      {"gemm", "C = alpha * A B + beta * C (A, B row- or column-major), tiles as parameters, tuned per device",
       {{"dtype", {"f32", "f64", "f16", "bf16"}, 0, 0, "element type (accumulation in float, double for f64)"},
        {"a_layout", {"row", "col"}, 0, 0, "A (M x K) row-major (lda >= K) or column-major (lda >= M)"},
        {"b_layout", {"row", "col"}, 0, 0, "B (K x N) row-major (ldb >= N) or column-major (ldb >= K)"},
        {"tile_m", {}, 0, 256, "rows of C a tile covers (0: the implementation's default)", false, std::int64_t{0}},
        {"tile_n", {}, 0, 256, "columns of C a tile covers (0: the default)", false, std::int64_t{0}},
        {"tile_k", {}, 0, 4096, "length of the K slices a tile walks (0: the default)", false, std::int64_t{0}},
        {"stages", {}, 0, 8, "GPU: K slices in flight in shared memory (0: the default)", false, std::int64_t{0}},
        {"cluster_m", {}, 0, 2,
         "Hopper (cuda-sm90a): blocks a cluster along M, sharing B's slices by TMA multicast: 1 or 2 (0: the default, 1)",
         false, std::int64_t{0}},
        epilogue_param()},
       gemm_impls()},
      {"block_sparse_matmul", "X W, dY W^T, or X^T dY on W's support, W block-sparse (BlockMask)",
       {{"dtype", {"f32", "f64", "f16", "bf16"}, 0, 0, "element type (accumulation in float, double for f64)"},
        {"op", {"forward", "backward_input", "backward_weight"}, 0, 0, "the product: X W, dY W^T, or X^T dY on W's support"},
        {"block_size", {}, 16, 64, "the mask's blocks: 16, 32 or 64"},
        {"tile_m", {}, 0, 256, "GPU: rows of X a block covers (0: the default)", false, std::int64_t{0}},
        {"stages", {}, 0, 8, "GPU: blocks of W in flight in shared memory (0: the default)", false, std::int64_t{0}}},
       block_sparse_impls()},
      {"fused_add_rms_norm", "residual += x, then y = rms_norm(residual) * weight, per row (one pass)",
       {dtype_param(), hidden_param()},
       // (cuda-sm90's text serves this kernel too, but measured slower here: 0.79 vs 0.95 of copy at 8192)
       generic_impls("rms_norm.cpp", "rms_norm.cu", {Kind::BlockPerRow, 256, 4, 2}, "one block per row, row and residual in registers")},
  };
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::islower(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string spec_problem(const KernelDef& def) {
  if (!is_identifier(def.name)) return "a kernel name is lower case letters, digits and _ (got '" + def.name + "')";
  std::vector<std::string> seen;
  for (const auto& p : def.params) {
    if (!is_identifier(p.name)) return "parameter name '" + p.name + "' is not lower case letters, digits and _";
    if (std::find(seen.begin(), seen.end(), p.name) != seen.end()) return "parameter '" + p.name + "' is declared twice";
    seen.push_back(p.name);
    for (const auto& c : p.choices)
      if (c.empty() || !std::all_of(c.begin(), c.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }))
        return "parameter '" + p.name + "' has choice '" + c + "': choices are letters, digits and _";
    if (p.chain && !p.choices.empty()) return "parameter '" + p.name + "' is a chain: it has no choices";
    if (!p.is_text() && !p.chain && p.min > p.max) return "parameter '" + p.name + "' has min > max";
    if (p.fallback) {  // a value the parameter itself allows
      const auto* n = std::get_if<std::int64_t>(&*p.fallback);
      const auto* t = std::get_if<std::string>(&*p.fallback);
      const bool ok = p.chain ? false
                      : p.is_text() ? t && std::find(p.choices.begin(), p.choices.end(), *t) != p.choices.end()
                                    : n && *n >= p.min && *n <= p.max;
      if (!ok) return "parameter '" + p.name + "' has a fallback it does not allow (" + p.allowed() + ")";
    }
  }
  if (def.implementations.empty()) return "it has no implementation";
  seen.clear();
  for (const auto& i : def.implementations) {
    if (auto problem = implementation_problem(i); !problem.empty()) return problem;
    if (std::find(seen.begin(), seen.end(), i.name) != seen.end()) return "implementation '" + i.name + "' is declared twice";
    seen.push_back(i.name);
  }
  return "";
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::atomic<const Registry*>& current_registry() {
  static std::atomic<const Registry*> current = [] {
    auto* r = new Registry;
    r->kernels = shipped_kernels();
    r->shipped = r->kernels.size();
    return r;
  }();
  return current;
}

// Publishes `next` (made from the current view under the registry mutex). Old views stay alive.
void publish(std::unique_ptr<Registry> next) {
  static std::vector<std::unique_ptr<const Registry>> retired;
  const Registry* old = current_registry().load();
  next->generation = old->generation + 1;
  retired.emplace_back(old);
  current_registry().store(next.release(), std::memory_order_release);
}

}  // namespace

const Registry& registry() { return *current_registry().load(std::memory_order_acquire); }
const std::vector<KernelDef>& kernel_catalog() { return registry().kernels; }

bool is_shipped_kernel(std::string_view name) {
  const Registry& r = registry();
  for (std::size_t i = 0; i < r.shipped; ++i)
    if (r.kernels[i].name == name) return true;
  return false;
}

std::string implementation_problem(const Implementation& i) {
  const std::string who = "implementation '" + i.name + "'";
  if (i.name.empty() || !std::all_of(i.name.begin(), i.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      }))
    return "an implementation name is letters, digits, '-', '_' and '.' (got '" + i.name + "')";
  if (i.file.empty()) return who + " names no file (the text's name, also what $JITK_KERNEL_DIR may override)";
  if (i.min_capability > i.max_capability) return who + ": capability range [" + std::to_string(i.min_capability) + ", " +
                                                  std::to_string(i.max_capability) + "] is empty";
  if (!i.inference && !i.training) return who + " suits no mode (neither inference nor training)";
  if (i.version < 1) return who + ": version must be >= 1";
  if (i.layout.kind == Kind::Tile) {
    const auto& l = i.layout;
    if (!i.tile_plan) return who + " has a tile layout but no tile plan";
    if (l.tile_m < 1 || l.tile_n < 1 || l.tile_k < 1 || l.stages < 1) return who + ": default tile sizes and stages must be >= 1";
  } else if (i.backend != Backend::Cpu) {
    const auto& l = i.layout;
    if (l.block < 32 || l.block > 1024 || l.block % 32 != 0)
      return who + ": block of " + std::to_string(l.block) + " threads; use a multiple of 32 in [32, 1024]";
    if (l.kind == Kind::BlockPerRow && (l.packs_per_thread < 1 || l.packs_per_thread > 32))
      return who + ": packs_per_thread must be in [1, 32]";
    if (l.kind == Kind::BlockPerRow && (l.row_arrays < 1 || l.row_arrays > 4)) return who + ": row_arrays must be in [1, 4]";
  }
  return "";
}

void add_kernel(KernelDef def) {
  std::lock_guard lock(registry_mutex());
  if (auto problem = spec_problem(def); !problem.empty())
    throw Error(ErrorCode::InvalidParams, "cannot register kernel '" + def.name + "': " + problem);
  const Registry& now = registry();
  for (const auto& k : now.kernels)
    if (k.name == def.name) throw Error(ErrorCode::InvalidParams, "cannot register kernel '" + def.name + "': the name is taken");
  auto next = std::make_unique<Registry>(now);
  next->kernels.push_back(std::move(def));
  publish(std::move(next));
}

void add_implementation(std::string_view kernel, Implementation impl) {
  std::lock_guard lock(registry_mutex());
  const KernelDef& def = find_kernel(kernel);
  const std::string what = "cannot add implementation '" + impl.name + "' to " + def.name + ": ";
  if (auto problem = implementation_problem(impl); !problem.empty()) throw Error(ErrorCode::InvalidParams, what + problem);
  for (const auto& i : def.implementations)
    if (i.name == impl.name) throw Error(ErrorCode::InvalidParams, what + "the name is taken");
  auto next = std::make_unique<Registry>(registry());
  for (auto& k : next->kernels)
    if (k.name == kernel) k.implementations.push_back(std::move(impl));
  publish(std::move(next));
}

const KernelDef& find_kernel(std::string_view name) {
  const auto& all = kernel_catalog();
  auto it = std::find_if(all.begin(), all.end(), [&](const KernelDef& d) { return d.name == name; });
  if (it != all.end()) return *it;
  std::vector<std::string> names;
  for (const auto& d : all) names.push_back(d.name);
  throw Error(ErrorCode::UnknownKernel,
              "unknown kernel '" + std::string(name) + "'; jitk has: " + join(names));
}

std::vector<std::string> dtypes_of(const KernelDef& def, const Implementation& impl) {
  std::vector<std::string> out;
  for (const auto& p : def.params)
    if (p.name == "dtype")
      for (const auto& c : p.choices)
        if (impl.dtypes.empty() ||
            std::any_of(impl.dtypes.begin(), impl.dtypes.end(), [&](DType t) { return dtype_name(t) == c; }))
          out.push_back(c);
  return out;
}

std::string params_problem(const Implementation& impl, const ParamSet& params) {
  if (!impl.fusion && (params.find("prologue") || params.find("epilogue")))
    return "takes no fusion chains (prologue, epilogue)";
  // No dtypes named: every type the backend's prelude can name (the CPU's has no 16-bit floats).
  const std::vector<DType>& dtypes = !impl.dtypes.empty() ? impl.dtypes : impl.backend == Backend::Cpu ? kCpuTypes : kGpuTypes;
  if (const auto* d = params.find("dtype")) {
    const auto& dtype = std::get<std::string>(*d);
    if (std::none_of(dtypes.begin(), dtypes.end(), [&](DType t) { return dtype_name(t) == dtype; })) {
      std::vector<std::string> names;
      for (DType t : dtypes) names.emplace_back(dtype_name(t));
      return "parameter 'dtype' = '" + dtype + "' is not supported; allowed: one of " + join(names);
    }
  }
  if (impl.layout.kind == Kind::Tile) {
    if (!impl.tile_plan) return "has a tile layout but no tile plan";
    if (std::string problem = tile_plan(impl, params).problem; !problem.empty()) return problem;
  }
  if (const auto* h = params.find("hidden");
      h && impl.backend != Backend::Cpu && impl.layout.kind != Kind::Elementwise && std::get<std::int64_t>(*h) > kGpuMaxHidden)
    return "parameter 'hidden' = " + std::to_string(std::get<std::int64_t>(*h)) +
           " is out of range; allowed: an integer in [1, " + std::to_string(kGpuMaxHidden) + "]";
  return "";
}

ParamSet resolve_tile(const Implementation& impl, const ParamSet& params) {
  if (impl.layout.kind != Kind::Tile) return params;
  ParamSet out = params;
  const GpuLayout l = impl.tile_defaults ? impl.tile_defaults(params) : impl.layout;
  for (auto [name, fallback] : {std::pair<const char*, int>{"tile_m", l.tile_m}, {"tile_n", l.tile_n}, {"tile_k", l.tile_k}, {"stages", l.stages},
                                {"cluster_m", 1}}) {
    const auto* v = params.find(name);
    if (v && std::get<std::int64_t>(*v) == 0) out.set(name, std::int64_t{fallback});
  }
  return out;
}

TilePlan tile_plan(const Implementation& impl, const ParamSet& params) {
  if (!impl.tile_plan) return {"has no tile plan"};
  return impl.tile_plan(resolve_tile(impl, params));
}

const Implementation& generic_implementation(const KernelDef& def, Backend backend) {
  for (const auto& i : def.implementations)
    if (i.backend == backend && i.generic) return i;
  throw Error(ErrorCode::BackendUnavailable,
              def.name + " has no generic implementation for " + std::string(backend_name(backend)));
}

ParamSet validate_params(const KernelDef& def, const ParamSet& given, Backend backend) {
  ParamSet out = validate_params(def, given);
  std::string first_problem;
  bool any = false;
  for (const auto& impl : def.implementations) {
    if (impl.backend != backend) continue;
    any = true;
    std::string problem = params_problem(impl, out);
    if (problem.empty()) return out;
    if (first_problem.empty() || impl.generic) first_problem = problem;
  }
  if (!any)
    throw Error(ErrorCode::BackendUnavailable,
                def.name + " has no implementation for " + std::string(backend_name(backend)));
  throw Error(ErrorCode::InvalidParams, def.name + " on " + std::string(backend_name(backend)) + ": " + first_problem);
}

ParamSet validate_params(const KernelDef& def, const ParamSet& given) {
  auto fail = [&](const std::string& what) {
    throw Error(ErrorCode::InvalidParams, def.name + ": " + what);
  };
  for (const auto& [name, value] : given.values()) {
    bool known = std::any_of(def.params.begin(), def.params.end(), [&](const ParamSpec& s) { return s.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& s : def.params) names.push_back(s.name);
      fail("unknown parameter '" + name + "'; it takes: " + join(names));
    }
  }
  ParamSet out;
  for (const auto& spec : def.params) {
    const ParamValue* v = given.find(spec.name);
    if (spec.chain) {
      if (!v) continue;
      const auto* text = std::get_if<std::string>(v);
      if (!text) fail("parameter '" + spec.name + "' = " + std::to_string(std::get<std::int64_t>(*v)) +
                      " is a number; allowed: " + spec.allowed());
      Chain chain;
      try {
        chain = Chain::parse(*text);
      } catch (const Error& e) {
        fail("parameter '" + spec.name + "': " + e.what());
      }
      if (!chain.empty()) out.set(spec.name, chain.to_string());
      continue;
    }
    if (!v && spec.fallback) v = &*spec.fallback;
    if (!v) fail("missing parameter '" + spec.name + "' (" + spec.doc + "): give " + spec.allowed());
    if (spec.is_text()) {
      const auto* s = std::get_if<std::string>(v);
      if (!s) fail("parameter '" + spec.name + "' = " + std::to_string(std::get<std::int64_t>(*v)) +
                   " is a number; allowed: " + spec.allowed());
      if (std::find(spec.choices.begin(), spec.choices.end(), *s) == spec.choices.end())
        fail("parameter '" + spec.name + "' = '" + *s + "' is not supported; allowed: " + spec.allowed());
    } else {
      const auto* n = std::get_if<std::int64_t>(v);
      if (!n) fail("parameter '" + spec.name + "' = '" + std::get<std::string>(*v) +
                   "' is text; allowed: " + spec.allowed());
      if (*n < spec.min || *n > spec.max)
        fail("parameter '" + spec.name + "' = " + std::to_string(*n) + " is out of range; allowed: " + spec.allowed());
    }
    out.set(spec.name, *v);
  }
  return out;
}

}  // namespace jit::detail
