// Reading and writing autotuning decisions in the index's tuning table.
#include "cache/tuning_store.hpp"

#include "cache/file_lock.hpp"
#include "jit/error.hpp"

namespace jit::detail {

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
  try {
    return idx ? idx->find_tuning(kernel, base_params, shape_class, device) : std::nullopt;
  } catch (const CacheBusy& e) {
    if (on_busy_) on_busy_(e.what());
    return std::nullopt;
  }
}

bool TuningStore::store(const TuningRow& row) const {
  SqliteIndex* idx = index_or_null();
  if (!idx) return false;
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
