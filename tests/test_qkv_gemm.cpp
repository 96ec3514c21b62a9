// gemm's QKV epilogue (rope = neox, page_size > 0; include/jit/kernels/gemm.hpp) on the CPU against a
// float64 reference: C = alpha A B of a QKV projection, its q and k heads rotated by each row's
// position, the (rotated) k and the v heads written into a paged KV cache at each row's slot.
// Odd sizes, every layout, tiles that do and do not hold a head, C padded and poisoned (NaN) and the
// caches poisoned (every element not written must keep its value), slots that are padding (-1) or
// outside the cache; then what it refuses, before running, with C and the caches untouched. The GPU
// cases are in test_gpu_gemm.cpp; where CUDA takes it is decided on the host (below).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "../examples/reference_kernels.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "jit/tuning.hpp"
#include "qkv_gemm_support.hpp"
#include "runtime/get_kernel.hpp"
#include "test_support.hpp"

namespace kernels = jit::kernels;
namespace ref = jitk_reference;
using Catch::Matchers::Contains;
using Layout = kernels::Gemm::Layout;
using Rope = kernels::Gemm::Rope;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

using jitk_test::qkv::Expected;
using jitk_test::qkv::Shape;
using jitk_test::qkv::reference;
using jitk_test::qkv::worst;

struct Run {
  Layout la = Layout::RowMajor, lb = Layout::RowMajor;
  bool rope = true;
  std::int64_t page_size = 4, tile_m = 0, tile_n = 0, tile_k = 0;
  double alpha = 1, theta = 10000;
};

// One fused gemm on the CPU against the reference: the worst error over C (with its padding) and both caches.
template <class T> double qkv_error(const Shape& s, const Run& run) {
  const std::int64_t n = (s.heads + 2 * s.kv_heads) * s.head_dim;
  const std::int64_t lda = (run.la == Layout::RowMajor ? s.k : s.m) + s.pad, ldb = (run.lb == Layout::RowMajor ? n : s.k) + s.pad;
  const std::int64_t ldc = n + s.pad;
  const auto one = [](std::int64_t v) { return static_cast<std::size_t>(std::max<std::int64_t>(1, v)); };
  auto make = [](std::size_t count) { return jitk_test::random_values<T>(count, -1, 1, [](double v) { return static_cast<T>(v); }); };
  const auto a = make(one((run.la == Layout::RowMajor ? s.m : s.k) * lda));
  const auto b = make(one((run.lb == Layout::RowMajor ? s.k : n) * ldb));
  const T nan = std::numeric_limits<T>::quiet_NaN();
  // C poisoned (beta = 0 must not read it); its padding keeps its values (random, checked)
  auto c = make(one(s.m * ldc));
  for (std::int64_t r = 0; r < s.m; ++r)
    for (std::int64_t j = 0; j < n; ++j) c[static_cast<std::size_t>(r * ldc + j)] = nan;
  // positions: small, large (where float angles lose digits), repeated; slots: a permutation of the
  // cache's slots, with padding (-1) and slots past the cache mixed in
  const std::int64_t page = std::max<std::int64_t>(1, run.page_size), num_pages = (s.m + page - 1) / page + 1;
  std::vector<std::int64_t> positions(one(s.m)), slots(one(s.m));
  for (std::int64_t r = 0; r < s.m; ++r) {
    positions[r] = r % 3 == 0 ? r : r % 3 == 1 ? 4093 + 7 * r : 0;
    slots[r] = r % 5 == 4 ? -1 : r % 7 == 6 ? num_pages * page + r : num_pages * page - 1 - r;  // each slot once (two rows racing: either)
  }
  // caches poisoned with a value, not NaN (a slot's row the launch must not write keeps it)
  const std::size_t cache_size = static_cast<std::size_t>(num_pages * page * s.kv_heads * s.head_dim);
  std::vector<T> k_cache(one(cache_size), T(7)), v_cache(one(cache_size), T(-7));
  std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end()), c64(c.begin(), c.end());
  std::vector<double> k64(k_cache.begin(), k_cache.end()), v64(v_cache.begin(), v_cache.end());
  const auto e = reference(s, ldc, a64, run.la, lda, b64, run.lb, ldb, run.alpha, run.rope, run.page_size, positions, run.theta, slots,
                           num_pages, c64, k64, v64, [](double v) { return static_cast<double>(static_cast<T>(v)); });
  kernels::Gemm::Params p{jit::dtype_of<T>(), run.la, run.lb, run.tile_m, run.tile_n, run.tile_k};
  p.rope = run.rope ? Rope::NeoX : Rope::None;
  p.head_dim = s.head_dim;
  p.page_size = run.page_size;
  kernels::Gemm::Args args{s.m, n, s.k, run.alpha, a.data(), lda, b.data(), ldb, 0.0, c.data(), ldc};
  args.heads = s.heads, args.kv_heads = s.kv_heads;
  if (run.rope) args.positions = positions.data(), args.theta = run.theta;
  if (run.page_size > 0) {
    args.slots = slots.data(), args.num_pages = num_pages;
    args.k_cache = k_cache.data(), args.v_cache = v_cache.data();
  }
  jit::get<kernels::Gemm>(p, jit::Target::cpu()).launch(args);
  auto wide = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
  const double on_c = worst(wide(c), e.c);
  if (run.page_size == 0) {
    for (T v : k_cache)
      if (v != T(7)) return INFINITY;
    return on_c;
  }
  return std::max({on_c, worst(wide(k_cache), e.k_cache), worst(wide(v_cache), e.v_cache)});
}

}  // namespace

TEMPLATE_TEST_CASE("gemm's QKV epilogue matches the float64 reference: rope and the KV-cache write, every layout, odd shapes and tiles",
                   "[kernels][gemm][qkv]", float, double) {
  // float: the angles are computed in float, as torch computes them (positions up to ~4300 lose ~2e-4 rad)
  const double tol = sizeof(TestType) == 8 ? 1e-10 : 2e-3;
  const Shape shapes[] = {{1, 1, 1, 1, 2, 0}, {7, 5, 3, 1, 8, 3}, {33, 67, 4, 2, 16, 1}, {20, 130, 2, 2, 6, 0}, {5, 9, 0, 1, 4, 2}};
  const std::int64_t tiles[][3] = {{0, 0, 0}, {3, 16, 7}, {1, 5, 1}};  // the default; tiles that split heads and rows
  for (const Shape& s : shapes)
    for (Layout la : {Layout::RowMajor, Layout::ColMajor})
      for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
        for (const auto& tile : tiles)
          for (int what = 0; what < 3; ++what) {  // rope and the cache, rope alone, the cache alone
            Run run;
            run.la = la, run.lb = lb, run.tile_m = tile[0], run.tile_n = tile[1], run.tile_k = tile[2];
            run.rope = what != 2, run.page_size = what == 1 ? 0 : 3;
            run.alpha = what == 0 ? 1 : -0.5, run.theta = what == 2 ? 10000 : 500000;
            INFO("m k heads kv_heads head_dim pad " << s.m << " " << s.k << " " << s.heads << " " << s.kv_heads << " " << s.head_dim
                                                    << " " << s.pad << " A " << int(la) << " B " << int(lb) << " tile " << tile[0] << "x"
                                                    << tile[1] << "x" << tile[2] << " rope " << run.rope << " page " << run.page_size);
            CHECK(qkv_error<TestType>(s, run) <= tol);
          }
}

TEST_CASE("gemm's QKV epilogue gives what the unfused kernels give: gemm, rotary_embedding, kv_cache_append", "[kernels][gemm][qkv]") {
  const std::int64_t m = 19, k = 40, heads = 4, kv_heads = 2, hd = 16, page = 4, num_pages = 6, n = (heads + 2 * kv_heads) * hd;
  auto make = [](std::size_t count) { return jitk_test::random_values<float>(count, -1, 1, [](double v) { return float(v); }); };
  const auto a = make(m * k), b = make(k * n);
  std::vector<std::int64_t> positions(m), slots(m);
  for (std::int64_t r = 0; r < m; ++r) positions[r] = 3 * r + 1, slots[r] = r == 5 ? -1 : (r * 5) % (num_pages * page);
  const std::size_t cache = num_pages * page * kv_heads * hd;
  std::vector<float> c1(m * n), k1(cache, 1.f), v1(cache, 2.f), c2(m * n), k2(cache, 1.f), v2(cache, 2.f);
  kernels::Gemm::Params p{jit::DType::f32};
  p.rope = Rope::NeoX, p.head_dim = hd, p.page_size = page;
  kernels::Gemm::Args fused{m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c1.data(), n};
  fused.heads = heads, fused.kv_heads = kv_heads, fused.positions = positions.data(), fused.theta = 10000;
  fused.slots = slots.data(), fused.num_pages = num_pages, fused.k_cache = k1.data(), fused.v_cache = v1.data();
  jit::get<kernels::Gemm>(p, jit::Target::cpu()).launch(fused);
  jit::get<kernels::Gemm>({jit::DType::f32}, jit::Target::cpu())(m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c2.data(), n);
  kernels::RotaryEmbedding::Args rot{m, heads, kv_heads, positions.data(), c2.data(), c2.data() + heads * hd, 10000};
  rot.q_stride = rot.k_stride = n;
  jit::get<kernels::RotaryEmbedding>({jit::DType::f32, hd, hd}, jit::Target::cpu()).launch(rot);
  kernels::KvCacheAppend::Args app{m, kv_heads, num_pages, c2.data() + heads * hd, c2.data() + (heads + kv_heads) * hd, slots.data(),
                                   k2.data(), v2.data(), n, n};
  jit::get<kernels::KvCacheAppend>({jit::DType::f32, hd, page}, jit::Target::cpu()).launch(app);
  for (std::size_t i = 0; i < c1.size(); ++i) REQUIRE(c1[i] == Approx(c2[i]).margin(1e-5));
  for (std::size_t i = 0; i < cache; ++i) REQUIRE((k1[i] == Approx(k2[i]).margin(1e-5) && v1[i] == Approx(v2[i]).margin(1e-5)));
}

TEST_CASE("gemm's QKV epilogue with no kv heads writes no cache: slots and the caches may be null, and a huge num_pages is refused",
          "[kernels][gemm][qkv]") {
  // (kv_heads = 0: every row's q heads only; the host asks for slots and caches only where a row writes one)
  const std::int64_t m = 3, k = 5, heads = 2, hd = 8, n = heads * hd;
  std::vector<float> a(m * k), b(k * n), c(m * n, std::numeric_limits<float>::quiet_NaN()), plain(m * n, 0.f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7 % 11)) / 11 - 0.5f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5 % 13)) / 13 - 0.5f;
  std::vector<std::int64_t> positions{0, 3, 1000};
  kernels::Gemm::Params p{jit::DType::f32};
  p.rope = Rope::NeoX, p.head_dim = hd, p.page_size = 4;
  kernels::Gemm::Args args{m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c.data(), n};
  args.heads = heads, args.kv_heads = 0, args.positions = positions.data();
  auto kernel = jit::get<kernels::Gemm>(p, jit::Target::cpu());
  REQUIRE_NOTHROW(kernel.launch(args));  // slots, k_cache and v_cache null: a crash before the fix
  // against the plain gemm, then rotary_embedding on its q heads
  jit::get<kernels::Gemm>({jit::DType::f32}, jit::Target::cpu()).launch({m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, plain.data(), n});
  kernels::RotaryEmbedding::Args rot{m, heads, 0, positions.data(), plain.data(), jit::MutPtr{}};
  jit::get<kernels::RotaryEmbedding>({jit::DType::f32, hd, hd, kernels::RotaryEmbedding::Style::NeoX,
                                      kernels::RotaryEmbedding::Source::Theta},
                                     jit::Target::cpu())
      .launch(rot);
  for (std::size_t i = 0; i < c.size(); ++i) REQUIRE(c[i] == Approx(plain[i]).margin(1e-5));
  args.num_pages = std::numeric_limits<std::int64_t>::max() / 2;  // num_pages x page_size would pass 64 bits
  CHECK_THROWS_WITH(kernel.launch(args), Contains("pass a 64-bit count"));
}

TEST_CASE("gemm's QKV epilogue refuses what it cannot do, before running, with C and the caches untouched", "[kernels][gemm][qkv]") {
  const std::int64_t m = 4, k = 8, heads = 2, kv_heads = 1, hd = 8, page = 4, num_pages = 2, n = (heads + 2 * kv_heads) * hd;
  std::vector<float> a(m * k, 1.f), b(k * n, 1.f), c(m * n + 64, 42.f), kc(num_pages * page * kv_heads * hd, 7.f),
      vc(kc.size(), 7.f);
  std::vector<std::int64_t> positions(m, 1), slots(m, 0);
  kernels::Gemm::Params p{jit::DType::f32};
  p.rope = Rope::NeoX, p.head_dim = hd, p.page_size = page;
  auto kernel = jit::get<kernels::Gemm>(p, jit::Target::cpu());
  auto good = [&] {
    kernels::Gemm::Args g{m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c.data(), n};
    g.heads = heads, g.kv_heads = kv_heads, g.positions = positions.data(), g.slots = slots.data(), g.num_pages = num_pages;
    g.k_cache = kc.data(), g.v_cache = vc.data();
    return g;
  };
  auto refused = [&](const kernels::Gemm::Args& args, const std::string& why) {
    INFO(why);
    CHECK_THROWS_WITH(kernel.launch(args), Contains(why));
  };
  auto args = good();
  args.heads = 3;  // n is not (heads + 2 kv_heads) x head_dim
  refused(args, "n = 32: rope = neox and page_size = 4 takes C as a QKV projection's output, n = (heads + 2 kv_heads) x head_dim");
  args = good(), args.kv_heads = 0;
  refused(args, "n = (heads + 2 kv_heads) x head_dim = (2 + 2 x 0) x 8 = 16");
  args = good(), args.heads = -1;
  refused(args, "heads");
  args = good(), args.heads = std::numeric_limits<std::int64_t>::max() / 2;
  refused(args, "pass a 64-bit count");
  args = good(), args.positions = nullptr;
  refused(args, "'positions' is null");
  args = good(), args.slots = nullptr;
  refused(args, "'slots' is null");
  args = good(), args.k_cache = jit::MutPtr{};
  refused(args, "'k_cache' is null");
  std::vector<double> wide(kc.size());
  args = good(), args.v_cache = wide.data();
  refused(args, "argument 'v_cache' is f64 but the kernel was specialized for f32");
  args = good(), args.theta = 0;
  refused(args, "theta must be a finite number > 0");
  args = good(), args.theta = std::nan("");
  refused(args, "theta must be a finite number > 0");
  args = good(), args.beta = 1;
  refused(args, "beta must be 0");
  args = good(), args.num_pages = -2;
  refused(args, "num_pages");
  args = good(), args.num_pages = std::numeric_limits<std::int64_t>::max() / 8;
  refused(args, "pass a 64-bit count");
  args = good(), args.v_cache = kc.data() + 3;  // overlapping k_cache
  refused(args, "k_cache and v_cache overlap");
  args = good(), args.k_cache = c.data() + n;  // inside C's rows
  refused(args, "k_cache overlaps C");
  args = good(), args.ldc = n - 1;
  refused(args, "ldc = 31 is less than n");
  for (float v : c) REQUIRE(v == 42.f);
  for (float v : kc) REQUIRE(v == 7.f);
  // the epilogue's arguments without its params, or the cache's without page_size
  kernels::Gemm::Args plain{m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c.data(), n};
  plain.positions = positions.data();
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>({jit::DType::f32}, jit::Target::cpu()).launch(plain), Contains("no QKV epilogue"));
  kernels::Gemm::Params rope_only = p;
  rope_only.page_size = 0;
  args = good();
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>(rope_only, jit::Target::cpu()).launch(args), Contains("but page_size = 0"));
  kernels::Gemm::Params cache_only = p;
  cache_only.rope = Rope::None;
  CHECK_THROWS_WITH(jit::get<kernels::Gemm>(cache_only, jit::Target::cpu()).launch(args), Contains("positions is given but rope = none"));
  for (float v : c) REQUIRE(v == 42.f);
  // m = 0: nothing read or written, null pointers fine
  kernels::Gemm::Args empty{0, n, k, 1.0, static_cast<const float*>(nullptr), k, b.data(), n, 0.0, static_cast<float*>(nullptr), n};
  empty.heads = heads, empty.kv_heads = kv_heads;
  kernel.launch(empty);
  // params it refuses together, by name (every implementation's check)
  auto bad = [](auto edit, const std::string& why) {
    kernels::Gemm::Params q{jit::DType::f32};
    q.rope = Rope::NeoX, q.head_dim = 8;
    edit(q);
    INFO(why);
    CHECK_THROWS_WITH(jit::get<kernels::Gemm>(q, jit::Target::cpu()), Contains(why));
  };
  bad([](auto& q) { q.head_dim = 0; }, "rope = neox needs head_dim > 0");
  bad([](auto& q) { q.head_dim = 7; }, "head_dim = 7 is odd");
  bad([](auto& q) { q.gate = kernels::Gemm::Gate::Silu; }, "a gemm takes one or the other");
  bad([](auto& q) { q.epilogue = "relu"; }, "takes no epilogue chain");
  bad([](auto& q) { q.rope = Rope::None; }, "head_dim = 8 is given but the gemm has no QKV epilogue");
  bad([](auto& q) { q.page_size = -1; }, "'page_size' = -1 is out of range");
}

TEST_CASE("gemm's QKV epilogue on CUDA: cuda-sm90a takes tiles that hold whole heads, the generic text refuses it by name",
          "[kernels][gemm][qkv]") {
  // decided on the host, no GPU needed
  const jit::Target hopper = jit::Target::parse("cuda:sm_90"), ampere = jit::Target::parse("cuda:sm_80");
  kernels::Gemm::Params p{jit::DType::bf16};
  p.rope = Rope::NeoX, p.head_dim = 128, p.page_size = 16;
  CHECK(jit::choose("gemm", kernels::Gemm::to_params(p), hopper).implementation == "cuda-sm90a");
  CHECK_THROWS_WITH(jit::choose("gemm", kernels::Gemm::to_params(p), ampere),
                    Contains("the QKV epilogue runs on cuda-sm90a") && Contains("the generic CUDA text has none"));
  const auto& def = jit::detail::find_kernel("gemm");
  const jit::Implementation* sm90a = nullptr;
  for (const auto& i : def.implementations)
    if (i.name == "cuda-sm90a") sm90a = &i;
  REQUIRE(sm90a != nullptr);
  struct Tile {
    std::int64_t m, n, stages, head_dim;
    bool taken;
  };
  for (const Tile& t : {Tile{128, 256, 4, 128, true}, Tile{64, 128, 8, 128, true}, Tile{64, 64, 8, 128, false}, Tile{128, 192, 4, 128, false},
                        Tile{128, 192, 4, 64, true}, Tile{64, 64, 8, 64, true}, Tile{128, 128, 4, 40, false}, Tile{128, 256, 4, 256, true},
                        Tile{128, 128, 4, 256, false}}) {
    kernels::Gemm::Params q = p;
    q.tile_m = t.m, q.tile_n = t.n, q.tile_k = 64, q.stages = t.stages, q.head_dim = t.head_dim;
    INFO("tile " << t.m << "x" << t.n << " head_dim " << t.head_dim);
    const std::string problem = jit::detail::params_problem(*sm90a, kernels::Gemm::to_params(q));
    if (t.taken) CHECK(problem.empty());
    else CHECK_THAT(problem, Contains("a tile holds whole heads"));
  }
  // gemms without the epilogue keep rope = none, head_dim = 0, page_size = 0 in their key
  CHECK_THAT(kernels::Gemm::to_params({jit::DType::bf16}).to_string(), Contains("rope=none,head_dim=0,page_size=0"));
}

TEST_CASE("a QKV gemm is not tuned (its tiles must hold whole heads): refused before timing anything", "[kernels][gemm][qkv][tuning]") {
  kernels::Gemm::Params p{jit::DType::f32};
  p.rope = Rope::NeoX, p.head_dim = 8, p.page_size = 4;
  CHECK_THROWS_WITH(jit::get_tuned<kernels::Gemm>(p, {16, 32, 8}, jit::Target::cpu()), Contains("QKV epilogue"));
}
