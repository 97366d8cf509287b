// Store: where every run, job, result and sample of DelegateFarm lives. The
// harness writes it during a sweep; reports/, the gate and the dashboard read
// it. One backend today (SQLite, OpenSqliteStore); PostgreSQL later behind the
// same interface.
//
// A Store object is not thread-safe: open one per thread (the dashboard opens
// its own next to a running sweep; SQLite's WAL mode lets readers proceed while
// a sweep writes). Every write is committed before the call returns, so a
// reader sees each job's result the moment it arrives.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/base/result.h"
#include "agent/protocol/status.h"
#include "agent/runner/runner_values.h"
#include "reports/store/cell.h"

namespace dfarm::store {

// A queue run's priority (spec "farm": {"priority"}, `dfarm sweep
// --priority`): kRunPriorityMin to kRunPriorityMax, higher claimed first.
inline constexpr int64_t kRunPriorityMin = 0;
inline constexpr int64_t kRunPriorityMax = 9;
inline constexpr int64_t kRunPriorityDefault = 5;
// How long a queue run's queued jobs wait, by default, for a live node that
// serves their device before they end not_run (spec "farm":
// {"unserved_timeout_s"}); at most kUnservedTimeoutMaxS.
inline constexpr int64_t kUnservedTimeoutDefaultS = 900;
inline constexpr int64_t kUnservedTimeoutMaxS = 7 * 24 * 3600;

// Run status: "running" | "finished" | "failed" | "cancelled".
inline constexpr const char* kRunRunning = "running";
inline constexpr const char* kRunFinished = "finished";
inline constexpr const char* kRunFailed = "failed";
inline constexpr const char* kRunCancelled = "cancelled";

// Job status: "queued" | "running" while pending, then one of the job status
// classes (ok, model_error, delegate_error, unsupported, crashed, timeout,
// infra, cancelled, not_run), whose one list is DFARM_JOB_STATUSES in
// agent/protocol/status.h. cancelled: its run was cancelled (CancelRun);
// not_run: a farm's job that no live node served in time (EndUnservedJobs).
inline constexpr const char* kJobQueued = "queued";
inline constexpr const char* kJobRunning = "running";
inline constexpr const char* kJobOk = JobStatusName(JobStatus::kOk);
inline constexpr const char* kJobInfra = JobStatusName(JobStatus::kInfra);
inline constexpr const char* kJobCancelled = JobStatusName(JobStatus::kCancelled);
inline constexpr const char* kJobNotRun = JobStatusName(JobStatus::kNotRun);

// True for the statuses a job ends in: the names of JobStatus (everything but
// queued and running).
bool IsFinalJobStatus(const std::string& status);

// What the runner measured, kept as it reported it: one definition with the
// runner and its JSON (agent/runner/runner_values.h, docs/CONTRACTS.md).
// JobPlacement: a job's delegated partitions and one PlacementNode per model
// node, by node index. Accuracy: the reference and one OutputAccuracy per
// output, by output index (a max_abs_error_lsb read back is a real).
using runner::Accuracy;
using runner::JobPlacement;
using runner::OutputAccuracy;
using runner::PlacementNode;

// A job's metrics: the runner's, and the threads the delegate ran with (the
// runner's threads_used; 0 when the runner did not report it).
struct JobMetrics : runner::Metrics {
  int64_t threads_used = 0;
};

// The counts of a job's placement, cheap enough for a run's job list.
struct PlacementSummary {
  int64_t partitions = 0;
  int64_t nodes = 0;
  int64_t delegated_nodes = 0;  // nodes whose delegate is not "cpu"
  int64_t cpu_nodes = 0;        // nodes on "cpu", folded ones included
  std::string delegates;        // the delegates other than cpu that ran nodes, ","-joined, sorted
  int64_t folded_nodes = 0;     // nodes evaluated once at load (constants), among cpu_nodes
  // The most common reason of the nodes on cpu that run (not folded), the
  // lowest node's of equals; "" when none gave one. delegation.h shows it.
  std::string main_reason;
};

struct RunRow {
  int64_t id = 0;
  std::string name;
  std::string created_at;   // ISO-8601 UTC, "2024-05-01T12:34:56Z"
  std::string finished_at;  // empty while running
  std::string status;       // kRun*
  std::string spec_json;    // the sweep spec as given (after validation)
  // Schema v4: the dfarm process working on the run (CreateRun, ReopenRun;
  // cleared by FinishRun): pid 0 when none.
  int64_t owner_pid = 0;
  std::string owner_host;
  int64_t owner_since = 0;  // unix seconds of the claim, renewed while a sweep runs
  // Schema v6: the run this one was made from (`dfarm gate --rerun-unknown`
  // reruns cells of a candidate in a new run linked to it); 0 = none.
  int64_t parent_run_id = 0;
  std::vector<std::string> tags;  // tag names on this run, sorted (ListRuns/GetRun fill it)
  // Schema v11: "" for a run its sweep runs itself; kRunModeQueue for a run
  // whose jobs `dfarm node` processes claim.
  std::string mode;
  // Schema v20, a queue run's (SetRunQueueing): nodes claim the jobs of the
  // highest priority first; unserved_timeout_s: how long its queued jobs
  // wait for a live node that serves their device (EndUnservedJobs).
  int64_t priority = kRunPriorityDefault;
  int64_t unserved_timeout_s = kUnservedTimeoutDefaultS;
};

inline constexpr const char* kRunModeQueue = "queue";

// The device's telemetry beside one job, from the agent's
// snapshots: queryable figures of state_before/state_after.
struct TelemetryRow {
  std::string phase;  // "before" | "after"
  int64_t unix_ms = 0;
  std::optional<double> hottest_temp_c;  // the hottest thermal zone
  std::optional<double> load_avg_1m;
  std::optional<double> battery_temp_c;
  std::optional<int64_t> battery_level_pct;
};

// An artifact a sweep pushed: the first time the store saw it.
struct ArtifactRow {
  std::string sha256;
  std::string kind;  // "runner" | "model" | "plugin" | "inputs"
  int64_t size_bytes = 0;
  std::string first_seen;  // ISO-8601 UTC, set by RecordArtifact
  std::string host_path;   // where it was on the host when first seen
};

struct JobRow {
  int64_t id = 0;
  int64_t run_id = 0;
  std::string job_key;           // deterministic over the job's inputs; equal keys are comparable
  std::string model;             // file name, "face_detection_short_range.tflite"
  std::string model_path;        // absolute path on the host at sweep time
  std::string model_sha256;      // lowercase hex
  std::string delegate;          // "cpu"
  std::string delegate_options;  // "k1:v1;k2:v2", keys sorted
  std::string device;            // device name, "local"
  std::string status;            // kJob* / a job status class
  std::string error;             // one line, empty when ok
  double wall_ms = 0;            // runner wall time seen by the agent, 0 if it never ran
  std::optional<JobMetrics> metrics;  // present when the runner reported metrics
  uint32_t num_threads = 0;           // the job's thread count; 0 in runs before schema v2
  int64_t attempts = 0;               // times the job was started (MarkJobRunning)
  std::string moved_from;             // the device it was planned on, when it moved; else empty
  // Schema v3: present when the runner reported a placement (ok jobs of a
  // runner that knows it); GetPlacement has the nodes.
  std::optional<PlacementSummary> placement;
  bool started_hot = false;  // the agent saw a thermal zone above its threshold before the job
  bool throttled = false;    // a CPU ran below its hardware maximum before or after the job
  bool noisy = false;        // started with the CPUs busier than the cooldown allows
  // Estimated energy of one inference in millijoules (battery
  // power while the runner ran x mean latency); unset without battery figures.
  std::optional<double> energy_mj;
  std::string state_note;  // one line naming why the job is flagged; empty when not
  // Schema v6 (0/empty in runs before it).
  int64_t trial = 0;          // 0-based trial index of the cell (spec benchmark.repeats)
  std::string runner;         // runner name of the spec ("" = the default runner)
  std::string runner_sha256;  // sha256 of the runtime build that ran (may be "" in old runs)
  // Schema v18: what the job ran on (InputsId, cell.h); kSeededInputs in runs before it.
  std::string inputs = kSeededInputs;
  // Schema v19: a paired run's pair (spec "pairing"): 1, 2, ... in the run,
  // shared by the baseline's and the candidate's job of one trial of one cell
  // on one device; the one that ran first has the lower id. 0 when not paired.
  int64_t pair = 0;
  // Schema v11: the distributed queue (empty/0 for the jobs of a run its
  // sweep runs itself).
  std::string target;      // where it may run: "" = `device` only; a Target string (below)
  std::string payload;     // what a node needs to run it (JSON, harness/farm/queue_job.h)
  std::string claimed_by;  // the node holding it while it runs; "" when none
  int64_t claim_id = 0;    // its latest claim (1, 2, ...): a result commits only under it
  // Schema v13 ('' in older runs): the runner's kind ("dfarm", "tflite",
  // "benchmark_model", "inference_diff") and the version it reported.
  std::string runner_kind;
  std::string runner_version;
  // Schema v23: the class of the device that claimed a job aimed at `any` or
  // a selector (DeviceClassOf, cell.h; ClaimJob records it): its cell's
  // device is then that class (CellOf). "" for a job aimed at one device and
  // in runs before v23.
  std::string device_class;
};

// A job's per-op profile: the runner's --profile section (spec
// benchmark.profile), kept as the runner reported it (runner_values.h).
using runner::JobProfile;
using runner::ProfileNode;
using runner::ProfileOp;
// A sustained-mode job's latency curve, as the runner reported
// it (runner_values.h).
using runner::JobSustained;
using runner::SustainedWindow;

// Task accuracy of one job on a labelled set (spec "eval"), computed by the
// host from the runner's task_outputs. Metrics are fractions in [0, 1]
// ("top1", "top5" for classification) with a seeded bootstrap interval over
// the set's images (NaN bounds when there is none).
struct TaskMetric {
  std::string name;
  double value = 0;
  double low = 0;
  double high = 0;
};
struct TaskAccuracy {
  std::string task;     // "classification"
  std::string dataset;  // the labelled set's identity, "NAME@<12 hex>"
  int64_t images = 0;   // images evaluated
  std::vector<TaskMetric> metrics;
  // Per image, in set order, what a paired comparison of two jobs on the
  // same set needs: a JSON object, {"ranks":[r0, r1, ...]} for
  // classification (the label's rank among the output's classes; k or more
  // when it was not among the k listed).
  std::string per_image;
  // The metric named `name`, or nullptr.
  const TaskMetric* Find(const std::string& name) const {
    for (const TaskMetric& m : metrics) {
      if (m.name == name) return &m;
    }
    return nullptr;
  }
};

// What RecordJobResult stores for one finished job.
struct JobOutcome {
  std::string status;  // a final job status class
  std::string error;   // one line, empty when ok
  int exit_code = -1;  // runner exit status, -1 if it did not exit
  int signal = 0;      // signal that ended the runner, 0 if none
  double wall_ms = 0;
  std::optional<JobMetrics> metrics;
  std::vector<double> samples_us;  // per steady-state run, in order
  std::string runner_json;         // the runner's --json document, verbatim
  std::string stderr_tail;
  // Schema v3. Unset placement: the runner did not report one.
  std::optional<JobPlacement> placement;
  // The device state before/after the runner as a JSON object (keys as
  // agent::DeviceState's fields, absent when unset; harness
  // DeviceStateToJson); unset when the agent read none.
  std::optional<std::string> state_before_json;
  std::optional<std::string> state_after_json;
  bool started_hot = false;
  bool throttled = false;
  bool noisy = false;               // the cooldown's load rule gave up (harness)
  std::optional<double> energy_mj;  // estimated, per inference (harness)
  double hot_threshold_c = 0;       // the agent's threshold; 0 when it reported none
  std::string state_note;
  // Schema v4: per-output accuracy (unset when the runner compared none).
  std::optional<Accuracy> accuracy;
  // Schema v4: the device's telemetry before/after the runner (empty when unread).
  std::vector<TelemetryRow> telemetry;
  // A claimed job (ClaimJob): the claim_id it was claimed under. The result
  // is recorded only while that claim holds (else an ErrorKind::kConflict
  // error, nothing recorded: the lease expired and the job went back to the
  // queue). 0: a job of a run its sweep runs itself (one no claim ever held:
  // else kConflict).
  int64_t claim_id = 0;
  // Schema v13: the version the runner reported (its --json "runtime"); ""
  // keeps what the job has.
  std::string runner_version;
  // Schema v14: the job's per-op profile; unset when it was not profiled.
  std::optional<JobProfile> profile;
  // Schema v16: the sustained-mode curve; unset for other jobs.
  std::optional<JobSustained> sustained;
  // Schema v21: task accuracy on a labelled set; unset for other jobs.
  std::optional<TaskAccuracy> task;
};

// The raw evidence behind one job, for drill-down.
struct JobDetail {
  int exit_code = -1;
  int signal = 0;
  std::string runner_json;
  std::string stderr_tail;
  std::string finished_at;
  // Schema v3 (unset/false/0/empty in results recorded before it).
  std::optional<std::string> state_before_json;
  std::optional<std::string> state_after_json;
  bool started_hot = false;
  bool throttled = false;
  double hot_threshold_c = 0;
  std::string state_note;
};

// One OpenCL device an agent reported (the protocol's OpenClDevice).
struct OpenClDevice {
  std::string platform;  // "Portable Computing Language"
  std::string name;      // "cpu-haswell-AMD EPYC ...", "Adreno (TM) 740"
  std::string vendor;
  std::string driver_version;
  std::string opencl_version;  // "OpenCL 3.0 PoCL ..."
  bool fp16 = false;           // cl_khr_fp16
  bool gpu = false;            // CL_DEVICE_TYPE_GPU
  int64_t compute_units = 0;
  int64_t global_memory_bytes = 0;
};

// The one text form of a device's OpenCL list (devices.opencl, `dfarm
// devices --json`): a JSON array of objects with the fields' names; "" for an
// empty list. ParseOpenClDevices reads it back; unreadable text is an empty
// list.
std::string OpenClDevicesJson(const std::vector<OpenClDevice>& devices);
std::vector<OpenClDevice> ParseOpenClDevices(const std::string& text);
// "NAME (driver VERSION)" of the first device (GPUs first), "" when none:
// what reports and `dfarm show` name as the job's GPU.
std::string OpenClDeviceLabel(const std::vector<OpenClDevice>& devices);

// What a device said about itself when the harness last reached it.
struct DeviceRow {
  std::string name;  // "local", "tcp://10.0.0.7:7000", adb serial
  std::string abi;
  std::string os;
  std::string cpu;
  int64_t cores = 0;
  int64_t memory_bytes = 0;
  std::string hostname;
  std::string agent_version;
  std::string last_seen;     // ISO-8601 UTC, set by UpsertDevice
  std::string state;         // kDevice*: what the last sweep concluded; empty when nothing
  std::string state_reason;  // why, one line (for quarantined)
  // Schema v11: the node that serves it ("" for a device of a local sweep)
  // and its tags (--device URI --tag, or the spec's device_tags), sorted.
  std::string node;
  std::vector<std::string> tags;
  // The OpenCL devices its agent saw; empty when none (or an agent that
  // does not list them).
  std::vector<OpenClDevice> opencl;
  // Schema v20: who set the state (kSetBy*; "" before v20) and, for an
  // operator, "USER@HOST". An operator's state holds until an operator lifts it.
  std::string state_by;
  std::string state_user;
};

// Which runs ListRunSummaries returns; an empty field does not filter.
struct RunFilter {
  std::string name_contains;  // part of the run's name, ASCII case-insensitive
  std::string tag;            // a tag on the run
  // ISO-8601 UTC prefixes, inclusive: "2024-05-01" is that whole day as
  // created_from and created_to; "2024-05-01T12" that hour.
  std::string created_from;
  std::string created_to;
  std::string device;    // a job of the run ran (or is planned) on this device
  std::string model;     // a job of the run has this model file name or sha256
  std::string delegate;  // a job of the run uses this delegate
  std::string status;    // the run's status (kRun*)
};

// One run with its job counts, for the dashboard's runs view and `dfarm runs`.
struct RunSummary {
  RunRow run;                                // tags filled
  int64_t jobs = 0;                          // all jobs of the run
  std::map<std::string, int64_t> by_status;  // job status -> jobs; only statuses present
};

// Which cells ListCells returns; an unset (or empty) field matches any cell.
struct CellFilter {
  // A model file name, or a sha256 or a prefix of one (8 to 64 hex digits, any
  // case): a cell matches when its jobs have that file name or their sha256
  // begins with it.
  std::string model;
  std::string delegate;
  std::optional<std::string> delegate_options;  // "k1:v1;k2:v2", keys sorted, as stored
  std::optional<std::string> device;            // the cell's device: a device name, or "class:NAME"
  std::optional<std::string> runner;
  std::optional<uint32_t> num_threads;
  std::optional<std::string> inputs;  // an inputs id (Cell::inputs) or a prefix of one
};

// One cell's recent latency, for an overview of every cell (ListRecentCellValues).
struct CellRecentValues {
  Cell cell;                // model: the file name of its newest run's newest job
  int64_t last_run_id = 0;  // the newest run with a job of the cell, any status
  // (run id, p50 latency in us) of each ok trial with metrics in the cell's
  // newest runs (runs with a job of the cell, any status), by run, then
  // trial, then job id.
  std::vector<std::pair<int64_t, double>> p50_us;
};

// A state a device was put in, written by every SetDeviceState.
struct DeviceEvent {
  std::string name;
  std::string at;  // ISO-8601 UTC
  std::string state;
  std::string reason;
  std::string set_by;  // kSetBy* (schema v20; "" before)
  std::string user;    // an operator's "USER@HOST"
};

// Who set a device's state: a sweep or node on its own (a quarantine after
// infra jobs in a row), a health check, or an operator (`dfarm devices
// --quarantine/--release`). An operator's state wins over the others until
// an operator lifts it (SetOperatorState with state "").
inline constexpr const char* kSetByDfarm = "dfarm";
inline constexpr const char* kSetByHealth = "health";
inline constexpr const char* kSetByOperator = "operator";

// Device states a sweep records (SetDeviceState); `dfarm devices` adds
// "online", "offline" and "busy" from what it sees itself. A farm node
// records "offline" for a device it cannot reach (SetDeviceReachable).
inline constexpr const char* kDeviceOk = "ok";
inline constexpr const char* kDeviceQuarantined = "quarantined";
inline constexpr const char* kDeviceOffline = "offline";

// The known outputs of a health model for one runner build:
// what the first device that passed the check recorded (harness/devices/health.h).
struct HealthGolden {
  std::string model_sha256;
  std::string runner_sha256;
  std::string outputs;      // the outputs' sha256s in output order, joined by ","
  std::string device;       // the device that recorded them
  std::string recorded_at;  // ISO-8601 UTC
};

// A host of the farm running `dfarm node`.
struct NodeRow {
  std::string name;  // unique in the database: --name, else "<host>:<pid>"
  std::string host;
  int64_t pid = 0;
  std::string started_at;       // ISO-8601 UTC
  int64_t heartbeat_unix = 0;   // the database's clock
  int64_t heartbeat_age_s = 0;  // seconds since, on the database's clock (ListNodes)
  std::string state;            // kNode*
  std::vector<std::string> devices;
};

// A node that has not sent a heartbeat for this long is taken for lost
// (`dfarm devices`, the targets a farm sweep says no node serves).
inline constexpr int64_t kNodeLostAfterSeconds = 60;

inline constexpr const char* kNodeRunning = "running";
inline constexpr const char* kNodeDraining = "draining";  // SIGTERM: finishing its jobs
inline constexpr const char* kNodeStopped = "stopped";

// Whether `n` is a node that is not stopped and has sent a heartbeat lately.
inline bool NodeAlive(const NodeRow& n) {
  return n.state != kNodeStopped && n.heartbeat_age_s <= kNodeLostAfterSeconds;
}

// A device as a job's target matches it.
struct DeviceTraits {
  std::string name;
  std::string abi;
  std::string os;
  std::string cpu;  // the SoC / CPU name the agent reports
  int64_t memory_bytes = 0;
  std::vector<std::string> tags;
  std::string model;  // Android's ro.product.model ("Pixel 7"); "" elsewhere (DeviceClassOf)
};

// Where a queued job may run (JobRow::target): "" = its own device only;
// "any" = any device of any node; else a selector, written
// "select:abi=arm64-v8a;os=android;soc=sm8550;tags=lab,fast;min_memory_mb=4096"
// (each key optional; os and soc match a part of the device's, any case;
// every tag must be on the device).
struct TargetSelector {
  std::string abi;
  std::string os;
  std::string soc;
  std::vector<std::string> tags;
  int64_t min_memory_mb = 0;
};
inline constexpr const char* kTargetAny = "any";
std::string TargetString(const TargetSelector& s);
Result<TargetSelector> ParseTarget(
    const std::string& target);  // kInvalidInput naming what is wrong
// Whether a job with `target` and planned device `job_device` may run on `d`.
bool TargetMatches(const std::string& target, const std::string& job_device, const DeviceTraits& d);

// What CancelRun changed.
struct CancelledRun {
  int64_t run_id = 0;
  int64_t queued = 0;   // queued jobs ended cancelled
  int64_t running = 0;  // running jobs ended cancelled (their nodes record nothing more)
};

// A queue run's claim order and patience (schema v20), and the device
// classes of its jobs' cells (v23).
struct RunQueueing {
  int64_t priority = kRunPriorityDefault;
  int64_t unserved_timeout_s = kUnservedTimeoutDefaultS;
  // Schema v23: the spec's device classes, by which ClaimJob names the class
  // of a device that claims a job aimed at `any` or a selector (DeviceClassOf).
  DeviceClasses device_classes;
};

// One claim of a job and how it ended.
struct JobClaimRow {
  int64_t claim_id = 0;
  std::string node;
  std::string device;
  int64_t claimed_unix = 0;
  int64_t ended_unix = 0;  // 0 while held
  std::string outcome;     // kClaim*: "" while held
};
inline constexpr const char* kClaimFinished = "finished";    // its result was recorded
inline constexpr const char* kClaimReaped = "reaped";        // the lease expired: back to the queue
inline constexpr const char* kClaimReleased = "released";    // the node gave it back (Ctrl-C)
inline constexpr const char* kClaimCancelled = "cancelled";  // its run was cancelled

// The LISTEN/NOTIFY channel that wakes idle nodes when jobs are queued.
inline constexpr const char* kWorkChannel = "dfarm_jobs";

// Runs and their jobs' results, read-only.
class RunReader {
 public:
  virtual ~RunReader() = default;
  virtual Result<std::vector<RunRow>> ListRuns() = 0;  // oldest first
  virtual Result<RunRow> GetRun(int64_t run_id) = 0;   // error if no such run
  // The runs `filter` lets through, newest first (highest id first), tags
  // filled, each with its job counts by status: one query, fast on a million
  // jobs (the dashboard's runs view and `dfarm runs`).
  virtual Result<std::vector<RunSummary>> ListRunSummaries(const RunFilter& filter = {}) = 0;
  // The run tagged `name`; unset when none is.
  virtual Result<std::optional<int64_t>> FindTag(const std::string& name) = 0;
  // (host path, sha256) of the run's runtime builds, by path.
  virtual Result<std::vector<std::pair<std::string, std::string>>> ListRunRunners(
      int64_t run_id) = 0;
  virtual Result<std::vector<JobRow>> ListJobs(int64_t run_id) = 0;  // by job id
  virtual Result<JobRow> GetJob(int64_t job_id) = 0;
  virtual Result<std::vector<double>> GetSamples(int64_t job_id) = 0;  // in run order
  virtual Result<JobDetail> GetJobDetail(int64_t job_id) = 0;          // error if no result yet
  // The job's placement, nodes by index; unset when its result has none (no
  // result yet, a failed job, a runner before placement). Error: no such job.
  virtual Result<std::optional<JobPlacement>> GetPlacement(int64_t job_id) = 0;
  // The job's accuracy, outputs by index; unset when it has none. Error: no such job.
  virtual Result<std::optional<Accuracy>> GetAccuracy(int64_t job_id) = 0;
  // The job's telemetry rows ("before", then "after"); empty when none.
  virtual Result<std::vector<TelemetryRow>> GetTelemetry(int64_t job_id) = 0;
  // A job's per-op profile: runs, nodes in execution order and
  // by_op as recorded; unset when the job has none (not profiled, no result
  // yet, failed). Error: no such job.
  virtual Result<std::optional<JobProfile>> GetProfile(int64_t job_id) = 0;
  // The profiles of every job of a run that has one, by job id, in one
  // query: runs and by_op only (nodes left empty; GetProfile has them). For
  // reports' per-cell top ops. Empty when none.
  virtual Result<std::map<int64_t, JobProfile>> ListRunProfiles(int64_t run_id) = 0;
  // The sustained-mode curves of a run's jobs that have one, by
  // job id, windows in time order. Empty when none.
  virtual Result<std::map<int64_t, JobSustained>> ListRunSustained(int64_t run_id) = 0;
  // Task accuracy (spec "eval") of the run's jobs that have it, by job id.
  virtual Result<std::map<int64_t, TaskAccuracy>> ListRunTaskAccuracy(int64_t run_id) = 0;
  virtual Result<std::vector<ArtifactRow>> ListArtifacts() = 0;  // by first_seen, then sha256
};

// Cell queries: one cell's jobs over runs, and the cells there are.
class CellReader {
 public:
  virtual ~CellReader() = default;
  // Every job of one cell across all runs (every trial, metrics filled),
  // ordered by run id, then trial, then job id: what a trend over runs reads
  // (`dfarm history`, the dashboard's trend view). Empty when none.
  // The cell's identity matches exactly ("" and 0 are values: the default
  // runner, a run before threads); its model file name is not read.
  virtual Result<std::vector<JobRow>> ListCellJobs(const Cell& cell) = 0;
  // ListCellJobs with only what a series over runs reads, a lighter read for
  // trends of many runs: the cell's identity, id, run_id, trial, model,
  // status, runner_sha256, runner_version and metrics (mean, p50, p90, p99,
  // num_runs, peak RSS); every other field is left at its default.
  virtual Result<std::vector<JobRow>> ListCellTrials(const Cell& cell) = 0;
  // The distinct cells whose jobs `filter` lets through, in Cell order, each
  // named by the file name of its newest job (highest id): one query on the
  // indexed columns, without reading the jobs (`dfarm history` finds its cell,
  // `dfarm regressions` walks them).
  virtual Result<std::vector<Cell>> ListCells(const CellFilter& filter = {}) = 0;
  // Every cell, in Cell order, with the p50 latencies of its ok trials in its
  // newest `runs` runs (runs <= 0: none): one query, not one per cell, fast
  // on a million jobs (the dashboard's overview).
  virtual Result<std::vector<CellRecentValues>> ListRecentCellValues(int64_t runs) = 0;
};

// Devices and their health, read-only.
class DeviceReader {
 public:
  virtual ~DeviceReader() = default;
  virtual Result<std::vector<DeviceRow>> ListDevices() = 0;  // by name
  // One device's row; unset when the store has never seen it.
  virtual Result<std::optional<DeviceRow>> GetDevice(const std::string& name) = 0;
  // The states device `name` was put in, oldest first; empty when none
  // (states set before schema v9 have no event).
  virtual Result<std::vector<DeviceEvent>> ListDeviceEvents(const std::string& name) = 0;
  // The known outputs of (model, runner); unset when none are recorded.
  virtual Result<std::optional<HealthGolden>> GetHealthGolden(const std::string& model_sha256,
                                                              const std::string& runner_sha256) = 0;
};

// The farm's nodes and claims, read-only.
class QueueReader {
 public:
  virtual ~QueueReader() = default;
  virtual Result<std::vector<NodeRow>> ListNodes() = 0;                        // by name
  virtual Result<std::vector<JobClaimRow>> ListJobClaims(int64_t job_id) = 0;  // oldest first
  // The jobs a node holds now (status running, claimed_by set), by device,
  // then job id: what each device of the farm runs (the dashboard's fleet).
  virtual Result<std::vector<JobRow>> ListClaimedJobs() = 0;
};

// Runs and results, the write side: sweeps and nodes record through it.
class RunWriter {
 public:
  virtual ~RunWriter() = default;
  // Creates a run in status "running" with created_at = now; returns its id.
  virtual Result<int64_t> CreateRun(const std::string& name, const std::string& spec_json) = 0;
  // Adds jobs to a run in status "queued" (JobRow::id, status, error, wall_ms
  // and metrics are ignored). AddJobs is one transaction; ids in input order.
  virtual Result<int64_t> AddJob(int64_t run_id, const JobRow& job) = 0;
  virtual Result<std::vector<int64_t>> AddJobs(int64_t run_id, const std::vector<JobRow>& jobs) = 0;
  // A job's state changes only under its claim. claim_id > 0 (ClaimJob's):
  // while that claim holds the running job. claim_id 0 (a job of a run its
  // sweep runs itself): while the job is unclaimed and queued or running.
  // Otherwise nothing changes and the call fails with ErrorKind::kConflict,
  // naming the job's state now: the caller has lost the job (its lease
  // expired, another node may have finished it) and must stop working on it,
  // never retry it. No such job: an error of another kind.
  //
  // Sets status "running" and started_at, and counts one more attempt.
  virtual Result<void> MarkJobRunning(int64_t job_id, int64_t claim_id) = 0;
  // A job that moves to another device (its device was quarantined): sets
  // device and job_key, and moved_from to the device it was planned on. A
  // job of a sweep's own run only (claim_id 0, as above).
  virtual Result<void> MoveJob(int64_t job_id, const std::string& device,
                               const std::string& job_key) = 0;
  // Stores a job's final status, metrics, samples and raw runner output in
  // one transaction, committed before returning; under outcome.claim_id (as
  // above), except that a job of a sweep's own run (claim 0, never claimed)
  // may be recorded again: the new result replaces the old one.
  virtual Result<void> RecordJobResult(int64_t job_id, const JobOutcome& outcome) = 0;
  // Sets a running job of a sweep's own run (claim_id 0) that was started
  // but not finished (cancelled) back to "queued"; any other job is left as
  // it is (a claimed job goes back with ReleaseClaim).
  virtual Result<void> RequeueJob(int64_t job_id) = 0;
  // Sets a run's final status (kRunFinished/kRunFailed/kRunCancelled) and finished_at = now.
  virtual Result<void> FinishRun(int64_t run_id, const std::string& status) = 0;
  // Sets a run back to "running" (dfarm sweep --resume) and makes this process
  // its owner, atomically (BEGIN IMMEDIATE). Refused, naming the pid and host,
  // while another live dfarm process owns it (same host: its pid exists;
  // another host: its claim is younger than kRunClaimStaleSeconds); a dead
  // owner's claim is taken over. The owning process may reopen it again.
  virtual Result<void> ReopenRun(int64_t run_id) = 0;
  // Renews this process's claim on a run it owns (owner_since = now), so a
  // dfarm on another host does not take a long sweep for abandoned. Returns
  // false, changing nothing, when this process does not own the run.
  virtual Result<bool> RefreshRunClaim(int64_t run_id) = 0;
  // The runtime builds a run uses, by their path on the host: a
  // path not recorded yet gets sha256; replace overwrites a recorded one.
  // Returns the sha256 recorded for host_path afterwards (atomically), so a
  // caller sees whether the file at that path changed since the run began.
  virtual Result<std::string> RecordRunRunner(int64_t run_id, const std::string& host_path,
                                              const std::string& sha256, bool replace) = 0;
  // Remembers an artifact; a sha256 already known keeps its first row.
  virtual Result<void> RecordArtifact(const ArtifactRow& artifact) = 0;
  // Tags: names for runs, such as a release baseline. Puts tag
  // `name` on run_id. A name already on another run: kInvalidInput error
  // naming that run, unless move (then it moves). Names: [A-Za-z0-9_.-]{1,64}
  // (else kInvalidInput). No such run: kNotFound.
  virtual Result<void> TagRun(int64_t run_id, const std::string& name, bool move) = 0;
  // Removes tag `name`; kNotFound when no run has it.
  virtual Result<void> UntagRun(const std::string& name) = 0;
  // Links run_id to the run it was made from (0 clears it). kNotFound: no such run.
  virtual Result<void> SetRunParent(int64_t run_id, int64_t parent_run_id) = 0;
  // Cancels a running run in one transaction: every queued or running job
  // ends kJobCancelled (error: "cancelled by BY", a results row without
  // figures, a claim ends kClaimCancelled), the run ends kRunCancelled. A
  // node or sweep still running one of its jobs records nothing more for it
  // (its MarkJobRunning and RecordJobResult fail with kConflict). Errors:
  // kNotFound without such a run; kInvalidInput, changing nothing, when the
  // run is not running (naming its status).
  virtual Result<CancelledRun> CancelRun(int64_t run_id, const std::string& by) = 0;
};

// Devices and health, the write side.
class DeviceWriter {
 public:
  virtual ~DeviceWriter() = default;
  // Records what the device said at hello; leaves state and state_reason as they are.
  virtual Result<void> UpsertDevice(const DeviceRow& device) = 0;
  // Records a device's state (kDevice*), creating the row when absent, as
  // set by dfarm itself (kSetByDfarm). A state an operator set is kept: then
  // nothing changes (SetDeviceStateBy tells).
  virtual Result<void> SetDeviceState(const std::string& name, const std::string& state,
                                      const std::string& reason) = 0;
  // The same, set by `set_by` (kSetByDfarm or kSetByHealth); false, changing
  // nothing, when an operator's state holds.
  virtual Result<bool> SetDeviceStateBy(const std::string& name, const std::string& state,
                                        const std::string& reason, const std::string& set_by) = 0;
  // An operator's state (kSetByOperator, `user` "USER@HOST"): wins over the
  // automatic ones until an operator sets another or lifts it (state ""),
  // which keeps the state as it is and hands the device back to the health
  // check and dfarm. An event each time. kNotFound: no such device.
  virtual Result<void> SetOperatorState(const std::string& name, const std::string& state,
                                        const std::string& reason, const std::string& user) = 0;
  // What node `node` found when it tried to reach device `name` (creating
  // the row when absent; its node becomes `node` either way). `unreachable`
  // set (why, one line): the state becomes kDeviceOffline with reason "not
  // reachable from node NODE: UNREACHABLE", set by kSetByDfarm, unless an
  // operator's state or a quarantine holds (a quarantine ends only through
  // a health check or an operator). `unreachable` empty: an offline state
  // becomes kDeviceOk ("reachable again from node NODE"); any other state
  // stays. An event each time the state or its reason changes; true then.
  virtual Result<bool> SetDeviceReachable(const std::string& name, const std::string& node,
                                          const std::string& unreachable) = 0;
  // Health checks' known outputs. Records `outputs` for (model,
  // runner) unless some are recorded already (atomically on both backends:
  // the first device to record them defines them), then returns the ones
  // recorded.
  virtual Result<std::string> RecordHealthGolden(const std::string& model_sha256,
                                                 const std::string& runner_sha256,
                                                 const std::string& outputs,
                                                 const std::string& device) = 0;
};

// The distributed queue (both backends, for PostgreSQL's many hosts above all). Times
// are the database's clock.
class Queue {
 public:
  virtual ~Queue() = default;
  // Sets a run's mode (kRunModeQueue: nodes claim its jobs).
  virtual Result<void> SetRunMode(int64_t run_id, const std::string& mode) = 0;
  // Sets a queue run's priority, unserved timeout and device classes (RunQueueing); a
  // priority outside [kRunPriorityMin, kRunPriorityMax] or a timeout outside
  // [0, kUnservedTimeoutMaxS] is kInvalidInput. kNotFound: no such run.
  virtual Result<void> SetRunQueueing(int64_t run_id, const RunQueueing& q) = 0;
  // Registers (or re-registers) a node, state running, heartbeat now. A
  // registering node holds no claim: the jobs still claimed under its name
  // (a dead predecessor's) get their leases ended, for ReapExpiredClaims.
  virtual Result<void> RegisterNode(const NodeRow& node) = 0;
  // The node's heartbeat: heartbeat now, its state, and the lease of every
  // job it holds renewed to now + lease_s. Returns the jobs it holds.
  virtual Result<int64_t> NodeHeartbeat(const std::string& node, const std::string& state,
                                        int64_t lease_s) = 0;
  // Claims a queued job of a running queue run that `device` may run (its
  // own device, "any", or a selector it matches): from the run of the
  // highest priority; among runs of equal priority, the one with the fewest
  // jobs running, then the oldest; in that run, the oldest job. In one
  // short transaction (FOR UPDATE SKIP LOCKED on PostgreSQL): status running,
  // claimed_by node, a new claim_id, lease until now + lease_s, the device
  // set to `device.name`. Unset when there is none.
  virtual Result<std::optional<JobRow>> ClaimJob(const std::string& node,
                                                 const DeviceTraits& device, int64_t lease_s) = 0;
  // Gives a claimed job back to the queue (the node stops: Ctrl-C twice);
  // false when the claim no longer holds.
  virtual Result<bool> ReleaseClaim(int64_t job_id, int64_t claim_id) = 0;
  // Returns every running claimed job whose lease expired to the queue (an
  // infrastructure retry; the claim ends "reaped"); a job reaped
  // max_claims times is recorded infra instead. Returns the jobs' ids.
  virtual Result<std::vector<int64_t>> ReapExpiredClaims(int64_t max_claims) = 0;
  // Ends not_run (error naming the device and the timeout, a results row
  // without figures) every queued job of a running queue run that no live
  // node (NodeAlive) serves: no device of such a node matches its target,
  // and none did for the run's unserved_timeout_s (counted from the run's
  // creation, or the last heartbeat of a node that served it, whichever is
  // later). A run left without pending jobs finishes. Returns the jobs' ids.
  virtual Result<std::vector<int64_t>> EndUnservedJobs() = 0;
  // Waits up to timeout_ms for jobs to be queued (LISTEN on kWorkChannel on
  // PostgreSQL, from the first call on; SQLite sleeps). True when woken.
  virtual Result<bool> WaitForWork(int timeout_ms) = 0;
  // Content-addressed files for nodes on other hosts (models, runners,
  // plugins, input sets), kept in chunks: PutBlob stores the file at `path`
  // under its sha256 (nothing when present; the content must hash to it),
  // GetBlob writes it to `path` (kNotFound when absent).
  virtual Result<void> PutBlob(const std::string& sha256, const std::string& path) = 0;
  virtual Result<bool> HasBlob(const std::string& sha256) = 0;
  virtual Result<void> GetBlob(const std::string& sha256, const std::string& path) = 0;
};

// A read-only view of the whole database: what reports, the gate, history and
// the dashboard take.
class Reader : public RunReader, public CellReader, public DeviceReader, public QueueReader {
 public:
  // The store's change counter, one cheap read (the dashboard's live mode
  // polls it). It grows, in the same transaction, with every run created,
  // finished, renamed or deleted, every job added or changing status or
  // device, every result, tag and device state recorded; heartbeats (a
  // node's, its leases', a device's last_seen, a run's claim renewal) leave
  // it as it is. Only growth means something: compare two reads.
  virtual Result<int64_t> ChangeCount() = 0;
};

// The whole database, every role: what a sweep, a node and the CLI open
// (OpenStore). Callers that only read take a Reader.
class Store : public Reader, public RunWriter, public DeviceWriter, public Queue {
 public:
  // Whether the connection under this store is known to be lost (a
  // PostgreSQL server that closed it; never a SQLite file): its next call
  // tries to connect again. A StorePool (store_pool.h) closes such a store.
  virtual bool ConnectionLost() const = 0;
};

// Whether `name` may be a run tag: [A-Za-z0-9_.-]{1,64}.
bool IsValidTagName(const std::string& name);

// A run's claim by a process on another host counts as abandoned after this
// long without the owner renewing it (its pid cannot be checked from here).
inline constexpr int64_t kRunClaimStaleSeconds = 600;
// How often a sweep renews its claim (RefreshRunClaim) while it runs.
inline constexpr int64_t kRunClaimRefreshSeconds = 60;

// How a SQLite store syncs its commits (OpenSqliteStore).
enum class SqliteSync { kNormal, kFull };

// Opens the store at `where`: a PostgreSQL URL (IsPostgresUrl) or a SQLite
// file, and migrates it to the current schema.
Result<std::unique_ptr<Store>> OpenStore(const std::string& where);
// "postgresql://..." or "postgres://...".
bool IsPostgresUrl(const std::string& where);
// `where` with a URL's passwords replaced by "***", for messages: the
// userinfo's (USER:PASSWORD@) and the query's password= and sslpassword=.
std::string RedactUrl(const std::string& where);
// Connects to PostgreSQL (libpq URL) and migrates the database.
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url);

// Opens (creating if absent) the SQLite database at `path` and migrates it to
// the current schema. Fails with a message naming the file when it cannot be
// opened, is not a DelegateFarm database, or is newer than this build.
// `sync` kFull (what every command uses): each commit is fsynced (PRAGMA
// synchronous = FULL in WAL mode), so a recorded result survives an OS crash
// or power loss. kNormal syncs only at checkpoints (such a crash may lose the
// latest commits); the store benchmark measures what FULL costs.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               SqliteSync sync = SqliteSync::kFull);

// Creates the database at `path` with only the first `version` migrations
// applied, as an older build left it (for migration tests).
Result<void> CreateSqliteStoreAtVersionForTesting(const std::string& path, int version);

// The schema version this build writes.
int CurrentSchemaVersion();

// Now as ISO-8601 UTC, "2024-05-01T12:34:56Z".
std::string NowIso8601();

}  // namespace dfarm::store
