// Atomic, checksummed blob files.
#include "cache/blob_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "cache/cache_key.hpp"
#include "jit/error.hpp"

namespace jit::detail {
namespace {

constexpr char kMagic[8] = {'J', 'I', 'T', 'K', 'B', 'L', 'O', 'B'};
constexpr std::size_t kKeyChars = 32;
// How old a temp file must be before it counts as left behind by a dead writer.
constexpr auto kStaleTempAge = std::chrono::minutes(10);

struct BlobHeader {
  char magic[8];
  std::uint32_t format;
  std::uint32_t header_size;
  std::uint64_t payload_size;
  char key[kKeyChars];
  char checksum[kKeyChars];
};
static_assert(sizeof(BlobHeader) == 88);

bool is_key(const std::string& s) {
  if (s.size() != kKeyChars) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

BlobStore::BlobStore(std::filesystem::path root) : blobs_(std::move(root) / "blobs") {}

std::filesystem::path BlobStore::path_for(const std::string& key) const {
  if (!is_key(key)) throw Error(ErrorCode::Internal, "not a cache key: '" + key + "'");
  return blobs_ / key.substr(0, 2) / key;
}

std::string BlobStore::write(const std::string& key, const std::vector<char>& payload) const {
  auto final_path = path_for(key);
  auto dir = final_path.parent_path();
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error(ErrorCode::CacheIo, "cannot create " + dir.string() + ": " + std::strerror(errno));

  static std::atomic<unsigned> counter{0};
  auto temp = dir / ("." + key + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++));
  BlobHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.format = kBlobFormatVersion;
  h.header_size = sizeof(BlobHeader);
  h.payload_size = payload.size();
  std::memcpy(h.key, key.data(), kKeyChars);
  std::string sum = checksum_hex(payload.data(), payload.size());
  std::memcpy(h.checksum, sum.data(), kKeyChars);

  auto fail = [&](const std::string& what) {
    int err = errno;
    ::unlink(temp.c_str());
    throw Error(ErrorCode::CacheIo, what + " " + temp.string() + ": " + std::strerror(err));
  };
  {
    Fd f{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
    if (f.fd < 0) fail("cannot create");
    if (!write_all(f.fd, &h, sizeof h) || !write_all(f.fd, payload.data(), payload.size())) fail("cannot write");
    if (::fsync(f.fd) != 0) fail("cannot fsync");
  }
  if (::rename(temp.c_str(), final_path.c_str()) != 0) fail("cannot rename into place");
  Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd >= 0) ::fsync(d.fd);
  return sum;
}

BlobRead BlobStore::read(const std::string& key) const {
  BlobRead r;
  std::ifstream in(path_for(key), std::ios::binary | std::ios::ate);
  if (!in) return r;  // Missing
  auto damaged = [&](std::string why) {
    r.status = BlobRead::Status::Damaged;
    r.problem = std::move(why);
    r.payload.clear();
    return r;
  };
  auto size = static_cast<std::uint64_t>(in.tellg());
  if (size < sizeof(BlobHeader)) return damaged("truncated: " + std::to_string(size) + " bytes, shorter than its header");
  in.seekg(0);
  BlobHeader h{};
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return damaged("not a jitk blob (bad magic)");
  if (h.format != kBlobFormatVersion)
    return damaged("format version " + std::to_string(h.format) + ", expected " + std::to_string(kBlobFormatVersion));
  if (h.header_size != sizeof(BlobHeader)) return damaged("unexpected header size");
  if (std::string(h.key, kKeyChars) != key) return damaged("holds key " + std::string(h.key, kKeyChars));
  if (h.payload_size != size - sizeof(BlobHeader))
    return damaged("size " + std::to_string(size - sizeof(BlobHeader)) + " bytes, header says " + std::to_string(h.payload_size));
  r.payload.resize(h.payload_size);
  in.read(r.payload.data(), static_cast<std::streamsize>(h.payload_size));
  if (!in) return damaged("read failed");
  r.checksum = checksum_hex(r.payload.data(), r.payload.size());
  if (r.checksum != std::string(h.checksum, kKeyChars)) return damaged("checksum mismatch (contents changed on disk)");
  r.status = BlobRead::Status::Ok;
  return r;
}

bool BlobStore::remove(const std::string& key) const {
  std::error_code ec;
  return std::filesystem::remove(path_for(key), ec);
}

std::int64_t BlobStore::size_on_disk(const std::string& key) const {
  std::error_code ec;
  auto n = std::filesystem::file_size(path_for(key), ec);
  return ec ? 0 : static_cast<std::int64_t>(n);
}

std::vector<std::string> BlobStore::keys() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(blobs_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    auto name = it->path().filename().string();
    // A key file outside its own 2-hex folder is never loaded (path_for would not find it).
    if (is_key(name) && it->path().parent_path().filename() == name.substr(0, 2)) out.push_back(name);
  }
  return out;
}

int BlobStore::remove_stale_temp_files() const {
  int removed = 0;
  std::error_code ec;
  auto now = std::filesystem::file_time_type::clock::now();
  for (auto it = std::filesystem::recursive_directory_iterator(blobs_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    auto name = it->path().filename().string();
    if (name.rfind('.', 0) != 0 || name.find(".tmp.") == std::string::npos) continue;
    auto age = now - std::filesystem::last_write_time(it->path(), ec);
    if (!ec && age > kStaleTempAge && std::filesystem::remove(it->path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace jit::detail
