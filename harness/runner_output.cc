// The runner's --json document turned into what the store keeps.
#include "harness/runner_output.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "agent/runner/runner_json.h"

namespace dfarm::harness {

namespace {

// The "runtime" object of a runner document, when it has a well-formed one.
void ReadRuntime(const std::string& text, RunnerOutput* out) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("runtime") || !doc["runtime"].is_object()) return;
  const nlohmann::json& rt = doc["runtime"];
  if (rt.contains("kind") && rt["kind"].is_string()) out->runtime_kind = rt["kind"];
  if (rt.contains("version") && rt["version"].is_string()) out->runtime_version = rt["version"];
}

}  // namespace

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
  ReadRuntime(text, &out);
  return out;
}

}  // namespace dfarm::harness
