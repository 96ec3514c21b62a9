// Reading and writing memo files through the cache root's handle.
#include "cache/memo_folder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <vector>

#include "jit/error.hpp"

namespace jit::detail {

bool is_memo_name(const std::string& name) {
  return !name.empty() && name.size() <= 200 && name[0] != '.' && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

MemoFolder::MemoFolder(std::shared_ptr<CacheRoot> root, std::string folder, bool writable)
    : root_(std::move(root)), folder_(std::move(folder)), writable_(writable) {}

namespace {

// The whole of regular file `name` in folder `dir` (no symlink, FIFO or device: open_regular_file),
// or nothing when it is not one, is larger than max_bytes, or ends before its size (changing under us).
std::optional<std::string> read_regular(int dir, const std::string& name, const std::string& shown, std::size_t max_bytes) {
  std::string problem;
  struct stat st{};
  UniqueFd f = open_regular_file(dir, name, O_RDONLY, 0, shown, &problem, &st);
  if (!f || st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > max_bytes) return std::nullopt;
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(f.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<std::size_t>(n);
  }
  return text;
}

}  // namespace

std::optional<std::string> MemoFolder::read(const std::string& name, std::size_t max_bytes) const {
  if (!root_ || !root_->usable() || !is_memo_name(name)) return std::nullopt;
  try {
    bool missing = false;
    UniqueFd dir = root_->open_dir(folder_, /*create=*/false, &missing);
    if (!dir) return std::nullopt;
    return read_regular(dir.get(), name, root_->shown(folder_).string() + "/" + name, max_bytes);
  } catch (const Error&) {
    return std::nullopt;  // a folder on the way is not ours: no memo
  }
}

bool MemoFolder::write(const std::string& name, std::string_view text) const {
  if (!writable_ || !root_ || !root_->usable() || root_->read_only() || !is_memo_name(name)) return false;
  try {
    UniqueFd dir = root_->open_dir(folder_, /*create=*/true);
    static std::atomic<unsigned> counter{0};
    const std::string temp = "." + name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    UniqueFd f(::openat(dir.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!f) return false;
    const char* p = text.data();
    std::size_t left = text.size();
    while (left > 0) {
      const ssize_t w = ::write(f.get(), p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ::unlinkat(dir.get(), temp.c_str(), 0);
        return false;
      }
      p += w;
      left -= static_cast<std::size_t>(w);
    }
    f = UniqueFd();
    if (::renameat(dir.get(), temp.c_str(), dir.get(), name.c_str()) != 0) {
      ::unlinkat(dir.get(), temp.c_str(), 0);
      return false;
    }
    return true;
  } catch (const Error&) {
    return false;
  }
}

namespace {

// The entries of an open folder (not "." and ".."); empty when it cannot be listed.
std::vector<std::string> entries_of(int dir_fd, std::size_t limit) {
  std::vector<std::string> names;
  const int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return names;
  DIR* d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return names;
  }
  while (names.size() < limit)
    if (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    } else {
      break;
    }
  ::closedir(d);
  return names;
}

}  // namespace

std::vector<std::string> MemoFolder::names(std::size_t limit) const {
  std::vector<std::string> out;
  if (!root_ || !root_->usable() || limit == 0) return out;
  try {
    bool missing = false;
    UniqueFd dir = root_->open_dir(folder_, /*create=*/false, &missing);
    if (!dir) return out;
    // Temp files and taken memos (names starting with '.') are skipped, so read a few more.
    for (auto& name : entries_of(dir.get(), limit * 2 + 16))
      if (is_memo_name(name) && out.size() < limit) out.push_back(std::move(name));
  } catch (const Error&) {
  }
  return out;
}

namespace {

// Renames memo `name` of an open folder aside (take_all): its name while taken, or "" when it is not
// there any more (another taker has it) or a folder is in its place (left where it is: nothing of
// ours makes one).
std::string take_in(int dir, const std::string& name) {
  if (!is_memo_name(name)) return "";
  struct stat entry{};
  if (::fstatat(dir, name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(entry.st_mode)) return "";
  static std::atomic<unsigned> counter{0};
  const std::string taken = "." + name + ".taken." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  // renameat moves the entry itself (a symlink stays a symlink): only one taker succeeds.
  if (::renameat(dir, name.c_str(), dir, taken.c_str()) != 0) return "";
  return taken;
}

// A file renamed aside by a taker or written by a writer ("." + name + ".taken." / ".tmp." + pid...)
// that has been left an hour: its process died in between. Removed (never put back: the taker may
// have recorded it before dying, and counting it twice is worse than not at all).
void remove_if_stale(int dir, const std::string& name) {
  if (name.size() < 2 || name[0] != '.' || (name.find(".taken.") == std::string::npos && name.find(".tmp.") == std::string::npos))
    return;
  struct stat st{};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)) return;
  if (::time(nullptr) - st.st_mtime > 3600) ::unlinkat(dir, name.c_str(), 0);
}

}  // namespace

TakenMemos::~TakenMemos() {
  if (!dir_) return;
  for (std::size_t i = 0; i < aside_.size(); ++i)
    ::renameat(dir_.get(), aside_[i].c_str(), dir_.get(), memos_[i].name.c_str());  // a new memo of that name wins: it stays aside
}

void TakenMemos::release() {
  if (!dir_) return;
  for (const auto& taken : aside_) ::unlinkat(dir_.get(), taken.c_str(), 0);
  aside_.clear();
  memos_.clear();
}

TakenMemos MemoFolder::take_all(std::size_t limit, std::size_t max_bytes) const {
  TakenMemos out;
  if (!writable_ || !root_ || !root_->usable() || root_->read_only() || limit == 0) return out;
  try {
    bool missing = false;
    out.dir_ = root_->open_dir(folder_, /*create=*/false, &missing);
    if (!out.dir_) return out;
    const int dir = out.dir_.get();
    const std::string shown = root_->shown(folder_).string();
    for (auto& name : entries_of(dir, limit * 2 + 16)) {
      if (!is_memo_name(name)) {
        remove_if_stale(dir, name);
        continue;
      }
      if (out.memos_.size() >= limit) continue;
      std::string taken = take_in(dir, name);
      if (taken.empty()) continue;
      auto text = read_regular(dir, taken, shown + "/" + name, max_bytes);
      out.aside_.push_back(std::move(taken));
      out.memos_.push_back({std::move(name), std::move(text)});
    }
  } catch (const Error&) {
  }
  return out;
}

int MemoFolder::remove_all() const {
  if (!writable_ || !root_ || !root_->usable() || root_->read_only()) return 0;
  int removed = 0;
  try {
    bool missing = false;
    UniqueFd dir = root_->open_dir(folder_, /*create=*/false, &missing);
    if (!dir) return 0;
    const std::vector<std::string> names = entries_of(dir.get(), SIZE_MAX);
    for (const auto& name : names) {
      struct stat st{};
      if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
          ::unlinkat(dir.get(), name.c_str(), 0) == 0)
        ++removed;
    }
  } catch (const Error&) {
  }
  return removed;
}

}  // namespace jit::detail
