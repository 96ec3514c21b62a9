// Loading a module of a program's own kernels (jit/kernel_module.hpp): what `jitk warm --kernels` does.
#include "jit/kernel_module.hpp"

#include <sys/stat.h>

#include <mutex>
#include <set>

#include "cache/cache_root.hpp"
#include "jit/error.hpp"
#include "support/dynamic_library.hpp"
#include "support/text.hpp"

namespace jit {

void load_kernel_module(const std::filesystem::path& path) {
  const std::string shown = detail::printable(path.string());
  std::string file = path.string();
  if (file.empty() || file.find('\0') != std::string::npos)
    throw Error(ErrorCode::InvalidParams, "kernel module '" + shown + "': not a file name");
  // A path, never a name the loader would look up elsewhere (LD_LIBRARY_PATH).
  if (file.find('/') == std::string::npos) file = "./" + file;
  struct stat st{};
  if (::stat(file.c_str(), &st) != 0)
    throw Error(ErrorCode::InvalidParams, "kernel module '" + shown + "': no such file (a shared library built with JITK_KERNEL_MODULE)");
  // Never opened otherwise: a FIFO would block the loader, a folder or device is no library.
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorCode::InvalidParams, "kernel module '" + shown + "' is " + detail::kind_of_file(st.st_mode) +
                                              ", not a shared library");
  static std::mutex mutex;
  static std::set<std::pair<dev_t, ino_t>> loaded;
  std::lock_guard lock(mutex);
  if (loaded.count({st.st_dev, st.st_ino})) return;  // the same file twice: its kernels are registered
  detail::DynamicLibrary lib = detail::DynamicLibrary::open_first({file}, RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw Error(ErrorCode::InvalidParams, "kernel module '" + shown + "' cannot be loaded: " + detail::printable(lib.error()));
  using RegisterFn = void (*)();
  auto fn = reinterpret_cast<RegisterFn>(lib.symbol("jitk_register_kernels"));
  if (!fn)
    throw Error(ErrorCode::InvalidParams, "kernel module '" + shown +
                                              "' has no jitk_register_kernels (add JITK_KERNEL_MODULE(your_register_function) to it)");
  // Its kernels' texts and functions live in it: it stays open for the process.
  lib.keep_open();
  fn();
  loaded.insert({st.st_dev, st.st_ino});
}

}  // namespace jit
