// Memos (support/memo_store.hpp) kept as small files in one folder beneath the cache root, read and
// written through the root's verified handle.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cache/cache_root.hpp"
#include "support/memo_store.hpp"

namespace jit::detail {

// Files are opened with openat and O_NOFOLLOW in a folder opened through the root's handle (each
// component a folder of ours), and only when a regular file of ours: a symlink, FIFO or device in a
// memo's place, or another user's file, is no memo. Written to a temp file and renamed into place.
class MemoFolder final : public MemoStore {
 public:
  // folder: "" for the root itself, else a name beneath it ("toolkit-headers"). writable: false for
  // a read-only cache (writes then do nothing).
  MemoFolder(std::shared_ptr<CacheRoot> root, std::string folder, bool writable);
  std::optional<std::string> read(const std::string& name, std::size_t max_bytes) const override;
  bool write(const std::string& name, std::string_view text) const override;
  // Removes every memo (and leftover temp file) in the folder; how many.
  int remove_all() const;
  // The names of at most `limit` memos in the folder (plain memo names only; no temp files).
  std::vector<std::string> names(std::size_t limit) const;
  // Takes memo `name` away: renamed aside first (of processes taking the same memo, one gets it),
  // then read and removed. nullopt when it is gone, not a regular file of ours (it is removed all
  // the same; a folder is left alone), or larger than max_bytes (removed too). A read-only cache
  // takes nothing.
  std::optional<std::string> take(const std::string& name, std::size_t max_bytes) const;

 private:
  std::shared_ptr<CacheRoot> root_;
  std::string folder_;
  bool writable_;
};

// Whether `name` can name a memo: a plain file name (no '/', not starting with '.', not empty, at
// most 200 characters).
bool is_memo_name(const std::string& name);

}  // namespace jit::detail
