// kv_cache_append on the CPU against its exact reference: odd heads and pages, padding and
// out-of-range slots, poisoned caches checked bit for bit, f32 and f64; and the arguments and
// params it refuses.
#include <catch2/catch.hpp>
#include <limits>

#include "jit/kernels.hpp"
#include "kv_cache_append_support.hpp"

namespace ref = jitk_reference;
using Catch::Matchers::Contains;
using jitk_test::KvAppend;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

template <class T> std::vector<T> random_vector(std::size_t n) {
  return jitk_test::random_values<T>(n, -3, 3, [](double v) { return static_cast<T>(v); });
}

// One append of fresh rows into poisoned caches, checked against the reference; slots given or random.
template <class T> void check_append(const jitk_test::KvShape& s, std::vector<std::int64_t> slots = {}) {
  auto kernel = jit::get<KvAppend>({jit::dtype_of<T>(), s.head_dim, s.page_size}, jit::Target::cpu());
  if (slots.empty()) slots = jitk_test::random_slots(s);
  const auto k = random_vector<T>(s.row_elements()), v = random_vector<T>(s.row_elements());
  auto k_cache = jitk_test::poisoned<T>(s.cache_elements()), v_cache = jitk_test::poisoned<T>(s.cache_elements());
  auto k_ref = k_cache, v_ref = v_cache;
  ref::kv_cache_append(k_ref, k, slots, s.kv_heads, s.head_dim, s.num_pages, s.page_size);
  ref::kv_cache_append(v_ref, v, slots, s.kv_heads, s.head_dim, s.num_pages, s.page_size);

  kernel(s.tokens, s.kv_heads, s.num_pages, k.data(), v.data(), slots.data(), k_cache.data(), v_cache.data());

  INFO("tokens " << s.tokens << ", kv_heads " << s.kv_heads << ", head_dim " << s.head_dim << ", page_size " << s.page_size
                 << ", num_pages " << s.num_pages);
  CHECK(jitk_test::bit_differences(k_cache, k_ref) == 0);
  CHECK(jitk_test::bit_differences(v_cache, v_ref) == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("kv_cache_append writes each token's rows at its slot and nothing else, bit for bit", "[kernels][kv_cache_append]",
                   float, double) {
  for (const auto& shape : jitk_test::kKvShapes) check_append<TestType>(shape);
}

TEMPLATE_TEST_CASE("kv_cache_append split over the cores mid-row is the same copy", "[kernels][kv_cache_append]", float, double) {
  // 1001 tokens x 7 heads x 96: tasks of at least 16384 elements start and end inside rows
  check_append<TestType>({1001, 7, 96, 16, 70});
  check_append<TestType>({1001, 7, 5, 7, 150});
}

TEST_CASE("kv_cache_append skips padding and slots past the cache, and takes empty calls", "[kernels][kv_cache_append]") {
  const jitk_test::KvShape s{6, 2, 8, 4, 3};  // 12 slots
  check_append<float>(s, {0, -1, 12, 11, -7, 1000000});
  check_append<float>(s, {-1, -1, -1, -1, -1, -1});  // nothing written: the caches stay poisoned
  auto kernel = jit::get<KvAppend>({jit::DType::f32, 8, 4}, jit::Target::cpu());
  const jit::MutPtr none{};
  CHECK_NOTHROW(kernel(0, 2, 3, jit::ConstPtr{}, jit::ConstPtr{}, nullptr, none, none));  // no tokens: null pointers are fine
  CHECK_NOTHROW(kernel(5, 0, 3, jit::ConstPtr{}, jit::ConstPtr{}, nullptr, none, none));  // no heads: nothing to copy
}

TEST_CASE("kv_cache_append refuses a head or page out of range before compiling", "[kernels][kv_cache_append]") {
  auto get = [](std::int64_t head_dim, std::int64_t page_size) { jit::get<KvAppend>({jit::DType::f32, head_dim, page_size}, jit::Target::cpu()); };
  CHECK_THROWS_WITH(get(0, 16), Contains("head_dim") && Contains("out of range"));
  CHECK_THROWS_WITH(get(2048, 16), Contains("head_dim") && Contains("out of range"));
  CHECK_THROWS_WITH(get(128, 0), Contains("page_size") && Contains("out of range"));
  CHECK_THROWS_WITH(get(128, 4096), Contains("page_size") && Contains("out of range"));
}

TEST_CASE("kv_cache_append refuses bad arguments with a message that names them", "[kernels][kv_cache_append]") {
  auto kernel = jit::get<KvAppend>({jit::DType::f32, 8, 4}, jit::Target::cpu());
  std::vector<float> k(2 * 3 * 8, 1.0f), v(k), k_cache(5 * 4 * 3 * 8), v_cache(k_cache);
  std::vector<double> kd(k.size());
  std::vector<std::int64_t> slots = {0, 5};
  const jit::MutPtr none{};
  const jit::ConstPtr nothing{};
  CHECK_THROWS_WITH(kernel(-1, 3, 5, k.data(), v.data(), slots.data(), k_cache.data(), v_cache.data()), Contains("'tokens' = -1 is negative"));
  CHECK_THROWS_WITH(kernel(2, -3, 5, k.data(), v.data(), slots.data(), k_cache.data(), v_cache.data()), Contains("'kv_heads' = -3 is negative"));
  CHECK_THROWS_WITH(kernel(2, 3, -5, k.data(), v.data(), slots.data(), k_cache.data(), v_cache.data()), Contains("'num_pages' = -5 is negative"));
  CHECK_THROWS_WITH(kernel(2, 3, 5, nothing, v.data(), slots.data(), k_cache.data(), v_cache.data()), Contains("'k' is null"));
  CHECK_THROWS_WITH(kernel(2, 3, 5, k.data(), nothing, slots.data(), k_cache.data(), v_cache.data()), Contains("'v' is null"));
  CHECK_THROWS_WITH(kernel(2, 3, 5, k.data(), v.data(), nullptr, k_cache.data(), v_cache.data()), Contains("'slots' is null"));
  CHECK_THROWS_WITH(kernel(2, 3, 5, k.data(), v.data(), slots.data(), none, v_cache.data()), Contains("'k_cache' is null"));
  CHECK_THROWS_WITH(kernel(2, 3, 5, k.data(), v.data(), slots.data(), k_cache.data(), none), Contains("'v_cache' is null"));
  CHECK_THROWS_WITH(kernel(2, 3, 5, kd.data(), v.data(), slots.data(), k_cache.data(), v_cache.data()), Contains("'k' is f64"));
  try {
    kernel(2, 3, 5, k.data(), v.data(), nullptr, k_cache.data(), v_cache.data());
    FAIL("no error");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::InvalidArgument);
  }
}

namespace {

// k and v read in place from one fused QKV buffer [tokens, (q_heads + 2 kv_heads) x head_dim + pad]
// (k after q_heads heads, v after k); q's columns and the padding hold NaN, which must not reach
// the caches. The caches, poisoned, must equal the reference's bit for bit.
template <class T> void check_append_fused(const jitk_test::KvShape& s, std::int64_t q_heads, std::int64_t pad) {
  auto kernel = jit::get<KvAppend>({jit::dtype_of<T>(), s.head_dim, s.page_size}, jit::Target::cpu());
  const auto slots = jitk_test::random_slots(s);
  const std::int64_t kw = s.kv_heads * s.head_dim, qw = q_heads * s.head_dim, stride = qw + 2 * kw + pad;
  const auto k = random_vector<T>(s.row_elements()), v = random_vector<T>(s.row_elements());
  const auto qkv = jitk_test::fused_rows<T>(s.tokens, stride, {{k, kw, qw}, {v, kw, qw + kw}});
  auto k_cache = jitk_test::poisoned<T>(s.cache_elements()), v_cache = jitk_test::poisoned<T>(s.cache_elements());
  auto k_ref = k_cache, v_ref = v_cache;
  ref::kv_cache_append(k_ref, k, slots, s.kv_heads, s.head_dim, s.num_pages, s.page_size);
  ref::kv_cache_append(v_ref, v, slots, s.kv_heads, s.head_dim, s.num_pages, s.page_size);

  KvAppend::Args a{s.tokens, s.kv_heads, s.num_pages, qkv.data() + qw, qkv.data() + qw + kw, slots.data(), k_cache.data(), v_cache.data()};
  a.k_stride = a.v_stride = stride;
  kernel(a);

  INFO("tokens " << s.tokens << ", kv_heads " << s.kv_heads << ", head_dim " << s.head_dim << ", page_size " << s.page_size
                 << ", q heads " << q_heads << ", stride " << stride);
  CHECK(jitk_test::bit_differences(k_cache, k_ref) == 0);
  CHECK(jitk_test::bit_differences(v_cache, v_ref) == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("kv_cache_append reads k and v in place from a fused QKV buffer with a token stride", "[kernels][kv_cache_append]", float,
                   double) {
  for (const auto& shape : jitk_test::kKvShapes) {
    check_append_fused<TestType>(shape, 5, 0);  // [q | k | v] rows, as one QKV gemm writes them
    check_append_fused<TestType>(shape, 2, 3);  // and 3 elements more a row
  }
  check_append_fused<TestType>({1001, 7, 96, 16, 70}, 4, 1);  // split over the cores mid-row
}

TEST_CASE("kv_cache_append refuses a token stride under the row or past 64-bit offsets", "[kernels][kv_cache_append]") {
  auto kernel = jit::get<KvAppend>({jit::DType::f32, 8, 4}, jit::Target::cpu());
  std::vector<float> qkv(2 * 64, 1.0f), k_cache(5 * 4 * 3 * 8), v_cache(k_cache);
  std::vector<std::int64_t> slots = {0, 5};
  auto args = [&] {
    KvAppend::Args a{2, 2, 5, qkv.data() + 32, qkv.data() + 48, slots.data(), k_cache.data(), v_cache.data()};
    a.k_stride = a.v_stride = 64;
    return a;
  };
  CHECK_NOTHROW(kernel(args()));
  auto a = args();
  a.k_stride = 15;
  CHECK_THROWS_WITH(kernel(a), Contains("k_stride = 15 is less than a token's heads x head_dim = 16"));
  a = args();
  a.v_stride = -64;
  CHECK_THROWS_WITH(kernel(a), Contains("v_stride = -64 is negative"));
  a = args();
  a.v_stride = std::int64_t{1} << 62;
  CHECK_THROWS_WITH(kernel(a), Contains("v_stride") && Contains("64-bit"));
  a = args();
  a.kv_heads = std::int64_t{1} << 61;
  CHECK_THROWS_WITH(kernel(a), Contains("64-bit count"));
  a = args();
  a.num_pages = std::int64_t{1} << 60;
  CHECK_THROWS_WITH(kernel(a), Contains("64-bit count"));
}
