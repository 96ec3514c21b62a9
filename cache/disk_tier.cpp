// Loading, storing, clearing and verifying artifacts on disk.
#include "cache/disk_tier.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>

#include "cache/blob_format.hpp"
#include "cache/cache_root.hpp"
#include "cache/hits_journal.hpp"
#include "cache/memo_folder.hpp"
#include "jit/error.hpp"
#include "support/logging.hpp"

namespace jit::detail {
namespace {
std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Hits of processes that never opened the index, left in <root>/hits/ for the next one that does.
constexpr const char* kHitsFolder = "hits";
constexpr std::size_t kMaxJournalBytes = 256 * 1024;
constexpr std::size_t kJournalsBeforeFold = 64;     // this many waiting: the exiting process folds them
constexpr std::size_t kJournalsPerFlush = 4096;     // taken by one flush at most

// Every field given (-Wmissing-field-initializers names one left out); the meta's come whole.
IndexRow row_of(const std::string& key, const ArtifactMeta& meta, std::int64_t size, const std::string& checksum) {
  const std::int64_t now = now_seconds();
  return {meta, key, size, checksum, /*created=*/now, /*last_used=*/now, /*hits=*/0};
}
}  // namespace

DiskTier::DiskTier(std::filesystem::path root, std::optional<std::int64_t> size_limit, std::string name,
                   CacheRoot::Access access)
    : root_(std::move(root)),
      name_(std::move(name)),
      handle_(std::make_shared<CacheRoot>(root_, access)),
      blobs_(handle_),
      size_limit_(size_limit) {
  std::string problem = handle_->problem();
  read_only_ = handle_->read_only();
  if (access == CacheRoot::Access::None) {
    // Chosen, not a fault: said at INFO.
    unavailable_ = problem;
    if (logging_at(spdlog::level::info)) log().info("{}", problem);
    return;
  }
  if (read_only_ && access == CacheRoot::Access::ReadOnly) {
    root_ok_ = true;
    unavailable_ = problem;
    if (logging_at(spdlog::level::info))
      log().info("kernel cache {} is read-only (the cache mode): kernels found there are used, new ones kept in memory", root_.string());
    return;
  }
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

void DiskTier::disable(const std::string& problem, const std::string& advice) {
  root_ok_ = false;
  {
    std::lock_guard lock(state_mutex_);
    unavailable_ = problem;
  }
  warn_once("cache-root " + name_ + " " + root_.string(),
            "kernel cache disabled, kernels are kept in memory only: " + problem + ". " +
                (advice.empty() ? "Free space on its disk, fix its ownership or permissions, or point JITK_CACHE_DIR at "
                                  "another folder of your own."
                                : advice));
}

std::shared_ptr<const MemoStore> DiskTier::memos(const std::string& folder) const {
  if (!root_ok_) return nullptr;
  return std::make_shared<MemoFolder>(handle_, folder, !read_only_);
}

bool DiskTier::in_place() {
  if (!root_ok_) return false;
  if (handle_->still_in_place()) return true;
  disable(handle_->problem(), "Find out who changed it: until then, point JITK_CACHE_DIR at a folder only you can write.");
  return false;
}

void DiskTier::give_up_busy(const std::string& what) {
  disable(what + "; not waiting for it again in this process",
          "Another process holds it (a long compile, a stuck jitk); raise JITK_CACHE_LOCK_TIMEOUT, or end that process.");
}

DiskTier::~DiskTier() {
  flush_pending(/*at_exit=*/true);
}

SqliteIndex* DiskTier::index_or_null() {
  // Opening takes ~0.3 ms (more when it repairs): a process that only hits the cache pays it at
  // exit, when it writes its hit counts.
  if (!in_place()) return nullptr;
  std::call_once(index_opened_, [this] {
    index_tried_ = true;
    if (!root_ok_ || read_only_) return;
    try {
      std::string repaired;
      index_ = std::make_unique<SqliteIndex>(*handle_, &repaired);
      if (!repaired.empty()) log().warn("{}", repaired);
    } catch (const Error& e) {
      disable(e.what());
    }
  });
  return root_ok_ ? index_.get() : nullptr;
}

SqliteIndex& DiskTier::index() {
  SqliteIndex* idx = index_or_null();
  if (!idx) throw Error(ErrorCode::CacheIo, "the kernel cache at " + root_.string() + " is not usable: " + unavailable_reason());
  return *idx;
}

bool DiskTier::on_disk() { return index_or_null() != nullptr; }

std::string DiskTier::unavailable_reason() {
  index_or_null();
  std::lock_guard lock(state_mutex_);
  return unavailable_;
}

bool DiskTier::journal_hits(const std::vector<IndexRow>& hits, std::int64_t misses) {
  if (hits.size() > kMaxJournalHits) return false;
  MemoFolder journals(handle_, kHitsFolder, /*writable=*/true);
  // Bounded: once enough wait, this process writes them all to the index instead.
  if (journals.names(kJournalsBeforeFold).size() >= kJournalsBeforeFold) return false;
  static std::atomic<unsigned> counter{0};
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string name = std::to_string(::getpid()) + "-" + std::to_string(now_ns) + "-" + std::to_string(counter++);
  std::vector<std::pair<std::string, std::int64_t>> lines;
  lines.reserve(hits.size());
  for (const auto& h : hits) lines.emplace_back(h.key, h.last_used);
  return journals.write(name, seal_memo(journal_text(lines, misses)));
}

TakenMemos DiskTier::take_journals(SqliteIndex& idx, std::vector<IndexRow>* hits, std::int64_t* misses) {
  MemoFolder journals(handle_, kHitsFolder, /*writable=*/true);
  std::map<std::string, std::optional<IndexRow>> known;  // key -> its row's fields to record (meta when restored), or none
  TakenMemos taken = journals.take_all(kJournalsPerFlush, kMaxJournalBytes);
  for (const auto& [name, text] : taken.memos()) {
    if (!text) continue;
    auto body = unseal_memo(*text);
    auto journal = body ? parse_journal(*body) : std::nullopt;
    if (!journal) {
      // Hit counts only: a damaged one is dropped (as a crashed process's counts are).
      log().debug("cache: {}/{} is not a hits journal; dropped", handle_->shown(kHitsFolder).string(), name);
      continue;
    }
    *misses += journal->misses;
    for (const auto& [key, when] : journal->hits) {
      // Looked up once a key (many journals name the same few artifacts).
      auto [it, first] = known.try_emplace(key);
      if (first) {
        if (auto found = idx.find(key)) {
          // has its row: counted; its fields go along in case another process removes the row
          // before this one records the hit (record_hits would then put back what it had)
          it->second = std::move(*found);
        } else {
          // Its row is gone: put back only from a blob that verifies, named by its own header.
          BlobRead blob = blobs_.read(key);
          if (blob.status == BlobRead::Status::Ok) {
            IndexRow& row = it->second.emplace();
            static_cast<ArtifactMeta&>(row) = blob.header.meta;
            row.size_bytes = static_cast<std::int64_t>(blob.payload.size());
            row.checksum = blob.checksum;
          }
        }
      }
      if (!it->second) continue;  // no row and no sound blob: not counted
      IndexRow row = *it->second;
      row.key = key;
      row.created = row.last_used = when;
      hits->push_back(std::move(row));
    }
  }
  return taken;
}

void DiskTier::flush_pending(bool at_exit) {
  std::vector<IndexRow> hits;
  std::int64_t misses;
  {
    std::lock_guard lock(pending_mutex_);
    hits.swap(pending_hits_);
    misses = pending_misses_;
    pending_misses_ = 0;
  }
  if (at_exit) {
    if (hits.empty() && misses == 0) return;
    // A process that only hit the cache never opened its index: opening it now (SQLite, its WAL,
    // a checkpoint with fsync) would cost its exit about a millisecond; the next writer does it.
    if (!index_tried_ && root_ok_ && !read_only_ && in_place() && journal_hits(hits, misses)) return;
  }
  SqliteIndex* idx = index_or_null();
  if (!idx) return;
  try {
    auto shared = maintenance_lock(FileLock::Mode::Shared);
    // The journals taken stay aside until their counts are committed (release(), below); a failure
    // on the way puts them back for the next process.
    TakenMemos journals = take_journals(*idx, &hits, &misses);
    if (hits.empty() && misses == 0) {
      journals.release();  // none said anything to record (damaged, empty): dropped
      return;
    }
    // A clear in another process may have removed a blob since it was read: count the hit, but
    // do not restore a row for a blob that is gone.
    std::map<std::string, bool> present;  // one look a key
    std::erase_if(hits, [&](const IndexRow& h) {
      auto [it, first] = present.try_emplace(h.key, false);
      if (first) it->second = blobs_.exists(h.key);
      return !it->second;
    });
    const std::int64_t restored = idx->record_hits(hits, misses);
    journals.release();
    if (restored > 0)
      warn_once("cache-rows-restored", "cache: index.db had no row for " + std::to_string(restored) +
                                           " verified artifact(s) in use; their rows are restored");
  } catch (const CacheBusy& e) {
    give_up_busy(e.what());
  } catch (const Error& e) {
    warn_once("cache-hits", std::string("kernel cache: could not record hit counts: ") + e.what());
  }
}

std::optional<std::vector<char>> DiskTier::get(const std::string& key, const ArtifactMeta& meta, Count count) {
  if (!in_place()) return std::nullopt;
  const bool count_miss = count == Count::HitsAndMisses;
  BlobRead blob = blobs_.read(key, &meta);
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
      } catch (const CacheBusy& e) {
        give_up_busy(e.what());
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
  if (!in_place()) return std::nullopt;
  BlobRead blob = blobs_.read(key);
  if (blob.status != BlobRead::Status::Ok) return std::nullopt;
  return std::move(blob.payload);
}

std::optional<std::vector<char>> DiskTier::read_blob(const std::string& key) {
  if (!in_place()) return std::nullopt;
  return blobs_.read_whole(key);
}

bool DiskTier::put(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload,
                   PutReason why) {
  SqliteIndex* idx = !read_only_ ? index_or_null() : nullptr;
  if (!idx) return false;
  try {
    {
      auto shared = maintenance_lock(FileLock::Mode::Shared);
      std::string checksum = blobs_.write(key, meta, payload);
      idx->insert(row_of(key, meta, static_cast<std::int64_t>(payload.size()), checksum), /*count_compile=*/why == PutReason::Compiled);
    }
    flush_pending();
    if (size_limit_ && idx->total_bytes() > *size_limit_) {
      auto freed = prune(size_limit_, std::nullopt, key);
      log().info("cache: over JITK_CACHE_MAX_SIZE ({} bytes): evicted {} least recently used artifacts ({} bytes)",
                 *size_limit_, freed.entries, freed.bytes);
    }
    return true;
  } catch (const CacheBusy& e) {
    give_up_busy(e.what());
    return false;
  } catch (const Error& e) {
    warn_once("cache-store", std::string("kernel cache write failed, keeping kernels in memory only: ") + e.what() +
                                 ". Free disk space or point JITK_CACHE_DIR at a writable folder.");
    return false;
  }
}

bool DiskTier::has_valid_blob(const std::string& key) {
  return in_place() && blobs_.read(key).status == BlobRead::Status::Ok;
}

void DiskTier::forget_pending_hits(const std::string& key) {
  std::lock_guard lock(pending_mutex_);
  std::erase_if(pending_hits_, [&](const IndexRow& r) { return r.key == key; });
}

void DiskTier::remove(const std::string& key) {
  if (!in_place()) return;
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
  if (read_only_ || !in_place()) return nullptr;
  if (key.empty() || key[0] == '.' || key.find('/') != std::string::npos)
    throw Error(ErrorCode::Internal, "not a lock name: '" + key + "'");
  try {
    UniqueFd locks = handle_->open_dir("locks", /*create=*/true);
    return std::make_unique<FileLock>(locks.get(), key + ".lock", handle_->shown("locks/" + key + ".lock").string());
  } catch (const CacheBusy& e) {
    give_up_busy(e.what());
    return nullptr;
  } catch (const Error& e) {
    warn_once("cache-lock", std::string("kernel cache lock failed, compiling without cross-process locking: ") + e.what());
    return nullptr;
  }
}

std::unique_ptr<FileLock> DiskTier::maintenance_lock(FileLock::Mode mode) {
  if (read_only_ || !in_place()) return nullptr;
  try {
    UniqueFd locks = handle_->open_dir("locks", /*create=*/true);
    return std::make_unique<FileLock>(locks.get(), "maintenance.lock", handle_->shown("locks/maintenance.lock").string(), mode);
  } catch (const CacheBusy& e) {
    give_up_busy(e.what());
    throw;
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
  MemoFolder(handle_, "keys", !read_only_).remove_all();  // the keys requests resolved to: none is left
  MemoFolder(handle_, kHitsFolder, !read_only_).remove_all();  // hits written since the flush above: of artifacts gone
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
    BlobRead blob = blobs_.read(row.key, &row);  // bound to the row's key, kernel, params, backend, target
    std::string what;
    if (blob.status == BlobRead::Status::Missing) what = "blob missing for indexed artifact";
    else if (blob.status == BlobRead::Status::Outdated) {
      // A miss, not damage (its kernel is rebuilt at its next use): --fix drops it now.
      if (!fix) continue;
      what = "blob of another format (" + blob.problem + "), rebuilt at its next use";
    }
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
  // indexing it, or index.db was lost): its row comes back on first use, so it is no problem; --fix
  // rebuilds the row from what the blob's header names. One that does not verify is a problem.
  for (const auto& key : blobs_.keys()) {
    if (indexed.count(key)) continue;
    BlobRead blob = blobs_.read(key);
    if (blob.status == BlobRead::Status::Ok) {
      if (!fix) continue;
      const ArtifactMeta& m = blob.header.meta;
      idx.insert(row_of(key, m, static_cast<std::int64_t>(blob.payload.size()), blob.checksum), /*count_compile=*/false);
      problems.push_back({key, "blob without index row: row rebuilt from its header (" + m.kernel + " " + m.params + ")"});
      continue;
    }
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

void DiskTier::Import::stage(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& blob) {
  if (!tier_.in_place()) throw Error(ErrorCode::CacheIo, "the kernel cache root is no longer the folder opened");
  // Recorded first: a write that fails halfway leaves nothing either.
  rows_.push_back(row_of(key, meta, 0, ""));
  const BlobHeader bound = tier_.blobs_.write_bound(key, blob, &meta);  // as it is: the header is already bound
  rows_.back().size_bytes = static_cast<std::int64_t>(bound.payload_size);
  rows_.back().checksum = bound.payload_checksum;
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
