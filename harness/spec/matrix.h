// Matrix expansion: a sweep spec becomes one job per device x runner x model x
// delegate configuration x num_threads value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/spec/spec.h"

namespace dfarm::harness {

// One job of a sweep, the one host-side form from expansion to the agent
// (sweep.h has the path): what it runs, where, with which runtime build.
struct SweepJob {
  int64_t id = 0;  // the job's id in the store; 0 until the sweep stores it
  ModelSpec model;
  std::string model_sha256;
  // On the host: the plugin option (kPluginPathOption) holds its host path.
  DelegateSpec delegate;
  std::string device;       // where it is planned; a failover moves it
  BenchmarkSpec benchmark;  // this job's num_threads and the run's other settings
  std::string job_key;      // JobKeyOf(*this) when planned
  // sha256 of delegate.PluginPath(), the plugin pushed before the job; empty
  // when the delegate names none.
  std::string plugin_sha256;
  // The runtime build this job runs: the runner's build for the device's ABI.
  // runner and runner_sha256 are keyed (JobKey): empty for a spec without
  // "runners", whose default build is not part of the key.
  std::string runner;         // RunnerSpec::name
  std::string runner_path;    // the dfarm-runner file on the host
  std::string runner_sha256;  // its content
  // The runner's kind (RunnerSpec::kind): "dfarm", "tflite",
  // "benchmark_model", "inference_diff". Not keyed (the build's sha256 is).
  std::string runner_kind = "dfarm";
  // The model's input sets (spec "inputs"), packed (agent/protocol/input_set.h):
  // each set's sha256 and its packed file on the host, in set order; pushed
  // as artifacts of kind "inputs". Keyed (JobKeyOf) when not empty.
  std::vector<std::string> input_set_sha256s;
  std::vector<std::string> input_set_paths;
  // The 0-based trial of its cell (benchmark.repeats); keyed when > 0.
  uint32_t trial = 0;
  // A paired sweep's pair (spec "pairing"): 1, 2, ... in the run, shared by
  // the baseline's and the candidate's job of one trial of one cell on one
  // device, the one that runs first listed first; 0 when not paired. Not keyed.
  int64_t pair = 0;
  // A job a `dfarm node` claimed from the queue: the claim it holds (its
  // result is recorded under it); 0 for a job of a sweep run here.
  int64_t claim_id = 0;
};

// One runner's build for one device (the build for the device's ABI).
struct RunnerBuild {
  std::string runner;  // RunnerSpec::name
  std::string abi;     // the build's ABI key
  std::string path;
  std::string sha256;
  std::string kind = "dfarm";  // RunnerSpec::kind
};

// Per device: the build of each of the spec's runners it runs, in runner
// order. A device absent from the map runs no runner-specific build.
using DeviceRunnerBuilds = std::map<std::string, std::vector<RunnerBuild>>;

// The job key: a hex prefix of sha256 over everything that decides what a job
// measures (model content, delegate and options, device, warmup/runs/threads;
// not the timeout). Equal keys in two runs mean comparable jobs. With a
// plugin_sha256, the plugin's content stands for its host path (the path
// option is hashed as "sha256:<hex>"), so moving or renaming the plugin file
// keeps the key and rebuilding it changes the key; without one, the key is
// what it always was. A runner name and build sha256 (both or neither) are
// hashed too, so runtime builds A and B give different keys; without them the
// key is what it was before runners existed. A trial t > 0 (benchmark.repeats)
// hashes "trial=t" too; trial 0 keeps the key of a run without repeats, so
// its jobs stay comparable with older runs. benchmark.repeats and order_seed
// are not keyed.
std::string JobKey(const std::string& model_sha256, const DelegateSpec& delegate,
                   const std::string& device, const BenchmarkSpec& benchmark,
                   const std::string& plugin_sha256 = "", const std::string& runner = "",
                   const std::string& runner_sha256 = "", uint32_t trial = 0);

// The key of `job` as it stands (JobKey over its fields). A job with input
// sets is keyed on them too: sha256 over JobKey's key and the sets' sha256s
// in order; without any, the key is JobKey's, as before input sets existed.
std::string JobKeyOf(const SweepJob& job);

// sha256 of each plugin file (host path -> sha256).
using PluginHashes = std::map<std::string, std::string>;

// Jobs ordered device, then runner, then model, then delegate, then
// num_threads (so one device's jobs run together, one runtime build at a time,
// and a model's delegates sit side by side). With benchmark.repeats N > 1 each
// cell gives N jobs (trial 0..N-1), ordered in rounds: every cell's trial 0,
// then every cell's trial 1, ..., each round shuffled by
// benchmark.order_seed (ShuffledTrialOrder), so slow drift and heat spread
// evenly over the cells; a device's queue follows that order. `devices` are the devices to
// expand over (the sweep resolves selectors into it; spec.devices when
// empty). `model_sha256s[i]` belongs to spec.models[i]; `plugin_sha256s`
// should hold every PluginPaths(spec) file (HashPlugins): a job whose plugin
// it lacks gets no plugin_sha256 and is keyed on the host path.
// `runner_builds[device]` lists the builds that device runs (one job set per
// entry); a device without an entry gets one job set with no runner fields.
// A paired spec (spec.pairing, two runners) is ordered in pairs instead: each
// round (trial t) lists every cell's pair of jobs, the baseline's and the
// candidate's on one device side by side, the pairs in ShuffledTrialOrder;
// each cell's trials 2k and 2k+1 run in ABBA blocks, A B then B A or B A then
// A B as PairRunsBaselineFirst says (an odd last trial: its block's first
// half), and SweepJob::pair numbers the pairs in that order.
// Pure and deterministic.
std::vector<SweepJob> ExpandMatrix(const SweepSpec& spec,
                                   const std::vector<std::string>& model_sha256s,
                                   const PluginHashes& plugin_sha256s = {},
                                   const DeviceRunnerBuilds& runner_builds = {},
                                   const std::vector<std::string>& devices = {});

// The most jobs one sweep expands into (docs/CONTRACTS.md, "Sweep spec"): a
// matrix past it is refused before anything is expanded or stored.
inline constexpr uint64_t kMaxSweepJobs = 100000;

// One axis of the matrix: its name as the spec calls it, and its length.
struct MatrixAxis {
  const char* name;
  uint64_t size;
};

// The axes of `spec`'s matrix when it runs on `devices` devices with `runners`
// runtime builds each: devices, runners, models, delegates (configurations,
// options expanded), num_threads, repeats. ExpandMatrix gives their product.
std::vector<MatrixAxis> MatrixAxes(const SweepSpec& spec, uint64_t devices, uint64_t runners);

// "devices 2 x runners 1 x models 3 x delegates 4 x num_threads 1 x repeats 1".
std::string MatrixAxesText(const std::vector<MatrixAxis>& axes);

// The product of `axes` (overflow-safe). Fails (kInvalidInput) when it is
// above `max_jobs`, naming the count (or "at least 2^64") and the axes.
Result<uint64_t> CountMatrixJobs(const std::vector<MatrixAxis>& axes,
                                 uint64_t max_jobs = kMaxSweepJobs);

// The order ExpandMatrix gives `cells` jobs of one trial round: a
// permutation of 0..cells-1 from a portable generator seeded by (seed,
// round), the same on every platform and build.
std::vector<size_t> ShuffledTrialOrder(size_t cells, uint32_t seed, uint32_t round);

// Whether block `block` (trials 2*block and 2*block+1) of paired cell `cell`
// (its index among a sweep's paired cells, in grouped order) starts with the
// baseline: a portable seeded coin, like ShuffledTrialOrder.
bool PairRunsBaselineFirst(uint32_t seed, size_t cell, uint32_t block);

// sha256 of each model file, in spec order; an error names the file.
Result<std::vector<std::string>> HashModels(const SweepSpec& spec);

// sha256 of each PluginPaths(spec) file; an error names the file.
Result<PluginHashes> HashPlugins(const SweepSpec& spec);

// sha256 of a file / of bytes, lowercase hex (OpenSSL).
Result<std::string> Sha256OfFile(const std::string& path);
std::string Sha256OfBytes(const std::string& bytes);

}  // namespace dfarm::harness
