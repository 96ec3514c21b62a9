// jitk_first_use: a cached kernel's first use in a new process, the child the first-use benches run
// (jitk_gpu_bench's first_use and prefill sections, bench/gpu/first_use_vs_cupy.py). A process of
// libjitk and the CUDA driver alone: nothing else (NVRTC, cuBLAS) is mapped before its clock.
//   jitk_first_use      prints "<get ms> <1: from disk, 0: compiled> <get + first launch + sync ms>
//                       <NVRTC's open after them, ms> <1: NVRTC was mapped after the get>" for rms_norm bf16 4096
// Environment: JITK_BENCH_PREFILL=1 (attention_prefill's Llama variant instead: "<ms> <disk>"),
// JITK_BENCH_BREAKDOWN=1 (the warm path stage by stage on stderr, bench/warm_path_stages.hpp),
// JITK_BENCH_OTHER_FIRST=1 (saxpy got before the clock), JITK_BENCH_NVRTC_FIRST=1 (NVRTC opened
// before the clock), JITK_BENCH_TINY_FIRST / JITK_BENCH_TINY_CUBIN (issue 27's experiments, below).
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/warm_path_stages.hpp"
#include "jit/cuda.hpp"
#include "jit/cuda/nvrtc_compiler.hpp"
#include "jit/kernels.hpp"
#include "support/dynamic_library.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
namespace kernels = jit::kernels;

double ms_since(clock_type::time_point t) { return std::chrono::duration<double, std::milli>(clock_type::now() - t).count(); }

// The prefill variant a Llama-3-8B prefill compiles (bf16, head 128, causal, 4 query heads a kv head).
const kernels::AttentionPrefill::Params kLlamaPrefill{jit::DType::bf16, 128, true, 0, 4};

// Where a warm first use goes, stage by stage, each timed the first time this process does it, in
// the order jit::get takes them on a warm hit (bench/warm_path_stages.hpp), then the module loads.
void first_use_breakdown() {
  auto stage = [](const char* what, auto&& fn) {
    auto t0 = clock_type::now();
    fn();
    std::fprintf(stderr, "breakdown: %-48s %.4f ms\n", what, ms_since(t0));
  };
  const jit::Target* target = nullptr;
  stage("backends + default target", [&] { target = &jit::default_target(); });
  const jit::ParamSet params = jit::kernels::RmsNorm::to_params({jit::DType::bf16, 4096});
  jitk_bench::WarmStages w = jitk_bench::warm_path_stages(*target, "rms_norm", params, /*device=*/true);
  if (!w.bytes) return;
  const auto& s = w.s;
  stage("module load + lookup, first in process", [&] { s.driver->load(*w.bytes, s.unit, s.target, s.key); });
  stage("module load + lookup, second", [&] { s.driver->load(*w.bytes, s.unit, s.target, s.key); });
  int mode = 0;
  const char* how = std::getenv("JITK_CUDA_LOAD");
  std::fprintf(stderr, "breakdown: artifact %zu bytes; JITK_CUDA_LOAD=%s; driver loading mode %s\n", w.bytes->size(), how ? how : "(module)",
               cuModuleGetLoadingMode(reinterpret_cast<CUmoduleLoadingMode*>(&mode)) != CUDA_SUCCESS ? "unknown"
               : mode == CU_MODULE_LAZY_LOADING                                                       ? "lazy"
                                                                                                      : "eager");
}

// A module of one empty kernel in PTX (the driver JIT-compiles it): issue 27's experiment of paying the
// process's first module load with it, off the clock or on a thread of its own.
void load_tiny_module(CUcontext ctx) {
  cuCtxSetCurrent(ctx);
  static const char ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry jitk_tiny()\n{\n ret;\n}\n";
  const auto t0 = clock_type::now();
  CUmodule mod = nullptr;
  const CUresult r = cuModuleLoadData(&mod, ptx);
  std::fprintf(stderr, "tiny module: %s in %.4f ms\n", r == CUDA_SUCCESS ? "loaded" : "FAILED", ms_since(t0));
}

// The same with a CUBIN of the device's own arch (written by --write-tiny-cubin): the driver's ELF
// loader, not its PTX JIT, the path jitk's artifacts take; tells whether the process's first
// cuModuleLoadData costs more than later ones for any module (then a warm-up could be overlapped).
// Its function is got too (JITK_BENCH_TINY_GET=0: not): with lazy loading the driver loads a
// module's functions at cuModuleGetFunction, and an H100 run (bench/results/2026-11-26-h100-first-use2.log)
// showed a tiny CUBIN loaded without it
// leaves the first real load's extra cost (0.29-0.32 ms first, 0.10-0.11 second) where it was.
void load_tiny_cubin(CUcontext ctx, const std::vector<char>* cubin) {
  cuCtxSetCurrent(ctx);
  const auto t0 = clock_type::now();
  CUmodule mod = nullptr;
  CUresult r = cuModuleLoadData(&mod, cubin->data());
  const char* get = std::getenv("JITK_BENCH_TINY_GET");
  CUfunction fn = nullptr;
  const bool got = r == CUDA_SUCCESS && !(get && std::string(get) == "0");
  if (got) r = cuModuleGetFunction(&fn, mod, "jitk_tiny");
  std::fprintf(stderr, "tiny cubin: %s%s in %.4f ms\n", r == CUDA_SUCCESS ? "loaded" : "FAILED", got ? " with its function" : "",
               ms_since(t0));
}

std::vector<char> read_whole(const char* path) {
  std::vector<char> bytes;
  if (FILE* f = std::fopen(path, "rb")) {
    char buf[65536];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) bytes.insert(bytes.end(), buf, buf + n);
    std::fclose(f);
  }
  return bytes;
}

int child_first_use() {
  // cuInit and the primary context (the driver alone): once per process, not the cache's cost.
  // JITK_BENCH_NVRTC_FIRST=1: NVRTC opened before the clock too (what every warm process paid
  // before jitk remembered NVRTC's facts; the get then takes them from the open library).
  jit::cuda::synchronize();
  const bool nvrtc_first = std::getenv("JITK_BENCH_NVRTC_FIRST") && std::string(std::getenv("JITK_BENCH_NVRTC_FIRST")) == "1";
  if (nvrtc_first) jit::detail::NvrtcCompiler::unavailable_reason();
  std::thread tiny;
  // JITK_BENCH_TINY_FIRST: sync / thread (a PTX module, before the clock, here or on a thread);
  // cubin (JITK_BENCH_TINY_CUBIN's file, loaded before the clock) / cubin-thread (loaded on a thread
  // started as the clock starts: the get's host work runs meanwhile, as a warm-up begun when jitk's
  // CUDA driver is made would).
  const std::string tiny_how = std::getenv("JITK_BENCH_TINY_FIRST") ? std::getenv("JITK_BENCH_TINY_FIRST") : "";
  CUcontext tiny_ctx = nullptr;
  std::vector<char> tiny_cubin;
  if (!tiny_how.empty()) {
    cuCtxGetCurrent(&tiny_ctx);
    CUdevice dev = 0;
    if (!tiny_ctx && cuDeviceGet(&dev, 0) == CUDA_SUCCESS) cuDevicePrimaryCtxRetain(&tiny_ctx, dev);
    if (tiny_how.rfind("cubin", 0) == 0) {
      const char* path = std::getenv("JITK_BENCH_TINY_CUBIN");
      tiny_cubin = read_whole(path ? path : "");
      if (tiny_cubin.empty()) {
        std::fprintf(stderr, "JITK_BENCH_TINY_FIRST=%s needs JITK_BENCH_TINY_CUBIN (a file from --write-tiny-cubin)\n", tiny_how.c_str());
        return 1;
      }
      if (tiny_how == "cubin") load_tiny_cubin(tiny_ctx, &tiny_cubin);
    } else if (tiny_how == "thread") {
      tiny = std::thread(load_tiny_module, tiny_ctx);
    } else {
      load_tiny_module(tiny_ctx);
    }
  }
  struct Join {
    std::thread& t;
    ~Join() { if (t.joinable()) t.join(); }
  } join{tiny};
  if (std::getenv("JITK_BENCH_PREFILL")) {  // the same, for attention_prefill
    auto t0 = clock_type::now();
    auto k = jit::get<kernels::AttentionPrefill>(kLlamaPrefill);
    std::printf("%.4f %d\n", ms_since(t0), k.origin() == jit::Origin::DiskCache ? 1 : 0);
    return 0;
  }
  if (std::getenv("JITK_BENCH_BREAKDOWN")) {
    first_use_breakdown();
    return 0;
  }
  // Another kernel first (first_use_vs_cupy.py's jitk_after_other): the process's first module load
  // is then paid before the clock, as CuPy's figure pays it.
  if (std::getenv("JITK_BENCH_OTHER_FIRST")) jit::get<kernels::Saxpy>({jit::DType::f32});
  // The buffers of the first launch, before the clock (not the kernel's cost).
  const std::int64_t rows = 4, hidden = 4096;
  jit::cuda::DeviceArray<jit::bfloat16> x(rows * hidden), w(hidden), y(rows * hidden);
  x.fill_bytes(0);
  w.fill_bytes(0);
  jit::cuda::synchronize();
  auto t0 = clock_type::now();
  if (tiny_how == "cubin-thread") tiny = std::thread(load_tiny_cubin, tiny_ctx, &tiny_cubin);
  auto k = jit::get<kernels::RmsNorm>({jit::DType::bf16, hidden});
  double get_ms = ms_since(t0);
  if (tiny.joinable()) tiny.join();
  // With lazy loading the driver may finish loading at the first launch: timed too.
  k(rows, x.data(), w.data(), y.data(), 1e-6);
  jit::cuda::synchronize();
  double launched_ms = ms_since(t0);
  const bool nvrtc_mapped = jit::detail::library_loaded("libnvrtc.so");  // by the get (or before the clock)
  // What opening NVRTC costs this process now (0 where it was open already): a warm get no longer does.
  auto t1 = clock_type::now();
  jit::detail::NvrtcCompiler::unavailable_reason();
  const double nvrtc_open_ms = ms_since(t1);
  // get ms, from disk (1) or compiled (0), get + first launch + sync ms, NVRTC's open after them ms,
  // whether NVRTC was mapped after the get (1) or not (0)
  std::printf("%.4f %d %.4f %.4f %d\n", get_ms, k.origin() == jit::Origin::DiskCache ? 1 : 0, launched_ms, nvrtc_open_ms,
              nvrtc_mapped ? 1 : 0);
  return 0;
}


}  // namespace

int main() {
  try {
    return child_first_use();
  } catch (const jit::Error& e) {
    std::fprintf(stderr, "jitk_first_use: %s\n", e.what());
    return 1;
  }
}
