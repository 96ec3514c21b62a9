// flock-based lock files; survives the lock file being deleted and recreated under it.
#include "cache/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "jit/error.hpp"

namespace jit::detail {

FileLock::FileLock(const std::filesystem::path& file, Mode mode) {
  for (;;) {
    int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw Error(ErrorCode::CacheIo, "cannot open lock " + file.string() + ": " + std::strerror(errno));
    int rc;
    do rc = ::flock(fd, mode == Mode::Exclusive ? LOCK_EX : LOCK_SH);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int err = errno;
      ::close(fd);
      throw Error(ErrorCode::CacheIo, "cannot lock " + file.string() + ": " + std::strerror(err));
    }
    // If someone removed the file while we waited, we hold a lock nobody else can see: retry.
    struct stat held{}, now{};
    if (::fstat(fd, &held) == 0 && ::stat(file.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      fd_ = fd;
      return;
    }
    ::close(fd);
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace jit::detail
