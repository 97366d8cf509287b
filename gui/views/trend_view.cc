#include "gui/views/trend_view.h"

#include <QAreaSeries>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDateEdit>
#include <QDateTime>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMouseEvent>
#include <QPushButton>
#include <QScatterSeries>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "gui/store_loader.h"

namespace dfarm::gui {
namespace {

constexpr TrendMetric kMetrics[] = {
    TrendMetric::kMean,    TrendMetric::kP50,         TrendMetric::kP90,
    TrendMetric::kPeakRss, TrendMetric::kMaxAbsError, TrendMetric::kTop1,
    TrendMetric::kTop5,    TrendMetric::kMap,         TrendMetric::kMiou};

void hideFromLegend(QChart* chart, QAbstractSeries* series) {
  for (QLegendMarker* m : chart->legend()->markers(series)) m->setVisible(false);
}

// The colours of the series of several cells, in order.
const QColor kSeriesColours[] = {QColor(25, 90, 160),  QColor(200, 90, 20),  QColor(30, 140, 60),
                                 QColor(160, 30, 140), QColor(120, 100, 20), QColor(20, 150, 160),
                                 QColor(200, 30, 60),  QColor(90, 90, 90)};

QDate dateOf(const QString& iso) { return QDateTime::fromString(iso, Qt::ISODate).date(); }

}  // namespace

// The chart's view: a dragged rectangle zooms in (QChartView's rubber band),
// the wheel zooms around the cursor, a right click zooms out; the point
// under the cursor shows as a tooltip and a click on it opens its run.
class TrendChartView : public QChartView {
 public:
  TrendChartView(QChart* chart, TrendView* trend) : QChartView(chart, trend), m_trend(trend) {
    setRubberBand(QChartView::RectangleRubberBand);
    setMouseTracking(true);
  }

 protected:
  void wheelEvent(QWheelEvent* event) override {
    const double factor = event->angleDelta().y() > 0 ? 1.25 : 0.8;
    QRectF area = chart()->plotArea();
    const QPointF at = event->position();
    area.setWidth(area.width() / factor);
    area.setHeight(area.height() / factor);
    area.moveCenter(at - (at - chart()->plotArea().center()) / factor);
    chart()->zoomIn(area);
    event->accept();
  }
  void mousePressEvent(QMouseEvent* event) override {
    m_pressedAt = event->position().toPoint();
    QChartView::mousePressEvent(event);
  }
  void mouseReleaseEvent(QMouseEvent* event) override {
    const bool click = event->button() == Qt::LeftButton &&
                       (event->position().toPoint() - m_pressedAt).manhattanLength() < 4;
    QChartView::mouseReleaseEvent(event);
    int64_t runId = 0;
    if (click && !m_trend->pointTextAt(event->position().toPoint(), &runId).isEmpty()) {
      emit m_trend->openRun(runId);
    }
  }
  void mouseMoveEvent(QMouseEvent* event) override {
    QChartView::mouseMoveEvent(event);
    const QString text = m_trend->pointTextAt(event->position().toPoint());
    if (text.isEmpty()) {
      QToolTip::hideText();
    } else {
      QToolTip::showText(event->globalPosition().toPoint(), text, this);
    }
  }

 private:
  TrendView* m_trend;
  QPoint m_pressedAt;
};

TrendView::TrendView(QWidget* parent) : View(parent) {
  m_title = new QLabel(this);
  m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont bold = m_title->font();
  bold.setBold(true);
  m_title->setFont(bold);
  m_metricBox = new QComboBox(this);
  for (TrendMetric m : kMetrics) m_metricBox->addItem(trendMetricTitle(m), static_cast<int>(m));
  m_metricBox->setCurrentIndex(static_cast<int>(m_metric));
  connect(m_metricBox, &QComboBox::activated, this,
          [this](int i) { setMetric(static_cast<TrendMetric>(m_metricBox->itemData(i).toInt())); });
  m_message = new QLabel(this);
  m_message->setWordWrap(true);
  m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_message->hide();

  m_chart = new QChart;
  m_chart->legend()->setAlignment(Qt::AlignBottom);
  m_chart->setMargins(QMargins(4, 4, 4, 4));
  m_chartView = new TrendChartView(m_chart, this);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  m_chartView->setMinimumHeight(260);

  m_model = new TrendModel(this);
  m_proxy = new QSortFilterProxyModel(this);
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(TrendModel::SortRole);
  m_table = new QTableView(this);
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(TrendModel::RunColumn, Qt::DescendingOrder);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->horizontalHeader()->setResizeContentsPrecision(100);  // thousands of runs: sampled
  connect(m_table, &QTableView::activated, this, [this](const QModelIndex& index) {
    emit openRun(index.data(TrendModel::RunIdRole).toLongLong());
  });

  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(m_chartView);
  splitter->addWidget(m_table);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_title);
  layout->addLayout(buildControls());
  layout->addWidget(m_message);
  layout->addWidget(splitter, 1);
}

QHBoxLayout* TrendView::buildControls() {
  m_axisBox = new QComboBox(this);
  m_axisBox->addItem(tr("run"), static_cast<int>(TrendAxis::Run));
  m_axisBox->addItem(tr("runner build"), static_cast<int>(TrendAxis::Build));
  connect(m_axisBox, &QComboBox::activated, this,
          [this](int i) { setAxis(static_cast<TrendAxis>(m_axisBox->itemData(i).toInt())); });
  m_fromEdit = new QDateEdit(this);
  m_toEdit = new QDateEdit(this);
  for (QDateEdit* e : {m_fromEdit, m_toEdit}) {
    e->setCalendarPopup(true);
    e->setDisplayFormat(QStringLiteral("yyyy-MM-dd"));
    connect(e, &QDateEdit::dateChanged, this,
            [this] { setDateRange(m_fromEdit->date(), m_toEdit->date()); });
  }
  auto* allDates = new QPushButton(tr("All dates"), this);
  connect(allDates, &QPushButton::clicked, this, [this] {
    m_rangeSet = false;
    resetDateRange();
    rebuildChart();
  });
  auto* resetZoom = new QPushButton(tr("Reset zoom"), this);
  resetZoom->setToolTip(tr("Drag a rectangle or turn the wheel over the chart to zoom"));
  connect(resetZoom, &QPushButton::clicked, this, [this] { setZoom(0, 0); });
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Metric:"), this));
  top->addWidget(m_metricBox);
  top->addWidget(new QLabel(tr("X axis:"), this));
  top->addWidget(m_axisBox);
  top->addWidget(new QLabel(tr("From:"), this));
  top->addWidget(m_fromEdit);
  top->addWidget(new QLabel(tr("to:"), this));
  top->addWidget(m_toEdit);
  top->addWidget(allDates);
  top->addWidget(resetZoom);
  top->addStretch(1);
  return top;
}

View* MakeTrendView(QWidget* parent) { return new TrendView(parent); }

void TrendView::open(const Location& where) {
  const TrendSettings& t = where.trend;
  if (t.metric) {
    m_metric = *t.metric;
    m_metricBox->setCurrentIndex(m_metricBox->findData(static_cast<int>(m_metric)));
  }
  if (t.from.isValid() && t.to.isValid()) {
    m_from = t.from;
    m_to = t.to;
    m_rangeSet = true;
    for (QDateEdit* e : {m_fromEdit, m_toEdit}) e->blockSignals(true);
    m_fromEdit->setDate(t.from);
    m_toEdit->setDate(t.to);
    for (QDateEdit* e : {m_fromEdit, m_toEdit}) e->blockSignals(false);
  }
  m_zoomFirst = t.zoomFirstRun;
  m_zoomLast = t.zoomLastRun;
  std::vector<store::Cell> cells = {where.cell};
  cells.insert(cells.end(), where.moreCells.begin(), where.moreCells.end());
  showCells(cells);
}

void TrendView::showCell(const store::Cell& cell) { showCells({cell}); }

void TrendView::showCells(const std::vector<store::Cell>& cells) {
  if (cells.empty()) return;
  m_cells.assign(cells.begin(), cells.begin() + std::min<size_t>(cells.size(), kMaxTrendSeries));
  m_hasCell = true;
  QString title = QString::fromStdString(m_cells.front().Label());
  if (m_cells.size() > 1) title += tr(" and %1 more cells").arg(m_cells.size() - 1);
  m_title->setText(title);
  load();
}

void TrendView::setMetric(TrendMetric metric) {
  m_metric = metric;
  m_metricBox->setCurrentIndex(m_metricBox->findData(static_cast<int>(metric)));
  if (m_hasCell) load();
}

void TrendView::setDateRange(const QDate& from, const QDate& to) {
  m_from = from;
  m_to = to;
  m_rangeSet = true;
  rebuildChart();
}

void TrendView::setAxis(TrendAxis axis) {
  m_axis = axis;
  m_axisBox->setCurrentIndex(m_axisBox->findData(static_cast<int>(axis)));
  rebuildChart();
}

void TrendView::setZoom(qint64 firstRun, qint64 lastRun) {
  m_zoomFirst = firstRun;
  m_zoomLast = lastRun;
  rebuildChart();
}

void TrendView::describe(Location& where) const {
  if (m_metric != TrendMetric::kP50 || where.trend.metric) where.trend.metric = m_metric;
  if (m_rangeSet && m_from.isValid() && m_to.isValid()) {
    where.trend.from = m_from;
    where.trend.to = m_to;
  }
  where.trend.zoomFirstRun = 0;
  where.trend.zoomLastRun = 0;
  const auto* axis = qobject_cast<QValueAxis*>(m_chart->axes(Qt::Horizontal).value(0));
  if (axis == nullptr || m_xRuns.empty()) return;
  const double n = static_cast<double>(m_xRuns.size());
  constexpr double kSlack = 1e-6;
  if (axis->min() <= -0.5 + kSlack && axis->max() >= n - 0.5 - kSlack) return;  // not zoomed
  const auto clampIndex = [&](double i) { return static_cast<size_t>(std::clamp(i, 0.0, n - 1)); };
  size_t first = clampIndex(std::ceil(axis->min() - kSlack));
  size_t last = clampIndex(std::floor(axis->max() + kSlack));
  if (first > last) first = last = clampIndex(std::round((axis->min() + axis->max()) / 2));
  where.trend.zoomFirstRun = m_xRuns[first];
  where.trend.zoomLastRun = m_xRuns[last];
}

void TrendView::refresh() {
  if (m_hasCell) load();
}

QWidget* TrendView::exportableChart() const { return m_chartView; }

QString TrendView::message() const { return m_message->isHidden() ? "" : m_message->text(); }

void TrendView::load() {
  markLoading();
  const quint64 generation = ++m_generation;
  const std::vector<store::Cell> cells = m_cells;
  const TrendMetric metric = m_metric;
  LoadAsync<std::vector<TrendData>>(
      database(), this, [cells, metric](store::Reader& s) { return loadTrends(s, cells, metric); },
      [this, generation](const Result<std::vector<TrendData>>& trends) {
        if (generation == m_generation) showTrends(trends);
      });
}

void TrendView::showTrends(const Result<std::vector<TrendData>>& trends) {
  if (!trends) {
    m_message->setText(
        tr("Cannot show the trend: %1").arg(QString::fromStdString(trends.message())));
    m_message->setStyleSheet("color: darkred");
    m_message->show();
    m_series.clear();
    m_model->setTrend({});
  } else {
    m_series = *trends;
    m_model->setTrend(m_series.front());
    if (m_series.front().points.empty()) {
      m_message->setText(tr("No ok trial of this cell has a %1 yet.")
                             .arg(trendMetricTitle(m_series.front().metric).section(" (", 0, 0)));
      m_message->setStyleSheet("");
      m_message->show();
    } else {
      m_message->hide();
    }
  }
  if (!m_rangeSet) resetDateRange();
  m_table->resizeColumnsToContents();
  rebuildChart();
  // Ready after the chart painted: the next event loop turn.
  QTimer::singleShot(0, this, [this] { markReady(); });
}

void TrendView::resetDateRange() {
  QDate first, last;
  for (const TrendData& d : m_series) {
    for (const TrendPoint& p : d.points) {
      const QDate at = dateOf(p.createdAt);
      if (!at.isValid()) continue;
      if (!first.isValid() || at < first) first = at;
      if (!last.isValid() || at > last) last = at;
    }
  }
  m_from = first;
  m_to = last;
  for (QDateEdit* e : {m_fromEdit, m_toEdit}) e->blockSignals(true);
  m_fromEdit->setDate(first.isValid() ? first : QDate::currentDate());
  m_toEdit->setDate(last.isValid() ? last : QDate::currentDate());
  for (QDateEdit* e : {m_fromEdit, m_toEdit}) e->blockSignals(false);
}

bool TrendView::shown(const TrendPoint& p) const {
  const QDate at = dateOf(p.createdAt);
  if (!at.isValid()) return true;
  return (!m_from.isValid() || at >= m_from) && (!m_to.isValid() || at <= m_to);
}

double TrendView::xOf(int64_t runId) const {
  const auto it = std::lower_bound(m_xRuns.begin(), m_xRuns.end(), runId);
  return static_cast<double>(it - m_xRuns.begin());
}

QString TrendView::pointTextAt(const QPoint& pos, int64_t* runId) const {
  const Hover* nearest = nullptr;
  double best = 10;  // pixels
  for (const Hover& h : m_hover) {
    const QPointF at = m_chartView->mapFromScene(m_chart->mapToPosition(h.value));
    const double d = std::hypot(at.x() - pos.x(), at.y() - pos.y());
    if (d <= best && m_chart->plotArea().contains(m_chart->mapToPosition(h.value))) {
      best = d;
      nearest = &h;
    }
  }
  if (nearest == nullptr) return {};
  if (runId != nullptr) *runId = m_series[nearest->series].points[nearest->point].runId;
  return hoverText(*nearest);
}

void TrendView::labelAxis(QCategoryAxis* axis) const {
  // The build of each run on the axis: the first series' that has it.
  std::vector<QString> builds(m_xRuns.size());
  for (auto d = m_series.rbegin(); d != m_series.rend(); ++d) {
    for (const TrendPoint& p : d->points) {
      if (shown(p)) builds[static_cast<size_t>(xOf(p.runId))] = p.build;
    }
  }
  // Label every run when they fit, else about 12 of them; by build: where it changes.
  const size_t step = std::max<size_t>(1, (m_xRuns.size() + 11) / 12);
  size_t labels = 0;
  for (size_t i = 0; i < m_xRuns.size(); ++i) {
    const bool last = i + 1 == m_xRuns.size();
    if (m_axis == TrendAxis::Run) {
      if (i % step == 0 || last)
        axis->append(QString("#%1").arg(m_xRuns[i]), static_cast<double>(i));
      continue;
    }
    if ((i == 0 || builds[i] != builds[i - 1]) && labels < 24) {
      const QString build = builds[i].isEmpty() ? tr("unknown build") : builds[i];
      axis->append(QString("%1 (#%2)").arg(build).arg(m_xRuns[i]), static_cast<double>(i));
      ++labels;
    }
  }
}

void TrendView::addHoverPoints(size_t series) {
  const TrendData& d = m_series[series];
  for (size_t i = 0; i < d.points.size(); ++i) {
    const TrendPoint& p = d.points[i];
    if (shown(p)) m_hover.push_back({QPointF(xOf(p.runId), p.value), series, i});
  }
}

QString TrendView::hoverText(const Hover& h) const {
  const TrendData& d = m_series[h.series];
  const TrendPoint& p = d.points[h.point];
  const auto num = [&](double v) {
    return d.metric == TrendMetric::kMaxAbsError ? QString::number(v, 'g', 4)
                                                 : QString::number(v, 'f', 3);
  };
  QString text = QString("%1\nrun #%2, %3\n%4: %5 (%6 trials, %7 - %8)")
                     .arg(QString::fromStdString(d.cell.Label()))
                     .arg(p.runId)
                     .arg(p.createdAt, trendMetricTitle(d.metric), num(p.value))
                     .arg(p.trials.size())
                     .arg(num(p.min), num(p.max));
  if (!p.build.isEmpty()) text += tr("\nrunner build %1").arg(p.build);
  if (!p.tags.isEmpty()) text += tr("\ntags: %1").arg(p.tags.join(", "));
  return text;
}

void TrendView::rebuildChart() {
  m_chart->removeAllSeries();
  for (QAbstractAxis* axis : m_chart->axes()) {
    m_chart->removeAxis(axis);
    delete axis;
  }
  m_hover.clear();
  m_xRuns.clear();
  for (const TrendData& d : m_series) {
    for (const TrendPoint& p : d.points) {
      if (shown(p)) m_xRuns.push_back(p.runId);
    }
  }
  std::sort(m_xRuns.begin(), m_xRuns.end());
  m_xRuns.erase(std::unique(m_xRuns.begin(), m_xRuns.end()), m_xRuns.end());
  const TrendMetric metric = m_series.empty() ? m_metric : m_series.front().metric;
  m_chart->setTitle(m_xRuns.empty() ? QString() : trendMetricTitle(metric) + tr(" by run"));
  auto* axisX = new QCategoryAxis;
  axisX->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  axisX->setTitleText(m_axis == TrendAxis::Run ? tr("run") : tr("runner build (first run)"));
  auto* axisY = new QValueAxis;
  axisY->setTitleText(trendMetricTitle(metric));
  m_chart->addAxis(axisX, Qt::AlignBottom);
  m_chart->addAxis(axisY, Qt::AlignLeft);
  if (m_xRuns.empty()) {
    axisX->setRange(0, 1);
    axisY->setRange(0, 1);
    return;
  }
  labelAxis(axisX);
  m_xView = viewRange();
  double yMin = std::numeric_limits<double>::max();
  double yMax = std::numeric_limits<double>::lowest();
  addSeriesLines(&yMin, &yMax);
  const double pad = yMax > yMin ? (yMax - yMin) * 0.15 : std::max(std::fabs(yMax) * 0.1, 1e-6);
  yMin = std::max(0.0, yMin - pad);
  yMax += pad;
  if (m_series.size() == 1) {
    addChangeSeries(yMin, yMax);
    addTagSeries();
  }
  axisX->setRange(m_xView.first, m_xView.second);
  axisX->setStartValue(-0.5);
  axisY->setRange(yMin, yMax);
  axisY->applyNiceNumbers();
}

std::pair<double, double> TrendView::viewRange() const {
  const std::pair<double, double> all(-0.5, static_cast<double>(m_xRuns.size()) - 0.5);
  if (m_zoomFirst <= 0) return all;
  // The runs of the zoom that are on the axis, if any.
  const auto lo = std::lower_bound(m_xRuns.begin(), m_xRuns.end(), m_zoomFirst);
  const auto hi = std::upper_bound(m_xRuns.begin(), m_xRuns.end(), m_zoomLast);
  if (lo >= hi) return all;
  return {static_cast<double>(lo - m_xRuns.begin()) - 0.5,
          static_cast<double>(hi - m_xRuns.begin()) - 0.5};
}

bool TrendView::inView(double x) const { return x >= m_xView.first && x <= m_xView.second; }

// One cell: its median line, the trials' band and dots. Several: one median
// line each, named by its cell.
void TrendView::addSeriesLines(double* yMin, double* yMax) {
  QAbstractAxis* axisX = m_chart->axes(Qt::Horizontal).value(0);
  QAbstractAxis* axisY = m_chart->axes(Qt::Vertical).value(0);
  const auto add = [&](QAbstractSeries* s) {
    m_chart->addSeries(s);
    s->attachAxis(axisX);
    s->attachAxis(axisY);
  };
  for (size_t k = 0; k < m_series.size(); ++k) {
    const TrendData& d = m_series[k];
    const QString name = QString::fromStdString(d.cell.Label());
    auto* medians = new QLineSeries;
    auto* upper = new QLineSeries;
    auto* lower = new QLineSeries;
    auto* trials = new QScatterSeries;
    for (const TrendPoint& p : d.points) {
      if (!shown(p)) continue;
      const double x = xOf(p.runId);
      medians->append(x, p.value);
      upper->append(x, p.max);
      lower->append(x, p.min);
      for (double t : p.trials) trials->append(x, t);
      if (!inView(x)) continue;  // the y axis fits the runs in view
      *yMin = std::min(*yMin, m_series.size() == 1 ? p.min : p.value);
      *yMax = std::max(*yMax, m_series.size() == 1 ? p.max : p.value);
    }
    addHoverPoints(k);
    // Several long series: lines only (the hover still finds every point).
    medians->setPointsVisible(m_series.size() == 1 || medians->count() <= 200);
    medians->setMarkerSize(m_series.size() == 1 ? 8 : 6);
    QPen pen(kSeriesColours[k % std::size(kSeriesColours)]);
    pen.setWidthF(2);
    medians->setPen(pen);
    medians->setColor(pen.color());
    connect(medians, &QLineSeries::clicked, this, &TrendView::pointClicked);
    if (m_series.size() > 1) {
      medians->setName(name);
      add(medians);
      delete upper;
      delete lower;
      delete trials;
      continue;
    }
    for (const TrendChange& c : d.changes) {
      if (!std::binary_search(m_xRuns.begin(), m_xRuns.end(), c.runId) || !inView(xOf(c.runId))) {
        continue;
      }
      *yMin = std::min({*yMin, c.before, c.after});
      *yMax = std::max({*yMax, c.before, c.after});
    }
    auto* band = new QAreaSeries(upper, lower);
    // QAreaSeries does not own its bounding lines: they go with it.
    upper->setParent(band);
    lower->setParent(band);
    band->setName(tr("trial min-max"));
    band->setColor(QColor(70, 130, 180, 60));
    band->setBorderColor(QColor(70, 130, 180, 120));
    trials->setName(tr("trial"));
    trials->setMarkerSize(6);
    trials->setColor(QColor(120, 120, 120, 160));
    trials->setBorderColor(Qt::transparent);
    medians->setName(tr("median of ok trials"));
    for (QAbstractSeries* s : std::initializer_list<QAbstractSeries*>{band, trials, medians})
      add(s);
    connect(trials, &QScatterSeries::clicked, this, &TrendView::pointClicked);
  }
}

void TrendView::addChangeSeries(double yMin, double yMax) {
  const TrendData& d = m_series.front();
  QAbstractAxis* axisX = m_chart->axes(Qt::Horizontal).value(0);
  QAbstractAxis* axisY = m_chart->axes(Qt::Vertical).value(0);
  // A level runs from its change (or the first run shown) to the next change
  // (or the last run shown); a change outside the dates shown is not drawn.
  double segmentStart = -0.4;
  for (size_t k = 0; k < d.changes.size(); ++k) {
    const TrendChange& c = d.changes[k];
    if (!std::binary_search(m_xRuns.begin(), m_xRuns.end(), c.runId)) continue;
    const double x = xOf(c.runId) - 0.5;
    double segmentEnd = static_cast<double>(m_xRuns.size()) - 0.6;
    for (size_t n = k + 1; n < d.changes.size(); ++n) {
      if (std::binary_search(m_xRuns.begin(), m_xRuns.end(), d.changes[n].runId)) {
        segmentEnd = xOf(d.changes[n].runId) - 0.6;
        break;
      }
    }
    const QColor color = c.regression ? QColor(200, 30, 30) : QColor(20, 140, 60);
    auto* vertical = new QLineSeries;
    // Past both ends: the axis range (made nice afterwards) clips it to the plot.
    vertical->append(x, yMin - (yMax - yMin) * 10);
    vertical->append(x, yMax + (yMax - yMin) * 10);
    vertical->setName(QString("run #%1: %2%3% (%4 -> %5)")
                          .arg(c.runId)
                          .arg(c.changePct >= 0 ? "+" : "")
                          .arg(c.changePct, 0, 'f', 1)
                          .arg(c.before, 0, 'g', 4)
                          .arg(c.after, 0, 'g', 4));
    QPen pen(color);
    pen.setWidthF(2);
    pen.setStyle(Qt::DashLine);
    vertical->setPen(pen);
    auto* before = new QLineSeries;
    before->append(segmentStart, c.before);
    before->append(x, c.before);
    auto* after = new QLineSeries;
    after->append(x, c.after);
    after->append(segmentEnd, c.after);
    QPen level(color);
    level.setWidthF(1.5);
    level.setStyle(Qt::DotLine);
    before->setPen(level);
    after->setPen(level);
    for (QLineSeries* s : {vertical, before, after}) {
      m_chart->addSeries(s);
      s->attachAxis(axisX);
      s->attachAxis(axisY);
    }
    hideFromLegend(m_chart, before);
    hideFromLegend(m_chart, after);
    segmentStart = x + 0.1;
  }
}

void TrendView::addTagSeries() {
  const TrendData& d = m_series.front();
  QAbstractAxis* axisX = m_chart->axes(Qt::Horizontal).value(0);
  QAbstractAxis* axisY = m_chart->axes(Qt::Vertical).value(0);
  bool first = true;
  for (size_t i = 0; i < d.points.size(); ++i) {
    const TrendPoint& p = d.points[i];
    if (p.tags.isEmpty() || !shown(p)) continue;
    auto* marker = new QScatterSeries;
    marker->append(xOf(p.runId), p.value);
    marker->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    marker->setMarkerSize(13);
    marker->setColor(QColor(230, 160, 0));
    marker->setBorderColor(Qt::black);
    marker->setName(tr("tagged run"));
    // A format without @-fields is drawn as it is: the run's tag names.
    marker->setPointLabelsFormat(p.tags.join(", "));
    marker->setPointLabelsVisible(true);
    marker->setPointLabelsClipping(false);
    QFont f = marker->pointLabelsFont();
    f.setBold(true);
    marker->setPointLabelsFont(f);
    m_chart->addSeries(marker);
    marker->attachAxis(axisX);
    marker->attachAxis(axisY);
    connect(marker, &QScatterSeries::clicked, this, &TrendView::pointClicked);
    if (!first) hideFromLegend(m_chart, marker);
    first = false;
  }
}

void TrendView::pointClicked(const QPointF& point) {
  const long i = std::lround(point.x());
  if (i < 0 || static_cast<size_t>(i) >= m_xRuns.size()) return;
  emit openRun(m_xRuns[static_cast<size_t>(i)]);
}

}  // namespace dfarm::gui
