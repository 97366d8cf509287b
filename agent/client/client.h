// AgentClient: the host side of the agent protocol (agent/protocol/PROTOCOL.md). One
// client holds one connection to one dfarm-agent; it is not thread-safe (the
// harness runs one worker per device).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/protocol/types.h"

namespace dfarm::agent {

// Optional hooks of AgentClient::RunJob.
struct RunJobOptions {
  // Called on the calling thread for each JobProgress of the job (only from
  // an agent that speaks "progress"). Not kept after RunJob returns.
  std::function<void(const JobProgress&)> on_progress;
  // Checked at least every 50 ms while the job runs; once true the job is
  // cancelled. With feature "cancel" the agent kills the runner and the
  // result is status infra, error "cancelled by host", and the connection
  // stays usable; without it the client drops the connection (which makes the
  // agent kill the job) and returns that same result. Not owned; may be null.
  const std::atomic<bool>* cancel = nullptr;
};

// One file of AgentClient::PutArtifacts.
struct ArtifactPush {
  std::string path;
  // The sha256 the caller already holds (pushed as PutArtifactAs does); empty:
  // the file is hashed first (as PutArtifact does).
  std::string sha256;
};

// How AgentClient connects; the defaults are what Connect(host, port, timeout) uses.
struct ConnectOptions {
  // Bounds connecting and hello; each later request that runs no job is
  // bounded by the larger of this and 30 s.
  std::chrono::milliseconds timeout{10'000};
  // The agent's shared secret (the contents of its --token-file; see
  // ReadTokenFile in agent/protocol/auth.h). When set, the agent must ask for it and
  // prove it knows it too; when empty, an agent that asks for a token is refused.
  std::string token;
  // With feature "heartbeat": while waiting for a reply the client pings the
  // agent this often and gives up on an agent silent for 3 intervals (so a
  // long RunJob notices a dead agent early). 0: no pings.
  std::chrono::milliseconds heartbeat_interval{5'000};
};

class AgentClient {
 public:
  // Connects to an agent on host:port and completes hello. Fails with a
  // message naming the address when it cannot connect or the versions differ.
  static Result<std::unique_ptr<AgentClient>> Connect(const std::string& host, uint16_t port,
                                                      std::chrono::milliseconds timeout);
  // Same, with a token and heartbeat settings. Also fails when the token is
  // refused, missing or not proven back by the agent.
  static Result<std::unique_ptr<AgentClient>> Connect(const std::string& host, uint16_t port,
                                                      const ConnectOptions& options);
  // Talks to an agent over a pair of file descriptors (pipes, a socketpair,
  // `adb exec-out`), e.g. one running `dfarm-agent --stdio`. Takes ownership
  // of both (they may be the same fd). name appears in messages ("agent at NAME").
  static Result<std::unique_ptr<AgentClient>> ConnectFds(int read_fd, int write_fd,
                                                         const std::string& name,
                                                         const ConnectOptions& options);
  // Starts argv (argv[0] looked up in PATH), e.g. {"dfarm-agent", "--stdio",
  // "--store", DIR} or {"adb", "exec-out", ...}, with its stdin and stdout on
  // a socket to this client, and completes hello. Its stderr goes to
  // stderr_file (appended) or, when empty, to ours. The client owns the
  // process: destroying the client closes the stream and reaps it (SIGKILL
  // after 2 s).
  static Result<std::unique_ptr<AgentClient>> Spawn(const std::vector<std::string>& argv,
                                                    const ConnectOptions& options,
                                                    const std::string& stderr_file = "");
  virtual ~AgentClient() = default;

  virtual const DeviceInfo& device() const = 0;

  // Which of these artifacts the agent already stores (same order as asked).
  virtual Result<std::vector<bool>> Have(const std::vector<std::string>& sha256s) = 0;

  // Pushes the file at `path` unless the agent already has it. On success
  // returns the number of payload bytes sent (0 when already present) and
  // sets *sha256_out to the file's sha256 (lowercase hex).
  virtual Result<uint64_t> PutArtifact(const std::string& path, std::string* sha256_out) = 0;

  // Same, for a file whose sha256 the caller already holds (a sweep's plan):
  // asks Have without reading the file and otherwise reads it once, each chunk
  // straight into its frame; the agent checks the sha256 as it writes. When the
  // bytes no longer hash to sha256 (the file changed since it was hashed), the
  // agent stores nothing; the file is then hashed again, *sha256_out gets its
  // hash and the error says it changed; the connection stays usable. Otherwise
  // *sha256_out is sha256. The default (for clients without it) hashes first
  // and pushes with PutArtifact.
  virtual Result<uint64_t> PutArtifactAs(const std::string& path, const std::string& sha256,
                                         std::string* sha256_out) {
    std::string actual;
    auto sent = PutArtifact(path, &actual);
    if (sha256_out) *sha256_out = actual;
    if (sent && actual != sha256) {
      return MakeError("'" + path + "' changed since it was hashed: its bytes hash to " + actual +
                       ", not " + sha256);
    }
    return sent;
  }

  // Pushes the files the agent lacks in one pipelined stream: one Have for
  // all of them, then each upload is sent without waiting for the PutReply of
  // the one before (the agent syncs an artifact to disk while the next
  // arrives), and the replies are read at the end. Returns, per file in the
  // order given, what PutArtifactAs (sha256 given) or PutArtifact (sha256
  // empty) would: the payload bytes sent (0 when the agent already had it or
  // an earlier file of the list was the same artifact) or an error naming the
  // file. A refused file (unreadable, refused by the agent, changed since it
  // was hashed) does not stop the others; a broken connection fails every
  // file not stored yet. When sha256s_out is set it gets each file's sha256
  // ("" for a file that could not be hashed; a changed file's actual hash).
  // The default (for clients without pipelining) pushes them one by one.
  virtual std::vector<Result<uint64_t>> PutArtifacts(const std::vector<ArtifactPush>& files,
                                                     std::vector<std::string>* sha256s_out) {
    std::vector<Result<uint64_t>> results;
    if (sha256s_out) sha256s_out->assign(files.size(), "");
    for (size_t i = 0; i < files.size(); ++i) {
      std::string sha;
      results.push_back(files[i].sha256.empty()
                            ? PutArtifact(files[i].path, &sha)
                            : PutArtifactAs(files[i].path, files[i].sha256, &sha));
      if (sha256s_out) (*sha256s_out)[i] = sha;
    }
    return results;
  }

  // Runs one job and waits for its result. A runner failure is a JobResult
  // with a non-ok status; only transport trouble is an error here, and a job
  // naming a plugin_sha256 when the agent lacks feature "plugin" (nothing is
  // sent then and the connection stays usable).
  virtual Result<JobResult> RunJob(const JobSpec& job) = 0;
  // Same, with progress reports and cancellation (RunJobOptions). The default
  // (for clients without them) ignores the options.
  virtual Result<JobResult> RunJob(const JobSpec& job, const RunJobOptions& options) {
    (void)options;
    return RunJob(job);
  }

  // The device's state now (feature "device_state"), e.g. to wait for it to
  // cool down between jobs. Fails naming the agent when it lacks the feature.
  virtual Result<DeviceState> QueryDeviceState() {
    return MakeError("this agent connection cannot query the device state");
  }
};

}  // namespace dfarm::agent
