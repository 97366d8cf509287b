// TrendView: one metric of one matrix cell over runs. A point per run (the
// median of the cell's ok trials) joined by a line, the trials' min-max band
// and each trial as a dot, tagged runs marked with their tag names, and the
// step changes (stats::DetectChangePoints, as `dfarm history`) drawn as
// vertical lines with the level before and after. Several cells (a
// Location's moreCells) draw one median line each on the same runs. The
// chart zooms (drag a rectangle, the wheel; right click or Reset zooms out),
// shows the value under the cursor as a tooltip, keeps to a date range and
// labels its x axis by run or by the runner build. Its link (describe)
// carries the metric, date range and zoom. Clicking a point (or
// activating a row of the table under the chart, the first cell's) emits
// openRun.
#pragma once

#include <QDate>
#include <QString>
#include <utility>
#include <vector>

#include "gui/views/trend_model.h"
#include "gui/views/view.h"

class QCategoryAxis;
class QChart;
class QChartView;
class QComboBox;
class QDateEdit;
class QHBoxLayout;
class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace dfarm::gui {

class TrendChartView;

// What the trend's x axis names a run by.
enum class TrendAxis { Run, Build };

class TrendView : public View {
  Q_OBJECT

 public:
  explicit TrendView(QWidget* parent = nullptr);

  void showCell(const store::Cell& cell);
  // Draws every cell of cells (the first kMaxTrendSeries) on one chart.
  void showCells(const std::vector<store::Cell>& cells);
  void open(const Location& where) override;
  // Keeps the chart to runs created from `from` to `to` (inclusive; a null
  // date: no bound).
  void setDateRange(const QDate& from, const QDate& to);
  void setAxis(TrendAxis axis);
  // The series loaded, one per cell, in the order given.
  const std::vector<TrendData>& series() const { return m_series; }
  // The runs on the x axis (date range applied), oldest first.
  const std::vector<int64_t>& runsShown() const { return m_xRuns; }
  // The tooltip for a point of the chart view at pos (viewport coordinates):
  // the nearest point within a few pixels, "" when none.
  QString pointTextAt(const QPoint& pos, int64_t* runId = nullptr) const;
  void setMetric(TrendMetric metric);
  TrendMetric metric() const { return m_metric; }
  void refresh() override;
  QWidget* exportableChart() const override;
  // The metric when not p50, the date range when one was chosen, the zoom
  // when the chart is zoomed (the runs at its edges).
  void describe(Location& where) const override;
  // Shows the runs from first to last (ids; those on the axis), as a link's
  // zoom does; 0, 0: every run.
  void setZoom(qint64 firstRun, qint64 lastRun);

  TrendModel* model() const { return m_model; }
  QChart* chart() const { return m_chart; }
  // The error or empty-state message shown instead of the chart ("" when none).
  QString message() const;

 private:
  QHBoxLayout* buildControls();
  void load();
  void showTrends(const Result<std::vector<TrendData>>& trends);
  void rebuildChart();
  bool shown(const TrendPoint& p) const;
  double xOf(int64_t runId) const;
  void labelAxis(QCategoryAxis* axis) const;
  // The x axis range shown: the zoom's runs on the axis, else every run.
  std::pair<double, double> viewRange() const;
  bool inView(double x) const;
  void addSeriesLines(double* yMin, double* yMax);
  void addChangeSeries(double yMin, double yMax);
  void addTagSeries();
  void addHoverPoints(size_t series);
  void pointClicked(const QPointF& point);
  void resetDateRange();

  // A drawn point, for the tooltip and clicks: m_series[series].points[point].
  struct Hover {
    QPointF value;
    size_t series = 0;
    size_t point = 0;
  };
  QString hoverText(const Hover& h) const;

  std::vector<store::Cell> m_cells;
  std::vector<TrendData> m_series;
  std::vector<int64_t> m_xRuns;
  std::vector<Hover> m_hover;
  bool m_hasCell = false;
  QDate m_from;
  QDate m_to;
  bool m_rangeSet = false;
  qint64 m_zoomFirst = 0;  // setZoom's runs; 0: none
  qint64 m_zoomLast = 0;
  std::pair<double, double> m_xView{-0.5, 0.5};  // viewRange() of the chart drawn
  TrendAxis m_axis = TrendAxis::Run;
  QComboBox* m_axisBox = nullptr;
  QDateEdit* m_fromEdit = nullptr;
  QDateEdit* m_toEdit = nullptr;
  TrendMetric m_metric = TrendMetric::kP50;
  quint64 m_generation = 0;
  QLabel* m_title = nullptr;
  QComboBox* m_metricBox = nullptr;
  QLabel* m_message = nullptr;
  QChart* m_chart = nullptr;
  TrendChartView* m_chartView = nullptr;
  TrendModel* m_model = nullptr;
  QSortFilterProxyModel* m_proxy = nullptr;
  QTableView* m_table = nullptr;
};

}  // namespace dfarm::gui
