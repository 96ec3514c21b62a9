// The HIP backend on a machine without an AMD GPU: every shipped kernel compiles through hipRTC for
// named gfx targets into a code object for that target, an unknown target is refused without a
// crash, and `jitk info` says why HIP cannot run. Without libamdhip64 each test prints "SKIPPED: <reason>".
#include <dlfcn.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>

#include "jit/cache.hpp"
#include "jit/error.hpp"
#include "jit/hip/hiprtc_compiler.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/kernels.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/get_kernel.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;

namespace {

const jitk_test::TempDir& cache_dir = jitk_test::own_cache_dir();

// True when hipRTC can be opened; otherwise prints the line ctest turns into "skipped".
bool have_hiprtc() {
  auto why = jit::detail::HiprtcCompiler::unavailable_reason();
  if (why.empty()) return true;
  std::printf("SKIPPED: hipRTC is unavailable: %s\n", why.c_str());
  return false;
}

constexpr std::uint16_t kEmAmdgpu = 224;
constexpr std::uint32_t kShtSymtab = 2, kShtDynsym = 11;

template <class V> V read_at(const std::vector<char>& b, std::size_t at) {
  V v{};
  if (at + sizeof(V) <= b.size()) std::memcpy(&v, b.data() + at, sizeof(V));
  return v;
}

// The parts of an ELF64 code object the tests check.
struct CodeObject {
  bool elf64 = false;
  std::uint16_t machine = 0;
  std::uint32_t flags = 0;
  std::vector<std::string> symbols;  // .symtab and .dynsym
};

CodeObject parse_elf(const std::vector<char>& b) {
  CodeObject co;
  co.elf64 = b.size() > 64 && std::memcmp(b.data(), "\x7f" "ELF", 4) == 0 && b[4] == 2;
  if (!co.elf64) return co;
  co.machine = read_at<std::uint16_t>(b, 18);
  co.flags = read_at<std::uint32_t>(b, 48);
  const auto shoff = read_at<std::uint64_t>(b, 40);
  const auto shentsize = read_at<std::uint16_t>(b, 58), shnum = read_at<std::uint16_t>(b, 60);
  auto section = [&](std::size_t i) { return shoff + i * shentsize; };
  for (std::size_t i = 0; i < shnum; ++i) {
    const auto type = read_at<std::uint32_t>(b, section(i) + 4);
    if (type != kShtSymtab && type != kShtDynsym) continue;
    const auto offset = read_at<std::uint64_t>(b, section(i) + 24), size = read_at<std::uint64_t>(b, section(i) + 32);
    const auto link = read_at<std::uint32_t>(b, section(i) + 40);
    const auto entsize = read_at<std::uint64_t>(b, section(i) + 56);
    const auto strings = read_at<std::uint64_t>(b, section(link) + 24);
    for (std::uint64_t s = offset; entsize && s + entsize <= offset + size && s + entsize <= b.size(); s += entsize) {
      const auto name = read_at<std::uint32_t>(b, s);
      if (strings + name < b.size()) co.symbols.emplace_back(b.data() + strings + name);
    }
  }
  return co;
}

// A value for an integer param: rows of 4096, heads of 128 (rotary_dim: the whole head).
std::int64_t sample_int(const jit::ParamSpec& p) { return std::clamp<std::int64_t>(p.name == "hidden" ? 4096 : 128, p.min, p.max); }

// Every (kernel, params) of the shipped kernels' HIP implementations the tests compile: each dtype
// by each choice of the other text params (gelu_and_mul's approximations, rotary's styles and sources).
std::vector<std::pair<std::string, jit::ParamSet>> hip_specializations() {
  std::vector<std::pair<std::string, jit::ParamSet>> out;
  const auto& r = jit::detail::registry();
  for (std::size_t k = 0; k < r.shipped; ++k) {
    const auto& def = r.kernels[k];
    if (std::none_of(def.implementations.begin(), def.implementations.end(),
                     [](const jit::Implementation& i) { return i.backend == jit::Backend::Hip; }))
      continue;  // CPU-only so far (gemm)
    const auto& impl = jit::detail::generic_implementation(def, jit::Backend::Hip);
    std::vector<jit::ParamSet> sets = {{}};
    for (const auto& p : def.params) {
      if (p.chain || p.fallback) continue;  // tunables (a fallback) keep their defaults, as in test_nvrtc
      std::vector<jit::ParamValue> values;
      if (p.name == "dtype")
        for (const auto& d : jit::detail::dtypes_of(def, impl)) values.emplace_back(d);
      else if (p.is_text())
        values.assign(p.choices.begin(), p.choices.end());
      else
        values.emplace_back(sample_int(p));
      std::vector<jit::ParamSet> next;
      for (const auto& set : sets)
        for (const auto& v : values) {
          next.push_back(set);
          next.back().set(p.name, v);
        }
      sets = std::move(next);
    }
    for (auto& params : sets) {
      out.emplace_back(def.name, params);
      // and once with fusion chains, where the kernel takes them (the generated code under hipRTC)
      if (std::any_of(def.params.begin(), def.params.end(), [](const jit::ParamSpec& p) { return p.chain; })) {
        params.set("prologue", std::string("add>store>gelu_tanh"));
        params.set("epilogue", std::string("mul_vec>add_scalar>tanh"));
        out.emplace_back(def.name, params);
      }
    }
  }
  return out;
}

void check_every_kernel_compiles_for(const std::string& arch, std::uint32_t mach) {
  const jit::Target target{jit::Backend::Hip, arch, 0};
  std::map<std::string, double> ms_by_kernel;
  int compiled = 0;
  for (const auto& [kernel, params] : hip_specializations()) {
    INFO(kernel << " (" << params.to_string() << ") for " << target.to_string());
    auto s = jit::detail::resolve(kernel, params, target);
    CHECK(s.unit.implementation == "hip");
    auto artifact = s.compiler->compile(s.unit);
    ms_by_kernel[kernel] += artifact.compile_ms;
    auto co = parse_elf(artifact.bytes);
    REQUIRE(co.elf64);
    CHECK(co.machine == kEmAmdgpu);
    CHECK((co.flags & 0xff) == mach);
    CHECK(std::find(co.symbols.begin(), co.symbols.end(), "jitk_entry") != co.symbols.end());
    ++compiled;
  }
  // 9 kernels in f32, f16 and bf16, gelu_and_mul twice, 4 of them with chains; rotary_embedding's 2 styles x 2 sources
  CHECK(compiled >= 27 + 15 + 12);
  for (const auto& [kernel, ms] : ms_by_kernel) std::printf("hip:%s %s: %.0f ms of hipRTC\n", arch.c_str(), kernel.c_str(), ms);
}

}  // namespace

TEST_CASE("every shipped kernel compiles for hip:gfx90a into a gfx90a code object with jitk_entry", "[hip]") {
  if (!have_hiprtc()) return;
  check_every_kernel_compiles_for("gfx90a", 0x3f);
}

TEST_CASE("every shipped kernel compiles for hip:gfx1030 into a gfx1030 code object with jitk_entry", "[hip]") {
  if (!have_hiprtc()) return;
  check_every_kernel_compiles_for("gfx1030", 0x36);
}

TEST_CASE("warming compiles a HIP target with no AMD GPU and caches it", "[hip]") {
  if (!have_hiprtc()) return;
  std::vector<jit::cache::WarmItem> items = {
      {"rms_norm", jit::Target::parse("hip:gfx90a"), {{"dtype", std::string("bf16")}, {"hidden", std::int64_t{1000}}}, "test"}};
  auto first = jit::cache::warm(items, 1);
  REQUIRE(first.size() == 1);
  INFO(first[0].error);
  CHECK(first[0].outcome == jit::cache::WarmResult::Outcome::Compiled);
  CHECK(jit::cache::warm(items, 1)[0].outcome == jit::cache::WarmResult::Outcome::AlreadyCached);
}

TEST_CASE("warming HIP targets from several threads at once compiles each (hipRTC is not thread-safe)", "[hip]") {
  if (!have_hiprtc()) return;
  std::vector<jit::cache::WarmItem> items;
  for (std::int64_t hidden : {97, 98, 99, 100, 101, 102})
    items.push_back({"silu_and_mul", jit::Target::parse("hip:gfx90a"), {{"dtype", std::string("f16")}, {"hidden", hidden}}, "test"});
  for (const auto& r : jit::cache::warm(items, 4)) {
    INFO(r.error);
    CHECK(r.outcome == jit::cache::WarmResult::Outcome::Compiled);
  }
}

TEST_CASE("a gfx target this hipRTC does not know is refused with the list it knows, not a crash", "[hip]") {
  if (!have_hiprtc()) return;
  try {
    jit::detail::resolve("saxpy", {{"dtype", std::string("f32")}}, jit::Target::parse("hip:gfx942"));
    FAIL("hip:gfx942 was accepted");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::BackendUnavailable);
    CHECK_THAT(e.what(), Contains("cannot compile for gfx942") && Contains("gfx90a"));
  }
}

TEST_CASE("jitk info says why HIP is unavailable on a machine without an AMD GPU", "[hip]") {
  if (!have_hiprtc()) return;
  jit::Target hip{jit::Backend::Hip, "", 0};
  std::string reason;
  for (const auto& s : jit::detail::backend_states())
    if (s.backend == jit::Backend::Hip) reason = s.reason;
  if (reason.empty()) {
    std::printf("SKIPPED: this machine has an AMD GPU\n");
    return;
  }
  auto r = jitk_test::run(jitk_test::kTool + " info", jitk_test::cache_env(cache_dir));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("hip: unavailable: " + reason + " (hipRTC can compile for named gfx targets)"));
  try {
    jit::get<jit::kernels::Saxpy>({jit::DType::f32}, hip);
    FAIL("a HIP kernel was loaded without an AMD GPU");
  } catch (const jit::Error& e) {
    CHECK(e.code() == jit::ErrorCode::BackendUnavailable);
    CHECK_THAT(e.what(), Contains(reason));
  }
}

TEST_CASE("saxpy runs on an AMD GPU and matches the reference", "[hip]") {
  std::string reason = "hipRTC is unavailable";
  for (const auto& s : jit::detail::backend_states())
    if (s.backend == jit::Backend::Hip) reason = s.reason;
  if (!reason.empty()) {
    std::printf("SKIPPED: no usable AMD GPU: %s\n", reason.c_str());
    return;
  }
  // Device memory through the HIP runtime jitk opened (jitk has no public HIP memory helpers yet).
  void* hip = jit::detail::HiprtcCompiler::library_handle();
  auto hip_malloc = reinterpret_cast<int (*)(void**, std::size_t)>(::dlsym(hip, "hipMalloc"));
  auto hip_free = reinterpret_cast<int (*)(void*)>(::dlsym(hip, "hipFree"));
  auto hip_memcpy = reinterpret_cast<int (*)(void*, const void*, std::size_t, int)>(::dlsym(hip, "hipMemcpy"));
  auto hip_sync = reinterpret_cast<int (*)()>(::dlsym(hip, "hipDeviceSynchronize"));
  REQUIRE((hip_malloc && hip_free && hip_memcpy && hip_sync));
  constexpr int kHostToDevice = 1, kDeviceToHost = 2;
  const std::int64_t n = 100'003;
  std::vector<float> x(n), y(n);
  for (std::int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 97) * 0.5f, y[i] = static_cast<float>(i % 13);
  const std::size_t bytes = n * sizeof(float);
  void *dx = nullptr, *dy = nullptr;
  REQUIRE(hip_malloc(&dx, bytes) == 0);
  REQUIRE(hip_malloc(&dy, bytes) == 0);
  hip_memcpy(dx, x.data(), bytes, kHostToDevice);
  hip_memcpy(dy, y.data(), bytes, kHostToDevice);
  auto k = jit::get<jit::kernels::Saxpy>({jit::DType::f32}, jit::Target{jit::Backend::Hip, "", 0});
  k(n, 1.25, static_cast<float*>(dx), static_cast<float*>(dy));
  REQUIRE(hip_sync() == 0);
  std::vector<float> out(n);
  hip_memcpy(out.data(), dy, bytes, kDeviceToHost);
  hip_free(dx);
  hip_free(dy);
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(out[i] - (1.25 * x[i] + y[i])));
  CHECK(worst <= 1e-5);
}
