// Finds libnvrtc (13, then 12; also under $CUDA_HOME), compiles to CUBIN, or PTX for an arch it cannot target.
#include "jit/cuda/nvrtc_compiler.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "support/hashing.hpp"
#include "jit/cuda/include_scan.hpp"
#include "jit/rtc_compile.hpp"
#include "support/dynamic_library.hpp"
#include "support/logging.hpp"
#include "support/text.hpp"

namespace jit::detail {

using nvrtcResult = int;

struct NvrtcLibrary {
  DynamicLibrary library;
  RtcFunctions rtc{};
  RtcOutput cubin{}, ptx{};
  nvrtcResult (*nvrtcVersion)(int*, int*);
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*);
  nvrtcResult (*nvrtcGetSupportedArchs)(int*);
  int major = 0, minor = 0;
  std::vector<int> archs;  // compute capabilities NVRTC can generate code for, e.g. 90
};

namespace {

struct Opened {
  NvrtcLibrary lib{};
  std::string reason;
};

const Opened& opened() {
  static const Opened o = [] {
    Opened o;
    std::vector<std::string> candidates = {"libnvrtc.so.13", "libnvrtc.so.12"};
    for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
      if (const char* home = std::getenv(env); home && *home)
        for (const char* v : {"13", "12"}) candidates.push_back(std::string(home) + "/lib64/libnvrtc.so." + v);
    for (const char* v : {"13", "12"}) candidates.push_back(std::string("/usr/local/cuda/lib64/libnvrtc.so.") + v);
    auto& l = o.lib;
    l.library = DynamicLibrary::open_first(candidates);
    if (!l.library) {
      o.reason = "cannot open NVRTC (tried libnvrtc.so.13, .so.12, $CUDA_HOME/lib64): " + l.library.error();
      return o;
    }
    SymbolTable symbols;
    symbols.required(l.nvrtcVersion, "nvrtcVersion")
        .required(l.rtc.get_error_string, "nvrtcGetErrorString")
        .required(l.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs")
        .required(l.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs")
        .required(l.rtc.create_program, "nvrtcCreateProgram")
        .required(l.rtc.destroy_program, "nvrtcDestroyProgram")
        .required(l.rtc.compile_program, "nvrtcCompileProgram")
        .required(l.rtc.get_program_log_size, "nvrtcGetProgramLogSize")
        .required(l.rtc.get_program_log, "nvrtcGetProgramLog")
        .required(l.cubin.get_size, "nvrtcGetCUBINSize")
        .required(l.cubin.get, "nvrtcGetCUBIN")
        .required(l.ptx.get_size, "nvrtcGetPTXSize")
        .required(l.ptx.get, "nvrtcGetPTX");
    if (std::string missing = symbols.resolve(l.library); !missing.empty()) {
      o.reason = l.library.path() + " lacks " + missing;
      return o;
    }
    l.library.keep_open();  // compilers hold its functions for the life of the process
    l.nvrtcVersion(&l.major, &l.minor);
    int n = 0;
    l.nvrtcGetNumSupportedArchs(&n);
    l.archs.resize(static_cast<std::size_t>(n));
    if (n > 0) l.nvrtcGetSupportedArchs(l.archs.data());
    return o;
  }();
  return o;
}

// 90 from "sm_90" / "sm_90a"; -1 when not of that form.
int arch_number(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return -1;
  try {
    return std::stoi(arch.substr(3));
  } catch (...) {
    return -1;
  }
}

// Toolkit headers for an NVRTC that lacks built-in cuda_fp16.h / cuda_bf16.h.
std::string toolkit_include_dir() {
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(env); home && *home && std::filesystem::exists(std::string(home) + "/include/cuda_fp16.h"))
      return std::string(home) + "/include";
  if (std::filesystem::exists("/usr/local/cuda/include/cuda_fp16.h")) return "/usr/local/cuda/include";
  return "";
}

}  // namespace

std::string NvrtcCompiler::unavailable_reason() { return opened().reason; }

NvrtcCompiler::NvrtcCompiler(std::string arch, bool force_ptx, std::shared_ptr<const MemoStore> memos)
    : arch_(std::move(arch)), memos_(std::move(memos)) {
  const Opened& o = opened();
  if (!o.reason.empty()) throw Error(ErrorCode::BackendUnavailable, o.reason);
  lib_ = &o.lib;
  int want = arch_number(arch_);
  if (want < 0) throw Error(ErrorCode::InvalidParams, "CUDA arch '" + arch_ + "' is not of the form sm_XY (e.g. sm_90)");
  id_ = "nvrtc " + std::to_string(lib_->major) + "." + std::to_string(lib_->minor);
  if (!force_ptx && std::find(lib_->archs.begin(), lib_->archs.end(), want) != lib_->archs.end()) {
    code_target_ = arch_;  // exact CUBIN; "sm_90a" passes through for Hopper-only instructions
  } else {
    // NVRTC cannot target this GPU: PTX of the newest architecture below it, JIT-compiled by the driver.
    int best = -1;
    for (int a : lib_->archs)
      if (a <= want) best = std::max(best, a);
    if (best < 0) throw Error(ErrorCode::BackendUnavailable, id_ + " cannot generate code for " + arch_);
    code_target_ = "compute_" + std::to_string(best);
    cubin_ = false;
  }
  options_ = {"--gpu-architecture=" + code_target_, "-std=c++17", "--device-as-default-execution-space"};
  include_dir_ = toolkit_include_dir();
  if (!include_dir_.empty()) options_.push_back("--include-path=" + include_dir_);
  // NVRTC's automatic precompiled headers (the PCH does not change the generated code, so it stays
  // out of options() and the key). By default (JITK_NVRTC_PCH unset or auto) only for a compile that
  // starts while no other NVRTC compile of the process runs; 1: for every compile; 0: never.
  // Alone they pay: on the H100, a fresh process's cold compiles of softmax bf16 took 15 ms each
  // instead of 276 ms (a CUB block reduce: 0.15-0.3 s instead of 1.5-2.2 s). Beside others they
  // cost: NVRTC parses the start of a unit and makes its PCH under one lock of the process (futex
  // traces on CPU: a compile takes it twice with -pch, and 8 started together queue there), and a
  // cold start's 8 kernels share no PCH: the Llama layer's cold start on the H100 took 2.79 s with
  // the PCH on every compile, 2.30 s with auto, 2.23 s without (median of 3 each, one machine;
  // docs/decoder-layer.md).
  if (const char* pch = std::getenv("JITK_NVRTC_PCH"); pch && *pch) {
    const std::string v = pch;
    if (v == "0") pch_ = Pch::Off;
    else if (v == "1") pch_ = Pch::On;
    else if (v != "auto")
      warn_once("JITK_NVRTC_PCH", "JITK_NVRTC_PCH='" + printable(v.substr(0, 64)) + "' is not 0, 1 or auto; using auto");
  }
}

namespace {
std::atomic<int> g_compiles_running{0};  // NVRTC compiles running in the process (every arch's compiler)
}  // namespace

int NvrtcCompiler::compiles_running() { return g_compiles_running.load(); }

std::string NvrtcCompiler::external_headers_fingerprint(const SourceUnit& unit) const {
  if (include_dir_.empty()) return "";
  // What the scan starts from, named by its hash (no text is copied on this path, a warm get's):
  // the folder, the unit's own headers and every #include named by any of its texts (a kernel text
  // of its own that includes CUB gets a fingerprint of its own).
  std::vector<std::string> names;
  for (const auto& h : unit.headers)
    for (auto& n : included_names(h.text)) names.push_back(std::move(n));
  for (auto& n : included_names(unit.main.text)) names.push_back(std::move(n));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  KeyBuilder start;
  start.add("include dir", include_dir_);
  for (const auto& h : unit.headers) start.add("own header " + h.name, h.text);
  for (const auto& n : names) start.add("#include", n);
  const std::string scan = start.finish().hex();
  std::lock_guard lock(fingerprint_mutex_);
  auto& fp = fingerprints_[scan];
  if (fp.empty()) {
    std::vector<std::string> roots;
    for (const auto& h : unit.headers) roots.push_back(h.text);
    roots.push_back(unit.main.text);
    // The memo is named after everything the scan starts from.
    fp = !memos_ ? fingerprint_includes(roots, include_dir_, unit.headers)
                 : fingerprint_includes_memoized(roots, include_dir_, unit.headers, *memos_, scan);
  }
  return fp;
}

CompiledArtifact NvrtcCompiler::compile(const SourceUnit& unit) const {
  std::vector<std::string> options = options_;
  struct Running {
    int before = g_compiles_running.fetch_add(1);
    ~Running() { g_compiles_running.fetch_sub(1); }
  } running;
  if (pch_ == Pch::On || (pch_ == Pch::Alone && running.before == 0)) options.push_back("-pch");
  return rtc_compile(lib_->rtc, cubin_ ? lib_->cubin : lib_->ptx, {unit, std::move(options), "cuda:" + arch_, id_});
}

}  // namespace jit::detail
