#include "reports/history.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace dfarm::reports {

const char* HistoryMetricName(HistoryMetric metric) {
  switch (metric) {
    case HistoryMetric::kMean:
      return "mean";
    case HistoryMetric::kP50:
      return "p50";
    case HistoryMetric::kP90:
      return "p90";
    case HistoryMetric::kPeakRss:
      return "peak_rss";
    case HistoryMetric::kMaxAbsError:
      return "max_abs_error";
    case HistoryMetric::kTop1:
      return "top1";
    case HistoryMetric::kTop5:
      return "top5";
    case HistoryMetric::kMap:
      return "map";
    case HistoryMetric::kMiou:
      return "miou";
  }
  return "?";
}

bool HigherIsBetter(HistoryMetric metric) {
  return metric == HistoryMetric::kTop1 || metric == HistoryMetric::kTop5 ||
         metric == HistoryMetric::kMap || metric == HistoryMetric::kMiou;
}

Result<HistoryMetric> ParseHistoryMetric(const std::string& name) {
  for (HistoryMetric m :
       {HistoryMetric::kMean, HistoryMetric::kP50, HistoryMetric::kP90, HistoryMetric::kPeakRss,
        HistoryMetric::kMaxAbsError, HistoryMetric::kTop1, HistoryMetric::kTop5,
        HistoryMetric::kMap, HistoryMetric::kMiou}) {
    if (name == HistoryMetricName(m)) return m;
  }
  return MakeError(ErrorKind::kInvalidInput, "unknown --metric '" + name +
                                                 "' (expected mean, p50, p90, peak_rss, "
                                                 "max_abs_error, top1, top5, map or miou)");
}

Result<std::optional<double>> JobMetricValue(store::Reader& store, const store::JobRow& job,
                                             HistoryMetric metric) {
  if (HigherIsBetter(metric)) {
    auto tasks = store.ListRunTaskAccuracy(job.run_id);
    if (!tasks) return tasks.error();
    auto it = tasks->find(job.id);
    if (it == tasks->end()) return std::optional<double>();
    const store::TaskMetric* m = it->second.Find(HistoryMetricName(metric));
    return m ? std::optional<double>(100 * m->value) : std::optional<double>();
  }
  if (metric == HistoryMetric::kMaxAbsError) {
    auto accuracy = store.GetAccuracy(job.id);
    if (!accuracy) return accuracy.error();
    if (!*accuracy) return std::optional<double>();
    double worst = -1;
    for (const store::OutputAccuracy& o : (*accuracy)->outputs) {
      if (std::isfinite(o.max_abs_error)) worst = std::max(worst, o.max_abs_error);
    }
    return worst < 0 ? std::optional<double>() : std::optional<double>(worst);
  }
  if (!job.metrics) return std::optional<double>();
  const store::JobMetrics& m = *job.metrics;
  switch (metric) {
    case HistoryMetric::kMean:
      return std::optional<double>(m.mean_us);
    case HistoryMetric::kP50:
      return std::optional<double>(m.p50_us);
    case HistoryMetric::kP90:
      return std::optional<double>(m.p90_us);
    case HistoryMetric::kPeakRss:
      if (m.peak_rss_bytes <= 0) return std::optional<double>();
      return std::optional<double>(static_cast<double>(m.peak_rss_bytes));
    case HistoryMetric::kMaxAbsError:
    case HistoryMetric::kTop1:
    case HistoryMetric::kTop5:
    case HistoryMetric::kMap:
    case HistoryMetric::kMiou:
      break;
  }
  return std::optional<double>();
}

Result<RunsById> LoadRunsById(store::Reader& store) {
  auto runs = store.ListRuns();
  if (!runs) return runs.error();
  RunsById out;
  for (store::RunRow& run : *runs) {
    const int64_t id = run.id;
    out.emplace(id, std::move(run));
  }
  return out;
}

namespace {

void AddPoint(const RunsById& runs, int64_t run_id, std::vector<double> values,
              CellSeries& series) {
  if (values.empty()) return;
  HistoryPoint p;
  p.run_id = run_id;
  if (auto it = runs.find(run_id); it != runs.end()) {
    p.created_at = it->second.created_at;
    p.tags = it->second.tags;
  }
  p.trials = static_cast<int64_t>(values.size());
  p.trial_values = values;
  p.value = stats::Median(std::move(values));
  series.points.push_back(std::move(p));
}

std::vector<HistoryChange> FindChanges(const std::vector<HistoryPoint>& points,
                                       const stats::ChangePointOptions& options,
                                       bool higher_is_better) {
  std::vector<double> medians;
  for (const HistoryPoint& p : points) medians.push_back(p.value);
  std::vector<HistoryChange> out;
  for (const stats::ChangePoint& cp : stats::DetectChangePoints(medians, options)) {
    HistoryChange c;
    c.run_id = points[cp.index].run_id;
    c.created_at = points[cp.index].created_at;
    c.index = cp.index;
    c.before = cp.before;
    c.after = cp.after;
    c.change_pct = cp.before != 0 ? 100 * (cp.after - cp.before) / std::fabs(cp.before) : 0;
    c.regression = higher_is_better ? cp.after < cp.before : cp.after > cp.before;
    out.push_back(c);
  }
  return out;
}

}  // namespace

Result<CellSeries> BuildCellSeries(store::Reader& store, const std::vector<store::JobRow>& jobs,
                                   const RunsById& runs, HistoryMetric metric,
                                   const stats::ChangePointOptions& options, bool find_changes) {
  CellSeries series;
  series.jobs = static_cast<int64_t>(jobs.size());
  std::vector<double> values;
  int64_t run_id = 0;
  int64_t newest_job = -1;
  for (const store::JobRow& job : jobs) {  // by run, then trial
    if (job.run_id != run_id) AddPoint(runs, run_id, std::exchange(values, {}), series);
    run_id = job.run_id;
    if (job.id > newest_job) {
      newest_job = job.id;
      series.model = job.model;
    }
    if (job.status != store::kJobOk) continue;
    auto value = JobMetricValue(store, job, metric);
    if (!value) return value.error();
    if (*value && std::isfinite(**value)) values.push_back(**value);
  }
  AddPoint(runs, run_id, std::move(values), series);
  if (find_changes) series.changes = FindChanges(series.points, options, HigherIsBetter(metric));
  return series;
}

CellSeries SeriesOfTrials(const std::vector<std::pair<int64_t, double>>& trials,
                          const RunsById& runs, const stats::ChangePointOptions& options) {
  CellSeries series;
  std::vector<double> values;
  int64_t run_id = 0;
  for (const auto& [run, value] : trials) {
    if (run != run_id) AddPoint(runs, run_id, std::exchange(values, {}), series);
    run_id = run;
    if (std::isfinite(value)) values.push_back(value);
  }
  AddPoint(runs, run_id, std::move(values), series);
  series.changes = FindChanges(series.points, options, /*higher_is_better=*/false);
  return series;
}

Result<CellSeries> LoadCellSeries(store::Reader& store, const store::Cell& cell,
                                  const RunsById& runs, HistoryMetric metric,
                                  const stats::ChangePointOptions& options) {
  auto jobs = store.ListCellJobs(cell);
  if (!jobs) return jobs.error();
  return BuildCellSeries(store, *jobs, runs, metric, options);
}

}  // namespace dfarm::reports
