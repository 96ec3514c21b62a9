// Opens libcuda.so.1, resolves the driver functions jitk uses, initializes and lists devices.
#include "runtime/cuda/cuda_api.hpp"

#include <unistd.h>

#include <mutex>

#include "jit/error.hpp"
#include "runtime/driver_error.hpp"
#include "support/dynamic_library.hpp"

namespace jit::detail::cuda {
namespace {

struct Loaded {
  DynamicLibrary library;
  DriverApi api{};
  bool ok = false;
  std::string reason;
  std::vector<Device> devices;
  std::vector<CUcontext> contexts;
};

Loaded& loaded() {
  static Loaded l = [] {
    Loaded l;
    // No NVIDIA kernel driver (its control device; /dev/dxg under WSL2): libcuda could not work,
    // and a failed dlopen searches every library folder (0.16 ms of every CPU-only first get).
    if (::access("/dev/nvidiactl", F_OK) != 0 && ::access("/dev/dxg", F_OK) != 0) {
      l.reason = "no NVIDIA driver on this machine (neither /dev/nvidiactl nor /dev/dxg exists)";
      return l;
    }
    l.library = DynamicLibrary::open_first({"libcuda.so.1"});
    if (!l.library) {
      l.reason = "cannot open libcuda.so.1: " + l.library.error();
      return l;
    }
    auto& a = l.api;
    // Optional ones are absent from older drivers (nullptr then): only some kernels or launches need them.
    SymbolTable symbols;
    symbols.required(a.cuInit, "cuInit")
        .required(a.cuDriverGetVersion, "cuDriverGetVersion")
        .required(a.cuDeviceGetCount, "cuDeviceGetCount")
        .required(a.cuDeviceGet, "cuDeviceGet")
        .required(a.cuDeviceGetName, "cuDeviceGetName")
        .required(a.cuDeviceGetAttribute, "cuDeviceGetAttribute")
        .required(a.cuDeviceTotalMem, "cuDeviceTotalMem_v2")
        .required(a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
        .required(a.cuCtxSetCurrent, "cuCtxSetCurrent")
        .required(a.cuCtxGetCurrent, "cuCtxGetCurrent")
        .required(a.cuCtxSynchronize, "cuCtxSynchronize")
        .required(a.cuModuleLoadData, "cuModuleLoadData")
        .required(a.cuModuleGetFunction, "cuModuleGetFunction")
        .optional(a.cuLibraryLoadData, "cuLibraryLoadData")
        .optional(a.cuLibraryGetKernel, "cuLibraryGetKernel")
        .optional(a.cuKernelGetFunction, "cuKernelGetFunction")
        .optional(a.cuModuleGetLoadingMode, "cuModuleGetLoadingMode")
        .required(a.cuLaunchKernel, "cuLaunchKernel")
        .required(a.cuGetErrorString, "cuGetErrorString")
        .required(a.cuFuncSetAttribute, "cuFuncSetAttribute")
        .optional(a.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled")
        .optional(a.cuLaunchKernelEx, "cuLaunchKernelEx")
        .optional(a.cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters")
        .optional(a.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        .optional(a.cuMemAllocAsync, "cuMemAllocAsync")
        .optional(a.cuMemFreeAsync, "cuMemFreeAsync")
        .optional(a.cuMemsetD32Async, "cuMemsetD32Async")
        .optional(a.cuMemPoolCreate, "cuMemPoolCreate")
        .optional(a.cuMemPoolSetAttribute, "cuMemPoolSetAttribute")
        .optional(a.cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync")
        .required(a.cuMemAlloc, "cuMemAlloc_v2")
        .required(a.cuMemFree, "cuMemFree_v2")
        .required(a.cuMemcpyHtoD, "cuMemcpyHtoD_v2")
        .required(a.cuMemcpyDtoH, "cuMemcpyDtoH_v2")
        .required(a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
        .required(a.cuMemsetD8, "cuMemsetD8_v2")
        .required(a.cuStreamCreate, "cuStreamCreate")
        .required(a.cuStreamDestroy, "cuStreamDestroy_v2")
        .required(a.cuStreamSynchronize, "cuStreamSynchronize")
        .required(a.cuEventCreate, "cuEventCreate")
        .required(a.cuEventDestroy, "cuEventDestroy_v2")
        .required(a.cuEventRecord, "cuEventRecord")
        .required(a.cuEventSynchronize, "cuEventSynchronize")
        .required(a.cuEventElapsedTime, "cuEventElapsedTime")
        .optional(a.cuStreamBeginCapture, "cuStreamBeginCapture_v2")
        .optional(a.cuStreamEndCapture, "cuStreamEndCapture")
        .optional(a.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")
        .optional(a.cuGraphLaunch, "cuGraphLaunch")
        .optional(a.cuGraphExecDestroy, "cuGraphExecDestroy")
        .optional(a.cuGraphDestroy, "cuGraphDestroy");
    if (std::string missing = symbols.resolve(l.library); !missing.empty()) {
      l.reason = "libcuda.so.1 lacks " + missing + " (driver too old?)";
      return l;
    }
    // From here the driver holds state (cuInit, contexts) that must never be unloaded.
    l.library.keep_open();
    auto describe = [&](CUresult r) {
      const char* s = nullptr;
      a.cuGetErrorString(r, &s);
      return driver_result_text(s, "unknown error", r);
    };
    if (CUresult r = a.cuInit(0); r != CUDA_SUCCESS) {
      l.reason = "cuInit failed: " + describe(r);
      return l;
    }
    int count = 0;
    if (CUresult r = a.cuDeviceGetCount(&count); r != CUDA_SUCCESS || count == 0) {
      l.reason = r != CUDA_SUCCESS ? "cuDeviceGetCount failed: " + describe(r) : "no CUDA device found";
      return l;
    }
    for (int i = 0; i < count; ++i) {
      Device d;
      CUdevice dev;
      a.cuDeviceGet(&dev, i);
      d.ordinal = i;
      char name[256] = {};
      a.cuDeviceGetName(name, sizeof name, dev);
      d.name = name;
      a.cuDeviceGetAttribute(&d.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
      a.cuDeviceGetAttribute(&d.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
      a.cuDeviceGetAttribute(&d.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
      a.cuDeviceGetAttribute(&d.shared_mem_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev);
      a.cuDeviceGetAttribute(&d.shared_mem_per_block_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
      a.cuDeviceTotalMem(&d.total_mem, dev);
      l.devices.push_back(d);
      CUcontext ctx = nullptr;
      if (CUresult r = a.cuDevicePrimaryCtxRetain(&ctx, dev); r != CUDA_SUCCESS) {
        l.reason = "cannot create a context on " + d.name + ": " + describe(r);
        l.devices.clear();
        return l;
      }
      l.contexts.push_back(ctx);
    }
    l.ok = true;
    return l;
  }();
  return l;
}

}  // namespace

const DriverApi* driver_api(std::string* reason) {
  Loaded& l = loaded();
  if (!l.ok) {
    if (reason) *reason = l.reason;
    return nullptr;
  }
  return &l.api;
}

const std::vector<Device>& devices() { return loaded().devices; }

void check(CUresult r, const char* what, ErrorCode code) {
  if (r == CUDA_SUCCESS) return;
  const char* s = nullptr;
  if (const DriverApi* a = driver_api()) a->cuGetErrorString(r, &s);
  throw Error(code, std::string(what) + " failed: " + driver_result_text(s, "CUDA error", r));
}

ContextScope::ContextScope(int device) {
  Loaded& l = loaded();
  if (!l.ok || device < 0 || device >= static_cast<int>(l.contexts.size()))
    throw Error(ErrorCode::BackendUnavailable, "CUDA device " + std::to_string(device) + " is not available: " + l.reason);
  CUcontext now = nullptr;
  if (l.api.cuCtxGetCurrent(&now) != CUDA_SUCCESS) now = nullptr;
  if (now == l.contexts[device]) return;
  check(l.api.cuCtxSetCurrent(l.contexts[device]), "cuCtxSetCurrent");
  previous_ = now;
  restore_ = now != nullptr;
}

ContextScope::~ContextScope() {
  if (restore_) loaded().api.cuCtxSetCurrent(previous_);
}

}  // namespace jit::detail::cuda
