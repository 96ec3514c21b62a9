// Opens the CPU backend module (libjitk_cpu.so: clang + LLVM ORC) when a CPU compile or a load that
// libjitk's own loader refuses needs it, so that libjitk itself links no LLVM.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/cpu/cpu_module.hpp"
#include "support/dynamic_library.hpp"
#include "support/logging.hpp"
#include "support/regular_file.hpp"

namespace jit::detail {
namespace {

// What the module's entry points are called (runtime/cpu/cpu_driver.cpp defines them).
constexpr const char* kAbiSymbol = "jitk_cpu_module_abi";
constexpr const char* kFactorySymbol = "jitk_cpu_make_driver";

// The folder libjitk was loaded from ("" when the loader cannot say).
std::string libjitk_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&libjitk_folder), &info) == 0 || !info.dli_fname) return "";
  const std::string file = info.dli_fname;
  const auto slash = file.rfind('/');
  return slash == std::string::npos ? "." : file.substr(0, slash == 0 ? 1 : slash);
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

std::string cpu_module_identity() {
  for (const auto& path : module_candidates()) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) continue;
    return path + " " + stat_identity(st);
  }
  return "";
}

CpuModule open_cpu_module() {
  const std::vector<std::string> candidates = module_candidates();
  auto failed = [](std::string reason) { return CpuModule{nullptr, std::move(reason) + kRemedy}; };
  for (const auto& path : candidates) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) continue;  // not here: the next place
    // RTLD_LOCAL: LLVM's symbols stay the module's; it finds libjitk's, loaded already, by its NEEDED entry.
    DynamicLibrary lib = DynamicLibrary::open_first({path}, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return failed("the CPU backend module " + path + " cannot be loaded: " + lib.error());
    const char* (*abi)() = nullptr;
    BackendDriver* (*make)() = nullptr;
    SymbolTable symbols;
    symbols.required(abi, kAbiSymbol).required(make, kFactorySymbol);
    if (std::string missing = symbols.resolve(lib); !missing.empty())
      return failed("the CPU backend module " + path + " is not jitk's (it lacks " + missing + ")");
    if (std::string(abi()) != JITK_CPU_MODULE_ABI)
      return failed("the CPU backend module " + path + " belongs to jitk " + abi() + ", this libjitk is " + JITK_CPU_MODULE_ABI);
    lib.keep_open();  // its code runs until the process ends: loaded kernels, static destructors
    CpuModule module{std::unique_ptr<BackendDriver>(make()), ""};
    log().debug("CPU backend: opened {}", path);
    return module;
  }
  return failed("the CPU backend module " + std::string(JITK_CPU_MODULE_FILE) + " cannot be found (looked for " +
                joined(candidates) + ")");
}

}  // namespace jit::detail
