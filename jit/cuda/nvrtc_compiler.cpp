// Finds libnvrtc (13, then 12; also under $CUDA_HOME), compiles to CUBIN, or PTX for an arch it cannot target.
#include "jit/cuda/nvrtc_compiler.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "cache/cache_key.hpp"
#include "jit/cuda/include_scan.hpp"

namespace jit::detail {

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct NvrtcLibrary {
  nvrtcResult (*nvrtcVersion)(int*, int*);
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*);
  nvrtcResult (*nvrtcGetSupportedArchs)(int*);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, std::size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, std::size_t*);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, std::size_t*);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
  int major = 0, minor = 0;
  std::vector<int> archs;  // compute capabilities NVRTC can generate code for, e.g. 90
  std::string path;
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
    void* handle = nullptr;
    std::string errors;
    for (const auto& c : candidates) {
      handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        o.lib.path = c;
        break;
      }
      if (const char* e = ::dlerror(); e && errors.empty()) errors = e;
    }
    if (!handle) {
      o.reason = "cannot open NVRTC (tried libnvrtc.so.13, .so.12, $CUDA_HOME/lib64): " + errors;
      return o;
    }
    auto& l = o.lib;
    std::string missing;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
    };
    get(l.nvrtcVersion, "nvrtcVersion");
    get(l.nvrtcGetErrorString, "nvrtcGetErrorString");
    get(l.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
    get(l.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs");
    get(l.nvrtcCreateProgram, "nvrtcCreateProgram");
    get(l.nvrtcDestroyProgram, "nvrtcDestroyProgram");
    get(l.nvrtcCompileProgram, "nvrtcCompileProgram");
    get(l.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
    get(l.nvrtcGetProgramLog, "nvrtcGetProgramLog");
    get(l.nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
    get(l.nvrtcGetCUBIN, "nvrtcGetCUBIN");
    get(l.nvrtcGetPTXSize, "nvrtcGetPTXSize");
    get(l.nvrtcGetPTX, "nvrtcGetPTX");
    if (!missing.empty()) {
      o.reason = o.lib.path + " lacks " + missing;
      return o;
    }
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

NvrtcCompiler::NvrtcCompiler(std::string arch, bool force_ptx, std::string memo_dir)
    : arch_(std::move(arch)), memo_dir_(std::move(memo_dir)) {
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
  // NVRTC's automatic precompiled headers, on unless JITK_NVRTC_PCH=0: measured on the H100, a
  // fresh process's cold compiles of softmax bf16 took 15 ms each instead of 276 ms (a CUB block
  // reduce: 0.15-0.3 s instead of 1.5-2.2 s). The PCH does not change the generated code, so it stays
  // out of options() and the key.
  if (const char* pch = std::getenv("JITK_NVRTC_PCH"); pch && std::string(pch) == "0") pch_ = false;
}

std::string NvrtcCompiler::external_headers_fingerprint(const SourceUnit& unit) const {
  if (include_dir_.empty()) return "";
  std::vector<std::string> roots;
  for (const auto& h : unit.headers) roots.push_back(h.text);
  roots.push_back(unit.main.text);
  // What the scan starts from: the unit's own headers and every #include named by any of its
  // texts (a kernel text of its own that includes CUB gets a fingerprint of its own).
  std::string start = include_dir_ + '\n';
  for (const auto& h : unit.headers) start += h.name + '\n' + h.text;
  std::vector<std::string> names;
  for (const auto& r : roots)
    for (auto& n : included_names(r)) names.push_back(std::move(n));
  std::sort(names.begin(), names.end());
  for (const auto& n : names) start += "#include " + n + '\n';
  std::lock_guard lock(fingerprint_mutex_);
  auto& fp = fingerprints_[start];
  if (fp.empty()) {
    // The memo is named after everything the scan starts from.
    KeyBuilder memo_name;
    memo_name.add("scan start", start);
    std::error_code ec;
    bool usable = !memo_dir_.empty() && (std::filesystem::create_directories(memo_dir_, ec), !ec);
    fp = !usable ? fingerprint_includes(roots, include_dir_, unit.headers)
                 : fingerprint_includes_memoized(roots, include_dir_, unit.headers,
                                                 (std::filesystem::path(memo_dir_) / memo_name.finish().hex()).string());
  }
  return fp;
}

CompiledArtifact NvrtcCompiler::compile(const SourceUnit& unit) const {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<const char*> header_texts, header_names;
  for (const auto& h : unit.headers) {
    header_texts.push_back(h.text.c_str());
    header_names.push_back(h.name.c_str());
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = lib_->nvrtcCreateProgram(&prog, unit.main.text.c_str(), unit.main.name.c_str(),
                                           static_cast<int>(header_texts.size()), header_texts.data(), header_names.data());
  if (r != 0) throw Error(ErrorCode::CompileFailed, std::string("nvrtcCreateProgram: ") + lib_->nvrtcGetErrorString(r));
  struct Destroy {
    const NvrtcLibrary* lib;
    nvrtcProgram* p;
    ~Destroy() { lib->nvrtcDestroyProgram(p); }
  } destroy{lib_, &prog};

  std::vector<const char*> opts;
  for (const auto& o : options_) opts.push_back(o.c_str());
  if (pch_) opts.push_back("-pch");
  r = lib_->nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  std::size_t log_size = 0;
  lib_->nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) lib_->nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (r != 0) {
    std::string opts_text;
    for (const auto& o : options_) opts_text += " " + o;
    throw Error(ErrorCode::CompileFailed,
                "compiling " + unit.kernel + " (" + unit.params_text + ") for cuda:" + arch_ + " with " + id_ +
                    " failed: " + lib_->nvrtcGetErrorString(r) + "\noptions:" + opts_text + "\ncompiler log:\n" + log +
                    "\nspecialized source (" + unit.main.name + ", text from " + unit.text_origin + "):\n" +
                    with_line_numbers(unit.main.text));
  }
  CompiledArtifact out;
  std::size_t size = 0;
  if (cubin_) {
    lib_->nvrtcGetCUBINSize(prog, &size);
    out.bytes.resize(size);
    lib_->nvrtcGetCUBIN(prog, out.bytes.data());
  } else {
    lib_->nvrtcGetPTXSize(prog, &size);
    out.bytes.resize(size);
    lib_->nvrtcGetPTX(prog, out.bytes.data());
  }
  out.log = log;
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace jit::detail
