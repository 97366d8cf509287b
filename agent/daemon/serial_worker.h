// SerialWorker: runs tasks one at a time, in the order they were posted, on a
// thread of its own (started by the first Post). A connection of the agent
// syncs and installs its uploads on one while its reader takes the next frames.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace dfarm::agent {

class SerialWorker {
 public:
  SerialWorker() = default;
  // Runs every task still queued, then ends the thread.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues task; it runs after every task posted before it. Keeps the task
  // until it has run.
  void Post(std::function<void()> task);
  // Returns once every task posted before the call has run.
  void Drain();

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  bool running_task_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dfarm::agent
