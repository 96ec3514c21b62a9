// Loading, storing, clearing and verifying artifacts on disk.
#include "cache/disk_tier.hpp"

#include <chrono>
#include <cstdlib>
#include <set>

#include "cache/cache_root.hpp"
#include "jit/error.hpp"
#include "support/logging.hpp"

namespace jit::detail {
namespace {
std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Every field given (-Wmissing-field-initializers names one left out); the meta's come whole.
IndexRow row_of(const std::string& key, const ArtifactMeta& meta, std::int64_t size, const std::string& checksum) {
  const std::int64_t now = now_seconds();
  return {meta, key, size, checksum, /*created=*/now, /*last_used=*/now, /*hits=*/0};
}
}  // namespace

DiskTier::DiskTier(std::filesystem::path root, std::optional<std::int64_t> size_limit, std::string name)
    : root_(std::move(root)), name_(std::move(name)), blobs_(root_), size_limit_(size_limit) {
  std::string problem = prepare_cache_root(root_, &read_only_);
  if (read_only_) {
    root_ok_ = true;
    unavailable_ = problem;
    warn_once("cache-root", "kernel cache is read-only (" + problem +
                                "): kernels found there are used, new ones are kept in memory only. Point "
                                "JITK_CACHE_DIR at a writable folder of your own to keep them.");
    return;
  }
  if (!problem.empty()) {
    disable(problem);
    return;
  }
  root_ok_ = true;
}

void DiskTier::disable(const std::string& problem) {
  root_ok_ = false;
  unavailable_ = problem;
  warn_once("cache-root", "kernel cache disabled, kernels are kept in memory only: " + problem +
                              ". Free space on its disk, fix its ownership or permissions, or point JITK_CACHE_DIR at another folder of your own.");
}

DiskTier::~DiskTier() {
  flush_pending();
}

SqliteIndex* DiskTier::index_or_null() {
  // Opening takes ~0.3 ms (more when it repairs): a process that only hits the cache pays it at
  // exit, when it writes its hit counts.
  std::call_once(index_opened_, [this] {
    if (!root_ok_ || read_only_) return;
    try {
      std::string repaired;
      index_ = std::make_unique<SqliteIndex>(root_ / "index.db", &repaired);
      if (!repaired.empty()) log().warn("{}", repaired);
    } catch (const Error& e) {
      disable(e.what());
    }
  });
  return index_.get();
}

SqliteIndex& DiskTier::index() {
  SqliteIndex* idx = index_or_null();
  if (!idx) throw Error(ErrorCode::CacheIo, "the kernel cache at " + root_.string() + " is not usable: " + unavailable_);
  return *idx;
}

bool DiskTier::on_disk() { return index_or_null() != nullptr; }

std::string DiskTier::unavailable_reason() {
  index_or_null();
  return unavailable_;
}

void DiskTier::flush_pending() {
  std::vector<IndexRow> hits;
  std::int64_t misses;
  {
    std::lock_guard lock(pending_mutex_);
    hits.swap(pending_hits_);
    misses = pending_misses_;
    pending_misses_ = 0;
  }
  if (hits.empty() && misses == 0) return;
  SqliteIndex* idx = index_or_null();
  if (!idx) return;
  try {
    auto shared = maintenance_lock(FileLock::Mode::Shared);
    // A clear in another process may have removed a blob since it was read: count the hit, but
    // do not restore a row for a blob that is gone.
    std::erase_if(hits, [&](const IndexRow& h) {
      std::error_code ec;
      return !std::filesystem::exists(blobs_.path_for(h.key), ec);
    });
    if (std::int64_t restored = idx->record_hits(hits, misses); restored > 0)
      warn_once("cache-rows-restored", "cache: index.db had no row for " + std::to_string(restored) +
                                           " verified artifact(s) in use; their rows are restored");
  } catch (const Error& e) {
    warn_once("cache-hits", std::string("kernel cache: could not record hit counts: ") + e.what());
  }
}

std::optional<std::vector<char>> DiskTier::get(const std::string& key, const ArtifactMeta& meta, Count count) {
  if (!root_ok_) return std::nullopt;
  const bool count_miss = count == Count::HitsAndMisses;
  BlobRead blob = blobs_.read(key);
  if (blob.status == BlobRead::Status::Ok) {
    if (count == Count::Nothing) return std::move(blob.payload);
    std::lock_guard lock(pending_mutex_);
    pending_hits_.push_back(row_of(key, meta, static_cast<std::int64_t>(blob.payload.size()), blob.checksum));
    return std::move(blob.payload);
  }
  std::string problem;
  if (blob.status == BlobRead::Status::Damaged) {
    problem = "its blob is damaged: " + blob.problem;
    forget_pending_hits(key);
    blobs_.remove(key);
  } else if (count_miss) {
    // A miss is the rare path: worth one look at the index for a row whose blob went missing.
    if (SqliteIndex* idx = index_or_null()) {
      try {
        if (idx->find(key)) problem = "its blob is missing";
      } catch (const Error&) {
      }
    }
  }
  if (!problem.empty()) {
    log().warn("cache: artifact {} ({} {}) not loaded, {}; dropping it and rebuilding", key, meta.kernel, meta.params,
               problem);
    if (SqliteIndex* idx = index_or_null()) {
      try {
        idx->remove(key);
      } catch (const Error&) {
      }
    }
  }
  if (count_miss) {
    std::lock_guard lock(pending_mutex_);
    ++pending_misses_;
  }
  return std::nullopt;
}

std::optional<std::vector<char>> DiskTier::read_verified(const std::string& key) {
  if (!root_ok_) return std::nullopt;
  BlobRead blob = blobs_.read(key);
  if (blob.status != BlobRead::Status::Ok) return std::nullopt;
  return std::move(blob.payload);
}

bool DiskTier::put(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload,
                   PutReason why) {
  SqliteIndex* idx = root_ok_ && !read_only_ ? index_or_null() : nullptr;
  if (!idx) return false;
  try {
    {
      auto shared = maintenance_lock(FileLock::Mode::Shared);
      std::string checksum = blobs_.write(key, payload);
      idx->insert(row_of(key, meta, static_cast<std::int64_t>(payload.size()), checksum), /*count_compile=*/why == PutReason::Compiled);
    }
    flush_pending();
    if (size_limit_ && idx->total_bytes() > *size_limit_) {
      auto freed = prune(size_limit_, std::nullopt, key);
      log().info("cache: over JITK_CACHE_MAX_SIZE ({} bytes): evicted {} least recently used artifacts ({} bytes)",
                 *size_limit_, freed.entries, freed.bytes);
    }
    return true;
  } catch (const Error& e) {
    warn_once("cache-store", std::string("kernel cache write failed, keeping kernels in memory only: ") + e.what() +
                                 ". Free disk space or point JITK_CACHE_DIR at a writable folder.");
    return false;
  }
}

bool DiskTier::has_valid_blob(const std::string& key) {
  return root_ok_ && blobs_.read(key).status == BlobRead::Status::Ok;
}

void DiskTier::forget_pending_hits(const std::string& key) {
  std::lock_guard lock(pending_mutex_);
  std::erase_if(pending_hits_, [&](const IndexRow& r) { return r.key == key; });
}

void DiskTier::remove(const std::string& key) {
  if (!root_ok_) return;
  forget_pending_hits(key);
  blobs_.remove(key);
  if (SqliteIndex* idx = index_or_null()) {
    try {
      idx->remove(key);
    } catch (const Error& e) {
      warn_once("cache-drop", std::string("kernel cache: could not drop a bad artifact: ") + e.what());
    }
  }
}

std::unique_ptr<FileLock> DiskTier::lock(const std::string& key) {
  if (!root_ok_ || read_only_) return nullptr;
  try {
    return std::make_unique<FileLock>(root_ / "locks" / (key + ".lock"));
  } catch (const Error& e) {
    warn_once("cache-lock", std::string("kernel cache lock failed, compiling without cross-process locking: ") + e.what());
    return nullptr;
  }
}

std::unique_ptr<FileLock> DiskTier::maintenance_lock(FileLock::Mode mode) {
  if (!root_ok_ || read_only_) return nullptr;
  try {
    return std::make_unique<FileLock>(root_ / "locks" / "maintenance.lock", mode);
  } catch (const Error& e) {
    warn_once("cache-maintenance-lock", std::string("kernel cache: maintenance lock failed: ") + e.what());
    return nullptr;
  }
}

std::vector<IndexRow> DiskTier::rows() {
  flush_pending();
  return index().rows();
}

IndexCounters DiskTier::counters() {
  flush_pending();
  return index().counters();
}

std::int64_t DiskTier::bytes() {
  std::int64_t total = 0;
  for (const auto& k : blobs_.keys()) total += blobs_.size_on_disk(k);
  return total;
}

TierStats DiskTier::stats() {
  TierStats s;
  s.entries = static_cast<std::int64_t>(rows().size());
  s.bytes = bytes();
  IndexCounters c = counters();
  s.hits = c.hits;
  s.misses = c.misses;
  s.compiles = c.compiles;
  return s;
}

DiskTier::Cleared DiskTier::clear() {
  Cleared c;
  auto& idx = index();
  flush_pending();
  auto exclusive = maintenance_lock(FileLock::Mode::Exclusive);
  for (const auto& k : blobs_.keys()) {
    c.bytes += blobs_.size_on_disk(k);
    if (blobs_.remove(k)) ++c.entries;
  }
  std::int64_t rows = idx.remove_all();
  if (rows > c.entries) c.entries = rows;
  blobs_.remove_stale_temp_files();
  return c;
}

std::int64_t DiskTier::evict(const IndexRow& row) {
  forget_pending_hits(row.key);
  std::int64_t size = blobs_.size_on_disk(row.key);
  blobs_.remove(row.key);
  index().remove(row.key);
  return size;
}

DiskTier::Cleared DiskTier::clear_kernel(const std::string& kernel) {
  return clear_where([&](const IndexRow& row) { return row.kernel == kernel; });
}

DiskTier::Cleared DiskTier::clear_where(const std::function<bool(const IndexRow&)>& doomed) {
  Cleared c;
  flush_pending();
  auto exclusive = maintenance_lock(FileLock::Mode::Exclusive);
  for (const auto& row : index().rows())
    if (doomed(row)) {
      c.bytes += evict(row);
      ++c.entries;
    }
  return c;
}

DiskTier::Cleared DiskTier::prune(std::optional<std::int64_t> max_bytes,
                                            std::optional<std::int64_t> older_than_seconds, const std::string& keep) {
  flush_pending();
  auto exclusive = maintenance_lock(FileLock::Mode::Exclusive);
  Cleared c;
  auto& idx = index();
  std::int64_t total = idx.total_bytes();
  const std::int64_t now = now_seconds();
  for (const auto& row : idx.rows_by_last_use()) {
    if (row.key == keep) continue;
    // now - age cannot overflow (an age is at most INT64_MAX, now is positive); now - last_used could.
    bool too_old = older_than_seconds && row.last_used < now - *older_than_seconds;
    bool over = max_bytes && total > *max_bytes;
    // Least recently used first: once a row is neither too old nor needed for space, no later one is.
    if (!too_old && !over) break;
    std::int64_t freed = evict(row);
    total -= row.size_bytes;
    c.bytes += freed;
    ++c.entries;
  }
  return c;
}

std::vector<CacheProblem> DiskTier::verify(bool fix) {
  auto& idx = index();
  flush_pending();
  auto exclusive = maintenance_lock(FileLock::Mode::Exclusive);
  std::vector<CacheProblem> problems;
  std::set<std::string> indexed;
  for (const auto& row : idx.rows()) {
    indexed.insert(row.key);
    BlobRead blob = blobs_.read(row.key);
    std::string what;
    if (blob.status == BlobRead::Status::Missing) what = "blob missing for indexed artifact";
    else if (blob.status == BlobRead::Status::Damaged) what = "blob damaged: " + blob.problem;
    else if (blob.checksum != row.checksum) what = "blob checksum differs from the index";
    if (what.empty()) continue;
    problems.push_back({row.key, what + " (" + row.kernel + " " + row.params + ")"});
    if (fix) {
      blobs_.remove(row.key);
      idx.remove(row.key);
    }
  }
  // A blob without a row whose header verifies is whole (a process died between writing it and
  // indexing it): its row comes back on first use, so it is no problem. One that does not verify is.
  for (const auto& key : blobs_.keys()) {
    if (indexed.count(key)) continue;
    BlobRead blob = blobs_.read(key);
    if (blob.status == BlobRead::Status::Ok) continue;
    problems.push_back({key, "blob without index row, " + (blob.status == BlobRead::Status::Damaged ? "damaged: " + blob.problem : "unreadable")});
    if (fix) blobs_.remove(key);
  }
  return problems;
}

DiskTier::Import::Import(DiskTier& tier) : tier_(tier), shared_(tier.maintenance_lock(FileLock::Mode::Shared)) {}

DiskTier::Import::~Import() {
  if (committed_) return;
  for (const auto& row : rows_) tier_.blobs_.remove(row.key);
}

void DiskTier::Import::stage(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload) {
  // Recorded first: a write that fails halfway leaves nothing either.
  rows_.push_back(row_of(key, meta, static_cast<std::int64_t>(payload.size()), ""));
  rows_.back().checksum = tier_.blobs_.write(key, payload);
}

std::int64_t DiskTier::Import::commit(const std::vector<TuningRow>& decisions) {
  const std::int64_t added = tier_.index().insert_import(rows_, decisions);
  committed_ = true;
  shared_.reset();  // prune takes the lock exclusive
  try {
    if (tier_.size_limit_ && tier_.index().total_bytes() > *tier_.size_limit_) {
      auto freed = tier_.prune(tier_.size_limit_, std::nullopt);
      log().info("cache: over JITK_CACHE_MAX_SIZE ({} bytes): evicted {} least recently used artifacts ({} bytes)",
                 *tier_.size_limit_, freed.entries, freed.bytes);
    }
  } catch (const Error& e) {
    warn_once("cache-prune", std::string("kernel cache: could not evict down to JITK_CACHE_MAX_SIZE: ") + e.what());
  }
  return added;
}

std::unique_ptr<DiskTier::Import> DiskTier::begin_import() {
  if (!writable()) throw Error(ErrorCode::CacheIo, "the kernel cache at " + root_.string() + " cannot be written: " + unavailable_);
  index();  // throws when it cannot be opened
  return std::unique_ptr<Import>(new Import(*this));
}

}  // namespace jit::detail
