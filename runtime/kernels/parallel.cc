#include "runtime/kernels/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dfarm::runtime {

// How long a worker keeps looking for the next task set before it sleeps.
constexpr std::chrono::microseconds kWorkerSpin{200};

struct ThreadPool::State {
  std::mutex mutex;
  std::condition_variable wake;  // a new task set, or stop
  // Changed under `mutex`; read without it while spinning.
  std::atomic<uint64_t> generation{0};
  bool stop = false;
  // The current task set. Thread slot s owns the tasks [begin[s], end[s])
  // (a contiguous share, the same part of every op's work, so each thread
  // finds in its own cache what it wrote in the op before), takes its own
  // from the front and, when none are left, steals from the back of the
  // largest share left. Under `mutex`.
  void (*task)(void*, size_t, int) = nullptr;
  void* arg = nullptr;
  std::vector<size_t> begin, end;  // one per thread slot, sized once
  std::atomic<size_t> done{0};     // tasks of the current set finished
  std::vector<std::thread> workers;

  // Claims a task of set `gen` for thread `slot`: false when the set
  // changed or has none left. A task is claimed under the mutex, so a
  // worker that saw an older set never runs a task with the wrong function
  // or argument.
  bool Claim(uint64_t gen, int slot, size_t* t, void (**fn)(void*, size_t, int), void** a) {
    std::lock_guard<std::mutex> lock(mutex);
    if (generation.load(std::memory_order_relaxed) != gen) return false;
    if (begin[slot] < end[slot]) {
      *t = begin[slot]++;
    } else {
      size_t victim = 0, left = 0;
      for (size_t v = 0; v < begin.size(); ++v) {
        if (end[v] - begin[v] > left) victim = v, left = end[v] - begin[v];
      }
      if (left == 0) return false;
      *t = --end[victim];
    }
    *fn = task;
    *a = arg;
    return true;
  }

  // Runs tasks of set `gen` until none is left.
  void Drain(uint64_t gen, int slot) {
    size_t t = 0;
    void (*fn)(void*, size_t, int) = nullptr;
    void* a = nullptr;
    while (Claim(gen, slot, &t, &fn, &a)) {
      fn(a, t, slot);
      done.fetch_add(1, std::memory_order_acq_rel);
    }
  }
};

ThreadPool::ThreadPool(int threads) {
  if (threads <= 1) return;
  state_ = std::make_unique<State>();
  state_->begin.assign(static_cast<size_t>(threads), 0);
  state_->end.assign(static_cast<size_t>(threads), 0);
  for (int slot = 1; slot < threads; ++slot) {
    state_->workers.emplace_back([this, slot] { Work(slot); });
  }
  threads_ = threads;
}

ThreadPool::~ThreadPool() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  for (std::thread& w : state_->workers) w.join();
}

void ThreadPool::Work(int slot) const {
  State& s = *state_;
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly for the next set (ops follow each other within an
    // Invoke), then sleep until one comes.
    const auto spin_until = std::chrono::steady_clock::now() + kWorkerSpin;
    while (s.generation.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
    }
    {
      std::unique_lock<std::mutex> lock(s.mutex);
      s.wake.wait(lock,
                  [&] { return s.stop || s.generation.load(std::memory_order_relaxed) != seen; });
      if (s.stop) return;
      seen = s.generation.load(std::memory_order_relaxed);
    }
    s.Drain(seen, slot);
  }
}

void ThreadPool::Run(size_t tasks, void (*task)(void*, size_t, int), void* arg) const {
  if (!state_ || tasks <= 1) {
    for (size_t t = 0; t < tasks; ++t) task(arg, t, 0);
    return;
  }
  State& s = *state_;
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.task = task;
    s.arg = arg;
    const size_t threads = s.begin.size();
    for (size_t slot = 0; slot < threads; ++slot) {
      s.begin[slot] = slot * tasks / threads;
      s.end[slot] = (slot + 1) * tasks / threads;
    }
    s.done.store(0, std::memory_order_relaxed);
    gen = s.generation.load(std::memory_order_relaxed) + 1;
    s.generation.store(gen, std::memory_order_release);
  }
  s.wake.notify_all();
  s.Drain(gen, 0);
  // Every task is claimed; wait for the ones a worker is still running.
  while (s.done.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
}

void RunTasks(const ExecutionContext* context, size_t tasks, void (*task)(void*, size_t, int),
              void* arg) {
  if (context != nullptr && context->threadpool != nullptr) {
    context->threadpool->Run(tasks, task, arg);
    return;
  }
  for (size_t t = 0; t < tasks; ++t) task(arg, t, 0);
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
