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
