// Regular files only, opened without blocking and read with a bound.
#include "support/regular_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace jit::detail {

FileHandle& FileHandle::operator=(FileHandle&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

FileHandle::~FileHandle() {
  if (fd_ >= 0) ::close(fd_);
}

std::string stat_identity(const struct stat& st) {
  return std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ctim.tv_sec) +
         "." + std::to_string(st.st_ctim.tv_nsec);
}

std::string file_kind(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
  }
  return "not a regular file";
}

FileHandle open_regular_file(const std::filesystem::path& path, int flags, std::string* why, struct stat* st_out,
                             mode_t create_mode) {
  // O_NONBLOCK: opening a FIFO without a writer (or a tty, a device) must not wait.
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, create_mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    if (why) *why = (err == ELOOP && (flags & O_NOFOLLOW)) ? "it is a symbolic link (not followed)" : std::strerror(err);
    return {};
  }
  FileHandle file(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    if (why) *why = std::strerror(errno);
    return {};
  }
  if (!S_ISREG(st.st_mode)) {
    if (why) *why = "it is " + file_kind(st.st_mode) + ", not a regular file";
    return {};
  }
  if (const int fl = ::fcntl(fd, F_GETFL); fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (st_out) *st_out = st;
  return file;
}

bool read_exactly_at(int fd, void* buf, std::size_t n, std::int64_t offset) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
    offset += got;
  }
  return true;
}

std::optional<std::string> read_regular_file(const std::filesystem::path& path, std::int64_t max_bytes, std::string* why) {
  struct stat st{};
  FileHandle file = open_regular_file(path, O_RDONLY, why, &st);
  if (!file) return std::nullopt;
  if (st.st_size > max_bytes) {
    if (why) *why = "it is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) + " allowed";
    return std::nullopt;
  }
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t got = ::read(file.fd(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      if (why) *why = std::strerror(errno);
      return std::nullopt;
    }
    if (got == 0) break;
    if (static_cast<std::int64_t>(text.size()) + got > max_bytes) {
      if (why) *why = "it grew past the " + std::to_string(max_bytes) + " bytes allowed while being read";
      return std::nullopt;
    }
    text.append(buf, static_cast<std::size_t>(got));
  }
  return text;
}

bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = ENOSPC;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

std::string replace_file(const std::filesystem::path& path, std::string_view data) {
  std::string temp = path.string() + ".tmp.XXXXXX";
  const int fd = ::mkostemp(temp.data(), O_CLOEXEC);  // O_CREAT | O_EXCL, a fresh name each try
  if (fd < 0) return "cannot create a temp file beside " + path.string() + ": " + std::strerror(errno);
  FileHandle f(fd);
  const auto fail = [&](const std::string& what) {
    const int err = errno;
    ::unlink(temp.c_str());
    return what + " " + temp + ": " + std::strerror(err);
  };
  if (!write_all(f.fd(), data.data(), data.size())) return fail("cannot write");
  if (::fchmod(f.fd(), 0644) != 0) return fail("cannot set the mode of");
  if (::fsync(f.fd()) != 0) return fail("cannot fsync");
  if (::rename(temp.c_str(), path.c_str()) != 0) return fail("cannot rename into place " + path.string() + " from");
  return "";
}

}  // namespace jit::detail
