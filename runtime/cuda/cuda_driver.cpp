// The CUDA backend: NVRTC as its compiler, modules loaded and launched through the driver API.
#include <cstring>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "cache/cache_root.hpp"
#include "cache/memo_folder.hpp"
#include "cache/process_tiers.hpp"
#include "jit/cuda/nvrtc_compiler.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/cuda/cuda_api.hpp"
#include "runtime/cuda/cuda_kernel.hpp"
#include "support/logging.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {

using namespace cuda;

constexpr const char* kPackSymbol = "jitk_pack";  // gemm.cu's f32 transpose (packing)


// How artifacts are loaded: JITK_CUDA_LOAD=module (cuModuleLoadData, the default) or library
// (cuLibraryLoadData, CUDA 12+: context-independent, loaded lazily where the driver does so). For
// A/B measurements of a process's first load; a driver without the library API uses modules.
enum class LoadApi { Module, Library };

LoadApi load_api(const DriverApi& api) {
  static const LoadApi chosen = [&] {
    const char* v = std::getenv("JITK_CUDA_LOAD");
    const std::string want = v ? v : "";
    if (want.empty() || want == "module") return LoadApi::Module;
    if (want != "library") {
      warn_once("cuda-load", "JITK_CUDA_LOAD='" + printable(want) + "' is neither 'module' nor 'library'; loading with cuModuleLoadData");
      return LoadApi::Module;
    }
    if (!api.cuLibraryLoadData || !api.cuLibraryGetKernel || !api.cuKernelGetFunction) {
      warn_once("cuda-load", "JITK_CUDA_LOAD=library: this CUDA driver has no cuLibraryLoadData (CUDA 12+); loading with cuModuleLoadData");
      return LoadApi::Module;
    }
    return LoadApi::Library;
  }();
  return chosen;
}

struct Entries {
  CUfunction entry = nullptr;
  CUfunction pack = nullptr;  // nullptr for texts without one
};

Entries load_module(const DriverApi& api, const char* image, const std::string& key, bool want_pack) {
  CUmodule module = nullptr;
  check(api.cuModuleLoadData(&module, image), ("cuModuleLoadData of artifact " + key).c_str(), ErrorCode::LoadFailed);
  Entries e;
  check(api.cuModuleGetFunction(&e.entry, module, kEntrySymbol), (std::string("cuModuleGetFunction(") + kEntrySymbol + ")").c_str(),
        ErrorCode::LoadFailed);
  if (want_pack && api.cuModuleGetFunction(&e.pack, module, kPackSymbol) != CUDA_SUCCESS) e.pack = nullptr;
  return e;
}

// The functions for the current context of a library's kernels.
Entries load_library(const DriverApi& api, const char* image, const std::string& key, bool want_pack) {
  CUlibrary library = nullptr;
  check(api.cuLibraryLoadData(&library, image, nullptr, nullptr, 0, nullptr, nullptr, 0),
        ("cuLibraryLoadData of artifact " + key).c_str(), ErrorCode::LoadFailed);
  Entries e;
  CUkernel kernel = nullptr;
  check(api.cuLibraryGetKernel(&kernel, library, kEntrySymbol), (std::string("cuLibraryGetKernel(") + kEntrySymbol + ")").c_str(),
        ErrorCode::LoadFailed);
  check(api.cuKernelGetFunction(&e.entry, kernel), "cuKernelGetFunction", ErrorCode::LoadFailed);
  CUkernel pack = nullptr;
  if (want_pack && api.cuLibraryGetKernel(&pack, library, kPackSymbol) == CUDA_SUCCESS && pack &&
      api.cuKernelGetFunction(&e.pack, pack) != CUDA_SUCCESS)
    e.pack = nullptr;
  return e;
}

// Libraries and modules live as long as the process: the memory tier hands their functions out.
Entries load_entries(const DriverApi& api, const char* image, const std::string& key, bool want_pack) {
  if (load_api(api) == LoadApi::Library) {
    try {
      return load_library(api, image, key, want_pack);
    } catch (const Error& e) {
      warn_once("cuda-library-load", std::string("JITK_CUDA_LOAD=library: ") + e.what() + "; loading with cuModuleLoadData instead");
    }
  }
  return load_module(api, image, key, want_pack);
}

class CudaDriver final : public BackendDriver {
 public:
  Backend backend() const override { return Backend::Cuda; }

  std::string unavailable_reason() const override {
    std::string reason;
    if (!driver_api(&reason)) return reason;
    return NvrtcCompiler::unavailable_reason(probe_memos().get());
  }
  std::string compile_unavailable_reason() const override { return NvrtcCompiler::unavailable_reason(probe_memos().get()); }
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
    if (!c) c = std::make_unique<NvrtcCompiler>(arch, /*force_ptx=*/false, toolkit_memos());
    return *c;
  }

  std::shared_ptr<const LoadedKernel> load(const std::vector<char>& artifact, const SourceUnit& unit,
                                           const Target& target, const std::string& key) const override {
    const ContextScope context_scope(target.device);
    const DriverApi* api = driver_api();
    // A CUBIN (an ELF image: its headers give every size) goes to the driver as it was read; PTX must
    // be NUL-terminated, so only a text that does not end in one is copied to add it.
    static constexpr char kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
    const bool elf = artifact.size() >= sizeof kElfMagic && std::memcmp(artifact.data(), kElfMagic, sizeof kElfMagic) == 0;
    std::vector<char> terminated;
    const char* image = artifact.data();
    if (!elf && (artifact.empty() || artifact.back() != '\0')) {
      terminated.reserve(artifact.size() + 1);
      terminated.assign(artifact.begin(), artifact.end());
      terminated.push_back('\0');
      image = terminated.data();
    }
    const Entries entries = load_entries(*api, image, key, has_pack_entry(unit));
    CUfunction fn = entries.entry, pack = entries.pack;
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

std::shared_ptr<const MemoStore> cuda::toolkit_memos() { return process_tiers().disk->memos("toolkit-headers"); }

std::shared_ptr<const MemoStore> cuda::probe_memos() {
  if (process_tiers_made()) return toolkit_memos();
  // A probe (jit::cuda::available(), the default target) must not fix the cache settings
  // (jit::configure may follow it): a read-only look at the root they name now, which creates and
  // writes nothing; a root that is not usable gives no memos (NVRTC is then opened to ask it).
  const CacheSettings settings = cache_settings();
  if (settings.access == CacheRoot::Access::None) return nullptr;
  auto root = std::make_shared<CacheRoot>(settings.root, CacheRoot::Access::ReadOnly);
  if (!root->usable()) return nullptr;
  return std::make_shared<MemoFolder>(std::move(root), "toolkit-headers", /*writable=*/false);
}

std::unique_ptr<BackendDriver> make_cuda_driver() { return std::make_unique<CudaDriver>(); }

}  // namespace jit::detail
