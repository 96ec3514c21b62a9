// A loaded CPU kernel: its entry point run over the work items on the thread pool, and what keeps its code mapped.
#pragma once
#include <cstdint>
#include <memory>

#include "jit/jit.hpp"
#include "runtime/cpu/thread_pool.hpp"

namespace jit::detail {

// What every CPU kernel text defines through JITK_ENTRY (named kEntrySymbol): void (void* const* args, i64 begin, i64 end).
using CpuEntry = void (*)(void* const*, std::int64_t, std::int64_t);

class CpuKernel final : public LoadedKernel {
 public:
  // `code` keeps the memory the entry lives in (null where another owner keeps it for the process).
  explicit CpuKernel(CpuEntry entry, std::shared_ptr<const void> code = nullptr) : entry_(entry), code_(std::move(code)) {}
  Backend backend() const override { return Backend::Cpu; }
  void launch(const ArgPack& args) const override {
    struct Call {
      CpuEntry entry;
      void* const* args;
    } call{entry_, args.pointers()};
    ThreadPool::instance().parallel_for(
        args.work_items, args.min_grain,
        [](void* c, std::int64_t b, std::int64_t e) {
          auto* call = static_cast<Call*>(c);
          call->entry(call->args, b, e);
        },
        &call);
  }

 private:
  CpuEntry entry_;
  std::shared_ptr<const void> code_;
};

}  // namespace jit::detail
