// Splitting a kernel's work across the interpreter's threads
// (ExecutionContext). Work is cut into a few contiguous tasks per thread
// (kTasksPerThread, so that an idle thread takes over the tasks of one the
// OS has descheduled); thread i first runs its own contiguous share of the
// tasks (the same part of every op, so data it wrote stays in its cache),
// then steals from the others' back ends. Each task uses the scratch
// part of the thread that runs it, and every output element is computed by
// one task in the same order as on one thread, so the results do not depend
// on the number of threads (bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "runtime/kernels/kernel.h"

namespace dfarm::runtime {

// Tasks per thread a kernel cuts its work into (when it is big enough).
constexpr int kTasksPerThread = 2;

// A pool of `threads` - 1 worker threads (the thread that calls Run() is
// the other one), created once (the interpreter's, in its constructor).
// Unlike pthreadpool, which waits at the end of every parallel region for
// each worker to check in (a worker the OS has descheduled then stalls the
// op for a time slice: measured 568 ms a run at 4 threads on 2 busy cores
// against 1.2 ms), Run() returns as soon as every task is done: a worker
// that wakes late finds nothing left and sleeps again. Workers spin for a
// short while after a task set (the next op comes quickly within an
// Invoke) and then sleep on a condition variable. A task is claimed with
// one compare-and-swap on its thread's share (no lock: 12 one-row tasks of
// a 12x12x128 depthwise conv took 6.6 µs on 2 threads with a mutex per
// claim, 5.2 µs without; BM_PoolRun, BM_Depthwise in model_benchmark.cc).
// Not reentrant: one thread calls Run() at a time. With threads <= 1 there
// are no workers.
class ThreadPool {
 public:
  explicit ThreadPool(int threads = 1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }

  // task(arg, t, slot) for every t in [0, tasks), on the calling thread
  // (slot 0) and the workers (slot i for worker i); returns when all are done.
  void Run(size_t tasks, void (*task)(void*, size_t, int), void* arg) const;

 private:
  struct State;
  void Work(int slot) const;

  int threads_ = 1;
  std::unique_ptr<State> state_;  // null without workers
};

// Threads a node may use: its context's num_threads, or 1 without a context.
inline int NumThreads(const Node& node) {
  return node.context != nullptr ? node.context->num_threads : 1;
}

// Part `slot` of the node's scratch (ExecutionContext::ThreadScratch); null
// without a context (then the node asked for none: CheckScratch).
inline std::byte* NodeScratch(const Node& node, int slot) {
  return node.context != nullptr ? node.context->ThreadScratch(slot) : nullptr;
}

// InvalidArgument when the node asked for scratch (scratch_bytes) but has
// none: it runs outside an interpreter, or before its AllocateTensors().
Status CheckScratch(const Node& node);

// Runs task(arg, t, slot) for every t in [0, tasks), on the context's thread
// pool (the calling thread taking part) or, without one, in order on the
// calling thread; returns when all are done. `slot` (< num_threads) is the
// running thread's: no two tasks running at once share one, so a task may
// use context->ThreadScratch(slot). Allocates nothing.
void RunTasks(const ExecutionContext* context, size_t tasks, void (*task)(void*, size_t, int),
              void* arg);

// f(t, slot) for t in [0, tasks), as RunTasks(); f must be safe to call
// from several threads at once.
template <typename F>
void ParallelFor(const ExecutionContext* context, size_t tasks, F&& f) {
  using Fn = std::remove_reference_t<F>;
  RunTasks(
      context, tasks, [](void* arg, size_t t, int slot) { (*static_cast<Fn*>(arg))(t, slot); },
      const_cast<std::remove_const_t<Fn>*>(&f));
}

// How many tasks to cut `units` units of work into for `threads` threads:
// kTasksPerThread per thread, no more than the units, at least 1.
inline int64_t TaskCount(int64_t units, int threads) {
  if (threads <= 1 || units <= 1) return 1;
  return units < int64_t{kTasksPerThread} * threads ? units : int64_t{kTasksPerThread} * threads;
}

// Part `part` of [0, n) cut into `parts` contiguous ranges whose inner
// bounds are the multiples of `align` (> 0) nearest to the exact cuts
// (part * n / parts); a part may be empty when there are fewer units of
// `align` than parts.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range SplitRange(int64_t n, int parts, int part, int64_t align = 1);

// f(begin, end) over [0, n) split into tasks of contiguous ranges (inner
// bounds multiples of 16), or f(0, n) on the calling thread
// when n is below `min_parallel` or there is one thread. For elementwise
// kernels, whose elements do not depend on each other.
template <typename F>
void ParallelRanges(const Node& node, int64_t n, int64_t min_parallel, F&& f) {
  const int threads = NumThreads(node);
  if (threads <= 1 || n < min_parallel) {
    f(int64_t{0}, n);
    return;
  }
  const int tasks = static_cast<int>(TaskCount((n + 4095) / 4096, threads));
  ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int) {
    const Range r = SplitRange(n, tasks, static_cast<int>(t), 16);
    if (r.size() > 0) f(r.begin, r.end);
  });
}

// Elements below which an elementwise kernel stays on one thread.
constexpr int64_t kMinParallelElements = 16384;

}  // namespace dfarm::runtime
