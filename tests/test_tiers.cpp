// Storage tiers: a stack looks in its tiers in order, writes a lower tier's hit back above, and
// skips a tier that fails; jit::get and the warm-up take whatever stack they are handed.
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "cache/disk_tier.hpp"
#include "cache/process_tiers.hpp"
#include "cache/tier_stack.hpp"
#include "jit/cache.hpp"
#include "runtime/get_kernel.hpp"
#include "support/logging.hpp"
#include "test_support.hpp"

using namespace jit::detail;
using jitk_test::TempDir;

namespace {

// The process's own tiers are never asked here, but a stray use must not touch the user's cache.
const TempDir& cache_dir = jitk_test::own_cache_dir();

std::vector<char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
const std::string kKey(32, 'c');
const ArtifactMeta kMeta{.kernel = "saxpy", .params = "dtype=f32", .backend = "cpu", .arch = "x", .compiler = "c"};

// A tier in a map: what a test needs to see where an artifact went. refuse_puts: a tier that
// cannot keep anything now (full, read-only).
class MemoryTier final : public StorageTier {
 public:
  explicit MemoryTier(std::string name, bool refuse_puts = false) : name_(std::move(name)), refuse_puts_(refuse_puts) {}
  std::string name() const override { return name_; }
  std::optional<std::vector<char>> get(const std::string& key, const ArtifactMeta&, Count count) override {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      stats_.misses += count == Count::HitsAndMisses;
      return std::nullopt;
    }
    stats_.hits += count != Count::Nothing;
    return it->second;
  }
  bool put(const std::string& key, const ArtifactMeta&, const std::vector<char>& payload, PutReason why) override {
    std::lock_guard lock(mutex_);
    if (refuse_puts_) return false;
    entries_[key] = payload;
    stats_.compiles += why == PutReason::Compiled;
    return true;
  }
  void remove(const std::string& key) override {
    std::lock_guard lock(mutex_);
    entries_.erase(key);
  }
  TierStats stats() override {
    std::lock_guard lock(mutex_);
    TierStats s = stats_;
    s.entries = static_cast<std::int64_t>(entries_.size());
    return s;
  }
  bool holds(const std::string& key) {
    std::lock_guard lock(mutex_);
    return entries_.count(key) > 0;
  }

 private:
  std::string name_;
  bool refuse_puts_;
  std::mutex mutex_;
  std::map<std::string, std::vector<char>> entries_;
  TierStats stats_;
};

// A tier that is down: every call throws, as a remote tier's client may.
class BrokenTier final : public StorageTier {
 public:
  explicit BrokenTier(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::optional<std::vector<char>> get(const std::string&, const ArtifactMeta&, Count) override { fail(); }
  bool put(const std::string&, const ArtifactMeta&, const std::vector<char>&, PutReason) override { fail(); }
  void remove(const std::string&) override { fail(); }
  TierStats stats() override { fail(); }
  int calls = 0;

 private:
  [[noreturn]] void fail() {
    ++calls;
    throw std::runtime_error("connection refused");
  }
  std::string name_;
};

// What jitk logs while it lives.
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) { log().sinks().push_back(sink_); }
  ~CapturedLog() {
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  int count(const std::string& needle) const {
    const std::string all = text_.str();
    int n = 0;
    for (auto at = all.find(needle); at != std::string::npos; at = all.find(needle, at + 1)) ++n;
    return n;
  }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

// Whether CPU kernels can be compiled here; prints the SKIPPED line ctest looks for when not.
bool cpu_backend_or_skip() {
  for (const auto& b : jit::cache::backends())
    if (b.name == "cpu" && b.available) return true;
  std::printf("SKIPPED: no CPU backend in this build\n");
  return false;
}

jit::ParamSet saxpy(const char* dtype) { return {{"dtype", std::string(dtype)}}; }

}  // namespace

TEST_CASE("a memory tier in front of the disk tier is filled from the disk on a hit", "[tiers]") {
  TempDir dir;
  auto disk = std::make_shared<DiskTier>(dir.path());
  auto memory = std::make_shared<MemoryTier>("memory in front of disk");
  REQUIRE(disk->put(kKey, kMeta, bytes_of("object"), PutReason::Compiled));
  TierStack stack({memory, disk});

  auto hit = stack.get(kKey, kMeta, Count::HitsAndMisses);
  REQUIRE(hit);
  CHECK(std::string(hit->payload.begin(), hit->payload.end()) == "object");
  CHECK(hit->tier == "disk");
  CHECK(memory->holds(kKey));
  CHECK(memory->stats().compiles == 0);  // a copy, not a compile

  auto again = stack.get(kKey, kMeta, Count::HitsAndMisses);
  REQUIRE(again);
  CHECK(again->tier == "memory in front of disk");
}

TEST_CASE("a hit in the second tier is written back to the first, and a put reaches every tier", "[tiers]") {
  auto first = std::make_shared<MemoryTier>("first"), second = std::make_shared<MemoryTier>("second");
  TierStack stack({first, second});
  REQUIRE(second->put(kKey, kMeta, bytes_of("from below"), PutReason::Compiled));
  REQUIRE(stack.get(kKey, kMeta, Count::Hits));
  CHECK(first->holds(kKey));

  const std::string other(32, 'd');
  CHECK(stack.put(other, kMeta, bytes_of("new"), PutReason::Compiled));
  CHECK(first->holds(other));
  CHECK(second->holds(other));
  stack.remove(other);
  CHECK_FALSE(first->holds(other));
  CHECK_FALSE(second->holds(other));
  CHECK_FALSE(stack.get(other, kMeta, Count::HitsAndMisses));
  CHECK(first->stats().misses == 1);
  CHECK(second->stats().misses == 1);
}

TEST_CASE("a tier that throws is logged once and skipped, and one that cannot keep an artifact is passed over", "[tiers]") {
  CapturedLog captured;
  auto broken = std::make_shared<BrokenTier>("broken in front");
  auto refusing = std::make_shared<MemoryTier>("refusing", /*refuse_puts=*/true);
  auto memory = std::make_shared<MemoryTier>("memory behind");
  TierStack stack({broken, refusing, memory});

  CHECK_FALSE(stack.get(kKey, kMeta, Count::HitsAndMisses));  // no throw: a miss
  CHECK(stack.put(kKey, kMeta, bytes_of("kept below"), PutReason::Compiled));
  CHECK(memory->holds(kKey));
  for (int i = 0; i < 3; ++i) {
    auto hit = stack.get(kKey, kMeta, Count::HitsAndMisses);
    REQUIRE(hit);
    CHECK(hit->tier == "memory behind");
  }
  stack.remove(kKey);
  CHECK(broken->calls > 3);  // skipped each time, asked again each time
  INFO(captured.text());
  CHECK(captured.count("cache tier 'broken in front': get failed (connection refused)") == 1);
  CHECK(captured.count("cache tier 'broken in front': put failed") == 1);
  CHECK(captured.count("refusing") == 0);  // a tier that cannot keep something says so itself
}

TEST_CASE("a stack without tiers finds nothing, keeps nothing and locks nothing", "[tiers]") {
  TierStack none;
  CHECK_FALSE(none.get(kKey, kMeta, Count::HitsAndMisses));
  CHECK_FALSE(none.put(kKey, kMeta, bytes_of("x"), PutReason::Compiled));
  CHECK_FALSE(none.lock(kKey));
}

TEST_CASE("a tier is named by a URL whose scheme has a row in the scheme table", "[tiers]") {
  TempDir dir;
  auto tier = tier_for_url("file://" + dir.str());
  REQUIRE(tier);
  CHECK(tier->name() == "file://" + dir.str());
  REQUIRE(tier->put(kKey, kMeta, bytes_of("shared"), PutReason::Compiled));
  CHECK(DiskTier(dir.path()).has_valid_blob(kKey));

  CapturedLog captured;
  CHECK_FALSE(tier_for_url("nosuch://host:1234"));
  CHECK(captured.count("'nosuch://host:1234' is not used") == 1);
}

TEST_CASE("jit::get through a stack: compiled once into its tiers, then loaded from a lower tier and written back",
          "[tiers][get]") {
  if (!cpu_backend_or_skip()) return;
  auto below = std::make_shared<MemoryTier>("below");
  const Specialization s = resolve("saxpy", saxpy("f32"), jit::Target::cpu());
  REQUIRE(ensure_on_disk(s, TierStack({below})) == WarmOutcome::CompiledAndStored);
  REQUIRE(below->holds(s.key));
  CHECK(ensure_on_disk(s, TierStack({below})) == WarmOutcome::AlreadyCached);

  CapturedLog captured;
  auto front = std::make_shared<MemoryTier>("front");
  const KernelHandle k = get_kernel("saxpy", saxpy("f32"), jit::Target::cpu(), {}, TierStack({front, below}));
  CHECK(k.origin == jit::Origin::DiskCache);  // from a tier: nothing compiled
  CHECK(k.key == s.key);
  CHECK(front->holds(s.key));
  CHECK(below->stats().compiles == 1);
}

TEST_CASE("jit::get through a stack whose only other tier throws still compiles and runs", "[tiers][get]") {
  if (!cpu_backend_or_skip()) return;
  auto broken = std::make_shared<BrokenTier>("broken get tier");
  auto memory = std::make_shared<MemoryTier>("memory after a broken tier");
  const KernelHandle k = get_kernel("saxpy", saxpy("f64"), jit::Target::cpu(), {}, TierStack({broken, memory}));
  CHECK(k.origin == jit::Origin::Compiled);
  CHECK(k.kernel);
  CHECK(memory->holds(k.key));
  CHECK(broken->calls >= 2);  // looked in twice (before and after the lock), written to once
}

TEST_CASE("a process with JITK_REMOTE_CACHE=file://... shares its compiles with another cache root", "[tiers][process]") {
  if (!cpu_backend_or_skip()) return;
  TempDir a, b, shared;
  const std::string remote = "JITK_REMOTE_CACHE='file://" + shared.str() + "'";
  auto first = jitk_test::run(jitk_test::kClient + " saxpy", jitk_test::cache_env(a) + " " + remote);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK(jitk_test::count_lines_with(first.output, "saxpy compiled ok") == 1);
  CHECK(jitk_test::blob_files(shared.path()).size() == 1);

  auto second = jitk_test::run(jitk_test::kClient + " saxpy", jitk_test::cache_env(b) + " " + remote);
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  CHECK(jitk_test::count_lines_with(second.output, "saxpy disk ok") == 1);
  CHECK(jitk_test::blob_files(b.path()).size() == 1);  // written back to the local disk tier
}
