// A Llama-style decoder layer on jitk's CPU kernels (examples/decoder_layer.hpp) against the same
// layer in float64: a prefill of three sequences, then two decode steps over the paged KV cache
// the prefill wrote.
#include <algorithm>
#include <catch2/catch.hpp>

#include "../examples/decoder_layer.hpp"
#include "jit/cache.hpp"
#include "test_support.hpp"

namespace {
const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();
}

TEST_CASE("a decoder layer on jitk kernels matches the float64 layer: prefill, then decode steps over the paged cache", "[kernels][layer]") {
  using jitk_example::LayerConfig;
  const LayerConfig c;  // hidden 256, 4 query heads on 2 kv heads of 64, MLP 512, pages of 16
  const std::int64_t batch = 3, seqlen = 37, steps = 2;
  const auto w = jitk_example::random_weights<float>(c, 7);
  jitk_example::DecoderLayer<float> layer(c, w, batch, seqlen + steps, false);
  jitk_example::ReferenceCache cache;
  const auto x = jitk_test::random_values<double>(static_cast<std::size_t>(batch * seqlen * c.hidden), -2, 2,
                                                  [](double v) { return double(float(v)); });
  const auto expected = jitk_example::layer_reference(c, w, x, batch, seqlen, {0, 0, 0}, cache);
  const auto got = layer.prefill(jitk_example::narrowed<float>(x), seqlen);
  CHECK(jitk_reference::relative_l2_error(got, expected) <= 1e-4);
  for (std::int64_t s = 0; s < steps; ++s) {
    const auto xd = jitk_test::random_values<double>(static_cast<std::size_t>(batch * c.hidden), -2, 2,
                                                     [](double v) { return double(float(v)); });
    const std::int64_t position = seqlen + s;
    const auto want = jitk_example::layer_reference(c, w, xd, batch, 1, {position, position, position}, cache);
    const auto step = layer.decode(jitk_example::narrowed<float>(xd), std::vector<std::int32_t>(batch, static_cast<std::int32_t>(position)));
    INFO("decode step " << s);
    CHECK(jitk_reference::relative_l2_error(step, want) <= 1e-4);
  }
}

TEST_CASE("the decoder layer's QKV projection as three gemms into column slices gives the same layer", "[kernels][layer]") {
  // the bench's baseline path (use_three_qkv_gemms): q, k and v written by three gemms with ldc = the row's width
  using jitk_example::LayerConfig;
  const LayerConfig c{256, 8, 2, 32, 384};  // 8 query heads on 2 kv heads of 32: a row of 384, q 256, k and v 64 each
  const std::int64_t batch = 2, seqlen = 19;
  const auto w = jitk_example::random_weights<float>(c, 11);
  jitk_example::DecoderLayer<float> one(c, w, batch, seqlen + 1, false), three(c, w, batch, seqlen + 1, false);
  three.use_three_qkv_gemms(true);
  jitk_example::ReferenceCache cache;
  const auto x = jitk_test::random_values<double>(static_cast<std::size_t>(batch * seqlen * c.hidden), -2, 2,
                                                  [](double v) { return double(float(v)); });
  const auto expected = jitk_example::layer_reference(c, w, x, batch, seqlen, {0, 0}, cache);
  CHECK(jitk_reference::relative_l2_error(one.prefill(jitk_example::narrowed<float>(x), seqlen), expected) <= 1e-4);
  CHECK(jitk_reference::relative_l2_error(three.prefill(jitk_example::narrowed<float>(x), seqlen), expected) <= 1e-4);
  const auto xd = jitk_test::random_values<double>(static_cast<std::size_t>(batch * c.hidden), -2, 2, [](double v) { return double(float(v)); });
  const auto want = jitk_example::layer_reference(c, w, xd, batch, 1, {seqlen, seqlen}, cache);
  const std::vector<std::int32_t> context(batch, static_cast<std::int32_t>(seqlen));
  CHECK(jitk_reference::relative_l2_error(one.decode(jitk_example::narrowed<float>(xd), context), want) <= 1e-4);
  CHECK(jitk_reference::relative_l2_error(three.decode(jitk_example::narrowed<float>(xd), context), want) <= 1e-4);
}

TEST_CASE("the decoder layer's MLP as one gated gemm (SiLU-and-mul in its epilogue) or unfused gives the same layer", "[kernels][layer]") {
  // the gate/up weight in the gated gemm's layout serves both: the gated gemm, or the gemm into gu
  // and silu_and_mul over its rows of [8 gate | 8 up] (use_unfused_mlp: the bench's baseline)
  using jitk_example::LayerConfig;
  const LayerConfig c{256, 4, 2, 64, 336};  // MLP 336: 21 groups of 16 columns, not a power of two
  const std::int64_t batch = 2, seqlen = 23;
  const auto w = jitk_example::random_weights<float>(c, 5);
  jitk_example::DecoderLayer<float> fused(c, w, batch, seqlen + 1, false), unfused(c, w, batch, seqlen + 1, false);
  unfused.use_unfused_mlp(true);
  CHECK(fused.fused_mlp());  // the CPU has the gated gemm
  CHECK(!unfused.fused_mlp());
  jitk_example::ReferenceCache cache;
  const auto x = jitk_test::random_values<double>(static_cast<std::size_t>(batch * seqlen * c.hidden), -2, 2,
                                                  [](double v) { return double(float(v)); });
  const auto expected = jitk_example::layer_reference(c, w, x, batch, seqlen, {0, 0}, cache);
  const auto got_fused = fused.prefill(jitk_example::narrowed<float>(x), seqlen);
  const auto got_unfused = unfused.prefill(jitk_example::narrowed<float>(x), seqlen);
  CHECK(jitk_reference::relative_l2_error(got_fused, expected) <= 1e-4);
  CHECK(jitk_reference::relative_l2_error(got_unfused, expected) <= 1e-4);
  CHECK(jitk_reference::relative_l2_error(got_fused, std::vector<double>(got_unfused.begin(), got_unfused.end())) <= 1e-5);
  // what each launches: the gated gemm alone, or the gemm and silu_and_mul
  auto launched = [&](jitk_example::DecoderLayer<float>& layer) {
    std::vector<std::string> names;
    auto& step = layer.prepare_prefill(seqlen);
    step.x.upload(jitk_example::narrowed<float>(x));
    layer.run(step, {}, [&](const char* what) {
      if (what) names.emplace_back(what);
    });
    return names;
  };
  const auto fused_names = launched(fused), unfused_names = launched(unfused);
  CHECK(std::count(fused_names.begin(), fused_names.end(), "gemm gate/up + silu") == 1);
  CHECK(std::count(fused_names.begin(), fused_names.end(), "silu_and_mul") == 0);
  CHECK(std::count(unfused_names.begin(), unfused_names.end(), "gemm gate/up") == 1);
  CHECK(std::count(unfused_names.begin(), unfused_names.end(), "silu_and_mul") == 1);
  CHECK(fused_names.size() + 1 == unfused_names.size());
  // a decode step over the cache the prefill wrote, both ways
  const auto xd = jitk_test::random_values<double>(static_cast<std::size_t>(batch * c.hidden), -2, 2, [](double v) { return double(float(v)); });
  const auto want = jitk_example::layer_reference(c, w, xd, batch, 1, {seqlen, seqlen}, cache);
  const std::vector<std::int32_t> context(batch, static_cast<std::int32_t>(seqlen));
  CHECK(jitk_reference::relative_l2_error(fused.decode(jitk_example::narrowed<float>(xd), context), want) <= 1e-4);
  CHECK(jitk_reference::relative_l2_error(unfused.decode(jitk_example::narrowed<float>(xd), context), want) <= 1e-4);
}

TEST_CASE("the decoder layer refuses an MLP width its gate/up weight's layout cannot hold", "[kernels][layer]") {
  using jitk_example::LayerConfig;
  for (std::int64_t mlp : {0, 12, 340}) {
    INFO("mlp " << mlp);
    const LayerConfig c{256, 4, 2, 64, mlp};
    const auto w = jitk_example::random_weights<float>(c, 5);
    CHECK_THROWS_WITH((jitk_example::DecoderLayer<float>(c, w, 1, 8, false)), Catch::Matchers::Contains("multiple of 8"));
  }
}

TEST_CASE("the decoder layer's compile_all gets every variant its prefill and decode use, longest compile first", "[kernels][layer]") {
  // A cold start compiles what compile_all lists, in parallel; a variant run() gets that the list
  // lacks would compile later, alone, on the first forward's path. A config no other test uses, so
  // that every variant here is new to the cache.
  using jitk_example::LayerConfig;
  const LayerConfig c{192, 6, 3, 32, 320};
  const std::int64_t batch = 2, seqlen = 9;
  const auto w = jitk_example::random_weights<float>(c, 5);
  jitk_example::DecoderLayer<float> layer(c, w, batch, seqlen + 1, false);
  const auto before = jit::cache::stats();
  std::vector<jitk_example::DecoderLayer<float>::VariantTiming> timings;
  const std::size_t n = layer.compile_all(seqlen, &timings);
  const auto listed = jitk_example::layer_variants(c, jit::DType::f32, layer.fused_mlp(), true);
  REQUIRE(n == listed.size());
  REQUIRE(timings.size() == n);
  CHECK(listed.front().name == "gemm");  // the longest compiles first
  CHECK(listed.size() == 8);             // rms_norm, 3 gemms (or 2 and silu_and_mul), rotary, kv append, prefill, decode
  std::vector<std::string> names;
  for (std::size_t i = 0; i < n; ++i) {
    INFO(timings[i].name);
    CHECK(timings[i].name == listed[i].name);
    CHECK(timings[i].start_ms >= 0);
    CHECK(timings[i].end_ms >= timings[i].start_ms);
    names.push_back(timings[i].name);
  }
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
  const auto compiled = jit::cache::stats();
  CHECK(compiled.compiles > before.compiles);
  const auto x = jitk_test::random_values<double>(static_cast<std::size_t>(batch * seqlen * c.hidden), -2, 2,
                                                  [](double v) { return double(float(v)); });
  layer.prefill(jitk_example::narrowed<float>(x), seqlen);
  const auto xd = jitk_test::random_values<double>(static_cast<std::size_t>(batch * c.hidden), -2, 2, [](double v) { return double(float(v)); });
  layer.decode(jitk_example::narrowed<float>(xd), std::vector<std::int32_t>(batch, static_cast<std::int32_t>(seqlen)));
  CHECK(jit::cache::stats().compiles == compiled.compiles);  // nothing left to compile
  // the decode-only list (seqlen 0) is the same less attention_prefill
  const auto decode_only = jitk_example::layer_variants(c, jit::DType::f32, layer.fused_mlp(), false);
  CHECK(decode_only.size() == listed.size() - 1);
  CHECK(std::none_of(decode_only.begin(), decode_only.end(), [](const auto& v) { return v.kernel == "attention_prefill"; }));
}
