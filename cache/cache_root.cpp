// Resolving the cache root, opening it once and checking it can be trusted; folders and regular files beneath it.
#include "cache/cache_root.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "jit/error.hpp"

namespace jit::detail {

namespace fs = std::filesystem;

fs::path cache_root_path() {
  if (const char* d = std::getenv("JITK_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "jitk";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "jitk";
  return fs::temp_directory_path() / ("jitk-" + std::to_string(getuid()));
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

bool cache_shared_on_purpose() {
  const char* trust = std::getenv("JITK_CACHE_TRUST_SHARED");
  return trust && std::string(trust) == "1";
}

std::string kind_of_file(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

namespace {

constexpr const char* kSharedHint = "; set JITK_CACHE_TRUST_SHARED=1 if it is shared on purpose (docs/cache-format.md)";

// The effective user, asked once (it is checked on every file a load opens).
uid_t our_uid() {
  static const uid_t uid = ::geteuid();
  return uid;
}

bool trusted_owner(uid_t uid) { return uid == our_uid() || uid == 0; }

// Why a folder on the way to the root lets another user move or replace what is beneath it, or "".
// Each must be owned by us or root, and writable by group or others only with the sticky bit (then
// only an entry's owner, us or root as checked one level down, can rename it). `unknown`: where
// given, a folder on the way that cannot be looked at (missing, or not a folder) ends the walk with ""
// and *unknown set: the caller then takes the way that creates it or says why not. `last`: the
// lstat of `dir` itself, when the walk reached it.
std::string check_ancestors(const fs::path& dir, bool* saw_link = nullptr, bool* unknown = nullptr, struct stat* last = nullptr) {
  fs::path prefix;
  for (const auto& part : dir) {
    prefix /= part;
    struct stat st{};
    if (::lstat(prefix.c_str(), &st) != 0) {
      if (unknown) {
        *unknown = true;
        return "";
      }
      return "cannot inspect " + prefix.string() + ": " + std::strerror(errno);
    }
    if (last) *last = st;
    if (!trusted_owner(st.st_uid))
      return prefix.string() + " belongs to another user (uid " + std::to_string(st.st_uid) +
             "), who could move or replace the cache beneath it" + kSharedHint;
    if (S_ISLNK(st.st_mode)) {  // owned right; what it names is checked through the canonical path
      if (saw_link) *saw_link = true;
      continue;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return prefix.string() + " is writable by group or others without the sticky bit: another user could "
             "replace the cache beneath it; chmod go-w (or +t) it, or put the cache elsewhere" + kSharedHint;
  }
  return "";
}

// Both the path as written (its symlinks must be owned right) and the folders it resolves to.
std::string check_ancestor_chain(const fs::path& dir) {
  bool saw_link = false;
  if (std::string why = check_ancestors(dir, &saw_link); !why.empty()) return why;
  // No symlink on the way of an absolute, normal path: it is its own canonical path (the same
  // folders were just checked), so resolving it again would only repeat those lstats.
  if (!saw_link && dir.is_absolute() && dir == dir.lexically_normal()) return "";
  std::error_code ec;
  fs::path real = fs::canonical(dir, ec);
  if (ec) return "cannot resolve " + dir.string() + ": " + ec.message();
  return real == dir ? "" : check_ancestors(real);
}

// True when `name` in `dir` is, without following it, a folder open_dir would open and accept: ours,
// with read, write and search for us (its owner), and not writable by group or others unless the
// cache is shared on purpose. False says nothing: open_dir then decides (and creates it, or says
// why not), as for any folder of another user.
bool folder_as_expected(int dir, const char* name) {
  struct stat st{};
  if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) return false;
  if (st.st_uid != our_uid() || (st.st_mode & S_IRWXU) != S_IRWXU) return false;
  return cache_shared_on_purpose() || !(st.st_mode & (S_IWGRP | S_IWOTH));
}

}  // namespace

UniqueFd open_regular_file(int dir, const std::string& name, int flags, mode_t mode, const std::string& shown,
                           std::string* problem, struct stat* opened) {
  problem->clear();
  struct stat local{};
  struct stat& st = opened ? *opened : local;
  // Looked at before opening: a device is never opened at all, a FIFO never waited on.
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISREG(st.st_mode)) {
      *problem = shown + " is " + kind_of_file(st.st_mode) + ", not a regular file";
      return {};
    }
  } else if (errno != ENOENT) {
    *problem = "cannot inspect " + shown + ": " + std::strerror(errno);
    return {};
  } else if (!(flags & O_CREAT)) {
    return {};  // missing
  }
  UniqueFd fd(::openat(dir, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode));
  if (!fd) {
    int err = errno;
    if (err == ENOENT && !(flags & O_CREAT)) return {};
    *problem = err == ELOOP ? shown + " is a symbolic link, not a regular file"
                            : "cannot open " + shown + ": " + std::strerror(err);
    return {};
  }
  // What was opened is what counts (it may have been swapped since the look above).
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *problem = shown + " is " + kind_of_file(st.st_mode) + ", not a regular file";
    return {};
  }
  if (!cache_shared_on_purpose() && st.st_uid != our_uid()) {
    *problem = shown + " belongs to another user (uid " + std::to_string(st.st_uid) + ")" + kSharedHint;
    return {};
  }
  // Blocking again for reads and writes (F_SETFL sets only the status flags: O_APPEND, O_NONBLOCK, ...).
  if (::fcntl(fd.get(), F_SETFL, flags & O_APPEND) != 0) {
    *problem = "cannot use " + shown + ": " + std::strerror(errno);
    return {};
  }
  return fd;
}

CacheRoot::CacheRoot(fs::path root, Access access) { open(root, access); }

void CacheRoot::open(const fs::path& root, Access access) {
  std::error_code ec;
  fs::path abs = root.is_absolute() ? root : fs::current_path(ec) / root;
  abs = abs.lexically_normal();
  if (abs.filename().empty() && abs.has_parent_path() && abs != abs.root_path()) abs = abs.parent_path();
  path_ = abs;
  auto refuse = [&](std::string why) {
    problem_ = std::move(why);
    refused_ = true;
  };
  if (access == Access::None) return refuse("the cache is memory-only (cache mode memory-only): nothing is read from or written to " + abs.string());
  const fs::path leaf = abs.filename();
  if (leaf.empty() || leaf == "." || leaf == "..") return refuse(root.string() + " cannot be a cache root");
  const bool read_only = access == Access::ReadOnly;
  const fs::path parent = abs.parent_path();
  const bool trust_checks = !cache_shared_on_purpose();

  struct stat st{};
  // The usual case, a parent that exists with no symbolic link on the way: one lstat a folder checks
  // the chain (the last is the parent's own), and the root is opened by its path (O_NOFOLLOW for its
  // last step; the folders before it were just checked, and only we or root can change them).
  // Anything else takes the longer way below, which creates what is missing and says why a root is
  // refused.
  bool chain_checked = false;
  if (trust_checks) {
    bool saw_link = false, unknown = false;
    std::string why = check_ancestors(parent, &saw_link, &unknown, &st);
    if (!unknown && !why.empty()) return refuse(why);  // the longer way would refuse it with these words too
    chain_checked = !unknown && !saw_link && S_ISDIR(st.st_mode);
  }
  UniqueFd fd;
  if (chain_checked) fd = UniqueFd(::open(abs.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    // Check what exists before creating anything, then make the missing parents (ours, 0700).
    fs::path existing = parent;
    std::vector<fs::path> missing;
    while (::stat(existing.c_str(), &st) != 0) {
      if (errno != ENOENT || existing == existing.root_path())
        return refuse("cannot create " + abs.string() + ": " + std::strerror(errno));
      missing.push_back(existing);
      existing = existing.parent_path();
    }
    if (read_only && !missing.empty())
      return refuse(abs.string() + " does not exist (the cache mode is read-only: nothing is created)");
    if (!S_ISDIR(st.st_mode)) return refuse("cannot create " + abs.string() + ": " + existing.string() + " is not a folder");
    if (trust_checks)
      if (std::string why = check_ancestor_chain(existing); !why.empty()) return refuse(why);
    for (auto it = missing.rbegin(); it != missing.rend(); ++it)
      if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST)
        return refuse("cannot create " + it->string() + ": " + std::strerror(errno));
    if (trust_checks && !missing.empty())
      if (std::string why = check_ancestor_chain(parent); !why.empty()) return refuse(why);

    UniqueFd parent_fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent_fd) return refuse("cannot open " + parent.string() + ": " + std::strerror(errno));
    fd = UniqueFd(::openat(parent_fd.get(), leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd && errno == ENOENT && read_only)
      return refuse(abs.string() + " does not exist (the cache mode is read-only: nothing is created)");
    if (!fd && errno == ENOENT) {
      if (::mkdirat(parent_fd.get(), leaf.c_str(), 0700) != 0 && errno != EEXIST)
        return refuse("cannot create " + abs.string() + ": " + std::strerror(errno));
      fd = UniqueFd(::openat(parent_fd.get(), leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (!fd) {
      int err = errno;
      if (::fstatat(parent_fd.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return refuse(abs.string() + " is a symbolic link: it could be re-pointed under a running program; point "
                      "JITK_CACHE_DIR at the folder itself");
      if (err == ENOTDIR || (err == ELOOP)) return refuse(abs.string() + " is not a folder");
      return refuse("cannot open " + abs.string() + ": " + std::strerror(err));
    }
  }
  if (::fstat(fd.get(), &st) != 0 || !S_ISDIR(st.st_mode)) return refuse(abs.string() + " is not a folder");
  // Another user's folder, or one others may write into, could hand us native code to run.
  if (trust_checks) {
    if (st.st_uid != our_uid())
      return refuse(abs.string() + " belongs to another user (uid " + std::to_string(st.st_uid) + ")" + kSharedHint);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
      return refuse(abs.string() + " is writable by group or others; chmod go-w it" + kSharedHint);
  }
  // index.db is opened later, at its first use; one of another user means the root is not ours alone.
  if (trust_checks)
    for (const char* name : {"index.db", "index.db-wal", "index.db-shm"}) {
      struct stat file{};
      if (::fstatat(fd.get(), name, &file, AT_SYMLINK_NOFOLLOW) == 0 && file.st_uid != our_uid())
        return refuse((abs / name).string() + " belongs to another user (uid " + std::to_string(file.st_uid) + ")" + kSharedHint);
    }
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  if (read_only) {
    read_only_ = true;
    problem_ = "the cache mode is read-only";
    fd_ = std::move(fd);
    return;
  }
  if (::faccessat(fd.get(), ".", W_OK, 0) != 0) {
    int err = errno;
    if ((err == EROFS || err == EACCES) && ::faccessat(fd.get(), ".", R_OK | X_OK, 0) == 0) {
      read_only_ = true;
      problem_ = abs.string() + " is not writable: " + std::strerror(err);
      fd_ = std::move(fd);
      return;
    }
    return refuse(abs.string() + " is not writable: " + std::strerror(err));
  }
  fd_ = std::move(fd);
  // Only now, with the root trusted, is anything made inside it. A folder that is already as
  // open_dir would find it (one fstatat) is not opened; anything else goes through open_dir, which
  // makes it or says why it cannot be used.
  try {
    for (const char* sub : {"blobs", "locks"})
      if (!folder_as_expected(fd_.get(), sub)) open_dir(sub, /*create=*/true);
  } catch (const Error& e) {
    fd_ = UniqueFd();
    return refuse(e.what());
  }
}

std::string CacheRoot::problem() const {
  std::lock_guard lock(problem_mutex_);
  return problem_;
}

bool CacheRoot::still_in_place() {
  if (refused_) return false;
  if (!fd_) return false;
  struct stat st{};
  if (::lstat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == dev_ && st.st_ino == ino_) return true;
  std::string now = ::lstat(path_.c_str(), &st) != 0 ? "it is gone"
                    : S_ISLNK(st.st_mode)            ? "it is now a symbolic link"
                                                     : "it now names another folder";
  {
    std::lock_guard lock(problem_mutex_);
    problem_ = path_.string() + " was moved or replaced while this process ran (" + now +
               "); it is refused for the rest of this process";
  }
  refused_ = true;
  return false;
}

UniqueFd CacheRoot::open_dir(const std::string& rel, bool create, bool* missing) const {
  if (missing) *missing = false;
  if (!fd_ || refused_) throw Error(ErrorCode::CacheIo, "the cache root " + path_.string() + " is not usable");
  if (rel.empty()) {
    UniqueFd copy(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
    if (!copy) throw Error(ErrorCode::CacheIo, "cannot use the cache root " + path_.string() + ": " + std::strerror(errno));
    return copy;
  }
  UniqueFd cur;  // the folder reached so far; the root's own handle until the first step
  auto at_fd = [&] { return cur ? cur.get() : fd_.get(); };
  std::string done;
  std::size_t at = 0;
  while (at < rel.size()) {
    std::size_t slash = rel.find('/', at);
    std::string part = rel.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
    at = slash == std::string::npos ? rel.size() : slash + 1;
    if (part.empty() || part == "." || part == "..")
      throw Error(ErrorCode::Internal, "not a folder name inside the cache: '" + rel + "'");
    done += (done.empty() ? "" : "/") + part;
    UniqueFd next(::openat(at_fd(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next && errno == ENOENT && create) {
      if (::mkdirat(at_fd(), part.c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(ErrorCode::CacheIo, "cannot create " + shown(done).string() + ": " + std::strerror(errno));
      next = UniqueFd(::openat(at_fd(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    struct stat st{};
    if (!next) {
      int err = errno;
      if (err == ENOENT && missing) {
        *missing = true;
        return {};
      }
      if (::fstatat(at_fd(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
        throw Error(ErrorCode::CacheIo, shown(done).string() + " is " + kind_of_file(st.st_mode) + ", not a folder");
      throw Error(ErrorCode::CacheIo, "cannot open " + shown(done).string() + ": " + std::strerror(err));
    }
    if (::fstat(next.get(), &st) != 0)
      throw Error(ErrorCode::CacheIo, "cannot inspect " + shown(done).string() + ": " + std::strerror(errno));
    if (!cache_shared_on_purpose()) {
      if (st.st_uid != our_uid())
        throw Error(ErrorCode::CacheIo, shown(done).string() + " belongs to another user (uid " +
                                            std::to_string(st.st_uid) + ")" + kSharedHint);
      if (st.st_mode & (S_IWGRP | S_IWOTH))
        throw Error(ErrorCode::CacheIo, shown(done).string() + " is writable by group or others; chmod go-w it" + kSharedHint);
    }
    cur = std::move(next);
  }
  return cur;
}

bool CacheRoot::can_pin() {
  static const bool ok = [] {
    struct stat a{}, b{};
    UniqueFd probe(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!probe) return false;
    const std::string link = "/proc/self/fd/" + std::to_string(probe.get());
    return ::stat(link.c_str(), &a) == 0 && ::stat("/", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  }();
  return ok;
}

std::string CacheRoot::pinned(const std::string& rel) const {
  if (!fd_ || !can_pin()) return shown(rel).string();
  std::string p = "/proc/self/fd/" + std::to_string(fd_.get());
  return rel.empty() ? p : p + "/" + rel;
}

std::string prepare_cache_root(const fs::path& root, bool* read_only) {
  CacheRoot r(root);
  if (read_only) *read_only = r.read_only();
  return r.problem();
}

}  // namespace jit::detail
