// The runner's --json document turned into what the store keeps.
#include "harness/runner_output.h"

#include <utility>

#include "agent/runner/runner_json.h"

namespace dfarm::harness {
namespace {

// The runner document's profile section as the store keeps it.
store::JobProfile ToStoreProfile(const runner_json::ProfileSection& p) {
  store::JobProfile out;
  out.runs = p.runs;
  for (const runner_json::ProfileNodeEntry& n : p.nodes) {
    out.nodes.push_back(
        store::ProfileNode{n.index, n.op, n.delegate, n.partition, n.nodes, n.mean_us});
  }
  for (const runner_json::OpProfileEntry& o : p.by_op) {
    out.by_op.push_back(store::ProfileOp{o.op, o.count, o.total_us, o.pct});
  }
  return out;
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
  if (doc->runtime) {
    out.runtime_kind = std::move(doc->runtime->kind);
    out.runtime_version = std::move(doc->runtime->version);
  }
  if (doc->profile) out.profile = ToStoreProfile(*doc->profile);
  return out;
}

}  // namespace dfarm::harness
