// The CPU backend as libjitk holds it: a kernel found in the cache is keyed with the compiler facts
// remembered in the cache root and loaded by libjitk's own object loader, so that LLVM is mapped only
// to compile, to learn those facts once, or to load an object that loader refuses (the CPU module).
#include <functional>
#include <mutex>
#include <optional>

#include "cache/disk_tier.hpp"
#include "cache/process_tiers.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/cpu/compiler_memo.hpp"
#include "runtime/cpu/cpu_kernel.hpp"
#include "runtime/cpu/cpu_module.hpp"
#include "runtime/cpu/object_loader.hpp"
#include "support/logging.hpp"

namespace jit::detail {
namespace {

// The CPU compiler as a cache key sees it, from remembered facts; a compile opens the module.
class RememberedCompiler final : public Compiler {
 public:
  RememberedCompiler(CompilerFacts facts, std::function<const Compiler&()> real) : facts_(std::move(facts)), real_(std::move(real)) {}
  std::string id() const override { return facts_.id; }
  std::string arch() const override { return facts_.arch; }
  std::string target_fingerprint() const override { return facts_.target_fingerprint; }
  std::vector<std::string> options() const override { return facts_.options; }
  CompiledArtifact compile(const SourceUnit& unit) const override { return real_().compile(unit); }

 private:
  CompilerFacts facts_;
  std::function<const Compiler&()> real_;
};

// Where the facts are remembered: the cache root, through its handle (null when it cannot be used).
std::shared_ptr<const MemoStore> facts_memos() { return process_tiers().disk->memos(""); }

class CpuBackend final : public BackendDriver {
 public:
  CpuBackend() : memos_(facts_memos()) {
    if (memos_) {
      stamp_ = compiler_facts_stamp(cpu_module_identity());
      if (auto facts = read_compiler_facts(*memos_, stamp_))
        remembered_.emplace(std::move(*facts), [this]() -> const Compiler& { return module().compiler(Target::cpu()); });
    }
    if (!remembered_) opened();  // learns the facts, or why the module cannot open
  }

  Backend backend() const override { return Backend::Cpu; }
  std::string unavailable_reason() const override { return remembered_ ? "" : opened().reason; }

  const Compiler& compiler(const Target& target) const override {
    if (!remembered_) return module().compiler(target);
    if (!target.arch.empty() && target.arch != remembered_->arch())
      throw Error(ErrorCode::BackendUnavailable, "CPU target '" + target.arch + "' is not this machine's CPU (" +
                                                     remembered_->arch() + "); jitk compiles CPU kernels for the host only");
    return *remembered_;
  }

  // Timings change with the CPU and with how many threads jitk runs on.
  std::string device_identity(const Target& target) const override {
    return "cpu " + compiler(target).arch() + " (" + cpu_model_name() + ", " + std::to_string(ThreadPool::instance().size()) +
           " threads)";
  }

  std::shared_ptr<const LoadedKernel> load(const std::vector<char>& artifact, const SourceUnit& unit, const Target& target,
                                           const std::string& key) const override {
    LoadedObject object = load_relocatable_object(artifact, kEntrySymbol);
    if (object.image) return std::make_shared<CpuKernel>(reinterpret_cast<CpuEntry>(object.entry), std::move(object.image));
    warn_once("cpu-object-loader", "CPU: artifact " + key + " (" + unit.kernel + ") is loaded with LLVM ORC: jitk's own loader does not take it (" +
                                       object.refused + ")");
    return module().load(artifact, unit, target, key);
  }

 private:
  const CpuModule& opened() const {
    std::call_once(open_once_, [this] {
      module_ = open_cpu_module();
      if (!module_.driver || stamp_.empty() || !memos_) return;
      try {  // remembered for the next process
        const Compiler& c = module_.driver->compiler(Target::cpu());
        write_compiler_facts(*memos_, stamp_, {c.id(), c.arch(), c.target_fingerprint(), c.options()});
      } catch (const Error& e) {
        log().debug("CPU: compiler facts not remembered: {}", e.what());
      }
    });
    return module_;
  }
  const BackendDriver& module() const {
    const CpuModule& m = opened();
    if (!m.driver) throw Error(ErrorCode::BackendUnavailable, "target cpu is unavailable: " + m.reason);
    return *m.driver;
  }

  std::shared_ptr<const MemoStore> memos_;
  std::string stamp_;
  std::optional<RememberedCompiler> remembered_;
  mutable std::once_flag open_once_;
  mutable CpuModule module_;
};

}  // namespace

std::unique_ptr<BackendDriver> make_cpu_driver() { return std::make_unique<CpuBackend>(); }

}  // namespace jit::detail
