// gemm: C = alpha * A B + beta * C with an epilogue chain (its descriptor).
#pragma once
#include "jit/kernels/common.hpp"

namespace jit::kernels {

// C = alpha * A B + beta * C, then the epilogue chain on C's elements (jit/chain.hpp; its tensors
// share C's shape and ldc, its vectors have N values). C is row-major M x N (ldc >= N); A is
// M x K and B is K x N, each row- or column-major. beta == 0 does not read C. Products
// accumulate in float (double for f64). The tile sizes and pipeline stages are specialization
// parameters; 0 takes the chosen implementation's default (CPU 4x64x256; CUDA 128x128x32, 3
// stages; Hopper's wgmma path 128x256x64, 4 stages), and get_tuned picks them per device.
// cluster_m = 2 runs Hopper's blocks in pairs along M that share B's slices (TMA multicast).
//
// gate = silu, gelu or gelu_tanh makes it a gated gemm (an MLP's gate/up projection with its
// activation): B's N columns come in groups of 2 * kGateBlock = 16, each kGateBlock (8) gate
// columns then the kGateBlock up columns they pair with, and C is M x N / 2 (ldc >= N / 2):
//   C[r, j] = act(g) * u + beta * C[r, j],  g = alpha (A B)[r, 16 (j / 8) + j % 8],  u = alpha (A B)[r, 16 (j / 8) + 8 + j % 8]
// then the epilogue chain on C's elements (its tensors M x N / 2 with ldc, its vectors N / 2
// values). g and u are rounded to the dtype first, as the unfused pair (gemm, then silu_and_mul over
// rows of 16) would store them. N must be a multiple of 16. A weight [K, 2 H] of gate columns then
// up columns (gate | up) is laid out this way by moving column 8 b + i of each half (b < H / 8,
// i < 8) to 16 b + i (gate) and 16 b + 8 + i (up); docs/gemm.md shows it.
//
// A QKV projection's epilogue (rope = neox and/or page_size > 0; head_dim > 0): C is the output of
// a QKV projection, [m tokens, (heads + 2 kv_heads) x head_dim] (n must be that), each row a
// token's q heads, then its k heads, then its v heads (head_dim elements each).
// - rope = neox rotates every q and k head of C as rotary_embedding (style neox, source theta,
//   rotary_dim = head_dim) would after the plain gemm: in each head, pair j = (j, j + head_dim / 2)
//   turns by the angle positions[r] * inv_freq[j], inv_freq[j] = 1 / theta^(2j / head_dim), in float;
//   the pair's two values are alpha (A B) rounded to the dtype first (as the plain gemm stores them).
//   v's columns are left as they are.
// - page_size > 0 also writes each row's (rotated) k heads and its v heads into k_cache and v_cache
//   [num_pages, page_size, kv_heads, head_dim] at the row's slot slots[r] (= page * page_size + offset
//   in the page), as kv_cache_append does; a slot outside [0, num_pages * page_size) writes nothing
//   (-1: padding). positions and slots live in device memory on a GPU, so the host cannot check their
//   values: any position rotates (theta computes any angle), and a bad slot writes nothing.
// C is written as without the epilogue (rotated where rope is on). beta must be 0 and there is no
// epilogue chain; gate must be none. On CUDA only cuda-sm90a (Hopper) has it: a tile holds whole heads
// (tile_n a multiple of head_dim, head_dim a multiple of 16; others refused), and a launch its copy
// engine cannot take (A's or B's rows not 16-byte aligned) is refused, not run by the generic text.
struct Gemm {
  static constexpr const char* name = "gemm";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names =
      "m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue = {}, heads = 0, kv_heads = 0, positions = nullptr, theta = 10000, "
      "slots = nullptr, num_pages = 0, k_cache = {}, v_cache = {}";
  enum class Layout : std::uint8_t { RowMajor, ColMajor };
  enum class Gate : std::uint8_t { None, Silu, Gelu, GeluTanh };
  enum class Rope : std::uint8_t { None, NeoX };
  static constexpr std::int64_t kGateBlock = 8;  // gate columns a group of B's (then as many up columns)
  static const char* gate_name(Gate g) {
    switch (g) {
      case Gate::Silu: return "silu";
      case Gate::Gelu: return "gelu";
      case Gate::GeluTanh: return "gelu_tanh";
      default: return "none";
    }
  }
  struct Params {
    DType dtype = DType::f32;
    Layout a_layout = Layout::RowMajor;
    Layout b_layout = Layout::RowMajor;
    std::int64_t tile_m = 0;
    std::int64_t tile_n = 0;
    std::int64_t tile_k = 0;
    std::int64_t stages = 0;
    std::int64_t cluster_m = 0;
    Gate gate = Gate::None;
    Rope rope = Rope::None;       // a QKV projection's rotary embedding (above)
    std::int64_t head_dim = 0;    // the QKV epilogue's heads (0: none)
    std::int64_t page_size = 0;   // > 0: k and v also written into a paged KV cache of pages this many tokens
    Chain epilogue = {};
    auto fields() const {
      return std::tie(dtype, a_layout, b_layout, tile_m, tile_n, tile_k, stages, cluster_m, gate, rope, head_dim, page_size, epilogue);
    }
    bool qkv() const { return rope != Rope::None || page_size > 0; }
  };
  struct Args {
    std::int64_t m, n, k;
    double alpha;
    ConstPtr a;
    std::int64_t lda;
    ConstPtr b;
    std::int64_t ldb;
    double beta;
    MutPtr c;
    std::int64_t ldc;
    Operands epilogue = {};
    // The QKV epilogue's (rope = neox or page_size > 0; left at their defaults otherwise):
    std::int64_t heads = 0, kv_heads = 0;      // C's row: heads q heads, kv_heads k heads, kv_heads v heads
    const std::int64_t* positions = nullptr;   // [m] (rope): row r's position
    double theta = 10000;                      // rope: inv_freq[j] = 1 / theta^(2j / head_dim)
    const std::int64_t* slots = nullptr;       // [m] (page_size): row r's slot in the cache
    std::int64_t num_pages = 0;                // the caches' pages
    MutPtr k_cache = {}, v_cache = {};         // [num_pages, page_size, kv_heads, head_dim] each
  };
  static const char* rope_name(Rope r) { return r == Rope::NeoX ? "neox" : "none"; }
  static ParamSet to_params(const Params& p) {
    auto layout = [](Layout l) { return std::string(l == Layout::ColMajor ? "col" : "row"); };
    ParamSet s{{"dtype", std::string(dtype_name(p.dtype))}, {"a_layout", layout(p.a_layout)}, {"b_layout", layout(p.b_layout)},
               {"tile_m", p.tile_m}, {"tile_n", p.tile_n}, {"tile_k", p.tile_k}, {"stages", p.stages},
               {"cluster_m", p.cluster_m}, {"gate", std::string(gate_name(p.gate))}, {"rope", std::string(rope_name(p.rope))},
               {"head_dim", p.head_dim}, {"page_size", p.page_size}};
    add_chains(s, {}, p.epilogue);
    return s;
  }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    for (auto [what, v] : {std::pair{"m", a.m}, {"n", a.n}, {"k", a.k}}) jit::detail::check_non_negative(name, what, v);
    auto fail = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, std::string(name) + ": " + what); };
    auto check_ld = [&](const char* ld, std::int64_t value, std::int64_t least, const char* why) {
      if (value < std::max<std::int64_t>(1, least))
        fail(std::string(ld) + " = " + std::to_string(value) + " is less than " + why + " (" + std::to_string(least) + ")");
    };
    const bool a_row = p.a_layout == Layout::RowMajor, b_row = p.b_layout == Layout::RowMajor;
    const bool gated = p.gate != Gate::None;
    if (gated && a.n % (2 * kGateBlock) != 0)
      fail("n = " + std::to_string(a.n) + ": gate = " + gate_name(p.gate) + " takes B's columns in groups of " +
           std::to_string(2 * kGateBlock) + " (" + std::to_string(kGateBlock) + " gate, then " + std::to_string(kGateBlock) +
           " up), so n must be a multiple of " + std::to_string(2 * kGateBlock));
    const std::int64_t n_out = gated ? a.n / 2 : a.n;  // C's columns
    check_ld("lda", a.lda, a_row ? a.k : a.m, a_row ? "k (A row-major)" : "m (A column-major)");
    check_ld("ldb", a.ldb, b_row ? a.n : a.k, b_row ? "n (B row-major)" : "k (B column-major)");
    check_ld("ldc", a.ldc, n_out, gated ? "n / 2 (C of a gated gemm)" : "n");
    // Each matrix's rows (outer of them, inner elements, ld apart) end within a 64-bit byte offset;
    // so then does every product of the sizes below (m x n_out <= C's span).
    for (auto [what, outer, inner, ld] : {std::tuple{"A", a_row ? a.m : a.k, a_row ? a.k : a.m, a.lda},
                                          {"B", b_row ? a.k : a.n, b_row ? a.n : a.k, a.ldb}, {"C", a.m, n_out, a.ldc}})
      if (!detail::rows_fit_offsets(outer, inner, ld, p.dtype))
        fail(std::string(what) + ": " + std::to_string(outer) + " rows " + std::to_string(ld) +
             " elements apart span more bytes than a 64-bit offset holds (m = " + std::to_string(a.m) + ", n = " + std::to_string(a.n) +
             ", k = " + std::to_string(a.k) + ")");
    const std::int64_t work = a.m * n_out;  // nothing is read or written when C is empty
    const bool reads = a.m > 0 && a.n > 0 && a.k > 0;  // A and B are read only then
    detail::check_tensors(name, p.dtype, reads ? 1 : 0, {{"a", a.a}, {"b", a.b}});
    detail::check_tensors(name, p.dtype, work, {{"c", a.c}});
    const DType scalar = detail::scalar_type(p.dtype);
    out.add_i64(a.m);
    out.add_i64(a.n);
    out.add_i64(a.k);
    out.add_scalar(a.alpha, scalar);
    const int a_arg = out.size();
    out.add_pointer(a.a.data);
    out.add_i64(a.lda);
    const int b_arg = out.size();
    out.add_pointer(a.b.data);
    out.add_i64(a.ldb);
    out.add_scalar(a.beta, scalar);
    out.add_pointer(a.c.data);
    out.add_i64(a.ldc);
    jit::detail::pack_chain(name, "epilogue", p.epilogue, a.epilogue, p.dtype, scalar, work, out);
    if (p.qkv()) pack_qkv(p, a, out);
    else if (a.heads || a.kv_heads || a.positions || a.slots || a.num_pages || a.k_cache.data || a.v_cache.data)
      fail("heads, kv_heads, positions, slots, num_pages, k_cache or v_cache given, but the gemm has no QKV epilogue (specialize "
           "with rope = neox and/or page_size > 0, and head_dim)");
    out.work_items = work == 0 ? 0 : a.m;  // rows (the CPU splits them), by columns (GPU tiles: of B, N even gated)
    out.work_columns = a.n;
    out.work_depth = a.k;
    out.min_grain = 16;
    // The operands as rows of their contiguous dimension, for kernels that load through the copy engine.
    const std::int64_t e = static_cast<std::int64_t>(dtype_size(p.dtype));
    out.matrices[0] = {a.a.data, p.dtype, a_row ? a.k : a.m, a_row ? a.m : a.k, a.lda * e, a_row, a_arg};
    out.matrices[1] = {a.b.data, p.dtype, b_row ? a.n : a.k, b_row ? a.k : a.n, a.ldb * e, !b_row, b_arg};
    out.matrix_count = 2;
  }

  // The QKV epilogue's arguments, checked (before any launch: a bad one never writes out of bounds),
  // then packed after the chain's: positions, theta, slots, k_cache, v_cache, heads, kv_heads, num_pages.
  static void pack_qkv(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    auto fail = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, std::string(name) + ": " + what); };
    const bool rope = p.rope != Rope::None, cache = p.page_size > 0;
    const std::string what = std::string(rope ? "rope = neox" : "") + (rope && cache ? " and " : "") +
                             (cache ? "page_size = " + std::to_string(p.page_size) : "");
    if (p.head_dim < 1) fail(what + " needs head_dim > 0");  // the family's check refuses it first
    jit::detail::check_non_negative(name, "heads", a.heads);
    jit::detail::check_non_negative(name, "kv_heads", a.kv_heads);
    jit::detail::check_non_negative(name, "num_pages", a.num_pages);
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    if (a.heads > kMax / 4 / p.head_dim || a.kv_heads > kMax / 4 / p.head_dim)
      fail("heads = " + std::to_string(a.heads) + ", kv_heads = " + std::to_string(a.kv_heads) + " of head_dim = " +
           std::to_string(p.head_dim) + " pass a 64-bit count");
    const std::int64_t width = (a.heads + 2 * a.kv_heads) * p.head_dim;
    if (a.n != width)
      fail("n = " + std::to_string(a.n) + ": " + what + " takes C as a QKV projection's output, n = (heads + 2 kv_heads) x head_dim = (" +
           std::to_string(a.heads) + " + 2 x " + std::to_string(a.kv_heads) + ") x " + std::to_string(p.head_dim) + " = " +
           std::to_string(width));
    if (a.beta != 0) fail("beta = " + std::to_string(a.beta) + ": " + what + " writes C as alpha A B (beta must be 0)");
    if (rope) {
      jit::detail::check_not_null(name, "positions", a.positions, a.m > 0 && a.heads + a.kv_heads > 0 ? 1 : 0);
      if (!(a.theta > 0) || !std::isfinite(a.theta)) fail("theta must be a finite number > 0, got " + std::to_string(a.theta));
    } else if (a.positions) {
      fail("positions is given but rope = none (specialize with rope = neox to rotate q and k)");
    }
    const std::int64_t kv_rows = a.m > 0 && a.kv_heads > 0 ? 1 : 0;  // whether any row writes the cache
    if (cache) {
      if (a.num_pages > kMax / p.page_size / std::max<std::int64_t>(a.kv_heads, 1) / p.head_dim)
        fail("num_pages = " + std::to_string(a.num_pages) + " pages of " + std::to_string(p.page_size) + " x " +
             std::to_string(a.kv_heads) + " x " + std::to_string(p.head_dim) + " elements pass a 64-bit count");
      jit::detail::check_not_null(name, "slots", a.slots, kv_rows);
      for (auto [arg, ptr] : {std::pair{"k_cache", a.k_cache}, {"v_cache", a.v_cache}}) {
        if (ptr.data) jit::detail::check_dtype(name, arg, p.dtype, ptr.dtype);
        jit::detail::check_not_null(name, arg, ptr.data, kv_rows);
      }
      const std::int64_t e = static_cast<std::int64_t>(dtype_size(p.dtype));
      // spans in bytes, saturating (a hostile m or ldc must not wrap the overlap checks)
      auto times = [](std::int64_t x, std::int64_t y) {
        std::int64_t r;
        return __builtin_mul_overflow(x, y, &r) ? kMax : r;
      };
      auto plus = [](std::int64_t x, std::int64_t y) {
        std::int64_t r;
        return __builtin_add_overflow(x, y, &r) ? kMax : r;
      };
      const std::int64_t cache_bytes = times(times(times(a.num_pages, p.page_size), a.kv_heads * p.head_dim), e);
      const std::int64_t c_bytes = a.m > 0 && a.n > 0 ? times(plus(times(a.m - 1, a.ldc), a.n), e) : 0;
      auto overlap = [](const void* x, std::int64_t xn, const void* y, std::int64_t yn) {
        const auto u = reinterpret_cast<std::uintptr_t>(x), v = reinterpret_cast<std::uintptr_t>(y);
        const auto end = [](std::uintptr_t at, std::int64_t n) {  // one past the span, saturating at the address space's end
          const auto un = static_cast<std::uintptr_t>(n);
          return at > std::numeric_limits<std::uintptr_t>::max() - un ? std::numeric_limits<std::uintptr_t>::max() : at + un;
        };
        return xn > 0 && yn > 0 && u < end(v, yn) && v < end(u, xn);
      };
      if (kv_rows > 0 && overlap(a.k_cache.data, cache_bytes, a.v_cache.data, cache_bytes))
        fail("k_cache and v_cache overlap (each is num_pages x page_size x kv_heads x head_dim = " + std::to_string(cache_bytes / e) +
             " elements)");
      for (auto [arg, ptr] : {std::pair{"k_cache", a.k_cache.data}, {"v_cache", a.v_cache.data}})
        if (kv_rows > 0 && overlap(ptr, cache_bytes, a.c.data, c_bytes))
          fail(std::string(arg) + " overlaps C (the gemm's output, which the epilogue reads k and v from)");
    } else if (a.slots || a.num_pages || a.k_cache.data || a.v_cache.data) {
      fail("slots, num_pages, k_cache or v_cache given but page_size = 0 (specialize with page_size > 0 to write the KV cache)");
    }
    out.add_pointer(a.positions);
    out.add_scalar(a.theta, detail::scalar_type(p.dtype));
    out.add_pointer(a.slots);
    out.add_pointer(a.k_cache.data);
    out.add_pointer(a.v_cache.data);
    out.add_i64(a.heads);
    out.add_i64(a.kv_heads);
    out.add_i64(a.num_pages);
  }

  // ---- autotuning (jit/tuning.hpp: jit::get_tuned<Gemm>(params, {m, n, k})) ----
  struct Shape {
    std::int64_t m, n, k;
  };
  // The typed params of validated ones, and a shape from a manifest's numbers (`jitk warm --tune`).
  static Params from_params(const ParamSet& s) {
    auto text = [&](const char* name) { return std::get<std::string>(*s.find(name)); };
    auto number = [&](const char* name) { return std::get<std::int64_t>(*s.find(name)); };
    Params p;
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16})
      if (dtype_name(t) == text("dtype")) p.dtype = t;
    p.a_layout = text("a_layout") == "col" ? Layout::ColMajor : Layout::RowMajor;
    p.b_layout = text("b_layout") == "col" ? Layout::ColMajor : Layout::RowMajor;
    p.tile_m = number("tile_m"), p.tile_n = number("tile_n"), p.tile_k = number("tile_k"), p.stages = number("stages");
    if (s.find("cluster_m")) p.cluster_m = number("cluster_m");
    if (s.find("gate"))
      for (Gate g : {Gate::None, Gate::Silu, Gate::Gelu, Gate::GeluTanh})
        if (text("gate") == gate_name(g)) p.gate = g;
    if (s.find("rope") && text("rope") == "neox") p.rope = Rope::NeoX;
    if (s.find("head_dim")) p.head_dim = number("head_dim");
    if (s.find("page_size")) p.page_size = number("page_size");
    if (s.find("epilogue")) p.epilogue = Chain::parse(text("epilogue"));
    return p;
  }
  static constexpr const char* shape_names = "m, n, k";
  static Shape shape_of(const std::vector<std::int64_t>& v) {
    if (v.size() != 3 || v[0] < 1 || v[1] < 1 || v[2] < 1)
      throw Error(ErrorCode::InvalidArgument, "gemm: a shape is three positive numbers (m, n, k)");
    return {v[0], v[1], v[2]};
  }
  static std::vector<std::int64_t> numbers_of(const Shape& s) { return {s.m, s.n, s.k}; }
  // Shapes share a decision when each of m, n, k rounds up to the same power of two (at least 16).
  static std::string shape_class(const Shape& s) {
    auto up = [](std::int64_t v) {
      std::int64_t p = 16;
      while (p < v) p *= 2;
      return std::to_string(p);
    };
    return "m<=" + up(s.m) + ",n<=" + up(s.n) + ",k<=" + up(s.k);
  }
  // The base tile, then tiles of other shapes for the target's implementations (a candidate no
  // implementation takes is skipped while tuning, with a note).
  static std::vector<Params> candidates(const Params& base, const Target& target) {
    using Tile = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;  // m, n, k, stages
    std::vector<Tile> tiles;
    if (target.backend == Backend::Cpu) {
      tiles = {{4, 64, 256, 0}, {2, 128, 256, 0}, {8, 32, 256, 0}, {4, 128, 128, 0}, {8, 64, 512, 0}, {1, 256, 256, 0}, {16, 64, 128, 0}};
    } else {
      tiles = {{128, 128, 32, 3}, {128, 128, 32, 4}, {128, 256, 32, 3}, {256, 128, 32, 3}, {64, 128, 32, 4},
               {128, 64, 32, 4},  {64, 64, 64, 4},   {128, 128, 64, 3}, {64, 64, 32, 6},
               {16, 128, 64, 4},  {16, 64, 64, 4}};  // the last two: decode's few rows (the launch splits their K on sm_90)
      if (base.dtype != DType::f32)  // Hopper's wgmma path (tile_k 64); on other GPUs no implementation takes them
        for (Tile t : {Tile{128, 256, 64, 4}, {128, 256, 64, 3}, {128, 128, 64, 5}, {128, 192, 64, 4}, {64, 256, 64, 5}, {128, 64, 64, 8},
                       {64, 128, 64, 6}, {64, 64, 64, 8}})  // the last two: more blocks when M is small (decode)
          tiles.push_back(t);
    }
    std::vector<Params> out = {base};
    for (auto [tm, tn, tk, st] : tiles) {
      Params p = base;
      p.tile_m = tm, p.tile_n = tn, p.tile_k = tk, p.stages = st;
      if (p.fields() != base.fields()) out.push_back(p);
    }
    // Hopper's two largest tiles in clusters of two (B multicast): on the H100 at 4096^3 within the
    // noise of one block (0.88-0.91 of cuBLAS either way), so the tuner decides per shape.
    if (target.backend != Backend::Cpu && base.dtype != DType::f32)
      for (Tile t : {Tile{128, 256, 64, 4}, {128, 256, 64, 3}}) {
        Params p = base;
        p.tile_m = std::get<0>(t), p.tile_n = std::get<1>(t), p.tile_k = std::get<2>(t), p.stages = std::get<3>(t), p.cluster_m = 2;
        if (p.fields() != base.fields()) out.push_back(p);
      }
    return out;
  }
  // Random inputs of the shape where the target runs (host or device memory), and the epilogue's operands.
  class TuningData {
   public:
    TuningData(const Params& p, const Shape& s, const Target& target) : p_(p), s_(s), target_(target) {
      a_ = make((p.a_layout == Layout::RowMajor ? s.m : s.k) * lda(), true);
      b_ = make((p.b_layout == Layout::RowMajor ? s.k : s.n) * ldb(), true);
      c_ = make(s.m * s.n, false);  // gated: C is half that
      for (int i = 0; i < p.epilogue.size(); ++i) {
        const OperandKind k = step_operand(p.epilogue[i]);
        if (k == OperandKind::None) continue;
        if (k == OperandKind::Scalar) {
          epilogue_.add(1.0);
          continue;
        }
        extra_.push_back(make(k == OperandKind::Vector ? s.n : s.m * s.n, true));  // gated: more than C's shape needs
        if (k == OperandKind::Output) epilogue_.add(MutPtr(extra_.back().data(), p.dtype));
        else epilogue_.add(ConstPtr(extra_.back().data(), p.dtype));
      }
    }
    void run(const Kernel<Gemm>& k) {
      const DType t = p_.dtype;
      k.launch({s_.m, s_.n, s_.k, 1.0, ConstPtr(a_.data(), t), lda(), ConstPtr(b_.data(), t), ldb(), 0.0, MutPtr(c_.data(), t),
                p_.gate != Gate::None ? s_.n / 2 : s_.n, epilogue_});
    }

   private:
    // Leading dimensions rounded up to 16 bytes, as a program's would be (an unaligned one would time
    // another implementation than the shape's usual, on Hopper).
    std::int64_t round16(std::int64_t v) const {
      const auto per = static_cast<std::int64_t>(16 / dtype_size(p_.dtype));
      return (v + per - 1) / per * per;
    }
    std::int64_t lda() const { return round16(p_.a_layout == Layout::RowMajor ? s_.k : s_.m); }
    std::int64_t ldb() const { return round16(p_.b_layout == Layout::RowMajor ? s_.n : s_.k); }
    // `count` elements (at least one) on the host or the device; filled with small values, not
    // zeros (they can run faster), when `fill`.
    class Buffer {
     public:
      Buffer(std::vector<unsigned char> host, const Target& t) : host_(std::move(host)) {
        if (t.backend == Backend::Cuda) device_ = std::make_shared<cuda::DeviceArray<unsigned char>>(host_, t.device);
      }
      void* data() { return device_ ? static_cast<void*>(device_->data()) : host_.data(); }

     private:
      std::vector<unsigned char> host_;
      std::shared_ptr<cuda::DeviceArray<unsigned char>> device_;
    };
    Buffer make(std::int64_t count, bool fill) const {
      const std::size_t n = static_cast<std::size_t>(std::max<std::int64_t>(1, count)), e = dtype_size(p_.dtype);
      std::vector<unsigned char> host(n * e, 0);
      for (std::size_t i = 0; fill && i < n; ++i) {
        const double x = static_cast<double>((i * 2654435761u) % 1000) / 1000.0 - 0.5;
        switch (p_.dtype) {
          case DType::f64: reinterpret_cast<double*>(host.data())[i] = x; break;
          case DType::f32: reinterpret_cast<float*>(host.data())[i] = static_cast<float>(x); break;
          case DType::f16: reinterpret_cast<std::uint16_t*>(host.data())[i] = to_half(static_cast<float>(x)).bits; break;
          case DType::bf16: reinterpret_cast<std::uint16_t*>(host.data())[i] = to_bfloat16(static_cast<float>(x)).bits; break;
        }
      }
      return Buffer(std::move(host), target_);
    }
    Params p_;
    Shape s_;
    Target target_;
    Buffer a_ = Buffer({}, {}), b_ = Buffer({}, {}), c_ = Buffer({}, {});
    std::vector<Buffer> extra_;
    Operands epilogue_;
  };
  static TuningData tuning_data(const Params& p, const Shape& s, const Target& target) {
    if (target.backend != Backend::Cpu && target.backend != Backend::Cuda)
      throw Error(ErrorCode::BackendUnavailable, "gemm: tuning on " + target.to_string() + ": gemm runs on the CPU and CUDA");
    // a QKV epilogue's arguments (positions, slots, caches) are the program's: tune the plain gemm
    if (p.qkv())
      throw Error(ErrorCode::InvalidArgument, std::string("gemm: tuning a gemm with the QKV epilogue (rope = ") + rope_name(p.rope) +
                                                  ", page_size = " + std::to_string(p.page_size) +
                                                  ") is not supported: tune the plain gemm of the shape, then give the QKV gemm tiles that "
                                                  "hold whole heads");
    // a shape no candidate could run: refused here, before every candidate is timed and left out
    if (p.gate != Gate::None && s.n % (2 * kGateBlock) != 0)
      throw Error(ErrorCode::InvalidArgument, "gemm: tuning for n = " + std::to_string(s.n) + ": gate = " + gate_name(p.gate) +
                                                  " needs n a multiple of " + std::to_string(2 * kGateBlock));
    return TuningData(p, s, target);
  }
};

}  // namespace jit::kernels
