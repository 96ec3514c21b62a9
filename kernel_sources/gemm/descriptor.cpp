// gemm: the family descriptor (parameters, tile plans per implementation, tile defaults).
#include <array>

#include "kernel_sources/gemm/routes.hpp"
#include "kernel_sources/gemm/tile_plans.hpp"

namespace jit::detail {

namespace {

// A gated gemm (gate = silu, gelu, gelu_tanh; include/jit/kernels/gemm.hpp): B's columns in groups of
// 16, 8 gate then 8 up, which a tile must hold whole.
constexpr std::int64_t kGateGroup = 16;
bool gated(const ParamSet& p) { return p.find("gate") && !text_is(p, "gate", "none"); }
std::string gate_text(const ParamSet& p) { return "gate = " + std::get<std::string>(*p.find("gate")); }
std::string gate_tile_problem(const ParamSet& p, const char* where) {
  const std::int64_t tn = int_param(p, "tile_n");
  if (!gated(p) || tn % kGateGroup == 0) return "";
  return gate_text(p) + ": tile_n = " + std::to_string(tn) + " must be a multiple of 16 on " + where +
         " (a tile holds whole groups of 8 gate and 8 up columns)";
}

// A QKV projection's epilogue (rope = neox and/or page_size > 0; include/jit/kernels/gemm.hpp).
bool qkv(const ParamSet& p) {
  return (p.find("rope") && !text_is(p, "rope", "none")) || (p.find("page_size") && int_param(p, "page_size") > 0);
}
std::string qkv_text(const ParamSet& p) {
  const bool rope = p.find("rope") && !text_is(p, "rope", "none");
  const std::int64_t page = p.find("page_size") ? int_param(p, "page_size") : 0;
  return std::string(rope ? "rope = " + std::get<std::string>(*p.find("rope")) : "") + (rope && page > 0 ? ", " : "") +
         (page > 0 ? "page_size = " + std::to_string(page) : "");
}
// The params' cross-checks, every implementation's: the QKV epilogue needs its heads, and is alone.
std::string gemm_params_problem(const ParamSet& p) {
  const std::int64_t head_dim = p.find("head_dim") ? int_param(p, "head_dim") : 0;
  if (!qkv(p)) {
    if (head_dim != 0)
      return "head_dim = " + std::to_string(head_dim) + " is given but the gemm has no QKV epilogue (rope = neox and/or page_size > 0)";
    return "";
  }
  if (head_dim < 1) return qkv_text(p) + " needs head_dim > 0 (the elements of one q, k or v head of C's rows)";
  if (head_dim % 2) return qkv_text(p) + ": head_dim = " + std::to_string(head_dim) + " is odd (rope pairs j and j + head_dim / 2)";
  if (gated(p)) return qkv_text(p) + " and " + gate_text(p) + ": a gemm takes one or the other";
  if (p.find("epilogue")) return qkv_text(p) + " takes no epilogue chain (epilogue = " + std::get<std::string>(*p.find("epilogue")) + ")";
  return "";
}
// cuda-sm90a's: the rotation pairs a head's columns j and j + head_dim / 2 in a thread's registers,
// which hold every column of the tile in 8-column groups: a tile holds whole heads of whole groups.
std::string qkv_tile_problem_sm90(const ParamSet& p) {
  if (!qkv(p)) return "";
  const std::int64_t head_dim = int_param(p, "head_dim"), tn = int_param(p, "tile_n");
  if (head_dim % 16 || tn % head_dim)
    return qkv_text(p) + ": head_dim = " + std::to_string(head_dim) + ", tile_n = " + std::to_string(tn) +
           ": on cuda-sm90a head_dim must be a multiple of 16 and tile_n a multiple of head_dim (a tile holds whole heads)";
  return "";
}

TilePlan gemm_cpu_plan(const ParamSet& p) {
  if (std::string problem = no_cluster_problem(p); !problem.empty()) return {problem};
  if (std::string problem = gate_tile_problem(p, "the CPU"); !problem.empty()) return {problem};
  const std::int64_t tm = int_param(p, "tile_m"), tn = int_param(p, "tile_n");
  if (tm > 64) return {"tile_m = " + std::to_string(tm) + " is over 64 on the CPU"};
  if (tm * tn > 4096) return {"tile_m * tile_n = " + std::to_string(tm * tn) + " accumulators; at most 4096 on the CPU"};
  return {"", 0, 0, tm, tn, int_param(p, "tile_k")};
}


// Blocks that may split one gemm tile's K on sm_90 (a cluster; 8 is the portable cluster size),
// for tiles of at most kMaxSplitRows rows: decode's. Larger tiles are for M that fills the SMs, and
// the split's code cost f32's 128x256 tile 4-7% on the H100 (its registers went from 207 to 255).
constexpr int kMaxSplitK = 8;
constexpr std::int64_t kMaxSplitRows = 64;

TilePlan gemm_cuda_plan(const ParamSet& p) {
  if (std::string problem = no_cluster_problem(p); !problem.empty()) return {problem};
  if (qkv(p))
    return {qkv_text(p) + ": the QKV epilogue runs on cuda-sm90a (Hopper: f16/bf16, A's and B's rows 16-byte aligned) only; "
                          "the generic CUDA text has none (run the plain gemm, then rotary_embedding and kv_cache_append)"};
  // gated: the 16-bit tiles' epilogue reads C's staging in shared memory, where a gate column and its
  // up column meet; f32's sums stay in registers, a thread's columns far from their partners.
  if (gated(p) && !text_is(p, "dtype", "f16") && !text_is(p, "dtype", "bf16"))
    return {gate_text(p) + ": f16 and bf16 only on CUDA (dtype = " + std::get<std::string>(*p.find("dtype")) + ")"};
  if (std::string problem = gate_tile_problem(p, "CUDA"); !problem.empty()) return {problem};
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
    return shared_memory_refused(tile_text(p) + ": its sums (" + std::to_string(staging) + " bytes as floats) do not fit shared memory",
                                 staging);
  plan.shared_bytes = std::max(plan.shared_bytes, staging);
  plan.max_split_k = kMaxSplitK;
  return plan;
}
// kernel_sources/gemm/gemm_sm90.cu: a producer warpgroup loads A and B tiles (64 elements of K, or 64 of M
// or N for a transposed operand, in 128-byte swizzled rows) through tensor maps; tile_m / 64 consumer warpgroups each multiply 64 rows by
// the whole tile_n with wgmma.
TilePlan gemm_sm90a_plan(const ParamSet& p) {
  const std::int64_t tm = int_param(p, "tile_m"), tn = int_param(p, "tile_n"), tk = int_param(p, "tile_k");
  const std::int64_t stages = int_param(p, "stages");
  if (tk != 64) return {tile_text(p) + ": tile_k must be 64 (128-byte swizzled rows) on cuda-sm90a"};
  if (std::string problem = gate_tile_problem(p, "cuda-sm90a"); !problem.empty()) return {problem};  // tile_n is a multiple of 64: never
  if (std::string problem = qkv_tile_problem_sm90(p); !problem.empty()) return {problem};
  if (tm != 64 && tm != 128) return {tile_text(p) + ": tile_m must be 64 or 128 on cuda-sm90a (one warpgroup per 64 rows)"};
  if (tn % 64 || tn < 64) return {tile_text(p) + ": tile_n must be 64, 128, 192 or 256 on cuda-sm90a"};
  if (stages < 2 || stages > 8) return {"stages = " + std::to_string(stages) + ": 2 to 8 on cuda-sm90a"};
  const std::int64_t cluster = cluster_of(p);
  if (cluster != 1 && cluster != 2) return {"cluster_m = " + std::to_string(cluster) + ": 1 or 2 on cuda-sm90a"};
  // rope: the head's head_dim / 2 inverse frequencies as floats, after the barriers (gemm_sm90.cu, ROPE_BYTES)
  const std::int64_t rope = p.find("rope") && text_is(p, "rope", "neox") ? int_param(p, "head_dim") / 2 * 4 : 0;
  const std::int64_t base = sm90_shared_bytes(stages, tm, tn) + rope;  // tk is 64 (checked above)
  // Two blocks an SM for 64-wide tiles (few accumulators) where their shared memory fits twice
  // (not in clusters: the text takes those one an SM).
  const bool two = cluster == 1 && tn <= 64 && 2 * base <= kMaxSharedBytes;
  // Room for the epilogue's staging (each consumer's 64 x 64 piece of C, kSm90EpilogueRows rows)
  // where it fits beside the slots (and twice, for two blocks an SM); the text stages C through it
  // only when the plan gave it (JITK_SHARED_BYTES), storing from registers otherwise.
  const std::int64_t staged = sm90_shared_bytes(stages, tm, tn, kSm90EpilogueRows) + rope;
  const std::int64_t shared = staged * (two ? 2 : 1) <= kMaxSharedBytes ? staged : base;
  TilePlan plan{"", static_cast<int>(128 * (tm / 64 + 1)), shared, tm, tn, tk, two ? 2 : 1, static_cast<int>(cluster)};
  if (plan.shared_bytes > kMaxSharedBytes)
    return shared_memory_refused(tile_text(p) + " x " + std::to_string(stages) + " stages needs " +
                                     std::to_string(plan.shared_bytes) + " bytes of shared memory; at most " +
                                     std::to_string(kMaxSharedBytes),
                                 plan.shared_bytes);
  // 64-row tiles (decode's) not in M clusters: a launch whose tiles leave over half the SMs idle
  // splits each tile's K over a cluster (gemm_sm90.cu, SPLIT_K; the partial sums meet in the drained
  // slots, which always hold them: 64 x (tile_n + 8) floats against stages x (64 + tile_n) x 128 bytes).
  if (tm <= kMaxSplitRows && cluster == 1) plan.max_split_k = kMaxSplitK;
  return plan;
}

}  // namespace

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
  // units (kernel_sources/gemm/gemm.cu, SmemTranspose and stageable()).
  const auto region = [&](bool transposed, std::int64_t outer, std::int64_t slot) {
    const bool staged = f32 && transposed && threads % 32 == 0 && outer % 16 == 0 && tk % 32 == 0 &&
                        (outer / 16 * (tk / 32)) % (threads / 32) == 0;
    return staged ? (stages - 1) * outer * tk + 2 * slot : stages * slot;
  };
  const std::int64_t pipeline = (region(a_row, tm, a_tile) + region(!b_row, tn, b_tile)) * elem;
  const std::int64_t staging = f32 ? 0 : tm * (tn + 4) * 4;
  TilePlan plan{"", static_cast<int>(threads), std::max(pipeline, staging), tm, tn, tk};
  if (plan.shared_bytes > kMaxSharedBytes)
    return shared_memory_refused(tile + " x " + std::to_string(stages) + " stages needs " + std::to_string(plan.shared_bytes) +
                                     " bytes of shared memory; at most " + std::to_string(kMaxSharedBytes),
                                 plan.shared_bytes);
  return plan;
}

std::int64_t sm90_shared_bytes(std::int64_t stages, std::int64_t a_rows, std::int64_t b_rows, std::int64_t staged_rows) {
  return stages * (a_rows + b_rows) * 64 * 2 + 2 * staged_rows * 64 * 2 + 1024 + 16 * stages + 16;
}

Implementation hopper_impl(GpuLayout layout, TilePlan (*plan)(const ParamSet&), std::string note) {
  layout.tensor_maps = true;
  return sm90a_impl("gemm/gemm_sm90.cu", layout, plan, std::move(note));
}

std::vector<KernelSpec> gemm_family() {
  Implementation cpu = cpu_impl("gemm/gemm.cpp");
  cpu.version = 2;  // v2: tile params of 0 take the defaults; rows as work items
  cpu.layout = {Kind::Tile, 256, 4, 1, 4, 64, 256, 1};
  cpu.tile_plan = gemm_cpu_plan;
  cpu.note = "host CPU, all cores; a tile_m x tile_n block of C in vector registers";
  Implementation cuda = cuda_generic("gemm/gemm.cu", {Kind::Tile, 256, 4, 1, 128, 128, 32, 3}, "");
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
  cuda.launch_note = [](const ParamSet& p) {
    const AlongK along = packable_along_k("gemm", cuda_generic("gemm/gemm.cu", {}, ""), p);
    return along.a || along.b ? "packs " + operands_text(along) + " along M/N when large" : std::string();
  };
  std::vector<Implementation> impls = {
      std::move(cpu), std::move(cuda),
      hopper_impl({Kind::Tile, 384, 4, 1, 128, 256, 64, 4}, gemm_sm90a_plan,
                  "Hopper: wgmma, TMA loads, a producer warpgroup, persistent; any layout")};
  std::vector<KernelSpec> family = {
      {"gemm",
       "C = alpha * A B + beta * C (A, B row- or column-major), tiles as parameters, tuned per device; gated (gate = silu, gelu, "
       "gelu_tanh): C = act(gate columns) * up columns, an MLP's gate/up projection; a QKV projection's epilogue (rope = neox, "
       "page_size): q and k rotated, k and v written into a paged KV cache",
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
        {"gate", {"none", "silu", "gelu", "gelu_tanh"}, 0, 0,
         "a gated gemm: B's columns in groups of 8 gate then 8 up columns, C = act(gate) * up, N / 2 columns "
         "(f16/bf16 on CUDA)",
         false, std::string("none")},
        {"rope", {"none", "neox"}, 0, 0,
         "a QKV projection's epilogue: q's and k's heads of C rotated (neox, theta on the fly, rotary_dim = head_dim) "
         "by each row's position (CPU, cuda-sm90a)",
         false, std::string("none")},
        {"head_dim", {}, 0, kMaxHeadDim, "the QKV epilogue's heads: C's row is (heads + 2 kv_heads) x head_dim (0: no QKV epilogue)",
         false, std::int64_t{0}},
        {"page_size", {}, 0, 1024,
         "> 0: the QKV epilogue also writes k and v into a paged KV cache [pages, page_size, kv_heads, head_dim] at each row's slot",
         false, std::int64_t{0}},
        epilogue_param()},
       std::move(impls)}};
  family.back().params_check = gemm_params_problem;
  return family;
}


AlongK packable_along_k(std::string_view kernel, const Implementation& impl, const ParamSet& params) {
  if (kernel != "gemm" || impl.backend != Backend::Cuda || !impl.generic || !text_is(params, "dtype", "f32") || !at_default_tiles(params))
    return {};
  return {text_is(params, "a_layout", "row"), text_is(params, "b_layout", "col")};
}

std::string operands_text(AlongK operands) { return operands.a && operands.b ? "A and B" : operands.a ? "A" : operands.b ? "B" : ""; }

std::vector<PackRoute> pack_route_params(const ParamSet& params, AlongK along) {
  std::vector<PackRoute> out;
  for (int i = 0; i < 3; ++i) {
    const bool pack_a = i != 1, pack_b = i != 0;
    if ((pack_a && !along.a) || (pack_b && !along.b)) continue;
    PackRoute route{pack_a, pack_b, params};
    if (pack_a) route.params.set("a_layout", std::string("col"));
    if (pack_b) route.params.set("b_layout", std::string("row"));
    out.push_back(std::move(route));
  }
  return out;
}

// The generic text's few-rows tiles, m x n x k x stages; f32 walks K 32 at a time (its slices are
// twice the bytes).
constexpr std::int64_t kFewRowsTiles[][4] = {{16, 128, 64, 4}, {32, 128, 64, 4}, {64, 128, 64, 4}};
constexpr std::int64_t kFewRowsF32K = 32;

std::vector<FewRowsRoute> few_rows_params(const ParamSet& params) {
  if (!params.find("tile_m") || !params.find("tile_n") || !at_default_tiles(params)) return {};
  std::vector<FewRowsRoute> out;
  if (qkv(params)) {
    // The QKV epilogue: cuda-sm90a's own tiles only (the generic text has none), 64 rows by the
    // fewest columns that hold whole heads (64 x 128 for head_dim 128: its tiles split K when few),
    // for launches of up to 64 rows and at least 2048 columns whose default tiles leave SMs idle.
    const std::int64_t head_dim = int_param(params, "head_dim");
    std::int64_t tn = 64;
    while (tn <= 256 && tn % head_dim) tn += 64;
    if (tn > 256 || text_is(params, "dtype", "f32") || text_is(params, "dtype", "f64")) return {};
    FewRowsRoute wide{64, params, 32, 16384, true, true};
    for (int i = 0; i < 4; ++i) wide.params.set(kTileParams[i], std::int64_t{i == 0 ? 64 : i == 1 ? 256 : i == 2 ? 64 : 4});
    if (256 % head_dim == 0) out.push_back(std::move(wide));
    FewRowsRoute own{64, params, 0, 2048, true};  // of at least 2048 columns, as the plain gemm's own-tile routes
    for (int i = 0; i < 4; ++i) own.params.set(kTileParams[i], std::int64_t{i == 1 ? tn : i == 3 ? (tn > 128 ? 4 : 8) : 64});
    out.push_back(std::move(own));
    return out;
  }
  if (!text_is(params, "dtype", "f32") && !text_is(params, "dtype", "f64")) {
    // 33-64 rows of at least 16384 columns (an MLP's gate/up): cuda-sm90a's 64 x 256 x 64 tile, 4
    // stages, even where the default 128 x 256 tiles fill the SMs (half their rows empty at 64)
    FewRowsRoute wide{64, params, 32, 16384, true, true};
    for (int i = 0; i < 4; ++i) wide.params.set(kTileParams[i], std::int64_t{i == 0 ? 64 : i == 1 ? 256 : i == 2 ? 64 : 4});
    out.push_back(std::move(wide));
  }
  if (!text_is(params, "dtype", "f32") && !text_is(params, "dtype", "f64"))  // cuda-sm90a's own 64 x 64 tile (routes.hpp)
    for (auto [min_rows, max_rows, min_columns] : {std::array<std::int64_t, 3>{16, 32, 3072}, {32, 64, 2048}}) {
      FewRowsRoute route{max_rows, params, min_rows, min_columns, true};
      for (int i = 0; i < 4; ++i) route.params.set(kTileParams[i], std::int64_t{i == 3 ? 8 : 64});  // 64 x 64 x 64, 8 stages
      out.push_back(std::move(route));
    }
  for (const auto& tile : kFewRowsTiles) {
    FewRowsRoute route{tile[0], params};
    for (int i = 0; i < 4; ++i) route.params.set(kTileParams[i], tile[i]);
    if (text_is(params, "dtype", "f32")) route.params.set("tile_k", kFewRowsF32K);
    out.push_back(std::move(route));
  }
  return out;
}

}  // namespace jit::detail
