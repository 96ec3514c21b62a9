// The CUDA backend: NVRTC as its compiler, modules loaded and launched through the driver API.
#include <map>
#include <mutex>

#include "cache/artifact_cache.hpp"
#include "jit/cuda.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/gpu_launch.hpp"
#include "runtime/cuda_api.hpp"

namespace jit::detail {
namespace {

using namespace cuda;

constexpr const char* kEntrySymbol = "jitk_entry";

class CudaKernel final : public LoadedKernel {
 public:
  CudaKernel(CUfunction fn, LaunchShape shape, int device) : fn_(fn), shape_(shape), device_(device) {}
  Backend backend() const override { return Backend::Cuda; }
  void launch(const ArgPack& args) const override {
    if (args.work_items <= 0) return;
    const GpuLaunch l(args, shape_);
    make_current(device_);
    const DriverApi* api = driver_api();
    check(api->cuLaunchKernel(fn_, l.grid, 1, 1, l.block, 1, 1, 0,
                              static_cast<CUstream>(args.stream.handle), const_cast<void**>(l.params), nullptr),
          "cuLaunchKernel");
  }

 private:
  CUfunction fn_;
  LaunchShape shape_;
  int device_;
};

// Where NVRTC compilers remember toolkit-header fingerprints: beside the artifacts, when the
// cache can be written.
std::string toolkit_memo_dir() {
  ArtifactCache& cache = ArtifactCache::process_cache();
  return cache.writable() ? (cache.root() / "toolkit-headers").string() : "";
}

class CudaDriver final : public BackendDriver {
 public:
  Backend backend() const override { return Backend::Cuda; }

  std::string unavailable_reason() const override {
    std::string reason;
    if (!driver_api(&reason)) return reason;
    return NvrtcCompiler::unavailable_reason();
  }
  std::string compile_unavailable_reason() const override { return NvrtcCompiler::unavailable_reason(); }

  const Compiler& compiler(const Target& target) const override {
    std::string arch = target.arch;
    if (arch.empty()) {
      const auto& devs = devices();
      if (target.device < 0 || target.device >= static_cast<int>(devs.size()))
        throw Error(ErrorCode::BackendUnavailable, "no CUDA device " + std::to_string(target.device));
      arch = devs[target.device].arch();
    }
    std::lock_guard lock(mutex_);
    auto& c = compilers_[arch];
    if (!c) c = std::make_unique<NvrtcCompiler>(arch, /*force_ptx=*/false, toolkit_memo_dir());
    return *c;
  }

  std::shared_ptr<const LoadedKernel> load(const std::vector<char>& artifact, const SourceUnit& unit,
                                           const Target& target, const std::string& key) const override {
    make_current(target.device);
    const DriverApi* api = driver_api();
    CUmodule module = nullptr;
    std::vector<char> image = artifact;
    image.push_back('\0');  // PTX must be NUL-terminated; a CUBIN ignores the extra byte
    check(api->cuModuleLoadData(&module, image.data()), ("cuModuleLoadData of artifact " + key).c_str(), ErrorCode::LoadFailed);
    CUfunction fn = nullptr;
    check(api->cuModuleGetFunction(&fn, module, kEntrySymbol), "cuModuleGetFunction(jitk_entry)", ErrorCode::LoadFailed);
    // Modules live as long as the process: the memory tier hands their functions out.
    return std::make_shared<CudaKernel>(fn, unit.shape, target.device);
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::unique_ptr<NvrtcCompiler>> compilers_;
};

}  // namespace

std::unique_ptr<BackendDriver> make_cuda_driver() { return std::make_unique<CudaDriver>(); }

}  // namespace jit::detail

// ---- jit::cuda: the public helpers ---------------------------------------------------------------
namespace jit::cuda {

using namespace jit::detail::cuda;

namespace {
const DriverApi& api_or_throw() {
  std::string reason;
  const DriverApi* api = driver_api(&reason);
  if (!api) throw Error(ErrorCode::BackendUnavailable, "CUDA is unavailable: " + reason);
  return *api;
}
}  // namespace

bool available() { return unavailable_reason().empty(); }

std::string unavailable_reason() {
  std::string reason;
  if (!driver_api(&reason)) return reason;
  return jit::detail::NvrtcCompiler::unavailable_reason();
}

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  for (const auto& d : jit::detail::cuda::devices())
    out.push_back({d.ordinal, d.name, d.arch(), d.sm_count, d.shared_mem_per_block, d.shared_mem_per_block_optin, d.total_mem});
  return out;
}

void synchronize(int device) {
  const DriverApi& api = api_or_throw();
  make_current(device);
  check(api.cuCtxSynchronize(), "cuCtxSynchronize");
}

namespace detail {
void* allocate(std::size_t bytes, int device) {
  const DriverApi& api = api_or_throw();
  make_current(device);
  CUdeviceptr p = 0;
  check(api.cuMemAlloc(&p, bytes == 0 ? 1 : bytes), "cuMemAlloc");
  return reinterpret_cast<void*>(p);
}
void release(void* p, int device) noexcept {
  if (const DriverApi* api = driver_api(); api && p) {
    try {
      make_current(device);
    } catch (...) {
    }
    api->cuMemFree(reinterpret_cast<CUdeviceptr>(p));
  }
}
void copy_to_device(void* dst, const void* src, std::size_t bytes, int device) {
  const DriverApi& api = api_or_throw();
  make_current(device);
  check(api.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
}
void copy_to_host(void* dst, const void* src, std::size_t bytes, int device) {
  const DriverApi& api = api_or_throw();
  make_current(device);
  check(api.cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
}
void fill_bytes(void* dst, unsigned char value, std::size_t bytes, int device) {
  const DriverApi& api = api_or_throw();
  make_current(device);
  check(api.cuMemsetD8(reinterpret_cast<CUdeviceptr>(dst), value, bytes), "cuMemsetD8");
}
}  // namespace detail

OwnedStream::OwnedStream(int device) : device_(device) {
  const DriverApi& api = api_or_throw();
  make_current(device);
  CUstream s = nullptr;
  check(api.cuStreamCreate(&s, 0), "cuStreamCreate");
  handle_ = s;
}
OwnedStream::~OwnedStream() {
  if (const DriverApi* api = driver_api(); api && handle_) api->cuStreamDestroy(static_cast<CUstream>(handle_));
}
void OwnedStream::synchronize() const {
  check(api_or_throw().cuStreamSynchronize(static_cast<CUstream>(handle_)), "cuStreamSynchronize");
}

}  // namespace jit::cuda
