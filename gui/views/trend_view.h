// TrendView: one metric of one matrix cell over runs. A point per run (the
// median of the cell's ok trials) joined by a line, the trials' min-max band
// and each trial as a dot, tagged runs marked with their tag names, and the
// step changes (stats::DetectChangePoints, as `dfarm history`) drawn as
// vertical lines with the level before and after. Clicking a point (or
// activating a row of the table under the chart) emits openRun.
#pragma once

#include <QString>

#include "gui/views/trend_model.h"
#include "gui/views/view.h"

class QChart;
class QChartView;
class QComboBox;
class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace dfarm::gui {

class TrendView : public View {
  Q_OBJECT

 public:
  explicit TrendView(QWidget* parent = nullptr);

  void showCell(const store::Cell& cell);
  void open(const Location& where) override;
  void setMetric(TrendMetric metric);
  TrendMetric metric() const { return m_metric; }
  void refresh() override;
  QWidget* exportableChart() const override;

  TrendModel* model() const { return m_model; }
  QChart* chart() const { return m_chart; }
  // The error or empty-state message shown instead of the chart ("" when none).
  QString message() const;

 private:
  void load();
  void showTrend(const Result<TrendData>& trend);
  void rebuildChart();
  void addChangeSeries(double yMin, double yMax);
  void addTagSeries();
  void pointClicked(const QPointF& point);

  store::Cell m_cell;
  bool m_hasCell = false;
  TrendMetric m_metric = TrendMetric::kP50;
  quint64 m_generation = 0;
  QLabel* m_title = nullptr;
  QComboBox* m_metricBox = nullptr;
  QLabel* m_message = nullptr;
  QChart* m_chart = nullptr;
  QChartView* m_chartView = nullptr;
  TrendModel* m_model = nullptr;
  QSortFilterProxyModel* m_proxy = nullptr;
  QTableView* m_table = nullptr;
};

}  // namespace dfarm::gui
