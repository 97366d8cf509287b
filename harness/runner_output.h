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
  std::optional<store::JobMetrics> metrics;
  std::vector<double> samples_us;
  std::optional<store::JobPlacement> placement;
  std::optional<store::Accuracy> accuracy;  // unset when absent or malformed
  // The document's "runtime" object (issue 16): {"kind":"dfarm"|"tflite",
  // "version":"..."}; empty when absent (older runners) or malformed.
  std::string runtime_kind;
  std::string runtime_version;
  // The document's "profile" (dfarm-runner --profile); unset when absent.
  std::optional<store::JobProfile> profile;
  // The document's "sustained" curve (--sustained-secs); unset when absent.
  std::optional<store::JobSustained> sustained;
};

// Reads a runner document (runner_json::ParseRunnerJson): fails with a
// message when the text is not a JSON object; a malformed "placement" or
// "accuracy" is left unset (the rest still counts).
Result<RunnerOutput> ParseRunnerJson(const std::string& text);

}  // namespace dfarm::harness
