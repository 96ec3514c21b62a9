// A fixed pool of workers woken per job; chunks are handed out under one mutex (jobs are coarse).
#include "runtime/cpu/thread_pool.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "support/logging.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {
thread_local bool t_in_task = false;
// Chunks per thread: enough to even out uneven cores, few enough to keep hand-out cheap.
constexpr std::int64_t kChunksPerThread = 4;
// More threads than this is a typo, not a machine.
constexpr long kMaxThreads = 4096;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::instance() {
  static ThreadPool pool([] {
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    if (const char* env = std::getenv("JITK_NUM_THREADS"); env && *env) {
      // Digits only: no sign, no spaces, no hex (strtol would take " 8" and "+8").
      const std::string text = env;
      long n = 0;
      const bool digits = text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
      if (digits) n = std::stol(text);
      if (digits && n > 0 && n <= kMaxThreads) return static_cast<int>(n);
      warn_once("num-threads", "JITK_NUM_THREADS='" + printable(text) + "' is not a thread count in [1, " +
                                   std::to_string(kMaxThreads) + "]; using all " + std::to_string(cores) + " cores");
    }
    return cores;
  }());
  return pool;
}

// Claims chunks until none is left. The job's fields are read under the lock that claims a chunk,
// and the job cannot change before that chunk is counted done, so a worker that wakes late (after
// the job it was woken for) finds nothing or works on the job then current, never a stale one.
void ThreadPool::run_chunks() {
  for (;;) {
    RangeFn fn;
    void* context;
    std::int64_t begin, end;
    {
      std::lock_guard lock(mutex_);
      if (next_chunk_ >= chunks_) return;
      const std::int64_t c = next_chunk_++;
      fn = fn_;
      context = context_;
      begin = c * chunk_;
      end = std::min(n_, begin + chunk_);
    }
    fn(context, begin, end);
    std::lock_guard lock(mutex_);
    if (++done_chunks_ == chunks_) done_.notify_one();
  }
}

void ThreadPool::worker_loop() {
  t_in_task = true;
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_chunks();
  }
}

void ThreadPool::parallel_for(std::int64_t n, std::int64_t min_grain, RangeFn fn, void* context) {
  if (n <= 0) return;
  min_grain = std::max<std::int64_t>(1, min_grain);
  std::int64_t chunks = std::min((n + min_grain - 1) / min_grain, kChunksPerThread * size());
  if (chunks <= 1 || workers_.empty() || t_in_task) {
    fn(context, 0, n);
    return;
  }
  std::lock_guard call(call_mutex_);
  {
    std::lock_guard lock(mutex_);
    fn_ = fn;
    context_ = context;
    n_ = n;
    chunk_ = (n + chunks - 1) / chunks;
    chunks_ = (n + chunk_ - 1) / chunk_;
    next_chunk_ = 0;
    done_chunks_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  t_in_task = true;
  run_chunks();
  t_in_task = false;
  // Waits for the chunks, not for the workers: one the OS has not run yet (a first launch, a busy
  // machine) is not waited for when the others have done its share.
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return done_chunks_ == chunks_; });
}

}  // namespace jit::detail
