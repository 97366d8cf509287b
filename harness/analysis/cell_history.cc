#include "harness/analysis/cell_history.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>
#include <utility>

#include "agent/base/sha256.h"
#include "delegates/delegate_options.h"

namespace dfarm::harness {
namespace {

CellHistory MakeHistory(const store::Cell& cell, reports::CellSeries series, HistoryMetric metric) {
  CellHistory h;
  h.cell = cell;
  h.metric = metric;
  h.points = std::move(series.points);
  h.changes = std::move(series.changes);
  return h;
}

// The store filter a --model argument names (CellQuery::model): an existing
// file by its sha256, else a file name or a sha256 (prefix), as
// Store::ListCells matches them.
Result<std::string> ModelFilterText(const std::string& arg) {
  if (arg.empty()) return MakeError(ErrorKind::kInvalidInput, "--model must not be empty");
  std::error_code ec;
  if (std::filesystem::is_regular_file(arg, ec)) return agent::Sha256File(arg);
  return std::filesystem::path(arg).filename().string();
}

// "k:v;.." with its keys sorted, as the store keeps delegate options.
Result<std::string> NormalizeOptions(const std::string& text) {
  std::string error;
  auto parsed = delegates::ParseDelegateOptions(text, "--options", &error);
  if (!parsed) return MakeError(ErrorKind::kInvalidInput, error);
  std::stable_sort(parsed->begin(), parsed->end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return delegates::FormatDelegateOptions(*parsed);
}

std::string QueryText(const CellQuery& q) {
  std::string s = "--model " + q.model + " --delegate " + q.delegate;
  if (q.delegate_options) s += " --options '" + *q.delegate_options + "'";
  if (q.device) s += " --device " + *q.device;
  if (q.num_threads) s += " --threads " + std::to_string(*q.num_threads);
  if (q.runner) s += " --runner '" + *q.runner + "'";
  if (q.inputs) s += " --inputs " + *q.inputs;
  return s;
}

// " label (N runs); ..." for `cells`, N its points of `metric` (the error
// path reads their jobs).
Result<std::string> ListCellsText(store::Reader& store, const std::vector<store::Cell>& cells,
                                  HistoryMetric metric) {
  auto runs = reports::LoadRunsById(store);
  if (!runs) return runs.error();
  std::string s;
  for (const store::Cell& cell : cells) {
    auto series = reports::LoadCellSeries(store, cell, *runs, metric);
    if (!series) return series.error();
    s += (s.empty() ? " " : "; ") + cell.Label() + " (" + std::to_string(series->points.size()) +
         " runs)";
  }
  return s;
}

// The models there are, for a --model that matches none.
Result<std::string> ListModels(store::Reader& store) {
  auto cells = store.ListCells({});
  if (!cells) return cells.error();
  std::set<std::string> models;
  for (const store::Cell& c : *cells) {
    models.insert(c.model + " (" + c.model_sha256.substr(0, 12) + ")");
  }
  std::string s;
  for (const std::string& m : models) s += (s.empty() ? "" : ", ") + m;
  return s.empty() ? std::string("none; the database holds no jobs") : s;
}

}  // namespace

Result<CellHistory> LoadCellHistory(store::Reader& store, const CellQuery& query,
                                    HistoryMetric metric,
                                    const stats::ChangePointOptions& options) {
  store::CellFilter filter;
  auto model = ModelFilterText(query.model);
  if (!model) return model.error();
  filter.model = *model;
  auto of_model = store.ListCells(filter);
  if (!of_model) return of_model.error();
  if (of_model->empty()) {
    auto models = ListModels(store);
    if (!models) return models.error();
    return MakeError(ErrorKind::kInvalidInput, "no job in the database has the model '" +
                                                   query.model + "' (models: " + *models + ")");
  }
  filter.delegate = query.delegate;
  if (query.delegate_options) {
    auto normalized = NormalizeOptions(*query.delegate_options);
    if (!normalized) return normalized.error();
    filter.delegate_options = *normalized;
  }
  filter.device = query.device;
  filter.num_threads = query.num_threads;
  filter.runner = query.runner;
  filter.inputs = query.inputs;
  auto matching = store.ListCells(filter);
  if (!matching) return matching.error();
  if (matching->size() != 1) {
    const bool none = matching->empty();
    auto cells = ListCellsText(store, none ? *of_model : *matching, metric);
    if (!cells) return cells.error();
    if (none) {
      return MakeError(ErrorKind::kInvalidInput, "no cell matches " + QueryText(query) +
                                                     "; the cells of that model are:" + *cells);
    }
    return MakeError(
        ErrorKind::kInvalidInput,
        std::to_string(matching->size()) + " cells match " + QueryText(query) +
            "; pick one with --options, --device, --threads, --runner or --inputs:" + *cells);
  }
  auto runs = reports::LoadRunsById(store);
  if (!runs) return runs.error();
  const store::Cell& cell = matching->front();
  auto series = reports::LoadCellSeries(store, cell, *runs, metric, options);
  if (!series) return series.error();
  return MakeHistory(cell, std::move(*series), metric);
}

Result<std::vector<CellHistory>> FindStepChanges(store::Reader& store, const std::string& since,
                                                 HistoryMetric metric,
                                                 const stats::ChangePointOptions& options) {
  auto cells = store.ListCells({});
  if (!cells) return cells.error();
  auto runs = reports::LoadRunsById(store);
  if (!runs) return runs.error();
  std::vector<CellHistory> out;
  for (const store::Cell& cell : *cells) {
    auto series = reports::LoadCellSeries(store, cell, *runs, metric, options);
    if (!series) return series.error();
    CellHistory h = MakeHistory(cell, std::move(*series), metric);
    // ISO-8601 UTC strings order as their times; a date prefix compares as its day's start.
    std::erase_if(h.changes, [&](const HistoryChange& c) { return c.created_at < since; });
    if (!h.changes.empty()) out.push_back(std::move(h));
  }
  return out;  // in Cell order, as ListCells lists them
}

std::vector<CellChange> FlattenChanges(const std::vector<CellHistory>& cells) {
  std::vector<CellChange> out;
  for (const CellHistory& h : cells) {
    for (const HistoryChange& c : h.changes) out.push_back({&h, &c});
  }
  std::stable_sort(out.begin(), out.end(), [](const CellChange& a, const CellChange& b) {
    if (a.change->run_id != b.change->run_id) return a.change->run_id > b.change->run_id;
    return a.history->cell.Label() < b.history->cell.Label();
  });
  return out;
}

}  // namespace dfarm::harness
