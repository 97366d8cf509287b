// History over runs: one cell's metric run by run, with the step changes
// found in it (`dfarm history`), and the step changes of every cell
// (`dfarm regressions`). A cell is all the trials of one (model sha256,
// delegate, delegate options, threads, runner, device); its point in a run is
// the median over that run's ok trials. Change points come from
// stats::DetectChangePoints (reports/gate/stats.h), through reports/history.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "reports/gate/stats.h"
#include "reports/history.h"
#include "reports/store/store.h"

namespace dfarm::harness {

// The metric and the series come from reports/history.h, which the
// dashboard's trend view reads too.
using reports::HistoryMetric;
using reports::HistoryMetricName;
using reports::ParseHistoryMetric;

struct CellKey {
  std::string model;  // file name of the newest job of the cell
  std::string model_sha256;
  std::string delegate;
  std::string delegate_options;  // "k1:v1;k2:v2", keys sorted
  uint32_t num_threads = 0;
  std::string runner;  // "" = the default runner
  std::string device;

  // "mobilenet.tflite (1a2b3c4d) xnnpack[fp16:true] x4 @local runner main"
  std::string Label() const;
  auto operator<=>(const CellKey&) const = default;
};

// Which cell `dfarm history` shows. model: a file name, a path (a file that
// exists is matched by its sha256, else by its file name) or a sha256 (or a
// prefix of at least 8 hex digits). Unset fields match anything, but the
// result must be one cell.
struct CellQuery {
  std::string model;
  std::string delegate;
  std::optional<std::string> delegate_options;  // "k:v;..", any order
  std::optional<std::string> device;
  std::optional<uint32_t> num_threads;
  std::optional<std::string> runner;
};

using reports::HistoryChange;  // run_id, created_at, index, before, after, change_pct, regression
using reports::HistoryPoint;   // run_id, created_at, tags, value, trials, trial_values

struct CellHistory {
  CellKey cell;
  HistoryMetric metric = HistoryMetric::kP50;
  std::vector<HistoryPoint> points;  // oldest run first
  std::vector<HistoryChange> changes;
};

// The history of the one cell matching `query`. kInvalidInput when no cell or
// more than one matches: the message names the query and lists the cells that
// match its model and delegate (or the models and delegates there are).
Result<CellHistory> LoadCellHistory(store::Store& store, const CellQuery& query,
                                    HistoryMetric metric,
                                    const stats::ChangePointOptions& options = {});

// Every cell with a step change at a run created at or after `since` (an
// ISO-8601 prefix such as "2024-05-01"; "" for all), each with only those
// changes. The changes of all cells, newest run first, come from FlattenChanges.
Result<std::vector<CellHistory>> FindStepChanges(store::Store& store, const std::string& since,
                                                 HistoryMetric metric,
                                                 const stats::ChangePointOptions& options = {});

struct CellChange {
  const CellHistory* history = nullptr;
  const HistoryChange* change = nullptr;
};
// The changes of `cells`, the newest run first (then by cell label).
std::vector<CellChange> FlattenChanges(const std::vector<CellHistory>& cells);

}  // namespace dfarm::harness
