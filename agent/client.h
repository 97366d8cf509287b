// AgentClient: the host side of the agent protocol (agent/PROTOCOL.md). One
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

#include "agent/result.h"

namespace dfarm::agent {

// What the agent says about its device at hello.
struct DeviceInfo {
  std::string agent_version;
  uint32_t protocol_version = 0;
  std::vector<std::string> features;
  std::string os;   // "Linux 6.1.0-18-amd64"
  std::string abi;  // "x86_64", "arm64-v8a"
  std::string cpu;  // CPU model name
  uint32_t cores = 0;
  uint64_t memory_bytes = 0;
  std::string hostname;
  std::string os_release;      // "Debian GNU/Linux 12 (bookworm)", "Android 14"
  std::string kernel_version;  // uname version: "#1 SMP PREEMPT_DYNAMIC ..."
  // cpuinfo_max_freq of each CPU (index = CPU number), 0 where unreadable.
  std::vector<uint64_t> core_max_freq_khz;
  // Android properties read with getprop (ro.product.model, ro.soc.model,
  // ro.build.fingerprint, ro.build.version.sdk, ...); empty elsewhere.
  std::map<std::string, std::string> properties;
};

// One benchmark job. Artifacts are named only by sha256; the agent resolves
// them in its own store (no path ever comes from the wire).
struct JobSpec {
  std::string runner_sha256;  // the dfarm-runner build to execute
  std::string model_sha256;
  std::string delegate = "cpu";
  std::string delegate_options;  // "k1:v1;k2:v2"
  uint32_t num_threads = 1;
  uint32_t warmup_runs = 1;
  uint32_t num_runs = 10;
  uint32_t timeout_ms = 120000;
  // The external delegate plugin (a shared library pushed like the model),
  // or empty for none. The agent passes the runner `path:<store path>` as a
  // delegate option; delegate_options must not name a `path` (feature
  // "plugin"; an agent without it ignores the field).
  std::string plugin_sha256;
  // "cpu": the runner compares the outputs with its reference kernels
  // (--accuracy-reference cpu); empty: no comparison.
  std::string accuracy_reference;
};

// One CPU's cpufreq state (/sys/devices/system/cpu/cpuN). Unset: unreadable.
struct CpuState {
  uint32_t cpu = 0;                         // N
  std::optional<bool> online;               // cpuN/online (often missing for cpu0)
  std::optional<uint64_t> cur_freq_khz;     // scaling_cur_freq
  std::optional<uint64_t> max_freq_khz;     // scaling_max_freq: the policy's current cap
  std::optional<uint64_t> hw_max_freq_khz;  // cpuinfo_max_freq
  std::string governor;                     // scaling_governor; empty when unreadable
};

// One thermal zone (/sys/class/thermal/thermal_zoneN).
struct ThermalZoneState {
  uint32_t zone = 0;             // N
  std::string type;              // "cpu-thermal", "x86_pkg_temp", "battery", ...
  std::optional<double> temp_c;  // unset when the sensor cannot be read
};

// The device's state at one moment (agent/device_state.h reads it). Every
// value the device does not expose is unset or empty; reading never fails.
struct DeviceState {
  int64_t unix_ms = 0;                          // wall-clock time of the reading
  std::vector<CpuState> cpus;                   // CPUs in index order
  std::vector<ThermalZoneState> thermal_zones;  // zones in index order
  std::optional<double> load_avg_1m;            // /proc/loadavg
  std::optional<double> load_avg_5m;
  std::optional<double> load_avg_15m;
  // Android: /sys/class/power_supply/battery/{capacity,temp,current_now}.
  std::optional<int32_t> battery_level_pct;
  std::optional<double> battery_temp_c;
  std::optional<int64_t> battery_current_ua;  // as reported; the sign varies by vendor
};

// Failure classes of a job (issue 5): ok, model_error, delegate_error,
// unsupported, crashed, timeout, infra.
struct JobResult {
  std::string status;       // one of the classes above
  std::string error;        // one line, empty when ok
  int exit_code = -1;       // the runner's exit status, -1 if it did not exit
  int signal = 0;           // the signal that ended the runner, 0 if none
  std::string runner_json;  // the runner's --json document (stdout), verbatim
  std::string stderr_tail;  // last few KiB of the runner's stderr
  double wall_ms = 0;       // wall time of the runner process as seen by the agent
  // Device state read just before the runner started and just after it ended;
  // unset when no runner process was started (bad spec, missing artifact) or
  // the agent predates them.
  std::optional<DeviceState> state_before;
  std::optional<DeviceState> state_after;
  bool started_hot = false;  // a thermal zone above hot_threshold_c in state_before
  bool throttled = false;    // a CPU's scaling_max_freq below its cpuinfo_max_freq, before or after
  double hot_threshold_c = 0;  // the agent's threshold (dfarm-agent --hot-threshold-c)
  std::string state_note;      // one line naming why the job is flagged; empty when not
};

// A JobProgress frame (feature "progress"): phase "starting", "running" or
// "done", and the time since the agent accepted the job.
struct JobProgress {
  std::string phase;
  uint64_t elapsed_ms = 0;
};

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

// How AgentClient connects; the defaults are what Connect(host, port, timeout) uses.
struct ConnectOptions {
  // Bounds connecting and hello; each later request that runs no job is
  // bounded by the larger of this and 30 s.
  std::chrono::milliseconds timeout{10'000};
  // The agent's shared secret (the contents of its --token-file; see
  // ReadTokenFile in agent/auth.h). When set, the agent must ask for it and
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

// sha256 of a file as lowercase hex (OpenSSL), or an error naming the file.
Result<std::string> Sha256File(const std::string& path);

}  // namespace dfarm::agent
