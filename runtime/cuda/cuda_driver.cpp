// The CUDA backend: NVRTC as its compiler, modules loaded and launched through the driver API.
#include <map>
#include <mutex>
#include <vector>

#include "cache/process_tiers.hpp"
#include "jit/cuda/nvrtc_compiler.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/cuda/cuda_api.hpp"
#include "runtime/cuda/cuda_kernel.hpp"

namespace jit::detail {
namespace {

using namespace cuda;

constexpr const char* kPackSymbol = "jitk_pack";  // gemm.cu's f32 transpose (packing)

// Where NVRTC compilers remember toolkit-header fingerprints: beside the artifacts, when the
// cache can be written.
std::string toolkit_memo_dir() {
  const DiskTier& disk = *process_tiers().disk;
  return disk.writable() ? disk.pinned("toolkit-headers") : "";  // through the root's handle
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
  std::string compile_only_note() const override { return "NVRTC can compile for named sm targets"; }
  std::string device_identity(const Target& target) const override {
    const auto& devs = devices();
    const std::string name = target.device >= 0 && target.device < static_cast<int>(devs.size()) ? devs[target.device].name : "?";
    return "cuda " + compiler(target).arch() + " (" + name + ")";
  }

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
    CUfunction fn = nullptr, pack = nullptr;
    check(api->cuModuleGetFunction(&fn, module, kEntrySymbol), (std::string("cuModuleGetFunction(") + kEntrySymbol + ")").c_str(),
          ErrorCode::LoadFailed);
    if (api->cuModuleGetFunction(&pack, module, kPackSymbol) != CUDA_SUCCESS) pack = nullptr;  // texts without one
    if (unit.shape.shared_bytes > 48 * 1024) {  // over the default a block gets: ask for it
      const auto& dev = devices()[target.device];
      if (unit.shape.shared_bytes > dev.shared_mem_per_block_optin)
        throw Error(ErrorCode::InvalidParams,
                    unit.kernel + " (" + unit.params_text + ") needs " + std::to_string(unit.shape.shared_bytes) +
                        " bytes of shared memory a block; " + dev.name + " gives at most " +
                        std::to_string(dev.shared_mem_per_block_optin) + ": choose smaller tiles or fewer stages",
                    shared_memory_error_fields(unit.kernel, unit.params_text, unit.shape.shared_bytes,
                                               dev.shared_mem_per_block_optin));
      check(api->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(unit.shape.shared_bytes)),
            "cuFuncSetAttribute(max dynamic shared memory)", ErrorCode::LoadFailed);
    }
    // Modules live as long as the process: the memory tier hands their functions out.
    std::unique_ptr<Fallback> fallback;
    if (unit.shape.tensor_maps || unit.shape.aligned_rows) {
      fallback = std::make_unique<Fallback>();
      fallback->kernel = unit.kernel;
      fallback->params = unit.params;
      fallback->target = target;
      fallback->why = unit.shape.tensor_maps
                          ? "a matrix the copy engine cannot take (not 16-byte aligned, empty, or 2^31 or more rows or columns) (" +
                                unit.params.to_string() + ")"
                          : "rows not 16-byte aligned (" + unit.params.to_string() + ")";
    }
    return make_cuda_kernel(fn, pack, unit.shape, target.device, std::move(fallback), few_rows_routes(unit, target),
                            pack_routes(unit, target));
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::unique_ptr<NvrtcCompiler>> compilers_;
};

}  // namespace

std::unique_ptr<BackendDriver> make_cuda_driver() { return std::make_unique<CudaDriver>(); }

}  // namespace jit::detail
