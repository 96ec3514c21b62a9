// Blobs on disk: blobs/<2 hex>/<key>, a header that names what they are, written atomically,
// reached only through the cache root's verified handle.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/artifact_meta.hpp"
#include "cache/blob_format.hpp"
#include "cache/cache_root.hpp"

namespace jit::detail {

struct BlobRead {
  // Outdated: a blob of another format, a miss to rebuild. Damaged: anything else that does not
  // verify, including a blob bound to another key or kernel, and a FIFO or device in its place.
  enum class Status { Ok, Missing, Outdated, Damaged } status = Status::Missing;
  std::vector<char> payload;
  std::string checksum;  // of the payload, when Ok
  BlobHeader header;     // when Ok
  std::string problem;   // why it is damaged or outdated
};

class BlobStore {
 public:
  explicit BlobStore(std::shared_ptr<CacheRoot> root);
  // Opens the root itself (tests, tools); a root that cannot be used makes every call fail.
  explicit BlobStore(const std::filesystem::path& root);
  // For messages and tests: where key's blob is (never opened by this path).
  std::filesystem::path path_for(const std::string& key) const;
  // Writes to a temp file, fsyncs, renames into place: readers see the whole blob or none. The
  // header binds the payload to key and meta. Returns the payload checksum. Throws Error{CacheIo}.
  std::string write(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload) const;
  // Writes a whole blob (header and payload, as read_whole returns it and a pack carries it) as it
  // is, the same way, after checking it is whole and bound to key (and to expect's kernel, params,
  // backend, target, compiler and implementation when given). Returns its header, whose payload
  // size and checksum the index row takes. Throws Error{CacheIo}.
  BlobHeader write_bound(const std::string& key, const std::vector<char>& blob, const ArtifactMeta* expect = nullptr) const;
  // Reads and verifies header, size, checksum and binding: its key must be `key`, and when expect
  // is given, its kernel, params, backend, arch, compiler and implementation must be expect's.
  BlobRead read(const std::string& key, const ArtifactMeta* expect = nullptr) const;
  // The blob file as it is (header and payload), verified and bound to key: what a pack carries.
  std::optional<std::vector<char>> read_whole(const std::string& key) const;
  bool exists(const std::string& key) const;
  bool remove(const std::string& key) const;
  std::int64_t size_on_disk(const std::string& key) const;
  // Keys of every blob present (temp files skipped).
  std::vector<std::string> keys() const;
  // Removes temp files left by writers that died; returns how many.
  int remove_stale_temp_files() const;

 private:
  // The folder blobs/<2 hex> of key; invalid when missing (and not create).
  UniqueFd folder_of(const std::string& key, bool create) const;
  // Calls fn with each folder blobs/<2 hex> that is one of ours (opened through the root's handle).
  void for_each_blob_folder(const std::function<void(int dir, const std::string& prefix)>& fn) const;
  // Writes head then body as key's blob: temp file, fsync, rename into place.
  void write_file(const std::string& key, std::string_view head, std::string_view body) const;
  BlobRead read_file(const std::string& key, const ArtifactMeta* expect, std::vector<char>* whole) const;
  std::shared_ptr<CacheRoot> root_;
};

}  // namespace jit::detail
