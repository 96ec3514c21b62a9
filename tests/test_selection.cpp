// Choosing among a kernel's implementations: capability ranges, priority, ties, fallback, modes;
// user kernels and implementations registered from C++; scoped mappings; kernel-text overrides.
// The CUDA rules are checked through jit::choose with a named architecture (no GPU needed); the
// rest runs real CPU kernels whose implementations differ in what they compute, so a result
// shows which implementation ran.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <thread>

#include "jit/cache.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;

namespace {

// The cache folder: the parent's, when this process is the child a test started.
const std::string& cache_root() {
  static jitk_test::TempDir own;
  static const std::string root = [] {
    const char* parent = std::getenv("JITK_SELECTION_CHILD_CACHE");
    std::string dir = parent ? parent : own.str();
    ::setenv("JITK_CACHE_DIR", dir.c_str(), 1);
    return dir;
  }();
  return root;
}
const std::string& root = cache_root();

// ---- a user kernel: y = x * factor, each implementation with its own factor ----------------------
struct Scale {
  static constexpr const char* name = "test_scale";
  struct Params {
    jit::DType dtype = jit::DType::f32;
    auto fields() const { return std::tie(dtype); }
  };
  struct Args {
    std::int64_t n;
    jit::ConstPtr x;
    jit::MutPtr y;
  };
  static jit::ParamSet to_params(const Params& p) { return {{"dtype", std::string(jit::dtype_name(p.dtype))}}; }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_dtype(name, "x", p.dtype, a.x.dtype);
    jit::detail::check_dtype(name, "y", p.dtype, a.y.dtype);
    out.add_pointer(a.x.data);
    out.add_pointer(a.y.data);
    out.work_items = a.n;
  }
};

std::string scale_text(int factor) {
  return "#include \"jitk_cpu.h\"\n"
         "JITK_CPU_KERNEL {\n"
         "  const T* x = JITK_ARG(0, const T*);\n"
         "  T* y = JITK_ARG(1, T*);\n"
         "  for (i64 i = jitk_begin; i < jitk_end; ++i) y[i] = x[i] * " +
         std::to_string(factor) + ";\n}\n";
}

jit::Implementation scale_impl(std::string name, int factor, int priority = 0, bool generic = false) {
  jit::Implementation i;
  i.name = std::move(name);
  i.backend = jit::Backend::Cpu;
  i.priority = priority;
  i.generic = generic;
  i.file = "test_scale.cpp";
  i.text = scale_text(factor);
  i.note = "multiplies by " + std::to_string(factor);
  return i;
}

// Registers test_scale once per process: a generic "cpu" (x2) and a preferred "cpu-fast" (x3).
void register_scale() {
  static const bool done = [] {
    jit::register_kernel({"test_scale", "y = x * factor", {{"dtype", {"f32", "f64"}, 0, 0, "element type"}},
                          {scale_impl("cpu", 2, 0, true)}});
    jit::register_implementation("test_scale", scale_impl("cpu-fast", 3, 1));
    return true;
  }();
  (void)done;
}

// What the kernel multiplies by, and which implementation it is.
template <class K> double factor_of(const jit::Kernel<K>& k) {
  std::vector<float> x(1001, 1.5f), y(1001, -1.0f);
  k(static_cast<std::int64_t>(x.size()), x.data(), y.data());
  for (float v : y) REQUIRE(v == y[0]);
  return y[0] / 1.5;
}
double scale_now() { return factor_of(jit::get<Scale>({jit::DType::f32}, jit::Target::cpu())); }

// ---- a user kernel with CUDA implementations over several capability ranges ---------------------
jit::Implementation cuda_impl(std::string name, int lo, int hi, int priority = 0, bool generic = false) {
  jit::Implementation i;
  i.name = std::move(name);
  i.backend = jit::Backend::Cuda;
  i.min_capability = lo;
  i.max_capability = hi;
  i.priority = priority;
  i.generic = generic;
  i.file = "test_ranges.cu";
  i.text = "// never compiled here\n";
  return i;
}

void register_ranges() {
  static const bool done = [] {
    auto hopper = cuda_impl("hopper", 90, 90);
    hopper.training = true;
    auto hopper_hi = cuda_impl("hopper-hi", 90, 90, 5);
    hopper_hi.dtypes = {jit::DType::f16};
    jit::register_kernel({"test_ranges",
                          "selection rules only",
                          {{"dtype", {"f32", "f16"}, 0, 0, "element type"}},
                          {cuda_impl("generic", 70, jit::kAnyCapability, 0, true), cuda_impl("ampere-up", 80, jit::kAnyCapability),
                           hopper, hopper_hi, cuda_impl("blackwell", 100, 120)}});
    jit::register_kernel({"test_tie", "two equal candidates", {}, {cuda_impl("first", 80, 89), cuda_impl("second", 80, 89)}});
    return true;
  }();
  (void)done;
}

jit::Choice pick(const char* kernel, const char* arch, const char* dtype = "f32", jit::Selection sel = {}) {
  jit::ParamSet params;
  if (std::string(kernel) == "test_ranges") params.set("dtype", std::string(dtype));
  return jit::choose(kernel, params, jit::Target::parse(std::string("cuda:") + arch), sel);
}

}  // namespace

TEST_CASE("the narrowest capability range that holds the device wins, then the highest priority", "[selection]") {
  register_ranges();
  CHECK(pick("test_ranges", "sm_86").implementation == "ampere-up");  // [80, max] inside [70, max]
  CHECK(pick("test_ranges", "sm_90", "f16").implementation == "hopper-hi");  // [90, 90], priority 5 over 0
  CHECK(pick("test_ranges", "sm_90a", "f16").implementation == "hopper-hi");
  CHECK(pick("test_ranges", "sm_100").implementation == "blackwell");
  CHECK(pick("test_ranges", "sm_120").implementation == "blackwell");
  auto c = pick("test_ranges", "sm_86");
  CHECK_FALSE(c.fallback);
  CHECK_THAT(c.reason, Contains("[80, max]") && Contains("narrowest"));
}

TEST_CASE("an implementation that does not take the params is passed over for the next best", "[selection]") {
  register_ranges();
  auto c = pick("test_ranges", "sm_90", "f32");  // hopper-hi is f16 only
  CHECK(c.implementation == "hopper");
}

TEST_CASE("a full tie goes to the implementation registered last", "[selection]") {
  register_ranges();
  CHECK(pick("test_tie", "sm_86").implementation == "second");
}

TEST_CASE("the generic implementation is the fallback, and the reason says what was passed over", "[selection]") {
  register_ranges();
  auto c = pick("test_ranges", "sm_75");
  CHECK(c.implementation == "generic");
  CHECK(c.fallback);
  CHECK_THAT(c.reason, Contains("the generic fallback; passed over:") &&
                           Contains("'hopper' [90, 90]: capability 75 is outside"));
}

TEST_CASE("with fallback refused, a missing specialized implementation is an error naming what was missing", "[selection]") {
  register_ranges();
  jit::Selection strict;
  strict.allow_fallback = false;
  CHECK(pick("test_ranges", "sm_86", "f32", strict).implementation == "ampere-up");
  try {
    pick("test_ranges", "sm_75", "f32", strict);
    FAIL("the generic implementation was taken although fallback was refused");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::BackendUnavailable);
    CHECK_THAT(std::string(e.what()), Contains("test_ranges for cuda:sm_75") && Contains("non-generic") &&
                                          Contains("'generic' [70, max]: generic, and fallback is refused") &&
                                          Contains("'blackwell' [100, 120]: capability 75 is outside"));
  }
}

TEST_CASE("a device below every range is refused with each implementation's range", "[selection]") {
  register_ranges();
  CHECK_THROWS_WITH(pick("test_ranges", "sm_60"), Contains("none suits") && Contains("capability 60 is outside [70, max]"));
  CHECK_THROWS_WITH(pick("test_tie", "sm_90"), Contains("capability 90 is outside [80, 89]"));
}

TEST_CASE("training needs an implementation with a backward", "[selection]") {
  register_ranges();
  jit::Selection training;
  training.mode = jit::Mode::Training;
  CHECK(pick("test_ranges", "sm_90", "f16", training).implementation == "hopper");
  CHECK_THROWS_WITH(pick("test_ranges", "sm_86", "f32", training),
                    Contains("for training") && Contains("no backward"));
}

TEST_CASE("an implementation naming no dtypes takes those its backend can compile", "[selection]") {
  jit::register_kernel({"test_types", "", {{"dtype", {"f32", "f16"}, 0, 0, ""}}, {scale_impl("cpu", 2, 0, true)}});
  CHECK(jit::choose("test_types", {{"dtype", std::string("f32")}}, jit::Target::cpu()).implementation == "cpu");
  try {
    jit::choose("test_types", {{"dtype", std::string("f16")}}, jit::Target::cpu());
    FAIL("a CPU implementation took f16");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::InvalidParams);
    CHECK_THAT(std::string(e.what()), Contains("'dtype' = 'f16' is not supported; allowed: one of f32, f64"));
  }
}

TEST_CASE("training with fallback refused names both needs", "[selection]") {
  register_ranges();
  jit::Selection both;
  both.mode = jit::Mode::Training;
  both.allow_fallback = false;
  CHECK_THROWS_WITH(pick("test_ranges", "sm_86", "f32", both),
                    Contains("needs an implementation for training (one with a backward) that is specialized (non-generic)"));
}

TEST_CASE("asking for one implementation by name: unknown names and unsuitable devices are errors", "[selection]") {
  register_ranges();
  jit::Selection named;
  named.implementation = "blackwell";
  CHECK(pick("test_ranges", "sm_100", "f32", named).implementation == "blackwell");
  CHECK_THROWS_WITH(pick("test_ranges", "sm_90", "f32", named),
                    Contains("implementation 'blackwell'") && Contains("capability 90 is outside [100, 120]"));
  named.implementation = "nope";
  try {
    pick("test_ranges", "sm_90", "f32", named);
    FAIL("an unknown implementation name was accepted");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::InvalidParams);
    CHECK_THAT(std::string(e.what()), Contains("no implementation 'nope'") && Contains("generic, ampere-up, hopper"));
  }
}

TEST_CASE("shipped rms_norm has a Hopper implementation that wins on sm_90 only", "[selection]") {
  jit::ParamSet p{{"dtype", std::string("bf16")}, {"hidden", std::int64_t{4096}}};
  CHECK(jit::choose("rms_norm", p, jit::Target::parse("cuda:sm_90")).implementation == "cuda-sm90");
  CHECK(jit::choose("rms_norm", p, jit::Target::parse("cuda:sm_80")).implementation == "cuda");
  CHECK(jit::choose("rms_norm", p, jit::Target::parse("cuda:sm_100")).implementation == "cuda");
  CHECK_THROWS_WITH(jit::choose("rms_norm", p, jit::Target::cpu()), Contains("'dtype' = 'bf16' is not supported"));
  p.set("dtype", std::string("f32"));
  CHECK(jit::choose("rms_norm", p, jit::Target::cpu()).implementation == "cpu");
}

TEST_CASE("registering a bad kernel or implementation is refused and changes nothing", "[selection]") {
  register_scale();
  CHECK_THROWS_WITH(jit::register_kernel({"test_scale", "again", {}, {scale_impl("cpu", 2)}}), Contains("name is taken"));
  CHECK_THROWS_WITH(jit::register_implementation("test_scale", scale_impl("cpu-fast", 9)), Contains("name is taken"));
  auto empty_range = cuda_impl("backwards", 90, 80);
  CHECK_THROWS_WITH(jit::register_implementation("test_scale", empty_range), Contains("[90, 80] is empty"));
  CHECK_THROWS_WITH(jit::register_kernel({"Bad Name", "", {}, {scale_impl("cpu", 2)}}), Contains("lower case"));
  CHECK_THROWS_WITH(jit::register_kernel({"test_none", "", {}, {}}), Contains("no implementation"));
  CHECK_THROWS_AS(jit::register_implementation("no_such_kernel", scale_impl("x", 2)), jit::Error);
  CHECK(scale_now() == 3);
}

TEST_CASE("a user kernel runs its own text, the preferred implementation first", "[selection][kernels]") {
  register_scale();
  auto k = jit::get<Scale>({jit::DType::f32}, jit::Target::cpu());
  CHECK(k.implementation() == "cpu-fast");
  CHECK(factor_of(k) == 3);
  jit::Selection generic_only;
  generic_only.implementation = "cpu";
  auto g = jit::get<Scale>({jit::DType::f32}, jit::Target::cpu(), generic_only);
  CHECK(g.implementation() == "cpu");
  CHECK(factor_of(g) == 2);
  CHECK(g.cache_key() != k.cache_key());
}

TEST_CASE("a scoped mapping applies on its thread until it ends, and nested mappings restore the one before",
          "[selection][kernels]") {
  register_scale();
  CHECK(scale_now() == 3);
  {
    jit::KernelMapping outer({{"test_scale", scale_impl("scoped5", 5)}});
    CHECK(scale_now() == 5);
    CHECK(jit::get<Scale>({jit::DType::f32}, jit::Target::cpu()).implementation() == "scoped5");
    {
      jit::KernelMapping inner({{"test_scale", scale_impl("scoped7", 7)}});
      CHECK(scale_now() == 7);
      // another thread does not see this thread's mappings...
      double other = 0;
      std::thread([&] { other = scale_now(); }).join();
      CHECK(other == 3);
      // ...unless it is handed them
      auto mine = jit::KernelMapping::current();
      std::thread([&] {
        jit::KernelMapping adopted(mine);
        other = scale_now();
      }).join();
      CHECK(other == 7);
    }
    CHECK(scale_now() == 5);
    // a mapping with nothing for this backend leaves the usual choice
    auto gpu_only = cuda_impl("gpu-only", 70, jit::kAnyCapability);
    jit::KernelMapping unrelated({{"test_scale", gpu_only}});
    CHECK(scale_now() == 3);
  }
  CHECK(scale_now() == 3);
}

TEST_CASE("the same mapping made again reuses what the last one loaded", "[selection][kernels]") {
  register_scale();
  std::int64_t compiles = -1;
  for (int round = 0; round < 3; ++round) {
    jit::KernelMapping scoped({{"test_scale", scale_impl("scoped5", 5)}});
    CHECK(scale_now() == 5);
    if (round == 0) compiles = jit::cache::stats().compiles;
    CHECK(jit::cache::stats().compiles == compiles);
  }
  CHECK_THROWS_WITH(jit::KernelMapping({{"no_such_kernel", scale_impl("x", 2)}}), Contains("unknown kernel"));
}

TEST_CASE("mappings whose implementations differ in any one field are told apart", "[selection]") {
  register_scale();
  // The memory tier in front of jit::get keys on selection_context(): one value, one memo entry.
  const auto context_under = [](const jit::Implementation& impl) {
    jit::KernelMapping scoped({{"test_scale", impl}});
    return jit::detail::selection_context();
  };
  const jit::Implementation base = scale_impl("scoped5", 5);
  const std::uint64_t context = context_under(base);
  CHECK(context_under(base) == context);  // the same mapping made again shares its entries
  std::vector<std::pair<const char*, jit::Implementation>> variants;
  const auto vary = [&](const char* what, auto change) {
    jit::Implementation i = base;
    change(i);
    variants.emplace_back(what, i);
  };
  vary("arch_suffix", [](auto& i) { i.arch_suffix = "a"; });
  vary("fusion", [](auto& i) { i.fusion = false; });
  vary("layout.block", [](auto& i) { i.layout.block = 128; });
  vary("layout.packs_per_thread", [](auto& i) { i.layout.packs_per_thread = 2; });
  vary("layout.row_arrays", [](auto& i) { i.layout.row_arrays = 2; });
  vary("layout.tile_m", [](auto& i) { i.layout.tile_m = 32; });
  vary("layout.stages", [](auto& i) { i.layout.stages = 2; });
  vary("layout.tensor_maps", [](auto& i) { i.layout.tensor_maps = true; });
  vary("dtypes", [](auto& i) { i.dtypes = {jit::DType::f64}; });
  vary("note", [](auto& i) { i.note = "another note"; });
  for (const auto& [what, variant] : variants) {
    INFO("differs in " << what);
    CHECK(context_under(variant) != context);
  }
}

jit::TilePlan no_plan(const jit::ParamSet&) { return {"never asked"}; }
jit::TilePlan other_plan(const jit::ParamSet&) { return {"never asked either"}; }

TEST_CASE("a mapping's function members: the same plain function shares, any other callable is its own", "[selection]") {
  register_scale();
  const auto context_under = [](const jit::Implementation& impl) {
    jit::KernelMapping scoped({{"test_scale", impl}});
    return jit::detail::selection_context();
  };
  jit::Implementation planned = scale_impl("scoped5", 5);
  planned.tile_plan = no_plan;
  const std::uint64_t context = context_under(planned);
  CHECK(context_under(planned) == context);
  jit::Implementation other = planned;
  other.tile_plan = other_plan;
  CHECK(context_under(other) != context);
  // A lambda's captures cannot be compared: each mapping holding one is distinct, even from itself made again.
  jit::Implementation captured = planned;
  captured.tile_defaults = [layout = planned.layout](const jit::ParamSet&) { return layout; };
  CHECK(context_under(captured) != context_under(captured));
}

TEST_CASE("a mapping that differs only in taking fusion chains does not reuse the other's kernel", "[selection][kernels]") {
  const jit::kernels::RowParams with_relu{jit::DType::f32, 64, {}, "relu"};
  const auto ran = [&] { return jit::get<jit::kernels::RmsNorm>(with_relu, jit::Target::cpu()).implementation(); };
  const std::string registered = ran();
  jit::Implementation mine;
  for (const auto& k : jit::registered_kernels())
    for (const auto& i : k.implementations)
      if (k.name == "rms_norm" && i.backend == jit::Backend::Cpu) mine = i;
  mine.name = "mine";
  {
    jit::KernelMapping fused({{"rms_norm", mine}});
    CHECK(ran() == "mine");
  }
  mine.fusion = false;  // it now refuses the epilogue, so the registered one runs
  {
    jit::KernelMapping unfused({{"rms_norm", mine}});
    CHECK(ran() == registered);
  }
}

TEST_CASE("a user kernel is compiled once and cached like a shipped one: another process loads it from disk",
          "[selection][kernels]") {
  register_scale();
  auto k = jit::get<Scale>({jit::DType::f64}, jit::Target::cpu());
  CHECK(k.origin() == jit::Origin::Compiled);
  auto ls = jitk_test::run(jitk_test::kTool + " ls", "JITK_CACHE_DIR='" + root + "'");
  CHECK_THAT(ls.output, Contains("test_scale") && Contains("cpu-fast v1"));
  auto child = jitk_test::run("/proc/" + std::to_string(::getpid()) + "/exe '[.child]'",
                              "JITK_SELECTION_CHILD_CACHE='" + root + "'");
  INFO(child.output);
  CHECK(child.exit_code == 0);
  CHECK_THAT(child.output, Contains("child: cpu-fast from disk, factor 3"));
}

TEST_CASE("child: a user kernel from another process's cache", "[.child]") {
  register_scale();
  auto k = jit::get<Scale>({jit::DType::f64}, jit::Target::cpu());
  std::vector<double> x(100, 2.0), y(100, 0.0);
  k(100, x.data(), y.data());
  std::printf("child: %s from %s, factor %g\n", k.implementation().c_str(),
              k.origin() == jit::Origin::DiskCache ? "disk" : "a compile", y[0] / 2.0);
}

TEST_CASE("a JITK_KERNEL_DIR override is part of the key: changed text is compiled, never confused", "[selection][kernels]") {
  register_scale();
  jitk_test::TempDir dir;
  const jit::ParamSet params{{"dtype", std::string("f32")}};
  auto run_override = [&](int factor) {
    jitk_test::write_file(dir.path() / "test_scale.cpp", scale_text(factor));
    ::setenv("JITK_KERNEL_DIR", dir.str().c_str(), 1);
    auto h = jit::detail::get_kernel("test_scale", params, jit::Target::cpu());
    ::unsetenv("JITK_KERNEL_DIR");
    std::vector<float> x(10, 1.0f), y(10, 0.0f);
    jit::detail::ArgPack pack;
    Scale::pack({jit::DType::f32}, {10, x.data(), y.data()}, pack);
    h.kernel->launch(pack);
    return std::make_pair(h.key, y[0]);
  };
  const auto shipped = jit::detail::get_kernel("test_scale", params, jit::Target::cpu()).key;
  auto [key11, y11] = run_override(11);
  auto [key13, y13] = run_override(13);
  auto [same3, y3] = run_override(3);  // the registered text itself: the same content, the same key
  CHECK(y11 == 11);
  CHECK(y13 == 13);
  CHECK(key11 != shipped);
  CHECK(key13 != key11);
  CHECK(same3 == shipped);
  CHECK(y3 == 3);
}

TEST_CASE("a shipped kernel's override changes its key too", "[selection][kernels]") {
  jitk_test::TempDir dir;
  const jit::ParamSet params{{"dtype", std::string("f32")}, {"hidden", std::int64_t{96}}};
  const auto shipped = jit::detail::get_kernel("rms_norm", params, jit::Target::cpu()).key;
  auto text = jitk_test::read_file(std::string(JITK_SOURCE_DIR) + "/kernel_sources/rms_norm/rms_norm.cpp");
  jitk_test::write_file(dir.path() / "rms_norm/rms_norm.cpp", text + "\n// a development edit\n");
  ::setenv("JITK_KERNEL_DIR", dir.str().c_str(), 1);
  const auto edited = jit::detail::get_kernel("rms_norm", params, jit::Target::cpu());
  ::unsetenv("JITK_KERNEL_DIR");
  CHECK(edited.key != shipped);
  CHECK(edited.origin == jit::Origin::Compiled);
}
