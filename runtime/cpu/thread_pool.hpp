// The CPU backend's worker threads: splits a range of work items over all cores.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace jit::detail {

class ThreadPool {
 public:
  using RangeFn = void (*)(void* context, std::int64_t begin, std::int64_t end);

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads from $JITK_NUM_THREADS, else every core.
  static ThreadPool& instance();
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn over [0, n) in chunks of at least min_grain items, on the pool and the calling
  // thread; returns when all are done. Called from inside a task, it runs inline.
  void parallel_for(std::int64_t n, std::int64_t min_grain, RangeFn fn, void* context);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  // the job in flight
  RangeFn fn_ = nullptr;
  void* context_ = nullptr;
  std::int64_t n_ = 0, chunk_ = 0, chunks_ = 0;
  std::int64_t next_chunk_ = 0;   // guarded by mutex_
  std::int64_t done_chunks_ = 0;  // guarded by mutex_: the job is over when it reaches chunks_
};

}  // namespace jit::detail
