// dfarm-runner: loads a model, runs it with a delegate and reports latency,
// memory and outputs (docs/CONTRACTS.md). runner_main.cc is a thin shell
// over RunnerMain().
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "agent/runner/accuracy.h"
#include "agent/runner/metrics.h"
#include "agent/runner/profile.h"
#include "agent/runner/runner_options.h"
#include "agent/protocol/status.h"
#include "runtime/delegate.h"
#include "runtime/dtype.h"

namespace dfarm::runner {

struct TensorSummary {
  size_t index = 0;
  std::string name;
  runtime::DType dtype = runtime::DType::kFloat32;
  std::vector<int32_t> shape;
};

// What one runner job measured. Timings are wall-clock (steady clock):
//   init_us         Model::Load (read + verify) + Interpreter + AllocateTensors()
//   first_us        the first Invoke()
//   warmup_mean_us  mean of the warmup_runs Invoke()s after the first (0 when none)
//   samples_us      each of the measured Invoke()s that follow: num_runs of
//                   them, more when --min-secs needs more
struct RunReport {
  RunnerStatus status = RunnerStatus::kOk;
  std::string error;  // one line when status != kOk
  std::string model;  // the model's file name
  std::string delegate;
  uint32_t num_threads = 1;  // --num-threads, as asked
  // The threads the delegate runs with: xnnpack's pool (--num-threads or its
  // threads option), 1 for the others.
  uint32_t threads_used = 1;
  double init_us = 0;
  double first_us = 0;
  double warmup_mean_us = 0;
  std::vector<double> samples_us;
  LatencyStats latency;
  uint64_t peak_rss_bytes = 0;
  uint64_t arena_bytes = 0;
  std::vector<TensorSummary> inputs;
  std::vector<TensorSummary> outputs;
  // Where each node ran: the delegate's name or "cpu", and why a node fell
  // back (set once AllocateTensors() succeeded).
  runtime::Placement placement;
  // --accuracy-reference: the reference's name and one entry per output.
  std::string accuracy_reference;  // empty: no comparison
  std::vector<OutputAccuracy> accuracy;
  // --profile: per-step timing after the measured runs.
  std::optional<Profile> profile;
};

// Runs one job; never throws. Progress notes go to `log`.
RunReport Run(const RunnerOptions& options, std::ostream& log);

// The --json document: {"status":"ok",...} or {"status":..., "error":...}.
std::string ReportJson(const RunReport& report);

// The human-readable summary.
std::string ReportText(const RunReport& report);

// The whole program: parses argv, runs, prints the JSON document on `out`
// with --json, human text on `err`; returns the exit code.
int RunnerMain(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace dfarm::runner
