// Opens libcuda.so.1, resolves the driver functions jitk uses, initializes and lists devices.
#include "runtime/cuda/cuda_api.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <mutex>

#include "jit/error.hpp"

namespace jit::detail::cuda {
namespace {

struct Loaded {
  DriverApi api{};
  bool ok = false;
  std::string reason;
  std::vector<Device> devices;
  std::vector<CUcontext> contexts;
};

template <class F> bool resolve(void* lib, F& fn, const char* name, std::string& missing) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
  return fn != nullptr;
}

Loaded& loaded() {
  static Loaded l = [] {
    Loaded l;
    // No NVIDIA kernel driver (its control device; /dev/dxg under WSL2): libcuda could not work,
    // and a failed dlopen searches every library folder (0.16 ms of every CPU-only first get).
    if (::access("/dev/nvidiactl", F_OK) != 0 && ::access("/dev/dxg", F_OK) != 0) {
      l.reason = "no NVIDIA driver on this machine (neither /dev/nvidiactl nor /dev/dxg exists)";
      return l;
    }
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      l.reason = std::string("cannot open libcuda.so.1: ") + (e ? e : "unknown error");
      return l;
    }
    std::string missing;
    auto& a = l.api;
    resolve(lib, a.cuInit, "cuInit", missing);
    resolve(lib, a.cuDriverGetVersion, "cuDriverGetVersion", missing);
    resolve(lib, a.cuDeviceGetCount, "cuDeviceGetCount", missing);
    resolve(lib, a.cuDeviceGet, "cuDeviceGet", missing);
    resolve(lib, a.cuDeviceGetName, "cuDeviceGetName", missing);
    resolve(lib, a.cuDeviceGetAttribute, "cuDeviceGetAttribute", missing);
    resolve(lib, a.cuDeviceTotalMem, "cuDeviceTotalMem_v2", missing);
    resolve(lib, a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
    resolve(lib, a.cuCtxSetCurrent, "cuCtxSetCurrent", missing);
    resolve(lib, a.cuCtxSynchronize, "cuCtxSynchronize", missing);
    resolve(lib, a.cuModuleLoadData, "cuModuleLoadData", missing);
    resolve(lib, a.cuModuleGetFunction, "cuModuleGetFunction", missing);
    resolve(lib, a.cuLaunchKernel, "cuLaunchKernel", missing);
    resolve(lib, a.cuGetErrorString, "cuGetErrorString", missing);
    resolve(lib, a.cuFuncSetAttribute, "cuFuncSetAttribute", missing);
    std::string optional;
    resolve(lib, a.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", optional);
    resolve(lib, a.cuLaunchKernelEx, "cuLaunchKernelEx", optional);
    resolve(lib, a.cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters", optional);
    resolve(lib, a.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", optional);
    resolve(lib, a.cuMemAllocAsync, "cuMemAllocAsync", optional);
    resolve(lib, a.cuMemFreeAsync, "cuMemFreeAsync", optional);
    resolve(lib, a.cuMemsetD32Async, "cuMemsetD32Async", optional);
    resolve(lib, a.cuMemPoolCreate, "cuMemPoolCreate", optional);
    resolve(lib, a.cuMemPoolSetAttribute, "cuMemPoolSetAttribute", optional);
    resolve(lib, a.cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", optional);
    resolve(lib, a.cuMemAlloc, "cuMemAlloc_v2", missing);
    resolve(lib, a.cuMemFree, "cuMemFree_v2", missing);
    resolve(lib, a.cuMemcpyHtoD, "cuMemcpyHtoD_v2", missing);
    resolve(lib, a.cuMemcpyDtoH, "cuMemcpyDtoH_v2", missing);
    resolve(lib, a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", missing);
    resolve(lib, a.cuMemsetD8, "cuMemsetD8_v2", missing);
    resolve(lib, a.cuStreamCreate, "cuStreamCreate", missing);
    resolve(lib, a.cuStreamDestroy, "cuStreamDestroy_v2", missing);
    resolve(lib, a.cuStreamSynchronize, "cuStreamSynchronize", missing);
    resolve(lib, a.cuEventCreate, "cuEventCreate", missing);
    resolve(lib, a.cuEventDestroy, "cuEventDestroy_v2", missing);
    resolve(lib, a.cuEventRecord, "cuEventRecord", missing);
    resolve(lib, a.cuEventSynchronize, "cuEventSynchronize", missing);
    resolve(lib, a.cuEventElapsedTime, "cuEventElapsedTime", missing);
    if (!missing.empty()) {
      l.reason = "libcuda.so.1 lacks " + missing + " (driver too old?)";
      return l;
    }
    auto describe = [&](CUresult r) {
      const char* s = nullptr;
      a.cuGetErrorString(r, &s);
      return std::string(s ? s : "unknown error") + " (" + std::to_string(r) + ")";
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
  throw Error(code, std::string(what) + " failed: " + (s ? s : "CUDA error") + " (" + std::to_string(r) + ")");
}

void make_current(int device) {
  thread_local int current = -1;
  if (current == device) return;
  Loaded& l = loaded();
  if (!l.ok || device < 0 || device >= static_cast<int>(l.contexts.size()))
    throw Error(ErrorCode::BackendUnavailable, "CUDA device " + std::to_string(device) + " is not available: " + l.reason);
  check(l.api.cuCtxSetCurrent(l.contexts[device]), "cuCtxSetCurrent");
  current = device;
}

}  // namespace jit::detail::cuda
