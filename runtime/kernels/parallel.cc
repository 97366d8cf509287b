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

// A hint to the CPU that this thread is spinning (x86 PAUSE).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Thread slot s's mailbox, on its own cache line: its share of the current
// task set, [begin, end) packed in one word (begin in the high half) so that
// a claim is one compare-and-swap (the owner takes from the front, a thief
// from the back), and the set's function, argument and number, which Run()
// writes before the share. A worker waits on its own line, so a new set
// reaches it in one cache-line transfer instead of one each for the set's
// number, the share and the function (BM_PoolRun: 330 to 1160 ns a region
// with three, as the two vCPUs sat nearer or farther apart).
struct alignas(64) Share {
  std::atomic<uint64_t> word{0};
  std::atomic<uint64_t> generation{0};  // the set's number; stored last
  void (*task)(void*, size_t, int) = nullptr;
  void* arg = nullptr;

  static uint64_t Pack(uint64_t begin, uint64_t end) { return begin << 32 | end; }
  static uint64_t Begin(uint64_t w) { return w >> 32; }
  static uint64_t End(uint64_t w) { return w & 0xffffffffu; }
};

// Task sets are at most this many tasks (Run() cuts larger ones).
constexpr size_t kMaxTasksPerSet = size_t{1} << 31;

struct ThreadPool::State {
  std::mutex mutex;
  std::condition_variable wake;  // a new task set for a sleeping worker, or stop
  bool stop = false;             // under `mutex`
  // Workers on their way to sleep or asleep: Run() takes the mutex and
  // notifies only when there are any.
  std::atomic<int> sleepers{0};
  uint64_t generation = 0;  // the current set's number; Run()'s thread only
  // Thread slot s owns a contiguous share (the same part of every op's work,
  // so each thread finds in its own cache what it wrote in the op before),
  // takes its own from the front and, when none are left, steals from the
  // back of the largest share left. Claims are lock-free. A task's
  // function and argument are read, after the claim, from the mailbox it
  // was claimed from: Run() wrote them before publishing the share, and the
  // next set is published only after every claimed task is done, so they
  // are the claimed set's (a thread that read a share of an older set and
  // claims from a newer one runs the newer set's task, as it should).
  std::unique_ptr<Share[]> shares;
  size_t slots = 0;
  alignas(64) std::atomic<size_t> done{0};  // tasks of the current set finished
  std::vector<std::thread> workers;

  // Claims a task for thread `slot`: its share's mailbox, or nullptr when no
  // task is left.
  Share* Claim(int slot, size_t* t) {
    Share& own = shares[static_cast<size_t>(slot)];
    uint64_t w = own.word.load(std::memory_order_acquire);
    while (Share::Begin(w) < Share::End(w)) {
      if (own.word.compare_exchange_weak(w, Share::Pack(Share::Begin(w) + 1, Share::End(w)),
                                         std::memory_order_acq_rel)) {
        *t = Share::Begin(w);
        return &own;
      }
    }
    for (;;) {
      size_t victim = 0;
      uint64_t left = 0, vw = 0;
      for (size_t v = 0; v < slots; ++v) {
        const uint64_t x = shares[v].word.load(std::memory_order_acquire);
        const uint64_t n = Share::End(x) > Share::Begin(x) ? Share::End(x) - Share::Begin(x) : 0;
        if (n > left) victim = v, left = n, vw = x;
      }
      if (left == 0) return nullptr;
      if (shares[victim].word.compare_exchange_weak(
              vw, Share::Pack(Share::Begin(vw), Share::End(vw) - 1), std::memory_order_acq_rel)) {
        *t = Share::End(vw) - 1;
        return &shares[victim];
      }
    }
  }

  // Runs tasks of the current set until none is left.
  void Drain(int slot) {
    size_t t = 0;
    while (Share* from = Claim(slot, &t)) {
      from->task(from->arg, t, slot);
      done.fetch_add(1, std::memory_order_acq_rel);
    }
  }
};

ThreadPool::ThreadPool(int threads) {
  if (threads <= 1) return;
  state_ = std::make_unique<State>();
  state_->slots = static_cast<size_t>(threads);
  state_->shares = std::make_unique<Share[]>(state_->slots);
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
  const Share& mailbox = s.shares[static_cast<size_t>(slot)];
  uint64_t seen = 0;
  // Sequentially consistent: the sleep path below pairs it with Run()'s
  // store of the number and load of `sleepers`.
  auto fresh = [&] { return mailbox.generation.load(std::memory_order_seq_cst) != seen; };
  for (;;) {
    // Spin briefly for the next set (ops follow each other within an
    // Invoke), then sleep until one comes.
    const auto spin_until = std::chrono::steady_clock::now() + kWorkerSpin;
    for (int i = 1; !fresh(); ++i) {
      if (i % 64 == 0) {
        if (std::chrono::steady_clock::now() >= spin_until) break;
        std::this_thread::yield();
      } else {
        CpuRelax();
      }
    }
    if (!fresh()) {
      // Counted before the last look under the mutex: a Run() that
      // publishes after that look sees the count and notifies under the
      // mutex, so the wake-up cannot fall between the look and the wait.
      s.sleepers.fetch_add(1, std::memory_order_seq_cst);
      std::unique_lock<std::mutex> lock(s.mutex);
      s.wake.wait(lock, [&] { return s.stop || fresh(); });
      s.sleepers.fetch_sub(1, std::memory_order_relaxed);
      if (s.stop) return;
    }
    seen = mailbox.generation.load(std::memory_order_acquire);
    s.Drain(slot);
  }
}

void ThreadPool::Run(size_t tasks, void (*task)(void*, size_t, int), void* arg) const {
  if (!state_ || tasks <= 1) {
    for (size_t t = 0; t < tasks; ++t) task(arg, t, 0);
    return;
  }
  State& s = *state_;
  if (tasks > kMaxTasksPerSet) {  // never in practice: in sets of kMaxTasksPerSet
    struct Offset {
      void (*task)(void*, size_t, int);
      void* arg;
      size_t first;
    };
    for (size_t first = 0; first < tasks; first += kMaxTasksPerSet) {
      Offset o{task, arg, first};
      Run(
          std::min(kMaxTasksPerSet, tasks - first),
          [](void* a, size_t t, int slot) {
            const Offset& o = *static_cast<Offset*>(a);
            o.task(o.arg, o.first + t, slot);
          },
          &o);
    }
    return;
  }
  // Every task of the last set is done, so no thread reads these now.
  s.done.store(0, std::memory_order_relaxed);
  const uint64_t generation = ++s.generation;
  for (size_t slot = 0; slot < s.slots; ++slot) {
    Share& share = s.shares[slot];
    share.task = task;
    share.arg = arg;
    share.word.store(Share::Pack(slot * tasks / s.slots, (slot + 1) * tasks / s.slots),
                     std::memory_order_release);
    share.generation.store(generation, std::memory_order_seq_cst);
  }
  if (s.sleepers.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(s.mutex); }
    s.wake.notify_all();
  }
  s.Drain(0);
  // Every task is claimed; wait for the ones a worker is still running.
  for (int i = 1; s.done.load(std::memory_order_acquire) < tasks; ++i) {
    if (i % 64 == 0) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }
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
  // Bound i: the multiple of `align` nearest to i * n / parts (ties up),
  // at most n. The cut between two threads' shares of a task set is then
  // within align / 2 of the exact cut: giving whole units
  // to the first parts instead split a 14x14 layer's 196 pixels 108/88 in
  // 12-row units between 2 threads (96/100 now).
  auto bound = [&](int64_t i) {
    if (i >= parts) return n;
    const int64_t twice = 2 * i * n + int64_t{parts} * align;
    return std::min(n, twice / (2 * int64_t{parts} * align) * align);
  };
  return {bound(part), bound(int64_t{part} + 1)};
}

}  // namespace dfarm::runtime
