// The value types both sides of the agent protocol use: what the agent says
// about its device, a job, its result, the device's state and a job's progress.
// agent/protocol/messages.h converts them to and from the wire.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dfarm::agent {

// One OpenCL device the agent sees (HelloReply.opencl_devices).
struct OpenClDeviceInfo {
  std::string platform;  // "Portable Computing Language"
  std::string name;
  std::string vendor;
  std::string driver_version;
  std::string opencl_version;  // "OpenCL 3.0 PoCL ..."
  bool fp16 = false;           // cl_khr_fp16
  bool gpu = false;            // CL_DEVICE_TYPE_GPU
  uint32_t compute_units = 0;
  uint64_t global_memory_bytes = 0;
};

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
  // Every OpenCL device of every platform, listed once when the agent
  // starts; empty without an OpenCL library (never an error) and from
  // older agents.
  std::vector<OpenClDeviceInfo> opencl_devices;
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
  // Feature "inputs": the job's input sets, each a packed set artifact
  // (agent/protocol/input_set.h) by sha256, in order. The agent unpacks each
  // into a folder of input_<i>.bin and passes the runner one --inputs per set.
  // Empty: the runner's seeded random inputs.
  std::vector<std::string> input_set_sha256s;
  // Feature "runner_kinds": the command-line contract of the runner build
  // (agent/protocol/runner_kinds.h); "" is dfarm-runner's. A host sends a
  // kind other than "" only to an agent that lists "runner_kinds".
  std::string runner_kind;
  // Feature "profile": the runner also profiles each step (dfarm-runner
  // --profile: per-node and per-op-type times in its JSON). Runners of kind
  // "dfarm" only; a host sends true only to an agent that lists "profile".
  bool profile = false;
  // Feature "cpu_affinity": the CPUs the runner is pinned to,
  // "big" (the CPUs of the highest cpuinfo_max_freq), "little" (the lowest)
  // or a list "0-3,6"; "" runs it wherever the kernel likes. A host sends it
  // only to an agent that lists "cpu_affinity".
  std::string cpu_affinity;
  // Feature "sustained": the measured runs go on for this many ms
  // (the runner's --sustained-secs) and the result has a latency curve; 0:
  // off. Runner kinds "dfarm" and "tflite" only; below timeout_ms.
  uint32_t sustained_ms = 0;
  // Feature "task_outputs": the runner's --task-outputs ("topk:K[:OUTPUT]",
  // "boxes:B,C,S,N[:MAX]", "anchors:B,S:SCORE:OFFSET:THRESHOLD[:MAX]" or
  // "classmap:OUTPUT[:ACTIVATION]"),
  // for task accuracy on a labelled set; "" for none. Runner kinds "dfarm"
  // and "tflite" only; a host sends it only to an agent that lists it.
  std::string task_outputs;
  // Feature "stepped_pairs": a second plain dfarm-runner build by sha256, run
  // beside this one as its partner in a stepped pair (the runner's
  // --partner-runner, agent/runner/stepped_pair.h) with the order seeded by
  // partner_seed; "" for none. Kind "dfarm" only, neither build a bundle, no
  // sustained mode; a host sends it only to an agent that lists the feature.
  std::string partner_runner_sha256;
  uint32_t partner_seed = 1;
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
  // /proc/stat: share of CPU time, all CPUs, not idle (nor iowait) over the
  // reading's window (CollectDeviceState's busy_window), 0..100.
  std::optional<double> cpu_busy_pct;
  std::optional<int64_t> battery_voltage_uv;  // voltage_now, microvolts
};

// Failure classes of a job: ok, model_error, delegate_error,
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
  // Sampled while the runner ran, in time order; empty when the
  // job was shorter than the agent's sample interval.
  std::vector<DeviceState> state_during;
};

// The most state_during samples a JobResult carries: the agent stops
// sampling a job there (600 s at the default interval).
inline constexpr size_t kMaxStateSamples = 600;

// A JobProgress frame (feature "progress"): phase "starting", "running" or
// "done", and the time since the agent accepted the job.
struct JobProgress {
  std::string phase;
  uint64_t elapsed_ms = 0;
};

}  // namespace dfarm::agent
