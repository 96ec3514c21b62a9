// Fusion chains on the CPU: a fused kernel matches the same steps run unfused (float64), the chain
// is in the key, and a wrong chain or wrong operands are refused with a message that says why.
#include <catch2/catch.hpp>
#include <limits>

#include "chain_support.hpp"
#include "jit/cache.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/specializer.hpp"
#include "test_support.hpp"

namespace kernels = jit::kernels;
namespace ref = jitk_reference;
using Catch::Matchers::Contains;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

template <class T> struct HostEnv {
  std::vector<T> random(std::int64_t n, double lo, double hi) {
    return jitk_test::random_values<T>(static_cast<std::size_t>(n), lo, hi, [](double v) { return static_cast<T>(v); });
  }
  std::vector<T> poisoned(std::int64_t n) { return std::vector<T>(static_cast<std::size_t>(n), std::numeric_limits<T>::quiet_NaN()); }
  double widen(T v) { return static_cast<double>(v); }
  double round(double v) { return static_cast<double>(static_cast<T>(v)); }
  std::vector<T> upload(const std::vector<T>& v) { return v; }
  double error(const std::vector<T>& got, const std::vector<double>& expected) { return ref::relative_l2_error(got, expected); }
};

}  // namespace

TEMPLATE_TEST_CASE("a fused chain matches its steps run one by one, on every kernel that takes chains", "[kernels][chains]",
                   float, double) {
  HostEnv<TestType> env;
  for (const auto& c : jitk_test::chain_cases()) {
    for (std::int64_t hidden : {7LL, 1031LL}) {
      for (std::int64_t rows : {1LL, 33LL}) {
        INFO(c.kernel << " prologue '" << c.prologue << "' epilogue '" << c.epilogue << "', hidden = " << hidden
                      << ", rows = " << rows);
        for (const auto& [what, error] : jitk_test::run_chain_case<TestType>(c, hidden, rows, jit::Target::cpu(), env)) {
          INFO(what);
          CHECK(error <= ref::tolerance<TestType>());
        }
      }
    }
  }
}

TEST_CASE("rms_norm with prologue add>store is fused_add_rms_norm", "[kernels][chains]") {
  const std::int64_t rows = 9, hidden = 1000;
  HostEnv<float> env;
  auto x = env.random(rows * hidden, -3, 3), residual = env.random(rows * hidden, -3, 3), w = env.random(hidden, 0.5, 1.5);
  auto residual_chain = residual;
  std::vector<float> y_fused(rows * hidden), y_chain(rows * hidden);
  jit::get<kernels::FusedAddRmsNorm>({jit::DType::f32, hidden}, jit::Target::cpu())(rows, x.data(), residual.data(), w.data(),
                                                                                   y_fused.data(), 1e-6);
  // The residual is read and written in place, as fused_add_rms_norm does.
  auto k = jit::get<kernels::RmsNorm>({jit::DType::f32, hidden, "add>store"}, jit::Target::cpu());
  k.launch({rows, x.data(), w.data(), y_chain.data(), 1e-6, {residual_chain.data(), residual_chain.data()}});
  std::vector<double> sum(residual.begin(), residual.end()), y(y_fused.begin(), y_fused.end());
  CHECK(ref::relative_l2_error(residual_chain, sum) <= 1e-6);
  CHECK(ref::relative_l2_error(y_chain, y) <= 1e-6);
}

TEST_CASE("the chain is part of the key, and no chain keeps the key of a kernel without one", "[kernels][chains]") {
  const auto cpu = jit::Target::cpu();
  auto plain = jit::get<kernels::RmsNorm>({jit::DType::f32, 96}, cpu);
  auto empty = jit::get<kernels::RmsNorm>({jit::DType::f32, 96, "", ""}, cpu);
  auto pro = jit::get<kernels::RmsNorm>({jit::DType::f32, 96, "add>store"}, cpu);
  auto epi = jit::get<kernels::RmsNorm>({jit::DType::f32, 96, {}, "add>store"}, cpu);
  auto other = jit::get<kernels::RmsNorm>({jit::DType::f32, 96, "add"}, cpu);
  CHECK(plain.cache_key() == empty.cache_key());
  CHECK(pro.cache_key() != plain.cache_key());
  CHECK(pro.cache_key() != epi.cache_key());
  CHECK(pro.cache_key() != other.cache_key());
  CHECK(kernels::RmsNorm::to_params(pro.params()).to_string() == "dtype=f32,hidden=96,prologue=add>store");
  // Spaces around the steps are allowed and do not change the key.
  auto spaced = jit::get<kernels::RmsNorm>({jit::DType::f32, 96, jit::Chain::parse(" add > store ")}, cpu);
  CHECK(spaced.cache_key() == pro.cache_key());
}

TEST_CASE("a chain that is not one is refused, naming the step", "[kernels][chains]") {
  CHECK_THROWS_WITH(jit::Chain::parse("add>sotre"), Contains("unknown step 'sotre'") && Contains("gelu_tanh"));
  CHECK_THROWS_WITH(jit::Chain::parse("add>>store"), Contains("unknown step ''"));
  CHECK_THROWS_WITH(jit::Chain::parse("relu>relu>relu>relu>relu>relu>relu>relu>relu"), Contains("more than 8 steps"));
  CHECK_THROWS_WITH(jit::Chain::parse("add>add>add>add>add"), Contains("takes 5 operands"));
  try {
    jit::detail::get_kernel("rms_norm", {{"dtype", "f32"}, {"hidden", 64}, {"prologue", "silu>bogus"}}, jit::Target::cpu());
    FAIL("a bad chain was accepted");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::InvalidParams);
    CHECK_THAT(e.what(), Contains("rms_norm: parameter 'prologue'") && Contains("unknown step 'bogus'"));
  }
}

TEST_CASE("a kernel that takes no chain refuses one", "[kernels][chains]") {
  try {
    jit::get<kernels::Softmax>({jit::DType::f32, 64, "add"}, jit::Target::cpu());
    FAIL("softmax took a chain");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::InvalidParams);
    CHECK_THAT(e.what(), Contains("softmax: unknown parameter 'prologue'"));
  }
}

TEST_CASE("chain operands that do not fit the steps are refused before anything runs", "[kernels][chains]") {
  const std::int64_t hidden = 64;
  auto k = jit::get<kernels::RmsNorm>({jit::DType::f32, hidden, "add>store", "mul_scalar"}, jit::Target::cpu());
  std::vector<float> x(hidden, 1.0f), w(hidden, 1.0f), y(hidden, 42.0f), r(hidden, 1.0f), out(hidden, 42.0f);
  std::vector<double> rd(hidden);
  const float* cr = r.data();
  CHECK_THROWS_WITH((k.launch({1, x.data(), w.data(), y.data(), 1e-6, {r.data()}, {2.0}})),
                    Contains("prologue 'add>store' takes 2 operand(s), got 1"));
  CHECK_THROWS_WITH((k.launch({1, x.data(), w.data(), y.data(), 1e-6, {r.data(), out.data()}, {}})),
                    Contains("epilogue 'mul_scalar' takes 1 operand(s), got 0"));
  CHECK_THROWS_WITH((k.launch({1, x.data(), w.data(), y.data(), 1e-6, {r.data(), cr}, {2.0}})),
                    Contains("prologue operand 2 (store) must be an output tensor"));
  CHECK_THROWS_WITH((k.launch({1, x.data(), w.data(), y.data(), 1e-6, {2.0, out.data()}, {2.0}})),
                    Contains("prologue operand 1 (add) must be an input tensor"));
  CHECK_THROWS_WITH((k.launch({1, x.data(), w.data(), y.data(), 1e-6, {r.data(), out.data()}, {out.data()}})),
                    Contains("epilogue operand 1 (mul_scalar) must be a number"));
  CHECK_THROWS_WITH((k.launch({1, x.data(), w.data(), y.data(), 1e-6, {rd.data(), out.data()}, {2.0}})),
                    Contains("'prologue operand 1 (add)' is f64"));
  CHECK_THROWS_WITH((k.launch({1, x.data(), w.data(), y.data(), 1e-6, {static_cast<const float*>(nullptr), out.data()}, {2.0}})),
                    Contains("'prologue operand 1 (add)' is null"));
  CHECK_THROWS_WITH((jit::Operands{1.0, 2.0, 3.0, 4.0, 5.0}), Contains("at most 4 operands"));
  CHECK(y[0] == 42.0f);
  CHECK(out[0] == 42.0f);
  // and with the right ones it runs: y = rms_norm(x + r) * 2, out = x + r
  k.launch({1, x.data(), w.data(), y.data(), 1e-6, {r.data(), out.data()}, {2.0}});
  CHECK(out[0] == 2.0f);
  CHECK(y[0] == Approx(2.0f));
}

TEST_CASE("an implementation that takes no chains is passed over for a chained get, saying why", "[kernels][chains]") {
  const auto sm90 = jit::Target::parse("cuda:sm_90");
  const jit::ParamSet plain{{"dtype", std::string("bf16")}, {"hidden", std::int64_t{4096}}};
  jit::ParamSet chained = plain;
  chained.set("prologue", std::string("add>store"));
  CHECK(jit::choose("rms_norm", plain, sm90).implementation == "cuda-sm90");
  const auto choice = jit::choose("rms_norm", chained, sm90);
  CHECK(choice.implementation == "cuda");
  CHECK_THAT(choice.reason, Contains("takes no fusion chains"));
  CHECK(jit::implementations_for("rms_norm", sm90) == std::vector<std::string>{"cuda", "cuda-sm90"});
  CHECK(jit::implementations_for("rms_norm", sm90, chained) == std::vector<std::string>{"cuda"});
  jit::Selection only;
  only.implementation = "cuda-sm90";
  CHECK_THROWS_WITH(jit::choose("rms_norm", chained, sm90, only), Contains("takes no fusion chains"));
}

TEST_CASE("jitk ls shows how each artifact is launched", "[kernels][tool]") {
  const auto& rms = jit::detail::find_kernel("rms_norm");
  const auto& silu = jit::detail::find_kernel("silu_and_mul");
  auto impl = [](const jit::detail::KernelDef& def, const std::string& name) -> const jit::Implementation& {
    for (const auto& i : def.implementations)
      if (i.name == name) return i;
    throw std::runtime_error("no implementation " + name);
  };
  const jit::ParamSet bf16_4096{{"dtype", std::string("bf16")}, {"hidden", std::int64_t{4096}}};
  CHECK(jit::detail::describe_launch(impl(rms, "cuda"), bf16_4096) == "row/block 128 thr");  // 512 packs, 4 a thread
  CHECK(jit::detail::describe_launch(impl(rms, "cuda-sm90"), bf16_4096) == "row/block 64 thr");
  CHECK(jit::detail::describe_launch(impl(silu, "cuda"), bf16_4096) == "256 thr x 8 elem");
  CHECK(jit::detail::describe_launch(impl(rms, "cpu"), bf16_4096) == "all cores");
  // Long rows: 256 threads a row, twice that when a prologue's tensor (or the residual) is held too.
  const jit::ParamSet bf16_16384{{"dtype", std::string("bf16")}, {"hidden", std::int64_t{16384}}};
  jit::ParamSet chained = bf16_16384;
  chained.set("prologue", std::string("add>store"));
  CHECK(jit::detail::describe_launch(impl(rms, "cuda"), bf16_16384) == "row/block 256 thr");
  CHECK(jit::detail::describe_launch(impl(rms, "cuda"), chained) == "row/block 512 thr");
  CHECK(jit::detail::describe_launch(impl(jit::detail::find_kernel("fused_add_rms_norm"), "cuda"), bf16_16384) ==
        "row/block 512 thr");
  jit::get<kernels::RmsNorm>({jit::DType::f32, 96}, jit::Target::cpu());
  auto r = jitk_test::run(jitk_test::kTool + " ls", jitk_test::cache_env(cache_dir));
  CHECK_THAT(r.output, Contains("LAUNCH") && Contains("all cores"));
}
