// jitk_bench: times jitk's hot path, first use, cold compile and kernels against plain baselines (--json: one object a line).
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/reference_kernels.hpp"
#include "jit/cache.hpp"
#include "jit/kernels.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/chain_codegen.hpp"
#include "jit/specializer.hpp"
#include "raw_clang_orc.hpp"
#include "runtime/cpu/thread_pool.hpp"
#include "warm_path_stages.hpp"

// The same kernel text compiled ahead of time by g++ -O3 -march=native (bench/CMakeLists.txt).
#define JITK_BENCH_AOT(kernel, dtype) extern "C" void aot_##kernel##_##dtype(void* const*, long long, long long);
#include "aot_table.inc"
extern "C" void aot_gemm_blocked_f32(void* const*, long long, long long);  // bench/aot_gemm_blocked.cpp
#undef JITK_BENCH_AOT

std::unique_ptr<jitk_bench::RawClangOrc> jitk_bench::open_raw_clang_orc() {
  void* lib = ::dlopen(JITK_BENCH_RAW_LIBRARY, RTLD_NOW | RTLD_LOCAL);  // kept open: its code runs until exit
  auto* make = lib ? reinterpret_cast<RawClangOrc* (*)()>(::dlsym(lib, "jitk_bench_new_raw_clang_orc")) : nullptr;
  if (!make) {
    const char* why = ::dlerror();
    std::fprintf(stderr, "jitk_bench: cannot open the raw clang + ORC baseline %s: %s\n", JITK_BENCH_RAW_LIBRARY,
                 why ? why : "no entry point");
    std::exit(1);
  }
  return std::unique_ptr<RawClangOrc>(make());
}

namespace {

namespace fs = std::filesystem;
namespace kernels = jit::kernels;
using Clock = std::chrono::steady_clock;
using jitk_bench::CpuEntry;

// ---- configuration ---------------------------------------------------------------------------------
constexpr std::int64_t kHidden = JITK_BENCH_HIDDEN;  // row length of every row kernel (= the AOT wrappers')
constexpr std::int64_t kRows = 4096;                 // rows per launch of a row kernel
constexpr std::int64_t kSaxpyN = 16 << 20;          // saxpy elements: 64 MiB per f32 vector
// A handful of rows, like one decode step: first use is then about getting the kernel, not running it.
constexpr std::int64_t kFirstUseRows = 16;
// Rows the raw and jitk kernels of the compile bench are checked on (compile time does not depend on it).
constexpr std::int64_t kCompileCheckRows = 4;
constexpr double kEps = 1e-6;
constexpr double kSaxpyA = 0.5;
// memcpy work is split in bytes; a task smaller than this costs more to hand out than to copy.
constexpr std::int64_t kMemcpyMinGrainBytes = 256 << 10;
constexpr double kBytesPerGB = 1e9;
// Keys in the get_hot baseline map. libstdc++ scans maps of up to 20 string keys linearly without
// hashing; a process holding a few dozen kernels is past that, so the baseline hashes like jitk does.
constexpr int kMapEntries = 64;

struct Config {
  bool json = false;
  bool quick = false;
  std::string filter;  // run only the benches whose group name contains it
  // get_hot: calls per repetition and repetitions (the median repetition is reported).
  std::int64_t get_calls = 1'000'000;
  int get_reps = 7;
  int first_use_reps = 5;  // child processes per cold/warm side
  int compile_reps = 7;    // cold compiles per side (jitk, raw) in the compile child
  int kernel_warmup = 3;
  int kernel_reps = 20;

  void make_quick() {
    quick = true;
    get_calls = 200'000;
    get_reps = 3;
    first_use_reps = 3;
    compile_reps = 3;
    kernel_warmup = 1;
    kernel_reps = 5;
  }
};

// ---- results ------------------------------------------------------------------------------------------
struct Result {
  std::string bench;
  double value = 0;
  std::string unit;
  double baseline = 0;
  std::string baseline_name;
  double ratio = 0;
  std::string ratio_def;  // "value/baseline" or "baseline/value"
  std::string note;
};

Result make_result(std::string bench, double value, std::string unit, double baseline, std::string baseline_name,
                   bool inverse_ratio = false, std::string note = "") {
  Result r{std::move(bench), value, std::move(unit), baseline, std::move(baseline_name), 0, "", std::move(note)};
  r.ratio = inverse_ratio ? baseline / value : value / baseline;
  r.ratio_def = inverse_ratio ? "baseline/value" : "value/baseline";
  return r;
}

void print_json(const Result& r) {
  nlohmann::json j = {{"bench", r.bench},       {"value", r.value}, {"unit", r.unit},
                      {"baseline", r.baseline}, {"baseline_name", r.baseline_name},
                      {"ratio", r.ratio},       {"ratio_def", r.ratio_def}};
  if (!r.note.empty()) j["note"] = r.note;
  std::cout << j.dump() << std::endl;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.1f" : v >= 1 ? "%.3f" : "%.4f", v);
  return buf;
}

void print_table(const std::vector<Result>& results) {
  std::printf("%-26s %12s %-5s %12s  %-24s %8s  %s\n", "bench", "value", "unit", "baseline", "baseline_name", "ratio",
              "ratio_def");
  for (const auto& r : results)
    std::printf("%-26s %12s %-5s %12s  %-24s %8s  %s\n", r.bench.c_str(), fmt(r.value).c_str(), r.unit.c_str(),
                fmt(r.baseline).c_str(), r.baseline_name.c_str(), fmt(r.ratio).c_str(), r.ratio_def.c_str());
  std::printf("\nnotes:\n");
  for (const auto& r : results)
    if (!r.note.empty()) std::printf("  %s: %s\n", r.bench.c_str(), r.note.c_str());
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "jitk_bench: FAILED: %s\n", what.c_str());
  std::exit(1);
}

void progress(const Config& cfg, const std::string& what) {
  std::fprintf(stderr, "jitk_bench: %s\n", what.c_str());
}

// ---- timing helpers ---------------------------------------------------------------------------------
double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Makes the compiler assume `p`'s memory is read and written here, so loop bodies are not hoisted.
template <class T> inline void escape(const T* p) { asm volatile("" : : "g"(p) : "memory"); }

// ---- buffers --------------------------------------------------------------------------------------------
// Cache-line aligned like a real tensor, so vector loads never straddle lines (std::vector's large
// blocks sit 16 bytes past a page start).
constexpr std::size_t kAlign = 64;

template <class T> class Buffer {
 public:
  explicit Buffer(std::size_t n) : n_(n) {
    std::size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    p_.reset(static_cast<T*>(std::aligned_alloc(kAlign, std::max(bytes, kAlign))));
    if (!p_) fail("out of memory for a " + std::to_string(bytes) + "-byte buffer");
    fill(T(0));  // touches every page now, not inside a timed run
  }
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  T& operator[](std::size_t i) { return p_.get()[i]; }
  void fill(T v) { std::fill(data(), data() + n_, v); }
  void poison() { fill(std::numeric_limits<T>::quiet_NaN()); }  // an unwritten output then fails the check
  void randomize(std::mt19937& rng, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (std::size_t i = 0; i < n_; ++i) p_.get()[i] = static_cast<T>(d(rng));
  }
  std::vector<T> to_vector() const { return std::vector<T>(data(), data() + n_); }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T[], Free> p_;
  std::size_t n_;
};

// Fails the whole run when out is off the float64 reference: a bench never times a broken kernel.
template <class T> void check(const std::string& what, const Buffer<T>& out, const std::vector<double>& ref) {
  double err = jitk_reference::relative_l2_error(out.to_vector(), ref);
  if (!(err <= jitk_reference::tolerance<T>()))
    fail(what + ": relative L2 error " + std::to_string(err) + " > tolerance " +
         std::to_string(jitk_reference::tolerance<T>()));
}

// ---- temporary cache folders and child processes ---------------------------------------------------
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::string pattern = (fs::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (!::mkdtemp(pattern.data())) fail("mkdtemp " + pattern + ": " + std::strerror(errno));
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  void empty_out() {
    fs::remove_all(path_);
    fs::create_directory(path_);
  }

 private:
  fs::path path_;
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct ChildRun {
  std::string output;
  double wall_ms = 0;  // exec to exit, as the parent sees it
};

// Re-executes this binary with a hidden child flag and its own cache root; fails the run if the child does.
ChildRun run_child(const std::string& flags, const fs::path& cache_dir) {
  static const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string command = "JITK_CACHE_DIR=" + shell_quote(cache_dir.string()) + " " + shell_quote(self) + " " + flags;
  auto t0 = Clock::now();
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) fail("cannot start " + command);
  ChildRun run;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) run.output.append(buf, n);
  int status = ::pclose(pipe);
  run.wall_ms = ms_since(t0);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("child '" + flags + "' failed (status " + std::to_string(status) + "); its output:\n" + run.output);
  return run;
}

// The value of "name=" in a child's "k=v k=v" line.
std::string field(const std::string& line, const std::string& name) {
  std::istringstream in(line);
  for (std::string word; in >> word;)
    if (word.rfind(name + "=", 0) == 0) return word.substr(name.size() + 1);
  fail("child output has no '" + name + "': " + line);
}

// ---- the kernel text, rendered as jit/specializer.cpp renders it -------------------------------------
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string& kernel_text(const std::string& file) {
  static std::unordered_map<std::string, std::string> texts;
  auto it = texts.find(file);
  if (it == texts.end()) it = texts.emplace(file, read_file(std::string(JITK_BENCH_KERNEL_DIR) + "/" + file)).first;
  return it->second;
}

// The specialized unit of a row kernel: prelude + kernel file, from the source tree, independently of jit/.
std::string render_row_kernel(const std::string& kernel, const std::string& dtype, std::int64_t hidden) {
  std::string upper_dtype = dtype;
  for (auto& c : upper_dtype) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string upper_kernel = kernel;
  for (auto& c : upper_kernel) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto& impl = jit::detail::generic_implementation(jit::detail::find_kernel(kernel), jit::Backend::Cpu);
  std::ostringstream out;
  out << "// jitk specialization of " << kernel << " (dtype=" << dtype << ",hidden=" << hidden << "), implementation "
      << impl.name << " v" << impl.version << "\n"
      << "#define JITK_ENTRY jitk_entry\n"
      << "#define JITK_KERNEL_" << upper_kernel << " 1\n"
      << "#define JITK_IMPLEMENTATION_CPU 1\n"
      << "#define JITK_DTYPE_" << upper_dtype << " 1\n"
      << "typedef " << (dtype == "f64" ? "double" : "float") << " T;\n"
      << "#define JITK_HIDDEN " << hidden << "LL\n";
  const std::string text = kernel_text(impl.file);
  if (text.find("jitk_chain") != std::string::npos)  // the (empty) fusion chain, as jitk generates it
    out << "#include \"jitk_cpu.h\"  // the chain's math\n" << jit::detail::chain_code({}, false);
  out << text;
  return out.str();
}

// Fails unless the baseline renders exactly the text jitk compiles (same prelude, same kernel file).
void check_same_text(const std::string& kernel, const std::string& dtype, std::int64_t hidden) {
  const auto& def = jit::detail::find_kernel(kernel);
  jit::ParamSet params = jit::detail::validate_params(def, {{"dtype", dtype}, {"hidden", hidden}});
  jit::detail::SourceUnit unit = jit::detail::specialize(def, params, jit::Backend::Cpu);
  if (unit.main.text != render_row_kernel(kernel, dtype, hidden))
    fail("the raw baseline's text for " + kernel + " differs from jitk's (" + unit.text_origin +
         "); is JITK_KERNEL_DIR set, or the build stale?\njitk's text:\n" + unit.main.text);
  for (const auto& h : unit.headers)
    if (h.text != kernel_text(h.name)) fail("kernel header " + h.name + " differs between jitk and the source tree");
}

// ---- kernel runs shared by several benches ------------------------------------------------------------
// Runs an entry point the way the library's CPU driver does: the descriptor packs the arguments and
// picks min_grain, the same thread pool splits [0, work_items).
template <class K> void launch_entry(CpuEntry entry, const typename K::Params& p, const typename K::Args& a) {
  jit::detail::ArgPack pack;
  K::pack(p, a, pack);
  struct Call {
    CpuEntry entry;
    void* const* args;
  } call{entry, pack.pointers()};
  jit::detail::ThreadPool::instance().parallel_for(
      pack.work_items, pack.min_grain,
      [](void* c, std::int64_t b, std::int64_t e) {
        auto* call = static_cast<Call*>(c);
        call->entry(call->args, b, e);
      },
      &call);
}

// Random rms_norm inputs of `rows` rows and their float64 reference output.
template <class T> struct RmsNormCase {
  std::int64_t rows, hidden;
  Buffer<T> x, w, y;
  std::vector<double> ref;
  RmsNormCase(std::int64_t rows, std::int64_t hidden, std::mt19937& rng)
      : rows(rows), hidden(hidden), x(rows * hidden), w(hidden), y(rows * hidden) {
    x.randomize(rng, -3, 3);
    w.randomize(rng, 0.5, 1.5);
    ref = jitk_reference::rms_norm(rows, hidden, x.to_vector(), w.to_vector(), kEps);
  }
  kernels::RmsNorm::Args args() { return {rows, x.data(), w.data(), y.data(), kEps}; }
};

// ---- 1. get_hot_ns ----------------------------------------------------------------------------------------
Result bench_get_hot(const Config& cfg) {
  progress(cfg, "get_hot_ns: jit::get of a loaded kernel vs unordered_map<string, void*>::find");
  const kernels::RmsNorm::Params params{jit::DType::f32, kHidden};
  const jit::Target target = jit::Target::cpu();
  auto kernel = jit::get<kernels::RmsNorm>(params, target);
  std::mt19937 rng(1);
  RmsNormCase<float> c(kFirstUseRows, kHidden, rng);
  c.y.poison();
  kernel.launch(c.args());
  check("rms_norm f32 (get_hot)", c.y, c.ref);

  const std::string key = kernel.cache_key();
  std::unordered_map<std::string, void*> map;
  map.emplace(key, const_cast<void*>(static_cast<const void*>(&kernel)));
  for (int i = 1; i < kMapEntries; ++i) {  // other keys of the same shape: 32 hex digits
    char other[40];
    std::snprintf(other, sizeof other, "%016llx%016llx", 0x5eedull * i, 0xc0ffeeull + i);
    map.emplace(other, nullptr);
  }
  escape(&params);
  escape(&target);
  escape(&key);

  std::vector<double> jitk_ns, map_ns;
  for (int rep = 0; rep < cfg.get_reps; ++rep) {
    auto t0 = Clock::now();
    for (std::int64_t i = 0; i < cfg.get_calls; ++i) {
      auto k = jit::get<kernels::RmsNorm>(params, target);
      escape(&k);
    }
    jitk_ns.push_back(ms_since(t0) * 1e6 / cfg.get_calls);
    t0 = Clock::now();
    for (std::int64_t i = 0; i < cfg.get_calls; ++i) {
      auto it = map.find(key);
      escape(&it->second);
    }
    map_ns.push_back(ms_since(t0) * 1e6 / cfg.get_calls);
  }
  if (jit::get<kernels::RmsNorm>(params, target).cache_key() != key) fail("get_hot: a hot get returned another kernel");
  return make_result("get_hot_ns", median(jitk_ns), "ns", median(map_ns), "unordered_map_find", false,
                     std::to_string(cfg.get_calls) + " calls x " + std::to_string(cfg.get_reps) + " reps; map of " +
                         std::to_string(kMapEntries) + " keys of " + std::to_string(key.size()) + " chars");
}

// ---- 2. first use: cold compile vs disk cache, each in a fresh process --------------------------------
// Child: time the first jit::get and the first run of rms_norm f32, and check the output.
int child_first_use() {
  std::mt19937 rng(2);
  RmsNormCase<float> c(kFirstUseRows, kHidden, rng);
  c.y.poison();
  auto t0 = Clock::now();
  auto kernel = jit::get<kernels::RmsNorm>({jit::DType::f32, kHidden}, jit::Target::cpu());
  double get_ms = ms_since(t0);
  auto t1 = Clock::now();
  kernel.launch(c.args());
  double run_ms = ms_since(t1);
  check("rms_norm f32 (first use)", c.y, c.ref);
  std::printf("get_ms=%.6f run_ms=%.6f origin=%s\n", get_ms, run_ms,
              kernel.origin() == jit::Origin::Compiled ? "compiled" : "disk");
  return 0;
}

// ---- 2b. the host side of a warm first use, stage by stage (--host-path TARGET N) ---------------------
// Child: the warm path's stages for rms_norm (bf16 on a CUDA target, f32 on the CPU) up to the blob
// read, as jit::get takes them; a named CUDA arch needs no GPU (the compiler is NVRTC alone). One
// "<ms>\t<stage>" line a stage on stdout; "remembered=0|1 cached=0|1" last.
int child_host_path(const std::string& target_text) {
  const jit::Target target = jit::Target::parse(target_text);
  const bool cpu = target.backend == jit::Backend::Cpu;
  const jit::ParamSet params = cpu ? jit::kernels::RmsNorm::to_params({jit::DType::f32, kHidden})
                                   : jit::kernels::RmsNorm::to_params({jit::DType::bf16, kHidden});
  auto t0 = Clock::now();
  jitk_bench::WarmStages w = jitk_bench::warm_path_stages(target, "rms_norm", params, /*device=*/false);
  const double all = ms_since(t0);
  double sum = 0;
  long faults = 0;
  for (std::size_t i = 0; i < w.ms.size(); ++i) {
    std::printf("%.6f\t%s\n", w.ms[i].second, w.ms[i].first.c_str());
    std::printf("%ld\t%s: page faults\n", w.faults[i], w.ms[i].first.c_str());
    sum += w.ms[i].second;
    faults += w.faults[i];
  }
  std::printf("%ld\t%s\n", faults, "sum of the stages: page faults");
  std::printf("%.6f\t%s\n", sum, "sum of the stages");
  if (!w.bytes) jit::detail::ensure_on_disk(w.s);  // the next process finds it
  std::printf("remembered=%d cached=%d all_ms=%.6f\n", w.remembered ? 1 : 0, w.bytes ? 1 : 0, all);
  return 0;
}

// Parent: `runs` children against one cache (two untimed first: they compile and remember the key);
// the median of each stage. JITK_CACHE_DIR, when set, is the cache used (else a temporary one).
int host_path(const std::string& target_text, int runs) {
  std::optional<TempDir> temp;
  fs::path cache;
  if (const char* d = std::getenv("JITK_CACHE_DIR"); d && *d) cache = d;
  else temp.emplace("jitk-bench-host-path-"), cache = temp->path();
  const std::string flags = "--child-host-path " + shell_quote(target_text);
  for (int i = 0; i < 2; ++i) run_child(flags, cache);
  std::vector<std::string> order;
  std::unordered_map<std::string, std::vector<double>> ms;
  std::vector<double> wall;
  for (int r = 0; r < runs; ++r) {
    ChildRun run = run_child(flags, cache);
    wall.push_back(run.wall_ms);
    std::istringstream in(run.output);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("remembered=", 0) == 0) {
        if (field(line, "remembered") != "1" || field(line, "cached") != "1") fail("host_path: a child was not warm: " + line);
        continue;
      }
      const auto tab = line.find('\t');
      if (tab == std::string::npos) continue;
      const std::string what = line.substr(tab + 1);
      if (!ms.count(what)) order.push_back(what);
      ms[what].push_back(std::stod(line.substr(0, tab)));
    }
  }
  std::printf("host side of a warm first use, %s, median of %d processes (ms):\n", target_text.c_str(), runs);
  for (const auto& what : order) std::printf("  %-48s %.4f\n", what.c_str(), median(ms[what]));
  std::printf("  %-48s %.3f\n", "whole process, as the parent sees it", median(wall));
  return 0;
}

std::vector<Result> bench_first_use(const Config& cfg) {
  progress(cfg, "first_use: first jit::get + run of rms_norm f32 in fresh processes, cold and warm disk cache");
  TempDir cache("jitk-bench-first-use-");
  std::vector<double> cold, warm, cold_get, warm_get, cold_wall, warm_wall;
  // Alternating keeps slow drift (frequency, page cache) from landing on one side only.
  for (int rep = 0; rep < cfg.first_use_reps; ++rep) {
    for (bool is_cold : {true, false}) {
      if (is_cold) cache.empty_out();
      ChildRun run = run_child("--child-first-use", cache.path());
      std::string origin = field(run.output, "origin");
      if (origin != (is_cold ? "compiled" : "disk"))
        fail(std::string("first_use: a ") + (is_cold ? "cold" : "warm") + " child got its kernel by '" + origin + "'");
      double get_ms = std::stod(field(run.output, "get_ms")), run_ms = std::stod(field(run.output, "run_ms"));
      (is_cold ? cold : warm).push_back(get_ms + run_ms);
      (is_cold ? cold_get : warm_get).push_back(get_ms);
      (is_cold ? cold_wall : warm_wall).push_back(run.wall_ms);
    }
  }
  double c = median(cold), w = median(warm);
  std::string note_tail = " (" + std::to_string(kFirstUseRows) + " rows x " + std::to_string(kHidden) + ", " +
                          std::to_string(cfg.first_use_reps) + " processes each)";
  return {
      make_result("first_use_warm_ms", w, "ms", c, "cold_compile_ms", true,
                  "get " + fmt(median(warm_get)) + " ms of it; whole process " + fmt(median(warm_wall)) + " ms" +
                      note_tail),
      make_result("cold_compile_ms", c, "ms", w, "first_use_warm_ms", false,
                  "get " + fmt(median(cold_get)) + " ms of it; whole process " + fmt(median(cold_wall)) + " ms" +
                      note_tail),
  };
}

// ---- 3. cold-compile overhead: jit::get on an empty cache vs raw clang + ORC ---------------------------
// A fresh hidden size per repetition, so neither the memory tier nor the disk cache ever hits.
std::int64_t compile_hidden(int rep) { return kHidden + 1 + rep; }

// Runs a compiled rms_norm f32 entry on a few rows and checks it, so neither side is a broken kernel.
void check_rms_norm_entry(const std::string& what, CpuEntry entry, std::int64_t hidden) {
  std::mt19937 rng(3);
  RmsNormCase<float> c(kCompileCheckRows, hidden, rng);
  c.y.poison();
  launch_entry<kernels::RmsNorm>(entry, {jit::DType::f32, hidden}, c.args());
  check(what, c.y, c.ref);
}

// Child: warms both pipelines up (LLVM init, LLJIT, the cache's database), then alternates cold
// compiles of distinct specializations; prints one line per repetition.
int child_compile_overhead(int reps) {
  const auto raw_orc = jitk_bench::open_raw_clang_orc();
  jitk_bench::RawClangOrc& raw = *raw_orc;
  jitk_bench::RawTiming raw_timing;
  auto compile_raw = [&](std::int64_t hidden) {
    return raw.compile_and_load("rms_norm/rms_norm.cpp", render_row_kernel("rms_norm", "f32", hidden), "jitk_cpu.h",
                                kernel_text("jitk_cpu.h"), &raw_timing);
  };
  auto get_jitk = [](std::int64_t hidden) {
    auto k = jit::get<kernels::RmsNorm>({jit::DType::f32, hidden}, jit::Target::cpu());
    if (k.origin() != jit::Origin::Compiled) fail("compile_overhead: jitk did not compile hidden=" + std::to_string(hidden));
    return k;
  };

  constexpr std::int64_t kWarmupHidden = kHidden;  // not among compile_hidden(rep)
  check_same_text("rms_norm", "f32", kWarmupHidden);
  check_rms_norm_entry("rms_norm f32 (raw clang + ORC)", compile_raw(kWarmupHidden), kWarmupHidden);
  {
    std::mt19937 rng(4);
    RmsNormCase<float> c(kCompileCheckRows, kWarmupHidden, rng);
    c.y.poison();
    get_jitk(kWarmupHidden).launch(c.args());
    check("rms_norm f32 (jitk, compile bench)", c.y, c.ref);
  }

  for (int rep = 0; rep < reps; ++rep) {
    std::int64_t hidden = compile_hidden(rep);
    double jitk_ms = 0, raw_ms = 0;
    CpuEntry raw_entry = nullptr;
    for (int side = 0; side < 2; ++side) {
      bool jitk_side = (side == 0) == (rep % 2 == 0);  // alternate which goes first
      auto t0 = Clock::now();
      if (jitk_side) {
        auto k = get_jitk(hidden);
        escape(&k);
        jitk_ms = ms_since(t0);
      } else {
        raw_entry = compile_raw(hidden);
        raw_ms = ms_since(t0);
      }
    }
    if (rep == 0) check_rms_norm_entry("rms_norm f32 (raw clang + ORC, rep 0)", raw_entry, hidden);
    std::printf("jitk_ms=%.6f raw_ms=%.6f raw_clang_ms=%.6f raw_load_ms=%.6f hidden=%lld\n", jitk_ms, raw_ms,
                raw_timing.compile_ms, raw_timing.load_ms, static_cast<long long>(hidden));
  }
  // jitk's own timer around clang, from its cache index: splits jitk's time into clang and the rest.
  for (const auto& a : jit::cache::list()) std::printf("artifact params=%s clang_ms=%.6f\n", a.params.c_str(), a.compile_ms);
  std::printf("cpu=%s\n", raw.target_cpu().c_str());
  return 0;
}

Result bench_compile_overhead(const Config& cfg) {
  progress(cfg, "cold_compile_overhead: jit::get on an empty cache vs raw clang + ORC on the same text");
  TempDir cache("jitk-bench-compile-");
  ChildRun run = run_child("--child-compile-overhead " + std::to_string(cfg.compile_reps), cache.path());
  std::vector<double> jitk_ms, raw_ms, raw_clang_ms, raw_load_ms, jitk_clang_ms;
  std::vector<std::string> timed_params;  // the specializations timed (not the warm-up one)
  std::unordered_map<std::string, double> clang_ms_by_params;
  std::string cpu;
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("jitk_ms=", 0) == 0) {
      jitk_ms.push_back(std::stod(field(line, "jitk_ms")));
      raw_ms.push_back(std::stod(field(line, "raw_ms")));
      raw_clang_ms.push_back(std::stod(field(line, "raw_clang_ms")));
      raw_load_ms.push_back(std::stod(field(line, "raw_load_ms")));
      timed_params.push_back("dtype=f32,hidden=" + field(line, "hidden"));
    } else if (line.rfind("artifact ", 0) == 0) {
      clang_ms_by_params[field(line, "params")] = std::stod(field(line, "clang_ms"));
    } else if (line.rfind("cpu=", 0) == 0) {
      cpu = field(line, "cpu");
    }
  }
  if (jitk_ms.size() != static_cast<std::size_t>(cfg.compile_reps)) fail("compile child output:\n" + run.output);
  for (const auto& p : timed_params)
    if (auto it = clang_ms_by_params.find(p); it != clang_ms_by_params.end()) jitk_clang_ms.push_back(it->second);
  double j = median(jitk_ms), r = median(raw_ms);
  return make_result("cold_compile_overhead", j, "ms", r, "raw_clang_orc_ms", false,
                     "rms_norm f32, median of " + std::to_string(cfg.compile_reps) + " cold compiles each; jitk adds " +
                         fmt(j - r) + " ms; jitk's clang " + fmt(median(jitk_clang_ms)) + " ms (its own timer), raw clang " +
                         fmt(median(raw_clang_ms)) + " + ORC load " + fmt(median(raw_load_ms)) + " ms; -target-cpu " + cpu);
}

// ---- 4. kernels: jitk vs g++ AOT vs memcpy -------------------------------------------------------------
struct Bandwidth {
  double jitk_gbps, aot_gbps, memcpy_gbps;
};

// Copies src to dst on the same pool, split in byte ranges. Counted as read + write bytes, like the
// kernels; neither count includes the line fill a store to an uncached line costs (write-allocate),
// which memcpy and the out-of-place kernels pay and saxpy's in-place y does not, so saxpy can pass 1.
void parallel_memcpy(void* dst, const void* src, std::int64_t bytes) {
  struct Copy {
    char* dst;
    const char* src;
  } copy{static_cast<char*>(dst), static_cast<const char*>(src)};
  jit::detail::ThreadPool::instance().parallel_for(
      bytes, kMemcpyMinGrainBytes,
      [](void* c, std::int64_t b, std::int64_t e) {
        auto* copy = static_cast<Copy*>(c);
        std::memcpy(copy->dst + b, copy->src + b, static_cast<std::size_t>(e - b));
      },
      &copy);
}

// Times jitk, AOT and a memcpy moving the same bytes (half read, half written), interleaved per
// repetition. Every working set here is several times the last-level cache, so each run streams
// from memory and the buffers need no rotation; warm-up runs settle page tables and clocks.
Bandwidth measure(const Config& cfg, double bytes, const std::function<void()>& jitk_run,
                  const std::function<void()>& aot_run) {
  std::int64_t copy_bytes = static_cast<std::int64_t>(bytes / 2);
  Buffer<char> src(copy_bytes), dst(copy_bytes);
  src.fill(1);
  std::vector<double> jitk_ms, aot_ms, copy_ms;
  auto timed = [](const std::function<void()>& f) {
    auto t0 = Clock::now();
    f();
    return ms_since(t0);
  };
  for (int i = 0; i < cfg.kernel_warmup + cfg.kernel_reps; ++i) {
    bool keep = i >= cfg.kernel_warmup;
    // Alternating which goes first keeps whatever one run leaves in the caches from favouring a side.
    double a = 0, b = 0;
    if (i % 2 == 0) {
      a = timed(jitk_run);
      b = timed(aot_run);
    } else {
      b = timed(aot_run);
      a = timed(jitk_run);
    }
    auto t0 = Clock::now();
    parallel_memcpy(dst.data(), src.data(), copy_bytes);
    double c = ms_since(t0);
    if (keep) {
      jitk_ms.push_back(a);
      aot_ms.push_back(b);
      copy_ms.push_back(c);
    }
  }
  auto gbps = [](double moved, double ms) { return moved / (ms * 1e-3) / kBytesPerGB; };
  return {gbps(bytes, median(jitk_ms)), gbps(bytes, median(aot_ms)), gbps(2.0 * copy_bytes, median(copy_ms))};
}

std::vector<Result> kernel_results(const std::string& name, double bytes, const Bandwidth& bw, const Config& cfg) {
  std::string mb = fmt(bytes / (1 << 20)) + " MiB moved per run, median of " + std::to_string(cfg.kernel_reps);
  return {
      make_result(name + "_gbps", bw.jitk_gbps, "GB/s", bw.aot_gbps, "gxx_O3_march_native", false, mb),
      make_result(name + "_vs_memcpy", bw.jitk_gbps, "GB/s", bw.memcpy_gbps, "parallel_memcpy", false,
                  "ratio = fraction of memcpy bandwidth; AOT reaches " + fmt(bw.aot_gbps / bw.memcpy_gbps)),
  };
}

template <class T> constexpr jit::DType dtype_v = jit::dtype_of<T>();
template <class T> std::string dtype_str() { return std::string(jit::dtype_name(dtype_v<T>)); }

template <class T> std::vector<Result> bench_saxpy(const Config& cfg, CpuEntry aot) {
  const std::string name = "saxpy_" + dtype_str<T>();
  progress(cfg, name + ": n=" + std::to_string(kSaxpyN));
  const kernels::Saxpy::Params p{dtype_v<T>};
  auto k = jit::get<kernels::Saxpy>(p, jit::Target::cpu());
  std::mt19937 rng(5);
  Buffer<T> x(kSaxpyN), y(kSaxpyN), y0(kSaxpyN);
  x.randomize(rng, -3, 3);
  y0.randomize(rng, -3, 3);
  auto ref = jitk_reference::saxpy(kSaxpyA, x.to_vector(), y0.to_vector());
  kernels::Saxpy::Args args{kSaxpyN, kSaxpyA, x.data(), y.data()};
  std::copy(y0.data(), y0.data() + kSaxpyN, y.data());
  k.launch(args);
  check(name + " (jitk)", y, ref);
  std::copy(y0.data(), y0.data() + kSaxpyN, y.data());
  launch_entry<kernels::Saxpy>(aot, p, args);
  check(name + " (g++ AOT)", y, ref);
  // y keeps accumulating a * x over the timed runs; the values stay far from overflow.
  double bytes = 3.0 * kSaxpyN * sizeof(T);  // read x, read y, write y
  auto bw = measure(cfg, bytes, [&] { k.launch(args); }, [&] { launch_entry<kernels::Saxpy>(aot, p, args); });
  return kernel_results(name, bytes, bw, cfg);
}

// One AdamW step over kSaxpyN f32 parameters: param, m, v read and written, grads read (28 bytes
// an element); the parameters move a little each timed run and stay far from overflow.
template <class T> std::vector<Result> bench_adamw(const Config& cfg, CpuEntry aot) {
  const std::string name = "adamw_" + dtype_str<T>();
  progress(cfg, name + ": n=" + std::to_string(kSaxpyN));
  const kernels::AdamW::Params p{dtype_v<T>};
  auto k = jit::get<kernels::AdamW>(p, jit::Target::cpu());
  std::mt19937 rng(7);
  Buffer<T> param(kSaxpyN), grad(kSaxpyN), m(kSaxpyN), v(kSaxpyN);
  param.randomize(rng, -1, 1);
  grad.randomize(rng, -1, 1);
  const auto p0 = param.to_vector();
  kernels::AdamW::Args args{kSaxpyN, param.data(), grad.data(), m.data(), v.data(), 1e-3, 1};
  for (int side = 0; side < 2; ++side) {  // each from the same start, checked against float64
    std::copy(p0.begin(), p0.end(), param.data());
    m.fill(T(0));
    v.fill(T(0));
    std::vector<double> rp(p0.begin(), p0.end()), rm(kSaxpyN, 0.0), rv(kSaxpyN, 0.0);
    jitk_reference::adamw(rp, grad.to_vector(), rm, rv, 1e-3, 1, 0.9, 0.999, 1e-8, 0.01);
    if (side == 0) k.launch(args);
    else launch_entry<kernels::AdamW>(aot, p, args);
    check(name + (side == 0 ? " (jitk)" : " (g++ AOT)"), param, rp);
  }
  const double bytes = 7.0 * kSaxpyN * sizeof(T);
  auto bw = measure(cfg, bytes, [&] { k.launch(args); }, [&] { launch_entry<kernels::AdamW>(aot, p, args); });
  return kernel_results(name, bytes, bw, cfg);
}

// gemm f32 (row-major, 1024^3 by default: 2 GFLOP a run), GFLOP/s vs a straightforward blocked
// version compiled ahead of time (bench/aot_gemm_blocked.cpp), both on jitk's pool, and the
// best of a few tile shapes (what autotuning would pick) vs the default tile.
std::vector<Result> bench_gemm(const Config& cfg) {
  const std::int64_t n = cfg.quick ? 256 : 1024;
  progress(cfg, "gemm_f32: m=n=k=" + std::to_string(n));
  std::mt19937 rng(8);
  Buffer<float> a(n * n), b(n * n), c(n * n);
  a.randomize(rng, -1, 1);
  b.randomize(rng, -1, 1);
  const kernels::Gemm::Args args{n, n, n, 1.0, a.data(), n, b.data(), n, 0.0, c.data(), n};
  // check both against float64 on a few rows
  auto check_rows = [&](const std::string& what) {
    double num = 0, den = 0;
    for (std::int64_t i = 0; i < n; i += n / 8)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < n; ++k) s += double(a.data()[i * n + k]) * double(b.data()[k * n + j]);
        num += (c.data()[i * n + j] - s) * (c.data()[i * n + j] - s);
        den += s * s;
      }
    if (!(std::sqrt(num / den) <= 1e-5)) fail(what + ": gemm result off the float64 reference");
  };
  const kernels::Gemm::Params def;
  auto k = jit::get<kernels::Gemm>(def, jit::Target::cpu());
  c.poison();
  k.launch(args);
  check_rows("gemm (jitk)");
  c.poison();
  launch_entry<kernels::Gemm>(aot_gemm_blocked_f32, def, args);
  check_rows("gemm (g++ AOT blocked)");
  const double flop = 2.0 * n * n * n;
  auto gflops = [&](auto&& run) {
    std::vector<double> t;
    run();
    for (int r = 0; r < (cfg.quick ? 3 : 7); ++r) {
      auto t0 = std::chrono::steady_clock::now();
      run();
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return flop / t[t.size() / 2] / 1e9;
  };
  const double ours = gflops([&] { k.launch(args); });
  const double aot = gflops([&] { launch_entry<kernels::Gemm>(aot_gemm_blocked_f32, def, args); });
  double best = ours;
  std::string best_tile = "4x64x256";
  for (auto [tm, tn, tk] : {std::tuple{2, 128, 256}, {8, 32, 256}, {4, 128, 128}, {8, 64, 512}}) {
    kernels::Gemm::Params p = def;
    p.tile_m = tm;
    p.tile_n = tn;
    p.tile_k = tk;
    auto kt = jit::get<kernels::Gemm>(p, jit::Target::cpu());
    const double g = gflops([&] { kt.launch(args); });
    if (g > best) best = g, best_tile = std::to_string(tm) + "x" + std::to_string(tn) + "x" + std::to_string(tk);
  }
  // B column-major (nn.Linear's x W^T): the same values laid out transposed, checked, timed
  // against row-major B (packed into panels, it should be as fast)
  Buffer<float> bt(n * n);
  for (std::int64_t kk = 0; kk < n; ++kk)
    for (std::int64_t j = 0; j < n; ++j) bt.data()[j * n + kk] = b.data()[kk * n + j];
  kernels::Gemm::Params col = def;
  col.b_layout = kernels::Gemm::Layout::ColMajor;
  auto kc = jit::get<kernels::Gemm>(col, jit::Target::cpu());
  const kernels::Gemm::Args col_args{n, n, n, 1.0, a.data(), n, bt.data(), n, 0.0, c.data(), n};
  c.poison();
  kc.launch(col_args);
  check_rows("gemm, B column-major (jitk)");
  const double bcol = gflops([&] { kc.launch(col_args); });
  return {make_result("gemm_f32_gflops", ours, "GFLOP/s", aot, "gxx_O3_march_native_blocked", false, "default tile 4x64x256"),
          make_result("gemm_f32_best_tile_gflops", best, "GFLOP/s", ours, "default_tile", false, "best tile " + best_tile),
          make_result("gemm_f32_b_col_gflops", bcol, "GFLOP/s", ours, "b_row_major_same_run", false, "B column-major, panels")};
}

// The row kernels share their shape: inputs read once, one output written once.
template <class K, class T, class MakeCase>
std::vector<Result> bench_rows(const Config& cfg, const std::string& kernel, CpuEntry aot, MakeCase make_case) {
  const std::string name = kernel + "_" + dtype_str<T>();
  progress(cfg, name + ": rows=" + std::to_string(kRows) + " hidden=" + std::to_string(kHidden));
  const typename K::Params p{dtype_v<T>, kHidden};
  auto k = jit::get<K>(p, jit::Target::cpu());
  std::mt19937 rng(6);
  auto c = make_case(rng);  // {args, out buffer, reference, bytes}
  c.out->poison();
  k.launch(c.args);
  check(name + " (jitk)", *c.out, c.ref);
  c.out->poison();
  launch_entry<K>(aot, p, c.args);
  check(name + " (g++ AOT)", *c.out, c.ref);
  auto bw = measure(cfg, c.bytes, [&] { k.launch(c.args); }, [&] { launch_entry<K>(aot, p, c.args); });
  return kernel_results(name, c.bytes, bw, cfg);
}

template <class K, class T> struct RowCase {
  typename K::Args args;
  Buffer<T>* out;
  std::vector<double> ref;
  double bytes;
  std::vector<std::unique_ptr<Buffer<T>>> keep;  // owns the buffers args point into
};

template <class T> std::vector<Result> bench_rms_norm(const Config& cfg, CpuEntry aot) {
  return bench_rows<kernels::RmsNorm, T>(cfg, "rms_norm", aot, [](std::mt19937& rng) {
    RowCase<kernels::RmsNorm, T> c;
    auto x = std::make_unique<Buffer<T>>(kRows * kHidden), w = std::make_unique<Buffer<T>>(kHidden),
         y = std::make_unique<Buffer<T>>(kRows * kHidden);
    x->randomize(rng, -3, 3);
    w->randomize(rng, 0.5, 1.5);
    c.ref = jitk_reference::rms_norm(kRows, kHidden, x->to_vector(), w->to_vector(), kEps);
    c.args = {kRows, x->data(), w->data(), y->data(), kEps};
    c.out = y.get();
    c.bytes = double(x->bytes() + w->bytes() + y->bytes());
    c.keep.push_back(std::move(x));
    c.keep.push_back(std::move(w));
    c.keep.push_back(std::move(y));
    return c;
  });
}

template <class T> std::vector<Result> bench_softmax(const Config& cfg, CpuEntry aot) {
  return bench_rows<kernels::Softmax, T>(cfg, "softmax", aot, [](std::mt19937& rng) {
    RowCase<kernels::Softmax, T> c;
    auto x = std::make_unique<Buffer<T>>(kRows * kHidden), y = std::make_unique<Buffer<T>>(kRows * kHidden);
    x->randomize(rng, -3, 3);
    c.ref = jitk_reference::softmax(kRows, kHidden, x->to_vector());
    c.args = {kRows, x->data(), y->data()};
    c.out = y.get();
    c.bytes = double(x->bytes() + y->bytes());
    c.keep.push_back(std::move(x));
    c.keep.push_back(std::move(y));
    return c;
  });
}

template <class T> std::vector<Result> bench_silu_and_mul(const Config& cfg, CpuEntry aot) {
  return bench_rows<kernels::SiluAndMul, T>(cfg, "silu_and_mul", aot, [](std::mt19937& rng) {
    RowCase<kernels::SiluAndMul, T> c;
    auto x = std::make_unique<Buffer<T>>(kRows * 2 * kHidden), out = std::make_unique<Buffer<T>>(kRows * kHidden);
    x->randomize(rng, -3, 3);
    c.ref = jitk_reference::silu_and_mul(kRows, kHidden, x->to_vector());
    c.args = {kRows, x->data(), out->data()};
    c.out = out.get();
    c.bytes = double(x->bytes() + out->bytes());
    c.keep.push_back(std::move(x));
    c.keep.push_back(std::move(out));
    return c;
  });
}

// ---- attention_prefill, f32: jitk against the same text compiled by g++ -O3 (the AOT list's
// params: head 128, causal, group 4), 2 sequences of 512 tokens, 8 query heads on 2 kv heads.
std::vector<Result> bench_attention(const Config& cfg, CpuEntry aot) {
  using Prefill = kernels::AttentionPrefill;
  const std::int64_t batch = 2, seqlen = cfg.quick ? 128 : 512, kv_heads = 2, group = 4, d = 128, heads = kv_heads * group;
  const std::int64_t tokens = batch * seqlen;
  progress(cfg, "attention_prefill_f32: " + std::to_string(batch) + " x " + std::to_string(seqlen) + " tokens, 8/2 heads of 128, causal");
  const Prefill::Params p{jit::DType::f32, d, true, 0, group};
  auto k = jit::get<Prefill>(p, jit::Target::cpu());
  std::mt19937 rng(8);
  Buffer<float> q(tokens * heads * d), kk(tokens * kv_heads * d), v(tokens * kv_heads * d), o(tokens * heads * d);
  q.randomize(rng, -1.5, 1.5);
  kk.randomize(rng, -1.5, 1.5);
  v.randomize(rng, -3, 3);
  std::vector<std::int32_t> cu = {0, static_cast<std::int32_t>(seqlen), static_cast<std::int32_t>(tokens)};
  const double scale = 1 / std::sqrt(double(d));
  const Prefill::Args args{batch, kv_heads, seqlen, tokens, tokens, q.data(), kk.data(), v.data(), o.data(), jit::MutPtr{}, cu.data(), cu.data(), scale};
  std::vector<double> ref, lse;
  const auto wide = [](const Buffer<float>& x) { const auto f = x.to_vector(); return std::vector<double>(f.begin(), f.end()); };
  jitk_reference::attention_prefill(ref, lse, wide(q), wide(kk), wide(v), cu, cu, kv_heads, group, d, true, 0, scale,
                                    heads * d, kv_heads * d, kv_heads * d);
  o.poison();
  k.launch(args);
  check("attention_prefill_f32 (jitk)", o, ref);
  o.poison();
  launch_entry<Prefill>(aot, p, args);
  check("attention_prefill_f32 (g++ AOT)", o, ref);
  std::vector<double> jitk_ms, aot_ms;
  for (int i = 0; i < 2 + (cfg.quick ? 3 : 7); ++i) {
    auto t0 = Clock::now();
    k.launch(args);
    const double a = ms_since(t0);
    t0 = Clock::now();
    launch_entry<Prefill>(aot, p, args);
    const double b = ms_since(t0);
    if (i >= 2) jitk_ms.push_back(a), aot_ms.push_back(b);
  }
  const double flops = 4.0 * batch * heads * double(seqlen) * double(seqlen) * d / 2;
  const auto gflops = [&](double ms) { return flops / (ms * 1e-3) / 1e9; };
  return {make_result("attention_prefill_f32_gflops", gflops(median(jitk_ms)), "GFLOP/s", gflops(median(aot_ms)), "gxx_O3_march_native", false,
                      "causal, d128, GQA 8/2, " + std::to_string(batch) + " x " + std::to_string(seqlen) + " tokens, all cores")};
}

// ---- warm-up throughput: jitk warm's engine with one worker vs one per core --------------------------
// Each side compiles its own set of distinct specializations (softmax f32, rows of different
// lengths: equal work per item), into the same cache, so neither finds the other's artifacts.
Result bench_warm_throughput(const Config& cfg) {
  const int items = cfg.quick ? 8 : 32;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto throughput = [&](int jobs, std::int64_t first_hidden) {
    std::vector<jit::cache::WarmItem> list;
    for (int i = 0; i < items; ++i)
      list.push_back({"softmax", jit::Target::cpu(),
                      jit::ParamSet{{"dtype", std::string("f32")}, {"hidden", first_hidden + i}}, "bench", {}});
    auto t0 = Clock::now();
    auto results = jit::cache::warm(list, jobs);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    for (const auto& r : results)
      if (r.outcome != jit::cache::WarmResult::Outcome::Compiled) fail("warm_throughput: an item was not compiled: " + r.error);
    return items / s;
  };
  throughput(1, 9000);  // the compiler's one-time start-up, outside both timings
  const double one = throughput(1, 10000), all = throughput(cores, 20000);
  return make_result("warm_kernels_per_s", all, "1/s", one, "same warm, -j 1", false,
                     std::to_string(items) + " softmax f32 specializations, -j " + std::to_string(cores) + " (all cores) vs -j 1");
}

// ---- main ----------------------------------------------------------------------------------------------
void usage() {
  std::printf(
      "usage: jitk_bench [--json] [--quick] [--filter TEXT]\n"
      "  --json   one JSON object per line: bench, value, unit, baseline, baseline_name, ratio, ratio_def[, note]\n"
      "  --quick  fewer repetitions (a smoke run)\n"
      "  --filter run only the benches whose group contains TEXT: get_hot, first_use,\n"
      "           cold_compile_overhead, warm_throughput, saxpy_f32, rms_norm_f32, rms_norm_f64, softmax_f32,\n"
      "           softmax_f64, silu_and_mul_f32, adamw_f32, gemm_f32\n"
      "Uses $JITK_CACHE_DIR when set, else a temporary cache removed at exit; child processes always get\n"
      "their own temporary caches.\n"
      "       jitk_bench --host-path TARGET N\n"
      "  the host side of a warm first use of rms_norm (TARGET cpu, or cuda:sm_90 without a GPU: NVRTC\n"
      "  alone, up to the blob read), stage by stage: the median of N fresh processes on one cache\n"
      "  ($JITK_CACHE_DIR when set, else a temporary one)\n");
}

int run(const Config& cfg) {
  std::optional<TempDir> own_cache;
  if (const char* d = std::getenv("JITK_CACHE_DIR"); !d || !*d) {
    // Keep the user's cache out of it: set before jitk's first use fixes the root for this process.
    own_cache.emplace("jitk-bench-cache-");
    ::setenv("JITK_CACHE_DIR", own_cache->path().c_str(), 1);
  }
  std::fprintf(stderr, "jitk_bench: %d threads in jitk's pool%s\n", jit::detail::ThreadPool::instance().size(),
               cfg.quick ? ", --quick" : "");

  std::vector<Result> results;
  auto add = [&](std::vector<Result> rs) {
    for (auto& r : rs) {
      if (cfg.json) print_json(r);
      results.push_back(std::move(r));
    }
  };
  auto wanted = [&](const char* group) { return std::string(group).find(cfg.filter) != std::string::npos; };
  if (wanted("get_hot")) add({bench_get_hot(cfg)});
  if (wanted("first_use")) add(bench_first_use(cfg));
  if (wanted("cold_compile_overhead")) add({bench_compile_overhead(cfg)});
  if (wanted("warm_throughput")) add({bench_warm_throughput(cfg)});
  if (wanted("saxpy_f32")) add(bench_saxpy<float>(cfg, aot_saxpy_f32));
  if (wanted("rms_norm_f32")) add(bench_rms_norm<float>(cfg, aot_rms_norm_f32));
  if (wanted("rms_norm_f64")) add(bench_rms_norm<double>(cfg, aot_rms_norm_f64));
  if (wanted("softmax_f32")) add(bench_softmax<float>(cfg, aot_softmax_f32));
  if (wanted("softmax_f64")) add(bench_softmax<double>(cfg, aot_softmax_f64));
  if (wanted("silu_and_mul_f32")) add(bench_silu_and_mul<float>(cfg, aot_silu_and_mul_f32));
  if (wanted("adamw_f32")) add(bench_adamw<float>(cfg, aot_adamw_f32));
  if (wanted("gemm_f32")) add(bench_gemm(cfg));
  if (wanted("attention_prefill_f32")) add(bench_attention(cfg, aot_attention_prefill_f32));
  if (results.empty()) fail("--filter '" + cfg.filter + "' matches no bench");
  if (!cfg.json) print_table(results);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Config cfg;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--json") {
        cfg.json = true;
      } else if (a == "--quick") {
        cfg.make_quick();
      } else if (a == "--filter" && i + 1 < argc) {
        cfg.filter = argv[++i];
      } else if (a == "--child-first-use") {  // hidden: one measured first use, in a fresh process
        return child_first_use();
      } else if (a == "--child-host-path" && i + 1 < argc) {  // hidden: one warm path's stages
        return child_host_path(argv[i + 1]);
      } else if (a == "--host-path" && i + 2 < argc) {
        return host_path(argv[i + 1], std::max(1, std::atoi(argv[i + 2])));
      } else if (a == "--child-compile-overhead" && i + 1 < argc) {  // hidden: the compile bench's process
        return child_compile_overhead(std::atoi(argv[++i]));
      } else if (a == "--help" || a == "-h") {
        usage();
        return 0;
      } else {
        std::fprintf(stderr, "jitk_bench: unknown argument '%s'\n", a.c_str());
        usage();
        return 2;
      }
    }
    return run(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jitk_bench: FAILED: %s\n", e.what());
    return 1;
  }
}
