// The HIP backend: hipRTC as its compiler, code objects loaded and launched through the HIP module API.
#include <unistd.h>

#include <map>
#include <mutex>

#include "jit/hip/hiprtc_compiler.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/gpu_launch.hpp"
#include "support/dynamic_library.hpp"

namespace jit::detail {
namespace {

// hipDeviceProp_t's layout differs between ROCm versions: it is read into a buffer larger than any
// of them and its gcnArchName found by content (the only field that starts with "gfx").
constexpr std::size_t kDevicePropBytes = 8192;

using hipError_t = int;
using hipModule_t = struct ihipModule_t*;
using hipFunction_t = struct ihipModuleSymbol_t*;
using hipStream_t = struct ihipStream_t*;

struct HipApi {
  hipError_t (*hipInit)(unsigned);
  hipError_t (*hipGetDeviceCount)(int*);
  hipError_t (*hipGetDeviceProperties)(void*, int);
  hipError_t (*hipSetDevice)(int);
  const char* (*hipGetErrorName)(hipError_t);
  hipError_t (*hipModuleLoadData)(hipModule_t*, const void*);
  hipError_t (*hipModuleGetFunction)(hipFunction_t*, hipModule_t, const char*);
  hipError_t (*hipModuleLaunchKernel)(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      hipStream_t, void**, void**);
};

struct Runtime {
  HipApi api{};
  std::vector<std::string> archs;  // per device: "gfx90a" or a target ID ("gfx90a:sramecc+:xnack-")
  std::string reason;              // "" when a device can run kernels
};

std::string error_text(const HipApi& api, hipError_t r) {
  return driver_result_text(api.hipGetErrorName ? api.hipGetErrorName(r) : nullptr, "hipError", r);
}

// The gfx target ID in a hipDeviceProp_t read into `props`, or "".
std::string arch_in(const std::vector<char>& props) {
  for (std::size_t i = 0; i + 3 < props.size(); ++i)
    if ((i == 0 || props[i - 1] == '\0') && props[i] == 'g' && props[i + 1] == 'f' &&
        props[i + 2] == 'x')
      return std::string(&props[i]);
  return "";
}

const Runtime& runtime() {
  static const Runtime rt = [] {
    Runtime rt;
    if (rt.reason = HiprtcCompiler::unavailable_reason(); !rt.reason.empty()) return rt;
    auto& a = rt.api;
    SymbolTable symbols;
    symbols.required(a.hipInit, "hipInit")
        .required(a.hipGetDeviceCount, "hipGetDeviceCount")
        .required(a.hipGetDeviceProperties, "hipGetDeviceProperties")
        .required(a.hipSetDevice, "hipSetDevice")
        .required(a.hipGetErrorName, "hipGetErrorName")
        .required(a.hipModuleLoadData, "hipModuleLoadData")
        .required(a.hipModuleGetFunction, "hipModuleGetFunction")
        .required(a.hipModuleLaunchKernel, "hipModuleLaunchKernel");
    if (std::string missing = symbols.resolve(HiprtcCompiler::runtime_library()); !missing.empty()) {
      rt.reason = "the HIP runtime lacks " + missing;
      return rt;
    }
    if (hipError_t r = a.hipInit(0); r != 0) {
      // ROCm 5.2 says hipErrorInvalidDevice when the HSA runtime finds no KFD device.
      rt.reason = "hipInit failed: " + error_text(a, r) + " — HSA init failed" +
                  (::access("/dev/kfd", R_OK | W_OK) != 0 ? " (no usable /dev/kfd: amdgpu/KFD driver not loaded or no AMD GPU)" : "");
      return rt;
    }
    int count = 0;
    if (hipError_t r = a.hipGetDeviceCount(&count); r != 0 || count <= 0) {
      rt.reason = "no AMD GPU (hipGetDeviceCount: " + error_text(a, r) + ", count " + std::to_string(count) + ")";
      return rt;
    }
    for (int d = 0; d < count; ++d) {
      std::vector<char> props(kDevicePropBytes, '\0');
      std::string arch;
      if (a.hipGetDeviceProperties(props.data(), d) == 0) arch = arch_in(props);
      rt.archs.push_back(arch);
    }
    return rt;
  }();
  return rt;
}

void check(hipError_t r, const std::string& what, ErrorCode code = ErrorCode::Device) {
  if (r != 0) throw Error(code, what + " failed: " + error_text(runtime().api, r));
}

class HipKernel final : public LoadedKernel {
 public:
  HipKernel(hipFunction_t fn, LaunchShape shape, int device) : fn_(fn), shape_(shape), device_(device) {}
  Backend backend() const override { return Backend::Hip; }
  void launch(const ArgPack& args) const override {
    if (args.work_items <= 0) return;
    const GpuLaunch l(args, shape_);
    const HipApi& api = runtime().api;
    check(api.hipSetDevice(device_), "hipSetDevice");
    check(api.hipModuleLaunchKernel(fn_, l.grid, 1, 1, l.block, 1, 1, static_cast<unsigned>(shape_.shared_bytes),
                                    static_cast<hipStream_t>(args.stream.handle), const_cast<void**>(l.params), nullptr),
          "hipModuleLaunchKernel");
  }

 private:
  hipFunction_t fn_;
  LaunchShape shape_;
  int device_;
};

class HipDriver final : public BackendDriver {
 public:
  Backend backend() const override { return Backend::Hip; }
  std::string unavailable_reason() const override { return runtime().reason; }
  // hipRTC needs no GPU for a named gfx target (one comgr knows).
  std::string compile_unavailable_reason() const override { return HiprtcCompiler::unavailable_reason(); }
  std::string compile_only_note() const override { return "hipRTC can compile for named gfx targets"; }

  const Compiler& compiler(const Target& target) const override {
    std::string arch = target.arch;
    if (arch.empty()) {
      const Runtime& rt = runtime();
      if (!rt.reason.empty())
        throw Error(ErrorCode::BackendUnavailable, "target hip names no gfx arch and there is no AMD GPU to ask: " + rt.reason);
      if (target.device < 0 || target.device >= static_cast<int>(rt.archs.size()))
        throw Error(ErrorCode::BackendUnavailable, "no HIP device " + std::to_string(target.device));
      arch = rt.archs[target.device];
      if (arch.empty()) throw Error(ErrorCode::BackendUnavailable, "HIP device " + std::to_string(target.device) + " did not say its gfx arch");
    }
    std::lock_guard lock(mutex_);
    auto& c = compilers_[arch];
    if (!c) c = std::make_unique<HiprtcCompiler>(arch);
    return *c;
  }

  std::shared_ptr<const LoadedKernel> load(const std::vector<char>& artifact, const SourceUnit& unit,
                                           const Target& target, const std::string& key) const override {
    const HipApi& api = runtime().api;
    check(api.hipSetDevice(target.device), "hipSetDevice", ErrorCode::LoadFailed);
    hipModule_t module = nullptr;
    check(api.hipModuleLoadData(&module, artifact.data()), "hipModuleLoadData of artifact " + key, ErrorCode::LoadFailed);
    hipFunction_t fn = nullptr;
    check(api.hipModuleGetFunction(&fn, module, kEntrySymbol), std::string("hipModuleGetFunction(") + kEntrySymbol + ")",
          ErrorCode::LoadFailed);
    // Modules live as long as the process: the memory tier hands their functions out.
    return std::make_shared<HipKernel>(fn, unit.shape, target.device);
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::unique_ptr<HiprtcCompiler>> compilers_;
};

}  // namespace

std::unique_ptr<BackendDriver> make_hip_driver() { return std::make_unique<HipDriver>(); }

}  // namespace jit::detail
