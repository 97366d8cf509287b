// AgentProcess: a dfarm-agent started as a child of dfarm for the `local`
// device. It owns the child: destroying it sends SIGTERM (SIGKILL after a
// grace period) and reaps it. The child runs in its own process group (a
// terminal's Ctrl-C goes to dfarm alone) and gets SIGTERM if dfarm dies.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::harness {

class AgentProcess {
 public:
  // Starts `[prefix...] agent_path --listen 127.0.0.1:0 --store store_dir
  // [extra_args...]` and waits up to `timeout` for its "listening on
  // 127.0.0.1:<port>" line on stdout. A non-empty `prefix` runs the agent
  // through another program (the qemu-arm64 device: {"/usr/bin/qemu-aarch64",
  // "-L", "/usr/aarch64-linux-gnu"}); its first word must be a path to an
  // executable.
  static Result<std::unique_ptr<AgentProcess>> Start(
      const std::string& agent_path, const std::string& store_dir,
      std::chrono::milliseconds timeout, const std::vector<std::string>& prefix = {},
      const std::vector<std::string>& extra_args = {});
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  // The last few KiB the agent wrote to stderr, for error messages.
  std::string StderrTail();

 private:
  AgentProcess(pid_t pid, int out_fd, int err_fd);
  void Drain();  // the reader thread: parses stdout, keeps stderr's tail
  void Stop();

  pid_t pid_;
  int out_fd_;
  int err_fd_;
  uint16_t port_ = 0;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool eof_ = false;    // guarded by mu_
  bool stop_ = false;   // guarded by mu_
  std::string stdout_;  // guarded by mu_, until the listening line
  std::string stderr_;  // guarded by mu_, last kStderrKeep bytes
  bool reaped_ = false;
};

}  // namespace dfarm::harness
