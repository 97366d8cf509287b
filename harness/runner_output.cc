// The runner's --json document turned into what the store keeps.
#include "harness/runner_output.h"

#include <utility>

#include "agent/runner/runner_json.h"

namespace dfarm::harness {
Result<RunnerOutput> ParseRunnerJson(const std::string& text) {
  auto doc = runner_json::ParseRunnerJson(text);
  if (!doc) return doc.error();
  RunnerOutput out;
  out.status = std::move(doc->status);
  out.error = std::move(doc->error);
  if (doc->metrics) {
    // 0: the runner did not report threads_used.
    out.metrics = store::JobMetrics{*doc->metrics, doc->threads_used.value_or(0)};
  }
  out.samples_us = std::move(doc->samples_us);
  out.placement = std::move(doc->placement);
  out.accuracy = std::move(doc->accuracy);
  if (doc->runtime) {
    out.runtime_kind = std::move(doc->runtime->kind);
    out.runtime_version = std::move(doc->runtime->version);
  }
  out.profile = std::move(doc->profile);
  out.sustained = std::move(doc->sustained);
  return out;
}

}  // namespace dfarm::harness
