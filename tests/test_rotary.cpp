// rotary_embedding on the CPU against its float64 reference: both styles, both sources, full and
// partial rotary, f32 and f64, the untouched part of each head checked bit for bit; and the
// arguments and params it refuses.
#include <catch2/catch.hpp>

#include "jit/kernels.hpp"
#include "rotary_support.hpp"

namespace ref = jitk_reference;
using Catch::Matchers::Contains;
using jitk_test::Rotary;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

template <class T> std::vector<T> random_vector(std::size_t n) {
  return jitk_test::random_values<T>(n, -3, 3, [](double v) { return static_cast<T>(v); });
}
template <class T> std::vector<double> widen(const std::vector<T>& v) { return {v.begin(), v.end()}; }

// The float error of the theta source is the angle's: position * inv_freq rounded to float is off
// by up to position * 2^-24 radians, about 2e-4 at position 4096 (torch's float cache has the
// same); measured here under 3e-5. The table source is only rounding: the usual tolerance.
template <class T> double rotary_tolerance(Rotary::Source source) {
  return sizeof(T) == 4 && source == Rotary::Source::Theta ? 1e-4 : ref::tolerance<T>();
}

// One run of the kernel on fresh inputs of `s`, checked against the reference; positions given or random.
template <class T>
void check_rotary(const jitk_test::RotaryShape& s, Rotary::Style style, Rotary::Source source, std::vector<std::int64_t> positions = {}) {
  const bool table = source == Rotary::Source::Table;
  auto kernel = jit::get<Rotary>({jit::dtype_of<T>(), s.head_dim, s.rotary_dim, style, source}, jit::Target::cpu());
  const std::int64_t max_position = jitk_test::kRotaryMaxPosition;
  if (positions.empty()) positions = jitk_test::random_positions(s.tokens, max_position);
  auto q = random_vector<T>(s.tokens * s.heads * s.head_dim), k = random_vector<T>(s.tokens * s.kv_heads * s.head_dim);
  jitk_test::poison_tails(q, s.head_dim, s.rotary_dim);
  jitk_test::poison_tails(k, s.head_dim, s.rotary_dim);
  const auto q_before = q, k_before = k;
  std::vector<double> cos_sin;
  std::vector<T> cos_sin_t;  // the table in the kernel's type (T on the CPU)
  if (table) {
    cos_sin = jitk_test::rotary_table(max_position, s.rotary_dim, jitk_test::kRotaryTheta, [](double v) { return double(static_cast<T>(v)); });
    cos_sin_t.assign(cos_sin.begin(), cos_sin.end());
  }
  auto q_ref = widen(q), k_ref = widen(k);
  const bool neox = style == Rotary::Style::NeoX;
  ref::rotary_embedding(q_ref, s.tokens, s.heads, s.head_dim, s.rotary_dim, neox, positions, jitk_test::kRotaryTheta, table ? &cos_sin : nullptr, max_position);
  ref::rotary_embedding(k_ref, s.tokens, s.kv_heads, s.head_dim, s.rotary_dim, neox, positions, jitk_test::kRotaryTheta, table ? &cos_sin : nullptr, max_position);

  if (table)
    kernel(s.tokens, s.heads, s.kv_heads, positions.data(), q.data(), k.data(), jitk_test::kRotaryTheta, cos_sin_t.data(), max_position);
  else
    kernel(s.tokens, s.heads, s.kv_heads, positions.data(), q.data(), k.data(), jitk_test::kRotaryTheta);

  INFO("head_dim " << s.head_dim << ", rotary_dim " << s.rotary_dim << ", " << (neox ? "neox" : "gptj") << ", " << (table ? "table" : "theta")
                   << ", tokens " << s.tokens << ", heads " << s.heads << "/" << s.kv_heads);
  auto as_double = [](T v) { return double(v); };
  CHECK(jitk_test::rotated_error(q, q_ref, s.head_dim, s.rotary_dim, as_double) <= rotary_tolerance<T>(source));
  CHECK(jitk_test::rotated_error(k, k_ref, s.head_dim, s.rotary_dim, as_double) <= rotary_tolerance<T>(source));
  CHECK(jitk_test::tails_intact(q, q_before, s.head_dim, s.rotary_dim));
  CHECK(jitk_test::tails_intact(k, k_before, s.head_dim, s.rotary_dim));
}

const Rotary::Style kStyles[] = {Rotary::Style::NeoX, Rotary::Style::GptJ};
const Rotary::Source kSources[] = {Rotary::Source::Theta, Rotary::Source::Table};

}  // namespace

TEMPLATE_TEST_CASE("rotary_embedding matches the reference: both styles and sources, full and partial rotary", "[kernels][rotary]", float, double) {
  for (const auto& shape : jitk_test::kRotaryShapes)
    for (auto style : kStyles)
      for (auto source : kSources) check_rotary<TestType>(shape, style, source);
}

TEMPLATE_TEST_CASE("rotary_embedding split over the cores mid-head is the same rotation", "[kernels][rotary]", float, double) {
  // 1001 tokens x 10 heads x 20 pairs: tasks of at least 8192 pairs start and end inside heads
  for (auto style : kStyles)
    for (auto source : kSources) check_rotary<TestType>({1001, 7, 3, 96, 40}, style, source);
}

TEST_CASE("rotary_embedding leaves a token whose position the table lacks as it is, and takes k-less and empty calls", "[kernels][rotary]") {
  const jitk_test::RotaryShape s{5, 3, 2, 64, 64};
  check_rotary<float>(s, Rotary::Style::NeoX, Rotary::Source::Table, {3, -1, jitk_test::kRotaryMaxPosition, 4095, 17});
  // kv_heads 0: q alone, k null
  auto kernel = jit::get<Rotary>({jit::DType::f32, 64, 64}, jit::Target::cpu());
  std::vector<float> q = random_vector<float>(3 * 64);
  const auto before = q;
  std::vector<std::int64_t> pos = {7, 8, 9};
  kernel(3, 1, 0, pos.data(), q.data(), jit::MutPtr{}, 10000.0);
  auto q_ref = widen(before);
  ref::rotary_embedding(q_ref, 3, 1, 64, 64, true, pos, 10000.0);
  CHECK(ref::relative_l2_error(q, q_ref) <= 1e-4);
  // no tokens: nothing is read, null pointers are fine
  CHECK_NOTHROW(kernel(0, 8, 2, nullptr, jit::MutPtr{}, jit::MutPtr{}, 10000.0));
}

TEST_CASE("rotary_embedding refuses an odd rotary_dim, or one larger than the head, before compiling", "[kernels][rotary]") {
  auto get = [](std::int64_t head_dim, std::int64_t rotary_dim) { jit::get<Rotary>({jit::DType::f32, head_dim, rotary_dim}, jit::Target::cpu()); };
  CHECK_THROWS_WITH(get(64, 33), Contains("'rotary_dim' = 33 is odd"));
  CHECK_THROWS_WITH(get(64, 96), Contains("'rotary_dim' = 96 is larger than 'head_dim' = 64"));
  CHECK_THROWS_WITH(get(64, 0), Contains("rotary_dim") && Contains("out of range"));
  // the type-erased path (manifests, jitk warm) is checked the same way
  jit::ParamSet given{{"dtype", std::string("f32")}, {"head_dim", std::int64_t{128}}, {"rotary_dim", std::int64_t{130}},
                      {"style", std::string("gptj")}, {"source", std::string("theta")}};
  try {
    jit::detail::get_kernel("rotary_embedding", given, jit::Target::cpu());
    FAIL("no error");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::InvalidParams);
    CHECK_THAT(e.what(), Contains("larger than 'head_dim'"));
  }
}

TEST_CASE("rotary_embedding refuses bad arguments with a message that names them", "[kernels][rotary]") {
  auto theta = jit::get<Rotary>({jit::DType::f32, 64, 32}, jit::Target::cpu());
  auto table = jit::get<Rotary>({jit::DType::f32, 64, 32, Rotary::Style::NeoX, Rotary::Source::Table}, jit::Target::cpu());
  std::vector<float> q(2 * 4 * 64, 1.0f), k(2 * 2 * 64, 1.0f), cos_sin(16 * 32, 0.5f);
  std::vector<double> qd(q.size());
  std::vector<std::int64_t> pos = {1, 2};
  const jit::MutPtr none{};
  CHECK_THROWS_WITH(theta(-1, 4, 2, pos.data(), q.data(), k.data()), Contains("'tokens' = -1 is negative"));
  CHECK_THROWS_WITH(theta(2, -4, 2, pos.data(), q.data(), k.data()), Contains("'heads' = -4 is negative"));
  CHECK_THROWS_WITH(theta(2, 4, -2, pos.data(), q.data(), k.data()), Contains("'kv_heads' = -2 is negative"));
  CHECK_THROWS_WITH(theta(2, 4, 2, pos.data(), none, k.data()), Contains("'q' is null"));
  CHECK_THROWS_WITH(theta(2, 4, 2, pos.data(), q.data(), none), Contains("'k' is null"));
  CHECK_THROWS_WITH(theta(2, 4, 2, nullptr, q.data(), k.data()), Contains("'positions' is null"));
  CHECK_THROWS_WITH(theta(2, 4, 2, pos.data(), qd.data(), k.data()), Contains("'q' is f64"));
  CHECK_THROWS_WITH(theta(2, 4, 2, pos.data(), q.data(), k.data(), 0.0), Contains("theta must be"));
  CHECK_THROWS_WITH(theta(2, 4, 2, pos.data(), q.data(), k.data(), 1e4, cos_sin.data(), 16), Contains("cos_sin is given but source = theta"));
  CHECK_THROWS_WITH(table(2, 4, 2, pos.data(), q.data(), k.data(), 1e4), Contains("needs the cos_sin table"));
  CHECK_THROWS_WITH(table(2, 4, 2, pos.data(), q.data(), k.data(), 1e4, cos_sin.data(), 0), Contains("needs max_position >= 1"));
  CHECK_THROWS_WITH(table(2, 4, 2, pos.data(), q.data(), k.data(), 1e4, jit::ConstPtr(qd.data()), 16), Contains("'cos_sin' is f64"));
}

namespace {

// q and k rotated in place with token strides: in one fused QKV buffer [tokens, stride] (q at
// column 0, k after it, then v's columns and `pad` more, all poisoned), or in two buffers of their
// own with different paddings. The q and k slices are judged against the reference (each head's
// untouched tail bit for bit), and every other element must be bit for bit what it was.
template <class T>
void check_rotary_strided(const jitk_test::RotaryShape& s, Rotary::Style style, Rotary::Source source, bool fused, std::int64_t pad) {
  const bool table = source == Rotary::Source::Table, neox = style == Rotary::Style::NeoX;
  auto kernel = jit::get<Rotary>({jit::dtype_of<T>(), s.head_dim, s.rotary_dim, style, source}, jit::Target::cpu());
  const std::int64_t max_position = jitk_test::kRotaryMaxPosition;
  const auto positions = jitk_test::random_positions(s.tokens, max_position);
  const std::int64_t qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
  const std::int64_t q_stride = fused ? qw + 2 * kw + pad : qw + pad, k_stride = fused ? q_stride : kw + 2 * pad + 1;
  auto q = random_vector<T>(s.tokens * qw), k = random_vector<T>(s.tokens * kw);
  jitk_test::poison_tails(q, s.head_dim, s.rotary_dim);
  jitk_test::poison_tails(k, s.head_dim, s.rotary_dim);
  // NaN between and around the rows; fused: k in q's buffer, and no k buffer
  auto qbuf = fused ? jitk_test::fused_rows<T>(s.tokens, q_stride, {{q, qw, 0}, {k, kw, qw}})
                    : jitk_test::fused_rows<T>(s.tokens, q_stride, {{q, qw, 0}});
  auto kbuf = fused ? std::vector<T>() : jitk_test::fused_rows<T>(s.tokens, k_stride, {{k, kw, 0}});
  const auto qbuf_before = qbuf, kbuf_before = kbuf;
  std::vector<double> cos_sin;
  std::vector<T> cos_sin_t;
  if (table) {
    cos_sin = jitk_test::rotary_table(max_position, s.rotary_dim, jitk_test::kRotaryTheta, [](double v) { return double(static_cast<T>(v)); });
    cos_sin_t.assign(cos_sin.begin(), cos_sin.end());
  }
  auto q_ref = widen(q), k_ref = widen(k);
  ref::rotary_embedding(q_ref, s.tokens, s.heads, s.head_dim, s.rotary_dim, neox, positions, jitk_test::kRotaryTheta, table ? &cos_sin : nullptr, max_position);
  ref::rotary_embedding(k_ref, s.tokens, s.kv_heads, s.head_dim, s.rotary_dim, neox, positions, jitk_test::kRotaryTheta, table ? &cos_sin : nullptr, max_position);

  Rotary::Args a{s.tokens, s.heads, s.kv_heads, positions.data(), qbuf.data(), fused ? qbuf.data() + qw : kbuf.data(), jitk_test::kRotaryTheta};
  if (table) a.cos_sin = cos_sin_t.data(), a.max_position = max_position;
  a.q_stride = q_stride;
  a.k_stride = k_stride;
  kernel(a);

  INFO("head_dim " << s.head_dim << ", rotary_dim " << s.rotary_dim << ", " << (neox ? "neox" : "gptj") << ", " << (table ? "table" : "theta")
                   << ", tokens " << s.tokens << ", heads " << s.heads << "/" << s.kv_heads << (fused ? ", fused" : ", two buffers")
                   << ", q_stride " << q_stride << ", k_stride " << k_stride);
  const auto q_got = jitk_test::gather_rows(qbuf, s.tokens, qw, q_stride, 0);
  const auto k_got = jitk_test::gather_rows(fused ? qbuf : kbuf, s.tokens, kw, k_stride, fused ? qw : 0);
  auto as_double = [](T v) { return double(v); };
  CHECK(jitk_test::rotated_error(q_got, q_ref, s.head_dim, s.rotary_dim, as_double) <= rotary_tolerance<T>(source));
  CHECK(jitk_test::rotated_error(k_got, k_ref, s.head_dim, s.rotary_dim, as_double) <= rotary_tolerance<T>(source));
  CHECK(jitk_test::tails_intact(q_got, q, s.head_dim, s.rotary_dim));
  CHECK(jitk_test::tails_intact(k_got, k, s.head_dim, s.rotary_dim));
  if (fused) {
    CHECK(jitk_test::changed_outside(qbuf, qbuf_before, q_stride, {{0, qw + kw}}) == 0);  // v's columns and the padding
  } else {
    CHECK(jitk_test::changed_outside(qbuf, qbuf_before, q_stride, {{0, qw}}) == 0);
    CHECK(jitk_test::changed_outside(kbuf, kbuf_before, k_stride, {{0, kw}}) == 0);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("rotary_embedding rotates q and k in place inside a fused QKV buffer, touching nothing between their rows",
                   "[kernels][rotary]", float, double) {
  for (const auto& shape : jitk_test::kRotaryShapes)
    for (auto style : kStyles)
      for (auto source : kSources) {
        check_rotary_strided<TestType>(shape, style, source, true, 0);  // [q | k | v] rows, as one QKV gemm writes them
        check_rotary_strided<TestType>(shape, style, source, true, 3);  // and 3 elements more a row
        check_rotary_strided<TestType>(shape, style, source, false, 5);  // two buffers, strides of their own
      }
  // split over the cores mid-head
  check_rotary_strided<TestType>({1001, 7, 3, 96, 40}, Rotary::Style::NeoX, Rotary::Source::Theta, true, 1);
  check_rotary_strided<TestType>({1001, 7, 3, 96, 40}, Rotary::Style::GptJ, Rotary::Source::Table, false, 2);
}

TEST_CASE("rotary_embedding refuses a token stride under the row, past 64-bit offsets, or q and k rows that share elements",
          "[kernels][rotary]") {
  auto kernel = jit::get<Rotary>({jit::DType::f32, 8, 8}, jit::Target::cpu());
  // 3 tokens of 4 q heads and 2 k heads of 8: a fused row of 4 + 2 + 2 heads = 64 elements
  const std::int64_t tokens = 3, qw = 32, kw = 16, stride = 64;
  std::vector<float> qkv(tokens * stride, 1.0f);
  std::vector<std::int64_t> pos = {1, 2, 3};
  auto args = [&](std::int64_t k_at) {
    Rotary::Args a{tokens, 4, 2, pos.data(), qkv.data(), qkv.data() + k_at};
    a.q_stride = a.k_stride = stride;
    return a;
  };
  CHECK_NOTHROW(kernel(args(qw)));
  auto a = args(qw);
  a.q_stride = qw - 1;
  CHECK_THROWS_WITH(kernel(a), Contains("q_stride = 31 is less than a token's heads x head_dim = 32"));
  a = args(qw);
  a.k_stride = -8;
  CHECK_THROWS_WITH(kernel(a), Contains("k_stride = -8 is negative"));
  a = args(qw);
  a.q_stride = std::int64_t{1} << 62;
  CHECK_THROWS_WITH(kernel(a), Contains("q_stride = 4611686018427387904") && Contains("64-bit"));
  // k placed where it shares q's elements: same strides (k inside q's row, or one row down inside q's)
  CHECK_THROWS_WITH(kernel(args(kw)), Contains("q's and k's rows share elements"));
  CHECK_THROWS_WITH(kernel(args(stride + 8)), Contains("share elements"));
  CHECK_NOTHROW(kernel(args(qw + kw)));  // k where v would be: no element shared
  // packed q and k in one buffer, k starting inside q's last row (different strides)
  std::vector<float> packed(tokens * (qw + kw));
  Rotary::Args b{tokens, 4, 2, pos.data(), packed.data(), packed.data() + tokens * qw - 8};
  CHECK_THROWS_WITH(kernel(b), Contains("share elements"));
  b.k = packed.data() + tokens * qw;  // right after q: fine
  CHECK_NOTHROW(kernel(b));
  // counts past 64 bits
  Rotary::Args huge{std::int64_t{1} << 40, std::int64_t{1} << 30, 0, pos.data(), qkv.data(), jit::MutPtr{}};
  CHECK_THROWS_WITH(kernel(huge), Contains("64-bit count"));
}

TEST_CASE("strided_rows_overlap agrees with a brute-force check of every pair of rows", "[kernels][rotary]") {
  using jit::kernels::detail::strided_rows_overlap;
  std::uniform_int_distribution<std::int64_t> width(1, 6), extra(0, 5), offset(-40, 40), rows(1, 5);
  alignas(16) static char buffer[4096];
  int overlapping = 0, separate = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const std::size_t elem = trial % 3 == 0 ? 2 : 4;
    const std::int64_t n = rows(jitk_test::rng()), wa = width(jitk_test::rng()), wb = width(jitk_test::rng());
    const std::int64_t sa = wa + extra(jitk_test::rng()), sb = trial % 2 ? sa : wb + extra(jitk_test::rng());
    if (sb < wb) continue;
    const std::int64_t d = offset(jitk_test::rng());  // bytes: not always a whole element
    const char* a = buffer + 1024;
    const char* b = a + d;
    bool brute = false;
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t u = 0; u < n; ++u) {
        const std::int64_t a0 = t * sa * std::int64_t(elem), a1 = a0 + wa * std::int64_t(elem);
        const std::int64_t b0 = d + u * sb * std::int64_t(elem), b1 = b0 + wb * std::int64_t(elem);
        brute = brute || (a0 < b1 && b0 < a1);
      }
    INFO("n " << n << " a " << wa << "/" << sa << " b " << wb << "/" << sb << " d " << d << " elem " << elem);
    REQUIRE(strided_rows_overlap(a, wa, sa, b, wb, sb, n, elem) == brute);
    (brute ? overlapping : separate)++;
  }
  CHECK(overlapping > 1000);
  CHECK(separate > 1000);
}
