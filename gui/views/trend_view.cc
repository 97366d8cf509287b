#include "gui/views/trend_view.h"

#include <QAreaSeries>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "gui/store_loader.h"

namespace dfarm::gui {
namespace {

constexpr TrendMetric kMetrics[] = {TrendMetric::kMean, TrendMetric::kP50, TrendMetric::kP90,
                                    TrendMetric::kPeakRss, TrendMetric::kMaxAbsError};

void hideFromLegend(QChart* chart, QAbstractSeries* series) {
  for (QLegendMarker* m : chart->legend()->markers(series)) m->setVisible(false);
}

}  // namespace

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
  m_chartView = new QChartView(m_chart, this);
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
  connect(m_table, &QTableView::activated, this, [this](const QModelIndex& index) {
    emit openRun(index.data(TrendModel::RunIdRole).toLongLong());
  });

  auto* top = new QHBoxLayout;
  top->addWidget(m_title, 1);
  top->addWidget(new QLabel(tr("Metric:"), this));
  top->addWidget(m_metricBox);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(m_chartView);
  splitter->addWidget(m_table);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(m_message);
  layout->addWidget(splitter, 1);
}

View* MakeTrendView(QWidget* parent) { return new TrendView(parent); }

void TrendView::open(const Location& where) { showCell(where.cell); }

void TrendView::showCell(const store::Cell& cell) {
  m_cell = cell;
  m_hasCell = true;
  m_title->setText(QString::fromStdString(cell.Label()));
  load();
}

void TrendView::setMetric(TrendMetric metric) {
  m_metric = metric;
  m_metricBox->setCurrentIndex(m_metricBox->findData(static_cast<int>(metric)));
  if (m_hasCell) load();
}

void TrendView::refresh() {
  if (m_hasCell) load();
}

QWidget* TrendView::exportableChart() const { return m_chartView; }

QString TrendView::message() const { return m_message->isHidden() ? "" : m_message->text(); }

void TrendView::load() {
  markLoading();
  const quint64 generation = ++m_generation;
  const store::Cell cell = m_cell;
  const TrendMetric metric = m_metric;
  LoadAsync<TrendData>(
      database(), this, [cell, metric](store::Reader& s) { return loadTrend(s, cell, metric); },
      [this, generation](const Result<TrendData>& trend) {
        if (generation == m_generation) showTrend(trend);
      });
}

void TrendView::showTrend(const Result<TrendData>& trend) {
  if (!trend) {
    m_message->setText(
        tr("Cannot show the trend: %1").arg(QString::fromStdString(trend.message())));
    m_message->setStyleSheet("color: darkred");
    m_message->show();
    m_model->setTrend({});
  } else {
    m_model->setTrend(*trend);
    if (trend->points.empty()) {
      m_message->setText(tr("No ok trial of this cell has a %1 yet.")
                             .arg(trendMetricTitle(trend->metric).section(" (", 0, 0)));
      m_message->setStyleSheet("");
      m_message->show();
    } else {
      m_message->hide();
    }
  }
  m_table->resizeColumnsToContents();
  rebuildChart();
  // Ready after the chart painted: the next event loop turn.
  QTimer::singleShot(0, this, [this] { markReady(); });
}

void TrendView::rebuildChart() {
  m_chart->removeAllSeries();
  for (QAbstractAxis* axis : m_chart->axes()) {
    m_chart->removeAxis(axis);
    delete axis;
  }
  const TrendData& d = m_model->trend();
  m_chart->setTitle(d.points.empty() ? QString() : trendMetricTitle(d.metric) + tr(" by run"));
  auto* axisX = new QCategoryAxis;
  axisX->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  axisX->setTitleText(tr("run"));
  auto* axisY = new QValueAxis;
  axisY->setTitleText(trendMetricTitle(d.metric));
  m_chart->addAxis(axisX, Qt::AlignBottom);
  m_chart->addAxis(axisY, Qt::AlignLeft);
  if (d.points.empty()) {
    axisX->setRange(0, 1);
    axisY->setRange(0, 1);
    return;
  }
  double yMin = d.points[0].min, yMax = d.points[0].max;
  auto* upper = new QLineSeries;
  auto* lower = new QLineSeries;
  auto* trials = new QScatterSeries;
  auto* medians = new QLineSeries;
  // Label every run when they fit, else about 12 of them.
  const size_t step = std::max<size_t>(1, (d.points.size() + 11) / 12);
  for (size_t i = 0; i < d.points.size(); ++i) {
    const TrendPoint& p = d.points[i];
    const double x = static_cast<double>(i);
    upper->append(x, p.max);
    lower->append(x, p.min);
    for (double t : p.trials) trials->append(x, t);
    medians->append(x, p.value);
    yMin = std::min(yMin, p.min);
    yMax = std::max(yMax, p.max);
    if (i % step == 0 || i + 1 == d.points.size()) {
      axisX->append(QString("#%1").arg(p.runId), x);
    }
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
  medians->setPointsVisible(true);
  medians->setMarkerSize(8);
  QPen pen(QColor(25, 90, 160));
  pen.setWidthF(2);
  medians->setPen(pen);
  for (const TrendChange& c : d.changes) {
    yMin = std::min({yMin, c.before, c.after});
    yMax = std::max({yMax, c.before, c.after});
  }
  const double pad = yMax > yMin ? (yMax - yMin) * 0.15 : std::max(std::fabs(yMax) * 0.1, 1e-6);
  yMin = std::max(0.0, yMin - pad);
  yMax += pad;
  for (QAbstractSeries* s : std::initializer_list<QAbstractSeries*>{band, trials, medians}) {
    m_chart->addSeries(s);
    s->attachAxis(axisX);
    s->attachAxis(axisY);
  }
  connect(medians, &QLineSeries::clicked, this, &TrendView::pointClicked);
  connect(trials, &QScatterSeries::clicked, this, &TrendView::pointClicked);
  addChangeSeries(yMin, yMax);
  addTagSeries();
  const double n = static_cast<double>(d.points.size());
  axisX->setRange(-0.5, n - 0.5);
  axisX->setStartValue(-0.5);
  axisY->setRange(yMin, yMax);
  axisY->applyNiceNumbers();
}

void TrendView::addChangeSeries(double yMin, double yMax) {
  const TrendData& d = m_model->trend();
  QAbstractAxis* axisX = m_chart->axes(Qt::Horizontal).value(0);
  QAbstractAxis* axisY = m_chart->axes(Qt::Vertical).value(0);
  size_t segmentStart = 0;
  for (size_t k = 0; k < d.changes.size(); ++k) {
    const TrendChange& c = d.changes[k];
    const size_t segmentEnd =
        k + 1 < d.changes.size() ? d.changes[k + 1].index : d.points.size();  // exclusive
    const QColor color = c.regression ? QColor(200, 30, 30) : QColor(20, 140, 60);
    auto* vertical = new QLineSeries;
    const double x = static_cast<double>(c.index) - 0.5;
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
    before->append(static_cast<double>(segmentStart) - 0.4, c.before);
    before->append(x, c.before);
    auto* after = new QLineSeries;
    after->append(x, c.after);
    after->append(static_cast<double>(segmentEnd) - 0.6, c.after);
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
    segmentStart = c.index;
  }
}

void TrendView::addTagSeries() {
  const TrendData& d = m_model->trend();
  QAbstractAxis* axisX = m_chart->axes(Qt::Horizontal).value(0);
  QAbstractAxis* axisY = m_chart->axes(Qt::Vertical).value(0);
  bool first = true;
  for (size_t i = 0; i < d.points.size(); ++i) {
    const TrendPoint& p = d.points[i];
    if (p.tags.isEmpty()) continue;
    auto* marker = new QScatterSeries;
    marker->append(static_cast<double>(i), p.value);
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
  const auto& points = m_model->trend().points;
  const long i = std::lround(point.x());
  if (i < 0 || static_cast<size_t>(i) >= points.size()) return;
  emit openRun(points[static_cast<size_t>(i)].runId);
}

}  // namespace dfarm::gui
