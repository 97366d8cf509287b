// AgentProcess: a dfarm-agent started as a child of this process, listening on
// 127.0.0.1 with a free port (the `local` and `qemu-arm64` devices, tests). The
// one way the host starts a listening agent; an agent over stdio is
// AgentClient::Spawn. It owns the child: destroying it sends SIGTERM (SIGKILL
// after a grace period) and reaps it. The child runs in its own process group
// (a terminal's Ctrl-C goes to us alone) and gets SIGTERM if we die.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/base/result.h"
#include "agent/base/unique_fd.h"

namespace dfarm::agent {

struct AgentProcessOptions {
  std::string agent_binary;  // path of dfarm-agent
  std::string store_dir;     // its artifact store (the agent creates it)
  // Runs the agent through another program, e.g. {"/usr/bin/qemu-aarch64",
  // "-L", "/usr/aarch64-linux-gnu"}; its first word must be a path.
  std::vector<std::string> prefix;
  std::vector<std::string> extra_args;  // after --listen and --store
  // The agent's stderr is appended here too; empty: only its tail is kept.
  std::string log_file;
  std::chrono::milliseconds start_timeout{10'000};
};

class AgentProcess {
 public:
  // Starts `[prefix...] agent_binary --listen 127.0.0.1:0 --store store_dir
  // [extra_args...]` and waits for its "listening on 127.0.0.1:<port>" line.
  // Fails naming the binary when it cannot start, exits first ("exited
  // before listening", with the end of its stderr) or says nothing in time.
  static Result<std::unique_ptr<AgentProcess>> Start(const AgentProcessOptions& options);
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  // The last few KiB the agent wrote to stderr, for error messages.
  std::string StderrTail();
  // SIGTERM, then SIGKILL after `grace`; reaps and returns the wait status
  // (-1 when already stopped).
  int Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));

 private:
  AgentProcess(pid_t pid, UniqueFd out, UniqueFd err, UniqueFd log);
  void Drain();  // the reader thread: parses stdout, keeps stderr's tail
  bool OnStdout(const char* data, size_t size);  // true once the port is known; mu_ held

  pid_t pid_;
  UniqueFd out_;
  UniqueFd err_;
  UniqueFd log_;  // may be empty
  uint16_t port_ = 0;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool eof_ = false;    // guarded by mu_
  bool stop_ = false;   // guarded by mu_
  std::string stdout_;  // guarded by mu_, until the listening line
  std::string stderr_;  // guarded by mu_, last kStderrKeep bytes
  int wait_status_ = -1;
  bool reaped_ = false;
};

}  // namespace dfarm::agent
