// AgentProcess: a dfarm-agent started as a child of this process, the one
// way the host starts an agent of its own (the `local` and `qemu-arm64`
// devices, tests). It speaks to us either over a private socketpair on its
// stdin/stdout (`--stdio`, what the devices use: no port that another local
// process could reach) or on 127.0.0.1 with a free port (`--listen`, which the
// agent refuses without `--token-file` or `--insecure` in extra_args). Any
// other command that speaks the protocol on stdio (adb exec-out, ssh) is
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

// dfarm-agent's exit code when another live agent holds its store's lock
// (one agent per store; see agent/daemon/store_lock.h).
inline constexpr int kAgentExitStoreInUse = 3;

// How the agent child and we talk.
enum class AgentTransport {
  kListen,  // --listen 127.0.0.1:0; the port comes from its "listening on" line
  kStdio,   // --stdio on a socketpair; our end is TakeStream()
};

struct AgentProcessOptions {
  std::string agent_binary;  // path of dfarm-agent
  AgentTransport transport = AgentTransport::kListen;
  std::string store_dir;  // its artifact store (the agent creates it)
  // Runs the agent through another program, e.g. {"/usr/bin/qemu-aarch64",
  // "-L", "/usr/aarch64-linux-gnu"}; its first word must be a path.
  std::vector<std::string> prefix;
  std::vector<std::string> extra_args;  // after --listen/--stdio and --store
  // The agent's stderr is appended here too; empty: only its tail is kept.
  std::string log_file;
  std::chrono::milliseconds start_timeout{10'000};
};

class AgentProcess {
 public:
  // kListen: starts `[prefix...] agent_binary --listen 127.0.0.1:0 --store
  // store_dir [extra_args...]` and waits for its "listening on
  // 127.0.0.1:<port>" line. Fails naming the binary when it cannot start,
  // exits first ("exited before listening", with the end of its stderr) or
  // says nothing in time.
  // kStdio: starts `[prefix...] agent_binary --stdio --store store_dir
  // [extra_args...]` with its stdin and stdout on a socketpair and returns at
  // once; the caller completes hello over TakeStream() (and, when that fails,
  // asks ExitReport() why).
  static Result<std::unique_ptr<AgentProcess>> Start(const AgentProcessOptions& options);
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  uint16_t port() const { return port_; }  // kListen
  // kStdio: our end of the agent's stdin/stdout (once; then empty).
  UniqueFd TakeStream() { return std::move(stream_); }
  pid_t pid() const { return pid_; }
  // The last few KiB the agent wrote to stderr, for error messages.
  std::string StderrTail();
  // SIGTERM, then SIGKILL after `grace`; reaps and returns the wait status
  // (-1 when already stopped).
  int Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  // Stops the agent (Stop(grace)) and says how it ended, for an error
  // message: " (it exited with code 1); its stderr ends: LINE".
  std::string ExitReport(std::chrono::milliseconds grace = std::chrono::milliseconds(500));
  // The agent's wait status once it was reaped (Stop, ExitReport), else -1.
  int wait_status() const { return reaped_ ? wait_status_ : -1; }

 private:
  AgentProcess(pid_t pid, UniqueFd out, UniqueFd err, UniqueFd log);
  void Drain();  // the reader thread: parses stdout, keeps stderr's tail
  bool OnStdout(const char* data, size_t size);  // true once the port is known; mu_ held
  int Reaped(int wait_status);  // records the child reaped; waits for the reader; the status

  pid_t pid_;
  UniqueFd out_;
  UniqueFd err_;
  UniqueFd log_;     // may be empty
  UniqueFd stream_;  // kStdio, until TakeStream()
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
