// Resolves and prepares the cache root folder.
#include "cache/cache_root.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace jit::detail {

std::filesystem::path cache_root_path() {
  if (const char* d = std::getenv("JITK_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "jitk";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "jitk";
  return std::filesystem::temp_directory_path() / ("jitk-" + std::to_string(getuid()));
}

std::string prepare_cache_root(const std::filesystem::path& root) {
  std::error_code ec;
  if (!std::filesystem::exists(root, ec)) {
    std::filesystem::create_directories(root.parent_path(), ec);
    if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + root.string() + ": " + std::strerror(errno);
  }
  if (!std::filesystem::is_directory(root, ec)) return root.string() + " is not a folder";
  for (const char* sub : {"blobs", "locks"}) {
    auto p = root / sub;
    if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + p.string() + ": " + std::strerror(errno);
  }
  if (::access(root.c_str(), W_OK) != 0) return root.string() + " is not writable: " + std::strerror(errno);
  return "";
}

}  // namespace jit::detail
