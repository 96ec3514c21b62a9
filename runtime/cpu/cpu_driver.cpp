// The CPU backend: loads object code with LLVM ORC LLJIT and runs the entry point on the thread pool.
// Built into the CPU module (libjitk_cpu.so), which runtime/cpu/cpu_module.cpp opens at first use.
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/Support/MemoryBuffer.h>

#include <atomic>
#include <fstream>
#include <future>
#include <mutex>

#include "jit/cpu/orc_compiler.hpp"
#include "runtime/backend_driver.hpp"
#include "support/logging.hpp"
#include "runtime/cpu/thread_pool.hpp"

namespace jit::detail {
namespace {

// What every CPU kernel text defines through JITK_ENTRY (named kEntrySymbol): void (void* const* args, i64 begin, i64 end).
using CpuEntry = void (*)(void* const*, std::int64_t, std::int64_t);

class CpuKernel final : public LoadedKernel {
 public:
  explicit CpuKernel(CpuEntry entry) : entry_(entry) {}
  Backend backend() const override { return Backend::Cpu; }
  void launch(const ArgPack& args) const override {
    struct Call {
      CpuEntry entry;
      void* const* args;
    } call{entry_, args.pointers()};
    ThreadPool::instance().parallel_for(
        args.work_items, args.min_grain,
        [](void* c, std::int64_t b, std::int64_t e) {
          auto* call = static_cast<Call*>(c);
          call->entry(call->args, b, e);
        },
        &call);
  }

 private:
  CpuEntry entry_;
};

std::string to_text(llvm::Error e) { return llvm::toString(std::move(e)); }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

class CpuDriver final : public BackendDriver {
 public:
  // ORC starts on another thread while the first get opens the cache and specializes (~0.3 ms saved).
  CpuDriver() : jit_future_(std::async(std::launch::async, create_lljit)) {}

  Backend backend() const override { return Backend::Cpu; }
  std::string unavailable_reason() const override { return ""; }

  const Compiler& compiler(const Target& target) const override {
    if (!target.arch.empty() && target.arch != compiler_.arch())
      throw Error(ErrorCode::BackendUnavailable, "CPU target '" + target.arch + "' is not this machine's CPU (" +
                                                     compiler_.arch() + "); jitk compiles CPU kernels for the host only");
    return compiler_;
  }
  // Timings change with the CPU and with how many threads jitk runs on.
  std::string device_identity(const Target& target) const override {
    return "cpu " + compiler(target).arch() + " (" + cpu_model() + ", " + std::to_string(ThreadPool::instance().size()) + " threads)";
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
    if (!jit_) jit_ = jit_future_.get();
    return *jit_;
  }

  OrcCompiler compiler_;
  mutable std::mutex mutex_;
  mutable std::future<std::unique_ptr<llvm::orc::LLJIT>> jit_future_;
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
