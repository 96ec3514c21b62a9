// Reading and writing autotuning decisions in the index's tuning table.
#include "cache/tuning_store.hpp"

#include <chrono>

#include "cache/file_lock.hpp"
#include "jit/error.hpp"
#include "support/logging.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace


TuningStore::TuningStore(std::function<SqliteIndex&()> open_index, std::function<void(const std::string&)> on_busy)
    : open_index_(std::move(open_index)), on_busy_(std::move(on_busy)) {}

SqliteIndex* TuningStore::index_or_null() const {
  try {
    return &open_index_();
  } catch (const Error& e) {
    if (e.code() == ErrorCode::CacheIo) return nullptr;  // not on disk: the caller says what that means
    throw;
  }
}

std::optional<TuningRow> TuningStore::find(const std::string& kernel, const std::string& base_params,
                                           const std::string& shape_class, const std::string& device) const {
  SqliteIndex* idx = index_or_null();
  std::optional<TuningRow> row;
  try {
    row = idx ? idx->find_tuning(kernel, base_params, shape_class, device) : std::nullopt;
  } catch (const CacheBusy& e) {
    if (on_busy_) on_busy_(e.what());
    return std::nullopt;
  }
  if (row) {
    if (auto why = tuning_row_problem(*row, now_seconds()); !why.empty()) {
      warn_once("tuning-row-bad", "an autotuning decision in the cache index is not used (" + why + "); tuning again");
      return std::nullopt;
    }
  }
  return row;
}

bool TuningStore::store(const TuningRow& row) const {
  SqliteIndex* idx = index_or_null();
  if (!idx) return false;
  if (auto why = tuning_row_problem(row, now_seconds()); !why.empty())
    throw Error(ErrorCode::InvalidArgument, "an autotuning decision for " + printable(row.kernel) + " is not kept: " + why);
  try {
    idx->store_tuning(row);
  } catch (const CacheBusy& e) {
    if (on_busy_) on_busy_(e.what());
    return false;
  }
  return true;
}

std::vector<TuningRow> TuningStore::rows() const { return open_index_().tuning_rows(); }

std::int64_t TuningStore::clear() const { return open_index_().remove_tuning(); }

}  // namespace jit::detail
