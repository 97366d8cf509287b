// The trend of one matrix cell over runs, as the Trend view draws it: one
// point per run (the median of the cell's ok trials: `dfarm history`'s series,
// reports/history.h),
// each trial's value for the spread, the run's tags, and the step changes
// stats::DetectChangePoints finds in the medians. TrendModel lists the
// points as a table.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <vector>

#include "agent/base/result.h"
#include "gui/views/view.h"
#include "reports/gate/stats.h"
#include "reports/history.h"
#include "reports/store/store.h"

namespace dfarm::gui {

// What a point measures (every one better lower): `dfarm history --metric`'s
// enum, from reports/history.h.
using TrendMetric = reports::HistoryMetric;

// "mean latency (ms)", "peak RSS (MiB)", ...: the axis title.
QString trendMetricTitle(TrendMetric metric);
// The value shown for a raw figure (latency us -> ms, bytes -> MiB).
double trendDisplayValue(TrendMetric metric, double raw);

struct TrendPoint {
  int64_t runId = 0;
  QString createdAt;           // the run's, ISO-8601 UTC
  QStringList tags;            // the run's tags
  double value = 0;            // median over the run's ok trials (display units)
  std::vector<double> trials;  // each ok trial's value (display units), trial order
  double min = 0;
  double max = 0;
  // The runner build of the run's trials of the cell: its version and the
  // first 8 hex digits of its sha256 ("2.16.1 3bc182eb"; either may be
  // missing, "" when the jobs recorded neither).
  QString build;
};

struct TrendChange {
  size_t index = 0;  // the first point of the new level
  int64_t runId = 0;
  double before = 0;  // display units
  double after = 0;
  double changePct = 0;
  bool regression = false;  // after is higher (worse) than before
};

struct TrendData {
  store::Cell cell;
  TrendMetric metric = TrendMetric::kP50;
  std::vector<TrendPoint> points;  // oldest run first
  std::vector<TrendChange> changes;
};

// Reads the trend of `cell` (blocking; off the GUI thread): the series
// reports::LoadCellSeries builds for `dfarm history` too, in display units. A
// cell without any job is a kNotFound error naming it.
Result<TrendData> loadTrend(store::Reader& store, const store::Cell& cell, TrendMetric metric,
                            const stats::ChangePointOptions& options = {});
// The trends of several cells (one ListRuns for all), in the order given;
// with more than one cell, without step changes (the chart of several
// series draws none).
Result<std::vector<TrendData>> loadTrends(store::Reader& store,
                                          const std::vector<store::Cell>& cells, TrendMetric metric,
                                          const stats::ChangePointOptions& options = {});

class TrendModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    RunColumn,
    CreatedColumn,
    TagsColumn,
    ValueColumn,
    TrialsColumn,
    MinColumn,
    MaxColumn,
    ChangeColumn,  // "+12.3% from 4.1" on the first point of a new level
    ColumnCount
  };
  static constexpr int SortRole = Qt::UserRole + 1;
  static constexpr int RunIdRole = Qt::UserRole + 2;

  explicit TrendModel(QObject* parent = nullptr);

  void setTrend(TrendData data);
  const TrendData& trend() const { return m_data; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  const TrendChange* changeAt(size_t row) const;
  TrendData m_data;
};

}  // namespace dfarm::gui
