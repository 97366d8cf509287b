// History over runs: one cell's metric run by run, with the step changes
// found in it (`dfarm history`), and the step changes of every cell
// (`dfarm regressions`). A cell is a store::Cell (reports/store/cell.h); its
// point in a run is the median over that run's ok trials. Change points come
// from stats::DetectChangePoints (reports/gate/stats.h), through
// reports/history.h.
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

// Which cell `dfarm history` shows: a store::CellFilter, read more loosely
// than the store does. model: a file name, a path (a file that exists is
// matched by its sha256, else by its file name) or a sha256 (or a prefix of
// at least 8 hex digits); delegate_options: "k:v;..", keys in any order.
// Unset fields match anything, but the result must be one cell.
using CellQuery = store::CellFilter;

using reports::HistoryChange;  // run_id, created_at, index, before, after, change_pct, regression
using reports::HistoryPoint;   // run_id, created_at, tags, value, trials, trial_values

struct CellHistory {
  store::Cell cell;
  HistoryMetric metric = HistoryMetric::kP50;
  std::vector<HistoryPoint> points;  // oldest run first
  std::vector<HistoryChange> changes;
};

// The history of the one cell matching `query`. kInvalidInput when no cell or
// more than one matches: the message names the query and lists the cells that
// match its model and delegate (or the models and delegates there are).
Result<CellHistory> LoadCellHistory(store::Reader& store, const CellQuery& query,
                                    HistoryMetric metric,
                                    const stats::ChangePointOptions& options = {});

// Every cell with a step change at a run created at or after `since` (an
// ISO-8601 prefix such as "2024-05-01"; "" for all), each with only those
// changes. The changes of all cells, newest run first, come from FlattenChanges.
Result<std::vector<CellHistory>> FindStepChanges(store::Reader& store, const std::string& since,
                                                 HistoryMetric metric,
                                                 const stats::ChangePointOptions& options = {});

struct CellChange {
  const CellHistory* history = nullptr;
  const HistoryChange* change = nullptr;
};
// The changes of `cells`, the newest run first (then by cell label).
std::vector<CellChange> FlattenChanges(const std::vector<CellHistory>& cells);

}  // namespace dfarm::harness
