// Warming the cache from a manifest's items: compiles what is not on disk, `jobs` at a time.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "jit/cache.hpp"
#include "jit/registry.hpp"
#include "runtime/get_kernel.hpp"

namespace jit::cache {

std::vector<WarmResult> warm(const std::vector<WarmItem>& items, int jobs,
                             const std::function<void(const WarmResult&)>& on_done, const std::atomic<bool>* cancel) {
  std::vector<WarmResult> results(items.size());
  std::atomic<std::size_t> next{0};
  std::mutex report;
  auto work = [&] {
    for (std::size_t i; (i = next++) < items.size();) {
      WarmResult& r = results[i];
      r.item = &items[i];
      if (cancel && cancel->load()) continue;  // stays NotStarted
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
  // Workers choose implementations as the calling thread would: with its kernel mappings.
  auto mapping = KernelMapping::current();
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j)
    threads.emplace_back([&] {
      KernelMapping adopted(mapping);
      work();
    });
  work();
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace jit::cache
