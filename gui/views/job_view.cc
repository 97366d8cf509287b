#include "gui/views/job_view.h"

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QPlainTextEdit>
#include <QScatterSeries>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "gui/store_loader.h"
#include "reports/report.h"

namespace dfarm::gui {
namespace {

QTableView* makeTable(QAbstractItemModel* model, QWidget* parent) {
  auto* t = new QTableView(parent);
  t->setModel(model);
  t->verticalHeader()->hide();
  t->horizontalHeader()->setStretchLastSection(true);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setWordWrap(false);
  return t;
}

QWidget* boxed(const QString& title, QWidget* content, QWidget* extra = nullptr) {
  auto* box = new QGroupBox(title);
  auto* l = new QVBoxLayout(box);
  l->setContentsMargins(4, 4, 4, 4);
  if (extra) l->addWidget(extra);
  l->addWidget(content);
  return box;
}

QChartView* makeChartView(QChart* chart, QWidget* parent) {
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setMargins(QMargins(4, 4, 4, 4));
  auto* v = new QChartView(chart, parent);
  v->setRenderHint(QPainter::Antialiasing);
  v->setMinimumHeight(220);
  return v;
}

void clearChart(QChart* chart) {
  chart->removeAllSeries();
  for (QAbstractAxis* axis : chart->axes()) {
    chart->removeAxis(axis);
    delete axis;
  }
}

void attach(QChart* chart, QAbstractSeries* s, QAbstractAxis* x, QAbstractAxis* y) {
  chart->addSeries(s);
  s->attachAxis(x);
  s->attachAxis(y);
}

QString esc(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

}  // namespace

JobView::JobView(QWidget* parent) : View(parent) {
  m_header = new QLabel(this);
  m_header->setTextFormat(Qt::RichText);
  m_header->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_header->setWordWrap(true);
  m_flags = new QLabel(this);
  m_flags->setWordWrap(true);
  m_flags->setStyleSheet("color: #a05000");
  m_flags->hide();
  m_message = new QLabel(this);
  m_message->setWordWrap(true);
  m_message->setStyleSheet("color: darkred");
  m_message->hide();

  m_histogram = new QChart;
  m_histogramView = makeChartView(m_histogram, this);
  m_timeline = new QChart;
  m_timelineView = makeChartView(m_timeline, this);

  m_accuracy = new AccuracyModel(this);
  m_placement = new PlacementModel(this);
  m_profile = new ProfileModel(this);
  m_telemetry = new TelemetryModel(this);
  m_accuracyTable = makeTable(m_accuracy, this);
  m_placementTable = makeTable(m_placement, this);
  m_telemetryTable = makeTable(m_telemetry, this);
  m_placementSummary = new QLabel(this);
  m_profileTable = makeTable(m_profile, this);
  m_profileTable->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_profileSummary = new QLabel(this);
  m_profileBox = boxed(tr("Per-op profile"), m_profileTable, m_profileSummary);
  m_profileBox->hide();
  m_stderr = new QPlainTextEdit(this);
  m_stderr->setReadOnly(true);
  m_stderr->setFont(QFont("monospace"));
  m_stderrBox = boxed(tr("Runner stderr (tail)"), m_stderr);
  m_stderrBox->hide();

  auto* charts = new QSplitter(Qt::Horizontal);
  charts->addWidget(m_histogramView);
  charts->addWidget(m_timelineView);
  m_telemetryTable->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  auto* tables = new QSplitter(Qt::Horizontal);
  tables->addWidget(boxed(tr("Placement per node"), m_placementTable, m_placementSummary));
  tables->addWidget(m_profileBox);
  tables->addWidget(boxed(tr("Device before / after"), m_telemetryTable));
  tables->addWidget(m_stderrBox);
  tables->setStretchFactor(0, 3);
  tables->setStretchFactor(1, 3);
  tables->setStretchFactor(2, 3);
  tables->setStretchFactor(3, 3);
  auto* body = new QSplitter(Qt::Vertical, this);
  body->addWidget(charts);
  body->addWidget(boxed(tr("Accuracy per output"), m_accuracyTable));
  body->addWidget(tables);
  body->setStretchFactor(0, 4);
  body->setStretchFactor(1, 1);
  body->setStretchFactor(2, 3);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_header);
  layout->addWidget(m_flags);
  layout->addWidget(m_message);
  layout->addWidget(body, 1);
}

View* MakeJobView(QWidget* parent) { return new JobView(parent); }

void JobView::open(const Location& where) { showJob(where.jobId); }

void JobView::showJob(qint64 jobId) {
  m_jobId = jobId;
  load();
}

void JobView::refresh() {
  if (m_jobId > 0) load();
}

QWidget* JobView::exportableChart() const { return m_histogramView; }

QString JobView::headerText() const { return m_header->text(); }
QString JobView::stderrText() const {
  return m_stderrBox->isHidden() ? "" : m_stderr->toPlainText();
}
QString JobView::profileTitle() const {
  return m_profileBox->isHidden() ? "" : m_profileSummary->text();
}

void JobView::showProfile(const JobData& d) {
  m_profile->setProfile(d.profile);
  m_profileBox->setVisible(d.profile.has_value());
  if (!d.profile) return;
  double total_us = 0;
  for (const store::ProfileOp& o : d.profile->by_op) total_us += o.total_us;
  m_profileSummary->setText(tr("%1 op type(s), %2 ms per run (mean of %3 runs)")
                                .arg(d.profile->by_op.size())
                                .arg(total_us / 1000.0, 0, 'f', 3)
                                .arg(d.profile->runs));
  m_profileTable->resizeColumnsToContents();
}

QString JobView::message() const { return m_message->isHidden() ? "" : m_message->text(); }

void JobView::load() {
  markLoading();
  const quint64 generation = ++m_generation;
  const qint64 jobId = m_jobId;
  LoadAsync<JobData>(
      database(), this, [jobId](store::Reader& s) { return loadJob(s, jobId); },
      [this, generation](const Result<JobData>& data) {
        if (generation == m_generation) showData(data);
      });
}

void JobView::showData(const Result<JobData>& data) {
  if (!data) {
    m_message->setText(
        tr("Cannot show job %1: %2").arg(m_jobId).arg(QString::fromStdString(data.message())));
    m_message->show();
    m_header->clear();
    m_flags->hide();
    m_accuracy->setAccuracy(std::nullopt);
    m_placement->setPlacement(std::nullopt);
    m_profile->setProfile(std::nullopt);
    m_profileBox->hide();
    m_telemetry->setTelemetry({}, std::nullopt, std::nullopt);
    m_stderrBox->hide();
    clearChart(m_histogram);
    clearChart(m_timeline);
  } else {
    m_message->hide();
    const JobData& d = *data;
    showHeader(d);
    m_accuracy->setAccuracy(d.accuracy);
    m_placement->setPlacement(d.placement);
    m_placementSummary->setText(
        d.job.placement ? tr("%1 partition(s); %2 of %3 nodes delegated (%4), %5 on cpu of which "
                             "%6 folded at load")
                              .arg(d.job.placement->partitions)
                              .arg(d.job.placement->delegated_nodes)
                              .arg(d.job.placement->nodes)
                              .arg(QString::fromStdString(d.job.placement->delegates))
                              .arg(d.job.placement->cpu_nodes)
                              .arg(d.job.placement->folded_nodes)
                        : tr("no placement reported"));
    showProfile(d);
    m_accuracyTable->resizeColumnsToContents();
    m_placementTable->resizeColumnsToContents();
    m_telemetry->setTelemetry(d.telemetry, d.detail ? d.detail->state_before_json : std::nullopt,
                              d.detail ? d.detail->state_after_json : std::nullopt);
    const bool failed = d.job.status != store::kJobOk && store::IsFinalJobStatus(d.job.status);
    const QString tail = d.detail ? QString::fromStdString(d.detail->stderr_tail) : QString();
    m_stderr->setPlainText(tail.isEmpty() ? tr("(the runner wrote nothing to stderr)") : tail);
    m_stderrBox->setVisible(failed);
    buildHistogram(d);
    buildTimeline(d);
  }
  const QString error = data ? QString() : m_message->text();
  QTimer::singleShot(0, this, [this, error] { markReady(error); });
}

void JobView::showHeader(const JobData& d) {
  const store::JobRow& j = d.job;
  const bool ok = j.status == store::kJobOk;
  QString options = j.delegate_options.empty() ? QString() : " [" + esc(j.delegate_options) + "]";
  QString h = QString(
                  "<b>Job %1</b> of run %2 &nbsp; <b>%3</b> (%4) &nbsp; %5%6 &nbsp; x%7 "
                  "threads &nbsp; @%8 &nbsp; trial %9")
                  .arg(j.id)
                  .arg(j.run_id)
                  .arg(esc(j.model), esc(j.model_sha256.substr(0, 12)), esc(j.delegate), options)
                  .arg(j.num_threads)
                  .arg(esc(j.device))
                  .arg(j.trial);
  const std::string kind = j.runner_kind.empty() ? "dfarm" : j.runner_kind;
  h += QString("<br>runner <b>%1</b> (%2%3) build %4 &nbsp; status <b style='color:%5'>%6</b>")
           .arg(j.runner.empty() ? tr("(default)") : esc(j.runner), esc(kind),
                j.runner_version.empty() ? QString() : " " + esc(j.runner_version),
                j.runner_sha256.empty() ? tr("(unknown)") : esc(j.runner_sha256),
                ok ? "darkgreen" : "darkred", esc(j.status));
  if (j.metrics) {
    // A peak RSS of 0 is unknown (a tool's log without one): said so, not "0.0 MiB".
    const QString rss =
        j.metrics->peak_rss_bytes > 0
            ? QString::number(j.metrics->peak_rss_bytes / (1024.0 * 1024.0), 'f', 1) + " MiB"
            : tr("unknown");
    h += QString(" &nbsp; init %1 ms, first %2 ms, mean %3 ms over %4 runs, peak RSS %5")
             .arg(j.metrics->init_us / 1000, 0, 'f', 2)
             .arg(j.metrics->first_us / 1000, 0, 'f', 2)
             .arg(j.metrics->mean_us / 1000, 0, 'f', 3)
             .arg(j.metrics->num_runs)
             .arg(rss);
    // A delegate that compiles programs (gpu) splits init.
    if (j.metrics->init_cold_us || j.metrics->init_warm_us) {
      auto ms = [](const std::optional<double>& us) {
        return us ? QString::number(*us / 1000, 'f', 2) + " ms" : QString("–");
      };
      h += QString(
               "<br>delegate init: cold (compiling) <b>%1</b>, warm (serialized cache) "
               "<b>%2</b>")
               .arg(ms(j.metrics->init_cold_us), ms(j.metrics->init_warm_us));
    }
  }
  if (d.task) {
    // Task accuracy on the model's labelled set (docs/sweeps.md).
    h += tr("<br>task accuracy on %1 (%2 images):").arg(esc(d.task->dataset)).arg(d.task->images);
    for (const store::TaskMetric& m : d.task->metrics) {
      const QString name = QString::fromStdString(reports::TaskMetricLabel(m.name));
      h += QString(" &nbsp; %1 <b>%2</b>").arg(name, esc(reports::TaskMetricText(m)));
    }
  }
  if (!j.error.empty()) h += "<br><span style='color:darkred'>" + esc(j.error) + "</span>";
  m_header->setText(h);
  QStringList flags;
  if (j.noisy) flags << tr("noisy");
  if (j.started_hot) flags << tr("started hot");
  if (j.throttled) flags << tr("throttled");
  if (!j.moved_from.empty()) flags << tr("moved from %1").arg(QString::fromStdString(j.moved_from));
  if (!j.state_note.empty()) flags << QString::fromStdString(j.state_note);
  m_flags->setText(tr("Device state: ") + flags.join("; "));
  m_flags->setVisible(!flags.isEmpty());
}

void JobView::buildHistogram(const JobData& d) {
  clearChart(m_histogram);
  const std::vector<HistogramBin> bins = latencyHistogram(d.samples_us);
  m_histogram->setTitle(tr("Latency histogram (%1 samples)").arg(d.samples_us.size()));
  auto* x = new QValueAxis;
  x->setTitleText(tr("latency (ms)"));
  auto* y = new QValueAxis;
  y->setTitleText(tr("runs"));
  y->setLabelFormat("%d");
  m_histogram->addAxis(x, Qt::AlignBottom);
  m_histogram->addAxis(y, Qt::AlignLeft);
  if (bins.empty()) {
    m_histogram->setTitle(tr("Latency histogram: no samples"));
    x->setRange(0, 1);
    y->setRange(0, 1);
    return;
  }
  auto* upper = new QLineSeries;
  auto* lower = new QLineSeries;
  int top = 0;
  double lo = bins.front().lo_us / 1000, hi = bins.back().hi_us / 1000;
  if (hi <= lo) {  // every sample equal: one bar 1% wide
    lo -= std::max(lo * 0.01, 0.001);
    hi += std::max(hi * 0.01, 0.001);
  }
  for (const HistogramBin& b : bins) {
    const double a = bins.size() == 1 ? lo : b.lo_us / 1000;
    const double e = bins.size() == 1 ? hi : b.hi_us / 1000;
    upper->append(a, 0);
    upper->append(a, b.count);
    upper->append(e, b.count);
    upper->append(e, 0);
    top = std::max(top, b.count);
  }
  lower->append(lo, 0);
  lower->append(hi, 0);
  auto* area = new QAreaSeries(upper, lower);
  // QAreaSeries does not own its bounding lines: they go with it.
  upper->setParent(area);
  lower->setParent(area);
  area->setName(tr("runs per bin"));
  area->setColor(QColor(70, 130, 180, 170));
  area->setBorderColor(QColor(25, 90, 160));
  attach(m_histogram, area, x, y);
  m_histogram->legend()->hide();
  const double pad = (hi - lo) * 0.03;
  x->setRange(lo - pad, hi + pad);
  // Whole-number ticks: five steps of a whole number of runs.
  const int step = std::max(1, (top + top / 10 + 4) / 5);
  y->setRange(0, step * 5);
  y->setTickCount(6);
}

void JobView::buildSustainedTimeline(const JobData& d) {
  const store::JobSustained& c = *d.sustained;
  m_timeline->setTitle(tr("Latency over time (sustained %1 s)").arg(c.secs, 0, 'f', 1));
  m_timeline->setTitleBrush(QPalette().text());
  auto* x = new QValueAxis;
  x->setTitleText(tr("time since the first measured run (s)"));
  auto* y = new QValueAxis;
  y->setTitleText(tr("p50 (ms)"));
  y->setTruncateLabels(false);  // Qt Charts 6.4 elides them to "..." here
  auto* p50 = new QLineSeries;
  p50->setName(tr("p50 latency per %1 ms window").arg(c.window_ms, 0, 'f', 0));
  double lo = c.windows.front().p50_us / 1000, hi = lo, t_max = c.secs;
  for (const store::SustainedWindow& w : c.windows) {
    const double t = (w.t_ms + c.window_ms / 2) / 1000;
    p50->append(t, w.p50_us / 1000);
    lo = std::min(lo, w.p50_us / 1000);
    hi = std::max(hi, w.p50_us / 1000);
    t_max = std::max(t_max, t);
  }
  // The range before the axis joins the chart: set after, Qt Charts keeps
  // the label width of the old range and elides the labels.
  const double pad = hi > lo ? (hi - lo) * 0.1 : hi * 0.05 + 0.001;
  y->setRange(std::max(0.0, lo - pad), hi + pad);
  y->applyNiceNumbers();
  y->setLabelFormat(hi + pad >= 10 ? "%.1f" : "%.3f");
  m_timeline->addAxis(x, Qt::AlignBottom);
  m_timeline->addAxis(y, Qt::AlignLeft);
  attach(m_timeline, p50, x, y);
  auto* temp = new QLineSeries;
  temp->setName(tr("hottest thermal zone (C)"));
  for (const auto& [t, celsius] : reports::HottestZoneOverTime(d.telemetry)) {
    temp->append(t, celsius);
    t_max = std::max(t_max, t);
  }
  if (temp->count() >= 2) {
    auto* axis = new QValueAxis;
    axis->setTitleText(tr("C"));
    axis->setTruncateLabels(false);
    m_timeline->addAxis(axis, Qt::AlignRight);
    QPen pen(QColor(217, 130, 43));
    pen.setStyle(Qt::DashLine);
    temp->setPen(pen);
    attach(m_timeline, temp, x, axis);
    axis->applyNiceNumbers();
  } else {
    delete temp;
  }
  x->setRange(0, t_max);
}

void JobView::buildTimeline(const JobData& d) {
  clearChart(m_timeline);
  if (d.sustained && !d.sustained->windows.empty()) {
    buildSustainedTimeline(d);
    return;
  }
  QString title = tr("Samples in run order");
  if (d.job.started_hot) title += tr(" - started hot");
  if (d.job.throttled) title += tr(" - throttled");
  m_timeline->setTitle(title);
  if (d.job.started_hot || d.job.throttled)
    m_timeline->setTitleBrush(QColor(160, 60, 0));
  else
    m_timeline->setTitleBrush(QPalette().text());
  auto* x = new QValueAxis;
  x->setTitleText(tr("measured run (0 = first run)"));
  x->setLabelFormat("%d");
  auto* y = new QValueAxis;
  y->setTitleText(tr("latency (ms)"));
  y->setTruncateLabels(false);  // Qt Charts 6.4 elides them to "..." on narrow ranges
  m_timeline->addAxis(x, Qt::AlignBottom);
  m_timeline->addAxis(y, Qt::AlignLeft);
  const size_t n = d.samples_us.size();
  if (n == 0) {
    m_timeline->setTitle(tr("Samples: none recorded"));
    x->setRange(0, 1);
    y->setRange(0, 1);
    return;
  }
  auto* samples = new QLineSeries;
  samples->setName(tr("measured run"));
  samples->setPointsVisible(n <= 200);
  double lo = d.samples_us[0], hi = d.samples_us[0];
  for (size_t i = 0; i < n; ++i) {
    samples->append(static_cast<double>(i + 1), d.samples_us[i] / 1000);
    lo = std::min(lo, d.samples_us[i]);
    hi = std::max(hi, d.samples_us[i]);
  }
  lo /= 1000;
  hi /= 1000;
  double yTop = hi + (hi - lo) * 0.15 + hi * 0.02;
  attach(m_timeline, samples, x, y);
  if (d.job.metrics && d.job.metrics->first_us > 0) {
    const double first = d.job.metrics->first_us / 1000;
    // A first run far above the rest is drawn at the top, its value in the legend.
    const double cap = hi * 3 + (hi - lo) * 2;
    auto* marker = new QScatterSeries;
    marker->setName(first > cap ? tr("first run %1 ms (off scale)").arg(first, 0, 'f', 2)
                                : tr("first run %1 ms").arg(first, 0, 'f', 2));
    marker->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    marker->setMarkerSize(10);
    marker->setColor(QColor(200, 30, 30));
    marker->append(0, std::min(first, cap));
    yTop = std::max(yTop, std::min(first, cap) * 1.05);
    attach(m_timeline, marker, x, y);
  }
  if (d.job.metrics && d.job.metrics->warmup_mean_us > 0) {
    const double w = d.job.metrics->warmup_mean_us / 1000;
    auto* warm = new QLineSeries;
    warm->setName(tr("warm-up mean %1 ms").arg(w, 0, 'f', 2));
    warm->append(0, w);
    warm->append(static_cast<double>(n), w);
    QPen pen(QColor(230, 140, 0));
    pen.setStyle(Qt::DashLine);
    pen.setWidthF(1.5);
    warm->setPen(pen);
    yTop = std::max(yTop, w * 1.05);
    lo = std::min(lo, w);
    attach(m_timeline, warm, x, y);
  }
  x->setRange(-0.5, static_cast<double>(n) + 0.5);
  x->setTickType(QValueAxis::TicksDynamic);
  x->setTickAnchor(0);
  double interval = 1;  // 1, 2, 5, 10, 20, 50, ...: about ten ticks
  for (int k = 0; static_cast<double>(n) / interval > 10; ++k) interval *= (k % 3 == 1) ? 2.5 : 2;
  x->setTickInterval(interval);
  y->setRange(std::max(0.0, lo - (hi - lo) * 0.15 - lo * 0.02), yTop);
  y->applyNiceNumbers();
}

}  // namespace dfarm::gui
