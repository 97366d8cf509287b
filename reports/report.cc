#include "reports/report.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "reports/format.h"

namespace dfarm::reports {

std::string Ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", us / 1000.0);
  return buf;
}

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string DelegateLabel(const store::JobRow& job) {
  return job.delegate_options.empty() ? job.delegate
                                      : job.delegate + " (" + job.delegate_options + ")";
}

std::string PlacementLabel(const store::JobRow& job) {
  if (!job.placement) return "";
  const store::PlacementSummary& p = *job.placement;
  // Folded nodes ran once at load, never at Invoke(): not fallbacks, so not in the fraction.
  const int64_t run = p.nodes - p.folded_nodes;
  std::string label = p.delegated_nodes == 0 ? "all " + std::to_string(run) + " on cpu"
                                             : std::to_string(p.delegated_nodes) + "/" +
                                                   std::to_string(run) + " on " + p.delegates;
  if (p.folded_nodes > 0) {
    label += " (+" + std::to_string(p.folded_nodes) + " constants folded at load)";
  }
  return label;
}

std::string AccuracyLabel(const RunReport& report, const store::JobRow& job) {
  auto it = report.accuracy.find(job.id);
  return it == report.accuracy.end() ? "" : AccuracyLabel(it->second);
}

std::optional<double> MaxAbsError(const store::Accuracy& accuracy) {
  std::optional<double> worst;
  for (const store::OutputAccuracy& o : accuracy.outputs) {
    if (!std::isnan(o.max_abs_error) && (!worst || o.max_abs_error > *worst)) {
      worst = o.max_abs_error;
    }
  }
  return worst;
}

std::string AccuracyLabel(const store::Accuracy& accuracy) {
  const store::OutputAccuracy* worst = nullptr;
  for (const store::OutputAccuracy& o : accuracy.outputs) {
    if (o.nan_count + o.inf_count > o.reference_nan_count + o.reference_inf_count) {
      return "NaN/Inf";
    }
    if (std::isnan(o.max_abs_error)) continue;
    if (worst == nullptr || o.max_abs_error > worst->max_abs_error) worst = &o;
  }
  if (worst == nullptr) return "";
  char buf[64];
  if (worst->max_abs_error_lsb) {
    std::snprintf(buf, sizeof buf, "%.3g (%.3g LSB)", worst->max_abs_error,
                  runner::ToDouble(*worst->max_abs_error_lsb));
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", worst->max_abs_error);
  }
  return buf;
}

std::string DeviceStateFlags(const store::JobRow& job) {
  if (job.started_hot && job.throttled) return "hot, throttled";
  if (job.started_hot) return "hot";
  if (job.throttled) return "throttled";
  return "";
}

JobCounts CountJobs(const std::vector<store::JobRow>& jobs) {
  JobCounts c;
  for (const store::JobRow& j : jobs) {
    ++c.total;
    if (j.status == store::kJobOk) {
      ++c.ok;
    } else if (store::IsFinalJobStatus(j.status)) {
      ++c.failed;
    } else {
      ++c.pending;
    }
  }
  return c;
}

Result<RunReport> LoadRunReport(store::Store& store, int64_t run_id) {
  auto run = store.GetRun(run_id);
  if (!run) return run.error();
  auto jobs = store.ListJobs(run_id);
  if (!jobs) return jobs.error();
  auto accuracy = LoadAccuracy(store, *jobs);
  if (!accuracy) return accuracy.error();
  return RunReport{std::move(*run), std::move(*jobs), std::move(*accuracy)};
}

Result<std::map<int64_t, store::Accuracy>> LoadAccuracy(store::Store& store,
                                                        const std::vector<store::JobRow>& jobs) {
  std::map<int64_t, store::Accuracy> by_job;
  for (const store::JobRow& j : jobs) {
    auto accuracy = store.GetAccuracy(j.id);
    if (!accuracy) return accuracy.error();
    if (*accuracy) by_job[j.id] = std::move(**accuracy);
  }
  return by_job;
}

Result<Format> ParseFormat(const std::string& name) {
  if (name == "md" || name == "markdown") return Format::kMarkdown;
  if (name == "html") return Format::kHtml;
  return MakeError(ErrorKind::kInvalidInput,
                   "unknown report format '" + name + "' (known: md, html)");
}

std::string Render(const RunReport& report, Format format) {
  switch (format) {
    case Format::kMarkdown:
      return RenderMarkdown(report);
    case Format::kHtml:
      return RenderHtml(report);
  }
  return {};
}

Result<void> WriteReport(const RunReport& report, Format format, const std::string& path) {
  std::string text = Render(report, format);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return MakeError("cannot write report '" + path + "'");
  out << text;
  out.close();
  if (!out) return MakeError("cannot write report '" + path + "': write failed");
  return Ok();
}

}  // namespace dfarm::reports
