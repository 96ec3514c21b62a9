// Where the cache lives ($JITK_CACHE_DIR, $XDG_CACHE_HOME/jitk, ~/.cache/jitk), and the one verified
// folder handle everything beneath it is opened through.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <utility>

namespace jit::detail {

std::filesystem::path cache_root_path();

// A file descriptor, closed when it goes out of scope.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  ~UniqueFd();
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// Whether $JITK_CACHE_TRUST_SHARED=1: the owner and mode checks are off (a cache shared on purpose).
bool cache_shared_on_purpose();

// The cache root, opened once (O_DIRECTORY|O_NOFOLLOW) and checked on what was opened: a folder of
// ours, not writable by group or others, reached through parents that no other user can change
// (each owned by us or root, and not writable by others unless sticky). Everything beneath it is
// reached through this handle with openat and O_NOFOLLOW, so renaming or re-pointing the path
// cannot redirect a read or a write. A path that stops naming the folder opened (moved away,
// replaced by another folder or a symlink) refuses the root for the rest of the process.
class CacheRoot {
 public:
  // How the root is opened (the cache mode: jit::configure, JITK_CACHE_MODE). ReadOnly creates and
  // writes nothing, not even a missing root; None opens nothing (a memory-only cache).
  enum class Access { ReadWrite, ReadOnly, None };
  // Never throws: problem() says why the root is not usable. A root that does not exist is created
  // 0700 (with its missing parents) once its existing ancestors have been checked; nothing is
  // created inside a root that is refused.
  explicit CacheRoot(std::filesystem::path root, Access access = Access::ReadWrite);
  CacheRoot(const CacheRoot&) = delete;
  CacheRoot& operator=(const CacheRoot&) = delete;

  const std::filesystem::path& path() const { return path_; }
  bool usable() const { return fd_ && !refused_; }
  // Trusted and readable, but nothing can be written (a read-only mount, a shipped pre-warmed cache).
  bool read_only() const { return read_only_; }
  std::string problem() const;
  // Whether the path still names the folder opened (one lstat). Once it does not, the root is
  // refused for good and problem() says so.
  bool still_in_place();

  // The folder `rel` ("blobs", "blobs/ab", "" for the root) beneath the root, opened component by
  // component without following symlinks; each must be a folder we trust. create: makes missing
  // ones (0700). Throws Error{CacheIo} saying which and why; *missing (when given) is set instead of
  // throwing when a component does not exist.
  UniqueFd open_dir(const std::string& rel, bool create, bool* missing = nullptr) const;
  // A path naming `rel` through this handle (/proc/self/fd/N/rel), for what must open by name
  // (SQLite): it resolves to the folder opened whatever happens to path(). Falls back to
  // path()/rel where /proc is not mounted.
  std::string pinned(const std::string& rel) const;
  // Whether pinned() goes through the handle.
  static bool can_pin();
  std::filesystem::path shown(const std::string& rel) const { return rel.empty() ? path_ : path_ / rel; }

 private:
  void open(const std::filesystem::path& root, Access access);  // the constructor's work; problem_ says why not
  std::filesystem::path path_;
  UniqueFd fd_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool read_only_ = false;
  std::atomic<bool> refused_{false};
  mutable std::mutex problem_mutex_;
  std::string problem_;
};

// A regular file `name` in the folder `dir`, opened with O_NOFOLLOW and without blocking: a FIFO,
// device, socket, folder or symlink in its place is refused (never opened for reading or writing
// where it could block). flags: O_RDONLY, O_RDWR|O_CREAT, ... `shown`: the path for messages.
// Returns an invalid fd with *problem empty when the file does not exist (and O_CREAT is not
// given); *problem says why otherwise.
// opened (when given): the fstat of what was opened.
UniqueFd open_regular_file(int dir, const std::string& name, int flags, mode_t mode, const std::string& shown,
                           std::string* problem, struct stat* opened = nullptr);

// What a file of this st_mode is, for messages: "a FIFO", "a folder", "a symbolic link", ...
std::string kind_of_file(mode_t mode);

// Creates (0700) and checks the root; returns "" when usable, else why not. When the only problem
// is that a trusted root cannot be written, *read_only is set: its artifacts can still be read.
std::string prepare_cache_root(const std::filesystem::path& root, bool* read_only = nullptr);

}  // namespace jit::detail
