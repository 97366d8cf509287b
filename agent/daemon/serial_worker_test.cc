#include "agent/daemon/serial_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <vector>

namespace dfarm::agent {
namespace {

TEST(SerialWorkerTest, RunsTasksInPostOrderOffTheCallingThread) {
  SerialWorker worker;
  std::vector<int> order;  // written by the worker only, read after Drain
  std::thread::id ran_on;
  for (int i = 0; i < 50; ++i) {
    worker.Post([&order, &ran_on, i] {
      order.push_back(i);
      ran_on = std::this_thread::get_id();
    });
  }
  worker.Drain();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(SerialWorkerTest, DrainWaitsForTheTaskThatIsRunning) {
  SerialWorker worker;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> finished{false};
  worker.Post([released, &finished] {
    released.wait();
    finished = true;
  });
  auto drained = std::async(std::launch::async, [&worker] { worker.Drain(); });
  // Drain cannot return before the task is released.
  EXPECT_EQ(drained.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  release.set_value();
  drained.get();
  EXPECT_TRUE(finished);
}

TEST(SerialWorkerTest, DestructorRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    SerialWorker worker;
    for (int i = 0; i < 10; ++i) worker.Post([&ran] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 10);
}

TEST(SerialWorkerTest, DrainWithNothingPostedReturns) {
  SerialWorker worker;
  worker.Drain();
  SUCCEED();
}

}  // namespace
}  // namespace dfarm::agent
