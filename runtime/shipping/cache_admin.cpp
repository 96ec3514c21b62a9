// jit::cache: listing, statistics, clearing and verifying the disk cache, and backend status.
#include <algorithm>
#include <charconv>

#include "cache/process_tiers.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/specializer.hpp"
#include "jit/cache.hpp"
#include "runtime/backend_driver.hpp"
#include "support/units.hpp"

namespace jit::cache {

namespace {
// The admin verbs work on the process's disk tier: the cache under the root this process uses.
detail::DiskTier& disk() { return *detail::process_tiers().disk; }
}  // namespace

std::filesystem::path root() { return disk().root(); }

std::string unavailable_reason() { return disk().unavailable_reason(); }

ClearResult clear_kernel(const std::string& kernel) {
  auto c = disk().clear_kernel(kernel);
  if (c.entries == 0) detail::find_kernel(kernel);  // a typo: throws, listing the kernels there are
  return {c.entries, c.bytes};
}

ClearResult prune(std::optional<std::int64_t> max_bytes, std::optional<std::int64_t> older_than_seconds) {
  auto c = disk().prune(max_bytes, older_than_seconds);
  return {c.entries, c.bytes};
}

StaleResult prune_stale() {
  StaleResult out;
  const auto& reg = detail::registry();
  auto c = disk().clear_where([&](const detail::IndexRow& row) {
    const detail::KernelDef* def = nullptr;
    for (std::size_t i = 0; i < reg.shipped; ++i)
      if (reg.kernels[i].name == row.kernel) def = &reg.kernels[i];
    if (def && row.implementation.empty()) return true;  // made before implementations existed
    bool known_name = false;
    if (def)
      for (const auto& impl : def->implementations) {
        if (impl.name != row.implementation) continue;
        known_name = true;
        if (impl.version == row.implementation_version) return false;  // shipped as it is
      }
    if (known_name) return true;  // a shipped implementation at a version no longer shipped
    ++out.kept_unknown;
    std::string what = row.kernel + "/" + row.implementation;
    if (std::find(out.unknown.begin(), out.unknown.end(), what) == out.unknown.end()) out.unknown.push_back(what);
    return false;
  });
  out.removed = {c.entries, c.bytes};
  return out;
}

std::optional<std::int64_t> parse_size(const std::string& text) { return detail::parse_size(text); }

std::optional<std::int64_t> parse_age(const std::string& text) { return detail::parse_age(text); }

namespace {

// "dtype=f32,hidden=4096" back into params (numbers where the text is all digits).
ParamSet parse_params_text(const std::string& text) {
  ParamSet out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    const auto eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    // A number past int64 (an index row from elsewhere) stays text: validation then refuses it.
    std::int64_t n = 0;
    const auto [end_of_number, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    const bool number = !value.empty() && value[0] != '-' && ec == std::errc() && end_of_number == value.data() + value.size();
    if (number) out.set(name, n);
    else out.set(name, value);
  }
  return out;
}

// The launch an artifact gets from this jitk (the shape is computed at every get, never stored).
std::string launch_of(const detail::IndexRow& r) {
  try {
    const auto& def = detail::find_kernel(r.kernel);
    for (const auto& impl : def.implementations)
      if (impl.name == r.implementation) return detail::describe_launch(impl, detail::validate_params(def, parse_params_text(r.params)), def.name);
  } catch (const Error&) {
    // a kernel or params this jitk does not know (a user's kernel from another program)
  }
  return "";
}

}  // namespace

std::vector<ArtifactInfo> list() {
  std::vector<ArtifactInfo> out;
  for (const auto& r : disk().rows())
    out.push_back({r.key, r.kernel, r.params, r.backend, r.arch, r.compiler, r.size_bytes, r.compile_ms, r.created,
                   r.last_used, r.hits, r.implementation, static_cast<int>(r.implementation_version), launch_of(r)});
  return out;
}

Stats stats() {
  const detail::TierStats t = disk().stats();
  Stats s;
  s.entries = t.entries;
  s.bytes = t.bytes;
  s.hits = t.hits;
  s.misses = t.misses;
  s.compiles = t.compiles;
  return s;
}

ClearResult clear() {
  auto c = disk().clear();
  detail::process_tiers().tuning.clear();  // what was measured goes with what was built
  return {c.entries, c.bytes};
}

std::vector<VerifyProblem> verify(bool fix) {
  std::vector<VerifyProblem> out;
  for (const auto& p : disk().verify(fix)) out.push_back({p.key, p.what});
  return out;
}

std::vector<BackendStatus> backends() {
  std::vector<BackendStatus> out;
  for (const auto& s : detail::backend_states()) {
    BackendStatus b{std::string(backend_name(s.backend)), s.reason.empty(), s.reason};
    if (b.available) {
      const auto& c = s.driver->compiler(Target{s.backend, "", 0});
      b.detail = c.id() + ", arch " + c.arch();
    } else if (s.driver && s.driver->compile_unavailable_reason().empty()) {
      if (auto note = s.driver->compile_only_note(); !note.empty()) b.detail += " (" + note + ")";
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace jit::cache
