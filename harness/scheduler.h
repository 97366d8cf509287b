// Scheduler: runs a run's pending jobs on their devices. One worker thread per
// device, devices in parallel, one job at a time per device. Each worker owns
// its device session (AgentClient) and its own Store connection.
//
// - A job that ends `infra` (device unreachable, push or transport failure,
//   an agent-side infra result) is retried up to SchedulerSpec::retries times
//   with exponential backoff; no other status is ever retried.
// - A device whose jobs end `infra` quarantine_after times in a row is
//   quarantined for the rest of the sweep (recorded in the store's devices
//   table). Its current and remaining jobs move to an equivalent device when
//   failover is "same_abi" and one exists, else they are recorded `infra`.
// - A job whose delegate names a plugin pushes the plugin file like the model
//   (by sha256, counted in bytes_pushed) and sends it as JobSpec::plugin_sha256,
//   with the `path` option left out of the delegate options sent.
// - Cancellation (the borrowed flag, set by Ctrl-C) stops workers between
//   jobs and cancels the jobs in flight on their agents (CancelJob, or a
//   dropped connection for an old agent): those go back to "queued", so every
//   job is either recorded in a final status or queued, and --resume runs them.
// - Cooldown (SchedulerSpec::cooldown): before each job, a pause, then
//   waiting for the device's hottest thermal zone (WaitForCooldown).
// - The run records the sha256 of each runner build by its host path
//   (store::Store::RecordRunRunner); scheduling jobs of a run whose runner
//   file changed since is refused unless allow_runner_change.
// - Every artifact pushed is recorded in the store's artifacts table.
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
#include "harness/devices.h"
#include "harness/matrix.h"  // SweepJob
#include "harness/progress.h"
#include "harness/runner_output.h"  // ParseRunnerJson, ParseRunnerAccuracy
#include "harness/spec.h"
#include "reports/store/store.h"

namespace dfarm::harness {

using StoreOpener = std::function<Result<std::unique_ptr<store::Store>>()>;

struct SchedulerStats {
  uint64_t bytes_pushed = 0;
  bool any_reached = false;              // some device answered hello
  std::vector<std::string> quarantined;  // devices quarantined, in order
};

struct SchedulerContext {
  DeviceProvider* devices = nullptr;  // shared by the workers; Open() is called concurrently
  StoreOpener open_store;             // one connection per worker
  std::string runner_path;            // pushed to every device before its first job
  SchedulerSpec policy;
  Progress* progress = nullptr;               // borrowed, may be null
  const std::atomic<bool>* cancel = nullptr;  // borrowed, may be null
  // ABIs known from earlier sweeps (store's devices table), so a device that
  // has not connected yet can still take jobs that move.
  std::vector<std::pair<std::string, std::string>> known_abis;
  // Resume with a runner build other than the one the run recorded.
  bool allow_runner_change = false;

  // Node mode (`dfarm node`, harness/node.h). When `claim` is set, each
  // device's worker connects to its device and then asks claim() for its
  // next job (on the worker's own store connection, with what the device
  // said at hello): a claimed job (id, claim_id, runner_path set), or nothing,
  // then it calls wait_for_work() and asks again, until *drain (finish the job
  // in hand, claim no more) or cancel. Each job pushes its own runner build.
  // Every state change of a job is made under its claim; a claim that was
  // lost (its lease expired and the job went back to the queue) drops the
  // result with a note, and a worker that finds its claim lost before an
  // attempt (store::Store::MarkJobRunning) drops the job and never retries it. A job that runs out
  // of attempts goes back to the queue (another device may take it) until it was claimed max_claims
  // times, then is recorded infra. `jobs` given to RunJobs may be empty.
  std::function<Result<std::optional<SweepJob>>(store::Store& store, const std::string& device,
                                                const agent::DeviceInfo& info)>
      claim;
  std::function<void()> wait_for_work;
  // Node mode, optional: asked before each claim, on the worker's store
  // connection and agent connection; false: the device must not claim now
  // (quarantined: health.h), then the worker waits and asks again.
  std::function<Result<bool>(store::Store& store, const std::string& device,
                             agent::AgentClient& client)>
      device_ready;
  const std::atomic<bool>* drain = nullptr;
  int64_t max_claims = 3;
  // Recorded with each device (store::DeviceRow::node, tags).
  std::string node_name;
  std::map<std::string, std::vector<std::string>> device_tags;
};

// Runs `jobs` (stored: each has its id) on workers for `devices` (every
// device a job names must be in it; extra devices only serve as failover
// targets); each job goes to its agent as scheduler.cc's ToJobSpec makes it.
// Returns when every job is recorded, or the sweep was cancelled. An error
// means a store write failed: then the sweep stopped early, and what was
// recorded stays.
Result<SchedulerStats> RunJobs(const SchedulerContext& ctx, const std::vector<std::string>& devices,
                               std::vector<SweepJob> jobs);

// Fails, naming the device, when its agent (features from hello) cannot take
// a delegate plugin: it lacks feature "plugin" (agent/protocol/PROTOCOL.md). The
// scheduler records such a plugin job `infra` at once (no retry, and it does
// not count toward quarantine: the device still serves other jobs).
Result<void> CheckDeviceTakesPlugins(const std::vector<std::string>& features,
                                     const std::string& device);

// Fails, naming the device and the feature, when its agent cannot run a job
// of runner kind `kind` on the build at `runner_path`: a tool kind needs
// "runner_kinds" (an older agent would run the tool with dfarm-runner's
// command line), a bundle needs "bundles" (an older agent would exec the
// archive). The scheduler records such a job `infra` at once (no retry; the
// device still serves other jobs).
Result<void> CheckDeviceTakesRunner(const std::vector<std::string>& features,
                                    const std::string& device, const std::string& kind,
                                    const std::string& runner_path);

// Fails, naming the device and the feature, when a job asks for a per-op
// profile (spec benchmark.profile) and the device's agent lacks feature
// "profile" (an older agent would drop RunJob.profile and measure without
// one). The scheduler records such a job `infra` at once (no retry; the
// device still serves other jobs).
Result<void> CheckDeviceTakesProfile(const std::vector<std::string>& features,
                                     const std::string& device);

// Turns what the agent returned into what the store keeps. The job's class
// is the agent's (Supervisor::ClassifyExit); this only validates it: a status
// outside the list (docs/CONTRACTS.md) becomes "infra", and, from an agent
// built before it refused one itself, an "ok" without metrics "crashed".
// The runner's placement and the agent's device state (as DeviceStateToJson)
// and flags are kept too.
store::JobOutcome ClassifyJobResult(const agent::JobResult& r);
// The same for `job`, whose runner's "ok" must also be plausible
// (ImplausibleReport against what the job asked for: its runner kind, runs,
// sustained mode and model); an implausible one becomes "crashed", the
// error naming the field and its value.
// Its error names the job's model by the user's file name (NameModelFile).
store::JobOutcome ClassifyJobResult(const agent::JobResult& r, const SweepJob& job);

// `text` with the model named as the user knows it: the agent hands a runner
// the model as an artifact named by its sha256, so the runner's and the
// runtime's messages name "/.../artifacts/<sha256>" or "<sha256>"; each such
// path or hash becomes `file` ("face.tflite"). Unchanged when either is empty.
std::string NameModelFile(std::string text, const std::string& sha256, const std::string& file);

// Fails, naming the device and the feature, when its agent cannot pin a
// runner to CPUs (spec benchmark.cpu_affinity; feature "cpu_affinity"). The
// scheduler records such a job `infra` at once (no retry).
Result<void> CheckDeviceTakesAffinity(const std::vector<std::string>& features,
                                      const std::string& device);

// Fails, naming the device and the feature, when its agent has no sustained
// mode (spec benchmark.sustained_s; feature "sustained"): recorded `infra`.
Result<void> CheckDeviceTakesSustained(const std::vector<std::string>& features,
                                       const std::string& device);

// The estimated energy of one inference in millijoules: the mean battery
// power |current_now| x voltage_now over the samples taken while the runner
// ran (else the before/after readings) times `mean_us`. Unset when no
// reading has both figures (no battery: a desktop, an emulator).
std::optional<double> EnergyPerInferenceMj(const agent::JobResult& r, double mean_us);

// The telemetry phase of the i-th (0-based) sample taken while the runner
// ran: "during:0001", ... (sortable, unique per job).
inline std::string DuringPhase(size_t i) {
  std::string n = std::to_string(i + 1);
  return "during:" + std::string(n.size() < 4 ? 4 - n.size() : 0, '0') + n;
}

// What WaitForCooldown uses; tests inject a fake clock and temperatures.
struct CooldownSource {
  std::function<std::chrono::steady_clock::time_point()> now;
  std::function<void(std::chrono::milliseconds)> sleep;
  // The device's hottest thermal zone in degrees C; unset when it exposes
  // none; an error when it cannot be asked (e.g. an agent without feature
  // "device_state").
  std::function<Result<std::optional<double>>()> hottest_c;
  // The device's CPU busy share (0..100) now; unset when it cannot say
  // (an agent before cpu_busy_pct). May be empty: the load rule is skipped.
  std::function<Result<std::optional<double>>()> busy_pct;
  std::function<bool()> cancelled;  // may be empty
};

struct CooldownOutcome {
  int64_t waited_ms = 0;  // by the clock, pause included
  bool checked = false;   // the temperature rule was applied
  bool gave_up = false;   // max_wait_s passed with the device still too hot or too busy
  bool noisy = false;     // gave up with the CPUs busier than max_cpu_busy_pct
  std::optional<double> last_temp_c;
  std::optional<double> last_busy_pct;
  std::string note;  // one line when the rule was skipped or gave up; else empty
};

// Polled this often while waiting for the device to cool down.
inline constexpr std::chrono::milliseconds kCooldownPoll{1000};

// Sleeps spec.pause_ms; then, when spec.max_temp_c > 0 and/or
// spec.max_cpu_busy_pct > 0, polls hottest_c / busy_pct every kCooldownPoll
// until each is within its limit or max_wait_s have passed (then the job runs
// anyway: gave_up, noisy when the load rule failed, and a note with the
// readings). A device without thermal zones, or an agent that cannot say,
// skips that rule with a note naming why.
CooldownOutcome WaitForCooldown(const CooldownSpec& spec, const CooldownSource& source);

// A CooldownSource over an agent connection (DeviceStateRequest) and the real
// steady clock; sleeps end early when *cancel turns true. Borrows both.
CooldownSource AgentCooldownSource(agent::AgentClient& client, const std::atomic<bool>* cancel);

// A device state as the store keeps it: a JSON object whose keys are
// agent::DeviceState's field names ("unix_ms", "cpus":[{"cpu","online",
// "cur_freq_khz","max_freq_khz","hw_max_freq_khz","governor"}],
// "thermal_zones":[{"zone","type","temp_c"}], "load_avg_1m", ...,
// "battery_level_pct", "battery_temp_c", "battery_current_ua"); a value the
// device did not expose is absent (an empty governor too).
std::string DeviceStateToJson(const agent::DeviceState& state);

}  // namespace dfarm::harness
