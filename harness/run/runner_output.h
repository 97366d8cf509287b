// What the harness keeps of a runner's --json document
// (agent/runner/runner_json.h, docs/CONTRACTS.md) for the store. The values
// are the runner's own (agent/runner/runner_values.h), so nothing is copied
// field by field; the store adds only the threads the delegate ran with.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "reports/store/store.h"

namespace dfarm::harness {

// What the store keeps of a runner document: metrics (with threads_used),
// samples, placement and accuracy when present.
struct RunnerOutput {
  std::string status;
  std::string error;
  // The model's file name as the runner reports it (the document's "model");
  // empty when it reports none.
  std::string model;
  std::optional<store::JobMetrics> metrics;
  std::vector<double> samples_us;
  std::optional<store::JobPlacement> placement;
  std::optional<store::Accuracy> accuracy;  // unset when absent or malformed
  // The document's "runtime" object: {"kind":"dfarm"|"tflite",
  // "version":"..."}; empty when absent (older runners) or malformed.
  std::string runtime_kind;
  std::string runtime_version;
  // The document's "profile" (dfarm-runner --profile); unset when absent.
  std::optional<store::JobProfile> profile;
  // The document's "sustained" curve (--sustained-secs); unset when absent.
  std::optional<store::JobSustained> sustained;
  // The document's "task_outputs" (--task-outputs); unset when absent.
  std::optional<runner::TaskOutputs> task_outputs;
};

// Reads a runner document (runner_json::ParseRunnerJson): fails with a
// message when the text is not a JSON object; a malformed "placement" or
// "accuracy" is left unset (the rest still counts).
Result<RunnerOutput> ParseRunnerJson(const std::string& text);

// What a job asked of its runner, to check the runner's report against.
struct RunnerExpectation {
  // The runner's kind (agent/protocol/runner_kinds.h): run counts and model
  // names are checked only for kinds that speak the dfarm-runner contract; a
  // tool's log may legitimately count other runs (--min_secs, --max_secs)
  // and name a copy of the model.
  std::string kind = "dfarm";
  uint32_t num_runs = 0;     // measured runs asked for; 0: not checked
  bool sustained = false;    // sustained mode: the runner's clock sets the count
  std::string model_file;    // the user's model file name, "face.tflite"
  std::string model_sha256;  // its content: the file name the agent gives the runner
};

// Why an ok report cannot be true, naming the field and its value ("metrics.mean_us
// is -5"): a latency figure or sample that is not a finite number >= 0, a
// negative memory figure or run count, fewer measured runs than `job` asked
// for (or samples that disagree with the run count), a model other than the
// job's. Empty when nothing is implausible. Only the dfarm-runner contract
// fixes the run count and the model name: see RunnerExpectation::kind.
std::string ImplausibleReport(const RunnerOutput& out, const RunnerExpectation& job);

}  // namespace dfarm::harness
