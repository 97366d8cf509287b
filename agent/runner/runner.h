// dfarm-runner: loads a model, runs it with a delegate and reports latency,
// memory and outputs (docs/CONTRACTS.md). runner_main.cc is a thin shell
// over RunnerMain().
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "agent/protocol/status.h"
#include "agent/runner/accuracy.h"
#include "agent/runner/metrics.h"
#include "agent/runner/profile.h"
#include "agent/runner/runner_options.h"
#include "agent/runner/runner_values.h"
#include "runtime/dtype.h"

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
  // back (set once AllocateTensors() succeeded).
  JobPlacement placement;
  // --accuracy-reference: the reference's name and one entry per output.
  std::optional<Accuracy> accuracy;
  // --profile: per-step timing after the measured runs.
  std::optional<Profile> profile;
};

// Runs one job; never throws. Progress notes go to `log`.
RunOutcome Run(const RunnerOptions& options, std::ostream& log);

// The --json document: {"status":"ok",...} or {"status":..., "error":...}.
std::string ReportJson(const RunOutcome& outcome);

// The human-readable summary.
std::string ReportText(const RunOutcome& outcome);

// The whole program: parses argv, runs, prints the JSON document on `out`
// with --json, human text on `err`; returns the exit code.
int RunnerMain(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace dfarm::runner
