#include "runtime/kernels/parallel.h"

#include <algorithm>
#include <string>
#include <thread>

#ifdef DFARM_HAVE_PTHREADPOOL
#include <pthreadpool.h>
#endif

namespace dfarm::runtime {

#ifdef DFARM_HAVE_PTHREADPOOL
namespace {

// One RunTasks() call, as pthreadpool's task argument.
struct Dispatch {
  void (*task)(void*, size_t, int);
  void* arg;
  const ThreadPool* pool;
  std::thread::id caller;
};

// The slot of the thread running it: 0 for the caller, a fixed one per
// worker thread (a worker serves one pool for its whole life).
void RunWithSlot(void* dispatch, size_t t) {
  const Dispatch& d = *static_cast<const Dispatch*>(dispatch);
  int slot = 0;
  if (std::this_thread::get_id() != d.caller) {
    thread_local const ThreadPool* slot_pool = nullptr;
    thread_local int worker_slot = 0;
    if (slot_pool != d.pool) {
      slot_pool = d.pool;
      worker_slot = d.pool->NextWorkerSlot();
    }
    slot = worker_slot;
  }
  d.task(d.arg, t, slot);
}

}  // namespace
#endif  // DFARM_HAVE_PTHREADPOOL

void RunTasks(const ExecutionContext* context, size_t tasks, void (*task)(void*, size_t, int),
              void* arg) {
#ifdef DFARM_HAVE_PTHREADPOOL
  if (context != nullptr && context->threadpool != nullptr &&
      context->threadpool->get() != nullptr && tasks > 1) {
    Dispatch d{task, arg, context->threadpool, std::this_thread::get_id()};
    pthreadpool_parallelize_1d(context->threadpool->get(), &RunWithSlot, &d, tasks, 0);
    return;
  }
#else
  (void)context;
#endif
  for (size_t t = 0; t < tasks; ++t) task(arg, t, 0);
}

ThreadPool::ThreadPool(int threads) {
#ifdef DFARM_HAVE_PTHREADPOOL
  if (threads > 1) pool_ = pthreadpool_create(static_cast<size_t>(threads));
  if (pool_ != nullptr) threads_ = static_cast<int>(pthreadpool_get_threads_count(pool_));
#else
  (void)threads;
#endif
}

ThreadPool::~ThreadPool() {
#ifdef DFARM_HAVE_PTHREADPOOL
  if (pool_ != nullptr) pthreadpool_destroy(pool_);
#endif
}

Status CheckScratch(const Node& node) {
  if (node.scratch_bytes == 0 || (node.context != nullptr && node.context->scratch != nullptr &&
                                  node.context->scratch_stride >= node.scratch_bytes)) {
    return Status::Ok();
  }
  return Status::InvalidArgument("the kernel needs " + std::to_string(node.scratch_bytes) +
                                 " bytes of scratch per thread, which the node was not given");
}

Range SplitRange(int64_t n, int parts, int part, int64_t align) {
  const int64_t units = (n + align - 1) / align;
  const int64_t per = units / parts, extra = units % parts;
  const int64_t first = part * per + std::min<int64_t>(part, extra);
  const int64_t count = per + (part < extra ? 1 : 0);
  return {std::min(n, first * align), std::min(n, (first + count) * align)};
}

}  // namespace dfarm::runtime
