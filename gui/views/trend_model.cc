#include "gui/views/trend_model.h"

#include <QLocale>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "gui/format.h"

namespace dfarm::gui {
namespace {

// The job's raw figure of `metric`; unset when it has none (as `dfarm history`).
Result<std::optional<double>> rawValue(store::Store& store, const store::JobRow& job,
                                       TrendMetric metric) {
  if (metric == TrendMetric::kMaxAbsError) {
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
    case TrendMetric::kMean:
      return std::optional<double>(m.mean_us);
    case TrendMetric::kP50:
      return std::optional<double>(m.p50_us);
    case TrendMetric::kP90:
      return std::optional<double>(m.p90_us);
    case TrendMetric::kPeakRss:
      if (m.peak_rss_bytes <= 0) return std::optional<double>();
      return std::optional<double>(static_cast<double>(m.peak_rss_bytes));
    case TrendMetric::kMaxAbsError:
      break;
  }
  return std::optional<double>();
}

QString cellLabel(const CellRef& c) {
  QString s = c.model + " " + c.delegate;
  if (!c.delegateOptions.isEmpty()) s += "[" + c.delegateOptions + "]";
  s += QString(" x%1 @").arg(c.numThreads) + c.device;
  if (!c.runner.isEmpty()) s += " runner " + c.runner;
  return s;
}

}  // namespace

QString trendMetricTitle(TrendMetric metric) {
  switch (metric) {
    case TrendMetric::kMean:
      return QStringLiteral("mean latency (ms)");
    case TrendMetric::kP50:
      return QStringLiteral("p50 latency (ms)");
    case TrendMetric::kP90:
      return QStringLiteral("p90 latency (ms)");
    case TrendMetric::kPeakRss:
      return QStringLiteral("peak RSS (MiB)");
    case TrendMetric::kMaxAbsError:
      return QStringLiteral("max abs error");
  }
  return {};
}

double trendDisplayValue(TrendMetric metric, double raw) {
  switch (metric) {
    case TrendMetric::kMean:
    case TrendMetric::kP50:
    case TrendMetric::kP90:
      return raw / 1000.0;
    case TrendMetric::kPeakRss:
      return raw / (1024.0 * 1024.0);
    case TrendMetric::kMaxAbsError:
      return raw;
  }
  return raw;
}

Result<std::vector<store::JobRow>> readCellJobs(store::Store& store, const CellRef& cell) {
  store::CellKeyQuery q;
  q.model_sha256 = cell.modelSha256.toStdString();
  q.delegate = cell.delegate.toStdString();
  q.delegate_options = cell.delegateOptions.toStdString();
  q.device = cell.device.toStdString();
  q.runner = cell.runner.toStdString();
  q.num_threads = cell.numThreads;
  return store.ListCellJobs(q);
}

Result<TrendData> loadTrend(store::Store& store, const CellRef& cell, TrendMetric metric,
                            const stats::ChangePointOptions& options) {
  auto jobs = readCellJobs(store, cell);
  if (!jobs) return jobs.error();
  if (jobs->empty()) {
    return MakeError(ErrorKind::kNotFound, "no job in the database belongs to the cell " +
                                               cellLabel(cell).toStdString() +
                                               "; pick a cell in a run's matrix");
  }
  auto runs = store.ListRuns();
  if (!runs) return runs.error();
  std::map<int64_t, const store::RunRow*> runById;
  for (const store::RunRow& r : *runs) runById[r.id] = &r;

  TrendData data;
  data.cell = cell;
  data.metric = metric;
  std::map<int64_t, std::vector<double>> byRun;  // run id -> trial values, in trial order
  for (const store::JobRow& job : *jobs) {
    if (job.status != store::kJobOk) continue;
    auto raw = rawValue(store, job, metric);
    if (!raw) return raw.error();
    if (*raw && std::isfinite(**raw)) byRun[job.run_id].push_back(trendDisplayValue(metric, **raw));
  }
  for (auto& [runId, values] : byRun) {
    TrendPoint p;
    p.runId = runId;
    if (auto it = runById.find(runId); it != runById.end()) {
      p.createdAt = QString::fromStdString(it->second->created_at);
      for (const std::string& t : it->second->tags) p.tags << QString::fromStdString(t);
    }
    p.trials = values;
    p.min = *std::min_element(values.begin(), values.end());
    p.max = *std::max_element(values.begin(), values.end());
    p.value = stats::Median(std::move(values));
    data.points.push_back(std::move(p));
  }
  std::vector<double> series;
  for (const TrendPoint& p : data.points) series.push_back(p.value);
  for (const stats::ChangePoint& cp : stats::DetectChangePoints(series, options)) {
    TrendChange c;
    c.index = cp.index;
    c.runId = data.points[cp.index].runId;
    c.before = cp.before;
    c.after = cp.after;
    c.changePct = cp.before != 0 ? 100 * (cp.after - cp.before) / std::fabs(cp.before) : 0;
    c.regression = cp.after > cp.before;
    data.changes.push_back(c);
  }
  return data;
}

TrendModel::TrendModel(QObject* parent) : QAbstractTableModel(parent) {}

void TrendModel::setTrend(TrendData data) {
  beginResetModel();
  m_data = std::move(data);
  endResetModel();
}

int TrendModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_data.points.size());
}

int TrendModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

const TrendChange* TrendModel::changeAt(size_t row) const {
  for (const TrendChange& c : m_data.changes) {
    if (c.index == row) return &c;
  }
  return nullptr;
}

QVariant TrendModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const TrendPoint& p = m_data.points[static_cast<size_t>(index.row())];
  const TrendChange* change = changeAt(static_cast<size_t>(index.row()));
  if (role == RunIdRole) return QVariant::fromValue<qint64>(p.runId);
  if (role == Qt::TextAlignmentRole) {
    const bool number = index.column() != CreatedColumn && index.column() != TagsColumn &&
                        index.column() != ChangeColumn;
    return number ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
  }
  if (role == SortRole) {
    switch (index.column()) {
      case RunColumn:
        return QVariant::fromValue<qint64>(p.runId);
      case ValueColumn:
        return p.value;
      case TrialsColumn:
        return static_cast<int>(p.trials.size());
      case MinColumn:
        return p.min;
      case MaxColumn:
        return p.max;
      case ChangeColumn:
        return change ? change->changePct : 0.0;
      default:
        return data(index, Qt::DisplayRole);
    }
  }
  if (role == Qt::ForegroundRole && index.column() == ChangeColumn && change) {
    return QColor(change->regression ? Qt::darkRed : Qt::darkGreen);
  }
  if (role != Qt::DisplayRole) return {};
  const auto num = [&](double v) {
    return m_data.metric == TrendMetric::kMaxAbsError ? QString::number(v, 'g', 4)
                                                      : QString::number(v, 'f', 3);
  };
  switch (index.column()) {
    case RunColumn:
      return QVariant::fromValue<qint64>(p.runId);
    case CreatedColumn:
      return p.createdAt;
    case TagsColumn:
      return p.tags.join(", ");
    case ValueColumn:
      return num(p.value);
    case TrialsColumn:
      return static_cast<int>(p.trials.size());
    case MinColumn:
      return num(p.min);
    case MaxColumn:
      return num(p.max);
    case ChangeColumn:
      if (!change) return QString();
      return QString("%1%2% (%3 -> %4)")
          .arg(change->changePct >= 0 ? "+" : "")
          .arg(change->changePct, 0, 'f', 1)
          .arg(num(change->before), num(change->after));
  }
  return {};
}

QVariant TrendModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case RunColumn:
      return tr("Run");
    case CreatedColumn:
      return tr("Created");
    case TagsColumn:
      return tr("Tags");
    case ValueColumn:
      return tr("Median");
    case TrialsColumn:
      return tr("Trials");
    case MinColumn:
      return tr("Min");
    case MaxColumn:
      return tr("Max");
    case ChangeColumn:
      return tr("Step change");
  }
  return {};
}

}  // namespace dfarm::gui
