// The CPU backend's LLVM half: clang as its compiler, and LLVM ORC LLJIT to load what libjitk's own
// loader refuses. Built into the CPU module (libjitk_cpu.so), which runtime/cpu/cpu_module.cpp opens.
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/Support/MemoryBuffer.h>

#include <atomic>
#include <mutex>

#include "jit/cpu/orc_compiler.hpp"
#include "runtime/backend_driver.hpp"
#include "support/logging.hpp"
#include "runtime/cpu/cpu_kernel.hpp"
#include "runtime/cpu/thread_pool.hpp"

namespace jit::detail {
namespace {

std::string to_text(llvm::Error e) { return llvm::toString(std::move(e)); }

class CpuDriver final : public BackendDriver {
 public:
  // ORC starts at the first load that needs it: libjitk loads most objects itself (object_loader.hpp).
  CpuDriver() = default;

  Backend backend() const override { return Backend::Cpu; }
  std::string unavailable_reason() const override { return ""; }

  const Compiler& compiler(const Target& target) const override {
    if (!target.arch.empty() && target.arch != compiler_.arch())
      throw Error(ErrorCode::BackendUnavailable, "CPU target '" + target.arch + "' is not this machine's CPU (" +
                                                     compiler_.arch() + "); jitk compiles CPU kernels for the host only");
    return compiler_;
  }

  std::shared_ptr<const LoadedKernel> load(const std::vector<char>& artifact, const SourceUnit&, const Target&,
                                           const std::string& key) const override {
    std::lock_guard lock(mutex_);
    auto& jit = lljit();
    auto dylib = jit.createJITDylib("jitk_" + key + "_" + std::to_string(next_dylib_++));
    if (!dylib) throw Error(ErrorCode::LoadFailed, "ORC: " + to_text(dylib.takeError()));
    auto generator = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit.getDataLayout().getGlobalPrefix());
    if (!generator) throw Error(ErrorCode::LoadFailed, "ORC: " + to_text(generator.takeError()));
    dylib->addGenerator(std::move(*generator));
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(artifact.data(), artifact.size()), key);
    if (auto err = jit.addObjectFile(*dylib, std::move(buffer)))
      throw Error(ErrorCode::LoadFailed, "ORC could not add artifact " + key + ": " + to_text(std::move(err)));
    auto address = jit.lookup(*dylib, kEntrySymbol);
    if (!address)
      throw Error(ErrorCode::LoadFailed, "artifact " + key + " has no usable '" + kEntrySymbol + "': " + to_text(address.takeError()));
    return std::make_shared<CpuKernel>(address->toPtr<CpuEntry>());
  }

 private:
  static std::unique_ptr<llvm::orc::LLJIT> create_lljit() {
    initialize_native_target();
    // RuntimeDyld starts in half the time of JITLink here (0.23 vs 0.51 ms) and links our
    // small, self-contained objects just as well.
    auto built = llvm::orc::LLJITBuilder()
                     .setObjectLinkingLayerCreator([](llvm::orc::ExecutionSession& session, const llvm::Triple&) {
                       return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
                           session, [] { return std::make_unique<llvm::SectionMemoryManager>(); });
                     })
                     .create();
    if (!built) throw Error(ErrorCode::LoadFailed, "cannot start LLVM ORC: " + to_text(built.takeError()));
    return std::move(*built);
  }

  llvm::orc::LLJIT& lljit() const {  // called under mutex_
    if (!jit_) jit_ = create_lljit();
    return *jit_;
  }

  OrcCompiler compiler_;
  mutable std::mutex mutex_;
  mutable std::unique_ptr<llvm::orc::LLJIT> jit_;
  mutable std::uint64_t next_dylib_ = 0;
};

}  // namespace

}  // namespace jit::detail

// The module's entry points, looked up by name with dlsym (runtime/cpu/cpu_module.cpp).
extern "C" {
// The jitk this module was built with: libjitk opens only its own.
__attribute__((visibility("default"))) const char* jitk_cpu_module_abi() { return JITK_CPU_MODULE_ABI; }
// A new CPU driver; the caller owns it.
__attribute__((visibility("default"))) jit::detail::BackendDriver* jitk_cpu_make_driver() {
  return std::make_unique<jit::detail::CpuDriver>().release();
}
}
