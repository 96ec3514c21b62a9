// Memos (support/memo_store.hpp) kept as small files in one folder beneath the cache root, read and
// written through the root's verified handle.
#pragma once
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "cache/cache_root.hpp"
#include "support/memo_store.hpp"

namespace jit::detail {

class TakenMemos;

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
  // Takes at most `limit` memos of the folder away, the folder opened once: each is renamed aside
  // first (of processes taking the same memo, one gets it), then read. Each comes back as (name,
  // text), the text nullopt when it was not a regular file of ours or larger than max_bytes; a folder
  // in a memo's place is left alone. They are removed by TakenMemos::release() once what they said is
  // recorded, and put back under their names when it is not (the taker failed). Files renamed aside
  // by a taker that died, and temp files of a writer that died, are removed once an hour old. A
  // read-only cache takes nothing.
  TakenMemos take_all(std::size_t limit, std::size_t max_bytes) const;

 private:
  std::shared_ptr<CacheRoot> root_;
  std::string folder_;
  bool writable_;
};

// Memos taken away by MemoFolder::take_all, each renamed aside until release() removes them; not
// released, the destructor renames each back under its name (for the next taker).
class TakenMemos {
 public:
  struct Memo {
    std::string name;
    std::optional<std::string> text;
  };
  TakenMemos() = default;
  TakenMemos(TakenMemos&&) noexcept = default;
  TakenMemos& operator=(TakenMemos&&) = delete;
  ~TakenMemos();
  const std::vector<Memo>& memos() const { return memos_; }
  // Removes the taken files: what they said is accounted for.
  void release();

 private:
  friend class MemoFolder;
  UniqueFd dir_;
  std::vector<Memo> memos_;
  std::vector<std::string> aside_;  // memos_[i]'s name while taken
};

// Whether `name` can name a memo: a plain file name (no '/', not starting with '.', not empty, at
// most 200 characters).
bool is_memo_name(const std::string& name);

}  // namespace jit::detail
