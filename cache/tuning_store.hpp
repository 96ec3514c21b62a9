// Autotuning decisions, kept in their own table of the disk cache's index file.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cache/sqlite_index.hpp"

namespace jit::detail {

// Decisions are kept beside the artifacts (they are exported, imported and cleared with them),
// but they are not artifacts: no tier holds them and no get reads them.
class TuningStore {
 public:
  // open_index: the index holding the decisions, opened at first use; throws Error{CacheIo} when
  // there is none (the cache is not on disk), and decisions then last only for this process.
  // on_busy: told when the index was busy past the lock timeout (CacheBusy), so that the cache
  // goes to memory and no later decision waits again; find and store then say "none" and "not kept".
  explicit TuningStore(std::function<SqliteIndex&()> open_index,
                       std::function<void(const std::string&)> on_busy = {});

  // nullopt when none was stored, or the cache is not on disk.
  std::optional<TuningRow> find(const std::string& kernel, const std::string& base_params,
                                const std::string& shape_class, const std::string& device) const;
  // Whether it was kept (false when the cache is not on disk, or read-only).
  bool store(const TuningRow& row) const;
  // Throws Error{CacheIo} when the cache is not on disk.
  std::vector<TuningRow> rows() const;
  // Removes every decision (jitk clear: what was measured goes with what was built); how many.
  std::int64_t clear() const;

 private:
  SqliteIndex* index_or_null() const;
  std::function<SqliteIndex&()> open_index_;
  std::function<void(const std::string&)> on_busy_;
};

}  // namespace jit::detail
