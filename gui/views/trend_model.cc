#include "gui/views/trend_model.h"

#include <QLocale>
#include <algorithm>
#include <cmath>
#include <map>

#include "gui/format.h"

namespace dfarm::gui {

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
    case TrendMetric::kTop1:
      return QStringLiteral("top-1 accuracy (%)");
    case TrendMetric::kTop5:
      return QStringLiteral("top-5 accuracy (%)");
    case TrendMetric::kMap:
      return QStringLiteral("mAP@[.5:.95] (%)");
    case TrendMetric::kMiou:
      return QStringLiteral("mIoU (%)");
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
    case TrendMetric::kTop1:
    case TrendMetric::kTop5:
    case TrendMetric::kMap:
    case TrendMetric::kMiou:
      return raw;
  }
  return raw;
}

namespace {

QString buildOf(const store::JobRow& job) {
  QStringList parts;
  if (!job.runner_version.empty()) parts << QString::fromStdString(job.runner_version);
  if (!job.runner_sha256.empty()) parts << QString::fromStdString(job.runner_sha256.substr(0, 8));
  return parts.join(' ');
}

Result<TrendData> trendOf(store::Reader& store, const store::Cell& cell, TrendMetric metric,
                          const reports::RunsById& runs, const stats::ChangePointOptions& options,
                          bool find_changes) {
  auto jobs = store.ListCellTrials(cell);
  if (!jobs) return jobs.error();
  auto series = reports::BuildCellSeries(store, *jobs, runs, metric, options, find_changes);
  if (!series) return series.error();
  if (series->jobs == 0) {
    return MakeError(ErrorKind::kNotFound, "no job in the database belongs to the cell " +
                                               cell.Label() + "; pick a cell in a run's matrix");
  }
  // The build of each run: its last ok trial's (the one the point's trials ran on).
  std::map<int64_t, QString> builds;
  for (const store::JobRow& job : *jobs) {
    if (job.status == store::kJobOk || builds.count(job.run_id) == 0) {
      builds[job.run_id] = buildOf(job);
    }
  }
  const auto display = [metric](double raw) { return trendDisplayValue(metric, raw); };
  TrendData data;
  data.cell = cell;
  if (data.cell.model.empty()) data.cell.model = series->model;
  data.metric = metric;
  for (const reports::HistoryPoint& sp : series->points) {
    TrendPoint p;
    p.runId = sp.run_id;
    p.createdAt = QString::fromStdString(sp.created_at);
    for (const std::string& t : sp.tags) p.tags << QString::fromStdString(t);
    for (double v : sp.trial_values) p.trials.push_back(display(v));
    p.min = *std::min_element(p.trials.begin(), p.trials.end());
    p.max = *std::max_element(p.trials.begin(), p.trials.end());
    p.value = display(sp.value);
    p.build = builds[sp.run_id];
    data.points.push_back(std::move(p));
  }
  for (const reports::HistoryChange& sc : series->changes) {
    TrendChange c;
    c.index = sc.index;
    c.runId = sc.run_id;
    c.before = display(sc.before);
    c.after = display(sc.after);
    c.changePct = sc.change_pct;
    c.regression = sc.regression;
    data.changes.push_back(c);
  }
  return data;
}

}  // namespace

Result<TrendData> loadTrend(store::Reader& store, const store::Cell& cell, TrendMetric metric,
                            const stats::ChangePointOptions& options) {
  auto runs = reports::LoadRunsById(store);
  if (!runs) return runs.error();
  return trendOf(store, cell, metric, *runs, options, true);
}

Result<std::vector<TrendData>> loadTrends(store::Reader& store,
                                          const std::vector<store::Cell>& cells, TrendMetric metric,
                                          const stats::ChangePointOptions& options) {
  auto runs = reports::LoadRunsById(store);
  if (!runs) return runs.error();
  std::vector<TrendData> out;
  for (const store::Cell& cell : cells) {
    auto trend = trendOf(store, cell, metric, *runs, options, cells.size() == 1);
    if (!trend) return trend.error();
    out.push_back(std::move(*trend));
  }
  return out;
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
