// An exclusive lock shared by threads and processes: flock on a file, released by the kernel if the holder dies.
#pragma once
#include <filesystem>

namespace jit::detail {

class FileLock {
 public:
  enum class Mode { Exclusive, Shared };
  // Blocks (no busy loop) until the lock is held. Throws Error{CacheIo} if the file cannot be opened.
  explicit FileLock(const std::filesystem::path& file, Mode mode = Mode::Exclusive);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace jit::detail
