// Atomic, self-describing blob files, reached through the cache root's handle.
#include "cache/blob_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include "cache/cache_key.hpp"
#include "jit/error.hpp"
#include "support/regular_file.hpp"

namespace jit::detail {
namespace {

// How old a temp file must be before it counts as left behind by a dead writer.
constexpr auto kStaleTempAge = std::chrono::minutes(10);

// The names in a folder (not . and ..), read through its handle.
std::vector<std::string> names_in(int dir) {
  std::vector<std::string> out;
  int copy = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return out;
  DIR* d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return out;
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(std::move(name));
  }
  ::closedir(d);
  return out;
}

bool is_prefix_folder(const std::string& s) {
  return s.size() == 2 && is_cache_key(s + std::string(30, '0'));
}

}  // namespace

BlobStore::BlobStore(std::shared_ptr<CacheRoot> root) : root_(std::move(root)) {}
BlobStore::BlobStore(const std::filesystem::path& root) : root_(std::make_shared<CacheRoot>(root)) {}

std::filesystem::path BlobStore::path_for(const std::string& key) const {
  if (!is_cache_key(key)) throw Error(ErrorCode::Internal, "not a cache key: '" + key + "'");
  return root_->shown("blobs") / key.substr(0, 2) / key;
}

UniqueFd BlobStore::folder_of(const std::string& key, bool create) const {
  path_for(key);  // throws for what is not a key
  bool missing = false;
  return root_->open_dir("blobs/" + key.substr(0, 2), create, create ? nullptr : &missing);
}

std::string BlobStore::write(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload) const {
  const std::string header = encode_blob_header(key, meta, std::string_view(payload.data(), payload.size()));
  write_file(key, header, std::string_view(payload.data(), payload.size()));
  return header.substr(kBlobPayloadChecksumAt, kBlobChecksumChars);  // the payload checksum the header holds
}

BlobHeader BlobStore::write_bound(const std::string& key, const std::vector<char>& blob, const ArtifactMeta* expect) const {
  BlobHeader h;
  std::string why = check_blob_binding(std::string_view(blob.data(), blob.size()), key, &h);
  if (why.empty()) why = binding_mismatch(h, key, expect);
  if (!why.empty()) throw Error(ErrorCode::CacheIo, "the blob for " + key + " is not the artifact it is stored as: " + why);
  write_file(key, {}, std::string_view(blob.data(), blob.size()));
  return h;
}

void BlobStore::write_file(const std::string& key, std::string_view header, std::string_view payload) const {
  UniqueFd dir = folder_of(key, /*create=*/true);
  static std::atomic<unsigned> counter{0};
  const std::string temp = "." + key + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const std::string shown = (path_for(key).parent_path() / temp).string();

  auto fail = [&](const std::string& what) {
    int err = errno;
    ::unlinkat(dir.get(), temp.c_str(), 0);
    throw Error(ErrorCode::CacheIo, what + " " + shown + ": " + std::strerror(err));
  };
  {
    UniqueFd f(::openat(dir.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!f) fail("cannot create");
    if (!write_all(f.get(), header.data(), header.size()) || !write_all(f.get(), payload.data(), payload.size()))
      fail("cannot write");
    if (::fsync(f.get()) != 0) fail("cannot fsync");
  }
  if (::renameat(dir.get(), temp.c_str(), dir.get(), key.c_str()) != 0) fail("cannot rename into place");
  ::fsync(dir.get());
}

BlobRead BlobStore::read_file(const std::string& key, const ArtifactMeta* expect, std::vector<char>* whole) const {
  BlobRead r;
  auto fail = [&](BlobRead::Status status, std::string why) {
    r.status = status;
    r.problem = std::move(why);
    r.payload.clear();
    return r;
  };
  auto damaged = [&](std::string why) { return fail(BlobRead::Status::Damaged, std::move(why)); };
  UniqueFd dir;
  try {
    dir = folder_of(key, /*create=*/false);
  } catch (const Error& e) {
    return damaged(e.what());
  }
  if (!dir) return r;  // Missing
  std::string problem;
  struct stat st{};
  UniqueFd f = open_regular_file(dir.get(), key, O_RDONLY, 0, path_for(key).string(), &problem, &st);
  if (!f) return problem.empty() ? r : damaged(problem);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > kMaxBlobHeader + kMaxBlobPayload) return damaged("size " + std::to_string(size) + " bytes, larger than any blob");
  std::vector<char> bytes(size);
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(f.get(), bytes.data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return damaged(n < 0 ? std::string("read failed: ") + std::strerror(errno) : "shorter than its size");
    got += static_cast<std::size_t>(n);
  }
  const std::string_view view(bytes.data(), bytes.size());
  BlobHeader h;
  switch (parse_blob_header(view, &h, &problem)) {
    case HeaderStatus::Ok: break;
    case HeaderStatus::Outdated: return fail(BlobRead::Status::Outdated, problem);
    case HeaderStatus::Damaged: return damaged(problem);
  }
  if (h.payload_size != size - h.header_size)
    return damaged("size " + std::to_string(size - h.header_size) + " bytes, header says " + std::to_string(h.payload_size));
  if (checksum_hex(bytes.data() + h.header_size, size - h.header_size) != h.payload_checksum)
    return damaged("checksum mismatch (contents changed on disk)");
  if (std::string why = binding_mismatch(h, key, expect); !why.empty()) return damaged(why);
  r.checksum = h.payload_checksum;
  if (whole) {
    *whole = std::move(bytes);
  } else {
    bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(h.header_size));
    r.payload = std::move(bytes);
  }
  r.header = std::move(h);
  r.status = BlobRead::Status::Ok;
  return r;
}

BlobRead BlobStore::read(const std::string& key, const ArtifactMeta* expect) const { return read_file(key, expect, nullptr); }

std::optional<std::vector<char>> BlobStore::read_whole(const std::string& key) const {
  std::vector<char> whole;
  if (read_file(key, nullptr, &whole).status != BlobRead::Status::Ok) return std::nullopt;
  return whole;
}

bool BlobStore::exists(const std::string& key) const {
  try {
    UniqueFd dir = folder_of(key, false);
    struct stat st{};
    return dir && ::fstatat(dir.get(), key.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  } catch (const Error&) {
    return false;
  }
}

bool BlobStore::remove(const std::string& key) const {
  try {
    UniqueFd dir = folder_of(key, false);
    return dir && ::unlinkat(dir.get(), key.c_str(), 0) == 0;
  } catch (const Error&) {
    return false;
  }
}

std::int64_t BlobStore::size_on_disk(const std::string& key) const {
  try {
    UniqueFd dir = folder_of(key, false);
    struct stat st{};
    if (!dir || ::fstatat(dir.get(), key.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return 0;
    return static_cast<std::int64_t>(st.st_size);
  } catch (const Error&) {
    return 0;
  }
}

void BlobStore::for_each_blob_folder(const std::function<void(int dir, const std::string& prefix)>& fn) const {
  try {
    UniqueFd blobs = root_->open_dir("blobs", false);
    for (const auto& prefix : names_in(blobs.get())) {
      if (!is_prefix_folder(prefix)) continue;
      UniqueFd dir;
      try {
        dir = root_->open_dir("blobs/" + prefix, false);
      } catch (const Error&) {
        continue;  // not a folder of ours: nothing in it is ever loaded
      }
      fn(dir.get(), prefix);
    }
  } catch (const Error&) {
  }
}

std::vector<std::string> BlobStore::keys() const {
  std::vector<std::string> out;
  for_each_blob_folder([&](int dir, const std::string& prefix) {
    for (const auto& name : names_in(dir)) {
      struct stat st{};
      // A key file outside its own 2-hex folder is never loaded (path_for would not find it).
      // A FIFO or device under a key's name is listed: verify reports it.
      if (is_cache_key(name) && name.compare(0, 2, prefix) == 0 &&
          ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
        out.push_back(name);
    }
  });
  return out;
}

int BlobStore::remove_stale_temp_files() const {
  int removed = 0;
  const auto now = std::chrono::system_clock::now();
  for_each_blob_folder([&](int dir, const std::string&) {
    for (const auto& name : names_in(dir)) {
      if (name.rfind('.', 0) != 0 || name.find(".tmp.") == std::string::npos) continue;
      struct stat st{};
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      auto modified = std::chrono::system_clock::from_time_t(st.st_mtime);
      if (now - modified > kStaleTempAge && ::unlinkat(dir, name.c_str(), 0) == 0) ++removed;
    }
  });
  return removed;
}

}  // namespace jit::detail
