// Loading, storing, clearing and verifying artifacts on disk.
#include "cache/artifact_cache.hpp"

#include <chrono>
#include <set>

#include "cache/cache_root.hpp"
#include "jit/error.hpp"
#include "runtime/logging.hpp"

namespace jit::detail {
namespace {
std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

ArtifactCache::ArtifactCache(std::filesystem::path root) : root_(std::move(root)), blobs_(root_) {
  std::string problem = prepare_cache_root(root_);
  if (problem.empty()) {
    try {
      std::string repaired;
      index_ = std::make_unique<SqliteIndex>(root_ / "index.db", &repaired);
      if (!repaired.empty()) log().warn("{}", repaired);
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  if (!problem.empty()) {
    unavailable_ = problem;
    warn_once("cache-root", "kernel cache disabled, kernels are kept in memory only: " + problem +
                                ". Fix the folder's permissions or point JITK_CACHE_DIR at a writable folder.");
  }
}

ArtifactCache::~ArtifactCache() { flush_hits(); }

void ArtifactCache::flush_hits() {
  std::vector<std::string> keys;
  {
    std::lock_guard lock(hits_mutex_);
    keys.swap(pending_hits_);
  }
  if (!index_ || keys.empty()) return;
  try {
    index_->record_hits(keys);
  } catch (const Error& e) {
    warn_once("cache-hits", std::string("kernel cache: could not record hit counts: ") + e.what());
  }
}

ArtifactCache& ArtifactCache::process_cache() {
  static ArtifactCache cache(cache_root_path());
  return cache;
}

SqliteIndex& ArtifactCache::index() {
  if (!index_) throw Error(ErrorCode::CacheIo, "the kernel cache at " + root_.string() + " is not usable: " + unavailable_);
  return *index_;
}

std::optional<std::vector<char>> ArtifactCache::load(const std::string& key, bool count_miss) {
  if (!index_) return std::nullopt;
  try {
    auto row = index_->find(key);
    if (!row) {
      if (count_miss) index_->record_miss();
      return std::nullopt;
    }
    BlobRead blob = blobs_.read(key);
    std::string problem;
    if (blob.status == BlobRead::Status::Missing) problem = "its blob is missing";
    else if (blob.status == BlobRead::Status::Damaged) problem = "its blob is damaged: " + blob.problem;
    else if (blob.checksum != row->checksum) problem = "its blob does not match the index checksum";
    if (!problem.empty()) {
      log().warn("cache: artifact {} ({} {}) not loaded, {}; dropping it and rebuilding", key, row->kernel,
                 row->params, problem);
      blobs_.remove(key);
      index_->remove(key);
      if (count_miss) index_->record_miss();
      return std::nullopt;
    }
    {
      std::lock_guard lock(hits_mutex_);
      pending_hits_.push_back(key);
    }
    return std::move(blob.payload);
  } catch (const Error& e) {
    warn_once("cache-load", std::string("kernel cache read failed, compiling instead: ") + e.what());
    return std::nullopt;
  }
}

void ArtifactCache::store(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload) {
  if (!index_) return;
  try {
    IndexRow row;
    row.key = key;
    row.kernel = meta.kernel;
    row.params = meta.params;
    row.backend = meta.backend;
    row.arch = meta.arch;
    row.compiler = meta.compiler;
    row.size_bytes = static_cast<std::int64_t>(payload.size());
    row.compile_ms = meta.compile_ms;
    row.created = row.last_used = now_seconds();
    row.checksum = blobs_.write(key, payload);
    index_->insert(row);
    flush_hits();
  } catch (const Error& e) {
    warn_once("cache-store", std::string("kernel cache write failed, keeping kernels in memory only: ") + e.what() +
                                 ". Free disk space or point JITK_CACHE_DIR at a writable folder.");
  }
}

bool ArtifactCache::contains(const std::string& key) {
  if (!index_) return false;
  try {
    return index_->find(key).has_value() && std::filesystem::exists(blobs_.path_for(key));
  } catch (const Error&) {
    return false;
  }
}

void ArtifactCache::drop(const std::string& key) {
  if (!index_) return;
  blobs_.remove(key);
  try {
    index_->remove(key);
  } catch (const Error& e) {
    warn_once("cache-drop", std::string("kernel cache: could not drop a bad artifact: ") + e.what());
  }
}

std::unique_ptr<FileLock> ArtifactCache::lock(const std::string& key) {
  if (!index_) return nullptr;
  try {
    return std::make_unique<FileLock>(root_ / "locks" / (key + ".lock"));
  } catch (const Error& e) {
    warn_once("cache-lock", std::string("kernel cache lock failed, compiling without cross-process locking: ") + e.what());
    return nullptr;
  }
}

std::vector<IndexRow> ArtifactCache::rows() {
  flush_hits();
  return index().rows();
}
IndexCounters ArtifactCache::counters() {
  flush_hits();
  return index().counters();
}

std::int64_t ArtifactCache::bytes() {
  std::int64_t total = 0;
  for (const auto& k : blobs_.keys()) total += blobs_.size_on_disk(k);
  return total;
}

ArtifactCache::Cleared ArtifactCache::clear() {
  Cleared c;
  auto& idx = index();
  for (const auto& k : blobs_.keys()) {
    c.bytes += blobs_.size_on_disk(k);
    if (blobs_.remove(k)) ++c.entries;
  }
  std::int64_t rows = idx.remove_all();
  if (rows > c.entries) c.entries = rows;
  blobs_.remove_stale_temp_files();
  return c;
}

std::vector<CacheProblem> ArtifactCache::verify(bool fix) {
  auto& idx = index();
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
  for (const auto& key : blobs_.keys()) {
    if (indexed.count(key)) continue;
    problems.push_back({key, "blob without index row"});
    if (fix) blobs_.remove(key);
  }
  return problems;
}

}  // namespace jit::detail
