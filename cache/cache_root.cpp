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

std::string prepare_cache_root(const std::filesystem::path& root, bool* read_only) {
  if (read_only) *read_only = false;
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
  // Another user's folder, or one others may write into, could hand us native code to run.
  struct stat st{};
  const char* trust = std::getenv("JITK_CACHE_TRUST_SHARED");
  if (!(trust && std::string(trust) == "1")) {
    for (const auto& p : {root, root / "index.db", root / "blobs"}) {
      if (::stat(p.c_str(), &st) != 0) continue;  // index.db may not exist yet
      if (st.st_uid != ::geteuid())
        return p.string() + " belongs to another user (uid " + std::to_string(st.st_uid) +
               "); set JITK_CACHE_TRUST_SHARED=1 if it is shared on purpose";
      if (st.st_mode & (S_IWGRP | S_IWOTH))
        return p.string() + " is writable by group or others; chmod go-w it, or set JITK_CACHE_TRUST_SHARED=1 if it is shared on purpose";
    }
  }
  if (::access(root.c_str(), W_OK) != 0) {
    int err = errno;
    if (read_only && (err == EROFS || err == EACCES) && ::access(root.c_str(), R_OK | X_OK) == 0) *read_only = true;
    return root.string() + " is not writable: " + std::strerror(err);
  }
  return "";
}

}  // namespace jit::detail

namespace jit::detail {


}  // namespace jit::detail
