// The CPU backend is a module (libjitk_cpu.so) opened at the first CPU compile or load: processes that
// run no CPU kernel never map LLVM, one that does maps it, and a missing or broken module is a clear
// error that names it, while everything else keeps working.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "examples/reference_kernels.hpp"
#include "jit/kernels.hpp"
#include "runtime/cpu/cpu_kernel.hpp"
#include "runtime/cpu/object_loader.hpp"
#include "jit/compiler.hpp"
#include "runtime/get_kernel.hpp"
#include "support/memo_store.hpp"
#include "tests/test_support.hpp"

using namespace jitk_test;

namespace {

const std::string kProbe = JITK_LEAN_PROBE;

// A cache with one CPU kernel in it, compiled by another process.
const TempDir& warm_cache() {
  static TempDir dir;
  static const bool warmed = [] {
    auto r = run(kClient + " rms_norm", cache_env(dir));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return true;
  }();
  (void)warmed;
  return dir;
}

CommandResult probe(const std::string& what, const std::string& env = "") {
  return run(kProbe + " " + what, cache_env(warm_cache()) + " " + env);
}

}  // namespace

TEST_CASE("libjitk itself links no LLVM or clang", "[lean]") {
  auto r = run("readelf -d '" + std::string(JITK_LIBRARY_FILE) + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("(NEEDED)") != std::string::npos);
  CHECK(r.output.find("libLLVM") == std::string::npos);
  CHECK(r.output.find("libclang") == std::string::npos);
}

TEST_CASE("reading the cache's stats on a warm cache never maps LLVM", "[lean]") {
  auto r = probe("stats");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("llvm_mapped=0") != std::string::npos);
}

TEST_CASE("asking for the default target never maps LLVM", "[lean]") {
  auto r = probe("default-target");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("llvm_mapped=0") != std::string::npos);
}

TEST_CASE("`jitk stats` loads no LLVM library", "[lean]") {
  // The dynamic loader's own account of every library it maps, at start and by dlopen.
  auto r = run(kTool + " stats", cache_env(warm_cache()) + " LD_DEBUG=files");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("entries:") != std::string::npos);
  CHECK(r.output.find("file=libsqlite3") != std::string::npos);  // the account is there to read
  CHECK(r.output.find("libLLVM") == std::string::npos);
  CHECK(r.output.find("libclang-cpp") == std::string::npos);
}

TEST_CASE("a process that gets a CUDA kernel maps no LLVM, whether or not a GPU is there", "[lean]") {
  auto r = probe("cuda-get");
  INFO(r.output);
  // Without a GPU the get fails with the reason; with one it succeeds: LLVM stays out either way.
  CHECK((r.output.find("outcome=ok") != std::string::npos ||
         r.output.find("outcome=error code=backend unavailable") != std::string::npos));
  CHECK(r.output.find("llvm_mapped=0") != std::string::npos);
}

TEST_CASE("a CPU compile opens the CPU module (LLVM), and a kernel found in the cache then runs without it", "[lean]") {
  TempDir cache;
  auto compiled = run(kProbe + " cpu-get", cache_env(cache));
  INFO(compiled.output);
  CHECK(compiled.exit_code == 0);
  CHECK(compiled.output.find("llvm_mapped=1") != std::string::npos);
  CHECK(fs::exists(cache.path() / "cpu-compiler-facts"));
  auto warm = run(kProbe + " cpu-get", cache_env(cache));
  INFO(warm.output);
  CHECK(warm.exit_code == 0);
  CHECK(warm.output.find("outcome=ok") != std::string::npos);
  CHECK(warm.output.find("llvm_mapped=0") != std::string::npos);
}

TEST_CASE("the remembered compiler facts are learned again when the module changes or the file is damaged", "[lean]") {
  TempDir cache, dir;
  const auto module = dir.path() / "libjitk_cpu.so";
  fs::copy_file(JITK_CPU_MODULE_BUILT, module);
  const std::string env = cache_env(cache) + " JITK_CPU_MODULE='" + module.string() + "'";
  auto llvm_of = [&] {
    auto r = run(kProbe + " cpu-get", env);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    return r.output.find("llvm_mapped=1") != std::string::npos;
  };
  CHECK(llvm_of());   // compiles
  CHECK(!llvm_of());  // cached, facts remembered
  SECTION("a new module file (as an upgrade installs it)") {
    fs::remove(module);
    fs::copy_file(JITK_CPU_MODULE_BUILT, module);
    CHECK(llvm_of());
    CHECK(!llvm_of());
  }
  SECTION("a module gone since: even a cached kernel is refused, naming where the module was looked for") {
    fs::remove(module);
    auto r = run(kProbe + " cpu-get", env);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("cannot be found (looked for " + module.string() + ")") != std::string::npos);
  }
  SECTION("a damaged or foreign facts file") {
    for (const std::string& bytes : {std::string("garbage\n"), std::string(),
                                     read_file(cache.path() / "cpu-compiler-facts").substr(0, 60),
                                     read_file(cache.path() / "cpu-compiler-facts") + "option -O0\n"}) {
      write_file(cache.path() / "cpu-compiler-facts", bytes);
      CHECK(llvm_of());   // not trusted: the module says again
      CHECK(!llvm_of());  // and it is remembered again
    }
  }
  SECTION("a facts file that is a symlink is not followed") {
    const auto elsewhere = dir.path() / "facts";
    fs::rename(cache.path() / "cpu-compiler-facts", elsewhere);
    fs::create_symlink(elsewhere, cache.path() / "cpu-compiler-facts");
    CHECK(llvm_of());
  }
}

// ---- NVRTC: opened by a compile, never by a process that finds its kernels in the cache ----------

namespace {

// One probe run of `what` against `cache`: its output, checked to have run.
std::string nvrtc_probe(const std::string& what, const TempDir& cache, const std::string& env = "") {
  auto r = run(kProbe + " " + what, cache_env(cache) + " " + env);
  INFO(r.output);
  CHECK(r.output.find("nvrtc_mapped=") != std::string::npos);
  return r.output;
}

bool have_nvrtc_here(const std::string& first_output) {
  if (first_output.find("warm=compiled") != std::string::npos) return true;
  std::printf("SKIPPED: NVRTC cannot compile here: %s\n", first_output.c_str());
  return false;
}

const char* const kNvrtcFacts = "toolkit-headers/nvrtc-library";

}  // namespace

TEST_CASE("a process that finds its CUDA kernel in the cache never maps NVRTC, and a compile does", "[lean]") {
  TempDir cache;
  const std::string compiled = nvrtc_probe("cuda-warm", cache);
  if (!have_nvrtc_here(compiled)) return;
  INFO(compiled);
  CHECK(compiled.find("nvrtc_mapped=1") != std::string::npos);
  CHECK(fs::exists(cache.path() / kNvrtcFacts));
  const std::string cached = nvrtc_probe("cuda-warm", cache);
  INFO(cached);
  CHECK(cached.find("warm=cached") != std::string::npos);  // the same key from the remembered facts
  CHECK(cached.find("nvrtc_mapped=0") != std::string::npos);
  CHECK(cached.find("outcome=ok") != std::string::npos);
  // Without a cache to remember them in, NVRTC is opened for its facts.
  const std::string no_cache = nvrtc_probe("cuda-warm", cache, "JITK_CACHE_DIR=/dev/null/nope");
  CHECK(no_cache.find("nvrtc_mapped=1") != std::string::npos);
}

TEST_CASE("asking whether CUDA can be used, or for the default target, fixes no cache setting: jit::configure may follow", "[lean]") {
  TempDir cache, other;
  nvrtc_probe("cuda-warm", cache);  // a memo to read, where NVRTC is here
  auto r = run(kProbe + " available-then-configure", cache_env(cache) + " PROBE_CACHE_DIR='" + other.str() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("configured=1") != std::string::npos);
}

TEST_CASE("NVRTC's remembered facts are learned again when where the loader looks changes, or the memo is damaged", "[lean]") {
  TempDir cache, lib_dir, home;
  if (!have_nvrtc_here(nvrtc_probe("cuda-warm", cache))) return;
  auto nvrtc_opened = [&](const std::string& env = "") {
    const std::string out = nvrtc_probe("cuda-warm", cache, env);
    INFO(out);
    CHECK(out.find("warm=cached") != std::string::npos);  // the key never changes: the same NVRTC
    return out.find("nvrtc_mapped=1") != std::string::npos;
  };
  CHECK(!nvrtc_opened());
  // NVRTC's file as the memo names it ("file <dev> <ino> <size> <mtime> <ctime> <path>").
  auto remembered_file = [&]() -> std::string {
    const std::string text(jit::detail::unseal_memo(read_file(cache.path() / kNvrtcFacts)).value_or(""));
    const auto at = text.find("\nfile ");
    if (at == std::string::npos) return "";
    std::string line = text.substr(at + 6, text.find('\n', at + 1) - at - 6);
    for (int field = 0; field < 5 && !line.empty(); ++field) line = line.substr(std::min(line.find(' '), line.size() - 1) + 1);
    return line;
  };
  SECTION("another LD_LIBRARY_PATH, then NVRTC placed in its folder, found first") {
    const char* inherited = std::getenv("LD_LIBRARY_PATH");
    const std::string env = "LD_LIBRARY_PATH='" + lib_dir.str() + (inherited && *inherited ? ":" + std::string(inherited) : "") + "'";
    CHECK(nvrtc_opened(env));
    CHECK(!nvrtc_opened(env));  // remembered for this search
    const std::string real = remembered_file();
    REQUIRE(!real.empty());
    fs::create_symlink(real, lib_dir.path() / fs::path(real).filename());  // the same library, found first now
    CHECK(nvrtc_opened(env));
    CHECK(!nvrtc_opened(env));
    CHECK(remembered_file() == (lib_dir.path() / fs::path(real).filename()).string());
  }
  SECTION("another CUDA_PATH") {
    if (std::getenv("CUDA_PATH")) {
      std::printf("SKIPPED (section): CUDA_PATH is set here\n");
      return;
    }
    CHECK(nvrtc_opened("CUDA_PATH='" + home.str() + "'"));
    CHECK(!nvrtc_opened("CUDA_PATH='" + home.str() + "'"));
    CHECK(nvrtc_opened());  // and back
  }
  SECTION("a probe of CUDA reads the memo without opening NVRTC") {
    const std::string out = nvrtc_probe("cuda-available", cache);
    INFO(out);
    CHECK(out.find("nvrtc_mapped=0") != std::string::npos);
  }
  SECTION("a damaged, torn, foreign or linked memo") {
    const auto memo = cache.path() / kNvrtcFacts;
    const std::string good = read_file(memo);
    for (const std::string& bytes : {std::string("garbage\n"), std::string(), good.substr(0, good.size() / 2),
                                     good + "archs 90\n", jit::detail::seal_memo("jitk-nvrtc-library 1\nend\n")}) {
      write_file(memo, bytes);
      CHECK(nvrtc_opened());   // not trusted: NVRTC says again
      CHECK(!nvrtc_opened());  // and it is remembered again
    }
    const auto elsewhere = lib_dir.path() / "facts";
    fs::rename(memo, elsewhere);
    fs::create_symlink(elsewhere, memo);
    CHECK(nvrtc_opened());
  }
  SECTION("a memo naming another NVRTC version: keys for it, a compile refuses to run under them, the next process recovers") {
    const auto memo = cache.path() / kNvrtcFacts;
    std::string text(*jit::detail::unseal_memo(read_file(memo)));
    const auto at = text.find("\nversion ");
    REQUIRE(at != std::string::npos);
    text.replace(at, text.find('\n', at + 1) - at, "\nversion 99 1");
    write_file(memo, jit::detail::seal_memo(text));
    const std::string out = nvrtc_probe("cuda-warm", cache);
    INFO(out);
    CHECK(out.find("warm=failed") != std::string::npos);  // another key: a compile, which opens NVRTC
    CHECK(out.find("keyed its kernels for nvrtc 99.1") != std::string::npos);
    CHECK(nvrtc_opened());   // the memo was emptied: NVRTC is asked, and the kernel found again
    CHECK(!nvrtc_opened());  // and remembered right
  }
}

TEST_CASE("a missing CPU module is a clear error naming where it was looked for", "[lean]") {
  TempDir nowhere;
  const std::string path = (nowhere.path() / "no-such-dir" / "libjitk_cpu.so").string();
  auto r = probe("cpu-get", "JITK_CPU_MODULE='" + path + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("outcome=error code=backend unavailable") != std::string::npos);
  CHECK(r.output.find("CPU backend module") != std::string::npos);
  CHECK(r.output.find(path) != std::string::npos);
  CHECK(r.output.find("JITK_CPU_MODULE") != std::string::npos);
  CHECK(r.output.find("llvm_mapped=0") != std::string::npos);

  SECTION("and `jitk info` says the same for the CPU backend") {
    auto info = run(kTool + " info", cache_env(warm_cache()) + " JITK_CPU_MODULE='" + path + "'");
    INFO(info.output);
    CHECK(info.output.find(path) != std::string::npos);
  }
  SECTION("while the cache's stats and a CUDA get are unaffected") {
    auto stats = probe("stats", "JITK_CPU_MODULE='" + path + "'");
    INFO(stats.output);
    CHECK(stats.exit_code == 0);
    auto cuda = probe("cuda-get", "JITK_CPU_MODULE='" + path + "'");
    INFO(cuda.output);
    CHECK(cuda.output.find("CPU backend module") == std::string::npos);
  }
}

TEST_CASE("a CPU module that is not a shared library is a clear error naming it", "[lean]") {
  TempDir dir;
  const auto path = dir.path() / "libjitk_cpu.so";
  write_file(path, "this is no ELF file\n");
  auto r = probe("cpu-get", "JITK_CPU_MODULE='" + path.string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("outcome=error code=backend unavailable") != std::string::npos);
  CHECK(r.output.find("CPU backend module " + path.string() + " cannot be loaded") != std::string::npos);
}

TEST_CASE("a shared library that is not jitk's CPU module is refused, naming what it lacks", "[lean]") {
  auto r = probe("cpu-get", "JITK_CPU_MODULE='" + std::string(JITK_LIBRARY_FILE) + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("outcome=error code=backend unavailable") != std::string::npos);
  CHECK(r.output.find("is not jitk's (it lacks jitk_cpu_module_abi, jitk_cpu_make_driver)") != std::string::npos);
}

// ---- libjitk's own loader of CPU objects (runtime/cpu/object_loader.hpp) ----------------------------

namespace {

const TempDir& loader_cache = own_cache_dir();

// A real object as the CPU compiler makes it: rms_norm f32, hidden 64.
const std::vector<char>& rms_norm_object() {
  static const std::vector<char> bytes = [] {
    jit::ParamSet params{{"dtype", std::string("f32")}, {"hidden", std::int64_t{64}}};
    auto s = jit::detail::resolve("rms_norm", params, jit::Target::cpu());
    return s.compiler->compile(s.unit).bytes;
  }();
  return bytes;
}

}  // namespace

TEST_CASE("the object loader loads clang's object and its entry computes rms_norm", "[lean]") {
  auto loaded = jit::detail::load_relocatable_object(rms_norm_object(), jit::detail::kEntrySymbol);
  INFO(loaded.refused);
  REQUIRE(loaded.image);
  jit::detail::CpuKernel kernel(reinterpret_cast<jit::detail::CpuEntry>(loaded.entry), loaded.image);
  const std::int64_t rows = 3, hidden = 64;
  std::vector<float> x(rows * hidden), w(hidden), y(x.size(), NAN);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.5f + static_cast<float>(i) / 64.0f;
  jit::detail::ArgPack pack;
  jit::kernels::RmsNorm::pack({jit::DType::f32, hidden}, {rows, x.data(), w.data(), y.data(), 1e-6}, pack);
  kernel.launch(pack);
  CHECK(jitk_reference::relative_l2_error(y, jitk_reference::rms_norm(rows, hidden, x, w, 1e-6)) <=
        jitk_reference::tolerance<float>());
}

TEST_CASE("the object loader refuses what is not such an object, and never crashes on damaged bytes", "[lean]") {
  using jit::detail::load_relocatable_object;
  const std::vector<char>& good = rms_norm_object();
  CHECK_FALSE(load_relocatable_object({}, "jitk_entry").image);
  CHECK(load_relocatable_object({}, "jitk_entry").refused == "truncated object");
  const std::string text(200, 'x');  // long enough for a header
  CHECK(load_relocatable_object({text.begin(), text.end()}, "jitk_entry").refused == "not an ELF object");
  CHECK(load_relocatable_object(good, "no_such_symbol").refused == "no 'no_such_symbol'");
  // Every prefix: a truncated object is refused (a prefix past the last section read may still load).
  for (std::size_t n = 0; n < good.size(); n += 7) {
    std::vector<char> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = load_relocatable_object(cut, "jitk_entry");
    if (n < 64) CHECK_FALSE(r.image);
  }
  // Bytes changed anywhere, many times over: loaded or refused with a reason, never a crash (ASan
  // checks every read and write). The damaged code is never run.
  std::mt19937_64 rng(20261125);
  int refused = 0;
  for (int round = 0; round < 4000; ++round) {
    std::vector<char> bad = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the headers and tables, where the loader reads offsets and sizes.
      const std::size_t at = rng() % 2 ? rng() % 64 : (rng() % 2 ? bad.size() - 1 - rng() % std::min<std::size_t>(bad.size(), 640) : rng() % bad.size());
      bad[at] = static_cast<char>(rng());
    }
    auto r = load_relocatable_object(bad, "jitk_entry");
    if (!r.image) {
      CHECK_FALSE(r.refused.empty());
      ++refused;
    }
  }
  CHECK(refused > 0);
}
