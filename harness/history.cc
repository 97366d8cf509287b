#include "harness/history.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "agent/base/sha256.h"
#include "delegates/delegate_options.h"

namespace dfarm::harness {
namespace {

using JobFilter = std::function<bool(const store::JobRow&)>;

// A cell's points and the model file name of its newest job.
struct Series {
  std::string model;
  std::vector<HistoryPoint> points;
};

CellKey KeyOf(const store::JobRow& job) {
  CellKey key;
  key.model_sha256 = job.model_sha256;
  key.delegate = job.delegate;
  key.delegate_options = job.delegate_options;
  key.num_threads = job.num_threads;
  key.runner = job.runner;
  key.device = job.device;
  return key;  // model stays "": the file name may change, the sha256 names the model
}

// The job's value of `metric`; unset when it has none (no metrics, no accuracy).
Result<std::optional<double>> MetricValue(store::Store& store, const store::JobRow& job,
                                          HistoryMetric metric) {
  if (metric == HistoryMetric::kMaxAbsError) {
    auto accuracy = store.GetAccuracy(job.id);
    if (!accuracy) return accuracy.error();
    if (!*accuracy || (*accuracy)->outputs.empty()) return std::optional<double>();
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
      break;
  }
  return std::optional<double>();
}

// Every cell whose jobs pass `filter`, with one point per run that has an ok
// trial with a value. Cells without any point are kept (with no points), so
// that an error can name them.
Result<std::map<CellKey, Series>> LoadSeries(store::Store& store, HistoryMetric metric,
                                             const JobFilter& filter) {
  auto runs = store.ListRuns();
  if (!runs) return runs.error();
  std::map<CellKey, Series> cells;
  for (const store::RunRow& run : *runs) {
    auto jobs = store.ListJobs(run.id);
    if (!jobs) return jobs.error();
    std::map<CellKey, std::vector<double>> values;
    for (const store::JobRow& job : *jobs) {
      if (!filter(job)) continue;
      const CellKey key = KeyOf(job);
      cells[key].model = job.model;  // runs come oldest first: the newest name wins
      values[key];
      if (job.status != store::kJobOk) continue;
      auto value = MetricValue(store, job, metric);
      if (!value) return value.error();
      if (*value && std::isfinite(**value)) values[key].push_back(**value);
    }
    for (auto& [key, v] : values) {
      if (v.empty()) continue;
      const int64_t trials = static_cast<int64_t>(v.size());
      cells[key].points.push_back({run.id, run.created_at, stats::Median(std::move(v)), trials});
    }
  }
  return cells;
}

// The cells of the jobs that pass `filter`, each with the model file name of
// its newest job; no metric is read.
Result<std::map<CellKey, std::string>> LoadCellKeys(store::Store& store, const JobFilter& filter) {
  auto runs = store.ListRuns();
  if (!runs) return runs.error();
  std::map<CellKey, std::string> cells;
  for (const store::RunRow& run : *runs) {
    auto jobs = store.ListJobs(run.id);
    if (!jobs) return jobs.error();
    for (const store::JobRow& job : *jobs) {
      if (filter(job)) cells[KeyOf(job)] = job.model;  // oldest run first: the newest name wins
    }
  }
  return cells;
}

// One cell's series from its jobs across runs (Store::ListCellJobs, the query
// the dashboard's trend view reads too): one point per run with an ok trial
// with a value, the median over them.
Result<Series> LoadCellSeries(store::Store& store, const CellKey& key, HistoryMetric metric) {
  auto runs = store.ListRuns();
  if (!runs) return runs.error();
  std::map<int64_t, std::string> created;
  for (const store::RunRow& run : *runs) created[run.id] = run.created_at;
  store::CellKeyQuery cell;
  cell.model_sha256 = key.model_sha256;
  cell.delegate = key.delegate;
  cell.delegate_options = key.delegate_options;
  cell.device = key.device;
  cell.runner = key.runner;
  cell.num_threads = key.num_threads;
  auto jobs = store.ListCellJobs(cell);
  if (!jobs) return jobs.error();
  Series series;
  std::vector<double> values;
  int64_t run_id = 0;
  auto flush = [&] {
    if (values.empty()) return;
    const int64_t trials = static_cast<int64_t>(values.size());
    series.points.push_back({run_id, created[run_id], stats::Median(std::move(values)), trials});
    values.clear();
  };
  for (const store::JobRow& job : *jobs) {  // by run, then trial
    if (job.run_id != run_id) flush();
    run_id = job.run_id;
    series.model = job.model;
    if (job.status != store::kJobOk) continue;
    auto value = MetricValue(store, job, metric);
    if (!value) return value.error();
    if (*value && std::isfinite(**value)) values.push_back(**value);
  }
  flush();
  return series;
}

std::vector<HistoryChange> FindChanges(const std::vector<HistoryPoint>& points,
                                       const stats::ChangePointOptions& options) {
  std::vector<double> series;
  for (const HistoryPoint& p : points) series.push_back(p.value);
  std::vector<HistoryChange> out;
  for (const stats::ChangePoint& cp : stats::DetectChangePoints(series, options)) {
    HistoryChange c;
    c.run_id = points[cp.index].run_id;
    c.created_at = points[cp.index].created_at;
    c.index = cp.index;
    c.before = cp.before;
    c.after = cp.after;
    c.change_pct = cp.before != 0 ? 100 * (cp.after - cp.before) / std::fabs(cp.before) : 0;
    c.regression = cp.after > cp.before;
    out.push_back(c);
  }
  return out;
}

CellHistory MakeHistory(CellKey key, Series series, HistoryMetric metric,
                        const stats::ChangePointOptions& options) {
  CellHistory h;
  h.cell = std::move(key);
  h.cell.model = std::move(series.model);
  h.metric = metric;
  h.points = std::move(series.points);
  h.changes = FindChanges(h.points, options);
  return h;
}

bool IsHex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Which jobs a --model argument names (CellQuery::model).
Result<JobFilter> ModelFilter(const std::string& arg) {
  if (arg.empty()) return MakeError(ErrorKind::kInvalidInput, "--model must not be empty");
  std::error_code ec;
  if (std::filesystem::is_regular_file(arg, ec)) {
    auto sha = agent::Sha256File(arg);
    if (!sha) return sha.error();
    return JobFilter([sha = *sha](const store::JobRow& j) { return j.model_sha256 == sha; });
  }
  const std::string name = std::filesystem::path(arg).filename().string();
  const std::string hex = Lower(arg);
  const bool sha_prefix = hex.size() >= 8 && hex.size() <= 64 && IsHex(hex);
  return JobFilter([=](const store::JobRow& j) {
    if (sha_prefix && j.model_sha256.rfind(hex, 0) == 0) return true;
    return j.model == arg || j.model == name || j.model_path == arg;
  });
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
  return s;
}

std::string ListCells(const std::map<CellKey, Series>& cells) {
  std::string s;
  for (const auto& [key, series] : cells) {
    CellKey named = key;
    named.model = series.model;
    s += (s.empty() ? " " : "; ") + named.Label() + " (" + std::to_string(series.points.size()) +
         " runs)";
  }
  return s;
}

// The models there are, for a --model that matches none.
Result<std::string> ListModels(store::Store& store) {
  std::set<std::string> models;
  auto all = LoadSeries(store, HistoryMetric::kP50, [](const store::JobRow&) { return true; });
  if (!all) return all.error();
  for (const auto& [key, series] : *all) {
    models.insert(series.model + " (" + key.model_sha256.substr(0, 12) + ")");
  }
  std::string s;
  for (const std::string& m : models) s += (s.empty() ? "" : ", ") + m;
  return s.empty() ? std::string("none; the database holds no jobs") : s;
}

}  // namespace

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
  }
  return "?";
}

Result<HistoryMetric> ParseHistoryMetric(const std::string& name) {
  for (HistoryMetric m : {HistoryMetric::kMean, HistoryMetric::kP50, HistoryMetric::kP90,
                          HistoryMetric::kPeakRss, HistoryMetric::kMaxAbsError}) {
    if (name == HistoryMetricName(m)) return m;
  }
  return MakeError(ErrorKind::kInvalidInput, "unknown --metric '" + name +
                                                 "' (expected mean, p50, p90, peak_rss or "
                                                 "max_abs_error)");
}

std::string CellKey::Label() const {
  std::string s = model + " (" + model_sha256.substr(0, 8) + ") " + delegate;
  if (!delegate_options.empty()) s += "[" + delegate_options + "]";
  s += " x" + std::to_string(num_threads) + " @" + device;
  if (!runner.empty()) s += " runner " + runner;
  return s;
}

Result<CellHistory> LoadCellHistory(store::Store& store, const CellQuery& query,
                                    HistoryMetric metric,
                                    const stats::ChangePointOptions& options) {
  auto by_model = ModelFilter(query.model);
  if (!by_model) return by_model.error();
  std::optional<std::string> wanted_options;
  if (query.delegate_options) {
    auto normalized = NormalizeOptions(*query.delegate_options);
    if (!normalized) return normalized.error();
    wanted_options = *normalized;
  }
  auto keys = LoadCellKeys(store, *by_model);
  if (!keys) return keys.error();
  if (keys->empty()) {
    auto models = ListModels(store);
    if (!models) return models.error();
    return MakeError(ErrorKind::kInvalidInput, "no job in the database has the model '" +
                                                   query.model + "' (models: " + *models + ")");
  }
  auto matches = [&](const CellKey& key) {
    if (key.delegate != query.delegate) return false;
    if (wanted_options && key.delegate_options != *wanted_options) return false;
    if (query.device && key.device != *query.device) return false;
    if (query.num_threads && key.num_threads != *query.num_threads) return false;
    return !query.runner || key.runner == *query.runner;
  };
  std::vector<CellKey> matching;
  for (const auto& [key, model] : *keys) {
    if (matches(key)) matching.push_back(key);
  }
  if (matching.size() != 1) {
    // Name the cells with their point counts (the error path reads them all).
    auto cells = LoadSeries(store, metric, *by_model);
    if (!cells) return cells.error();
    if (matching.empty()) {
      return MakeError(ErrorKind::kInvalidInput,
                       "no cell matches " + QueryText(query) +
                           "; the cells of that model are:" + ListCells(*cells));
    }
    std::erase_if(*cells, [&](const auto& cell) { return !matches(cell.first); });
    return MakeError(
        ErrorKind::kInvalidInput,
        std::to_string(matching.size()) + " cells match " + QueryText(query) +
            "; pick one with --options, --device, --threads or --runner:" + ListCells(*cells));
  }
  auto series = LoadCellSeries(store, matching.front(), metric);
  if (!series) return series.error();
  series->model = (*keys)[matching.front()];
  return MakeHistory(matching.front(), std::move(*series), metric, options);
}

Result<std::vector<CellHistory>> FindStepChanges(store::Store& store, const std::string& since,
                                                 HistoryMetric metric,
                                                 const stats::ChangePointOptions& options) {
  auto cells = LoadSeries(store, metric, [](const store::JobRow&) { return true; });
  if (!cells) return cells.error();
  std::vector<CellHistory> out;
  for (auto& [key, series] : *cells) {
    CellHistory h = MakeHistory(key, std::move(series), metric, options);
    // ISO-8601 UTC strings order as their times; a date prefix compares as its day's start.
    std::erase_if(h.changes, [&](const HistoryChange& c) { return c.created_at < since; });
    if (!h.changes.empty()) out.push_back(std::move(h));
  }
  return out;
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
