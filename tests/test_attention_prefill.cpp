// attention_prefill on the CPU against its float64 reference: varlen batches with an empty
// sequence and rows that see no key, every mask, GQA groups, strided inputs, poisoned outputs, f32
// and f64, head sizes a model uses and odd ones; and the params, arguments and offsets it refuses.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

#include "attention_support.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "jit/specializer.hpp"

using Catch::Matchers::Contains;
using jitk_test::Prefill;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

template <class T> std::vector<T> narrow(const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); }
template <class T> std::vector<double> widen(const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); }

// One launch on poisoned (NaN) o and lse, checked against the reference.
template <class T> void check_prefill(const jitk_test::AttnCase& c) {
  const auto in = jitk_test::attention_inputs(c, [](double x) { return double(T(x)); });
  const double scale = 1.0 / std::sqrt(double(c.head_dim));
  const auto expected = jitk_test::attention_expected(c, in, scale);
  auto kernel = jit::get<Prefill>({jit::dtype_of<T>(), c.head_dim, c.causal, c.window, c.group}, jit::Target::cpu());
  const auto q = narrow<T>(in.q), k = narrow<T>(in.k), v = narrow<T>(in.v);
  std::vector<T> o(expected.o.size(), std::numeric_limits<T>::quiet_NaN()), lse(expected.lse.size(), std::numeric_limits<T>::quiet_NaN());
  kernel.launch({static_cast<std::int64_t>(c.lens_q.size()), c.kv_heads, in.max_q, in.total_q, in.total_k, q.data(), k.data(), v.data(),
                 o.data(), lse.data(), in.cu_q.data(), in.cu_k.data(), scale, in.q_stride, in.kv_stride, in.kv_stride, in.cu_q.data(),
                 in.cu_k.data()});
  INFO(c.label());
  const double tol = sizeof(T) == 8 ? 1e-12 : 1e-5;
  CHECK(jitk_reference::relative_l2_error(widen(o), expected.o) <= tol);
  CHECK(jitk_test::lse_error(widen(lse), expected.lse) <= tol);
}

}  // namespace

TEMPLATE_TEST_CASE("attention_prefill matches the reference: masks, groups, strides, ragged batches", "[kernels][attention]", float,
                   double) {
  for (std::int64_t d : {64, 128})
    for (const auto& c : jitk_test::attention_cases(d)) check_prefill<TestType>(c);
}

TEST_CASE("attention_prefill takes any head size on the CPU, and multi-query attention", "[kernels][attention]") {
  for (std::int64_t d : {1, 5, 96, 256}) check_prefill<float>({{9, 20}, {30, 20}, 1, 2, d, true, 0, 3});
  check_prefill<float>({{33}, {33}, 1, 16, 32, true, 0, 0});  // MQA: 16 heads on one kv head
  check_prefill<double>({{200}, {1000}, 2, 2, 16, true, 100, 0});  // a long prefix, a window
}

TEST_CASE("attention_prefill leaves rows that see no key at o = 0 and lse = -inf", "[kernels][attention]") {
  // causal, 6 queries over 2 keys: queries 0..3 sit before the first key
  check_prefill<float>({{6}, {2}, 1, 1, 8, true, 0, 0});
  // every row sees nothing: no keys at all
  check_prefill<float>({{4, 3}, {0, 0}, 2, 2, 8, false, 0, 0});
}

TEST_CASE("attention_prefill refuses bad params before compiling", "[kernels][attention]") {
  auto get = [](std::int64_t head_dim, std::int64_t window, std::int64_t group) {
    jit::get<Prefill>({jit::DType::f32, head_dim, true, window, group}, jit::Target::cpu());
  };
  CHECK_THROWS_WITH(get(0, 0, 1), Contains("head_dim") && Contains("out of range"));
  CHECK_THROWS_WITH(get(4096, 0, 1), Contains("head_dim") && Contains("out of range"));
  CHECK_THROWS_WITH(get(64, -1, 1), Contains("window"));
  CHECK_THROWS_WITH(get(64, 0, 0), Contains("group") && Contains("out of range"));
  CHECK_THROWS_WITH(get(64, 0, 1000), Contains("group") && Contains("out of range"));
}

TEST_CASE("attention_prefill refuses bad arguments and offsets with messages that name them", "[kernels][attention]") {
  auto kernel = jit::get<Prefill>({jit::DType::f32, 8, true, 0, 2}, jit::Target::cpu());
  // 2 sequences of 3 and 4 queries over 5 and 4 keys; 2 kv heads, 4 query heads, head_dim 8
  std::vector<float> q(7 * 4 * 8, 0.5f), k(9 * 2 * 8, 0.25f), v(k), o(q.size()), lse(4 * 7);
  std::vector<double> lse_d(lse.size());
  std::vector<std::int32_t> cu_q = {0, 3, 7}, cu_k = {0, 5, 9};
  const auto launch = [&](Prefill::Args a) { kernel.launch(a); };
  const Prefill::Args good{2, 2, 4, 7, 9, q.data(), k.data(), v.data(), o.data(), lse.data(), cu_q.data(), cu_k.data(), 0.3, 0, 0, 0,
                           cu_q.data(), cu_k.data()};
  CHECK_NOTHROW(launch(good));
  auto with = [&](auto change) {
    Prefill::Args a = good;
    change(a);
    return a;
  };
  CHECK_THROWS_WITH(launch(with([](auto& a) { a.batch = -1; })), Contains("'batch' = -1 is negative"));
  CHECK_THROWS_WITH(launch(with([](auto& a) { a.scale = 0; })), Contains("scale"));
  CHECK_THROWS_WITH(launch(with([](auto& a) { a.scale = std::nan(""); })), Contains("scale"));
  CHECK_THROWS_WITH(launch(with([](auto& a) { a.q = jit::ConstPtr{}; })), Contains("'q' is null"));
  CHECK_THROWS_WITH(launch(with([&](auto& a) { a.lse = lse_d.data(); })), Contains("lse"));
  CHECK_THROWS_WITH(launch(with([](auto& a) { a.cu_seqlens_k = nullptr; })), Contains("cu_seqlens_k"));
  CHECK_THROWS_WITH(launch(with([](auto& a) { a.q_stride = 16; })), Contains("q_stride = 16"));
  // queries given but max_seqlen_q 0: the launch would cover no row and leave o as it was
  std::fill(o.begin(), o.end(), 42.0f);
  CHECK_THROWS_WITH(launch(with([](auto& a) { a.max_seqlen_q = 0; a.host_cu_seqlens_q = nullptr; })), Contains("max_seqlen_q = 0"));
  CHECK(o[0] == 42.0f);
  // the host's offsets: decreasing, not ending at the token count, longer than max_seqlen_q
  std::vector<std::int32_t> falling = {0, 5, 4}, short_end = {0, 3, 6}, long_first = {0, 6, 7}, late_start = {1, 3, 7};
  CHECK_THROWS_WITH(launch(with([&](auto& a) { a.host_cu_seqlens_k = falling.data(); })), Contains("must not decrease"));
  CHECK_THROWS_WITH(launch(with([&](auto& a) { a.host_cu_seqlens_q = short_end.data(); })), Contains("token count 7"));
  CHECK_THROWS_WITH(launch(with([&](auto& a) { a.host_cu_seqlens_q = long_first.data(); })), Contains("more than max_seqlen_q = 4"));
  CHECK_THROWS_WITH(launch(with([&](auto& a) { a.host_cu_seqlens_q = late_start.data(); })), Contains("first offset must be 0"));
}

TEST_CASE("attention_prefill never reads or writes past its buffers for offsets it could not check", "[kernels][attention]") {
  auto kernel = jit::get<Prefill>({jit::DType::f32, 8, false, 0, 1}, jit::Target::cpu());
  std::vector<float> q(4 * 8, 0.5f), k(4 * 8, 0.25f), v(k), o(q.size(), -7.0f);
  // sequence 0 is fine; sequence 1 claims keys past total_k, sequence 2 falling offsets: both skipped
  std::vector<std::int32_t> cu_q = {0, 2, 4, 3}, cu_k = {0, 2, 9, 4};
  kernel.launch({3, 1, 2, 4, 4, q.data(), k.data(), v.data(), o.data(), jit::MutPtr{}, cu_q.data(), cu_k.data(), 0.5});
  CHECK(o[0] == Approx(0.25f));                             // sequence 0 written (v is 0.25 everywhere)
  for (std::size_t i = 16; i < o.size(); ++i) CHECK(o[i] == -7.0f);  // sequences 1 and 2 left as they were
}

TEST_CASE("attention_prefill writes NaN rows for a sequence longer than max_seqlen_q, never a partial result", "[kernels][attention]") {
  auto kernel = jit::get<Prefill>({jit::DType::f32, 8, true, 0, 2}, jit::Target::cpu());
  // 2 kv heads, 4 query heads; sequence 0 has 3 queries, sequence 1 has 6 though max_seqlen_q says 4
  std::vector<float> q(9 * 4 * 8, 0.5f), k(9 * 2 * 8, 0.25f), v(k), o(q.size(), -7.0f), lse(4 * 9, -7.0f);
  std::vector<std::int32_t> cu_q = {0, 3, 9}, cu_k = {0, 3, 9};
  kernel.launch({2, 2, 4, 9, 9, q.data(), k.data(), v.data(), o.data(), lse.data(), cu_q.data(), cu_k.data(), 0.5});
  for (std::size_t i = 0; i < 3 * 4 * 8; ++i) CHECK(o[i] == Approx(0.25f));  // sequence 0 as usual
  for (std::size_t i = 3 * 4 * 8; i < o.size(); ++i) CHECK(std::isnan(o[i]));  // every row of sequence 1, past the grid too
  for (std::size_t h = 0; h < 4; ++h)
    for (std::size_t t = 3; t < 9; ++t) CHECK(std::isnan(lse[h * 9 + t]));
}

TEST_CASE("attention_prefill refuses counts past its int32 offsets, and takes a generous max_seqlen_q", "[kernels][attention]") {
  auto kernel = jit::get<Prefill>({jit::DType::f32, 8, true, 0, 2}, jit::Target::cpu());
  std::vector<float> q(3 * 4 * 8, 0.5f), k(3 * 2 * 8, 0.25f), v(k), o(q.size(), -7.0f);
  std::vector<std::int32_t> cu = {0, 3};
  const auto args = [&](std::int64_t kv_heads, std::int64_t max_q, std::int64_t total_q) {
    return Prefill::Args{1, kv_heads, max_q, total_q, 3, q.data(), k.data(), v.data(), o.data(), jit::MutPtr{}, cu.data(), cu.data(), 0.5};
  };
  CHECK_THROWS_WITH(kernel.launch(args(2, 3, std::int64_t{1} << 40)), Contains("total_q") && Contains("int32"));
  CHECK_THROWS_WITH(kernel.launch(args(std::int64_t{1} << 60, 3, 3)), Contains("kv_heads"));
  // a max_seqlen_q far past the tokens (a model's context length) covers what there is
  kernel.launch(args(2, std::int64_t{1} << 62, 3));
  for (float x : o) CHECK(x == Approx(0.25f));
}

// Decided on the host, no GPU needed: which Hopper text a get takes, what the copy engine's text
// (cuda-sm90a-tma) accepts, and the K and V matrices a launch hands the CUDA driver for its tensor maps.
TEST_CASE("attention_prefill on Hopper: cuda-sm90a-tma by default, cuda-sm90a by name or JITK_FA_TMA=0, with K and V described for its tensor maps",
          "[kernels][attention]") {
  const jit::Target hopper = jit::Target::parse("cuda:sm_90"), ampere = jit::Target::parse("cuda:sm_80");
  const Prefill::Params p{jit::DType::bf16, 128, true, 0, 4};
  const jit::ParamSet params = Prefill::to_params(p);
  const auto impls = jit::implementations_for("attention_prefill", hopper, params);
  CHECK(std::count(impls.begin(), impls.end(), "cuda-sm90a") == 1);
  CHECK(std::count(impls.begin(), impls.end(), "cuda-sm90a-tma") == 1);
  const auto on_ampere = jit::implementations_for("attention_prefill", ampere, params);
  CHECK(std::count(on_ampere.begin(), on_ampere.end(), "cuda-sm90a-tma") == 0);
  jit::Selection tma, cp;
  tma.implementation = "cuda-sm90a-tma";
  cp.implementation = "cuda-sm90a";
  const char* env = std::getenv("JITK_FA_TMA");
  const bool cp_first = env && std::string(env) == "0";
  CHECK(jit::choose("attention_prefill", params, hopper).implementation == (cp_first ? "cuda-sm90a" : "cuda-sm90a-tma"));
  CHECK(jit::choose("attention_prefill", params, hopper, cp).implementation == "cuda-sm90a");

  CHECK(jit::choose("attention_prefill", params, hopper, tma).implementation == "cuda-sm90a-tma");
  // head 96 is no Hopper text's
  Prefill::Params d96 = p;
  d96.head_dim = 96;
  CHECK_THROWS_WITH(jit::choose("attention_prefill", Prefill::to_params(d96), hopper, tma), Contains("64, 128 and 256"));
  // head 128 by 192 keys: cuda-sm90a's consumers have 224 registers (it needs 240), the copy engine's 240
  Prefill::Params wide = p;
  wide.tile_m = 128, wide.tile_n = 192;
  CHECK_THROWS_WITH(jit::choose("attention_prefill", Prefill::to_params(wide), hopper, cp), Contains("registers") && Contains("224"));
  CHECK(jit::choose("attention_prefill", Prefill::to_params(wide), hopper, tma).implementation == "cuda-sm90a-tma");
  // head 64 by 256 keys: neither (it spills); every implementation refuses, so the plan is asked
  wide.head_dim = 64, wide.tile_n = 256;
  CHECK_THROWS(jit::choose("attention_prefill", Prefill::to_params(wide), hopper, tma));
  const auto& def = jit::detail::find_kernel("attention_prefill");
  for (const auto& i : def.implementations)
    if (i.name == "cuda-sm90a-tma")
      CHECK_THAT(i.tile_plan(jit::detail::validate_params(def, Prefill::to_params(wide))).problem,
                 Contains("needs 256 registers") && Contains("240"));
  // the launch's K and V: rows of kv_heads x head_dim elements, a token's stride apart (a fused QKV row's)
  std::vector<std::int32_t> cu = {0, 5, 9};
  const jit::bfloat16* base = nullptr;
  Prefill::Args a{2, 8, 5, 9, 9, jit::ConstPtr{base, jit::DType::bf16}, jit::ConstPtr{base, jit::DType::bf16},
                  jit::ConstPtr{base, jit::DType::bf16}, jit::MutPtr{nullptr, jit::DType::bf16}, jit::MutPtr{}, cu.data(), cu.data(), 0.1};
  std::vector<jit::bfloat16> qkv(9 * 6144);
  a.q = jit::ConstPtr{qkv.data(), jit::DType::bf16};
  a.k = jit::ConstPtr{qkv.data() + 4096, jit::DType::bf16};
  a.v = jit::ConstPtr{qkv.data() + 5120, jit::DType::bf16};
  std::vector<jit::bfloat16> o(9 * 32 * 128);
  a.o = jit::MutPtr{o.data(), jit::DType::bf16};
  a.q_stride = a.k_stride = a.v_stride = 6144;
  jit::detail::ArgPack pack;
  Prefill::pack(p, a, pack);
  REQUIRE(pack.matrix_count == 2);
  for (int i = 0; i < 2; ++i) {
    INFO("matrix " << i);
    CHECK(pack.matrices[i].base == (i == 0 ? a.k.data : a.v.data));
    CHECK(pack.matrices[i].dtype == jit::DType::bf16);
    CHECK(pack.matrices[i].inner == 8 * 128);
    CHECK(pack.matrices[i].outer == 9);
    CHECK(pack.matrices[i].row_bytes == 6144 * 2);
    CHECK_FALSE(pack.matrices[i].k_inner);
    CHECK(pack.matrices[i].arg == -1);  // never repacked
  }
  // packed rows (stride 0): kv_heads x head_dim elements apart
  a.k_stride = a.v_stride = 0;
  jit::detail::ArgPack packed;
  Prefill::pack(p, a, packed);
  CHECK(packed.matrices[0].row_bytes == 8 * 128 * 2);
  // the plan's launch: boxes of 64 x tile_n rows (its tile_k), one mbarrier more than cuda-sm90a's
  const jit::Implementation *with_tma = nullptr, *with_cp = nullptr;
  for (const auto& i : def.implementations) {
    if (i.name == "cuda-sm90a-tma") with_tma = &i;
    if (i.name == "cuda-sm90a") with_cp = &i;
  }
  REQUIRE(with_tma);
  REQUIRE(with_cp);
  CHECK(with_tma->layout.tensor_maps);
  CHECK_FALSE(with_cp->layout.tensor_maps);
  const jit::ParamSet resolved = jit::detail::validate_params(def, params, jit::Backend::Cuda);
  CHECK_THAT(jit::detail::describe_launch(*with_tma, resolved), Contains("tile 128x1x128"));
}

TEST_CASE("JITK_FA_TMA: 0 ranks the cp.async Hopper text first, 1 or unset the copy engine's, another value is one warning and changes nothing",
          "[kernels][attention]") {
  // jitk explain names the implementation a get for the params would take (no GPU needed)
  const std::string explain =
      jitk_test::kTool + " explain attention_prefill dtype=bf16,head_dim=128,causal=1,window=0,group=4 --target cuda:sm_90";
  const std::string cache = jitk_test::cache_env(cache_dir);
  const auto plain = jitk_test::run(explain, "JITK_FA_TMA=0 " + cache);
  INFO(plain.output);
  CHECK(plain.exit_code == 0);
  CHECK_THAT(plain.output, Contains("implementation: cuda-sm90a\n") && !Contains("JITK_FA_TMA"));
  for (const char* on : {"JITK_FA_TMA=1 ", "JITK_FA_TMA= ", "env -u JITK_FA_TMA "}) {
    const auto first = jitk_test::run(explain, on + cache);
    INFO(on << first.output);
    CHECK(first.exit_code == 0);
    CHECK_THAT(first.output, Contains("implementation: cuda-sm90a-tma\n") && !Contains("JITK_FA_TMA"));
  }
  const auto odd = jitk_test::run(explain, "JITK_FA_TMA=yes " + cache);
  INFO(odd.output);
  CHECK(odd.exit_code == 0);
  CHECK_THAT(odd.output, Contains("implementation: cuda-sm90a-tma\n") && Contains("JITK_FA_TMA='yes' is neither 0 nor 1"));
}

// Hopper's default tiles at head 64: the copy engine's text takes 192 x 128 under a causal mask (three
// consumers of 160 registers: +9% at 2048 tokens on the H100) and 192 x 64 without one; the cp.async
// text, whose producer keeps 56 registers (152 left a consumer), 192 x 64 either way.
TEST_CASE("attention_prefill at head 64 on Hopper: 192 x 128 tiles by default for the copy engine's text under a causal mask, 192 x 64 otherwise",
          "[kernels][attention]") {
  const auto& def = jit::detail::find_kernel("attention_prefill");
  int seen = 0;
  for (const auto& i : def.implementations) {
    if (i.name.rfind("cuda-sm90a", 0) != 0) continue;
    for (bool causal : {true, false}) {
      const Prefill::Params p{jit::DType::bf16, 64, causal, 0, 1};
      const jit::ParamSet resolved = jit::detail::validate_params(def, Prefill::to_params(p), jit::Backend::Cuda);
      const bool wide = i.name == "cuda-sm90a-tma" && causal;
      INFO(i.name << (causal ? ", causal" : ", no mask"));
      // tile_m x tile_n x tile_k: the copy engine's tile_k is its boxes' rows (the keys a step), cp.async's the head
      CHECK_THAT(jit::detail::describe_launch(i, resolved),
                 Contains(wide ? "tile 192x1x128, 512 thr" : "tile 192x1x64, 512 thr"));
      ++seen;
    }
  }
  CHECK(seen == 4);
}
