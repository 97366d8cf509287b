// dfarm-runner: loads a model, runs it with a delegate and reports latency,
// memory and outputs (docs/CONTRACTS.md). runner_main.cc is a thin shell
// over RunnerMain().
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/protocol/status.h"
#include "agent/runner/accuracy.h"
#include "agent/runner/metrics.h"
#include "agent/runner/profile.h"
#include "agent/runner/runner_options.h"
#include "agent/runner/runner_values.h"
#include "agent/runner/stepped_pair.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace dfarm::runner {

struct TensorSummary {
  size_t index = 0;
  std::string name;
  runtime::DType dtype = runtime::DType::kFloat32;
  std::vector<int32_t> shape;
  // Outputs: lowercase hex sha256 of the tensor's bytes after the last
  // measured run; empty for inputs.
  std::string sha256;
};

// What one runner job did: its status and, when it ran, what it measured.
struct RunOutcome {
  RunnerStatus status = RunnerStatus::kOk;
  std::string error;  // one line when status != kOk
  std::string model;  // the model's file name
  std::string delegate;
  // The runtime that ran the job: "dfarm" (dfarm-runner, version
  // DFARM_VERSION) or "tflite" (dfarm-tflite-runner, TfLiteVersion()).
  std::string runtime = "dfarm";
  std::string runtime_version;
  uint32_t num_threads = 1;  // --num-threads, as asked
  // The threads the delegate runs with: xnnpack's pool (--num-threads or its
  // threads option), 1 for the others.
  uint32_t threads_used = 1;
  // Timings and memory; the latency statistics are over samples_us.
  Metrics metrics;
  // Each of the measured Invoke()s after the first and the warm-up runs:
  // num_runs of them, more when --min-secs needs more.
  std::vector<double> samples_us;
  std::vector<TensorSummary> inputs;
  std::vector<TensorSummary> outputs;
  // Where each node ran: the delegate's name or "cpu", and why a node fell
  // back (set once AllocateTensors() succeeded). Unset when the runtime cannot
  // tell (TensorFlow Lite's C API lists no nodes).
  std::optional<JobPlacement> placement;
  // --accuracy-reference: the reference's name and one entry per output.
  std::optional<Accuracy> accuracy;
  // --profile: per-step timing after the measured runs.
  std::optional<Profile> profile;
  // --sustained-secs: the latency curve of the measured runs.
  std::optional<JobSustained> sustained;
  // --task-outputs: the top indices of one output per input set.
  std::optional<TaskOutputs> task_outputs;
  // The delegate's Stats() after AllocateTensors(); empty for
  // kernels only and delegates without figures.
  DelegateStats delegate_stats;
  // A stepped pair (stepped_pair.h): this runner's side, and for the driver
  // its partner's document (JSON text), when it printed a readable one.
  std::optional<JobSteps> steps;
  std::optional<std::string> partner_json;
};

// Runs one job; never throws. Progress notes go to `log`.
RunOutcome Run(const RunnerOptions& options, std::ostream& log);

// The --json document: {"status":"ok",...} or {"status":..., "error":...}.
std::string ReportJson(const RunOutcome& outcome);

// The human-readable summary; a failure's line starts with `program`.
std::string ReportText(const RunOutcome& outcome, const std::string& program = "dfarm-runner");

// The whole program: parses argv, runs, prints the JSON document on `out`
// with --json, human text on `err`; returns the exit code.
int RunnerMain(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// The parts a runner on another runtime (dfarm-tflite-runner) shares with
// Run(), so that both measure, summarize and report the same way.

// What RunnerMain does after parsing, with `run` as the job: help, version
// and usage errors, then the run, its report and the exit code.
using RunFunction = std::function<RunOutcome(const RunnerOptions&, std::ostream& log)>;
int RunnerMainWith(const ParsedCommandLine& parsed, const std::string& program,
                   const RunFunction& run, std::ostream& out, std::ostream& err);

// The threads of a delegate that has a `threads` option (xnnpack):
// --num-threads, unless --delegate-options names `threads`; an error when
// both are given (--num-threads > 1) and disagree.
Result<uint32_t> DelegateThreads(const RunnerOptions& options);

// The first run, the warm-up runs, then the measured runs (num_runs runs and
// at least min_secs seconds): fills the timings, the latency statistics,
// samples_us and the peak RSS. `invoke` runs the model once; on failure it
// records the failure in the outcome and returns false, which ends this.
// With `stepping` (a stepped pair), its hooks around each measured run, and
// outcome->steps->starts_us gets each measured run's start.
bool MeasureInvokes(const RunnerOptions& options, const std::function<bool()>& invoke,
                    RunOutcome* outcome, Stepping* stepping = nullptr);

// Sustained mode's measured runs (MeasureInvokes with --sustained-secs): runs
// until `secs` seconds have passed, at least once, and fills the curve. The
// mean, std, min and max are over every run; samples_us keeps every k-th run
// (k a power of two, at most kMaxSustainedSamples kept), and the percentiles
// are over those.
inline constexpr size_t kMaxSustainedSamples = 20000;
bool MeasureSustained(double secs, const std::function<bool(double*)>& timed, RunOutcome* outcome);

// Name, dtype and shape of each tensor, in order.
std::vector<TensorSummary> Summaries(const std::vector<runtime::Tensor*>& tensors);

// The job's inputs: input set `set` of --inputs (an error in a set > 0 says
// "input set k: ..."), or the seeded random ones (FillRandomInputs).
Result<void> SetInputs(const RunnerOptions& options, const std::vector<runtime::Tensor*>& inputs,
                       size_t set = 0);

// The "accuracy" section of --accuracy-reference from per_output[i][k],
// output i compared on input set k: one set as it is, several (--inputs)
// aggregated, with "sets".
Accuracy AccuracyOf(const RunnerOptions& options,
                    const std::vector<std::vector<OutputAccuracy>>& per_output);

// --task-outputs: for each input set k, run_set(k) sets the inputs, invokes
// and returns the model's outputs (nullptr: it failed *outcome itself);
// what options.task_kind lists of them goes to outcome->task_outputs. A job
// whose model has `outputs` outputs; an output index past them, or an output
// not of the kind's shape, is a usage error.
bool CollectTaskOutputs(
    const RunnerOptions& options, size_t outputs,
    const std::function<const std::vector<runtime::Tensor*>*(size_t set)>& run_set,
    RunOutcome* outcome);

// The sha256 of each output's bytes into outcome->outputs[i].sha256.
void HashOutputs(const std::vector<runtime::Tensor*>& outputs, RunOutcome* outcome);

}  // namespace dfarm::runner
