// The CUDA driver API, opened with dlopen at first use so jitk links against nothing of CUDA's.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "jit/error.hpp"
#include "support/memo_store.hpp"

namespace jit::detail::cuda {

// The few driver types and constants jitk uses, as cuda.h defines them (ABI-stable).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUlibrary = struct CUlib_st*;
using CUkernel = struct CUkern_st*;
inline constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
// Tensor maps (sm_90's copy engine): an opaque 128-byte value, and the enum values jitk uses.
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6;
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7;
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9;
inline constexpr int CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
inline constexpr int CU_TENSOR_MAP_SWIZZLE_128B = 3;
inline constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3;
inline constexpr int CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;
// Launches with attributes (CUDA 12): cuda.h's CUlaunchAttribute and CUlaunchConfig, for clusters.
inline constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster_dim;
    void* align;
  } value;
};
static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute: cuda.h's layout");
// Memory pools (stream-ordered allocation): cuda.h's CUmemPoolProps (v1) and the values jitk uses.
using CUmemoryPool = struct CUmemPoolHandle_st*;
struct CUmemPoolProps {
  int alloc_type, handle_types;
  struct {
    int type, id;
  } location;
  void* win32_security_attributes;
  std::size_t max_size;
  unsigned short usage;
  unsigned char reserved[54];
};
static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps: cuda.h's layout");
inline constexpr int CU_MEM_ALLOCATION_TYPE_PINNED = 1;
inline constexpr int CU_MEM_HANDLE_TYPE_NONE = 0;
inline constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
inline constexpr int CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;
struct CUlaunchConfig {
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  CUstream stream;
  CUlaunchAttribute* attrs;
  unsigned attr_count;
};

struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(std::size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  // Optional (CUDA 12+; nullptr: modules only): context-independent loading, JITK_CUDA_LOAD=library.
  CUresult (*cuLibraryLoadData)(CUlibrary*, const void*, void*, void**, unsigned, void*, void**, unsigned);
  CUresult (*cuLibraryGetKernel)(CUkernel*, CUlibrary, const char*);
  CUresult (*cuKernelGetFunction)(CUfunction*, CUkernel);
  // Optional (CUDA 11.7+): whether the driver loads kernels lazily (CUDA_MODULE_LOADING), for reports.
  CUresult (*cuModuleGetLoadingMode)(int*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  // Absent from drivers before CUDA 12 (nullptr then): only tensor-map kernels need it.
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, int, unsigned, void*, const unsigned long long*,
                                     const unsigned long long*, const unsigned*, const unsigned*, int, int, int, int);
  // Absent before CUDA 12 too: only cluster launches need them.
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
  CUresult (*cuOccupancyMaxActiveClusters)(int*, CUfunction, const CUlaunchConfig*);
  // Optional (nullptr: no stream-K tail): the occupancy of a kernel and stream-ordered workspaces.
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, std::size_t);
  CUresult (*cuMemAllocAsync)(CUdeviceptr*, std::size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, std::size_t, CUstream);
  // Optional too (nullptr: scratch from the device's default pool): a pool of jitk's own.
  CUresult (*cuMemPoolCreate)(CUmemoryPool*, const CUmemPoolProps*);
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool, int, void*);
  CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr*, std::size_t, CUmemoryPool, CUstream);
  CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, std::size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, std::size_t);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, std::size_t);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  // Optional (nullptr: jit::cuda::Graph refuses): stream capture into CUDA graphs (CUDA 11.4+).
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
};

struct Device {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int shared_mem_per_block = 0, shared_mem_per_block_optin = 0;
  std::size_t total_mem = 0;
  std::string arch() const { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }
};

// The loaded API, or nullptr with `reason` set (no libcuda, cuInit failed, no device).
const DriverApi* driver_api(std::string* reason = nullptr);

// Where NVRTC compilers remember toolkit-header fingerprints and NVRTC's own facts: beside the
// artifacts, through the cache root's handle (null when the cache cannot be used; a read-only one
// is read, never written). Defined in cuda_driver.cpp.
std::shared_ptr<const MemoStore> toolkit_memos();
// The same for a probe of whether CUDA can be used: toolkit_memos() once the cache is in use, else a
// read-only look that fixes no cache setting (null when the root is not usable).
std::shared_ptr<const MemoStore> probe_memos();
// Devices found (empty when the driver is unavailable).
const std::vector<Device>& devices();
// Throws Error{code} naming `what` and the driver's message when r is not CUDA_SUCCESS.
void check(CUresult r, const char* what, ErrorCode code = ErrorCode::Device);
// Device d's primary context current on this thread for the scope, and the caller's own current
// context again after it: another library's current device (torch's, CuPy's) is never left changed,
// and a thread that had no current context keeps d's (the next call then switches nothing). Whether
// d's is current is asked of the driver every time (cuCtxGetCurrent, a thread-local read), never
// remembered: something else may have made another context current since. Throws
// Error{BackendUnavailable} for a device that is not there.
class [[nodiscard]] ContextScope {
 public:
  explicit ContextScope(int device);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool restore_ = false;
};

}  // namespace jit::detail::cuda
