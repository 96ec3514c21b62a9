// jitk: inspect, warm, verify and clear the kernel cache (verbs after ccache's: stats, clear, ...).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <optional>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <thread>
#include <unistd.h>

#include "jit/cache.hpp"
#include "jit/tuning.hpp"
#include "jit/cuda.hpp"
#include "jit/kernel_module.hpp"
#include "jit/registry.hpp"
#include "runtime/shipping/shipped_descriptors.hpp"
#include "support/text.hpp"
#include "support/units.hpp"

namespace {

// Text from the cache, a pack or a manifest is escaped before it reaches the terminal: a kernel
// name must not be able to move the cursor or retitle the window.
using jit::detail::printable;

// JSON output: control characters are escaped by the JSON itself; bytes that are not UTF-8 are replaced.
std::string dump(const nlohmann::json& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string human_bytes(std::int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string iso_time(std::int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int cmd_info() {
  std::cout << "jitk cache root: " << printable(jit::cache::root().string()) << "\n";
  if (auto why = jit::cache::unavailable_reason(); !why.empty()) {
    std::cout << "cache: memory only: " << printable(why) << "\n";
  } else {
    try {
      auto s = jit::cache::stats();
      std::cout << "cache: " << s.entries << " artifacts, " << human_bytes(s.bytes) << "\n";
    } catch (const jit::Error& e) {
      std::cout << "cache: unusable: " << printable(e.what()) << "\n";
    }
  }
  std::cout << "backends:\n";
  for (const auto& b : jit::cache::backends())
    std::cout << "  " << b.name << ": " << (b.available ? "available (" + b.detail + ")" : "unavailable: " + b.detail) << "\n";
  for (const auto& d : jit::cuda::devices())
    std::cout << "  cuda device " << d.ordinal << ": " << d.name << ", " << d.arch << ", " << d.sm_count << " SMs, "
              << human_bytes(static_cast<std::int64_t>(d.total_mem)) << ", shared memory per block "
              << d.shared_mem_per_block / 1024 << " KiB (" << d.shared_mem_per_block_optin / 1024 << " KiB opt-in)\n";
  std::cout << "default target: " << jit::default_target().to_string() << "\n";
  return 0;
}

std::string range_text(const jit::Implementation& i) {
  if (i.backend == jit::Backend::Cpu) return "any CPU";
  auto bound = [](int c) { return c >= jit::kAnyCapability ? std::string("max") : std::to_string(c); };
  return "capability [" + bound(i.min_capability) + ", " + bound(i.max_capability) + "]";
}

// Params to show a choice with: bf16 on a GPU (f32 on the CPU) where the kernel takes it, 4096 for
// a row length; otherwise the first choice or the smallest allowed value.
jit::ParamSet sample_params(const jit::KernelSpec& k, const jit::Target& t) {
  jit::ParamSet p;
  for (const auto& spec : k.params) {
    if (spec.chain) continue;  // optional: shown without one
    if (spec.is_text()) {
      const std::string want = t.backend == jit::Backend::Cpu ? "f32" : "bf16";
      bool has = std::find(spec.choices.begin(), spec.choices.end(), want) != spec.choices.end();
      p.set(spec.name, has ? want : spec.choices.front());
    } else {
      p.set(spec.name, spec.name == "hidden" ? std::clamp<std::int64_t>(4096, spec.min, spec.max) : spec.min);
    }
  }
  return p;
}

// Every kernel, its implementations, and which one each target would get, with the reason.
int cmd_kernels(const std::vector<std::string>& target_texts) {
  std::vector<jit::Target> targets;
  for (const auto& t : target_texts) targets.push_back(jit::Target::parse(t));
  if (targets.empty()) {
    targets.push_back(jit::Target::cpu());
    if (jit::default_target().backend != jit::Backend::Cpu) targets.push_back(jit::default_target());
  }
  for (const auto& k : jit::registered_kernels()) {
    std::cout << k.name << ": " << k.summary << "\n";
    for (const auto& i : k.implementations) {
      std::string types;
      for (auto d : i.dtypes) types += (types.empty() ? "" : ",") + std::string(jit::dtype_name(d));
      std::string modes = i.inference && i.training ? "inference+training" : i.training ? "training" : "inference";
      std::cout << "  " << i.name << " v" << i.version << ": " << jit::backend_name(i.backend) << ", " << range_text(i)
                << ", priority " << i.priority << ", " << modes << (types.empty() ? "" : ", " + types)
                << (i.generic ? ", generic (the fallback)" : "") << (i.note.empty() ? "" : "; " + i.note) << "\n";
    }
    for (const auto& t : targets) {
      auto params = sample_params(k, t);
      std::cout << "  on " << t.to_string() << " (" << params.to_string() << "): ";
      try {
        auto c = jit::choose(k.name, params, t);
        std::cout << c.implementation << " v" << c.version << " (" << c.reason << ")\n";
      } catch (const jit::Error& e) {
        std::cout << "none: " << e.what() << "\n";
      }
    }
  }
  return 0;
}

// The shipped kernels as the Markdown page docs/kernels.md is (a test holds the page to it).
int cmd_kernels_markdown() {
  auto cell = [](std::string text) {  // a table cell: no pipe ends it early
    std::string out;
    for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  };
  auto value_text = [](const jit::ParamValue& v) {
    if (const auto* n = std::get_if<std::int64_t>(&v)) return std::to_string(*n);
    return std::get<std::string>(v);
  };
  std::cout << "# The kernels jitk ships\n\n"
               "<!-- Generated by `jitk info --kernels --markdown > docs/kernels.md`; the test \"docs: ...\" fails when it\n"
               "     and the code disagree. Edit the descriptors (include/jit/kernels/, kernel_sources/), not this page. -->\n\n"
               "One row a kernel: its name (manifests, `jitk`, Python), its typed descriptor in `jit::kernels`\n"
               "(`include/jit/kernels.hpp`), its params (allowed values; the default `jit::get<K>({})` and a manifest\n"
               "entry that leaves the param out take), its launch arguments in the order `k(...)` takes them\n"
               "(`T`: the `dtype`'s element type; `= v`: a default), and its implementations (`jitk info --kernels`\n"
               "says which one a target gets and why). A kernel takes at most "
            << jit::detail::ArgPack::kMaxArgs << " packed arguments.\n\n"
            << "| kernel | descriptor | computes | params | arguments | implementations |\n"
            << "|---|---|---|---|---|---|\n";
  int rows = 0;
  for (const auto& k : jit::registered_kernels()) {
    const jit::detail::DescriptorInfo* d = jit::detail::shipped_descriptor(k.name);
    if (!d) throw jit::Error(jit::ErrorCode::Internal, "kernel '" + k.name + "' has no typed descriptor in jit::kernels");
    std::string params;
    for (const auto& spec : k.params) {
      std::string one = "`" + spec.name + "`: ";
      if (spec.chain) one += "a fusion chain (default: none)";
      else if (spec.is_text()) one += jit::detail::join(spec.choices);
      else one += std::to_string(spec.min) + " to " + std::to_string(spec.max);
      if (!spec.chain) {
        const jit::ParamValue* def = jit::detail::omitted_param_value(k.name, spec);
        one += def ? " (default " + value_text(*def) + ")" : " (required)";
      }
      params += (params.empty() ? "" : "<br>") + one;
    }
    std::string args = std::to_string(d->args.size()) + ":";
    for (std::size_t i = 0; i < d->args.size(); ++i) {
      const auto& a = d->args[i];
      if (a.type == "?") throw jit::Error(jit::ErrorCode::Internal, k.name + ": argument '" + a.name + "' has a type the docs cannot name");
      args += std::string(i ? "," : "") + " `" + a.name + "` " + a.type + (a.default_value.empty() ? "" : " = " + a.default_value);
    }
    std::string impls;
    for (const auto& i : k.implementations) impls += (impls.empty() ? "" : ", ") + std::string("`") + i.name + "`";
    std::cout << "| `" << k.name << "` | `" << d->descriptor << "` | " << cell(k.summary) << " | " << cell(params) << " | "
              << cell(args) << " | " << impls << " |\n";
    ++rows;
  }
  if (rows != static_cast<int>(jit::detail::shipped_descriptors().size()))
    throw jit::Error(jit::ErrorCode::Internal, "a typed descriptor names no kernel of the catalog");
  return 0;
}

// The autotuning decisions in the index (jit/tuning.hpp).
int cmd_ls_tuning(bool json) {
  auto rows = jit::cache::tuning();
  if (json) {
    auto arr = nlohmann::json::array();
    for (const auto& r : rows)
      arr.push_back({{"kernel", r.kernel}, {"base_params", r.base_params}, {"shape_class", r.shape_class},
                     {"device", r.device}, {"choice", r.choice}, {"candidates", r.candidates}, {"best_ms", r.best_ms},
                     {"default_ms", r.default_ms}, {"tuning_ms", r.tuning_ms}, {"created", iso_time(r.created)}});
    std::cout << dump(arr) << "\n";
    return 0;
  }
  for (const auto& r : rows)
    std::printf("%s (%s) for %s on %s:\n  chose %s: %.3f ms, the base params %.3f ms (%.2fx); %lld candidates timed in %.0f ms, %s\n",
                printable(r.kernel).c_str(), printable(r.base_params).c_str(), printable(r.shape_class).c_str(),
                printable(r.device).c_str(), printable(r.choice).c_str(), r.best_ms,
                r.default_ms, r.best_ms > 0 ? r.default_ms / r.best_ms : 0.0, static_cast<long long>(r.candidates), r.tuning_ms,
                iso_time(r.created).c_str());
  std::printf("%zu tuning decisions\n", rows.size());
  return 0;
}

int cmd_ls(bool json) {
  auto rows = jit::cache::list();
  if (json) {
    auto arr = nlohmann::json::array();
    for (const auto& r : rows)
      arr.push_back({{"key", r.key}, {"kernel", r.kernel}, {"params", r.params}, {"backend", r.backend},
                     {"arch", r.arch}, {"compiler", r.compiler}, {"size_bytes", r.size_bytes},
                     {"compile_ms", r.compile_ms}, {"created", iso_time(r.created)},
                     {"last_used", iso_time(r.last_used)}, {"hits", r.hits}, {"implementation", r.implementation},
                     {"implementation_version", r.implementation_version}, {"launch", r.launch}});
    std::cout << dump(arr) << "\n";
    return 0;
  }
  for (auto& r : rows)
    for (auto* text : {&r.key, &r.kernel, &r.params, &r.backend, &r.arch, &r.compiler, &r.implementation, &r.launch}) *text = printable(*text);
  // Columns as wide as their longest value (params with fusion chains get long).
  int kernel_w = 14, params_w = 28, launch_w = 6;
  for (const auto& r : rows) {
    kernel_w = std::max(kernel_w, static_cast<int>(r.kernel.size()));
    params_w = std::max(params_w, static_cast<int>(r.params.size()));
    launch_w = std::max(launch_w, static_cast<int>(r.launch.size()));
  }
  std::printf("%-*s %-*s %-14s %-*s %-7s %-16s %10s %6s %-20s %s\n", kernel_w, "KERNEL", params_w, "PARAMS", "IMPLEMENTATION",
              launch_w, "LAUNCH", "BACKEND", "ARCH", "SIZE", "HITS", "LAST USED", "KEY");
  for (const auto& r : rows) {
    // Artifacts from before implementations (cache format 1) have none: `jitk prune --stale` removes them.
    std::string impl = r.implementation.empty() ? "-" : r.implementation + " v" + std::to_string(r.implementation_version);
    std::printf("%-*s %-*s %-14s %-*s %-7s %-16s %10s %6lld %-20s %s\n", kernel_w, r.kernel.c_str(), params_w, r.params.c_str(),
                impl.c_str(), launch_w, r.launch.empty() ? "-" : r.launch.c_str(), r.backend.c_str(), r.arch.c_str(),
                human_bytes(r.size_bytes).c_str(), static_cast<long long>(r.hits), iso_time(r.last_used).c_str(),
                r.key.c_str());
  }
  std::printf("%zu artifacts\n", rows.size());
  return 0;
}

// The fleet's counters, kept in Redis by every process ("" when no remote is configured).
std::optional<jit::cache::RemoteStats> remote_counters(std::string* problem) {
  try {
    return jit::cache::remote_stats(/*fleet=*/true);
  } catch (const jit::Error& e) {
    *problem = e.what();
    return std::nullopt;
  }
}

int cmd_stats(bool json) {
  auto s = jit::cache::stats();
  std::string remote_problem;
  auto r = remote_counters(&remote_problem);
  if (json) {
    nlohmann::json j = {{"root", jit::cache::root().string()}, {"entries", s.entries}, {"bytes", s.bytes},
                        {"hits", s.hits}, {"misses", s.misses}, {"compiles", s.compiles}};
    if (r)
      j["remote"] = {{"url", r->url}, {"mode", r->mode}, {"hits", r->hits}, {"misses", r->misses}, {"compiles", r->compiles},
                     {"waits", r->waits}, {"wait_timeouts", r->wait_timeouts}, {"errors", r->errors},
                     {"bad_entries", r->bad_entries}, {"bytes_read", r->bytes_read}, {"bytes_written", r->bytes_written}};
    else if (!remote_problem.empty())
      j["remote"] = {{"error", remote_problem}};
    std::cout << dump(j) << "\n";
    return 0;
  }
  std::cout << "cache root:  " << printable(jit::cache::root().string()) << "\n"
            << "entries:     " << s.entries << "\n"
            << "size:        " << human_bytes(s.bytes) << "\n"
            << "disk hits:   " << s.hits << "\n"
            << "misses:      " << s.misses << "\n"
            << "compiles:    " << s.compiles << "\n";
  if (r)
    std::cout << "remote:      " << printable(r->url) << " (" << r->mode << "), the fleet's counters:\n"
              << "  hits:          " << r->hits << "\n"
              << "  misses:        " << r->misses << "\n"
              << "  compiles:      " << r->compiles << "\n"
              << "  waits:         " << r->waits << " (" << r->wait_timeouts << " past JITK_REMOTE_WAIT)\n"
              << "  errors:        " << r->errors << " (this process's; other processes' are in their logs)\n"
              << "  bad entries:   " << r->bad_entries << "\n"
              << "  bytes read:    " << human_bytes(r->bytes_read) << "\n"
              << "  bytes written: " << human_bytes(r->bytes_written) << "\n";
  else if (!remote_problem.empty())
    std::cout << "remote:      unreachable: " << printable(remote_problem) << "\n";
  return 0;
}

int cmd_remote_ping() {
  double ms = 0;
  const std::string why = jit::cache::remote_ping(&ms);
  auto r = jit::cache::remote_stats(/*fleet=*/false);
  const std::string url = r ? r->url : "the remote";
  if (!why.empty()) {
    std::cout << url << ": unreachable: " << why << "\n";
    return 1;
  }
  std::printf("%s: PONG in %.2f ms (%s)\n", url.c_str(), ms, r ? r->mode.c_str() : "");
  return 0;
}

int cmd_push() {
  const auto n = jit::cache::push_to_remote();
  std::cout << "pushed " << n << " artifacts to the remote cache\n";
  return 0;
}

int cmd_explain(const std::string& kernel, const std::string& params, const std::string& target) {
  const auto t = target.empty() ? jit::Target::cpu() : jit::Target::parse(target);
  for (const auto& c : jit::cache::explain_key(kernel, params, t)) {
    std::string v = c.value;  // a text a terminal shows as it is: no control characters
    for (char& ch : v)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
    std::cout << c.name << ": " << v << "\n";
  }
  return 0;
}

int cmd_clear(const std::string& kernel) {
  auto c = kernel.empty() ? jit::cache::clear() : jit::cache::clear_kernel(kernel);
  std::cout << "cleared " << c.entries << " artifacts" << (kernel.empty() ? "" : " of " + kernel) << ", freed "
            << human_bytes(c.bytes) << " (" << printable(jit::cache::root().string()) << ")\n";
  return 0;
}

// A size or an age given on the command line or in JITK_CACHE_MAX_SIZE: read strictly, or an
// error naming what was given, why it is not one, and the forms there are.
std::int64_t size_or_throw(const std::string& what, const std::string& text) {
  std::string why;
  if (auto bytes = jit::detail::parse_size(text, &why)) return *bytes;
  throw jit::Error(jit::ErrorCode::InvalidParams, what + " '" + printable(text) + "' is not a size (" + why + "); give " +
                                                     jit::detail::kSizeForms);
}
std::int64_t age_or_throw(const std::string& what, const std::string& text) {
  std::string why;
  if (auto seconds = jit::detail::parse_age(text, &why)) return *seconds;
  throw jit::Error(jit::ErrorCode::InvalidParams, what + " '" + printable(text) + "' is not an age (" + why + "); give " +
                                                     jit::detail::kAgeForms);
}

int cmd_prune(const std::string& max_size, const std::string& older_than, bool stale) {
  // Every argument is checked before anything is removed.
  std::optional<std::int64_t> bytes, seconds;
  if (!max_size.empty()) bytes = size_or_throw("--max-size", max_size);
  if (!older_than.empty()) seconds = age_or_throw("--older-than", older_than);
  if (!stale && !bytes && !seconds) {
    const char* env = std::getenv("JITK_CACHE_MAX_SIZE");
    if (!env || !*env) throw jit::Error(jit::ErrorCode::InvalidParams, "give --max-size SIZE and/or --older-than AGE (or set JITK_CACHE_MAX_SIZE)");
    bytes = size_or_throw("JITK_CACHE_MAX_SIZE", env);
  }
  if (stale) {
    auto r = jit::cache::prune_stale();
    std::cout << "pruned " << r.removed.entries << " stale artifacts (implementations or versions this jitk no longer ships), freed "
              << human_bytes(r.removed.bytes) << "\n";
    if (r.kept_unknown) {
      std::string names;
      for (const auto& u : r.unknown) names += (names.empty() ? "" : ", ") + u;
      std::cout << "kept " << r.kept_unknown << " artifacts of kernels or implementations jitk does not ship (" << names
                << "): only the program that registered them knows their versions\n";
    }
    if (!bytes && !seconds) return 0;
  }
  auto c = jit::cache::prune(bytes, seconds);
  std::cout << "pruned " << c.entries << " artifacts, freed " << human_bytes(c.bytes) << "\n";
  return 0;
}

int cmd_export(const std::string& file, const std::string& target) {
  std::optional<jit::Target> t;
  if (!target.empty()) t = jit::Target::parse(target);
  auto r = jit::cache::export_pack(file, t);
  for (const auto& s : r.skipped) std::cout << "skipped: " << s << "\n";
  std::cout << "exported " << r.artifacts << " artifacts (" << human_bytes(r.bytes) << ") and " << r.tuning
            << " tuning decisions" << (t ? " for " + t->to_string() : "") << " to " << printable(file) << "\n";
  return 0;
}

int cmd_import(const std::string& file) {
  auto r = jit::cache::import_pack(file);
  for (const auto& s : r.stale) std::cout << "stale, not imported: " << s << "\n";
  for (const auto& s : r.unchecked) std::cout << "imported unchecked (its backend cannot compile here): " << s << "\n";
  std::cout << "imported " << r.imported << " artifacts, " << r.already << " already cached, " << r.stale.size()
            << " stale left out; " << r.tuning_imported << " tuning decisions, " << r.tuning_already << " already there ("
            << printable(jit::cache::root().string()) << ")\n";
  return 0;
}

int cmd_verify(bool fix) {
  auto problems = jit::cache::verify(fix);
  for (const auto& p : problems) std::cout << (fix ? "fixed: " : "problem: ") << printable(p.key) << ": " << printable(p.what) << "\n";
  std::cout << (problems.empty() ? "cache is consistent" : std::to_string(problems.size()) + " problem(s)")
            << (fix && !problems.empty() ? ", repaired" : "") << "\n";
  return problems.empty() || fix ? 0 : 1;
}

// Ctrl-C during a warm: the first stops new compiles (those running finish and are stored whole),
// the second ends the process at once (a store is a rename: still nothing half-written).
std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) {
  if (g_interrupted.exchange(true)) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  const char msg[] = "\njitk warm: interrupted: finishing the compiles running, starting no more (Ctrl-C again to stop now)\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
}

// The progress line a terminal shows under the finished items: a bar, counts, elapsed time.
std::string progress_bar(std::size_t done, std::size_t total, int compiled, int cached, int failed, double seconds) {
  constexpr int kWidth = 30;
  const int filled = total ? static_cast<int>(kWidth * done / total) : kWidth;
  std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %zu/%zu  %d compiled, %d cached, %d failed  %.1f s", bar.c_str(), done, total,
                compiled, cached, failed, seconds);
  return buf;
}

// Tunes each item's shapes one at a time (timings must not share the machine with compiles).
int tune_items(const std::vector<jit::cache::WarmItem>& items) {
  int failed = 0, tuned = 0, reused = 0;
  for (const auto& item : items)
    for (const auto& shape : item.tune) {
      std::string dims;
      for (auto v : shape) dims += (dims.empty() ? "" : "x") + std::to_string(v);
      const auto t0 = std::chrono::steady_clock::now();
      try {
        const auto* tuner = jit::detail::tuner_for(item.kernel);
        const jit::TuneOutcome o = tuner->tune(item.params, shape, item.target);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        (o.reused ? reused : tuned) += 1;
        std::printf("%s %s (%s) %s for %s (%s): %s [%.0f ms]\n", o.reused ? "reused" : "tuned ", item.kernel.c_str(),
                    item.params.to_string().c_str(), item.target.to_string().c_str(), dims.c_str(), o.shape_class.c_str(),
                    o.choice.c_str(), ms);
      } catch (const std::exception& e) {
        ++failed;
        std::printf("FAILED tuning %s (%s) for %s: %s\n", item.kernel.c_str(), item.params.to_string().c_str(), dims.c_str(),
                    printable(e.what(), /*keep_lines=*/true).c_str());
      }
      std::fflush(stdout);
    }
  std::printf("tune: %d tuned, %d reused from the cache index, %d failed\n", tuned, reused, failed);
  return failed ? 1 : 0;
}

int cmd_warm(const std::string& manifest, int jobs, bool tune) {
  using Outcome = jit::cache::WarmResult::Outcome;
  const auto all_items = jit::cache::parse_manifest(manifest);
  // With --tune an entry with shapes is tuned rather than compiled first: tuning compiles the
  // candidates it times and keeps only the winner (compiled here first, its base params would stay).
  const bool tuning = tune && jit::detail::autotune_enabled();
  std::vector<jit::cache::WarmItem> items;
  for (const auto& item : all_items)
    if (!tuning || item.tune.empty()) items.push_back(item);
  const bool tty = ::isatty(STDOUT_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::mutex out;
  std::size_t done = 0;
  int compiled = 0, cached = 0, failed = 0;
  auto draw_bar = [&] {  // holding `out`
    std::printf("\r\033[K%s", progress_bar(done, items.size(), compiled, cached, failed, seconds()).c_str());
    std::fflush(stdout);
  };
  std::signal(SIGINT, on_interrupt);
  // On a terminal the bar's clock moves while long compiles run.
  std::atomic<bool> finished{false};
  std::thread ticker;
  if (tty)
    ticker = std::thread([&] {
      while (!finished) {
        {
          std::lock_guard lock(out);
          draw_bar();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  auto results = jit::cache::warm(
      items, jobs,
      [&](const jit::cache::WarmResult& r) {
        std::lock_guard lock(out);
        ++done;
        const char* what = r.outcome == Outcome::Compiled ? "compiled" : r.outcome == Outcome::AlreadyCached ? "cached  " : "FAILED  ";
        (r.outcome == Outcome::Compiled ? compiled : r.outcome == Outcome::AlreadyCached ? cached : failed) += 1;
        if (tty) std::printf("\r\033[K");
        std::printf("[%zu/%zu] %s %s (%s) %s %.1f ms\n", done, items.size(), what, r.item->kernel.c_str(),
                    r.item->params.to_string().c_str(), r.item->target.to_string().c_str(), r.ms);
        if (!r.error.empty()) std::printf("    %s\n", printable(r.error, /*keep_lines=*/true).c_str());
        if (tty) draw_bar();
        std::fflush(stdout);
      },
      &g_interrupted);
  finished = true;
  if (ticker.joinable()) ticker.join();
  std::signal(SIGINT, SIG_DFL);
  if (tty) std::printf("\r\033[K");
  const auto not_started = std::count_if(results.begin(), results.end(), [](const auto& r) { return r.outcome == Outcome::NotStarted; });
  const double wall = seconds();
  std::printf("warm: %zu kernels: %d compiled, %d already cached, %d failed", items.size(), compiled, cached, failed);
  if (not_started) std::printf(", %ld not started (interrupted)", static_cast<long>(not_started));
  std::printf(" in %.2f s (%.1f kernels/s, %d jobs)\n", wall, wall > 0 ? (compiled + cached + failed) / wall : 0.0,
              std::max(1, std::min<int>(jobs, static_cast<int>(items.size()))));
  // Items to compile were compiled for nothing when the cache cannot keep them: say so and why.
  if (auto why = jit::cache::unavailable_reason(); !why.empty() && cached < static_cast<int>(items.size()))
    std::printf("warm: nothing was kept: the cache runs from memory only (%s)\n", printable(why).c_str());
  if (not_started) return 130;
  const std::size_t shapes = std::accumulate(all_items.begin(), all_items.end(), std::size_t{0},
                                             [](std::size_t n, const auto& i) { return n + i.tune.size(); });
  if (!tune) {
    if (shapes) std::printf("warm: %zu shapes to tune in the manifest; `jitk warm --tune` tunes them\n", shapes);
    return failed ? 1 : 0;
  }
  if (!jit::detail::autotune_enabled()) std::printf("warm --tune: JITK_AUTOTUNE=0: nothing is timed, the base params stand\n");
  const int tune_rc = tune_items(all_items);
  return failed ? 1 : tune_rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"jitk: inspect, warm, verify and clear the jitk kernel cache"};
  app.require_subcommand(1);
  bool json = false, fix = false;
  std::string manifest;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  auto* info = app.add_subcommand("info", "backends, cache root and size");
  bool kernels = false, stale = false;
  std::vector<std::string> targets;
  info->add_flag("--kernels", kernels, "every kernel, its implementations, and which one each target gets, and why");
  bool markdown = false;
  info->add_flag("--markdown", markdown, "with --kernels: the shipped kernels as a Markdown table (docs/kernels.md)");
  info->add_option("--target", targets, "with --kernels: a target to choose for (e.g. cuda:sm_90; repeatable; default: cpu and the GPU)");
  auto* ls = app.add_subcommand("ls", "one row per cached artifact");
  ls->add_flag("--json", json, "print a JSON array");
  bool tuning = false;
  ls->add_flag("--tuning", tuning, "the autotuning decisions instead of the artifacts");
  auto* stats = app.add_subcommand("stats", "entries, bytes, hits, misses, compiles");
  stats->add_flag("--json", json, "print a JSON object");
  std::string kernel, max_size, older_than;
  auto* clear = app.add_subcommand("clear", "remove every artifact and index row (or one kernel's)");
  clear->add_option("--kernel", kernel, "only this kernel's artifacts");
  auto* prune = app.add_subcommand("prune", "evict least recently used artifacts down to a size, or those unused for a time");
  prune->add_option("--max-size", max_size, "e.g. 2G, 500M (default: $JITK_CACHE_MAX_SIZE)");
  prune->add_option("--older-than", older_than, "e.g. 30d, 12h");
  prune->add_flag("--stale", stale, "remove artifacts of implementation versions this jitk no longer ships");
  auto* verify = app.add_subcommand("verify", "check every index row against its blob (exit 1 on problems)");
  verify->add_flag("--fix", fix, "drop what is damaged or orphaned");
  auto* warm = app.add_subcommand("warm", "compile every specialization a manifest lists");
  warm->add_option("manifest", manifest, "TOML manifest ([[kernel]] name, target, params)")->required()->check(CLI::ExistingFile);
  std::vector<std::string> kernel_modules;
  warm->add_option("--kernels", kernel_modules,
                   "a shared library of the program's own kernels (JITK_KERNEL_MODULE, jit/kernel_module.hpp) to load "
                   "before reading the manifest (repeatable)");
  bool tune = false;
  warm->add_flag("--tune", tune, "then tune each entry's `tune = [[m, n, k], ...]` shapes (one at a time), keeping the decisions");
  // Digits only, as every number jitk reads: CLI11 alone would take "0x10" as 16 and " 5" as 5.
  const CLI::Validator digits_only(
      [](std::string& text) {
        return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos ? std::string()
                                                                                          : "'" + printable(text) + "' is not a whole number (digits only)";
      },
      "");
  warm->add_option("-j,--jobs", jobs, "parallel compiles (default: all cores)")
      ->check(digits_only)->check(CLI::Range(1, 1 << 16).description("")) ->option_text("N >= 1");

  std::string pack, export_target;
  auto* exp = app.add_subcommand("export", "pack the cache's artifacts (and index rows) into one file");
  exp->add_option("file", pack, "the pack to write")->required();
  exp->add_option("--target", export_target, "only this target's artifacts (cpu, cuda, cuda:sm_90)");
  auto* imp = app.add_subcommand("import", "verify a pack and merge what this machine can use into the cache");
  imp->add_option("file", pack, "a pack made by jitk export")->required()->check(CLI::ExistingFile);

  bool push = false;
  warm->add_flag("--push", push, "then copy every local artifact the remote cache (JITK_REMOTE) lacks into it");
  imp->add_flag("--push", push, "then copy every local artifact the remote cache (JITK_REMOTE) lacks into it");
  auto* remote = app.add_subcommand("remote", "the fleet's remote cache (JITK_REMOTE)");
  remote->require_subcommand(1);
  auto* ping = remote->add_subcommand("ping", "connect, authenticate, PING (exit 1 when unreachable)");
  auto* push_cmd = remote->add_subcommand("push", "copy every local artifact the remote lacks into it");
  std::string explain_kernel, explain_params, explain_target;
  auto* explain = app.add_subcommand("explain", "print every component of a kernel's cache key (diff two machines' outputs)");
  explain->add_option("kernel", explain_kernel, "a kernel name (jitk info --kernels)")->required();
  explain->add_option("params", explain_params, "e.g. dtype=f32,hidden=4096")->required();
  explain->add_option("--target", explain_target, "cpu (default), cuda:sm_90, hip:gfx90a");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*info && !kernels && !targets.empty())
      throw jit::Error(jit::ErrorCode::InvalidParams, "--target goes with --kernels (jitk info --kernels --target cuda:sm_90)");
    if (*info && markdown && (!kernels || !targets.empty()))
      throw jit::Error(jit::ErrorCode::InvalidParams, "--markdown goes with --kernels alone (jitk info --kernels --markdown)");
    if (*info && markdown) return cmd_kernels_markdown();
    if (*info) return kernels ? cmd_kernels(targets) : cmd_info();
    if (*ls) return tuning ? cmd_ls_tuning(json) : cmd_ls(json);
    if (*stats) return cmd_stats(json);
    if (*clear) return cmd_clear(kernel);
    if (*prune) return cmd_prune(max_size, older_than, stale);
    if (*verify) return cmd_verify(fix);
    if (*warm) {
      for (const auto& m : kernel_modules) jit::load_kernel_module(m);
      const int rc = cmd_warm(manifest, jobs, tune);
      return push && rc == 0 ? cmd_push() : rc;
    }
    if (*exp) return cmd_export(pack, export_target);
    if (*imp) {
      const int rc = cmd_import(pack);
      return push && rc == 0 ? cmd_push() : rc;
    }
    if (*ping) return cmd_remote_ping();
    if (*push_cmd) return cmd_push();
    if (*explain) return cmd_explain(explain_kernel, explain_params, explain_target);
  } catch (const jit::Error& e) {
    std::cerr << "jitk: error (" << jit::to_string(e.code()) << "): " << printable(e.what(), /*keep_lines=*/true) << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Never an abort: whatever escaped is still a message and an exit status.
    std::cerr << "jitk: error: " << printable(e.what(), /*keep_lines=*/true) << "\n";
    return 2;
  }
  return 0;
}
