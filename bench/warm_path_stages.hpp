// The stages of a warm first use (a cached kernel's first jit::get in a new process), in the order
// jit::get takes them on a warm hit (the request key remembered: no text rendered), each timed the
// first time this process does it. Shared by jitk_gpu_bench (--child-first-use with
// JITK_BENCH_BREAKDOWN=1, on a GPU) and jitk_bench (--child-host-path: the same host side for a named
// CUDA arch without a GPU, or for the CPU).
#pragma once
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/process_tiers.hpp"
#include "jit/kernel_catalog.hpp"
#include "jit/specializer.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/get_kernel.hpp"
#include "runtime/request_key.hpp"
#include "runtime/selection.hpp"

namespace jitk_bench {

struct WarmStages {
  std::vector<std::pair<std::string, double>> ms;  // stage, milliseconds
  std::vector<long> faults;                         // each stage's minor page faults (first touches)
  jit::detail::Specialization s;                    // the whole resolve (for the load after)
  std::optional<std::vector<char>> bytes;           // the blob read (nullopt: not cached)
  bool remembered = false;                          // the request key named the whole resolve's key
};

// device: the target's driver as a get takes it (needs the device); else the compiling driver (a
// named arch needs no device). Prints each stage to stderr as "breakdown: <stage> <ms> ms".
inline WarmStages warm_path_stages(const jit::Target& target, const char* kernel, const jit::ParamSet& params, bool device) {
  using namespace jit::detail;
  using clock = std::chrono::steady_clock;
  WarmStages out;
  auto minor_faults = [] {
    struct rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  };
  auto stage = [&](const char* what, auto&& fn) {
    const long f0 = minor_faults();
    auto t0 = clock::now();
    fn();
    const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    const long faults = minor_faults() - f0;
    out.ms.emplace_back(what, ms);
    out.faults.push_back(faults);
    std::fprintf(stderr, "breakdown: %-48s %.4f ms (%ld page faults)\n", what, ms, faults);
  };
  stage("cache open (root checks, no index)", [] { process_tiers(); });
  const Compiler* compiler = nullptr;
  const BackendDriver* driver = nullptr;
  stage("driver + compiler for the target", [&] {
    driver = device ? &driver_for(target) : &compiling_driver_for(target);
    compiler = &driver->compiler(target);
  });
  const KernelDef& def = find_kernel(kernel);
  jit::ParamSet canonical;
  Selected chosen;
  SourceUnit described;
  stage("validate + choose + describe (no text rendered)", [&] {
    canonical = validate_params(def, params);
    chosen = select_implementation(def, canonical, target, capability_of_arch(compiler->arch()), {});
    if (!chosen.impl.arch_suffix.empty() && !compiler->arch().ends_with(chosen.impl.arch_suffix))
      compiler = &driver->compiler(jit::Target{target.backend, compiler->arch() + chosen.impl.arch_suffix, target.device});
    described = describe_unit(def, chosen.impl, canonical);
  });
  UnitTexts texts;
  stage("kernel texts read", [&] { texts = unit_texts(def, chosen.impl); });
  std::string toolkit;
  stage("toolkit header fingerprint (memo + stats)", [&] {
    SourceUnit u = described;
    u.main = texts.text;
    u.headers = texts.headers;
    toolkit = compiler->external_headers_fingerprint(u);
  });
  std::string request;
  std::optional<std::string> key;
  const MemoStore* memos = process_tiers().stack.request_keys();
  stage("request key + remembered key read", [&] {
    request = request_key(described, texts, target.backend, *compiler, toolkit, chosen.mapped);
    if (memos && !request.empty()) key = remembered_key(*memos, request);
  });
  // Not a stage of a warm get: the key it must match, and the Specialization the load takes.
  out.s = resolve(kernel, params, target);
  out.remembered = key && *key == out.s.key;
  if (!key) {
    std::fprintf(stderr, "breakdown: no remembered key (request key '%s'); remembered for the next process\n", request.c_str());
    if (memos && !request.empty()) remember_key(*memos, request, out.s.key);
  } else if (*key != out.s.key) {
    std::fprintf(stderr, "breakdown: the remembered key %s is not the whole resolve's %s\n", key->c_str(), out.s.key.c_str());
  }
  // meta_of(s): what the blob must be bound to (kernel, params, backend, arch, compiler, implementation).
  stage("blob read + verify (bound to key and meta)",
        [&] { out.bytes = process_tiers().disk->get(out.s.key, meta_of(out.s), Count::Hits); });
  return out;
}

}  // namespace jitk_bench
