// The runner's --json document (agent/runner/runner_json.h, docs/CONTRACTS.md)
// and the store's types, converted in one place each way: what the harness
// keeps of a runner's output, and a stored accuracy section written back in
// the runner's keys (`dfarm show --json`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/runner/runner_json.h"
#include "reports/store/store.h"

namespace dfarm::harness {

// What the store keeps of a runner document: metrics (with threads_used),
// samples and placement when present.
struct RunnerOutput {
  std::string status;
  std::string error;
  std::optional<store::Metrics> metrics;
  std::vector<double> samples_us;
  std::optional<store::Placement> placement;
  std::vector<store::OutputAccuracy> accuracy;  // empty when absent or malformed
};

// Reads a runner document (runner_json::ParseRunnerJson): fails with a
// message when the text is not a JSON object; a malformed "placement" is
// left unset and a malformed "accuracy" empty (the rest still counts).
Result<RunnerOutput> ParseRunnerJson(const std::string& text);

// The runner JSON's "accuracy" section by output index; empty when there is
// none. Fails, naming the field, on a malformed section.
Result<std::vector<store::OutputAccuracy>> ParseRunnerAccuracy(const std::string& text);

// A job's stored accuracy as the runner's section (reference from the first
// output); `accuracy` must not be empty.
runner_json::Accuracy ToRunnerAccuracy(const std::vector<store::OutputAccuracy>& accuracy);

}  // namespace dfarm::harness
