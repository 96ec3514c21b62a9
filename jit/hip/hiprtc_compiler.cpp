// Finds hipRTC (inside libamdhip64.so.5 on ROCm 5.2, libhiprtc on newer ROCm), checks the target
// against comgr's ISA list, compiles to a bare AMDGPU code object (an ELF that hipModuleLoadData takes).
#include "jit/hip/hiprtc_compiler.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <mutex>

#include "jit/rtc_compile.hpp"
#include "support/dynamic_library.hpp"

namespace jit::detail {

struct HiprtcLibrary {
  DynamicLibrary runtime;  // libamdhip64
  DynamicLibrary own_rtc;  // libhiprtc, where hipRTC is not inside the runtime (ROCm 6 and later)
  RtcFunctions rtc{};
  RtcOutput code{};
  int (*hipRuntimeGetVersion)(int*);
  int runtime_version = 0;  // 50221153 for ROCm 5.2 (hiprtcVersion is a hard-coded 9.0: useless)
  std::string path;
};

namespace {

struct Opened {
  HiprtcLibrary lib{};
  std::string reason;
};

struct ComgrLibrary {
  DynamicLibrary library;
  std::string reason;
};

const ComgrLibrary& comgr_library() {
  static const ComgrLibrary c = [] {
    ComgrLibrary c;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizer runtimes refuse RTLD_DEEPBIND (they abort the process), and without it comgr's
    // LLVM would bind to jitk's.
    c.reason = "hipRTC cannot be used in a sanitized build of jitk (comgr needs RTLD_DEEPBIND, which sanitizers refuse)";
#else
    c.library = DynamicLibrary::open_first({"libamd_comgr.so.2", "libamd_comgr.so.3", "libamd_comgr.so"},
                                           RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    // Open for good: hipRTC's own dlopen of comgr must keep finding this copy.
    if (c.library) c.library.keep_open();
    else c.reason = "cannot open comgr, hipRTC's compiler (tried libamd_comgr.so.2, .so.3, .so): " + c.library.error();
#endif
    return c;
  }();
  return c;
}
const DynamicLibrary& comgr_handle() { return comgr_library().library; }
const std::string& comgr_reason() { return comgr_library().reason; }

// Handles stay open for the life of the process (the HIP runtime must outlive every module).
DynamicLibrary open_for_good(const std::vector<std::string>& names) {
  DynamicLibrary lib = DynamicLibrary::open_first(names);
  lib.keep_open();
  return lib;
}

const Opened& opened() {
  static const Opened o = [] {
    Opened o;
    auto& l = o.lib;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    o.reason = comgr_reason();  // why hipRTC is off in this build
    return o;
#endif
    l.runtime = open_for_good({"libamdhip64.so.5", "libamdhip64.so.6", "libamdhip64.so"});
    if (!l.runtime) {
      o.reason = "cannot open the HIP runtime (tried libamdhip64.so.5, .so.6, .so): " + l.runtime.error();
      return o;
    }
    l.path = l.runtime.path();
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
    const DynamicLibrary* rtc = &l.runtime;
    if (!l.runtime.symbol("hiprtcCompileProgram")) {
      l.own_rtc = open_for_good({"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so"});
      if (!l.own_rtc) {
        o.reason = l.path + " has no hipRTC and libhiprtc cannot be opened: " + l.own_rtc.error();
        return o;
      }
      l.path += " + " + l.own_rtc.path();
      rtc = &l.own_rtc;
    }
    SymbolTable rtc_symbols, runtime_symbols;
    rtc_symbols.required(l.rtc.get_error_string, "hiprtcGetErrorString")
        .required(l.rtc.create_program, "hiprtcCreateProgram")
        .required(l.rtc.destroy_program, "hiprtcDestroyProgram")
        .required(l.rtc.compile_program, "hiprtcCompileProgram")
        .required(l.rtc.get_program_log_size, "hiprtcGetProgramLogSize")
        .required(l.rtc.get_program_log, "hiprtcGetProgramLog")
        .required(l.code.get_size, "hiprtcGetCodeSize")
        .required(l.code.get, "hiprtcGetCode");
    runtime_symbols.required(l.hipRuntimeGetVersion, "hipRuntimeGetVersion");
    std::string missing = rtc_symbols.resolve(*rtc);
    if (std::string m = runtime_symbols.resolve(l.runtime); !m.empty()) missing += (missing.empty() ? "" : ", ") + m;
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
    const DynamicLibrary& h = comgr_handle();
    if (!h) {
      c.reason = comgr_reason();
      return c;
    }
    using Status = int;
    void (*version)(std::size_t*, std::size_t*) = nullptr;
    Status (*count)(std::size_t*) = nullptr;
    Status (*name)(std::size_t, const char**) = nullptr;
    SymbolTable symbols;
    symbols.optional(version, "amd_comgr_get_version")
        .required(count, "amd_comgr_get_isa_count")
        .required(name, "amd_comgr_get_isa_name");
    if (!symbols.resolve(h).empty()) {
      c.reason = h.path() + " lacks amd_comgr_get_isa_count / amd_comgr_get_isa_name";
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

void* HiprtcCompiler::library_handle() { return runtime_library().handle(); }

const DynamicLibrary& HiprtcCompiler::runtime_library() { return opened().lib.runtime; }

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
  return rtc_compile(lib_->rtc, lib_->code, {unit, options_, "hip:" + arch_, id_});
}

}  // namespace jit::detail
