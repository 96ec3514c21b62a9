// Autotuning decisions, kept in their own table of the disk cache's index file.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cache/sqlite_index.hpp"

namespace jit::detail {

// Why a decision is not one to keep or use ("" when it is): field by field, so that a row from a
// pack or a damaged index (a creation date of 1e300, a negative or NaN time, a count of billions,
// text with control characters) is refused with its field named. `now`: seconds since the epoch.
std::string tuning_row_problem(const TuningRow& row, std::int64_t now);

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
  // A stored row that tuning_row_problem refuses is not found (it is tuned again and replaced).
  // Whether it was kept (false when the cache is not on disk, or read-only); a row that
  // tuning_row_problem refuses throws Error{InvalidArgument}.
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
