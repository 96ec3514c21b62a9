// flock-based lock files; survives the lock file being deleted and recreated under it; bounded waits.
#include "cache/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "cache/cache_root.hpp"
#include "support/logging.hpp"

namespace jit::detail {

namespace {
constexpr std::chrono::milliseconds kDefaultLockTimeout{60'000};
constexpr double kMaxLockTimeoutSeconds = 7 * 24 * 3600;
}  // namespace

std::chrono::milliseconds cache_lock_timeout() {
  const char* text = std::getenv("JITK_CACHE_LOCK_TIMEOUT");
  if (!text || !*text) return kDefaultLockTimeout;
  const std::string s = text;
  double seconds = -1;
  auto r = std::from_chars(s.data(), s.data() + s.size(), seconds, std::chars_format::fixed);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(seconds) || seconds < 0 ||
      seconds > kMaxLockTimeoutSeconds) {
    warn_once("cache-lock-timeout", "JITK_CACHE_LOCK_TIMEOUT='" + s +
                                        "' is not a number of seconds (e.g. 60 or 0.5, at most a week); using 60");
    return kDefaultLockTimeout;
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000)));
}

FileLock::FileLock(int dir, const std::string& name, const std::string& shown, Mode mode) { acquire(dir, name, shown, mode); }

FileLock::FileLock(const std::filesystem::path& file, Mode mode) {
  auto parent = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw Error(ErrorCode::CacheIo, "cannot open " + parent.string() + ": " + std::strerror(errno));
  acquire(dir.get(), file.filename().string(), file.string(), mode);
}

void FileLock::acquire(int dir, const std::string& name, const std::string& shown, Mode mode) {
  const auto deadline = std::chrono::steady_clock::now() + cache_lock_timeout();
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::string problem;
    UniqueFd fd = open_regular_file(dir, name, O_RDWR | O_CREAT, 0600, shown, &problem);
    if (!fd) throw Error(ErrorCode::CacheIo, "cannot open lock" + (problem.empty() ? " " + shown : ": " + problem));
    for (;;) {
      if (::flock(fd.get(), (mode == Mode::Exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) break;
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK)
        throw Error(ErrorCode::CacheIo, "cannot lock " + shown + ": " + std::strerror(errno));
      if (std::chrono::steady_clock::now() >= deadline)
        throw CacheBusy("lock " + shown + " is held by another process past " +
                        std::to_string(cache_lock_timeout().count()) + " ms (JITK_CACHE_LOCK_TIMEOUT)");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    // If someone removed the file while we waited, we hold a lock nobody else can see: retry.
    struct stat held{}, now{};
    if (::fstat(fd.get(), &held) == 0 && ::fstatat(dir, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
      fd_ = fd.release();
      return;
    }
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace jit::detail
