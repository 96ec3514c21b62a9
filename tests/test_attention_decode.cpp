// attention_decode on the CPU against its float64 reference: odd contexts, shuffled pages, 1-8 new
// tokens, GQA groups, split contexts merged through a workspace, rows that see no key, poisoned
// outputs; and the arguments and params it refuses.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "attention_decode_support.hpp"
#include "jit/registry.hpp"

namespace ref = jitk_reference;
using Catch::Matchers::Contains;
using jitk_test::Decode;
using jitk_test::DecodeShape;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

template <class T> std::vector<T> random_vector(std::size_t n) {
  return jitk_test::random_values<T>(n, -2, 2, [](double v) { return static_cast<T>(v); });
}
template <class T> std::vector<T> nan_filled(std::size_t n) { return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN()); }

// lse: -inf exactly where the reference's is, else within the tolerance (absolute: lse is a log).
double lse_error(const std::vector<float>& got, const std::vector<double>& expected) {
  double worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::isinf(expected[i])) {
      if (!(std::isinf(got[i]) && got[i] < 0)) return std::numeric_limits<double>::infinity();
      continue;
    }
    if (std::isnan(got[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(got[i] - expected[i]));
  }
  return worst;
}

// One call on fresh random inputs into NaN-filled o and lse, with or without a workspace (a split).
// q_extra >= 0: q read in place from rows of heads x head_dim + q_extra elements (a fused QKV
// buffer's: k's and v's columns and any padding there NaN, which must not reach o).
template <class T> void check_decode(const DecodeShape& s, bool split, std::int64_t q_extra = -1) {
  const Decode::Params params{jit::dtype_of<T>(), s.head_dim, s.page_size, s.group, s.q_len};
  auto kernel = jit::get<Decode>(params, jit::Target::cpu());
  const auto tables = jitk_test::decode_tables(s);
  const auto q = random_vector<T>(s.q_elements());
  const auto k_cache = random_vector<T>(tables.cache_elements(s)), v_cache = random_vector<T>(tables.cache_elements(s));
  auto o = nan_filled<T>(s.q_elements());
  auto lse = nan_filled<float>(s.batch() * s.q_len * s.heads());
  const double scale = 1 / std::sqrt(double(s.head_dim));
  const std::int64_t max_context = *std::max_element(s.contexts.begin(), s.contexts.end());
  std::vector<unsigned char> workspace(Decode::workspace_bytes(params, s.batch(), s.kv_heads, max_context));
  const bool splits = !workspace.empty();
  const std::int64_t q_width = s.heads() * s.head_dim, q_stride = q_extra >= 0 ? q_width + q_extra : q_width;
  const auto q_rows = jitk_test::fused_rows<T>(s.batch() * s.q_len, q_stride, {{q, q_width, 0}});
  Decode::Args args{s.batch(), s.kv_heads, tables.num_pages, tables.max_pages, q_rows.data(), k_cache.data(), v_cache.data(),
                    tables.block_table.data(), s.contexts.data(), o.data(), lse.data(), scale};
  args.host_tables = true;
  if (q_extra >= 0) args.q_stride = q_stride;
  if (split) {
    args.workspace = workspace.data();
    args.workspace_size = workspace.size();
  }
  kernel(args);
  const auto expected = ref::attention_decode(q, k_cache, v_cache, tables.block_table, s.contexts, s.q_len, s.kv_heads, s.group,
                                              s.head_dim, s.page_size, tables.max_pages, scale);
  INFO("kv_heads " << s.kv_heads << ", group " << s.group << ", q_len " << s.q_len << ", head_dim " << s.head_dim << ", page_size "
                   << s.page_size << ", batch " << s.batch() << (split && splits ? ", split" : "") << ", q_stride " << q_stride);
  CHECK(ref::relative_l2_error(o, expected.o) <= ref::tolerance<T>());
  CHECK(lse_error(lse, expected.lse) <= 1e-5);
  if (split && splits)  // every counter back at 0, for the next launch
    CHECK(std::all_of(workspace.end() - 4, workspace.end(), [](unsigned char b) { return b == 0; }));
}

}  // namespace

TEMPLATE_TEST_CASE("attention_decode matches the reference over odd contexts, shuffled pages, 1-8 new tokens and GQA groups",
                   "[kernels][attention_decode]", float, double) {
  for (const auto& shape : jitk_test::decode_shapes()) check_decode<TestType>(shape, false);
}

TEMPLATE_TEST_CASE("attention_decode split over blocks and merged through the workspace is the same attention",
                   "[kernels][attention_decode]", float, double) {
  for (const auto& shape : jitk_test::decode_shapes()) check_decode<TestType>(shape, true);
  // twice over one workspace: the counters are left at 0
  const DecodeShape long_context{2, 4, 1, 64, 16, {3000, 1234}};
  check_decode<TestType>(long_context, true);
  check_decode<TestType>(long_context, true);
}

TEMPLATE_TEST_CASE("attention_decode reads q in place from a fused QKV buffer with a token stride", "[kernels][attention_decode]", float,
                   double) {
  for (const auto& shape : jitk_test::decode_shapes()) {
    const std::int64_t kv_columns = 2 * shape.kv_heads * shape.head_dim;  // k's and v's, after q's
    check_decode<TestType>(shape, false, kv_columns);
    check_decode<TestType>(shape, true, kv_columns + 16 / sizeof(TestType));  // and a 16-byte pack more a row
  }
}

TEST_CASE("attention_decode splits long contexts only when the blocks would not fill the device", "[kernels][attention_decode]") {
  const Decode::Params p{jit::DType::bf16, 128, 16, 4, 1};
  const auto few = Decode::split_for(p, 8, 8, 32768, true);  // 64 blocks
  CHECK(few.splits * 64 >= Decode::kTargetBlocks);
  CHECK(few.splits * few.pages_per_split * 16 >= 32768);
  CHECK(few.splits == 8);  // 512 blocks of 4096 keys
  CHECK(Decode::split_for(p, 64, 8, 4096, true).splits == 1);  // 512 blocks: enough
  CHECK(Decode::split_for(p, 8, 8, 32768, false).splits == 1);  // no workspace
  CHECK(Decode::split_for(p, 1, 1, 100, true).splits == 1);     // too short to share
  CHECK(Decode::workspace_bytes(p, 64, 8, 4096) == 0);
}

TEST_CASE("attention_decode refuses bad tables, arguments and params with a message that names them", "[kernels][attention_decode]") {
  const Decode::Params params{jit::DType::f32, 8, 4, 2, 1};
  auto kernel = jit::get<Decode>(params, jit::Target::cpu());
  const std::int64_t kv_heads = 1, num_pages = 3, max_pages = 2;
  std::vector<float> q(2 * 2 * 8, 0.5f), o(q.size()), cache(num_pages * 4 * kv_heads * 8, 0.25f);
  std::vector<std::int32_t> table = {0, 1, 2, 1}, contexts = {5, 3};
  auto args = [&] {
    Decode::Args a{2, kv_heads, num_pages, max_pages, q.data(), cache.data(), cache.data(), table.data(), contexts.data(), o.data()};
    a.host_tables = true;
    return a;
  };
  CHECK_NOTHROW(kernel(args()));
  table[1] = 7;  // sequence 0's second page, outside the pool of 3
  CHECK_THROWS_WITH(kernel(args()), Contains("sequence 0 reads page 7") && Contains("pool of 3 pages"));
  table[1] = 1;
  table[3] = -1;  // past sequence 1's context (3 keys: one page): never read
  CHECK_NOTHROW(kernel(args()));
  contexts[1] = 9;  // longer than max_pages * page_size = 8
  CHECK_THROWS_WITH(kernel(args()), Contains("sequence 1 has context length 9") && Contains("max_pages * page_size = 8"));
  contexts[1] = -2;
  CHECK_THROWS_WITH(kernel(args()), Contains("sequence 1 has context length -2"));
  contexts[1] = 3;
  {
    auto a = args();
    a.scale = 0;
    CHECK_THROWS_WITH(kernel(a), Contains("scale"));
    a = args();
    a.scale = std::nan("");
    CHECK_THROWS_WITH(kernel(a), Contains("scale"));
    a = args();
    a.num_pages = std::int64_t{1} << 40;
    a.host_tables = false;
    CHECK_THROWS_WITH(kernel(a), Contains("num_pages") && Contains("int32"));
    a = args();
    a.kv_heads = std::int64_t{1} << 60;
    a.host_tables = false;
    CHECK_THROWS_WITH(kernel(a), Contains("kv_heads"));
  }
  {
    auto a = args();
    a.batch = -1;
    CHECK_THROWS_WITH(kernel(a), Contains("'batch' = -1 is negative"));
    a = args();
    a.q = jit::ConstPtr{};
    CHECK_THROWS_WITH(kernel(a), Contains("'q' is null"));
    a = args();
    a.block_table = nullptr;
    CHECK_THROWS_WITH(kernel(a), Contains("'block_table' is null"));
    std::vector<double> wrong(q.size());
    a = args();
    a.q = wrong.data();
    CHECK_THROWS_WITH(kernel(a), Contains("'q'") && Contains("f64"));
    a = args();
    a.q = reinterpret_cast<const float*>(reinterpret_cast<const char*>(q.data()) + 4);
    CHECK_THROWS_WITH(kernel(a), Contains("16-byte aligned"));
    // q's token stride: under the row, not whole 16-byte packs, past 64-bit offsets
    a = args();
    a.q_stride = 15;
    CHECK_THROWS_WITH(kernel(a), Contains("q_stride = 15 is less than a token's heads x head_dim = 16"));
    a.q_stride = -16;
    CHECK_THROWS_WITH(kernel(a), Contains("q_stride = -16 is negative"));
    a.q_stride = 17;
    CHECK_THROWS_WITH(kernel(a), Contains("q_stride = 17") && Contains("16-byte"));
    a.q_stride = std::int64_t{1} << 62;
    CHECK_THROWS_WITH(kernel(a), Contains("q_stride") && Contains("64-bit"));
    a.q_stride = 16;  // the packed width given: fine
    CHECK_NOTHROW(kernel(a));
    // a workspace smaller than the split needs
    std::vector<std::int32_t> long_table(2 * 600), long_contexts = {2400, 2400};
    std::iota(long_table.begin(), long_table.end(), 0);
    std::vector<float> big_cache(1200 * 4 * 8);
    unsigned char small[16] = {};
    Decode::Args b{2, 1, 1200, 600, q.data(), big_cache.data(), big_cache.data(), long_table.data(), long_contexts.data(), o.data()};
    b.host_tables = true;
    b.workspace = small;
    b.workspace_size = sizeof small;
    CHECK_THROWS_WITH(kernel(b), Contains("workspace holds 16 bytes"));
    // a workspace large enough but not 16-byte aligned (floats and atomic counters live there)
    std::vector<unsigned char> roomy(Decode::workspace_bytes(params, 2, 1, 2400) + 32);
    unsigned char* odd = roomy.data() + (16 - reinterpret_cast<std::uintptr_t>(roomy.data()) % 16) % 16 + 1;
    b.workspace = odd;
    b.workspace_size = roomy.size() - 17;
    CHECK_THROWS_WITH(kernel(b), Contains("not 16-byte aligned"));
  }
  // an empty batch: null pointers are fine
  const jit::MutPtr none{};
  CHECK_NOTHROW(kernel(Decode::Args{0, 8, 0, 0, jit::ConstPtr{}, jit::ConstPtr{}, jit::ConstPtr{}, nullptr, nullptr, none}));
  // the CPU has no 16-bit floats; q_len past 8 and a GPU page that is not a power of two are refused before compiling
  CHECK_THROWS_WITH(jit::get<Decode>({jit::DType::bf16, 128, 16, 4, 1}, jit::Target::cpu()), Contains("dtype") && Contains("f32, f64"));
  CHECK_THROWS_WITH(jit::get<Decode>({jit::DType::f32, 128, 16, 4, 9}, jit::Target::cpu()), Contains("q_len") && Contains("out of range"));
  const jit::ParamSet odd_page = Decode::to_params({jit::DType::bf16, 128, 24, 4, 1});
  CHECK_THROWS_WITH(jit::choose("attention_decode", odd_page, jit::Target::parse("cuda:sm_90")), Contains("power of two"));
  const jit::ParamSet wide = Decode::to_params({jit::DType::bf16, 512, 16, 4, 1});
  CHECK_THROWS_WITH(jit::choose("attention_decode", wide, jit::Target::parse("cuda:sm_90")), Contains("head_dim = 512"));
}

TEST_CASE("attention_decode masks pages outside the pool and keys past the table when the tables are not checked",
          "[kernels][attention_decode]") {
  // host_tables off (a GPU's tables): nothing outside the pool is read, the rest is attended
  const Decode::Params params{jit::DType::f32, 8, 4, 1, 1};
  auto kernel = jit::get<Decode>(params, jit::Target::cpu());
  std::vector<float> q(8, 1.0f), o(8, std::numeric_limits<float>::quiet_NaN()), k(2 * 4 * 8), v(2 * 4 * 8);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i / 8);  // key j's value: j
  std::vector<std::int32_t> table = {1, 1000000, -5}, contexts = {100};  // page 1, two bad pages, then past the table
  float lse = 0;
  Decode::Args a{1, 1, 2, 3, q.data(), k.data(), v.data(), table.data(), contexts.data(), o.data(), &lse, 1.0};
  kernel(a);
  // keys 0..3 of page 1 (values 4..7, scores equal): the mean 5.5, weight 4
  CHECK(o[0] == Approx(5.5));
  CHECK(o[7] == Approx(5.5));
  CHECK(lse == Approx(std::log(4.0)));
}
