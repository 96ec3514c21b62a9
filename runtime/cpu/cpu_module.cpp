// Opens the CPU backend module (libjitk_cpu.so: clang + LLVM ORC) at the first CPU compile or load,
// so that libjitk itself links no LLVM and a process without CPU kernels never maps it.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/backend_driver.hpp"
#include "support/dynamic_library.hpp"
#include "support/logging.hpp"

namespace jit::detail {
namespace {

// What the module's entry points are called (runtime/cpu/cpu_driver.cpp defines them).
constexpr const char* kAbiSymbol = "jitk_cpu_module_abi";
constexpr const char* kFactorySymbol = "jitk_cpu_make_driver";

// Stands in for the CPU driver when its module cannot be opened: every use says why.
class MissingCpuDriver final : public BackendDriver {
 public:
  explicit MissingCpuDriver(std::string reason) : reason_(std::move(reason)) {}
  Backend backend() const override { return Backend::Cpu; }
  std::string unavailable_reason() const override { return reason_; }
  const Compiler& compiler(const Target&) const override { throw Error(ErrorCode::BackendUnavailable, reason_); }
  std::shared_ptr<const LoadedKernel> load(const std::vector<char>&, const SourceUnit&, const Target&,
                                           const std::string&) const override {
    throw Error(ErrorCode::BackendUnavailable, reason_);
  }

 private:
  std::string reason_;
};

// The folder libjitk was loaded from ("" when the loader cannot say).
std::string libjitk_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&libjitk_folder), &info) == 0 || !info.dli_fname) return "";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

// Where to look, in order: $JITK_CPU_MODULE alone when set; else beside libjitk, then the install libdir.
std::vector<std::string> module_candidates() {
  if (const char* path = std::getenv("JITK_CPU_MODULE"); path && *path) return {path};
  std::vector<std::string> out;
  if (std::string folder = libjitk_folder(); !folder.empty()) out.push_back(folder + "/" + JITK_CPU_MODULE_FILE);
  std::string installed = std::string(JITK_INSTALL_FULL_LIBDIR) + "/" + JITK_CPU_MODULE_FILE;
  if (out.empty() || out.front() != installed) out.push_back(installed);
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

constexpr const char* kRemedy = " (it holds jitk's CPU backend: install it beside libjitk, or point JITK_CPU_MODULE at it)";

}  // namespace

std::unique_ptr<BackendDriver> make_cpu_driver() {
  const std::vector<std::string> candidates = module_candidates();
  for (const auto& path : candidates) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) continue;  // not here: the next place
    // RTLD_LOCAL: LLVM's symbols stay the module's; it finds libjitk's, loaded already, by its NEEDED entry.
    DynamicLibrary lib = DynamicLibrary::open_first({path}, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return std::make_unique<MissingCpuDriver>("the CPU backend module " + path + " cannot be loaded: " + lib.error() + kRemedy);
    const char* (*abi)() = nullptr;
    BackendDriver* (*make)() = nullptr;
    SymbolTable symbols;
    symbols.required(abi, kAbiSymbol).required(make, kFactorySymbol);
    if (std::string missing = symbols.resolve(lib); !missing.empty())
      return std::make_unique<MissingCpuDriver>("the CPU backend module " + path + " is not jitk's (it lacks " + missing + ")" + kRemedy);
    if (std::string(abi()) != JITK_CPU_MODULE_ABI)
      return std::make_unique<MissingCpuDriver>("the CPU backend module " + path + " belongs to jitk " + abi() +
                                                ", this libjitk is " + JITK_CPU_MODULE_ABI + kRemedy);
    lib.keep_open();  // its code runs until the process ends: loaded kernels, static destructors
    std::unique_ptr<BackendDriver> driver(make());
    log().debug("CPU backend: module {}", path);
    return driver;
  }
  return std::make_unique<MissingCpuDriver>("the CPU backend module " + std::string(JITK_CPU_MODULE_FILE) +
                                            " cannot be found (looked for " + joined(candidates) + ")" + kRemedy);
}

}  // namespace jit::detail
