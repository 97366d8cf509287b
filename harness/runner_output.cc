// The runner's --json document turned into what the store keeps, and back.
#include "harness/runner_output.h"

#include <utility>

namespace dfarm::harness {
namespace {

store::Metrics ToStore(const runner_json::Metrics& m, std::optional<int64_t> threads_used) {
  store::Metrics out;
  out.init_us = m.init_us;
  out.first_us = m.first_us;
  out.warmup_mean_us = m.warmup_mean_us;
  out.mean_us = m.mean_us;
  out.std_us = m.std_us;
  out.min_us = m.min_us;
  out.max_us = m.max_us;
  out.p50_us = m.p50_us;
  out.p90_us = m.p90_us;
  out.p99_us = m.p99_us;
  out.num_runs = m.num_runs;
  out.peak_rss_bytes = m.peak_rss_bytes;
  out.arena_bytes = m.arena_bytes;
  out.threads_used = threads_used.value_or(0);  // 0: the runner did not report it
  return out;
}

store::Placement ToStore(const runner_json::Placement& p) {
  store::Placement out;
  out.partitions = p.partitions;
  for (const runner_json::PlacementNode& n : p.nodes) {
    out.nodes.push_back({n.index, n.op, n.delegate, n.partition, n.folded, n.reason});
  }
  return out;
}

std::vector<store::OutputAccuracy> ToStore(const runner_json::Accuracy& accuracy) {
  std::vector<store::OutputAccuracy> out;
  for (const runner_json::OutputAccuracy& a : accuracy.outputs) {
    store::OutputAccuracy o;
    o.output_index = a.index;
    o.name = a.name;
    o.reference = accuracy.reference;
    o.compared = a.compared;
    o.mean_abs_error = a.mean_abs_error;
    o.std_abs_error = a.std_abs_error;
    o.max_abs_error = a.max_abs_error;
    o.rmse = a.rmse;
    o.nan_count = a.nan_count;
    o.inf_count = a.inf_count;
    o.reference_nan_count = a.reference_nan_count;
    o.reference_inf_count = a.reference_inf_count;
    o.top1_agree = a.top1_agree;
    o.top5_agree = a.top5_agree;
    if (a.max_abs_error_lsb) o.max_abs_error_lsb = runner_json::ToDouble(*a.max_abs_error_lsb);
    out.push_back(std::move(o));
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
  if (doc->metrics) out.metrics = ToStore(*doc->metrics, doc->threads_used);
  out.samples_us = std::move(doc->samples_us);
  if (doc->placement) out.placement = ToStore(*doc->placement);
  if (doc->accuracy) out.accuracy = ToStore(*doc->accuracy);
  return out;
}

Result<std::vector<store::OutputAccuracy>> ParseRunnerAccuracy(const std::string& text) {
  auto accuracy = runner_json::ParseRunnerAccuracy(text);
  if (!accuracy) return accuracy.error();
  if (!*accuracy) return std::vector<store::OutputAccuracy>();
  return ToStore(**accuracy);
}

runner_json::Accuracy ToRunnerAccuracy(const std::vector<store::OutputAccuracy>& accuracy) {
  runner_json::Accuracy out;
  out.reference = accuracy.front().reference;
  for (const store::OutputAccuracy& a : accuracy) {
    runner_json::OutputAccuracy o;
    o.index = a.output_index;
    o.name = a.name;
    o.compared = a.compared;
    o.mean_abs_error = a.mean_abs_error;
    o.std_abs_error = a.std_abs_error;
    o.max_abs_error = a.max_abs_error;
    o.rmse = a.rmse;
    o.nan_count = a.nan_count;
    o.inf_count = a.inf_count;
    o.reference_nan_count = a.reference_nan_count;
    o.reference_inf_count = a.reference_inf_count;
    // The store keeps a REAL: written as one, as dfarm show always has.
    if (a.max_abs_error_lsb) o.max_abs_error_lsb = runner_json::Number(*a.max_abs_error_lsb);
    o.top1_agree = a.top1_agree;
    o.top5_agree = a.top5_agree;
    out.outputs.push_back(std::move(o));
  }
  return out;
}

}  // namespace dfarm::harness
