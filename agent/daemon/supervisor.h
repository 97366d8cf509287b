// Supervisor: runs one job at a time as a fresh dfarm-runner process taken
// from the artifact store, captures its stdout (the --json document) and the
// tail of its stderr, enforces the job's wall-clock timeout and classifies
// the outcome into the job status classes of docs/CONTRACTS.md. It records
// the device state before and after each runner process.
//
// A runner artifact may be a bundle (agent/protocol/bundle.h): it is unpacked
// once under <store>/bundles/ and its program started through its own loader.
// The job's runner_kind (agent/protocol/runner_kinds.h) picks the command
// line: dfarm-runner's (RunnerArgs), or a Google tool's (ToolArgs), whose
// stdout and stderr together are the job's runner_json, verbatim.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/daemon/artifact_store.h"
#include "agent/daemon/device_state.h"
#include "agent/daemon/runner_bundles.h"
#include "agent/daemon/runner_records.h"
#include "agent/protocol/types.h"

namespace dfarm::agent {

struct SupervisorOptions {
  size_t stderr_tail_bytes = 4096;     // kept from the end of stderr
  size_t max_stdout_bytes = 1u << 20;  // stdout beyond this is dropped
  uint32_t max_timeout_ms = 24u * 3600 * 1000;
  // Device state (agent/device_state.h) is read under this root just before
  // the runner starts and just after it ends; tests point it at a fake tree.
  bool record_device_state = true;
  std::string device_state_root = "/";
  // While a runner runs, the device state is sampled this often into
  // JobResult::state_during (0: never), up to kMaxStateSamples samples.
  uint32_t sample_interval_ms = 1000;
  // A job whose state_before shows a thermal zone above this is flagged started_hot.
  double hot_threshold_c = kDefaultHotThresholdC;
  // Words put before the runner's path on its command line (dfarm-agent
  // --runner-prefix), e.g. {"qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"}
  // for an agent under qemu-user without binfmt_misc. The first word is looked
  // up in PATH unless it holds a '/'. Empty: the runner is executed directly.
  std::vector<std::string> runner_prefix;
  // Words put before a bundle's loader (or, without one, its program)
  // (dfarm-agent --bundle-prefix), e.g. {"qemu-aarch64"}: a bundle brings its
  // own libc, so qemu-user needs no -L sysroot. Empty: runner_prefix is used.
  std::vector<std::string> bundle_prefix;
  // After each job, kill every process left below this one (KillDescendants):
  // what the runner started outside its process group, adopted by this
  // process as their subreaper (BecomeSubreaper). Only for a process whose
  // children are all the supervisor's runners (dfarm-agent's main sets it).
  bool kill_descendants = false;
  // Where the supervisor logs what it cleans up (removed bundles); may be empty.
  std::function<void(const std::string&)> log;
};

class Supervisor {
 public:
  // store is not owned and must outlive the supervisor.
  explicit Supervisor(ArtifactStore* store, SupervisorOptions options = {});

  // Runs the job and waits for it. Never fails as a call: infrastructure
  // trouble (missing artifact, fork/exec failure, bad spec) is a JobResult
  // with status "infra". Jobs from several threads run one after another.
  // The runner, model and plugin (when job.plugin_sha256 is set) are pinned
  // in the store from the call until the job ends. A `path` key in
  // job.delegate_options is refused (infra): only the agent names paths.
  JobResult Run(const JobSpec& job);
  // Same, but gives up when *cancel becomes true (checked at least every
  // 50 ms while the job waits or runs): the runner's process group is killed
  // and the result is infra "job cancelled". cancel may be null.
  JobResult Run(const JobSpec& job, const std::atomic<bool>* cancel);

  // Agent shutdown: kills the running job's process group, if any (it is
  // reported as crashed by SIGKILL), and refuses later jobs as infra.
  void Shutdown();

  // At agent start: kills what the runners of an agent that died on this
  // store left behind (RunnerRecords, <store>/run). One line per record for
  // the log; fails only when the run folder cannot be created.
  Result<std::vector<std::string>> ReapLeftoverRunners();

  // Removes unpacked bundles whose artifact left the store (RunnerBundles::Prune);
  // one line each for the log. Called at agent start and before each job.
  std::vector<std::string> PruneBundles();

  // The runner command line for a job (docs/CONTRACTS.md), without argv[0].
  // plugin_path, when set (the store path of job.plugin_sha256), is appended
  // to the delegate options as `path:<plugin_path>`.
  // The full argv of a runner at runner_path with args (RunnerArgs): argv[0]
  // is "dfarm-runner", or, with a prefix, the prefix's words then runner_path.
  static std::vector<std::string> RunnerArgv(const std::vector<std::string>& prefix,
                                             const std::string& runner_path,
                                             std::vector<std::string> args);

  // input_dirs (the job's unpacked input sets, in order) each become one
  // `--inputs DIR`.
  static std::vector<std::string> RunnerArgs(const JobSpec& job, const std::string& model_path,
                                             const std::string& plugin_path = "",
                                             const std::vector<std::string>& input_dirs = {});

  // Classifies a finished runner: exit_code >= 0 when it exited, else
  // signal > 0. Fills status, error, exit_code and signal of result.
  static void Classify(int exit_code, int signal, const std::string& stdout_text,
                       const std::string& stderr_tail, JobResult* result);
  // Classifies a finished tool (runner kinds benchmark_model, inference_diff)
  // from its exit and its log (stdout and stderr together): exit 0 is ok;
  // another exit is crashed, with the log's last line that starts with
  // "ERROR:" or holds "Failed" as the error; a signal is crashed.
  static void ClassifyTool(int exit_code, int signal, const std::string& log, JobResult* result);

 private:
  JobResult RunLocked(const JobSpec& job, const std::atomic<bool>* cancel);
  // RunLocked less removing the unpacked input sets afterwards.
  JobResult RunUnpacked(const JobSpec& job, const std::atomic<bool>* cancel);
  // <store>/inputs: the running job's unpacked input sets (set_<k>/input_<i>.bin),
  // made before it starts and removed when it ends.
  std::string InputsFolder() const;
  // The runner's working directory, <store>/work, emptied before each job
  // so a relative path a runner writes (the gpu delegate's
  // serialization_dir) starts fresh with every job.
  std::string WorkFolder() const;
  // Unpacks each of job.input_set_sha256s into InputsFolder()/set_<k>; returns the folders.
  Result<std::vector<std::string>> UnpackInputSets(const JobSpec& job) const;

  // The steps of RunLocked (supervisor.cc), after the spec was checked.
  struct Launch;      // the runner's argv and the file to execute
  struct ChildPipes;  // the runner's stdout, stderr and exec-status pipes
  // The store paths of the job's artifacts, the runner made executable (or
  // its bundle unpacked), its argv.
  Result<Launch> PrepareLaunch(const JobSpec& job);
  // A stepped pair's --partner-runner and --partner-seed (job.partner_runner_sha256).
  Result<std::vector<std::string>> PartnerArgs(const JobSpec& job,
                                               const std::string& runner_path) const;
  // The runner's arguments (without argv[0]) by job.runner_kind.
  Result<std::vector<std::string>> ProgramArgs(const JobSpec& job, const std::string& model_path,
                                               const std::string& plugin_path) const;
  // The launch of the bundle artifact at runner_path: unpacked, then run
  // through its loader (or with LD_LIBRARY_PATH) under bundle_prefix.
  Result<Launch> BundleLaunch(const JobSpec& job, const std::string& runner_path,
                              std::vector<std::string> args);
  // The launch of a plain runner executable at runner_path, under runner_prefix.
  Result<Launch> PlainLaunch(const JobSpec& job, const std::string& runner_path,
                             std::vector<std::string> args) const;
  // Forks and execs the runner in its own session and process group, armed
  // to die by SIGKILL with this thread (the agent), and records it as the
  // running job (also in runner_records_); closes the pipes' write ends.
  // Returns the pid.
  Result<int> Spawn(Launch& launch, ChildPipes* pipes);
  // Kills the runner's process group (when kill_group), reaps the runner and
  // clears the running job and its record; returns its wait status.
  int KillAndReap(int pid, bool kill_group);
  // Classifies a runner that exited (Classify) and refuses an "ok" whose
  // stdout was cut at max_stdout_bytes, or whose document the runner-JSON
  // codec cannot read or has no metrics: those are `crashed`. The one
  // classifier of a job; the harness only validates what arrives.
  // A tool's exit (tool) is ClassifyTool's, with no JSON check.
  void ClassifyExit(int wait_status, bool stdout_truncated, bool tool, JobResult* result) const;
  // Attaches the device state before (given) and after (read now) to a result.
  JobResult WithDeviceState(std::optional<DeviceState> before, JobResult result) const;

  ArtifactStore* store_;
  SupervisorOptions options_;
  RunnerRecords runner_records_;  // <store>/run
  // Each job's processes carry DFARM_JOB_MARK=<prefix>.<n> (kJobMarkVariable).
  std::string job_mark_prefix_;
  uint64_t jobs_started_ = 0;   // with job_mutex_ held
  RunnerBundles bundles_;       // <store>/bundles; used with job_mutex_ held
  std::timed_mutex job_mutex_;  // one job at a time
  std::mutex pid_mutex_;        // guards running_pgid_ and shut_down_
  int running_pgid_ = 0;
  bool shut_down_ = false;
};

}  // namespace dfarm::agent
