// The sweep spec (docs/CONTRACTS.md): which models to run with which
// delegates on which devices, and the benchmark settings. Parsing validates
// everything that can be checked on the host; a delegate name is not checked
// (the runner on the device reports delegates it lacks).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/result.h"

namespace dfarm::harness {

struct ModelSpec {
  std::string path;  // absolute, normalized
  std::string file;  // file name, "face_detection_short_range.tflite"
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
};

struct SweepSpec {
  std::string name;  // defaults to the spec file's stem
  std::vector<ModelSpec> models;
  std::vector<DelegateSpec> delegates;  // default [{"name":"cpu"}]
  std::vector<std::string> devices;     // default ["local"]
  BenchmarkSpec benchmark;
  // The num_threads axis: one value per matrix cell, in spec order; never
  // empty (benchmark.num_threads alone when the spec gives one number).
  std::vector<uint32_t> num_threads = {1};
  SchedulerSpec scheduler;

  // The spec with defaults filled in and paths resolved, as stored with the run.
  std::string ToJson() const;
};

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
// `benchmark.num_threads: [1,2]` two thread counts. `spec_path` names the spec in messages ("spec 'q.json': ...")
// and its folder anchors relative model paths. Model files must exist.
Result<SweepSpec> ParseSpec(const std::string& text, const std::string& spec_path);

// Reads and parses the spec file at `path`.
Result<SweepSpec> LoadSpec(const std::string& path);

// Device names the spec accepts: "local" (an agent started as our child),
// "local:NAME" (another one, with its own store; NAME is [A-Za-z0-9_-]{1,32}),
// or "tcp://HOST:PORT" for an agent started elsewhere. Returns an empty string when `name` is valid, else why not.
std::string CheckDeviceName(const std::string& name);

}  // namespace dfarm::harness
