// Blobs on disk: blobs/<2 hex>/<key>, a header with the key and checksum, written atomically.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace jit::detail {

struct BlobRead {
  enum class Status { Ok, Missing, Damaged } status = Status::Missing;
  std::vector<char> payload;
  std::string checksum;  // of the payload, when Ok
  std::string problem;   // why it is damaged
};

class BlobStore {
 public:
  explicit BlobStore(std::filesystem::path root);
  std::filesystem::path path_for(const std::string& key) const;
  // Writes to a temp file, fsyncs, renames into place: readers see the whole blob or none.
  // Returns the payload checksum. Throws Error{CacheIo} (disk full, read-only, ...).
  std::string write(const std::string& key, const std::vector<char>& payload) const;
  // Reads and verifies header, size and checksum.
  BlobRead read(const std::string& key) const;
  bool remove(const std::string& key) const;
  std::int64_t size_on_disk(const std::string& key) const;
  // Keys of every blob present (temp files skipped).
  std::vector<std::string> keys() const;
  // Removes temp files left by writers that died; returns how many.
  int remove_stale_temp_files() const;

 private:
  std::filesystem::path blobs_;
};

}  // namespace jit::detail
