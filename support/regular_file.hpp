// Opening files named by people (packs, manifests, kernel text, the record file): regular files
// only, so that a FIFO, a device or a directory is refused at once instead of blocking, reading
// forever or reading as empty text; and reading them with a bound on their size.
#pragma once
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace jit::detail {

// A file descriptor, closed when it goes out of scope.
class FileHandle {
 public:
  FileHandle() = default;
  explicit FileHandle(int fd) : fd_(fd) {}
  FileHandle(FileHandle&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileHandle& operator=(FileHandle&& o) noexcept;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  ~FileHandle();
  int fd() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// "a directory", "a FIFO", "a character device", ... for what st_mode says a file is.
std::string file_kind(mode_t mode);

// "dev ino size mtime.ns ctime.ns" of a stat: what changes when a file is replaced, rewritten or moved.
std::string stat_identity(const struct stat& st);

// Opens `path` with `flags` (O_RDONLY, or O_RDWR | O_CREAT | O_APPEND ... ; O_NONBLOCK, O_NOCTTY and
// O_CLOEXEC are added, O_NONBLOCK dropped again once open) and checks with fstat that what was
// opened is a regular file. On failure returns an empty handle and sets `why` ("No such file or
// directory", "it is a FIFO, not a regular file", "it is a symbolic link" for O_NOFOLLOW).
// `st` receives the fstat of what was opened.
FileHandle open_regular_file(const std::filesystem::path& path, int flags, std::string* why, struct stat* st = nullptr,
                             mode_t create_mode = 0644);

// The whole of a regular file of at most max_bytes; nullopt with `why` otherwise (the size is
// checked before reading, and again while reading, for a file that grows).
std::optional<std::string> read_regular_file(const std::filesystem::path& path, std::int64_t max_bytes, std::string* why);

// Reads exactly n bytes at offset (pread, retrying on EINTR); false at an error or the end.
bool read_exactly_at(int fd, void* buf, std::size_t n, std::int64_t offset);

// Writes all n bytes (retrying short writes and EINTR); false with errno set otherwise (ENOSPC for a
// write that wrote nothing).
bool write_all(int fd, const void* data, std::size_t n);

// Replaces the file at `path` with `data`, whole or not at all: a new temp file of a fresh random
// name beside it (created exclusively: a file, FIFO or symbolic link already of that name is never
// opened or followed), written, fsynced, made mode 0644 and renamed over `path`. Returns "" or why it
// failed (the temp file then removed; `path` untouched).
std::string replace_file(const std::filesystem::path& path, std::string_view data);

}  // namespace jit::detail
