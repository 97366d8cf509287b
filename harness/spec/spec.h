// The sweep spec (docs/CONTRACTS.md): which models to run with which
// delegates on which devices, and the benchmark settings. Parsing validates
// everything that can be checked on the host: a delegate name must be a
// built-in one (delegates/delegate_names.h: cpu, xnnpack, external; a plugin
// is `external` with a `path`), but whether a device's runner was built with
// it (xnnpack) only that runner can report.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/eval/eval_spec.h"
#include "harness/spec/input_sets.h"

namespace dfarm::harness {

struct ModelSpec {
  std::string path;  // absolute, normalized
  std::string file;  // file name, "face_detection_short_range.tflite"
  // Spec {"path":..., "inputs":...}: real input sets (harness/spec/input_sets.h);
  // empty: the runner's seeded random inputs.
  InputsSpec inputs = {};
  // Spec {"path":..., "eval":...}: task accuracy on a labelled set
  // (harness/eval/eval_spec.h); its images are `inputs`.
  std::optional<EvalSpec> eval;
  // An "eval" whose labelled data could not be loaded (LoadEvalData: a
  // missing image, a label the labels file lacks, a negative box, a mask of
  // the wrong size, an unreadable annotations JSON): why, naming the file and
  // entry. `eval` is then empty and `eval_given` holds the "eval" object as
  // given with its paths absolute (JSON text, for ToJson). The sweep records
  // every job of the model model_error with this message and runs the rest.
  std::string data_error = {};
  std::string eval_given = {};
};

struct DelegateSpec {
  std::string name;                            // "cpu"
  std::map<std::string, std::string> options;  // sorted by key

  // "k1:v1;k2:v2" in key order, as the runner's --delegate-options takes it
  // (with the plugin's host path, when there is one).
  std::string OptionsString() const;
  // The host file of the delegate's plugin (option kPluginPathOption), or "".
  std::string PluginPath() const;
  // What the store keeps and users see (jobs.delegate_options): OptionsString
  // with the plugin's host path cut to its file name,
  // "path:libdfarm_example_delegate.so". A host path means nothing elsewhere;
  // the job key carries the plugin's sha256 instead.
  std::string ShownOptionsString() const;
  // What the agent gets (JobSpec::delegate_options): OptionsString without
  // the plugin path; the plugin travels as JobSpec::plugin_sha256.
  std::string AgentOptionsString() const;
};

struct BenchmarkSpec {
  uint32_t warmup_runs = 1;
  uint32_t num_runs = 50;
  uint32_t num_threads = 1;  // of one job; a spec may list several (SweepSpec::num_threads)
  uint32_t timeout_s = 120;  // per job, enforced by the agent
  // "cpu" (default): jobs of delegates other than cpu also compare their
  // outputs with the runner's reference kernels (store: output_accuracy);
  // "none": no comparison.
  std::string accuracy_reference = "cpu";
  // Independent trials of each matrix cell (spec "repeats", 1..1000): each
  // trial is its own job, a fresh runner process (SweepJob::trial).
  uint32_t repeats = 1;
  // Seeds the order of the jobs when repeats > 1 (spec "order_seed"): each
  // trial round is shuffled by it, so the same spec runs in the same order.
  uint32_t order_seed = 1;
  // Spec "profile": every job's runner also profiles each step (dfarm-runner
  // --profile; the store keeps per-node and per-op-type times). Runners of
  // kind "dfarm" only.
  bool profile = false;
  // Spec "cpu_affinity": pin every runner to "big" cores (the
  // highest maximum frequency), "little" ones, or a CPU list "0-3,6"; "" (the
  // default) leaves it to the kernel. The device's agent resolves it.
  std::string cpu_affinity;
  // Spec "sustained_s": sustained mode, the measured runs go on
  // for this many seconds (0.1..43200) and the store keeps the latency curve;
  // 0 (the default): off. The job's timeout is timeout_s plus this.
  double sustained_s = 0;
};

// Cooldown before each job on a device (spec "cooldown"): a fixed pause,
// and/or waiting until the device's hottest thermal zone is at or below
// max_temp_c (0: no temperature rule), giving up after max_wait_s (the job
// then runs and is flagged as started hot).
struct CooldownSpec {
  uint32_t pause_ms = 0;
  double max_temp_c = 0.0;
  uint32_t max_wait_s = 300;
  // Also wait until the device's CPUs are at most this busy (the agent's
  // cpu_busy_pct, 0..100; 0: no load rule); a job that starts busier after
  // max_wait_s is flagged noisy.
  double max_cpu_busy_pct = 0.0;
};

// How the scheduler treats device trouble (harness/README.md, "Scheduler").
struct SchedulerSpec {
  // Extra attempts of a job that ended `infra` (never for any other status),
  // with exponential backoff: backoff_ms, 2 * backoff_ms, ...
  uint32_t retries = 2;
  uint32_t backoff_ms = 500;
  // A device whose jobs end `infra` this many times in a row is quarantined
  // for the rest of the sweep.
  uint32_t quarantine_after = 3;
  // Where a quarantined device's remaining jobs go: "none" (they end infra)
  // or "same_abi" (to another device of the sweep whose agent reported the
  // same ABI).
  std::string failover = "none";
  CooldownSpec cooldown;
};

// A runtime build under test (spec "runners"): one dfarm-runner file per
// ABI; each device gets the build for the ABI its agent reports. Several
// runners are a matrix axis (A/B of runtime releases).
struct RunnerSpec {
  std::string name;  // "main"; [A-Za-z0-9_.-]{1,64}
  // ABI ("x86_64", "arm64-v8a") -> absolute path of a program or a bundle
  // (agent/protocol/bundle.h). Empty in the spec: the kind's default builds
  // (dfarm, tflite), filled in by the sweep (EffectiveRunners).
  std::map<std::string, std::string> builds;
  // The command-line contract (agent/protocol/runner_kinds.h): "dfarm"
  // (default), "tflite", "benchmark_model", "inference_diff".
  std::string kind = "dfarm";
  // ABI -> why the kind has no default build for it (FillDefaultBuilds; not
  // part of the spec).
  std::map<std::string, std::string> missing_builds;
};

// Spec "pairing": {"baseline_runner": NAME}: the spec's two runners run as
// pairs, trial by trial on the same device (ExpandMatrix: ABBA blocks in a
// seeded order), so the gate judges paired differences (docs/gate.md,
// "Paired A/B"). NAME is the baseline; the other runner is the candidate.
// {"baseline_runner": NAME, "stepped": false} runs each pair as two whole
// jobs back to back, never as one stepped pair.
// A farm run's claim order and patience (spec "farm"; used by a sweep with
// a PostgreSQL --db only): nodes claim the jobs of the highest priority first
// (0..9, the store's kRunPriority*), and its queued jobs end not_run when no
// live node serves their device for unserved_timeout_s (0..604800).
struct FarmSpec {
  uint32_t priority = 5;
  uint32_t unserved_timeout_s = 900;
};

struct PairingSpec {
  std::string baseline_runner;  // "": not paired
  // "stepped" (default true): a pair runs as one stepped pair where it can
  // (harness/run/stepped_pairs.h); false: always as two jobs back to back.
  bool stepped = true;
  bool enabled() const { return !baseline_runner.empty(); }
};

// A device entry that is not a URI (spec "devices": [{"abi":"arm64-v8a"}]):
// it matches every candidate device (docs/CONTRACTS.md, "Sweep spec")
// whose agent reports `abi` (when set) and whose tags hold every one of `tags`.
// The same selector, on a farm (--db postgresql://), picks among the devices
// of every node when a node claims the job (store::TargetSelector). "os" and
// "soc" match a part of the agent's OS and CPU/SoC name, any case;
// min_memory_mb the device's memory.
struct DeviceSelector {
  std::string abi;                // "" matches any ABI
  std::vector<std::string> tags;  // all must be present; empty matches any
  std::string os;                 // "" matches any
  std::string soc;                // "" matches any
  int64_t min_memory_mb = 0;      // 0 matches any
};

// A spec device that lets each job run on any device of any node of a farm
// (`dfarm sweep --db postgresql://...`; a sweep on this host refuses it).
inline constexpr const char* kAnyDevice = "any";

struct SweepSpec {
  std::string name;  // defaults to the spec file's stem
  std::vector<ModelSpec> models;
  std::vector<DelegateSpec> delegates;  // default [{"name":"cpu"}]
  // Devices named by URI, in spec order; default ["local"] when the spec has
  // neither URIs nor selectors.
  std::vector<std::string> devices;
  std::vector<DeviceSelector> device_selectors;  // resolved by the sweep (ResolveDevices)
  // Token files of tcp:// devices (spec "devices": [{"uri":"tcp://h:1",
  // "token_file":"lab.token"}]): device URI -> absolute path, checked with the
  // agent's rules (ReadTokenFile) when parsed. The file wins over dfarm's
  // --token-file for its device (ProviderOptions::device_token_files).
  std::map<std::string, std::string> device_token_files;
  // Tags of devices (spec "device_tags": {"tcp://h:1":["fast"]}), for selectors.
  std::map<std::string, std::vector<std::string>> device_tags;
  // Device classes (spec "device_classes": {"pixel7": ["adb:ABC*"]}): on a
  // farm, a job aimed at `any` or a selector records the class of the device
  // that ran it (store::DeviceClassOf: the first class with a glob matching
  // the device's name, else "MODEL/ABI" from what it reported), and its
  // cell's device is that class ("class:pixel7").
  std::map<std::string, std::vector<std::string>> device_classes;
  // Runtime builds; empty: the sweep's default (SweepOptions: the runner
  // beside dfarm for the host ABI, plus the arm64 cross build when present).
  std::vector<RunnerSpec> runners;
  PairingSpec pairing;  // needs exactly two runners
  BenchmarkSpec benchmark;
  // The num_threads axis: one value per matrix cell, in spec order; never
  // empty (benchmark.num_threads alone when the spec gives one number).
  std::vector<uint32_t> num_threads = {1};
  SchedulerSpec scheduler;
  FarmSpec farm;

  // The spec with defaults filled in and paths resolved, as stored with the run.
  std::string ToJson() const;
};

// The ABI name of this host as agents report it ("x86_64", "arm64-v8a").
std::string HostAbi();
inline constexpr const char* kArm64Abi = "arm64-v8a";

// The aarch64 cross build of a host program of build folder B (B/bin/NAME):
// B/arm64/bin/NAME, where scripts/build.sh puts it. Does not check it exists.
std::string Arm64BuildOf(const std::string& host_program);

// The delegate option naming a plugin file on the host (`external`'s
// library). Parsing resolves a relative one against the spec's folder and
// requires the file to exist; the sweep pushes it to devices by sha256
// (agent feature "plugin") and the agent passes the runner its own path.
inline constexpr const char* kPluginPathOption = "path";

// The distinct plugin files the spec's delegates name, in spec order.
std::vector<std::string> PluginPaths(const SweepSpec& spec);

// Parses spec text. A list where one value is expected expands into one
// matrix cell per value: a delegate option `{"threads":[1,2]}` gives two
// delegate configurations (the cartesian product over all listed options),
// `benchmark.num_threads: [1,2]` two thread counts. `spec_path` names the spec in messages ("spec
// 'q.json': ...") and its folder anchors relative model paths. Model files must exist.
Result<SweepSpec> ParseSpec(const std::string& text, const std::string& spec_path);

// Reads and parses the spec file at `path`.
Result<SweepSpec> LoadSpec(const std::string& path);

// Device names the spec accepts, the device URIs of harness/devices/device_uri.h:
// "local" (an agent started as our child), "local:NAME" (another one, with its
// own store; NAME is [A-Za-z0-9_-]{1,32}), "tcp://HOST:PORT" for an agent
// started elsewhere, "qemu-arm64" (the aarch64 agent under qemu-user), "adb"
// or "adb:SERIAL". An error says why `name` is not one, naming it.
Result<void> CheckDeviceName(const std::string& name);

}  // namespace dfarm::harness
