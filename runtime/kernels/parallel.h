// Splitting a kernel's work across the interpreter's threads
// (ExecutionContext). Work is cut into as many contiguous parts as there are
// threads, part t using thread scratch part t, and every output element is
// computed by one part in the same order as on one thread, so the results do
// not depend on the number of threads (bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "runtime/kernels/kernel.h"

namespace dfarm::runtime {

// Owns a pthreadpool of `threads` threads (the calling thread counts as
// one), created once (the interpreter's, in its constructor). With threads
// <= 1, or where the build has no pthreadpool or it cannot start threads,
// there is no pool and threads() is 1.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  pthreadpool* get() const { return pool_; }  // null: one thread
  int threads() const { return threads_; }

 private:
  pthreadpool* pool_ = nullptr;
  int threads_ = 1;
};

// Threads a node may use: its context's num_threads, or 1 without a context.
inline int NumThreads(const Node& node) {
  return node.context != nullptr ? node.context->num_threads : 1;
}

// InvalidArgument when the node asked for scratch (scratch_bytes) but has
// none: it runs outside an interpreter, or before its AllocateTensors().
Status CheckScratch(const Node& node);

// Runs task(arg, t) for every t in [0, tasks), on the context's thread pool
// (the calling thread taking part) or, without one, in order on the calling
// thread; returns when all are done. Allocates nothing.
void RunTasks(const ExecutionContext* context, size_t tasks, void (*task)(void*, size_t),
              void* arg);

// f(t) for t in [0, tasks), as RunTasks(); f must be safe to call from
// several threads at once.
template <typename F>
void ParallelFor(const ExecutionContext* context, size_t tasks, F&& f) {
  using Fn = std::remove_reference_t<F>;
  RunTasks(
      context, tasks, [](void* arg, size_t t) { (*static_cast<Fn*>(arg))(t); },
      const_cast<std::remove_const_t<Fn>*>(&f));
}

// Part `part` of [0, n) cut into `parts` contiguous ranges whose inner
// bounds are multiples of `align` (> 0); later parts may be empty.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range SplitRange(int64_t n, int parts, int part, int64_t align = 1);

// f(begin, end) over [0, n) split across the node's threads in contiguous
// ranges (inner bounds multiples of 16), or f(0, n) on the calling thread
// when n is below `min_parallel` or there is one thread. For elementwise
// kernels, whose elements do not depend on each other.
template <typename F>
void ParallelRanges(const Node& node, int64_t n, int64_t min_parallel, F&& f) {
  const int threads = NumThreads(node);
  if (threads <= 1 || n < min_parallel) {
    f(int64_t{0}, n);
    return;
  }
  ParallelFor(node.context, static_cast<size_t>(threads), [&](size_t t) {
    const Range r = SplitRange(n, threads, static_cast<int>(t), 16);
    if (r.size() > 0) f(r.begin, r.end);
  });
}

// Elements below which an elementwise kernel stays on one thread.
constexpr int64_t kMinParallelElements = 16384;

}  // namespace dfarm::runtime
