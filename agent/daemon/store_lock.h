// StoreLock: one dfarm-agent per artifact store. An agent takes an exclusive
// flock(2) on <store>/agent.lock when it starts and holds it, on a descriptor
// that runners do not inherit (O_CLOEXEC), until it ends; the kernel drops it
// when the agent dies, however it dies. So "the store is locked" means "an
// agent of this store is alive", which no /proc field has to tell (qemu-user
// fakes its own /proc/self/stat). The holder writes its pid into the file, for
// the message a second agent gets.
#pragma once

#include <sys/types.h>

#include <string>

#include "agent/base/result.h"
#include "agent/base/unique_fd.h"

namespace dfarm::agent {

class StoreLock {
 public:
  // The lock file of a store folder.
  static std::string PathFor(const std::string& store_dir);

  // Creates store_dir (0700) when missing and takes the lock without waiting.
  // When another process holds it, fails with ErrorKind::kConflict and a
  // message naming the store and the holder's pid; other failures (the folder
  // or file cannot be made) are kFailed. The lock lasts as long as the
  // returned object (and is dropped by the kernel if this process dies).
  static Result<StoreLock> Acquire(const std::string& store_dir);

  StoreLock(StoreLock&&) = default;
  StoreLock& operator=(StoreLock&&) = default;
  int fd() const { return fd_.get(); }

 private:
  explicit StoreLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace dfarm::agent
