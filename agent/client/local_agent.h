// LocalAgent: a dfarm-agent started as a child process of the host, for the
// `local` device (and tests). It listens on 127.0.0.1 with a free port; the
// port comes from the agent's "listening on 127.0.0.1:<port>" line.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/base/result.h"
#include "agent/base/unique_fd.h"

namespace dfarm::agent {

struct LocalAgentOptions {
  std::string agent_binary;   // path of dfarm-agent
  std::string store_dir;      // its artifact store (created if missing)
  std::string log_file;       // agent's stderr goes here (appended); empty: inherit ours
  std::chrono::milliseconds start_timeout{10'000};
};

class LocalAgent {
 public:
  // Starts the agent and waits for its listening line. Fails with a message
  // naming the binary when it cannot start, exits early or says nothing.
  static Result<std::unique_ptr<LocalAgent>> Start(const LocalAgentOptions& options);
  // Stops the agent (Stop() with a short grace) if still running.
  ~LocalAgent();

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

  // SIGTERM, then SIGKILL after grace; returns the wait status.
  int Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  LocalAgent() = default;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  UniqueFd stdout_;  // kept open so the agent never writes to a closed pipe
};

}  // namespace dfarm::agent
