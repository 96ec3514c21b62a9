// An exclusive lock shared by threads and processes: flock on a file, released by the kernel if the
// holder dies; waiting for it is bounded.
#pragma once
#include <chrono>
#include <filesystem>
#include <string>

#include "jit/error.hpp"

namespace jit::detail {

// How long a cache lock or a busy index.db is waited for: $JITK_CACHE_LOCK_TIMEOUT seconds
// (a plain number, fractions allowed), 60 by default. Past it the process keeps its kernels in memory.
std::chrono::milliseconds cache_lock_timeout();

// A lock or a busy index that was waited on for the whole timeout: the cache tier that meets it
// goes to memory for the rest of the process, so that no later kernel pays the wait again.
class CacheBusy : public Error {
 public:
  explicit CacheBusy(const std::string& message) : Error(ErrorCode::CacheIo, message) {}
};

class FileLock {
 public:
  enum class Mode { Exclusive, Shared };
  // Waits (polling, with backoff) until the lock is held, at most cache_lock_timeout(): then
  // throws CacheBusy. The lock file `name` lives in the folder `dir` (a handle: openat, O_NOFOLLOW,
  // regular files only); `shown` names it in messages. Throws Error{CacheIo} if it cannot be opened.
  FileLock(int dir, const std::string& name, const std::string& shown, Mode mode = Mode::Exclusive);
  explicit FileLock(const std::filesystem::path& file, Mode mode = Mode::Exclusive);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  void acquire(int dir, const std::string& name, const std::string& shown, Mode mode);
  int fd_ = -1;
};

}  // namespace jit::detail
