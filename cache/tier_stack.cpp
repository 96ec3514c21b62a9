// Walking the tiers in order: first hit wins and is written back above; a failing tier is logged once and skipped.
#include "cache/tier_stack.hpp"

#include "support/logging.hpp"

namespace jit::detail {
namespace {

// Runs one call of one tier; whatever it throws becomes one WARN per tier and operation (a tier
// that is down would otherwise say so at every get) and the fallback.
template <class Call, class Fallback>
auto guarded(const StorageTier& tier, const char* operation, Call&& call, Fallback fallback) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    warn_once("cache-tier " + tier.name() + " " + operation,
              "cache tier '" + tier.name() + "': " + operation + " failed (" + e.what() +
                  "); skipping it, kernels are found or compiled without it");
  } catch (...) {
    warn_once("cache-tier " + tier.name() + " " + operation,
              "cache tier '" + tier.name() + "': " + operation + " failed; skipping it, kernels are found or compiled without it");
  }
  return fallback;
}

}  // namespace

TierStack::TierStack(std::vector<std::shared_ptr<StorageTier>> tiers, LockProvider lock)
    : tiers_(std::move(tiers)), lock_(std::move(lock)) {}

std::optional<TierStack::Hit> TierStack::get(const std::string& key, const ArtifactMeta& meta, Count count) const {
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    StorageTier& tier = *tiers_[i];
    auto payload = guarded(tier, "get", [&] { return tier.get(key, meta, count); }, std::optional<std::vector<char>>{});
    if (!payload) continue;
    for (std::size_t above = 0; above < i; ++above) {
      StorageTier& upper = *tiers_[above];
      guarded(upper, "put", [&] { return upper.put(key, meta, *payload, PutReason::Copied); }, false);
    }
    return Hit{std::move(*payload), tier.name()};
  }
  return std::nullopt;
}

bool TierStack::put(const std::string& key, const ArtifactMeta& meta, const std::vector<char>& payload,
                    PutReason why) const {
  bool kept = false;
  for (const auto& tier : tiers_)
    kept |= guarded(*tier, "put", [&] { return tier->put(key, meta, payload, why); }, false);
  return kept;
}

void TierStack::remove(const std::string& key) const {
  for (const auto& tier : tiers_)
    guarded(*tier, "remove", [&] { tier->remove(key); return true; }, false);
}

TierStack::Claim TierStack::claim(const std::string& key, const ArtifactMeta& meta) const {
  Claim out;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    StorageTier& tier = *tiers_[i];
    FlightClaim c = guarded(tier, "claim", [&] { return tier.claim(key, meta); }, FlightClaim{});
    if (c.lease) out.leases.push_back(std::move(c.lease));
    if (!c.payload) continue;
    for (std::size_t above = 0; above < i; ++above) {
      StorageTier& upper = *tiers_[above];
      guarded(upper, "put", [&] { return upper.put(key, meta, *c.payload, PutReason::Copied); }, false);
    }
    out.hit = Hit{std::move(*c.payload), tier.name()};
    out.leases.clear();  // nothing to compile: released now
    return out;
  }
  return out;
}

TierStack::KeyLock TierStack::lock(const std::string& key) const {
  if (!lock_) return nullptr;
  try {
    return lock_(key);
  } catch (const std::exception& e) {
    warn_once("cache-tier lock", std::string("cache: cannot lock a key, compiling without cross-process locking: ") + e.what());
    return nullptr;
  }
}

}  // namespace jit::detail
