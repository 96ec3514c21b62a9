// A Llama-style decoder layer on jitk's CPU kernels (examples/decoder_layer.hpp) against the same
// layer in float64: a prefill of three sequences, then two decode steps over the paged KV cache
// the prefill wrote.
#include <catch2/catch.hpp>

#include "../examples/decoder_layer.hpp"
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
