// The work splitting of kernels/parallel.h: ranges, tasks and the scratch
// check. Kernels on several threads are compared with one thread in
// gemm_test.cc, depthwise_conv_float_test.cc and naive_reference_test.cc.
#include "runtime/kernels/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

namespace dfarm::runtime {
namespace {

TEST(SplitRangeTest, CoversEverythingOnceWithAlignedInnerBounds) {
  for (int64_t n : {0, 1, 5, 12, 13, 100, 1001}) {
    for (int parts : {1, 2, 3, 7}) {
      for (int64_t align : {1, 4, 16}) {
        int64_t next = 0;
        for (int p = 0; p < parts; ++p) {
          const Range r = SplitRange(n, parts, p, align);
          EXPECT_EQ(r.begin, next) << n << " " << parts << " " << align;
          EXPECT_GE(r.size(), 0);
          if (r.end < n) {
            EXPECT_EQ(r.end % align, 0);
          }
          next = r.end;
        }
        EXPECT_EQ(next, n);
      }
    }
  }
  // Cuts at the nearest multiples of `align`: 40 over 3 parts cuts at
  // 13.3 and 26.7, so at 12 and 28.
  EXPECT_EQ(SplitRange(40, 3, 0, 4).size(), 12);
  EXPECT_EQ(SplitRange(40, 3, 1, 4).size(), 16);
  EXPECT_EQ(SplitRange(40, 3, 2, 4).size(), 12);
}

// What a thread runs is a run of consecutive parts (ThreadPool::Run gives
// slot s the parts [s * parts / threads, (s + 1) * parts / threads)): the
// cut between two threads' rows is within align / 2 of the exact cut,
// however the units fall.
TEST(SplitRangeTest, ThreadsAreCutWithinHalfAUnitOfTheExactCut) {
  for (int64_t n : {7, 14, 49, 196, 784, 1001}) {
    for (int threads : {2, 3, 4}) {
      for (int parts_per_thread : {1, 2, 3}) {
        for (int64_t align : {1, 6, 12, 16}) {
          const int parts = threads * parts_per_thread;
          for (int slot = 1; slot < threads; ++slot) {
            const int64_t cut = SplitRange(n, parts, slot * parts_per_thread, align).begin;
            const double exact = static_cast<double>(n) * slot / threads;
            EXPECT_LE(std::abs(static_cast<double>(cut) - exact), align / 2.0)
                << n << " rows, " << parts << " parts of " << align << ", slot " << slot;
          }
        }
      }
    }
  }
  // The 14x14 layer's 196 pixels in 12-row units on 2 threads: 96 and 100
  // (whole units to the first parts gave 108 and 88).
  EXPECT_EQ(SplitRange(196, 2, 0, 12).size(), 96);
  EXPECT_EQ(SplitRange(196, 4, 2, 12).begin, 96);
}

TEST(ParallelForTest, RunsEveryTaskOnce) {
  ThreadPool pool(3);
  ExecutionContext context;
  context.threadpool = &pool;
  context.num_threads = pool.threads();
  std::vector<std::atomic<int>> runs(50);
  // No two tasks running at once share a slot.
  std::vector<std::atomic<int>> busy(static_cast<size_t>(pool.threads()));
  std::atomic<bool> shared{false}, out_of_range{false};
  for (int round = 0; round < 20; ++round) {
    ParallelFor(&context, runs.size(), [&](size_t t, int slot) {
      if (slot < 0 || slot >= pool.threads()) {
        out_of_range = true;
        return;
      }
      if (busy[slot]++ != 0) shared = true;
      if (round == 0) ++runs[t];
      --busy[slot];
    });
  }
  EXPECT_FALSE(out_of_range);
  EXPECT_FALSE(shared);
  for (const std::atomic<int>& r : runs) EXPECT_EQ(r.load(), 1);
  // Without a context: in order on the calling thread, slot 0.
  std::vector<size_t> order;
  ParallelFor(nullptr, 4, [&](size_t t, int slot) {
    EXPECT_EQ(slot, 0);
    order.push_back(t);
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(ParallelForTest, EveryTaskOnceWhateverTheSharesAndSteals) {
  // Fewer tasks than threads (empty shares), uneven shares, many tasks: each
  // thread takes its own share first and steals the rest from the others.
  ThreadPool pool(3);
  ExecutionContext context;
  context.threadpool = &pool;
  context.num_threads = pool.threads();
  for (size_t count : {2, 3, 4, 7, 64}) {
    for (int round = 0; round < 20; ++round) {
      std::vector<std::atomic<int>> runs(count);
      ParallelFor(&context, count, [&](size_t t, int) { ++runs[t]; });
      for (size_t t = 0; t < count; ++t) ASSERT_EQ(runs[t].load(), 1) << count << " tasks, " << t;
    }
  }
}

TEST(TaskCountTest, AFewTasksPerThreadAtMostOnePerUnit) {
  EXPECT_EQ(TaskCount(100, 1), 1);
  EXPECT_EQ(TaskCount(100, 2), 2 * kTasksPerThread);
  EXPECT_EQ(TaskCount(3, 2), 3);
  EXPECT_EQ(TaskCount(0, 2), 1);
}

TEST(ThreadPoolTest, OneThreadHasNoPool) {
  ThreadPool one(1);
  EXPECT_EQ(one.threads(), 1);
  size_t ran = 0;
  one.Run(
      3, [](void* n, size_t, int slot) { *static_cast<size_t*>(n) += slot == 0 ? 1 : 100; }, &ran);
  EXPECT_EQ(ran, 3u);
  ThreadPool none(0);
  EXPECT_EQ(none.threads(), 1);
}

// More threads than this machine has cores, thousands of small task sets in
// a row (as an Invoke's ops): every task runs exactly once, each set is
// complete when Run() returns, and a task never sees another set's argument.
TEST(ThreadPoolTest, ManySetsOnMoreThreadsThanCores) {
  ThreadPool pool(8);
  ASSERT_EQ(pool.threads(), 8);
  struct Set {
    std::vector<std::atomic<int>> runs = std::vector<std::atomic<int>>(16);
    int id = 0;
    std::atomic<int> wrong{0};
  };
  for (int id = 0; id < 3000; ++id) {
    Set set;
    set.id = id;
    const size_t tasks = 1 + static_cast<size_t>(id % 16);
    pool.Run(
        tasks,
        [](void* arg, size_t t, int slot) {
          Set& s = *static_cast<Set*>(arg);
          if (slot < 0 || slot >= 8) ++s.wrong;
          ++s.runs[t];
        },
        &set);
    for (size_t t = 0; t < 16; ++t) {
      ASSERT_EQ(set.runs[t].load(), t < tasks ? 1 : 0) << "set " << id << " task " << t;
    }
    ASSERT_EQ(set.wrong.load(), 0);
  }
}

// A worker that went to sleep between sets (past its spin) is woken by the
// next set: task 0, on the calling thread, waits for task 1 to start, which
// only the worker can run. A lost wake-up leaves task 0 waiting out its
// limit (minutes, so a busy machine cannot fail it) and the test fails.
TEST(ThreadPoolTest, ASleepingWorkerIsWokenByTheNextSet) {
  ThreadPool pool(2);
  struct Rendezvous {
    std::atomic<bool> second_started{false};
    std::atomic<bool> timed_out{false};
  };
  for (int round = 0; round < 20; ++round) {
    // Longer than a worker spins (kWorkerSpin, 200 µs) before it sleeps;
    // every few rounds none, so the set also meets a spinning worker.
    if (round % 4 != 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    Rendezvous r;
    pool.Run(
        2,
        [](void* arg, size_t t, int) {
          Rendezvous& r = *static_cast<Rendezvous*>(arg);
          if (t == 1) {
            r.second_started = true;
            return;
          }
          const auto limit = std::chrono::steady_clock::now() + std::chrono::minutes(2);
          while (!r.second_started) {
            if (std::chrono::steady_clock::now() > limit) {
              r.timed_out = true;
              return;
            }
            std::this_thread::yield();
          }
        },
        &r);
    ASSERT_FALSE(r.timed_out) << "round " << round << ": the worker never ran task 1";
  }
}

TEST(CheckScratchTest, RefusesANodeWithoutItsScratch) {
  Node node;
  EXPECT_TRUE(CheckScratch(node).ok());  // asks for none
  node.scratch_bytes = 128;
  EXPECT_EQ(CheckScratch(node).code(), StatusCode::kInvalidArgument);
  alignas(64) std::byte block[256];
  ExecutionContext context;
  context.scratch = block;
  context.scratch_stride = 64;
  node.context = &context;
  EXPECT_EQ(CheckScratch(node).code(), StatusCode::kInvalidArgument);  // too small
  context.scratch_stride = 128;
  EXPECT_TRUE(CheckScratch(node).ok());
}

}  // namespace
}  // namespace dfarm::runtime
