// GPU benchmarks on one device, each with its baseline from the same run: launch cost vs raw
// cuLaunchKernel, cold compile vs raw NVRTC, first use in a fresh process, GB/s vs a D2D copy,
// GEMM TFLOP/s vs cuBLAS (and tuned vs default tiles), and block-sparse matmul's speed-up over
// dense cuBLAS on the same shape.
// Prints one JSON object per line with --json: bench, value, unit, baseline, baseline_name, ratio.
// --only compile,first_use,launch,bandwidth,rotary,prefill,decode,gemm,block_sparse runs those sections (default: all,
// in that order). --filter TEXT keeps only the gemm, tuning and block-sparse cases whose names
// hold TEXT, or one of TEXT's parts between '|' (e.g. --only gemm --filter 'f32|bf16_row_row'; a
// part ending in '$' matches the name's end).
#include <cuda.h>

#include <thread>
#include <nvrtc.h>
#include <unistd.h>
#ifdef JITK_BENCH_CUBLAS
#include <cublas_v2.h>
#endif

#include <algorithm>
#include <array>
#include <functional>
#include <iterator>
#include <memory>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "jit/cache.hpp"
#include "jit/cuda.hpp"
#include "jit/kernels.hpp"
#include "jit/tuning.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/specializer.hpp"
#include "runtime/get_kernel.hpp"
#include "runtime/request_key.hpp"
#include "cache/process_tiers.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/selection.hpp"
#include "jit/registry.hpp"
#include <limits>
#include <optional>

using clock_type = std::chrono::steady_clock;
namespace kernels = jit::kernels;

namespace {

bool g_json = false;
std::string g_filter;  // --filter: the gemm, tuning, block-sparse and prefill cases whose names hold it

// --filter A|B: names holding A or B; a part ending in '$' only at the name's end (`causal_cuda$`:
// the generic prefill text's rows, not cuda-sm90a's).
bool wanted(const std::string& name) {
  for (std::size_t at = 0;;) {
    const std::size_t bar = g_filter.find('|', at);
    std::string part = g_filter.substr(at, bar == std::string::npos ? std::string::npos : bar - at);
    if (!part.empty() && part.back() == '$') {
      part.pop_back();
      if (name.size() >= part.size() && name.compare(name.size() - part.size(), part.size(), part) == 0) return true;
    } else if (name.find(part) != std::string::npos) {
      return true;
    }
    if (bar == std::string::npos) return false;
    at = bar + 1;
  }
}

void emit(const char* bench, double value, const char* unit, double baseline, const char* baseline_name) {
  double ratio = baseline != 0 ? value / baseline : 0;
  if (g_json)
    std::printf("{\"bench\": \"%s\", \"value\": %.4f, \"unit\": \"%s\", \"baseline\": %.4f, \"baseline_name\": \"%s\", \"ratio\": %.3f}\n",
                bench, value, unit, baseline, baseline_name, ratio);
  else
    std::printf("%-34s %12.4f %-6s baseline %-28s %12.4f  ratio %.3f\n", bench, value, unit, baseline_name, baseline, ratio);
  std::fflush(stdout);
}

#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_; cuGetErrorString(r_, &s_); std::fprintf(stderr, "%s: %s\n", #x, s_); std::exit(1); } } while (0)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_since(clock_type::time_point t) { return std::chrono::duration<double, std::milli>(clock_type::now() - t).count(); }

// Times fns on the device with events (jit::cuda::Timer on the default stream, where jitk's and
// cuBLAS's launches here go), in alternation: each rep times `inner` back-to-back calls of every fn
// once, the order rotating from rep to rep, so that the card's drift -- an H100 running a GEMM
// lowers its clocks within tens of milliseconds: the same kernel timed right after another
// measured 11% slower -- falls on all of them alike. The medians over reps of the time a call,
// in fns' order.
template <class... F> std::array<double, sizeof...(F)> device_ms_each(int reps, int inner, F&&... fns) {
  constexpr std::size_t n = sizeof...(F);
  std::array<std::function<void()>, n> f{std::function<void()>(fns)...};
  jit::cuda::Timer timer;
  for (auto& fn : f)
    for (int i = 0; i < 3; ++i) fn();
  std::array<std::vector<double>, n> t;
  for (int r = 0; r < reps; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t which = (j + static_cast<std::size_t>(r)) % n;
      timer.start();
      for (int i = 0; i < inner; ++i) f[which]();
      t[which].push_back(timer.stop_ms() / inner);
    }
  std::array<double, n> medians;
  for (std::size_t j = 0; j < n; ++j) medians[j] = median(t[j]);
  return medians;
}

// Times fn on the device with events: median over reps of (total of `inner` launches) / inner.
template <class F> double device_ms(F&& fn, int reps = 20, int inner = 10) { return device_ms_each(reps, inner, fn)[0]; }

// A kernel and its baseline timed in alternation (device_ms_each): {ms of a, ms of b}.
template <class F, class G> std::array<double, 2> device_ms_pair(F&& a, G&& b) { return device_ms_each(20, 10, a, b); }

// The same specialized text jitk compiles, compiled with plain NVRTC calls.
std::vector<char> raw_nvrtc(const jit::detail::SourceUnit& unit, const std::string& arch, double* ms) {
  auto t0 = clock_type::now();
  std::vector<const char*> texts, names;
  for (const auto& h : unit.headers) {
    texts.push_back(h.text.c_str());
    names.push_back(h.name.c_str());
  }
  nvrtcProgram p;
  nvrtcCreateProgram(&p, unit.main.text.c_str(), unit.main.name.c_str(), (int)texts.size(), texts.data(), names.data());
  std::string a = "--gpu-architecture=" + arch;
  std::string inc = "--include-path=" + std::string(std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "/usr/local/cuda") + "/include";
  // The same PCH setting jitk gives a lone compile (on unless JITK_NVRTC_PCH=0; this bench compiles
  // one at a time), so the ratio is jitk's own overhead.
  const char* pch_env = std::getenv("JITK_NVRTC_PCH");
  const bool pch = !(pch_env && std::string(pch_env) == "0");
  std::vector<const char*> opts = {a.c_str(), "-std=c++17", "--device-as-default-execution-space", inc.c_str()};
  if (pch) opts.push_back("-pch");
  if (nvrtcCompileProgram(p, static_cast<int>(opts.size()), opts.data()) != NVRTC_SUCCESS) {
    std::size_t n;
    nvrtcGetProgramLogSize(p, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(p, log.data());
    std::fprintf(stderr, "raw nvrtc failed:\n%s\n", log.c_str());
    std::exit(1);
  }
  std::size_t n;
  nvrtcGetCUBINSize(p, &n);
  std::vector<char> cubin(n);
  nvrtcGetCUBIN(p, cubin.data());
  nvrtcDestroyProgram(&p);
  *ms = ms_since(t0);
  return cubin;
}

// Raw NVRTC time for one text with extra options (ms).
double nvrtc_ms(const std::string& text, const std::string& arch, std::vector<std::string> extra) {
  auto t0 = clock_type::now();
  nvrtcProgram p;
  nvrtcCreateProgram(&p, text.c_str(), "cub_kernel.cu", 0, nullptr, nullptr);
  std::string a = "--gpu-architecture=" + arch;
  std::string inc = "--include-path=" + std::string(std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "/usr/local/cuda") + "/include";
  std::string cccl = inc + "/cccl";
  std::vector<const char*> opts = {a.c_str(), "-std=c++17", inc.c_str(), cccl.c_str()};
  for (auto& e : extra) opts.push_back(e.c_str());
  nvrtcResult r = nvrtcCompileProgram(p, static_cast<int>(opts.size()), opts.data());
  if (r != NVRTC_SUCCESS) {
    std::size_t n;
    nvrtcGetProgramLogSize(p, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(p, log.data());
    std::fprintf(stderr, "CUB compile failed (%s):\n%s\n", nvrtcGetErrorString(r), log.substr(0, 2000).c_str());
    nvrtcDestroyProgram(&p);
    return -1;
  }
  nvrtcDestroyProgram(&p);
  return ms_since(t0);
}

// A block reduce through CUB, the way a kernel author would write it; `variant` makes each text new.
std::string cub_text(const char* include, int variant) {
  return std::string("#include <") + include + ">\n"
         "extern \"C\" __global__ void k(const float* x, float* out) {\n"
         "  using R = cub::BlockReduce<float, 256>;\n"
         "  __shared__ typename R::TempStorage tmp;\n"
         "  float v = x[blockIdx.x * 256 + threadIdx.x] * " + std::to_string(variant) + ".0f;\n"
         "  float s = R(tmp).Sum(v);\n"
         "  if (threadIdx.x == 0) out[blockIdx.x] = s;\n}\n";
}

// In a fresh process: cold compiles of `count` softmax specializations through jit::get (median ms).
int child_compile_series(int count) {
  jit::cuda::available();
  std::vector<double> ms;
  for (int i = 0; i < count; ++i) {
    auto t0 = clock_type::now();
    jit::get<kernels::Softmax>({jit::DType::bf16, 2048 + 16 * i});
    ms.push_back(ms_since(t0));
  }
  std::printf("%.4f %.4f\n", ms[0], median(std::vector<double>(ms.begin() + 1, ms.end())));
  return 0;
}

// --write-tiny-cubin PATH: an empty kernel compiled by NVRTC for device 0's arch, written to PATH.
int write_tiny_cubin(const char* path) {
  CUdevice dev = 0;
  int major = 0, minor = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
      cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS) {
    std::fprintf(stderr, "--write-tiny-cubin: no CUDA device\n");
    return 1;
  }
  const std::string arch = "--gpu-architecture=sm_" + std::to_string(major * 10 + minor);
  nvrtcProgram p;
  nvrtcCreateProgram(&p, "extern \"C\" __global__ void jitk_tiny() {}\n", "tiny.cu", 0, nullptr, nullptr);
  const char* opts[] = {arch.c_str()};
  std::size_t n = 0;
  if (nvrtcCompileProgram(p, 1, opts) != NVRTC_SUCCESS || nvrtcGetCUBINSize(p, &n) != NVRTC_SUCCESS || n == 0) {
    std::fprintf(stderr, "--write-tiny-cubin: NVRTC could not compile for %s\n", arch.c_str());
    return 1;
  }
  std::vector<char> cubin(n);
  nvrtcGetCUBIN(p, cubin.data());
  nvrtcDestroyProgram(&p);
  FILE* f = std::fopen(path, "wb");
  if (!f || std::fwrite(cubin.data(), 1, n, f) != n || std::fclose(f) != 0) {
    std::fprintf(stderr, "--write-tiny-cubin: cannot write %s\n", path);
    return 1;
  }
  return 0;
}

// Runs jitk_first_use (beside this program: a process of libjitk alone, no NVRTC or cuBLAS mapped
// before its clock) as a child that does one first get; returns its get time in ms.
double run_child(const std::string& self, const std::string& cache, bool* from_disk, const std::string& env = "") {
  const std::string child = self.substr(0, self.rfind('/') + 1) + "jitk_first_use";
  std::string cmd = env + " JITK_CACHE_DIR='" + cache + "' '" + child + "'";
  FILE* f = ::popen(cmd.c_str(), "r");
  double ms = -1;
  int disk = 0;
  if (f) {
    if (std::fscanf(f, "%lf %d", &ms, &disk) != 2) ms = -1;
    ::pclose(f);
  }
  *from_disk = disk == 1;
  return ms;
}

// This program's own path, to run it again as a child.
std::string self_path() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : "/proc/self/exe";
}

// ---- attention_prefill: TFLOP/s on the shapes of shared/anchors/attention.md (16k tokens a batch,
// hidden 2048: heads = 2048 / head_dim), and Llama-3-8B's GQA; torch SDPA's backends on the same
// shapes come from bench/gpu/torch_baseline.py --attention in the same run (bench/gpu/run.sh).
// Then a variant's cold compile (empty jitk cache and CUDA_CACHE_PATH) and warm first use, each in
// a fresh process.
double rel_l2(const std::vector<float>& got, const std::vector<float>& want);
bool check_error(const std::string& what, double error, double limit, const std::string& section);

// The rows of a prefill bench (q = k = v = `x`, packed, sequences of seqlen) at 24 sampled
// (token, head) pairs -- first and last tokens of sequences, tile edges, spread heads -- against
// float64 sums: o's relative L2 error over them and each row's lse.
template <class T>
bool check_prefill_rows(const std::vector<T>& x, const std::vector<T>& o, const std::vector<float>& lse,
                        std::int64_t d, std::int64_t seqlen, std::int64_t batch, std::int64_t heads, std::int64_t kv_heads, bool causal,
                        double scale, std::int64_t total, const std::string& what) {
  const std::int64_t group = heads / kv_heads;
  std::vector<float> got, want;
  double lse_err = 0;
  for (std::int64_t r = 0; r < 24; ++r) {
    const std::int64_t fixed[] = {0, seqlen - 1, 63, 64, 127, 128, 191, 192};
    const std::int64_t i = r < 8 ? std::min(fixed[r], seqlen - 1) : (r * 2654435761LL + 977) % seqlen;
    const std::int64_t b = (r * 5 + 3) % batch, h = (r * 7 + r / 3) % heads, kvh = h / group;
    const std::int64_t token = b * seqlen + i, keys = causal ? i + 1 : seqlen;
    const auto at = [&](std::int64_t t, std::int64_t hh, std::int64_t nh, std::int64_t e) {
      return static_cast<double>(jit::to_float(x[static_cast<std::size_t>((t * nh + hh) * d + e)]));
    };
    std::vector<double> s(static_cast<std::size_t>(keys));
    double mx = -1e300;
    for (std::int64_t j = 0; j < keys; ++j) {
      double dot = 0;
      for (std::int64_t e = 0; e < d; ++e) dot += at(token, h, heads, e) * at(b * seqlen + j, kvh, kv_heads, e);
      s[j] = dot * scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    std::vector<double> acc(static_cast<std::size_t>(d), 0.0);
    for (std::int64_t j = 0; j < keys; ++j) {
      const double p = std::exp(s[j] - mx);
      sum += p;
      for (std::int64_t e = 0; e < d; ++e) acc[e] += p * at(b * seqlen + j, kvh, kv_heads, e);
    }
    for (std::int64_t e = 0; e < d; ++e) {
      want.push_back(static_cast<float>(acc[e] / sum));
      got.push_back(jit::to_float(o[static_cast<std::size_t>((token * heads + h) * d + e)]));
    }
    const double want_lse = mx + std::log(sum), got_lse = lse[static_cast<std::size_t>(h * total + token)];
    const double e = std::abs(got_lse - want_lse) / std::max(1.0, std::abs(want_lse));
    lse_err = e <= lse_err ? lse_err : std::isnan(e) ? std::numeric_limits<double>::infinity() : e;  // NaN anywhere fails
  }
  const bool o_ok = check_error(what + " o", rel_l2(got, want), 2e-2, "prefill");
  return check_error(what + " lse", lse_err, 1e-3, "prefill") && o_ok;
}

bool prefill_benches() {
  bool ok = true;
  using Prefill = kernels::AttentionPrefill;
  const std::int64_t tokens = 16384;
  const std::size_t max_elems = static_cast<std::size_t>(tokens) * 4096;  // Llama's 32 heads of 128
  std::vector<jit::bfloat16> host(max_elems);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.5f, 1.5f);
  // (jit::bfloat16 holds bits: jit::bfloat16(x) would put the float's integer part in them)
  for (auto& x : host) x = jit::to_bfloat16(dist(gen));
  jit::cuda::DeviceArray<jit::bfloat16> q(host), k(host), v(host), o(max_elems);
  // the same values in f16 (bf16's 8 bits fit f16's 11) for the f16 rows
  std::vector<jit::half> host16(max_elems);
  for (std::size_t i = 0; i < max_elems; ++i) host16[i] = jit::to_half(jit::to_float(host[i]));
  jit::cuda::DeviceArray<jit::half> q16(host16), k16(host16), v16(host16), o16(max_elems);
  jit::cuda::DeviceArray<float> lse(max_elems / 64);
  struct Case {
    std::int64_t head_dim, seqlen, heads, kv_heads;
    bool causal;
    std::int64_t tile_m = 0, tile_n = 0;
    const char* implementation = "";  // "": the one jit::get picks
    jit::DType dtype = jit::DType::bf16;
  };
  std::vector<Case> cases;
  for (std::int64_t d : {64, 128, 256})
    for (std::int64_t s : {2048, 8192})
      for (bool causal : {false, true}) cases.push_back({d, s, 2048 / d, 2048 / d, causal});
  cases.push_back({128, 16384, 16, 16, false});
  cases.push_back({128, 16384, 16, 16, true});
  cases.push_back({128, 4096, 32, 8, true});  // Llama-3-8B: 32 query heads on 8 kv heads
  // the generic text's tiles (rows x keys) at heads 64, 128, 256
  // Hopper's text (the default on sm_90) at other tiles; then the generic text (cuda) run on the
  // same device as a stand-in for sm_80-sm_89, default tiles
  for (auto [tm, tn] : {std::pair{128, 64}, {192, 64}, {128, 192}}) cases.push_back({64, 8192, 32, 32, false, tm, tn});
  for (auto [tm, tn] : {std::pair{128, 64}, {64, 128}}) cases.push_back({128, 8192, 16, 16, false, tm, tn});
  cases.push_back({64, 8192, 32, 32, true, 128, 192});
  cases.push_back({64, 2048, 32, 32, false, 128, 192});
  for (bool causal : {false, true})
    for (std::int64_t d : {64, 128, 256}) cases.push_back({d, 8192, 2048 / d, 2048 / d, causal, 0, 0, "cuda"});
  // the generic text's causal rows at other tiles (fewer accumulators a thread than the defaults)
  for (auto [tm, tn] : {std::pair{64, 64}, {128, 32}}) cases.push_back({128, 8192, 16, 16, true, tm, tn, "cuda"});
  cases.push_back({64, 8192, 32, 32, true, 128, 64, "cuda"});
  // Hopper's default (cuda-sm90a-tma, the copy engine) at other tiles: head 64 on two consumers
  // (240 registers each), head 256 by 64 keys (its default is 128 x 80)
  for (std::int64_t s : {2048, 8192})
    for (bool causal : {false, true}) cases.push_back({64, s, 32, 32, causal, 128, 128});
  cases.push_back({64, 2048, 32, 32, true, 128, 192});  // (128 x 192's other three are above)
  // head 64: 192 x 128 (FlashAttention-3's head-64 tile; three consumers of 160 registers, the copy
  // engine's text alone) is its default under a causal mask since 2026-11-26 (+9% at s2048): the
  // 192 x 64 it had there beside it, and 192 x 128 without a mask (not its default; unmeasured)
  for (std::int64_t s : {2048, 8192}) cases.push_back({64, s, 32, 32, true, 192, 64});
  cases.push_back({64, 8192, 32, 32, false, 192, 128});
  for (bool causal : {false, true}) cases.push_back({256, 8192, 8, 8, causal, 128, 64});
  // head 128 by 192 keys (FlashAttention-3 takes 176 without a mask): only the copy engine's text has the registers
  for (std::int64_t s : {2048, 8192})
    for (bool causal : {false, true}) cases.push_back({128, s, 16, 16, causal, 128, 192});
  // the cp.async text (cuda-sm90a, the default until 2026-11-26) beside it on the main shapes
  for (std::int64_t d : {64, 128, 256})
    for (std::int64_t s : {2048, 8192})
      for (bool causal : {false, true}) cases.push_back({d, s, 2048 / d, 2048 / d, causal, 0, 0, "cuda-sm90a"});
  cases.push_back({128, 16384, 16, 16, false, 0, 0, "cuda-sm90a"});
  cases.push_back({128, 16384, 16, 16, true, 0, 0, "cuda-sm90a"});
  cases.push_back({128, 4096, 32, 8, true, 0, 0, "cuda-sm90a"});
  // f16 on the copy engine's text at head 128 (the issue's shapes) and heads 64 / 256 at 8192 tokens
  for (std::int64_t s : {2048, 8192, 16384})
    for (bool causal : {false, true}) cases.push_back({128, s, 16, 16, causal, 0, 0, "", jit::DType::f16});
  cases.push_back({128, 4096, 32, 8, true, 0, 0, "", jit::DType::f16});
  for (std::int64_t d : {64, 256})
    for (bool causal : {false, true}) cases.push_back({d, 8192, 2048 / d, 2048 / d, causal, 0, 0, "", jit::DType::f16});
  for (const Case& c : cases) {
    const bool f16 = c.dtype == jit::DType::f16;
    const char* type = f16 ? "f16" : "bf16";
    // --filter: the cases whose names hold it (the implementation named as asked; "" is Hopper's
    // default on sm_90, cuda-sm90a-tma, or cuda-sm90a under JITK_FA_TMA=0)
    // (the row's name as emitted below, with the tiles where asked for)
    const std::string tiles = c.tile_m ? "_t" + std::to_string(c.tile_m) + "x" + std::to_string(c.tile_n) : "";
    char pre[160];
    std::snprintf(pre, sizeof pre, "prefill_%s_d%lld_s%lld_h%lld_kv%lld_%s%s_%s", type, (long long)c.head_dim, (long long)c.seqlen,
                  (long long)c.heads, (long long)c.kv_heads, c.causal ? "causal" : "full", tiles.c_str(),
                  *c.implementation ? c.implementation : "cuda-sm90a-tma");
    if (!wanted(pre)) continue;
    const std::int64_t batch = tokens / c.seqlen, group = c.heads / c.kv_heads;
    std::vector<std::int32_t> cu(static_cast<std::size_t>(batch + 1));
    for (std::int64_t b = 0; b <= batch; ++b) cu[b] = static_cast<std::int32_t>(b * c.seqlen);
    jit::cuda::DeviceArray<std::int32_t> dcu(cu);
    Prefill::Params p{c.dtype, c.head_dim, c.causal, 0, group, c.tile_m, c.tile_n};
    jit::Selection only;
    only.implementation = c.implementation;
    std::optional<jit::Kernel<Prefill>> got;
    try {
      got.emplace(jit::get<Prefill>(p, jit::default_target(), only));
    } catch (const jit::Error& e) {  // tiles a text (an A/B's older one) does not take: no row
      std::fprintf(stderr, "prefill bench: %s not run: %.200s\n", pre, e.what());
      continue;
    }
    auto& kernel = *got;
    const double scale = 1.0 / std::sqrt(double(c.head_dim));
    // the case's type's buffers (the same values)
    const jit::ConstPtr cq = f16 ? jit::ConstPtr(q16.data()) : jit::ConstPtr(q.data()), ck = f16 ? jit::ConstPtr(k16.data()) : jit::ConstPtr(k.data()),
                        cv = f16 ? jit::ConstPtr(v16.data()) : jit::ConstPtr(v.data());
    const jit::MutPtr co = f16 ? jit::MutPtr(o16.data()) : jit::MutPtr(o.data());
    auto run = [&] { kernel.launch({batch, c.kv_heads, c.seqlen, tokens, tokens, cq, ck, cv, co, lse.data(), dcu.data(), dcu.data(), scale}); };
    // o and lse of sampled rows against float64 sums before the clock (a text that is fast and
    // wrong must not pass an A/B)
    run();
    const std::string what = std::string(type) + " d" + std::to_string(c.head_dim) + " s" + std::to_string(c.seqlen) + " h" +
                             std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + (c.causal ? " causal " : " full ") +
                             kernel.implementation();
    const bool checked = f16 ? check_prefill_rows(host16, o16.download(), lse.download(), c.head_dim, c.seqlen, batch, c.heads, c.kv_heads,
                                                  c.causal, scale, tokens, what)
                             : check_prefill_rows(host, o.download(), lse.download(), c.head_dim, c.seqlen, batch, c.heads, c.kv_heads,
                                                  c.causal, scale, tokens, what);
    if (!checked) ok = false;
    const double ms = device_ms(run, 10, 3);
    const double flops = 4.0 * batch * c.heads * double(c.seqlen) * double(c.seqlen) * c.head_dim / (c.causal ? 2 : 1);
    char name[160];
    std::snprintf(name, sizeof name, "prefill_%s_d%lld_s%lld_h%lld_kv%lld_%s%s_%s", type, (long long)c.head_dim, (long long)c.seqlen,
                  (long long)c.heads, (long long)c.kv_heads, c.causal ? "causal" : "full", tiles.c_str(), kernel.implementation().c_str());
    emit(name, flops / ms / 1e9, "TFLOP/s", 0, "torch SDPA: torch.jsonl, same run");
  }
  // cold compile (empty jitk cache and driver compute cache) and warm first use, fresh processes
  const std::string self = self_path();
  char cache_tmpl[] = "/tmp/jitk-prefill-XXXXXX", cuda_tmpl[] = "/tmp/jitk-cudacache-XXXXXX";
  const std::string cache = ::mkdtemp(cache_tmpl), cuda_cache = ::mkdtemp(cuda_tmpl);
  std::vector<double> cold, warm;
  for (int rep = 0; rep < 3; ++rep) {
    std::system(("rm -rf '" + cache + "' '" + cuda_cache + "'; mkdir -p '" + cuda_cache + "'").c_str());
    bool disk;
    const std::string env = "JITK_BENCH_PREFILL=1 CUDA_CACHE_PATH='" + cuda_cache + "'";
    cold.push_back(run_child(self, cache, &disk, env));
    for (int w = 0; w < 3; ++w)
      if (const double ms = run_child(self, cache, &disk, env); disk) warm.push_back(ms);
  }
  emit("prefill_cold_compile_ms", median(cold), "ms", 0, "target <= 2000 ms");
  if (!warm.empty()) emit("prefill_first_use_warm_ms", median(warm), "ms", median(cold), "cold compile, fresh process");
  std::system(("rm -rf '" + cache + "' '" + cuda_cache + "'").c_str());
  return ok;
}

// ---- GEMM: jitk against cuBLAS on the same inputs, in TFLOP/s --------------------------------------

using Gemm = kernels::Gemm;
using Layout = Gemm::Layout;

const jit::Target kCuda0{jit::Backend::Cuda, "", 0};

// Relative L2 error limits. A 16-bit C rounds to 8 (bf16) or 11 (f16) bits; an f32 C summed in f32.
constexpr double kHalfLimit = 1e-2;
constexpr double kF32Limit = 1e-4;
// Pure f32 (no TF32) lands near 1e-6 at k = 4096; inputs cut to TF32's 10-bit mantissas near 4e-4.
constexpr double kNoTf32Limit = 2e-5;
constexpr int kReferenceSamples = 512;  // entries of C checked against float64 sums

// One GEMM: C (row-major m x n, ldc = n) = A B, A m x k and B k x n in the given layouts, tight strides.
struct GemmCase {
  jit::DType dtype;
  Layout a_layout, b_layout;
  Gemm::Shape shape;
  std::string implementation = "";  // "" = the one jitk chooses
  std::int64_t cluster_m = 0;       // 2: Hopper's blocks in pairs sharing B (TMA multicast)
  std::int64_t tile_m = 0, tile_n = 0, tile_k = 0, stages = 0;  // 0: the implementation's defaults
  std::string tag = "";  // appended to the name (e.g. "_stages3" where the tile above alone would not tell)
  Gemm::Gate gate = Gemm::Gate::None;  // silu: the gated gemm (C = silu(gate columns) * up columns, M x N / 2)
  // What the epilogue reads: nothing (C = A B), C (beta = 1: C += A B, as the layer's down
  // projection), or a residual shaped like C added by the epilogue chain (epilogue "add", as the
  // layer's output projection). cuBLAS's side then runs with beta = 1 (the same sum); the operands
  // start at zero for the checks, so either gives A B there.
  enum class Reads { None, C, Residual } reads = Reads::None;

  bool a_row() const { return a_layout == Layout::RowMajor; }
  bool b_row() const { return b_layout == Layout::RowMajor; }
  std::int64_t lda() const { return a_row() ? shape.k : shape.m; }
  std::int64_t ldb() const { return b_row() ? shape.n : shape.k; }
  bool gated() const { return gate != Gemm::Gate::None; }
  std::int64_t n_out() const { return gated() ? shape.n / 2 : shape.n; }  // C's columns
  double flops() const { return 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) * static_cast<double>(shape.k); }
  double tflops(double ms) const { return flops() / ms / 1e9; }
  Gemm::Params params() const {
    Gemm::Params p;
    p.dtype = dtype;
    p.a_layout = a_layout;
    p.b_layout = b_layout;
    p.cluster_m = cluster_m;
    p.tile_m = tile_m, p.tile_n = tile_n, p.tile_k = tile_k, p.stages = stages;
    p.gate = gate;
    if (reads == Reads::Residual) p.epilogue = "add";
    return p;
  }
  double beta() const { return reads == Reads::C ? 1.0 : 0.0; }
  std::string name() const {  // "gemm_bf16_row_col_4096x4096x4096", "..._cluster2", "..._tile16x128x64"
    return "gemm_" + std::string(jit::dtype_name(dtype)) + (a_row() ? "_row" : "_col") + (b_row() ? "_row_" : "_col_") +
           std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k) +
           (cluster_m > 1 ? "_cluster" + std::to_string(cluster_m) : "") +
           (tile_m > 0 ? "_tile" + std::to_string(tile_m) + "x" + std::to_string(tile_n) + "x" + std::to_string(tile_k) : "") +
           (gated() ? std::string("_gated_") + Gemm::gate_name(gate) : "") + (reads == Reads::C ? "_beta1" : "") +
           (reads == Reads::Residual ? "_residual" : "") + tag;
  }
};

// A 16-bit or f32 value at `at` as a float.
float decode(jit::DType dtype, const unsigned char* at) {
  float f;
  std::uint16_t bits;
  switch (dtype) {
    case jit::DType::f32: std::memcpy(&f, at, sizeof f); return f;
    case jit::DType::bf16: std::memcpy(&bits, at, sizeof bits); return jit::to_float(jit::bfloat16{bits});
    case jit::DType::f16: std::memcpy(&bits, at, sizeof bits); return jit::to_float(jit::half{bits});
    case jit::DType::f64: break;
  }
  throw jit::Error(jit::ErrorCode::InvalidArgument, "gpu bench: no f64 cases (cuBLAS is called with 32-bit compute)");
}

// `count` values uniform in [-1, 1] (zeros can run faster) in dtype's bytes, from `seed`; `rounded`,
// when given, gets the values they hold (for float64 references).
std::vector<unsigned char> random_values(jit::DType dtype, std::int64_t count, unsigned seed, std::vector<float>* rounded = nullptr) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::size_t n = static_cast<std::size_t>(count), size = jit::dtype_size(dtype);
  std::vector<unsigned char> raw(n * size);
  if (rounded) rounded->resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float x = uniform(rng);
    unsigned char* at = raw.data() + i * size;
    if (dtype == jit::DType::f32) std::memcpy(at, &x, size);
    else {
      const std::uint16_t bits = dtype == jit::DType::bf16 ? jit::to_bfloat16(x).bits : jit::to_half(x).bits;
      std::memcpy(at, &bits, size);
    }
    if (rounded) (*rounded)[i] = decode(dtype, at);
  }
  return raw;
}

// The decode section's check: the float64 attention of sequences 0, batch / 2 and batch - 1 (every
// head, one new token each), [3][heads][head_dim]. The cache holds kv[i] = values[i % values.size()]
// (K first, V cache_elems after), q[i] = values[i].
constexpr std::int64_t kDecodeChecked = 3;
std::array<std::int64_t, kDecodeChecked> decode_checked(std::int64_t batch) { return {0, batch / 2, batch - 1}; }
std::vector<double> decode_reference(const std::vector<float>& values, const std::vector<std::int32_t>& pages, std::int64_t batch,
                                     std::int64_t context, std::int64_t max_pages, std::int64_t kv_heads, std::int64_t group,
                                     std::int64_t head_dim, std::int64_t page_size, std::size_t cache_elems, double scale) {
  const std::size_t n = values.size();  // a multiple of head_dim: a row never wraps
  const std::int64_t heads = kv_heads * group;
  std::vector<double> expected, score(static_cast<std::size_t>(context)), out(static_cast<std::size_t>(head_dim));
  for (const std::int64_t b : decode_checked(batch))
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t kvh = h / group;
      const float* qrow = values.data() + (b * heads + h) * head_dim;
      auto row = [&](std::int64_t j, std::size_t from) {
        const std::int64_t page = pages[static_cast<std::size_t>(b * max_pages + j / page_size)];
        return values.data() + (from + static_cast<std::size_t>(((page * page_size + j % page_size) * kv_heads + kvh) * head_dim)) % n;
      };
      double top = -INFINITY;
      for (std::int64_t j = 0; j < context; ++j) {
        const float* k = row(j, 0);
        double dot = 0;
        for (std::int64_t d = 0; d < head_dim; ++d) dot += double(qrow[d]) * k[d];
        score[static_cast<std::size_t>(j)] = dot * scale;
        top = std::max(top, dot * scale);
      }
      std::fill(out.begin(), out.end(), 0.0);
      double sum = 0;
      for (std::int64_t j = 0; j < context; ++j) {
        const double w = std::exp(score[static_cast<std::size_t>(j)] - top);
        const float* v = row(j, cache_elems);
        sum += w;
        for (std::int64_t d = 0; d < head_dim; ++d) out[static_cast<std::size_t>(d)] += w * v[d];
      }
      for (const double x : out) expected.push_back(x / sum);
    }
  return expected;
}
// max |o - expected| over the checked rows as a fraction of the largest |expected|; NaN or inf in o: inf.
double decode_error(const std::vector<jit::bfloat16>& o, const std::vector<double>& expected, std::int64_t batch, std::int64_t heads,
                    std::int64_t head_dim) {
  double worst = 0, largest = 0;
  std::size_t at = 0;
  for (const std::int64_t b : decode_checked(batch))
    for (std::int64_t e = 0; e < heads * head_dim; ++e, ++at) {
      const double got = jit::to_float(o[static_cast<std::size_t>(b * heads * head_dim + e)]);
      if (!std::isfinite(got)) return INFINITY;
      worst = std::max(worst, std::abs(got - expected[at]));
      largest = std::max(largest, std::abs(expected[at]));
    }
  return largest > 0 ? worst / largest : worst;
}

// Room on the device for `count` values of dtype.
jit::cuda::DeviceArray<unsigned char> device_values(jit::DType dtype, std::int64_t count) {
  return jit::cuda::DeviceArray<unsigned char>(static_cast<std::size_t>(count) * jit::dtype_size(dtype));
}

// A device array of dtype's values, downloaded as floats.
std::vector<float> download_values(jit::DType dtype, const jit::cuda::DeviceArray<unsigned char>& array) {
  const std::vector<unsigned char> raw = array.download();
  std::vector<float> out(raw.size() / jit::dtype_size(dtype));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = decode(dtype, raw.data() + i * jit::dtype_size(dtype));
  return out;
}

// A and B filled with random_values in the case's dtype and uploaded once; the host keeps their
// rounded values for the float64 reference. Two outputs: one for jitk, one for the baseline it is
// compared with.
// x rounded to dtype's precision (16-bit types; f32 and wider as they are).
double round_to(jit::DType dtype, double x) {
  const float f = static_cast<float>(x);
  if (dtype == jit::DType::bf16) return jit::to_float(jit::to_bfloat16(f));
  if (dtype == jit::DType::f16) return jit::to_float(jit::to_half(f));
  return x;
}

// A gated gemm's C (M x N / 2: silu of each gate column times its up column, docs/gemm.md) from the
// plain product's M x N values (e.g. cuBLAS's, already in the dtype).
std::vector<float> gated_from(const std::vector<float>& full, std::int64_t m, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(m * (n / 2)));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n / 2; ++j) {
      const std::int64_t col = 16 * (j / 8) + j % 8;
      const double gate = full[static_cast<std::size_t>(i * n + col)], up = full[static_cast<std::size_t>(i * n + col + 8)];
      out[static_cast<std::size_t>(i * (n / 2) + j)] = static_cast<float>(gate / (1.0 + std::exp(-gate)) * up);
    }
  return out;
}

class GemmData {
 public:
  explicit GemmData(const GemmCase& g)
      : g_(g),
        a_(random_values(g.dtype, g.shape.m * g.shape.k, 1, &a_host_)),
        b_(random_values(g.dtype, g.shape.k * g.shape.n, 2, &b_host_)),
        c_(device_values(g.dtype, g.shape.m * g.shape.n)),
        c_baseline_(device_values(g.dtype, g.shape.m * g.shape.n)),
        residual_(g.reads == GemmCase::Reads::Residual ? static_cast<std::size_t>(g.shape.m * g.n_out()) * jit::dtype_size(g.dtype) : 1) {
    residual_.fill_bytes(0);
  }

  bool same_operands(const GemmCase& g) const {
    return g.dtype == g_.dtype && g.gate == g_.gate && g.reads == g_.reads && g.a_layout == g_.a_layout && g.b_layout == g_.b_layout && g.shape.m == g_.shape.m &&
           g.shape.n == g_.shape.n && g.shape.k == g_.shape.k;
  }
  const void* a() const { return a_.data(); }
  const void* b() const { return b_.data(); }
  void* c() const { return c_.data(); }
  void* c_baseline() const { return c_baseline_.data(); }
  Gemm::Args args(void* c) const {
    const jit::DType t = g_.dtype;
    Gemm::Args args{g_.shape.m, g_.shape.n, g_.shape.k, 1.0, jit::ConstPtr(a(), t), g_.lda(), jit::ConstPtr(b(), t), g_.ldb(),
                    g_.beta(), jit::MutPtr(c, t), g_.n_out(), {}};
    if (g_.reads == GemmCase::Reads::Residual) args.epilogue = jit::Operands{jit::ConstPtr(residual_.data(), t)};
    return args;
  }
  // C and cuBLAS's C zeroed (where the epilogue reads C, a run then gives A B)
  void zero_c() {
    c_.fill_bytes(0);
    c_baseline_.fill_bytes(0);
  }
  std::vector<float> c_values() const {  // C's M x n_out() values
    std::vector<float> v = download_values(g_.dtype, c_);
    v.resize(static_cast<std::size_t>(g_.shape.m * g_.n_out()));
    return v;
  }
  std::vector<float> baseline_values() const { return download_values(g_.dtype, c_baseline_); }
  // Relative L2 error of C on sampled entries against sums in float64 of the host's A and B (a
  // gated case: its C, M x N / 2, against silu(g) * u of the float64 sums rounded to the dtype, as
  // docs/gemm.md defines it; `gated` = false checks a full M x N product, e.g. cuBLAS's).
  double error_vs_float64(const std::vector<float>& c, bool gated = true) const {
    const auto [m, n, k] = g_.shape;
    gated = gated && g_.gated();
    const std::int64_t n_out = gated ? n / 2 : n;
    const auto product = [&](std::int64_t i, std::int64_t j) {
      double sum = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double a = a_host_[static_cast<std::size_t>(g_.a_row() ? i * g_.lda() + p : p * g_.lda() + i)];
        const double b = b_host_[static_cast<std::size_t>(g_.b_row() ? p * g_.ldb() + j : j * g_.ldb() + p)];
        sum += a * b;
      }
      return sum;
    };
    std::mt19937_64 rng(7);
    double err = 0, norm = 0;
    for (int s = 0; s < kReferenceSamples; ++s) {
      const std::int64_t i = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(m));
      const std::int64_t j = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n_out));
      double sum;
      if (gated) {
        const std::int64_t col = 16 * (j / 8) + j % 8;
        const double gate = round_to(g_.dtype, product(i, col)), up = round_to(g_.dtype, product(i, col + 8));
        sum = gate / (1.0 + std::exp(-gate)) * up;
      } else {
        sum = product(i, j);
      }
      const double d = c[static_cast<std::size_t>(i * n_out + j)] - sum;
      err += d * d;
      norm += sum * sum;
    }
    return std::sqrt(err / norm);
  }

 private:
  GemmCase g_;
  std::vector<float> a_host_, b_host_;  // before a_ and b_, which fill them
  jit::cuda::DeviceArray<unsigned char> a_, b_, c_, c_baseline_, residual_;
};

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(err / norm);
}

// Says one error on stderr as "<section> check: ..."; false (and a line that cannot be missed,
// "<-- <SECTION> CHECK FAILED") when it is over the limit or NaN.
bool check_error(const std::string& what, double error, double limit, const std::string& section = "gemm") {
  const bool ok = error <= limit;
  std::string loud = section;
  for (char& ch : loud) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  std::fprintf(stderr, "%s check: %-72s rel. L2 %.2e (limit %.0e)%s\n", section.c_str(), what.c_str(), error, limit,
               ok ? "" : ("  <-- " + loud + " CHECK FAILED").c_str());
  return ok;
}

enum class CublasMath { F32, Tf32 };  // f32 inputs: exact f32 products, or inputs cut to TF32

#ifdef JITK_BENCH_CUBLAS
#define CUBLAS(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { std::fprintf(stderr, "%s: %s\n", #x, cublasGetStatusString(s_)); std::exit(1); } } while (0)

// cuBLAS on the legacy default stream, where jitk's launches and device_ms's events also go.
class Cublas {
 public:
  static constexpr bool kAvailable = true;
  Cublas() {
    CUBLAS(cublasCreate(&handle_));
    CUBLAS(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));  // no TF32 unless a call's compute type asks
  }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // C = A B for the case, accumulating in f32. cuBLAS is column-major, and a row-major m x n C is
  // in memory the column-major n x m C^T = B^T A^T: so B is cuBLAS's first operand, A its second,
  // and the sizes go n, m, k. A row-major operand's memory, read column-major, is already its
  // transpose (op N); a column-major one is itself, so it needs op T. A row, B col gives (T, N).
  void gemm(const GemmCase& g, const void* a, const void* b, void* c, CublasMath math = CublasMath::F32, float beta = 0.0f) const {
    const cudaDataType t = g.dtype == jit::DType::f32 ? CUDA_R_32F : g.dtype == jit::DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const cublasComputeType_t compute = math == CublasMath::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float alpha = 1.0f;  // CUBLAS_COMPUTE_32F*: float scalars (beta too)
    CUBLAS(cublasGemmEx(handle_, g.b_row() ? CUBLAS_OP_N : CUBLAS_OP_T, g.a_row() ? CUBLAS_OP_N : CUBLAS_OP_T,
                        static_cast<int>(g.shape.n), static_cast<int>(g.shape.m), static_cast<int>(g.shape.k), &alpha,
                        b, t, static_cast<int>(g.ldb()), a, t, static_cast<int>(g.lda()), &beta, c, t,
                        static_cast<int>(g.shape.n), compute, CUBLAS_GEMM_DEFAULT));
  }

 private:
  cublasHandle_t handle_ = nullptr;
};
#else
// Built without cuBLAS: the GEMM benches run with no baseline, and say so.
class Cublas {
 public:
  static constexpr bool kAvailable = false;
  void gemm(const GemmCase&, const void*, const void*, void*, CublasMath = CublasMath::F32, float = 0.0f) const {}
};
#endif

// One case: jitk's result checked against cuBLAS's and float64 sums, then jitk's TFLOP/s over cuBLAS's.
// `data` holds the last case's operands, kept for the next case of the same dtype, layouts and shape.
bool bench_gemm(const GemmCase& g, const Cublas& cublas, std::unique_ptr<GemmData>& data) {
  jit::Selection selection;
  selection.implementation = g.implementation;
  const auto k = jit::get<Gemm>(g.params(), kCuda0, selection);
  const std::string label = g.name() + " " + k.implementation();
  const bool sixteen_bit = g.dtype != jit::DType::f32;
  if (sixteen_bit && g.a_row() && !g.b_row() && g.implementation.empty() && k.implementation() != "cuda-sm90a")
    std::fprintf(stderr, "gemm note: %s chose %s, not cuda-sm90a (not a Hopper GPU?)\n", g.name().c_str(), k.implementation().c_str());
  if (!data || !data->same_operands(g)) {
    data.reset();  // its device memory before the next's
    data = std::make_unique<GemmData>(g);
  }
  GemmData& d = *data;
  const auto run_jitk = [&] { k.launch(d.args(d.c())); };
  // beta = 1 for cuBLAS where jitk's epilogue reads C or a residual (the same sum, C += A B)
  const auto run_cublas = [&] { cublas.gemm(g, d.a(), d.b(), d.c_baseline(), CublasMath::F32, g.reads == GemmCase::Reads::None ? 0.0f : 1.0f); };
  d.zero_c();
  run_jitk();
  const std::vector<float> c = d.c_values();
  const double limit = sixteen_bit ? kHalfLimit : kF32Limit;
  bool ok = check_error(label + " vs float64", d.error_vs_float64(c), limit);
  double baseline = 0;
  if (Cublas::kAvailable) {
    run_cublas();
    const std::vector<float> c_cublas = d.baseline_values();
    ok &= check_error(g.name() + " cuBLAS vs float64", d.error_vs_float64(c_cublas, false), sixteen_bit ? kHalfLimit : kNoTf32Limit);
    // gated: against silu(g) * u of cuBLAS's product (cuBLAS's time is the plain gemm's, which
    // writes twice C's bytes and leaves the activation to another launch)
    ok &= check_error(label + " vs cuBLAS", rel_l2(c, g.gated() ? gated_from(c_cublas, g.shape.m, g.shape.n) : c_cublas), limit);
  }
  double tflops;
  if (Cublas::kAvailable) {
    const auto [jitk_ms, cublas_ms] = device_ms_pair(run_jitk, run_cublas);
    tflops = g.tflops(jitk_ms), baseline = g.tflops(cublas_ms);
  } else {
    tflops = g.tflops(device_ms(run_jitk));
  }
  if (!ok) return false;  // no number for a wrong result
  emit((g.name() + "_" + k.implementation() + "_TFLOPs").c_str(), tflops, "TFLOP/s", baseline,
       !Cublas::kAvailable                  ? "none: built without cuBLAS"
       : g.reads == GemmCase::Reads::None ? "cuBLAS GemmEx, f32 accumulate"
                                            : "cuBLAS GemmEx with beta = 1, f32 accumulate");
  if (Cublas::kAvailable && !sixteen_bit) {  // for context: what cuBLAS gets when f32 inputs may be cut to TF32
    const auto run_tf32 = [&] { cublas.gemm(g, d.a(), d.b(), d.c_baseline(), CublasMath::Tf32); };
    run_tf32();
    if (!check_error(g.name() + " cuBLAS TF32 vs float64", d.error_vs_float64(d.baseline_values()), kHalfLimit)) return false;
    const auto [tf32_ms, f32_ms] = device_ms_pair(run_tf32, run_cublas);
    emit((g.name() + "_cublas_tf32_TFLOPs").c_str(), g.tflops(tf32_ms), "TFLOP/s", g.tflops(f32_ms), "cuBLAS f32 without TF32");
  }
  return ok;
}

std::vector<GemmCase> gemm_cases() {
  const Layout row = Layout::RowMajor, col = Layout::ColMajor;
  const Gemm::Shape cube{4096, 4096, 4096};
  std::vector<GemmCase> cases = {
      {jit::DType::bf16, row, col, cube},          // wgmma + TMA on Hopper
      {jit::DType::bf16, row, col, cube, "", 2},   // ... in clusters of two blocks sharing B's slices
      {jit::DType::f16, row, col, cube},
      {jit::DType::bf16, row, col, cube, "cuda"},  // the generic implementation on the same work
      {jit::DType::bf16, row, row, cube},          // generic: the sm90a path takes A row, B col only
      // LLM projections: activations row-major, weights as nn.Linear keeps them (n x k row-major: B column-major)
      {jit::DType::bf16, row, col, {8192, 4096, 4096}},   // prefill
      {jit::DType::bf16, row, col, {16, 4096, 4096}},     // decode: reads the weights; their 32 MB stay in L2 between reps
      // ... at cuda-sm90a's own tile: default tiles route few rows to the generic text's split tile
      {jit::DType::bf16, row, col, {16, 4096, 4096}, "", 0, 128, 256, 64, 4},
      {jit::DType::bf16, row, col, {64, 4096, 4096}},
      {jit::DType::bf16, row, col, {64, 4096, 4096}, "", 0, 128, 256, 64, 4},
      {jit::DType::bf16, row, col, {64, 4096, 4096}, "cuda", 0, 16, 128, 64, 4},
      {jit::DType::bf16, row, col, {32, 4096, 4096}},
      // decode on the generic text: few tiles, so each tile's K is split over a cluster's blocks
      {jit::DType::bf16, row, col, {16, 4096, 4096}, "cuda", 0, 16, 128, 64, 4},
      {jit::DType::bf16, row, col, {16, 4096, 4096}, "cuda", 0, 16, 64, 64, 4},
      {jit::DType::f32, row, col, {16, 4096, 4096}, "cuda", 0, 16, 128, 32, 4},
      {jit::DType::f32, row, col, {16, 4096, 4096}},  // the default tile (128 x 256: 16 tiles, never split)
      {jit::DType::bf16, row, col, {4096, 11008, 4096}},  // Llama-7B MLP up projection
      {jit::DType::f32, row, row, cube},
      {jit::DType::f32, row, col, cube},  // nn.Linear in f32 (A and B lie along K: both packed)
      {jit::DType::f32, col, row, cube},  // no operand along K
      {jit::DType::f32, col, col, cube},  // B alone along K
      // the default tile chosen by hand: never packed (by default, a launch this large packs its
      // operands lying along K first -- A row-major, B column-major: all but col/row above)
      {jit::DType::f32, row, row, cube, "", 0, 128, 256, 32, 3},
      {jit::DType::f32, row, col, cube, "", 0, 128, 256, 32, 3},
      {jit::DType::f32, col, col, cube, "", 0, 128, 256, 32, 3},
      {jit::DType::f32, row, col, {4096, 4096, 1024}},  // the smallest product packed
      {jit::DType::f32, row, col, {4096, 4096, 1024}, "", 0, 128, 256, 32, 3},
  };
  // The Llama-3-8B layer's projections as examples/decoder_layer.hpp runs them (bf16, weights
  // K x N row-major: B row-major), prefill 1 x 2048 tokens: qkv, o, gate/up, down; at the default
  // tiles, in clusters of two and at 3 stages (the tuner's pick for several of them); then 8 x 2048
  // at the defaults. `--filter bf16_row_row_2048x` takes the first alone.
  for (const Gemm::Shape shape : {Gemm::Shape{2048, 6144, 4096}, {2048, 4096, 4096}, {2048, 28672, 4096}, {2048, 4096, 14336}}) {
    cases.push_back({jit::DType::bf16, row, row, shape});
    cases.push_back({jit::DType::bf16, row, row, shape, "", 2});
    cases.push_back({jit::DType::bf16, row, row, shape, "", 0, 128, 256, 64, 3, "_stages3"});
    if (shape.n == 28672) cases.push_back({jit::DType::bf16, row, row, shape, "", 0, 0, 0, 0, 0, "", Gemm::Gate::Silu});  // as the layer runs it
  }
  // The same layer's prefill at 8 x 2048 tokens (16384 rows; `--filter 16384`): qkv, o, gate/up
  // gated as the layer runs it (silu in the epilogue, C of N / 2 columns; cuBLAS's time is the
  // plain product's) and plain, down; at the default tiles, in clusters of two and at 3 stages.
  for (const Gemm::Shape shape : {Gemm::Shape{16384, 6144, 4096}, {16384, 4096, 4096}, {16384, 28672, 4096}, {16384, 4096, 14336}}) {
    const bool mlp_up = shape.n == 28672;
    const Gemm::Gate gate = mlp_up ? Gemm::Gate::Silu : Gemm::Gate::None;
    cases.push_back({jit::DType::bf16, row, row, shape, "", 0, 0, 0, 0, 0, "", gate});
    cases.push_back({jit::DType::bf16, row, row, shape, "", 2, 0, 0, 0, 0, "", gate});
    cases.push_back({jit::DType::bf16, row, row, shape, "", 0, 128, 256, 64, 3, "_stages3", gate});
    if (mlp_up) cases.push_back({jit::DType::bf16, row, row, shape});
  }
  // ... and as the layer runs o (the residual added by the epilogue chain) and down (beta = 1), at
  // both token counts (`--filter _residual`, `--filter _beta1`): against cuBLAS with beta = 1.
  for (const std::int64_t m : {2048, 16384}) {
    GemmCase o{jit::DType::bf16, row, row, {m, 4096, 4096}}, down{jit::DType::bf16, row, row, {m, 4096, 14336}};
    o.reads = GemmCase::Reads::Residual, down.reads = GemmCase::Reads::C;
    cases.push_back(o);
    cases.push_back(down);
  }
  return cases;
}

// Tuned against the default tiles (each in a fresh cache, so the tuning runs).
std::vector<GemmCase> tuning_cases() {
  const Gemm::Shape cube{4096, 4096, 4096};
  return {{jit::DType::bf16, Layout::RowMajor, Layout::ColMajor, cube}, {jit::DType::f32, Layout::RowMajor, Layout::RowMajor, cube}};
}

// In a fresh process and cache (JITK_CACHE_DIR set by the parent): the first get_tuned of each
// case, compiles of every candidate included, then the tuned kernel against the default tiles.
int child_tune() {
  if (!jit::cuda::available()) return 1;
  bool ok = true;
  for (const GemmCase& g : tuning_cases()) {
    if (!wanted(g.name())) continue;
    try {
      const auto t0 = clock_type::now();
      const auto tuned = jit::get_tuned<Gemm>(g.params(), g.shape, kCuda0);
      const double tuning_ms = ms_since(t0);
      const auto base = jit::get<Gemm>(g.params(), kCuda0);
      bool decided = false;
      for (const jit::TuningInfo& t : jit::cache::tuning())
        if (t.base_params == Gemm::to_params(g.params()).to_string() && t.shape_class == Gemm::shape_class(g.shape)) {
          std::fprintf(stderr, "gemm tuning: %s: %lld candidates in %.0f ms, %s at %.3f ms (default %.3f ms)\n", g.name().c_str(),
                       static_cast<long long>(t.candidates), t.tuning_ms, t.choice.c_str(), t.best_ms, t.default_ms);
          decided = true;
        }
      if (!decided)
        std::fprintf(stderr, "gemm tuning: %s: no decision recorded (JITK_AUTOTUNE=0, or no cache on disk?)\n", g.name().c_str());
      GemmData d(g);
      const auto run_tuned = [&] { tuned.launch(d.args(d.c())); };
      const auto run_base = [&] { base.launch(d.args(d.c_baseline())); };
      run_tuned();
      run_base();
      const std::vector<float> c = d.c_values();
      const double limit = g.dtype == jit::DType::f32 ? kF32Limit : kHalfLimit;
      const std::string label = g.name() + " tuned " + tuned.implementation();
      ok &= check_error(label + " vs float64", d.error_vs_float64(c), limit);
      ok &= check_error(label + " vs default tiles", rel_l2(c, d.baseline_values()), limit);
      const auto [tuned_ms, base_ms] = device_ms_pair(run_tuned, run_base);
      emit((g.name() + "_tuned_TFLOPs").c_str(), g.tflops(tuned_ms), "TFLOP/s", g.tflops(base_ms), "jitk default tiles, same run");
      // what a call saves; under 1% of the default's time it is the timing's noise, written as 0
      const double saved_ms = base_ms - tuned_ms > 0.01 * base_ms ? base_ms - tuned_ms : 0.0;
      emit((g.name() + "_tuning_ms").c_str(), tuning_ms, "ms", saved_ms, "ms saved a call, 0 under 1% (ratio: calls to repay)");
    } catch (const jit::Error& e) {
      std::fprintf(stderr, "gemm tuning: %s failed: %s  <-- GEMM CHECK FAILED\n", g.name().c_str(), e.what());
      ok = false;
    }
  }
  return ok ? 0 : 1;
}

// ---- decode gemms: the Llama-3-8B layer's four projections at 64 rows (a decode step of batch 64)
// as examples/decoder_layer.hpp runs them (bf16, A row-major, weights K x N row-major; o with the
// residual in its epilogue, down with beta = 1, gate/up gated), at the default params (the few-rows
// route) and at cuda-sm90a tiles chosen by hand (64-row tiles split K over a cluster where they leave
// SMs idle), against cuBLAS on the same product (gate/up: the plain one) timed in alternation. At 64
// rows the weight's bytes are the work: GB/s of the weight read, and that as a fraction of a 1 GiB
// D2D copy's rate (read + write) in the same run. Each side rotates over copies of the weight of
// at least 256 MB in all, so that no weight stays in the 50 MB L2 from call to call (in the layer
// 1.5 GB pass between two reads of one weight). Names: gemm_decode_<proj>_64x<n>x<k>_<side>.
struct DecodeGemm {
  const char* proj;
  std::int64_t n, k;  // B's columns (gate/up: gate and up interleaved, C has n / 2) and rows
  enum Kind { Plain, Residual, Accumulate, Gated } kind;
};

bool decode_gemm_benches(const Cublas& cublas) {
  using Gemm = kernels::Gemm;
  const DecodeGemm shapes[] = {{"qkv", 6144, 4096, DecodeGemm::Plain},
                               {"o", 4096, 4096, DecodeGemm::Residual},
                               {"gateup", 28672, 4096, DecodeGemm::Gated},
                               {"down", 4096, 14336, DecodeGemm::Accumulate}};
  struct Tile {
    std::int64_t m, n, stages;
  };
  const Tile tiles[] = {{64, 64, 8}, {64, 64, 6}, {64, 128, 6}, {64, 256, 4}, {64, 256, 5}};
  constexpr std::int64_t m = 64;
  const auto wanted_shape = [&](const DecodeGemm& d) {
    const std::string base = std::string("gemm_decode_") + d.proj + "_64x" + std::to_string(d.n) + "x" + std::to_string(d.k);
    return wanted(base + "_");
  };
  bool any = false;
  for (const DecodeGemm& d : shapes) any |= wanted_shape(d);
  if (!any) return true;
  if (!Cublas::kAvailable) {
    std::fprintf(stderr, "gemm note: the decode gemms are checked against cuBLAS: skipped (built without it)\n");
    return true;
  }
  // the copy rate: 1 GiB device to device, read + write
  double copy_gbps = 0;
  {
    const std::size_t bytes = std::size_t(1) << 30;
    jit::cuda::DeviceArray<unsigned char> from(bytes), to(bytes);
    from.fill_bytes(0x3c);
    const double ms = device_ms([&] { cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(to.data()), reinterpret_cast<CUdeviceptr>(from.data()), bytes, nullptr); });
    copy_gbps = 2.0 * static_cast<double>(bytes) / ms / 1e6;
    emit("gemm_decode_d2d_copy_1GiB_GBps", copy_gbps, "GB/s", 0, "-");
  }
  bool ok = true;
  for (const DecodeGemm& d : shapes) {
    if (!wanted_shape(d)) continue;
    const std::string base = std::string("gemm_decode_") + d.proj + "_64x" + std::to_string(d.n) + "x" + std::to_string(d.k);
    const bool gated = d.kind == DecodeGemm::Gated;
    const std::int64_t n_out = gated ? d.n / 2 : d.n;
    const double weight_bytes = 2.0 * static_cast<double>(d.n) * static_cast<double>(d.k);
    const int copies = static_cast<int>(std::max<double>(1.0, std::ceil(256e6 / weight_bytes)));
    const std::vector<unsigned char> a_host = random_values(jit::DType::bf16, m * d.k, 1);
    std::vector<jit::cuda::DeviceArray<unsigned char>> weights;
    {
      const std::vector<unsigned char> w = random_values(jit::DType::bf16, d.k * d.n, 2);
      for (int i = 0; i < copies; ++i) weights.emplace_back(w);
    }
    jit::cuda::DeviceArray<unsigned char> a(a_host), c = device_values(jit::DType::bf16, m * d.n),
                                                    gu = device_values(jit::DType::bf16, m * d.n),
                                                    ref = device_values(jit::DType::bf16, m * d.n),
                                                    residual = device_values(jit::DType::bf16, m * n_out);
    residual.fill_bytes(0);  // C = A B + 0: checked against cuBLAS's A B
    GemmCase plain{jit::DType::bf16, Layout::RowMajor, Layout::RowMajor, {m, d.n, d.k}};
    int turn_ref = 0;
    const auto run_cublas = [&] { cublas.gemm(plain, a.data(), weights[static_cast<std::size_t>(turn_ref++ % copies)].data(), ref.data()); };
    run_cublas();
    std::vector<float> want = download_values(jit::DType::bf16, ref);
    // name's weight read rate against cuBLAS's plain gemm (same run): GB/s and the fraction of the copy rate
    const auto emit_rates = [&](const std::string& name, auto&& run) {
      const auto [ms, cublas_ms] = device_ms_pair(run, run_cublas);
      emit((name + "_GBps").c_str(), weight_bytes / ms / 1e6, "GB/s", weight_bytes / cublas_ms / 1e6, "cuBLAS GemmEx (plain), same run");
      emit((name + "_of_copy").c_str(), weight_bytes / ms / 1e6 / copy_gbps, "x", weight_bytes / cublas_ms / 1e6 / copy_gbps,
           "cuBLAS's fraction of the copy rate");
    };
    if (gated) {  // act(gate) * up of each group of 8 gate and 8 up columns
      std::vector<float> act(static_cast<std::size_t>(m * n_out));
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t j = 0; j < n_out; ++j) {
          const float g = want[static_cast<std::size_t>(r * d.n + j / 8 * 16 + j % 8)], u = want[static_cast<std::size_t>(r * d.n + j / 8 * 16 + 8 + j % 8)];
          act[static_cast<std::size_t>(r * n_out + j)] = g / (1.0f + std::exp(-g)) * u;
        }
      want = std::move(act);
    }
    std::vector<std::pair<std::string, Gemm::Params>> sides;
    const auto params_of = [&](const Tile* t) {
      Gemm::Params p{jit::DType::bf16};
      p.a_layout = Layout::RowMajor, p.b_layout = Layout::RowMajor;
      if (d.kind == DecodeGemm::Residual) p.epilogue = "add";
      if (gated) p.gate = Gemm::Gate::Silu;
      if (t) p.tile_m = t->m, p.tile_n = t->n, p.tile_k = 64, p.stages = t->stages;
      return p;
    };
    sides.emplace_back("default", params_of(nullptr));
    for (const Tile& t : tiles)
      sides.emplace_back("tile" + std::to_string(t.m) + "x" + std::to_string(t.n) + "x64x" + std::to_string(t.stages), params_of(&t));
    const double beta = d.kind == DecodeGemm::Accumulate ? 1.0 : 0.0;
    for (auto& [side, params] : sides) {
      const std::string name = base + "_" + side;
      try {
        const auto k = jit::get<Gemm>(params, kCuda0);
        int turn = 0;
        const auto run = [&] {
          const jit::ConstPtr w(weights[static_cast<std::size_t>(turn++ % copies)].data(), jit::DType::bf16);
          Gemm::Args args{m, d.n, d.k, 1.0, jit::ConstPtr(a.data(), jit::DType::bf16), d.k, w, d.n, beta, jit::MutPtr(c.data(), jit::DType::bf16), n_out};
          if (d.kind == DecodeGemm::Residual) args.epilogue = jit::Operands{jit::ConstPtr(residual.data(), jit::DType::bf16)};
          k.launch(args);
        };
        c.fill_bytes(0);  // beta = 1 adds to it
        run();
        const std::vector<float> got = download_values(jit::DType::bf16, c);
        const std::vector<float> got_c(got.begin(), got.begin() + m * n_out);
        if (!check_error(name + " " + k.implementation() + " vs cuBLAS", rel_l2(got_c, want), kHalfLimit)) {
          ok = false;
          continue;
        }
        emit_rates(name, run);
      } catch (const jit::Error& e) {
        std::fprintf(stderr, "gemm bench: %s failed: %s  <-- GEMM CHECK FAILED\n", name.c_str(), e.what());
        ok = false;
      }
    }
    if (gated) {  // the unfused pair the layer can run instead: the plain gemm, then silu_and_mul
      const std::string name = base + "_unfused";
      try {
        Gemm::Params p = params_of(nullptr);
        p.gate = Gemm::Gate::None;
        const auto k = jit::get<Gemm>(p, kCuda0);
        const auto act = jit::get<kernels::SiluAndMul>({jit::DType::bf16, 8});
        int turn = 0;
        const auto run = [&] {
          const jit::ConstPtr w(weights[static_cast<std::size_t>(turn++ % copies)].data(), jit::DType::bf16);
          k.launch(Gemm::Args{m, d.n, d.k, 1.0, jit::ConstPtr(a.data(), jit::DType::bf16), d.k, w, d.n, 0.0, jit::MutPtr(gu.data(), jit::DType::bf16), d.n});
          act.launch(kernels::SiluAndMul::Args{m * n_out / 8, jit::ConstPtr(gu.data(), jit::DType::bf16), jit::MutPtr(c.data(), jit::DType::bf16)});
        };
        run();
        const std::vector<float> got = download_values(jit::DType::bf16, c);
        const std::vector<float> got_c(got.begin(), got.begin() + m * n_out);
        if (!check_error(name + " vs cuBLAS", rel_l2(got_c, want), kHalfLimit)) {
          ok = false;
        } else {
          emit_rates(name, run);
        }
      } catch (const jit::Error& e) {
        std::fprintf(stderr, "gemm bench: %s failed: %s  <-- GEMM CHECK FAILED\n", name.c_str(), e.what());
        ok = false;
      }
    }
  }
  return ok;
}

// Every GEMM case against cuBLAS, then the tuning in a child with a cache of its own. False when a
// result was wrong or a kernel could not be had.
bool gemm_benches() {
  if (!Cublas::kAvailable) std::fprintf(stderr, "gemm note: built without cuBLAS (no CUDA::cublas): no baselines\n");
  bool ok = true;
  {
    Cublas cublas;
    std::unique_ptr<GemmData> data;
    for (const GemmCase& g : gemm_cases()) {
      if (!wanted(g.name())) continue;
      if (g.cluster_m > 1 && jit::implementations_for("gemm", kCuda0, Gemm::to_params(g.params())).empty()) {
        std::fprintf(stderr, "gemm note: %s skipped: no implementation runs clusters here (not a Hopper GPU?)\n", g.name().c_str());
        continue;
      }
      try {
        ok &= bench_gemm(g, cublas, data);
      } catch (const jit::Error& e) {
        std::fprintf(stderr, "gemm bench: %s failed: %s  <-- GEMM CHECK FAILED\n", g.name().c_str(), e.what());
        ok = false;
      }
    }
    ok &= decode_gemm_benches(cublas);
  }
  char tmpl[] = "/tmp/jitk-gemm-tune-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::fprintf(stderr, "gemm tuning: cannot make a cache dir: %s  <-- GEMM CHECK FAILED\n", std::strerror(errno));
    return false;
  }
  const std::string cache = tmpl;
  std::fflush(stdout);
  const std::string cmd = "JITK_CACHE_DIR='" + cache + "' '" + self_path() + "' --child-tune" + (g_json ? " --json" : "") +
                          (g_filter.empty() ? "" : " --filter '" + g_filter + "'");
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "gemm tuning child failed  <-- GEMM CHECK FAILED\n");
    ok = false;
  }
  std::system(("rm -rf '" + cache + "'").c_str());
  return ok;
}

// ---- block-sparse matmul: jitk's sparse products against dense cuBLAS on the full shape -----------

using BlockSparse = kernels::BlockSparseMatmul;
using SparseOp = BlockSparse::Op;

constexpr SparseOp kSparseOps[] = {SparseOp::Forward, SparseOp::BackwardInput, SparseOp::BackwardWeight};

// One support of W (K x N) with its values (random, in id order), on the host and the device.
struct SparseWeight {
  double target_density;  // what the mask was drawn with (mask.density() is what it got)
  std::string shape;      // the name's suffix: "" at 4096^3, else e.g. "_8192"
  jit::BlockMask mask;
  std::vector<unsigned char> values_host;
  jit::cuda::DeviceArray<unsigned char> values;
  jit::cuda::DeviceArray<std::int32_t> index;

  SparseWeight(std::int64_t K, std::int64_t N, std::int64_t block, double density, jit::DType dtype, unsigned seed,
               std::string shape_name = "")
      : target_density(density),
        shape(std::move(shape_name)),
        mask(jit::BlockMask::random(K, N, block, density, seed)),
        values_host(random_values(dtype, mask.nnz() * block * block, seed + 100)),
        values(values_host),
        index(mask.index()) {}

  // W dense (K x N row-major): the values at their blocks, zeros elsewhere.
  std::vector<unsigned char> dense(jit::DType dtype) const {
    const std::int64_t bs = mask.block(), N = mask.cols();
    const std::size_t size = jit::dtype_size(dtype);
    std::vector<unsigned char> w(static_cast<std::size_t>(mask.rows() * N) * size, 0);
    for (std::int64_t id = 0; id < mask.nnz(); ++id)
      for (std::int64_t i = 0; i < bs; ++i)
        std::memcpy(w.data() + static_cast<std::size_t>((mask.row_of(id) * bs + i) * N + mask.col_of(id) * bs) * size,
                    values_host.data() + static_cast<std::size_t>(id * bs * bs + i * bs) * size, static_cast<std::size_t>(bs) * size);
    return w;
  }
  // A dense K x N (row-major) cut down to the support's blocks, in the values' order.
  std::vector<float> gather(const std::vector<float>& dense) const {
    const std::int64_t bs = mask.block(), N = mask.cols();
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(mask.nnz() * bs * bs));
    for (std::int64_t id = 0; id < mask.nnz(); ++id)
      for (std::int64_t i = 0; i < bs; ++i) {
        const auto row = dense.begin() + (mask.row_of(id) * bs + i) * N + mask.col_of(id) * bs;
        out.insert(out.end(), row, row + bs);
      }
    return out;
  }
  std::string name(jit::DType dtype, SparseOp op) const {  // "block_sparse_bf16_forward_b64_d0.10", + shape
    char density[16];
    std::snprintf(density, sizeof density, "%.2f", target_density);
    return "block_sparse_" + std::string(jit::dtype_name(dtype)) + "_" + BlockSparse::op_name(op) + "_b" +
           std::to_string(mask.block()) + "_d" + density + shape;
  }
};

// X (m x K) and dY (m x N), random and uploaded once, a random dense W (K x N) for the dense
// baseline's timing, and two outputs (jitk's and cuBLAS's), each large enough for any op's.
class BlockSparseData {
 public:
  BlockSparseData(jit::DType dtype, std::int64_t m, std::int64_t K, std::int64_t N)
      : dtype_(dtype), m_(m), K_(K), N_(N),
        x_(random_values(dtype, m * K, 1)),
        dy_(random_values(dtype, m * N, 2)),
        w_full_(random_values(dtype, K * N, 3)),
        out_(device_values(dtype, std::max({m * N, m * K, K * N}))),
        out_dense_(device_values(dtype, std::max({m * N, m * K, K * N}))) {
    out_.fill_bytes(0);  // beta = 0 everywhere, but no NaN garbage in what a check reads
    out_dense_.fill_bytes(0);
  }

  void* out() const { return out_.data(); }
  void* out_dense() const { return out_dense_.data(); }
  std::vector<float> out_values() const { return download_values(dtype_, out_); }
  std::vector<float> out_dense_values() const { return download_values(dtype_, out_dense_); }
  const void* w_full() const { return w_full_.data(); }
  const void* x() const { return x_.data(); }
  // Bytes any op must move at least, each operand read once and the output written once: an
  // m x K matrix (X in, or dX out), an m x N one (Y out, or dY in) and W's blocks (in, or dW out).
  double compulsory_bytes(const SparseWeight& w) const {
    const double blocks = static_cast<double>(w.mask.nnz() * w.mask.block() * w.mask.block());
    return static_cast<double>(jit::dtype_size(dtype_)) * (static_cast<double>(m_ * K_ + m_ * N_) + blocks);
  }
  std::int64_t m() const { return m_; }
  jit::DType dtype() const { return dtype_; }

  // The kernel's arguments for `op` with W = w, writing `c` (beta = 0).
  BlockSparse::Args args(SparseOp op, const SparseWeight& w, void* c) const {
    const jit::DType t = dtype_;
    const jit::ConstPtr values(w.values.data(), t);
    switch (op) {
      case SparseOp::Forward:  // Y = X W
        return {m_, 1.0, jit::ConstPtr(x_.data(), t), K_, values, 0, 0.0, jit::MutPtr(c, t), N_, &w.mask, w.index.data()};
      case SparseOp::BackwardInput:  // dX = dY W^T
        return {m_, 1.0, jit::ConstPtr(dy_.data(), t), N_, values, 0, 0.0, jit::MutPtr(c, t), K_, &w.mask, w.index.data()};
      case SparseOp::BackwardWeight:  // dW = X^T dY on W's support
        break;
    }
    return {m_, 1.0, jit::ConstPtr(x_.data(), t), K_, jit::ConstPtr(dy_.data(), t), N_, 0.0, jit::MutPtr(c, t), 0, &w.mask, w.index.data()};
  }

  // The dense GEMM doing op's work with a dense W (K x N row-major), C row-major and tight. A
  // row-major matrix's memory read column-major is its transpose: W's gives W^T, X's gives X^T.
  GemmCase dense_case(SparseOp op) const {
    const Layout row = Layout::RowMajor, col = Layout::ColMajor;
    switch (op) {
      case SparseOp::Forward: return {dtype_, row, row, {m_, N_, K_}};        // X W
      case SparseOp::BackwardInput: return {dtype_, row, col, {m_, K_, N_}};  // dY W^T
      case SparseOp::BackwardWeight: break;
    }
    return {dtype_, col, row, {K_, N_, m_}};  // X^T dY
  }
  // cuBLAS on op's dense GEMM with W = w (dense K x N on the device), into c.
  void dense(SparseOp op, const Cublas& cublas, const void* w, void* c) const {
    const GemmCase g = dense_case(op);
    switch (op) {
      case SparseOp::Forward: cublas.gemm(g, x_.data(), w, c); return;
      case SparseOp::BackwardInput: cublas.gemm(g, dy_.data(), w, c); return;
      case SparseOp::BackwardWeight: cublas.gemm(g, x_.data(), dy_.data(), c); return;
    }
  }
  // Values op writes: Y's, dX's or dW's (the support's blocks).
  std::int64_t outputs(SparseOp op, const SparseWeight& w) const {
    return op == SparseOp::Forward ? m_ * N_ : op == SparseOp::BackwardInput ? m_ * K_ : w.mask.nnz() * w.mask.block() * w.mask.block();
  }

 private:
  jit::DType dtype_;
  std::int64_t m_, K_, N_;
  jit::cuda::DeviceArray<unsigned char> x_, dy_, w_full_, out_, out_dense_;
};

BlockSparse::Params block_sparse_params(jit::DType dtype, SparseOp op, std::int64_t block) {
  BlockSparse::Params p;
  p.dtype = dtype;
  p.op = op;
  p.block_size = block;
  return p;
}

// Each op's output on w against cuBLAS on the dense W (zeros off the support); backward_weight's
// against the dense X^T dY gathered at the support's blocks. False when one is over the limit.
bool check_block_sparse(const BlockSparseData& d, const SparseWeight& w, const Cublas& cublas) {
  const jit::DType t = d.dtype();
  const jit::cuda::DeviceArray<unsigned char> dense_w(w.dense(t));
  bool ok = true;
  for (SparseOp op : kSparseOps) {
    const auto k = jit::get<BlockSparse>(block_sparse_params(t, op, w.mask.block()), kCuda0);
    k.launch(d.args(op, w, d.out()));
    d.dense(op, cublas, dense_w.data(), d.out_dense());
    const std::size_t n = static_cast<std::size_t>(d.outputs(op, w));
    std::vector<float> got = d.out_values(), want = d.out_dense_values();
    got.resize(n);
    if (op == SparseOp::BackwardWeight) want = w.gather(want);
    want.resize(n);
    char density[32];
    std::snprintf(density, sizeof density, " (density %.3f)", w.mask.density());
    ok &= check_error(w.name(t, op) + density + " " + k.implementation() + " vs dense cuBLAS", rel_l2(got, want), kHalfLimit,
                      "block_sparse");
  }
  return ok;
}

// bf16 block-sparse products at m = K = N = `size` for the given block sizes and densities, each op
// against dense cuBLAS doing the same op on the full shape: the speed-up over dense (baseline: the
// ideal 1 / density), the sparse kernel's effective TFLOP/s, the speed-up against the op's bound
// and its tile reads. Every op is checked first on the supports of density `check_density`; false
// (and no timing) when a check fails or a kernel could not be had.
bool block_sparse_benches(const Cublas& cublas, std::int64_t size, std::initializer_list<std::int64_t> blocks,
                          std::initializer_list<double> densities, double check_density, const std::string& shape) {
  const jit::DType t = jit::DType::bf16;
  const std::int64_t m = size, K = size, N = size;
  std::vector<SparseWeight> weights;
  weights.reserve(blocks.size() * densities.size());
  for (std::int64_t block : blocks)
    for (double density : densities) weights.emplace_back(K, N, block, density, t, 42, shape);
  const auto any_wanted = [&](const SparseWeight& w) {
    return std::any_of(std::begin(kSparseOps), std::end(kSparseOps), [&](SparseOp op) { return wanted(w.name(t, op)); });
  };
  if (std::none_of(weights.begin(), weights.end(), any_wanted)) return true;
  const BlockSparseData d(t, m, K, N);

  bool ok = true;
  for (const SparseWeight& w : weights)
    if (w.target_density == check_density && any_wanted(w)) {
      try {
        ok &= check_block_sparse(d, w, cublas);
      } catch (const jit::Error& e) {
        std::fprintf(stderr, "block_sparse check: b%lld failed: %s  <-- BLOCK_SPARSE CHECK FAILED\n",
                     static_cast<long long>(w.mask.block()), e.what());
        ok = false;
      }
    }
  if (!ok) return false;  // no number for a wrong result

  // The memory floor's speed: a device-to-device copy of X (read + write), same run.
  const std::size_t x_bytes = static_cast<std::size_t>(m * K) * jit::dtype_size(t);
  const double copy_ms = device_ms([&] {
    cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(d.out_dense()), reinterpret_cast<CUdeviceptr>(d.x()), x_bytes, nullptr);
  });
  const double copy_bytes_per_ms = 2.0 * static_cast<double>(x_bytes) / copy_ms;
  for (const SparseWeight& w : weights)
    for (std::size_t o = 0; o < std::size(kSparseOps); ++o) {
      const SparseOp op = kSparseOps[o];
      const std::string name = w.name(t, op);
      if (!wanted(name)) continue;
      try {
        const auto k = jit::get<BlockSparse>(block_sparse_params(t, op, w.mask.block()), kCuda0);
        const BlockSparse::Args args = d.args(op, w, d.out());
        const auto [ms, dense_op_ms] = device_ms_pair([&] { k.launch(args); },
                                                      [&] { d.dense(op, cublas, d.w_full(), d.out_dense()); });
        const double bs = static_cast<double>(w.mask.block());
        const double sparse_tflops = 2.0 * static_cast<double>(m) * static_cast<double>(w.mask.nnz()) * bs * bs / ms / 1e9;
        std::fprintf(stderr, "block_sparse time: %-44s %-10s density %.3f: %.4f ms, dense cuBLAS %.4f ms\n", name.c_str(),
                     k.implementation().c_str(), w.mask.density(), ms, dense_op_ms);
        emit((name + "_speedup").c_str(), dense_op_ms / ms, "x", 1.0 / w.mask.density(), "1/density (ideal)");
        emit((name + "_TFLOPs").c_str(), sparse_tflops, "TFLOP/s", d.dense_case(op).tflops(dense_op_ms),
             "dense cuBLAS GemmEx, f32 accumulate");
        // The best this op could do: the dense time cut by the density, but never under the time its
        // compulsory bytes take at copy speed (at 10% density on 4096^3 the bytes are the floor).
        const double bound_ms = std::max(dense_op_ms * w.mask.density(), d.compulsory_bytes(w) / copy_bytes_per_ms);
        emit((name + "_bound_speedup").c_str(), dense_op_ms / ms, "x", dense_op_ms / bound_ms,
             "max(dense x density, compulsory bytes at D2D copy speed)");
        // What the tiles read (from L2, mostly) at least: each block's X (dY) slice of m rows, once per
        // block (a tile multiplies one block column or row: a slice meets one block), and
        // backward_weight's dY slice too; against DRAM's speed, to show how much L2 carries.
        const double slice_bytes = static_cast<double>(w.mask.nnz()) * static_cast<double>(m) * bs *
                                   static_cast<double>(jit::dtype_size(t)) * (op == SparseOp::BackwardWeight ? 2.0 : 1.0);
        emit((name + "_reads_TBps").c_str(), slice_bytes / ms / 1e9, "TB/s", copy_bytes_per_ms / 1e9,
             "D2D copy (DRAM read + write), same run");
      } catch (const jit::Error& e) {
        std::fprintf(stderr, "block_sparse bench: %s failed: %s  <-- BLOCK_SPARSE CHECK FAILED\n", name.c_str(), e.what());
        ok = false;
      }
    }
  return ok;
}

// The block-sparse section: every block size and density at 4096^3 (the issue's shape), and block 64
// at 90% sparsity on 8192^3, where the compulsory bytes no longer decide the bound.
bool block_sparse_benches() {
  if (!Cublas::kAvailable) {
    std::fprintf(stderr, "block_sparse note: built without cuBLAS (no CUDA::cublas): no dense baseline, section skipped\n");
    return true;
  }
  Cublas cublas;
  bool ok = block_sparse_benches(cublas, 4096, {64, 32}, {0.5, 0.25, 0.1}, 0.25, "");
  return block_sparse_benches(cublas, 8192, {64}, {0.1}, 0.1, "_8192") && ok;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> sections = {"compile", "first_use", "launch", "bandwidth", "rotary", "prefill", "decode", "gemm", "block_sparse"};
  std::string section_list;
  for (const auto& name : sections) section_list += (section_list.empty() ? "" : ", ") + name;
  std::vector<std::string> only_sections;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json")) g_json = true;
    if (!std::strcmp(argv[i], "--filter")) {
      if (i + 1 == argc) {
        std::fprintf(stderr, "--filter needs a text that the cases' names hold\n");
        return 2;
      }
      g_filter = argv[++i];
      if (g_filter.find('\'') != std::string::npos) {  // it goes to the tuning child in single quotes
        std::fprintf(stderr, "--filter: no single quotes\n");
        return 2;
      }
    }
  }
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--filter")) {  // read above, with its value
      ++i;
      continue;
    }
    if (!std::strcmp(argv[i], "--write-tiny-cubin") && i + 1 < argc) return write_tiny_cubin(argv[i + 1]);
    if (!std::strcmp(argv[i], "--child-compile-series")) return child_compile_series(6);
    if (!std::strcmp(argv[i], "--child-tune")) return child_tune();
    if (!std::strcmp(argv[i], "--only")) {
      if (i + 1 == argc) {
        std::fprintf(stderr, "--only needs section names: %s\n", section_list.c_str());
        return 2;
      }
      const std::string list = argv[++i];
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        only_sections.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    }
  }
  for (const auto& name : only_sections)
    if (std::find(sections.begin(), sections.end(), name) == sections.end()) {
      std::fprintf(stderr, "--only: no section '%s' (sections: %s)\n", name.c_str(), section_list.c_str());
      return 2;
    }
  const auto want = [&](const char* section) {
    return only_sections.empty() || std::find(only_sections.begin(), only_sections.end(), section) != only_sections.end();
  };
  if (!jit::cuda::available()) {
    std::printf("SKIPPED: no usable CUDA GPU: %s\n", jit::cuda::unavailable_reason().c_str());
    return 0;
  }
  const auto dev = jit::cuda::devices()[0];
  std::fprintf(stderr, "device: %s (%s, %d SMs)\n", dev.name.c_str(), dev.arch.c_str(), dev.sm_count);
  jit::cuda::synchronize();  // after the library made the primary context current on this thread

  // ---- cold compile: jitk vs raw NVRTC on the same text (fresh param value each rep: no cache)
  if (want("compile")) {
    std::vector<double> jitk_ms, raw_ms;
    // Distinct texts each time (NVRTC must not see a text twice), alternating order, and row
    // lengths that are all multiples of 16 so both sides instantiate the same code paths.
    constexpr std::int64_t kStep = 16;
    for (int rep = 0; rep < 10; ++rep) {
      auto time_jitk = [&] {
        std::int64_t hidden = 1024 + 2 * kStep * rep;
        auto t0 = clock_type::now();
        auto k = jit::get<kernels::Softmax>({jit::DType::f16, hidden});
        jitk_ms.push_back(ms_since(t0));
      };
      auto time_raw = [&] {
        std::int64_t hidden = 1024 + 2 * kStep * rep + kStep;
        const auto& def = jit::detail::find_kernel("softmax");
        auto unit = jit::detail::specialize(def, {{"dtype", std::string("f16")}, {"hidden", hidden}}, jit::Backend::Cuda);
        double r;
        raw_nvrtc(unit, dev.arch, &r);
        raw_ms.push_back(r);
      };
      if (rep % 2) { time_jitk(); time_raw(); } else { time_raw(); time_jitk(); }
    }
    emit("cold_compile_softmax_f16_ms", median(jitk_ms), "ms", median(raw_ms), "raw NVRTC, same text and PCH setting");
  }

  // ---- a kernel including CUB's block reduce: plain NVRTC vs NVRTC's automatic PCH (-pch), whose
  // first compile in a process builds the PCH and later ones with the same includes reuse it
  if (want("compile")) {
    // (cub/cub.cuh itself does not compile under NVRTC 13: it pulls in host-only headers.)
    std::vector<double> lean;
    for (int v = 1; v <= 3; ++v) lean.push_back(nvrtc_ms(cub_text("cub/block/block_reduce.cuh", 10 + v), dev.arch, {}));
    double create = nvrtc_ms(cub_text("cub/block/block_reduce.cuh", 20), dev.arch, {"-pch"});
    std::vector<double> reuse;
    for (int v = 21; v <= 23; ++v) reuse.push_back(nvrtc_ms(cub_text("cub/block/block_reduce.cuh", v), dev.arch, {"-pch"}));
    emit("cub_block_reduce_compile_pch_ms", median(reuse), "ms", median(lean), "same, no PCH");
    std::fprintf(stderr, "PCH creation compile: %.1f ms\n", create);
  }

  // ---- jitk's own cold compiles in a fresh process, with and without JITK_NVRTC_PCH=1
  if (want("compile")) {
    const std::string self = self_path();
    auto series = [&](const char* pch, double* first, double* rest) {
      char tmpl[] = "/tmp/jitk-pch-XXXXXX";
      std::string cache = ::mkdtemp(tmpl);
      std::string cmd = "JITK_NVRTC_PCH=" + std::string(pch) + " JITK_CACHE_DIR='" + cache + "' '" + self + "' --child-compile-series";
      FILE* f = ::popen(cmd.c_str(), "r");
      if (!f || std::fscanf(f, "%lf %lf", first, rest) != 2) *first = *rest = -1;
      if (f) ::pclose(f);
      std::system(("rm -rf '" + cache + "'").c_str());
    };
    double first_off, rest_off, first_on, rest_on;
    series("0", &first_off, &rest_off);
    series("1", &first_on, &rest_on);
    emit("jitk_cold_compile_pch_later_ms", rest_on, "ms", rest_off, "jitk without PCH, same series");
    emit("jitk_cold_compile_pch_first_ms", first_on, "ms", first_off, "jitk without PCH, first compile");
  }

  // ---- first use in a fresh process: warm disk cache vs cold
  if (want("first_use")) {
    char tmpl[] = "/tmp/jitk-gpu-bench-XXXXXX";
    std::string cache = ::mkdtemp(tmpl);
    const std::string self = self_path();
    std::vector<double> cold, warm;
    for (int rep = 0; rep < 3; ++rep) {
      std::system(("rm -rf '" + cache + "'").c_str());
      bool disk;
      cold.push_back(run_child(self, cache, &disk));
      for (int w = 0; w < 3; ++w) {
        double ms = run_child(self, cache, &disk);
        if (disk) warm.push_back(ms);
      }
    }
    if (!warm.empty()) emit("first_use_warm_disk_ms", median(warm), "ms", median(cold), "cold compile, fresh process");
    std::system(("rm -rf '" + cache + "'").c_str());
  }

  // ---- launch cost: jit::Kernel vs raw cuLaunchKernel of the same function
  if (want("launch")) {
    const std::int64_t n = 1024;
    jit::cuda::DeviceArray<float> x(n), y(n);
    x.fill_bytes(0);
    y.fill_bytes(0);
    auto k = jit::get<kernels::Saxpy>({jit::DType::f32});
    // The raw baseline: the same cached cubin loaded with cuModuleLoadData.
    const auto& def = jit::detail::find_kernel("saxpy");
    auto unit = jit::detail::specialize(def, {{"dtype", std::string("f32")}}, jit::Backend::Cuda);
    double unused;
    auto cubin = raw_nvrtc(unit, dev.arch, &unused);
    CUmodule mod;
    CUfunction fn;
    CU(cuModuleLoadData(&mod, cubin.data()));
    CU(cuModuleGetFunction(&fn, mod, "jitk_entry"));
    float a = 2.0f;
    CUdeviceptr px = reinterpret_cast<CUdeviceptr>(x.data()), py = reinterpret_cast<CUdeviceptr>(y.data());
    long long items = n;
    void* params[] = {&a, &px, &py, &items};
    constexpr int kLaunches = 20000;
    auto host_us = [&](auto&& launch) {
      std::vector<double> t;
      for (int r = 0; r < 7; ++r) {
        CU(cuCtxSynchronize());
        auto t0 = clock_type::now();
        for (int i = 0; i < kLaunches; ++i) launch();
        t.push_back(ms_since(t0) * 1000.0 / kLaunches);
        CU(cuCtxSynchronize());
      }
      return median(t);
    };
    double raw = host_us([&] { cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr); });
    double ours = host_us([&] { k(n, 2.0, x.data(), y.data()); });
    emit("launch_us_saxpy", ours, "us", raw, "raw cuLaunchKernel");
    cuModuleUnload(mod);
  }

  // ---- bandwidth at large sizes vs a device-to-device copy of the same bytes
  if (want("bandwidth")) {
    const std::int64_t rows = 16384, hidden = 8192;
    const std::size_t elems = static_cast<std::size_t>(rows * hidden);
    jit::cuda::DeviceArray<jit::bfloat16> xb(elems * 2), yb(elems * 2), wb(hidden);
    jit::cuda::DeviceArray<float> xf(elems), yf(elems), wf(hidden);
    for (auto* p : {(void*)xb.data(), (void*)yb.data()}) CU(cuMemsetD16(reinterpret_cast<CUdeviceptr>(p), 0x3f80, elems * 2));
    CU(cuMemsetD16(reinterpret_cast<CUdeviceptr>(wb.data()), 0x3f80, hidden));
    CU(cuMemsetD32(reinterpret_cast<CUdeviceptr>(xf.data()), 0x3f800000, elems));
    CU(cuMemsetD32(reinterpret_cast<CUdeviceptr>(yf.data()), 0x3f800000, elems));
    CU(cuMemsetD32(reinterpret_cast<CUdeviceptr>(wf.data()), 0x3f800000, hidden));
    auto copy_gbs = [&](std::size_t bytes) {
      double ms = device_ms([&] { cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(yb.data()), reinterpret_cast<CUdeviceptr>(xb.data()), bytes, nullptr); });
      return 2.0 * bytes / ms / 1e6;  // read + write
    };
    auto report = [&](const char* name, double bytes_moved, double ms, double copy) {
      emit(name, bytes_moved / ms / 1e6, "GB/s", copy, "D2D copy, same bytes");
    };
    {
      auto k = jit::get<kernels::RmsNorm>({jit::DType::bf16, hidden});
      double ms = device_ms([&] { k(rows, xb.data(), wb.data(), yb.data(), 1e-6); });
      report("rms_norm_bf16_8192_GBps", 2.0 * elems * 2, ms, copy_gbs(elems * 2));
    }
    {
      auto k = jit::get<kernels::Softmax>({jit::DType::bf16, hidden});
      double ms = device_ms([&] { k(rows, xb.data(), yb.data()); });
      report("softmax_bf16_8192_GBps", 2.0 * elems * 2, ms, copy_gbs(elems * 2));
    }
    {
      auto k = jit::get<kernels::SiluAndMul>({jit::DType::bf16, hidden});
      double ms = device_ms([&] { k(rows / 2, xb.data(), yb.data()); });
      report("silu_and_mul_bf16_8192_GBps", 1.5 * elems * 2, ms, copy_gbs(elems * 2));
    }
    {
      auto k = jit::get<kernels::Saxpy>({jit::DType::f32});
      double ms = device_ms([&] { k(static_cast<std::int64_t>(elems), 1.0001, xf.data(), yf.data()); });
      report("saxpy_f32_GBps", 3.0 * elems * 4, ms, copy_gbs(elems * 4));
    }
    {
      auto k = jit::get<kernels::RmsNorm>({jit::DType::f32, hidden});
      double ms = device_ms([&] { k(rows, xf.data(), wf.data(), yf.data(), 1e-6); });
      report("rms_norm_f32_8192_GBps", 2.0 * elems * 4, ms, copy_gbs(elems * 4));
    }
    {
      auto k = jit::get<kernels::LogSoftmax>({jit::DType::bf16, hidden});
      double ms = device_ms([&] { k(rows, xb.data(), yb.data()); });
      report("log_softmax_bf16_8192_GBps", 2.0 * elems * 2, ms, copy_gbs(elems * 2));
    }
    {
      auto k = jit::get<kernels::LayerNorm>({jit::DType::bf16, hidden});
      double ms = device_ms([&] { k(rows, xb.data(), wb.data(), wb.data(), yb.data(), 1e-5); });
      report("layer_norm_bf16_8192_GBps", 2.0 * elems * 2, ms, copy_gbs(elems * 2));
    }
    for (auto approx : {kernels::GeluAndMul::Approximate::None, kernels::GeluAndMul::Approximate::Tanh}) {
      auto k = jit::get<kernels::GeluAndMul>({jit::DType::bf16, hidden, approx});
      double ms = device_ms([&] { k(rows / 2, xb.data(), yb.data()); });
      report(approx == kernels::GeluAndMul::Approximate::Tanh ? "gelu_tanh_and_mul_bf16_8192_GBps" : "gelu_and_mul_bf16_8192_GBps",
             1.5 * elems * 2, ms, copy_gbs(elems * 2));
    }
    {
      // x and residual read, residual and y written: twice a copy's bytes. Halves of the buffers.
      auto k = jit::get<kernels::FusedAddRmsNorm>({jit::DType::bf16, hidden});
      const std::int64_t half_rows = rows / 2;
      const std::size_t half = elems / 2;
      double ms = device_ms([&] { k(half_rows, xb.data(), xb.data() + elems, wb.data(), yb.data(), 1e-6); });
      report("fused_add_rms_norm_bf16_8192_GBps", 4.0 * half * 2, ms, copy_gbs(elems * 2));
    }
    // Fusion chains (minimal bytes: each input read once, each output written once; the vectors
    // and numbers are noise). Their unfused baseline is the kernel alone plus one elementwise
    // pass per tensor step; PyTorch's eager chain is in torch_baseline.py.
    {
      // residual add -> rms_norm -> scale: x, residual in; residual (the sum), y out
      auto k = jit::get<kernels::RmsNorm>({jit::DType::bf16, hidden, "add>store", "mul_scalar"});
      const std::int64_t half_rows = rows / 2;
      const std::size_t half = elems / 2;
      jit::Operands pro{jit::ConstPtr(xb.data() + elems, jit::DType::bf16), jit::MutPtr(xb.data() + elems, jit::DType::bf16)};
      jit::Operands epi{0.5};
      double ms = device_ms([&] { k(half_rows, xb.data(), wb.data(), yb.data(), 1e-6, pro, epi); });
      report("chain_add_rms_norm_scale_bf16_8192_GBps", 4.0 * half * 2, ms, copy_gbs(elems * 2));
    }
    {
      // the up/gate projection's bias -> silu_and_mul -> scale -> + residual: x (2H) and residual (H) in, out (H) out
      auto k = jit::get<kernels::SiluAndMul>({jit::DType::bf16, hidden, "add_vec", "mul_scalar>add"});
      const std::int64_t half_rows = rows / 2;
      jit::cuda::DeviceArray<jit::bfloat16> bias(2 * hidden);
      CU(cuMemsetD16(reinterpret_cast<CUdeviceptr>(bias.data()), 0x3c00, 2 * hidden));
      jit::Operands pro{jit::ConstPtr(bias.data(), jit::DType::bf16)};
      jit::Operands epi{0.5, jit::ConstPtr(xb.data() + elems, jit::DType::bf16)};
      double ms = device_ms([&] { k(half_rows, xb.data(), yb.data(), pro, epi); });
      report("chain_bias_silu_and_mul_scale_add_bf16_8192_GBps", 2.0 * elems * 2, ms, copy_gbs(elems * 2));
    }
    {
      // layer_norm -> gelu -> mul by a per-column vector: x in, y out
      auto k = jit::get<kernels::LayerNorm>({jit::DType::bf16, hidden, {}, "gelu>mul_vec"});
      jit::Operands epi{jit::ConstPtr(wb.data(), jit::DType::bf16)};
      double ms = device_ms([&] { k(rows, xb.data(), wb.data(), wb.data(), yb.data(), 1e-5, jit::Operands{}, epi); });
      report("chain_layer_norm_gelu_mul_vec_bf16_8192_GBps", 2.0 * elems * 2, ms, copy_gbs(elems * 2));
      // the same with cheaper activations: what the exact gelu costs at the end of a row kernel
      for (const char* epilogue : {"gelu_tanh>mul_vec", "relu>mul_vec"}) {
        auto k2 = jit::get<kernels::LayerNorm>({jit::DType::bf16, hidden, {}, epilogue});
        double ms2 = device_ms([&] { k2(rows, xb.data(), wb.data(), wb.data(), yb.data(), 1e-5, jit::Operands{}, epi); });
        const std::string name = std::string("chain_layer_norm_") + (epilogue[0] == 'r' ? "relu" : "gelu_tanh") + "_mul_vec_bf16_8192_GBps";
        report(name.c_str(), 2.0 * elems * 2, ms2, copy_gbs(elems * 2));
      }
    }
    for (auto grad_type : {jit::DType::f32, jit::DType::bf16}) {
      // One AdamW step over `elems` parameters: param, m, v read and written (f32), grads read.
      auto k = jit::get<kernels::AdamW>({grad_type});
      const std::int64_t n = static_cast<std::int64_t>(elems) / 2;
      float* p = xf.data();
      float* m = yf.data();
      float* v = yf.data() + n;
      const void* g = grad_type == jit::DType::f32 ? static_cast<const void*>(xf.data() + n) : static_cast<const void*>(xb.data());
      double ms = device_ms([&] { k(n, jit::MutPtr(p, jit::DType::f32), jit::ConstPtr(g, grad_type), m, v, 1e-3, 10); });
      const double bytes = n * (6.0 * 4 + jit::dtype_size(grad_type));
      report(grad_type == jit::DType::f32 ? "adamw_f32_grads_GBps" : "adamw_bf16_grads_GBps", bytes, ms, copy_gbs(elems * 2));
    }
    // Each row kernel's implementations side by side (the Hopper ones only on sm_90), same bytes.
    using Run = std::function<void(std::int64_t rows, std::int64_t h, const jit::Selection&)>;
    struct RowBench {
      const char* name;
      const char* kernel;
      Run run;  // moves 2 bytes read + 2 written per element of xb's first half (fused: half the rows, twice the arrays)
      const char* prologue = "";  // the chain it asks for (implementations that take no chains are left out)
    };
    std::vector<RowBench> row_benches = {
        {"rms_norm", "rms_norm", [&](std::int64_t r, std::int64_t h, const jit::Selection& s) {
           auto k = jit::get<kernels::RmsNorm>({jit::DType::bf16, h}, jit::default_target(), s);
           k(r, xb.data(), wb.data(), yb.data(), 1e-6);
         }},
        {"softmax", "softmax", [&](std::int64_t r, std::int64_t h, const jit::Selection& s) {
           jit::get<kernels::Softmax>({jit::DType::bf16, h}, jit::default_target(), s)(r, xb.data(), yb.data());
         }},
        {"log_softmax", "log_softmax", [&](std::int64_t r, std::int64_t h, const jit::Selection& s) {
           jit::get<kernels::LogSoftmax>({jit::DType::bf16, h}, jit::default_target(), s)(r, xb.data(), yb.data());
         }},
        {"layer_norm", "layer_norm", [&](std::int64_t r, std::int64_t h, const jit::Selection& s) {
           auto k = jit::get<kernels::LayerNorm>({jit::DType::bf16, h}, jit::default_target(), s);
           k(r, xb.data(), wb.data(), wb.data(), yb.data(), 1e-5);
         }},
        {"fused_add_rms_norm", "fused_add_rms_norm", [&](std::int64_t r, std::int64_t h, const jit::Selection& s) {
           auto k = jit::get<kernels::FusedAddRmsNorm>({jit::DType::bf16, h}, jit::default_target(), s);
           k(r / 2, xb.data(), xb.data() + elems, wb.data(), yb.data(), 1e-6);  // half the rows: twice the traffic
         }},
        {"chain_add_rms_norm_scale", "rms_norm", [&](std::int64_t r, std::int64_t h, const jit::Selection& s) {
           auto k = jit::get<kernels::RmsNorm>({jit::DType::bf16, h, "add>store", "mul_scalar"}, jit::default_target(), s);
           jit::Operands pro{jit::ConstPtr(xb.data() + elems, jit::DType::bf16), jit::MutPtr(xb.data() + elems, jit::DType::bf16)};
           k(r / 2, xb.data(), wb.data(), yb.data(), 1e-6, pro, jit::Operands{0.5});  // as fused_add_rms_norm
         }, "add>store"},
    };
    for (const auto& rb : row_benches)
      for (std::int64_t h : {1024LL, 2048LL, 4096LL, 8192LL, 16384LL}) {
        const std::int64_t r = static_cast<std::int64_t>(elems) / h;
        const double copy = copy_gbs(elems * 2);
        jit::ParamSet params{{"dtype", std::string("bf16")}, {"hidden", h}};
        if (*rb.prologue) params.set("prologue", std::string(rb.prologue));
        for (const std::string& impl : jit::implementations_for(rb.kernel, jit::default_target(), params)) {
          jit::Selection only;
          only.implementation = impl;
          rb.run(r, h, only);  // compiles outside the timing
          double ms = device_ms([&] { rb.run(r, h, only); });
          const std::string name = std::string(rb.name) + "_bf16_" + std::to_string(h) + "_" + impl + "_GBps";
          report(name.c_str(), 2.0 * elems * 2, ms, copy);
        }
      }
  }

  // ---- rotary_embedding in place on a prefill of Llama-3-8B's attention (16384 tokens, 32 q heads
  // and 8 k heads of 128): the bytes it must move (the rotated part of q and k read and written,
  // the positions, the table's rows) vs a D2D copy of the same q and k bytes, same run.
  if (want("rotary")) {
    using Rotary = kernels::RotaryEmbedding;
    const std::int64_t tokens = 16384, heads = 32, kv_heads = 8, head_dim = 128, max_position = 8192;
    const std::size_t q_elems = static_cast<std::size_t>(tokens * heads * head_dim), elems = q_elems * (heads + kv_heads) / heads;
    jit::cuda::DeviceArray<jit::bfloat16> qkb(elems), copyb(elems);
    jit::cuda::DeviceArray<float> qkf(elems), copyf(elems), table(static_cast<std::size_t>(max_position * head_dim));
    CU(cuMemsetD16(reinterpret_cast<CUdeviceptr>(qkb.data()), 0x3f80, elems));          // 1.0: rotations keep it bounded
    CU(cuMemsetD32(reinterpret_cast<CUdeviceptr>(qkf.data()), 0x3f800000, elems));
    CU(cuMemsetD32(reinterpret_cast<CUdeviceptr>(table.data()), 0x3f000000, table.size()));  // 0.5
    std::vector<std::int64_t> host_positions(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) host_positions[t] = t % max_position;
    jit::cuda::DeviceArray<std::int64_t> positions(host_positions);
    using DType = jit::DType;
    struct Case {
      DType dtype;
      Rotary::Style style;
      Rotary::Source source;
      std::int64_t rotary_dim;
    };
    const Case cases[] = {{DType::bf16, Rotary::Style::NeoX, Rotary::Source::Theta, 128}, {DType::bf16, Rotary::Style::NeoX, Rotary::Source::Table, 128},
                          {DType::bf16, Rotary::Style::GptJ, Rotary::Source::Theta, 128}, {DType::bf16, Rotary::Style::GptJ, Rotary::Source::Table, 128},
                          {DType::bf16, Rotary::Style::NeoX, Rotary::Source::Theta, 64},  {DType::f32, Rotary::Style::NeoX, Rotary::Source::Theta, 128},
                          {DType::f32, Rotary::Style::NeoX, Rotary::Source::Table, 128}};
    for (const Case& c : cases) {
      const bool bf16 = c.dtype == DType::bf16, from_table = c.source == Rotary::Source::Table;
      auto k = jit::get<Rotary>({c.dtype, head_dim, c.rotary_dim, c.style, c.source});
      void* q = bf16 ? static_cast<void*>(qkb.data()) : static_cast<void*>(qkf.data());
      void* kp = static_cast<char*>(q) + q_elems * jit::dtype_size(c.dtype);
      const jit::ConstPtr cos_sin = from_table ? jit::ConstPtr(table.data()) : jit::ConstPtr();
      auto run = [&] { k(tokens, heads, kv_heads, positions.data(), jit::MutPtr(q, c.dtype), jit::MutPtr(kp, c.dtype), 10000.0, cos_sin, max_position); };
      const std::size_t qk_bytes = elems * jit::dtype_size(c.dtype);
      void* dst = bf16 ? static_cast<void*>(copyb.data()) : static_cast<void*>(copyf.data());
      auto copy = [&] { cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(q), qk_bytes, nullptr); };
      const auto ms = device_ms_pair(run, copy);
      const double rotated = 2.0 * static_cast<double>(qk_bytes) * static_cast<double>(c.rotary_dim) / static_cast<double>(head_dim);
      const double bytes = rotated + tokens * 8.0 + (from_table ? std::min(tokens, max_position) * c.rotary_dim * 4.0 : 0.0);
      const std::string name = std::string("rotary_") + (c.style == Rotary::Style::NeoX ? "neox_" : "gptj_") + (from_table ? "table_" : "theta_") +
                               std::string(jit::dtype_name(c.dtype)) + "_d128_r" + std::to_string(c.rotary_dim) + "_GBps";
      emit(name.c_str(), bytes / ms[0] / 1e6, "GB/s", 2.0 * qk_bytes / ms[1] / 1e6, "D2D copy (read + write), same run");
    }
  }

  int prefill_rc = 0;
  if (want("prefill") && !prefill_benches()) {
    std::fprintf(stderr, "PREFILL CHECK FAILED: see the lines marked above\n");
    prefill_rc = 1;
  }

  // ---- attention_decode over a paged cache (32 q heads / 8 kv heads of 128, bf16, pages of 16
  // shuffled over the pool, one new token a sequence): K and V bytes read a second vs a D2D copy of
  // the same bytes (read + write), same run; with the split the descriptor picks (a workspace) and
  // without one (a block a sequence and kv head), at 4 and 8 warps a block. Each case's o is first
  // checked against a float64 attention of three sequences (all 32 heads); a failed check is not timed.
  bool decode_ok = true;
  if (want("decode")) {
    using Decode = kernels::AttentionDecode;
    const std::int64_t kv_heads = 8, group = 4, head_dim = 128, page_size = 16, tokens = 64 * 4096;
    const std::int64_t num_pages = tokens / page_size, row = kv_heads * head_dim;
    const std::size_t cache_elems = static_cast<std::size_t>(num_pages * page_size * row);
    // K and V one buffer (the copy baseline copies both at once); random values: a chunk uploaded, then repeated
    jit::cuda::DeviceArray<jit::bfloat16> kv(2 * cache_elems), copy_dst(2 * cache_elems), q(64 * group * row), o(64 * group * row);
    std::vector<float> values(1 << 22);  // kv[i] = values[i % values.size()], q[i] = values[i]
    {
      std::mt19937 gen(7);
      std::uniform_real_distribution<float> d(-2.0f, 2.0f);
      std::vector<jit::bfloat16> chunk(values.size());
      for (std::size_t i = 0; i < chunk.size(); ++i) {
        chunk[i] = jit::to_bfloat16(d(gen));
        values[i] = jit::to_float(chunk[i]);
      }
      jit::cuda::DeviceArray<jit::bfloat16> part(chunk);
      for (std::size_t at = 0; at < kv.size(); at += chunk.size())
        CU(cuMemcpyDtoD(reinterpret_cast<CUdeviceptr>(kv.data() + at), reinterpret_cast<CUdeviceptr>(part.data()),
                        std::min(chunk.size(), kv.size() - at) * sizeof(jit::bfloat16)));
      CU(cuMemcpyDtoD(reinterpret_cast<CUdeviceptr>(q.data()), reinterpret_cast<CUdeviceptr>(part.data()), q.size() * sizeof(jit::bfloat16)));
    }
    struct Shape {
      std::int64_t batch, context;
    };
    for (const Shape shape : {Shape{64, 4096}, Shape{8, 32768}}) {
      const std::int64_t max_pages = shape.context / page_size;
      std::vector<std::int32_t> pages(static_cast<std::size_t>(num_pages));
      for (std::int64_t i = 0; i < num_pages; ++i) pages[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
      std::shuffle(pages.begin(), pages.end(), std::mt19937(11));
      pages.resize(static_cast<std::size_t>(shape.batch * max_pages));
      jit::cuda::DeviceArray<std::int32_t> table(pages),
          contexts(std::vector<std::int32_t>(static_cast<std::size_t>(shape.batch), static_cast<std::int32_t>(shape.context)));
      const double kv_bytes = 2.0 * static_cast<double>(shape.batch * shape.context * row) * sizeof(jit::bfloat16);
      auto copy = [&] {
        cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(copy_dst.data()), reinterpret_cast<CUdeviceptr>(kv.data()),
                          static_cast<std::size_t>(kv_bytes), nullptr);
      };
      const std::vector<double> expected = decode_reference(values, pages, shape.batch, shape.context, max_pages, kv_heads, group,
                                                            head_dim, page_size, cache_elems, 1 / std::sqrt(double(head_dim)));
      for (std::int64_t warps : {4, 8})
        for (bool split : {true, false}) {
          const Decode::Params params{jit::DType::bf16, head_dim, page_size, group, 1, warps};
          auto k = jit::get<Decode>(params);
          const std::size_t ws_bytes = split ? Decode::workspace_bytes(params, shape.batch, kv_heads, shape.context) : 0;
          jit::cuda::DeviceArray<unsigned char> workspace(std::max<std::size_t>(ws_bytes, 1));
          workspace.fill_bytes(0);
          Decode::Args args{shape.batch, kv_heads, num_pages, max_pages, q.data(), kv.data(), kv.data() + cache_elems,
                            table.data(), contexts.data(), o.data(), nullptr, 1 / std::sqrt(double(head_dim)), shape.context};
          if (ws_bytes) {
            args.workspace = workspace.data();
            args.workspace_size = ws_bytes;
          }
          const auto s = Decode::split_for(params, shape.batch, kv_heads, shape.context, ws_bytes > 0);
          const std::string name = "decode_bf16_b" + std::to_string(shape.batch) + "_ctx" + std::to_string(shape.context) + "_w" +
                                   std::to_string(warps) + "_split" + std::to_string(s.splits) + "_GBps";
          o.fill_bytes(0xff);  // NaN: a row the kernel does not write fails the check
          k(args);
          CU(cuCtxSynchronize());
          const double error = decode_error(o.download(), expected, shape.batch, kv_heads * group, head_dim);
          if (!(error <= 1e-2)) {
            std::fprintf(stderr, "DECODE CHECK FAILED: %s: max |o - float64 attention| = %g of the largest |o|\n", name.c_str(), error);
            decode_ok = false;
            continue;
          }
          const auto ms = device_ms_pair([&] { k(args); }, copy);
          emit(name.c_str(), kv_bytes / ms[0] / 1e6, "GB/s", 2.0 * kv_bytes / ms[1] / 1e6, "D2D copy (read + write), same run");
          std::printf("  %s: %.3f ms\n", name.c_str(), ms[0]);
        }
    }
  }

  // ---- GEMM vs cuBLAS, and tuned vs default tiles; then block-sparse matmul vs dense cuBLAS (each
  // runs when the other failed; the exit status says whether either did)
  int rc = prefill_rc;
  if (!decode_ok) rc = 1;
  if (want("gemm") && !gemm_benches()) {
    std::fprintf(stderr, "GEMM CHECK FAILED: see the lines marked above\n");
    rc = 1;
  }
  if (want("block_sparse") && !block_sparse_benches()) {
    std::fprintf(stderr, "BLOCK_SPARSE CHECK FAILED: see the lines marked above\n");
    rc = 1;
  }
  return rc;
}
