// StoreLock: one dfarm-agent per artifact store. An agent takes an exclusive
// flock(2) on <store>/agent.lock when it starts and holds it, on a descriptor
// that runners do not inherit (O_CLOEXEC), until it ends; the kernel drops it
// when the agent dies, however it dies. So "the store is locked" means "an
// agent of this store is alive", which no /proc field has to tell (qemu-user
// fakes its own /proc/self/stat). The holder writes "PID\n" into the file, for
// the message a second agent gets, and "PID stopping\n" once it shuts down
// (SIGTERM, its host gone), so that a successor started meanwhile (a dfarm
// restarted after a crash) waits for it rather than refusing.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "agent/base/result.h"
#include "agent/base/unique_fd.h"

namespace dfarm::agent {

class StoreLock {
 public:
  // The lock file of a store folder.
  static std::string PathFor(const std::string& store_dir);

  // Creates store_dir (0700) when missing and takes the lock. When another
  // agent holds it and runs on, fails at once with ErrorKind::kConflict and a
  // message naming the store and the holder's pid; when the holder is
  // stopping (MarkStopping), waits for it to end, up to stopping_wait. Other
  // failures (the folder or file cannot be made) are kFailed. The lock lasts
  // as long as the returned object (the kernel drops it if this process dies).
  // log (may be empty) hears one line when the wait begins.
  static Result<StoreLock> Acquire(
      const std::string& store_dir, const std::function<void(const std::string&)>& log = {},
      std::chrono::milliseconds stopping_wait = std::chrono::milliseconds(30'000));

  StoreLock(StoreLock&&) = default;
  StoreLock& operator=(StoreLock&&) = default;
  int fd() const { return fd_.get(); }

  // Says in the lock file that this agent is stopping, so a successor waits
  // for the lock instead of refusing. Async-signal-safe (one pwrite).
  void MarkStopping() const;

 private:
  StoreLock(UniqueFd fd, std::string stopping_line)
      : fd_(std::move(fd)), stopping_line_(std::move(stopping_line)) {}
  UniqueFd fd_;
  std::string stopping_line_;  // "PID stopping\n", written by MarkStopping
};

}  // namespace dfarm::agent
