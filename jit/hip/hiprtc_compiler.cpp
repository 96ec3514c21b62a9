// Finds hipRTC (inside libamdhip64.so.5 on ROCm 5.2, libhiprtc on newer ROCm), checks the target
// against comgr's ISA list, compiles to a bare AMDGPU code object (an ELF that hipModuleLoadData takes).
#include "jit/hip/hiprtc_compiler.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <type_traits>

namespace jit::detail {

using hiprtcResult = int;
using hiprtcProgram = struct _hiprtcProgram*;

struct HiprtcLibrary {
  const char* (*hiprtcGetErrorString)(hiprtcResult);
  hiprtcResult (*hiprtcCreateProgram)(hiprtcProgram*, const char*, const char*, int, const char**, const char**);
  hiprtcResult (*hiprtcDestroyProgram)(hiprtcProgram*);
  hiprtcResult (*hiprtcCompileProgram)(hiprtcProgram, int, const char**);
  hiprtcResult (*hiprtcGetProgramLogSize)(hiprtcProgram, std::size_t*);
  hiprtcResult (*hiprtcGetProgramLog)(hiprtcProgram, char*);
  hiprtcResult (*hiprtcGetCodeSize)(hiprtcProgram, std::size_t*);
  hiprtcResult (*hiprtcGetCode)(hiprtcProgram, char*);
  int (*hipRuntimeGetVersion)(int*);
  int runtime_version = 0;  // 50221153 for ROCm 5.2 (hiprtcVersion is a hard-coded 9.0: useless)
  void* runtime = nullptr;  // libamdhip64
  std::string path;
};

namespace {

struct Opened {
  HiprtcLibrary lib{};
  std::string reason;
};

struct ComgrLibrary {
  void* handle = nullptr;
  std::string path, reason;
};

const ComgrLibrary& comgr_library() {
  static const ComgrLibrary c = [] {
    ComgrLibrary c;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizer runtimes refuse RTLD_DEEPBIND (they abort the process), and without it comgr's
    // LLVM would bind to jitk's.
    c.reason = "hipRTC cannot be used in a sanitized build of jitk (comgr needs RTLD_DEEPBIND, which sanitizers refuse)";
#else
    for (const char* name : {"libamd_comgr.so.2", "libamd_comgr.so.3", "libamd_comgr.so"}) {
      if ((c.handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND))) {
        c.path = name;
        break;
      }
      if (const char* e = ::dlerror(); e && c.reason.empty()) c.reason = e;
    }
    if (!c.handle) c.reason = "cannot open comgr, hipRTC's compiler (tried libamd_comgr.so.2, .so.3, .so): " + c.reason;
#endif
    return c;
  }();
  return c;
}
void* comgr_handle() { return comgr_library().handle; }
const std::string& comgr_reason() { return comgr_library().reason; }

// Handles stay open for the life of the process (the HIP runtime must outlive every module).
void* open_first(const std::vector<std::string>& names, std::string* path, std::string* errors) {
  for (const auto& n : names) {
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *path = n;
      return h;
    }
    if (const char* e = ::dlerror(); e && errors->empty()) *errors = e;
  }
  return nullptr;
}

const Opened& opened() {
  static const Opened o = [] {
    Opened o;
    auto& l = o.lib;
    std::string errors;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    o.reason = comgr_reason();  // why hipRTC is off in this build
    return o;
#endif
    l.runtime = open_first({"libamdhip64.so.5", "libamdhip64.so.6", "libamdhip64.so"}, &l.path, &errors);
    if (!l.runtime) {
      o.reason = "cannot open the HIP runtime (tried libamdhip64.so.5, .so.6, .so): " + errors;
      return o;
    }
    // comgr (which hipRTC opens at its first compile, not at load) is built on LLVM 15; a process
    // that already has another LLVM (jitk's CPU backend: LLVM 16) would bind comgr's LLVM calls to
    // that one and crash. Opened now with RTLD_DEEPBIND, comgr and its LLVM resolve their own
    // symbols first, and hipRTC's later dlopen of it finds this copy. Only where the HIP runtime
    // exists: on a CUDA machine with a stray comgr (the H100 host has libamd_comgr.so.2.6), loading
    // it with RTLD_DEEPBIND hung `jitk info` in a futex wait.
    if (!comgr_handle()) {
      o.reason = comgr_reason();
      return o;
    }
    // ROCm 5.x has hipRTC inside libamdhip64; ROCm 6 and later ship it as libhiprtc.
    void* rtc = l.runtime;
    if (!::dlsym(rtc, "hiprtcCompileProgram")) {
      std::string rtc_path, rtc_errors;
      rtc = open_first({"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so"}, &rtc_path, &rtc_errors);
      if (!rtc) {
        o.reason = l.path + " has no hipRTC and libhiprtc cannot be opened: " + rtc_errors;
        return o;
      }
      l.path += " + " + rtc_path;
    }
    std::string missing;
    auto get = [&](void* handle, auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
    };
    get(rtc, l.hiprtcGetErrorString, "hiprtcGetErrorString");
    get(rtc, l.hiprtcCreateProgram, "hiprtcCreateProgram");
    get(rtc, l.hiprtcDestroyProgram, "hiprtcDestroyProgram");
    get(rtc, l.hiprtcCompileProgram, "hiprtcCompileProgram");
    get(rtc, l.hiprtcGetProgramLogSize, "hiprtcGetProgramLogSize");
    get(rtc, l.hiprtcGetProgramLog, "hiprtcGetProgramLog");
    get(rtc, l.hiprtcGetCodeSize, "hiprtcGetCodeSize");
    get(rtc, l.hiprtcGetCode, "hiprtcGetCode");
    get(l.runtime, l.hipRuntimeGetVersion, "hipRuntimeGetVersion");
    if (!missing.empty()) {
      o.reason = l.path + " lacks " + missing;
      return o;
    }
    l.hipRuntimeGetVersion(&l.runtime_version);  // needs no GPU
    return o;
  }();
  return o;
}

struct Comgr {
  std::vector<std::string> targets;  // "gfx90a", from "amdgcn-amd-amdhsa--gfx90a"
  std::string version;               // "2.4"
  std::string reason;                // why the list is unknown
};

const Comgr& comgr() {
  static const Comgr c = [] {
    Comgr c;
    void* h = comgr_handle();
    if (!h) {
      c.reason = comgr_reason();
      return c;
    }
    const std::string& path = comgr_library().path;
    using Status = int;
    auto version = reinterpret_cast<void (*)(std::size_t*, std::size_t*)>(::dlsym(h, "amd_comgr_get_version"));
    auto count = reinterpret_cast<Status (*)(std::size_t*)>(::dlsym(h, "amd_comgr_get_isa_count"));
    auto name = reinterpret_cast<Status (*)(std::size_t, const char**)>(::dlsym(h, "amd_comgr_get_isa_name"));
    if (!count || !name) {
      c.reason = path + " lacks amd_comgr_get_isa_count / amd_comgr_get_isa_name";
      return c;
    }
    if (version) {
      std::size_t major = 0, minor = 0;
      version(&major, &minor);
      c.version = std::to_string(major) + "." + std::to_string(minor);
    }
    std::size_t n = 0;
    if (count(&n) != 0) n = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const char* isa = nullptr;
      if (name(i, &isa) != 0 || !isa) continue;
      std::string s = isa;
      if (auto dash = s.rfind('-'); dash != std::string::npos) s = s.substr(dash + 1);
      c.targets.push_back(s);
    }
    return c;
  }();
  return c;
}

// "gfx90a" from the target ID "gfx90a:sramecc+:xnack-".
std::string processor_of(const std::string& arch) { return arch.substr(0, arch.find(':')); }

}  // namespace

std::string HiprtcCompiler::unavailable_reason() { return opened().reason; }

void* HiprtcCompiler::library_handle() { return opened().lib.runtime; }

const std::vector<std::string>& HiprtcCompiler::known_targets() { return comgr().targets; }

HiprtcCompiler::HiprtcCompiler(std::string arch) : arch_(std::move(arch)) {
  const Opened& o = opened();
  if (!o.reason.empty()) throw Error(ErrorCode::BackendUnavailable, o.reason);
  lib_ = &o.lib;
  const std::string processor = processor_of(arch_);
  if (processor.size() < 4 || processor.rfind("gfx", 0) != 0 ||
      !std::all_of(processor.begin() + 3, processor.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }))
    throw Error(ErrorCode::InvalidParams, "HIP arch '" + arch_ + "' is not an AMD GPU target of the form gfxNNN (e.g. gfx90a)");
  const int v = lib_->runtime_version;
  id_ = "hiprtc (ROCm runtime " + std::to_string(v) + ")";
  // comgr aborts the whole process (a free of a garbage pointer) on a target it does not know:
  // ask it first, and refuse to compile when the list cannot be had.
  const Comgr& c = comgr();
  if (!c.reason.empty())
    throw Error(ErrorCode::BackendUnavailable, "cannot check that hipRTC knows " + arch_ + ": " + c.reason);
  if (std::find(c.targets.begin(), c.targets.end(), processor) == c.targets.end()) {
    std::string known;
    for (const auto& t : c.targets) known += (known.empty() ? "" : " ") + t;
    throw Error(ErrorCode::BackendUnavailable, "hipRTC of this ROCm (comgr " + c.version + ", HIP runtime " +
                                                   std::to_string(v) + ") cannot compile for " + arch_ +
                                                   "; it knows: " + known);
  }
  // The arch is always explicit: without it hipRTC asks the current device and fails with an empty log.
  options_ = {"--offload-arch=" + arch_, "-std=c++17"};
}

CompiledArtifact HiprtcCompiler::compile(const SourceUnit& unit) const {
  // ROCm 5.2's hipRTC (with comgr 2.4) crashes when two threads compile at once (seen with
  // `jitk warm -j 4`: SIGSEGV inside the library): one compile at a time, in the whole process.
  static std::mutex one_at_a_time;
  std::lock_guard lock(one_at_a_time);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<const char*> header_texts, header_names;
  for (const auto& h : unit.headers) {
    header_texts.push_back(h.text.c_str());
    header_names.push_back(h.name.c_str());
  }
  hiprtcProgram prog = nullptr;
  hiprtcResult r = lib_->hiprtcCreateProgram(&prog, unit.main.text.c_str(), unit.main.name.c_str(),
                                             static_cast<int>(header_texts.size()), header_texts.data(), header_names.data());
  if (r != 0) throw Error(ErrorCode::CompileFailed, std::string("hiprtcCreateProgram: ") + lib_->hiprtcGetErrorString(r));
  struct Destroy {
    const HiprtcLibrary* lib;
    hiprtcProgram* p;
    ~Destroy() { lib->hiprtcDestroyProgram(p); }
  } destroy{lib_, &prog};

  std::vector<const char*> opts;
  for (const auto& o : options_) opts.push_back(o.c_str());
  r = lib_->hiprtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  std::size_t log_size = 0;
  lib_->hiprtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) lib_->hiprtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (r != 0) {
    std::string opts_text;
    for (const auto& o : options_) opts_text += " " + o;
    throw Error(ErrorCode::CompileFailed,
                "compiling " + unit.kernel + " (" + unit.params_text + ") for hip:" + arch_ + " with " + id_ +
                    " failed: " + lib_->hiprtcGetErrorString(r) + "\noptions:" + opts_text + "\ncompiler log:\n" + log +
                    "\nspecialized source (" + unit.main.name + ", text from " + unit.text_origin + "):\n" +
                    with_line_numbers(unit.main.text));
  }
  CompiledArtifact out;
  std::size_t size = 0;
  lib_->hiprtcGetCodeSize(prog, &size);
  out.bytes.resize(size);
  if (size > 0) lib_->hiprtcGetCode(prog, out.bytes.data());
  out.log = log;
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace jit::detail
