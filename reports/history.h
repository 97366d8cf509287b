// One cell's metric over runs: the series `dfarm history`, `dfarm regressions`
// and the dashboard's trend view all draw, built in one place. A cell is a
// store::Cell (reports/store/cell.h; Store::ListCells lists them); its point
// in a run is the median over that run's ok trials with a value
// (Store::ListCellJobs); step changes come from stats::DetectChangePoints
// (reports/gate/stats.h) over the medians.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/base/result.h"
#include "reports/gate/stats.h"
#include "reports/store/store.h"

namespace dfarm::reports {

// What a point measures; lower is better but for top1, top5, map and miou.
//   mean, p50, p90   the job's latency statistics of its samples, microseconds
//   peak_rss         the runner's peak resident set, bytes
//   max_abs_error    the largest max_abs_error over the job's outputs
//   top1, top5       task accuracy on the model's labelled set (spec "eval"), percent
//   map, miou        detection mAP@[.5:.95] / segmentation mIoU on it, percent
enum class HistoryMetric { kMean, kP50, kP90, kPeakRss, kMaxAbsError, kTop1, kTop5, kMap, kMiou };

const char* HistoryMetricName(HistoryMetric metric);
// "mean" | "p50" | "p90" | "peak_rss" | "max_abs_error" | "top1" | "top5" |
// "map" | "miou"; else
// kInvalidInput naming them.
Result<HistoryMetric> ParseHistoryMetric(const std::string& name);
// Whether a rise of `metric` is an improvement (top1, top5, map, miou), not a
// regression.
bool HigherIsBetter(HistoryMetric metric);

// The job's raw figure of `metric`; unset when it has none (no metrics, no
// accuracy, a peak RSS of 0). max_abs_error reads the job's accuracy.
Result<std::optional<double>> JobMetricValue(store::Reader& store, const store::JobRow& job,
                                             HistoryMetric metric);

struct HistoryPoint {
  int64_t run_id = 0;
  std::string created_at;            // the run's, ISO-8601 UTC
  std::vector<std::string> tags;     // the run's tags
  double value = 0;                  // median over the run's ok trials of the cell (raw units)
  int64_t trials = 0;                // ok trials with a value
  std::vector<double> trial_values;  // each of them, in trial order (raw units)
};

struct HistoryChange {
  int64_t run_id = 0;       // the first run of the new level
  std::string created_at;   // that run's
  size_t index = 0;         // its index among the points
  double before = 0;        // median of the points of the segment before
  double after = 0;         // median of the points of the segment from index on
  double change_pct = 0;    // 100 * (after - before) / |before|
  bool regression = false;  // after is worse (higher) than before
};

struct CellSeries {
  std::string model;                 // file name of the cell's newest job; "" when no job
  int64_t jobs = 0;                  // the cell's jobs, any status
  std::vector<HistoryPoint> points;  // oldest run first; runs without a value have none
  std::vector<HistoryChange> changes;
};

// The runs by id, for created_at and tags (Store::ListRuns).
using RunsById = std::map<int64_t, store::RunRow>;
Result<RunsById> LoadRunsById(store::Reader& store);

// The series of a cell from its jobs (Store::ListCellJobs: by run, then trial).
// find_changes false leaves changes empty (a chart of several series that
// draws none skips the change-point test's cost).
Result<CellSeries> BuildCellSeries(store::Reader& store, const std::vector<store::JobRow>& jobs,
                                   const RunsById& runs, HistoryMetric metric,
                                   const stats::ChangePointOptions& options = {},
                                   bool find_changes = true);

// The series of trial values already read: (run id, raw value) of each ok
// trial, by run then trial (Store::ListRecentCellValues' p50_us). The points,
// medians and changes are BuildCellSeries'; model and jobs are left empty.
CellSeries SeriesOfTrials(const std::vector<std::pair<int64_t, double>>& trials,
                          const RunsById& runs, const stats::ChangePointOptions& options = {});

// Store::ListCellJobs of `cell`, then BuildCellSeries.
Result<CellSeries> LoadCellSeries(store::Reader& store, const store::Cell& cell,
                                  const RunsById& runs, HistoryMetric metric,
                                  const stats::ChangePointOptions& options = {});

}  // namespace dfarm::reports
