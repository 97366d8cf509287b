// The runner's --json document turned into what the store keeps.
#include "harness/run/runner_output.h"

#include <cmath>
#include <sstream>
#include <utility>

#include "agent/base/json_input.h"
#include "agent/protocol/runner_kinds.h"
#include "agent/runner/runner_json.h"

namespace dfarm::harness {
Result<RunnerOutput> ParseRunnerJson(const std::string& text) {
  auto doc = runner_json::ParseRunnerJson(text);
  if (!doc) return doc.error();
  RunnerOutput out;
  out.status = std::move(doc->status);
  out.error = std::move(doc->error);
  out.model = std::move(doc->model);
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
  out.task_outputs = std::move(doc->task_outputs);
  return out;
}

namespace {

std::string Figure(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The first latency figure (or sample) that is not a finite number >= 0.
std::string BadTiming(const RunnerOutput& out) {
  if (const auto& m = out.metrics) {
    const std::pair<const char*, double> figures[] = {
        {"mean_us", m->mean_us},
        {"std_us", m->std_us},
        {"min_us", m->min_us},
        {"max_us", m->max_us},
        {"p50_us", m->p50_us},
        {"p90_us", m->p90_us},
        {"p99_us", m->p99_us},
        {"init_us", m->init_us},
        {"first_us", m->first_us},
        {"warmup_mean_us", m->warmup_mean_us},
        {"init_cold_us", m->init_cold_us.value_or(0)},
        {"init_warm_us", m->init_warm_us.value_or(0)}};
    for (const auto& [name, v] : figures) {
      if (!std::isfinite(v) || v < 0) return "metrics." + std::string(name) + " is " + Figure(v);
    }
  }
  for (size_t i = 0; i < out.samples_us.size(); ++i) {
    const double v = out.samples_us[i];
    if (!std::isfinite(v) || v < 0) {
      return "samples_us[" + std::to_string(i) + "] is " + Figure(v);
    }
  }
  return "";
}

// Negative memory figures or run count.
std::string BadCount(const store::JobMetrics& m) {
  for (const auto& [name, v] :
       {std::pair{"num_runs", m.num_runs}, std::pair{"peak_rss_bytes", m.peak_rss_bytes},
        std::pair{"arena_bytes", m.arena_bytes}}) {
    if (v < 0) return "metrics." + std::string(name) + " is " + std::to_string(v);
  }
  return "";
}

// Fewer runs than asked, samples that disagree with the count, another model.
std::string BadContract(const RunnerOutput& out, const RunnerExpectation& job) {
  if (out.metrics && !job.sustained && job.num_runs > 0) {
    const int64_t runs = out.metrics->num_runs;
    if (runs < job.num_runs) {
      return "metrics.num_runs is " + std::to_string(runs) + ", but the job asked for " +
             std::to_string(job.num_runs) + " runs";
    }
    if (!out.samples_us.empty() && static_cast<int64_t>(out.samples_us.size()) != runs) {
      return "samples_us holds " + std::to_string(out.samples_us.size()) +
             " samples, but metrics.num_runs is " + std::to_string(runs);
    }
  }
  const bool knows_model = !job.model_sha256.empty() || !job.model_file.empty();
  if (knows_model && !out.model.empty() && out.model != job.model_sha256 &&
      out.model != job.model_file) {
    return "model is '" + Abbreviated(out.model) + "', but the job ran '" + job.model_file + "'";
  }
  return "";
}

}  // namespace

std::string ImplausibleReport(const RunnerOutput& out, const RunnerExpectation& job) {
  if (std::string why = BadTiming(out); !why.empty()) return why;
  if (out.metrics) {
    if (std::string why = BadCount(*out.metrics); !why.empty()) return why;
  }
  if (!agent::SpeaksRunnerContract(job.kind)) return "";
  return BadContract(out, job);
}

}  // namespace dfarm::harness
