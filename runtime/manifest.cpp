// Warm manifests (TOML) and warming the cache from them in parallel.
#include <toml++/toml.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "jit/cache.hpp"
#include "jit/kernel_catalog.hpp"
#include "runtime/get_kernel.hpp"

namespace jit::cache {
namespace {

[[noreturn]] void manifest_error(const std::string& where, const std::string& what) {
  throw Error(ErrorCode::Manifest, where + ": " + what);
}

// One parameter's values: a scalar is one value, an array lists the values to expand.
std::vector<ParamValue> param_values(const std::string& where, const std::string& name, const toml::node& node) {
  auto one = [&](const toml::node& n) -> ParamValue {
    if (auto i = n.value<std::int64_t>(); i && n.is_integer()) return *i;
    if (auto s = n.value<std::string>(); s && n.is_string()) return *s;
    manifest_error(where, "parameter '" + name + "' must be an integer, a string, or an array of them");
  };
  std::vector<ParamValue> out;
  if (const auto* arr = node.as_array()) {
    if (arr->empty()) manifest_error(where, "parameter '" + name + "' is an empty array");
    for (const auto& n : *arr) out.push_back(one(n));
  } else {
    out.push_back(one(node));
  }
  return out;
}

}  // namespace

std::vector<WarmItem> parse_manifest(const std::filesystem::path& file) {
  toml::table doc;
  try {
    doc = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "syntax error at line " << e.source().begin.line << ", column " << e.source().begin.column << ": "
        << e.description();
    manifest_error(file.string(), msg.str());
  }
  for (const auto& [key, node] : doc)
    if (key.str() != "kernel") manifest_error(file.string(), "unknown top-level key '" + std::string(key.str()) + "'; expected [[kernel]] entries");
  const toml::array* entries = doc["kernel"].as_array();
  if (!entries) manifest_error(file.string(), "no [[kernel]] entries");

  std::vector<WarmItem> items;
  int index = 0;
  for (const auto& entry_node : *entries) {
    ++index;
    std::string where = file.string() + ": kernel #" + std::to_string(index);
    const toml::table* entry = entry_node.as_table();
    if (!entry) manifest_error(where, "is not a table");
    for (const auto& [key, node] : *entry) {
      std::string k(key.str());
      if (k != "name" && k != "target" && k != "params") manifest_error(where, "unknown key '" + k + "' (expected name, target, params)");
    }
    auto name = (*entry)["name"].value<std::string>();
    if (!name) manifest_error(where, "missing name = \"<kernel>\"");
    where += " (" + *name + ")";
    Target target = default_target();
    if (auto t = (*entry)["target"].value<std::string>()) {
      try {
        target = Target::parse(*t);
      } catch (const Error& e) {
        manifest_error(where, e.what());
      }
    }
    // Expand arrays into every combination.
    std::vector<ParamSet> combos(1);
    if (const toml::table* params = (*entry)["params"].as_table()) {
      for (const auto& [key, node] : *params) {
        std::string pname(key.str());
        std::vector<ParamSet> next;
        for (const auto& combo : combos)
          for (const auto& v : param_values(where, pname, node)) {
            ParamSet p = combo;
            p.set(pname, v);
            next.push_back(std::move(p));
          }
        combos = std::move(next);
      }
    } else if ((*entry)["params"]) {
      manifest_error(where, "params must be a table, e.g. params = { dtype = \"f32\" }");
    }
    for (auto& p : combos) {
      try {
        const auto& def = detail::find_kernel(*name);
        p = detail::validate_params(def, p, target.backend);
      } catch (const Error& e) {
        manifest_error(where, e.what());
      }
      items.push_back({*name, target, std::move(p), where});
    }
  }
  return items;
}

std::vector<WarmResult> warm(const std::vector<WarmItem>& items, int jobs,
                             const std::function<void(const WarmResult&)>& on_done) {
  std::vector<WarmResult> results(items.size());
  std::atomic<std::size_t> next{0};
  std::mutex report;
  auto work = [&] {
    for (std::size_t i; (i = next++) < items.size();) {
      WarmResult& r = results[i];
      r.item = &items[i];
      auto t0 = std::chrono::steady_clock::now();
      try {
        auto s = detail::resolve(items[i].kernel, items[i].params, items[i].target);
        switch (detail::ensure_on_disk(s)) {
          case detail::WarmOutcome::AlreadyCached: r.outcome = WarmResult::Outcome::AlreadyCached; break;
          case detail::WarmOutcome::CompiledAndStored: r.outcome = WarmResult::Outcome::Compiled; break;
          case detail::WarmOutcome::CompiledNotStored:
            r.outcome = WarmResult::Outcome::Failed;
            r.error = "compiled, but the disk cache did not keep it (see the warning above)";
            break;
        }
      } catch (const std::exception& e) {
        r.outcome = WarmResult::Outcome::Failed;
        r.error = e.what();
      }
      r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (on_done) {
        std::lock_guard lock(report);
        on_done(r);
      }
    }
  };
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(items.size())));
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace jit::cache
