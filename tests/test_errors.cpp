// jit::Error's fields: a compile error carries the compiler's log, its options and the numbered
// source (CPU through clang, CUDA through NVRTC and HIP through hipRTC for named targets, no GPU
// needed), a refusal for lack of shared memory carries required and limit, and what() stays the
// whole readable message.
#include <algorithm>
#include <memory>
#include <thread>
#include <cstdlib>
#include <chrono>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>

#include "jit/cuda.hpp"
#include "jit/cuda/nvrtc_compiler.hpp"
#include "jit/hip/hiprtc_compiler.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/kernels.hpp"
#include "jit/registry.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/get_kernel.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

constexpr const char* kBadLine = "this is not C++;";

// A user kernel whose every implementation (CPU, CUDA, HIP) has a text that cannot compile.
struct Broken {
  static constexpr const char* name = "test_broken";
  struct Params {
    jit::DType dtype = jit::DType::f32;
    auto fields() const { return std::tie(dtype); }
  };
  struct Args {
    std::int64_t n;
    jit::MutPtr y;
  };
  static jit::ParamSet to_params(const Params& p) { return {{"dtype", std::string(jit::dtype_name(p.dtype))}}; }
  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    out.add_pointer(a.y.data);
    out.work_items = a.n;
  }
};

jit::Implementation broken_impl(jit::Backend backend, std::string name, std::string file) {
  jit::Implementation i;
  i.name = std::move(name);
  i.backend = backend;
  i.generic = true;
  i.file = std::move(file);
  i.text = std::string("// a kernel text that does not compile\n") + kBadLine + "\n";
  return i;
}

void register_broken() {
  static const bool done = [] {
    jit::register_kernel({Broken::name, "never compiles", {{"dtype", {"f32"}, 0, 0, "element type"}},
                          {broken_impl(jit::Backend::Cpu, "cpu", "test_broken.cpp"),
                           broken_impl(jit::Backend::Cuda, "cuda", "test_broken.cu"),
                           broken_impl(jit::Backend::Hip, "hip", "test_broken_hip.cu")}});
    return true;
  }();
  (void)done;
}

// The checks every compiler's error passes.
void check_compile_error(const jit::Error& e, const std::string& target, const std::string& file) {
  CHECK(e.kind() == jit::ErrorKind::CompileFailed);
  CHECK(e.code() == e.kind());
  CHECK(e.kernel() == Broken::name);
  CHECK(e.params() == "dtype=f32");
  CHECK(e.fields().target == target);
  CHECK_FALSE(e.fields().compiler.empty());
  CHECK_THAT(e.message(), Contains("compiling test_broken (dtype=f32)") && Contains(e.fields().compiler));
  CHECK_THAT(e.log(), Contains("error"));
  CHECK_FALSE(e.options().empty());
  REQUIRE(e.source());
  CHECK(e.source()->file == file);
  CHECK(e.source()->origin == "registered");
  // numbered: "  N | text", the bad line among them under its number in the unit
  const std::string& numbered = e.source()->numbered;
  CHECK_THAT(numbered, Contains(std::string("| ") + kBadLine) && Contains("    1 | "));
  // ... and mapped to the registered text, where it is line 2
  const int unit_line = e.source()->first_text_line + 1;
  CHECK_THAT(numbered, Contains(std::to_string(unit_line) + " | " + kBadLine));
  CHECK(e.source()->text_line(unit_line) == 2);
  CHECK(e.source()->text_line(1) == 0);  // jitk's prelude
  CHECK_FALSE(e.resource());
  // what() is still the whole message: the fields follow the person's message
  const std::string what = e.what();
  CHECK(what.rfind(e.message(), 0) == 0);
  CHECK_THAT(what, Contains("options:") && Contains(e.options().front()) && Contains("compiler log:\n" + e.log()) &&
                       Contains(numbered));
}

bool has_option(const jit::Error& e, const std::string& option) {
  return std::find(e.options().begin(), e.options().end(), option) != e.options().end();
}

}  // namespace

TEST_CASE("an error without fields is its message", "[errors]") {
  const jit::Error e(jit::ErrorCode::CacheIo, "index.db: disk full");
  CHECK(e.kind() == jit::ErrorKind::CacheIo);
  CHECK(e.message() == "index.db: disk full");
  CHECK(std::string(e.what()) == "index.db: disk full");
  CHECK(e.kernel().empty());
  CHECK(e.log().empty());
  CHECK(e.options().empty());
  CHECK_FALSE(e.source());
  CHECK_FALSE(e.resource());
  const jit::Error copy = e;  // copies share the fields
  CHECK(&copy.fields() == &e.fields());
}

TEST_CASE("a CPU compile error carries clang's log, its options with the CPU, and the numbered source", "[errors]") {
  register_broken();
  const auto s = jit::detail::resolve(Broken::name, {{"dtype", std::string("f32")}}, jit::Target::cpu());
  try {
    jit::get<Broken>({}, jit::Target::cpu());
    FAIL("a broken kernel text compiled");
  } catch (const jit::Error& e) {
    INFO(e.what());
    check_compile_error(e, "cpu", "test_broken.cpp");
    CHECK(has_option(e, s.compiler->arch()));  // "-target-cpu <arch>"
    CHECK(has_option(e, "-target-cpu"));
  }
}

TEST_CASE("an NVRTC compile error for a named arch carries the log, the options with the arch, and the numbered source",
          "[errors]") {
  if (auto why = jit::detail::NvrtcCompiler::unavailable_reason(); !why.empty()) {
    std::printf("SKIPPED: NVRTC is unavailable: %s\n", why.c_str());
    return;
  }
  register_broken();
  const jit::detail::NvrtcCompiler nvrtc("sm_90");
  const auto unit = jit::detail::specialize(jit::detail::find_kernel(Broken::name), {{"dtype", std::string("f32")}},
                                            jit::Backend::Cuda);
  try {
    nvrtc.compile(unit);
    FAIL("a broken kernel text compiled");
  } catch (const jit::Error& e) {
    INFO(e.what());
    check_compile_error(e, "cuda:sm_90", "test_broken.cu");
    CHECK(has_option(e, "--gpu-architecture=sm_90"));
    CHECK_THAT(e.fields().compiler, Contains("nvrtc"));
  }
  // and a sound text compiles through the same steps into a CUBIN (an ELF)
  const auto saxpy = jit::detail::specialize(jit::detail::find_kernel("saxpy"), {{"dtype", std::string("f32")}},
                                             jit::Backend::Cuda);
  const auto artifact = nvrtc.compile(saxpy);
  REQUIRE(artifact.bytes.size() > 4);
  CHECK(std::string(artifact.bytes.data(), 4) == "\x7f" "ELF");
}

TEST_CASE("JITK_NVRTC_PCH: NVRTC's -pch for a compile alone and not beside another (unset, auto), always with 1, never with 0",
          "[errors]") {
  if (auto why = jit::detail::NvrtcCompiler::unavailable_reason(); !why.empty()) {
    std::printf("SKIPPED: NVRTC is unavailable: %s\n", why.c_str());
    return;
  }
  register_broken();
  const auto broken = jit::detail::specialize(jit::detail::find_kernel(Broken::name), {{"dtype", std::string("f32")}},
                                              jit::Backend::Cuda);
  // The options a compile was given, as its error reports them (the broken text never compiles).
  auto options_of = [&](const jit::detail::NvrtcCompiler& nvrtc) {
    try {
      nvrtc.compile(broken);
    } catch (const jit::Error& e) {
      return e.options();
    }
    FAIL("a broken kernel text compiled");
    return std::vector<std::string>{};
  };
  auto has_pch = [](const std::vector<std::string>& options) { return std::find(options.begin(), options.end(), "-pch") != options.end(); };
  const char* old = std::getenv("JITK_NVRTC_PCH");
  const std::string saved = old ? old : "";
  struct Restore {
    bool had;
    std::string value;
    ~Restore() { had ? ::setenv("JITK_NVRTC_PCH", value.c_str(), 1) : ::unsetenv("JITK_NVRTC_PCH"); }
  } restore{old != nullptr, saved};
  // A compiler of each setting (the variable is read when a compiler is made); "" is unset, and a
  // value that is none of them is warned about once and taken as auto.
  struct Setting {
    const char* value;
    bool alone, beside;  // -pch expected
  };
  const Setting settings[] = {{nullptr, true, false}, {"auto", true, false}, {"1", true, true}, {"0", false, false},
                              {"yes\n\x1b[2J", true, false}};
  std::vector<std::unique_ptr<jit::detail::NvrtcCompiler>> compilers;
  for (const auto& s : settings) {
    s.value ? ::setenv("JITK_NVRTC_PCH", s.value, 1) : ::unsetenv("JITK_NVRTC_PCH");
    compilers.push_back(std::make_unique<jit::detail::NvrtcCompiler>("sm_90"));
  }
  REQUIRE(jit::detail::NvrtcCompiler::compiles_running() == 0);
  for (std::size_t i = 0; i < compilers.size(); ++i) {
    INFO("JITK_NVRTC_PCH=" << (settings[i].value ? settings[i].value : "(unset)") << ", alone");
    CHECK(has_pch(options_of(*compilers[i])) == settings[i].alone);
  }
  // beside a long compile (the Hopper gemm's: seconds), of another arch's compiler
  const auto gemm = jit::detail::resolve("gemm", jit::kernels::Gemm::to_params(jit::kernels::Gemm::Params{jit::DType::bf16}),
                                         jit::Target::parse("cuda:sm_90"));
  std::atomic<bool> long_done{false};
  std::thread long_compile([&] {
    try {
      gemm.compiler->compile(gemm.unit);
    } catch (...) {
    }
    long_done = true;
  });
  for (int i = 0; i < 30000 && jit::detail::NvrtcCompiler::compiles_running() == 0 && !long_done; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool beside = jit::detail::NvrtcCompiler::compiles_running() > 0;
  std::vector<bool> pch_beside;
  for (const auto& c : compilers) pch_beside.push_back(has_pch(options_of(*c)));
  const bool still_beside = !long_done;
  long_compile.join();
  if (beside && still_beside) {
    for (std::size_t i = 0; i < compilers.size(); ++i) {
      INFO("JITK_NVRTC_PCH=" << (settings[i].value ? settings[i].value : "(unset)") << ", beside another compile");
      CHECK(pch_beside[i] == settings[i].beside);
    }
  } else {
    WARN("the long compile was not running beside the short ones; nothing to check");
  }
  CHECK(jit::detail::NvrtcCompiler::compiles_running() == 0);
  CHECK(has_pch(options_of(*compilers[0])));  // alone again
}

TEST_CASE("a hipRTC compile error for a named gfx target carries the log, the options with the arch, and the source",
          "[errors]") {
  if (auto why = jit::detail::HiprtcCompiler::unavailable_reason(); !why.empty()) {
    std::printf("SKIPPED: hipRTC is unavailable: %s\n", why.c_str());
    return;
  }
  register_broken();
  const jit::detail::HiprtcCompiler hiprtc("gfx90a");
  const auto unit = jit::detail::specialize(jit::detail::find_kernel(Broken::name), {{"dtype", std::string("f32")}},
                                            jit::Backend::Hip);
  try {
    hiprtc.compile(unit);
    FAIL("a broken kernel text compiled");
  } catch (const jit::Error& e) {
    INFO(e.what());
    check_compile_error(e, "hip:gfx90a", "test_broken_hip.cu");
    CHECK(has_option(e, "--offload-arch=gfx90a"));
  }
}

TEST_CASE("a tile that does not fit shared memory is refused with required and limit", "[errors]") {
  const jit::ParamSet params{{"dtype", std::string("f16")}, {"a_layout", std::string("row")},
                             {"b_layout", std::string("row")}, {"tile_m", std::int64_t{256}},
                             {"tile_n", std::int64_t{256}}, {"tile_k", std::int64_t{128}},
                             {"stages", std::int64_t{6}}};
  try {
    jit::choose("gemm", params, jit::Target::parse("cuda:sm_80"));
    FAIL("a tile over the shared memory was accepted");
  } catch (const jit::Error& e) {
    INFO(e.what());
    CHECK(e.kind() == jit::ErrorKind::InvalidParams);
    CHECK(e.kernel() == "gemm");
    CHECK_THAT(e.params(), Contains("tile_m=256"));
    REQUIRE(e.resource());
    CHECK(e.resource()->resource == "shared memory bytes a block");
    CHECK(e.resource()->limit == 227 * 1024);
    CHECK(e.resource()->required > e.resource()->limit);
    CHECK_THAT(e.what(), Contains(std::to_string(e.resource()->required) + " bytes of shared memory") &&
                             Contains(std::to_string(e.resource()->limit)));
  }
}

TEST_CASE("a parameter refused for another reason carries the kernel and params but no resource", "[errors]") {
  try {
    jit::choose("gemm", {{"dtype", std::string("f16")}, {"a_layout", std::string("row")}, {"b_layout", std::string("row")},
                         {"tile_m", std::int64_t{24}}},
                jit::Target::parse("cuda:sm_80"));
    FAIL("a tile_m of 24 was accepted");
  } catch (const jit::Error& e) {
    INFO(e.what());
    CHECK(e.kind() == jit::ErrorKind::InvalidParams);
    CHECK(e.kernel() == "gemm");
    CHECK_FALSE(e.resource());
  }
}

TEST_CASE("a CUDA graph capture on the default stream, or without a GPU, is refused with a clear error", "[errors]") {
  CHECK_THROWS_WITH(jit::cuda::Graph::capture(jit::Stream{}, [] {}), Catch::Matchers::Contains("default stream cannot be captured"));
  if (jit::cuda::available()) return;
  int not_a_stream = 0;
  try {
    jit::cuda::Graph::capture(jit::Stream{&not_a_stream}, [] {});
    FAIL("captured without a GPU");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::BackendUnavailable);
    CHECK_THAT(e.what(), Catch::Matchers::Contains("CUDA"));
  }
}

TEST_CASE("a GPU driver's failing result reads as its name and number, or the backend's fallback when the driver names none", "[errors]") {
  CHECK(jit::detail::driver_result_text("CUDA_ERROR_OUT_OF_MEMORY", "CUDA error", 2) == "CUDA_ERROR_OUT_OF_MEMORY (2)");
  CHECK(jit::detail::driver_result_text(nullptr, "CUDA error", 999) == "CUDA error (999)");
  CHECK(jit::detail::driver_result_text(nullptr, "hipError", -1) == "hipError (-1)");
}
