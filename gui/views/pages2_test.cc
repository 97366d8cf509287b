// The Overview and Fleet pages, the trend of several cells, and the views'
// dfarm:// links, over a real SQLite store in a temporary folder, without a
// display.
#include <gtest/gtest.h>

#include <QApplication>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QSignalSpy>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>
#include <QWheelEvent>

#include "gui/main_window.h"
#include "gui/views/fleet_view.h"
#include "gui/views/overview_view.h"
#include "gui/views/trend_view.h"
#include "gui/views/view_testing.h"

namespace dfarm::gui {
namespace {

using viewtest::WaitReady;

const std::string kPagesSha(64, 'b');

store::JobRow PagesJob(const std::string& delegate, int64_t trial) {
  store::JobRow job;
  job.job_key = "face/" + delegate + "/" + std::to_string(trial);
  job.model = "face.tflite";
  job.model_path = "/models/face.tflite";
  job.model_sha256 = kPagesSha;
  job.delegate = delegate;
  job.device = "local";
  job.num_threads = 4;
  job.trial = trial;
  job.runner_sha256 = std::string(64, 'c');
  return job;
}

store::JobOutcome PagesOk(double p50_us) {
  store::JobOutcome ok;
  ok.status = "ok";
  ok.exit_code = 0;
  ok.runner_version = "2.16.1";
  store::JobMetrics m;
  m.mean_us = p50_us;
  m.p50_us = p50_us;
  m.p90_us = p50_us * 1.1;
  m.num_runs = 3;
  ok.metrics = m;
  return ok;
}

// 12 runs: xnnpack (3 trials, p50 steps from 10 ms to 13 ms at the 7th
// run), cpu (flat 50 ms) and, in the last run, a crashed gpu job.
class PageViewsTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("farm.db");
    auto opened = store::OpenSqliteStore(db_.toStdString());
    ASSERT_TRUE(opened.ok()) << opened.message();
    auto& s = *opened;
    for (int r = 0; r < 12; ++r) {
      auto run = s->CreateRun("nightly", "{}");
      ASSERT_TRUE(run.ok()) << run.message();
      runs_.push_back(*run);
      auto ids = s->AddJobs(*run, {PagesJob("xnnpack", 0), PagesJob("xnnpack", 1),
                                   PagesJob("xnnpack", 2), PagesJob("cpu", 0)});
      ASSERT_TRUE(ids.ok()) << ids.message();
      const double level = r < 6 ? 10000 : 13000;
      for (int t = 0; t < 3; ++t) {
        ASSERT_TRUE(s->RecordJobResult((*ids)[t], PagesOk(level + 100 * t + 7 * (r % 3))).ok());
      }
      ASSERT_TRUE(s->RecordJobResult((*ids)[3], PagesOk(50000)).ok());
      if (r == 11) {
        auto failed = s->AddJob(*run, PagesJob("gpu", 0));
        ASSERT_TRUE(failed.ok());
        store::JobOutcome crash;
        crash.status = "crashed";
        ASSERT_TRUE(s->RecordJobResult(*failed, crash).ok());
        lastJob_ = *failed;
      }
      ASSERT_TRUE(s->FinishRun(*run, store::kRunFinished).ok());
    }
    store::DeviceRow local;
    local.name = "local";
    ASSERT_TRUE(s->UpsertDevice(local).ok());
    ASSERT_TRUE(s->SetDeviceState("local", store::kDeviceQuarantined, "battery swollen").ok());
    xnnpack_ = store::CellOf(PagesJob("xnnpack", 0));
    cpu_ = store::CellOf(PagesJob("cpu", 0));
  }

  QTemporaryDir dir_;
  QString db_;
  std::vector<int64_t> runs_;
  int64_t lastJob_ = 0;
  store::Cell xnnpack_;
  store::Cell cpu_;
};

const OverviewRow* RowOf(const OverviewView& view, const store::Cell& cell) {
  for (const OverviewRow& r : view.model()->overview().rows) {
    if (r.cell == cell) return &r;
  }
  return nullptr;
}

TEST_F(PageViewsTest, OverviewShowsEveryCellItsLatestValueAndTheHistoryStep) {
  OverviewView view;
  view.resize(1200, 600);
  view.setDatabase(db_);
  view.open(Location());
  ASSERT_TRUE(WaitReady(view));
  EXPECT_EQ(view.message(), "");
  ASSERT_EQ(view.model()->rowCount(), 3);
  const OverviewRow* x = RowOf(view, xnnpack_);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->label, QString::fromStdString(xnnpack_.Label()));
  ASSERT_TRUE(x->latestMs.has_value());
  EXPECT_NEAR(*x->latestMs, 13.114, 1e-9);  // run 12: 13000 + 14, + 100, + 200 us
  EXPECT_EQ(x->points.size(), 12u);
  // The step `dfarm history` finds (loadTrend reads it the same way).
  ASSERT_TRUE(x->lastChange.has_value());
  EXPECT_EQ(x->lastChange->runId, runs_[6]);
  EXPECT_TRUE(x->lastChange->regression);
  auto store = store::OpenSqliteStore(db_.toStdString());
  ASSERT_TRUE(store.ok());
  auto trend = loadTrend(**store, xnnpack_, TrendMetric::kP50);
  ASSERT_TRUE(trend.ok()) << trend.message();
  ASSERT_EQ(trend->changes.size(), 1u);
  EXPECT_EQ(trend->changes[0].runId, x->lastChange->runId);
  EXPECT_DOUBLE_EQ(trend->changes[0].changePct, x->lastChange->changePct);
  const OverviewRow* cpu = RowOf(view, cpu_);
  ASSERT_NE(cpu, nullptr);
  EXPECT_FALSE(cpu->lastChange.has_value());
  store::Cell gpu = store::CellOf(PagesJob("gpu", 0));
  const OverviewRow* g = RowOf(view, gpu);
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->latestMs.has_value());
  EXPECT_EQ(g->lastRunId, runs_.back());

  // Sorted by latest value, highest first: cpu (50 ms), xnnpack, gpu (none).
  QTableView* table = view.table();
  table->sortByColumn(OverviewModel::LatestColumn, Qt::DescendingOrder);
  const QAbstractItemModel* shown = table->model();
  EXPECT_EQ(shown->index(0, OverviewModel::CellColumn).data().toString(),
            QString::fromStdString(cpu_.Label()));
  EXPECT_EQ(shown->index(2, OverviewModel::LatestColumn).data().toString(), "no ok trial");
  EXPECT_TRUE(shown->index(1, OverviewModel::ChangeColumn).data().toString().startsWith("+"));

  // A row opens its cell's trend; two selected rows go to one trend.
  QSignalSpy open(&view, &View::openCell);
  emit table->activated(shown->index(1, 0));
  ASSERT_EQ(open.count(), 1);
  EXPECT_TRUE(open.at(0).at(0).value<store::Cell>() == xnnpack_);
  table->selectRow(0);
  table->selectionModel()->select(shown->index(1, 0),
                                  QItemSelectionModel::Select | QItemSelectionModel::Rows);
  const QList<store::Cell> selected = view.selectedCells();
  ASSERT_EQ(selected.size(), 2);
  EXPECT_TRUE(selected[0] == cpu_);
  EXPECT_TRUE(selected[1] == xnnpack_);
}

TEST_F(PageViewsTest, TrendOfSeveralCellsZoomsHoversKeepsToDatesAndLabelsBuilds) {
  TrendView view;
  view.resize(1200, 800);
  view.setDatabase(db_);
  view.show();
  Location where;
  where.page = Page::Trend;
  where.cell = xnnpack_;
  where.moreCells = {cpu_};
  view.open(where);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_EQ(view.message(), "");
  ASSERT_EQ(view.series().size(), 2u);
  EXPECT_EQ(view.runsShown().size(), 12u);
  EXPECT_TRUE(view.series()[0].changes.empty());  // steps show on one cell's trend
  int lines = 0;
  QLineSeries* cpuLine = nullptr;
  for (QAbstractSeries* s : view.chart()->series()) {
    if (s->name() == QString::fromStdString(xnnpack_.Label())) ++lines;
    if (s->name() == QString::fromStdString(cpu_.Label())) {
      ++lines;
      cpuLine = qobject_cast<QLineSeries*>(s);
    }
  }
  EXPECT_EQ(lines, 2);
  ASSERT_NE(cpuLine, nullptr);
  EXPECT_EQ(cpuLine->count(), 12);

  // Hover: the point under the cursor, with its run, value and build.
  auto* chartView = qobject_cast<QChartView*>(view.exportableChart());
  ASSERT_NE(chartView, nullptr);
  QApplication::processEvents();
  const QPointF scene = view.chart()->mapToPosition(cpuLine->at(4), cpuLine);
  const QPoint at = chartView->mapFromScene(scene);
  int64_t runId = 0;
  const QString text = view.pointTextAt(at, &runId);
  EXPECT_EQ(runId, runs_[4]);
  EXPECT_TRUE(text.contains(QString("run #%1").arg(runs_[4]))) << qPrintable(text);
  EXPECT_TRUE(text.contains("50.000")) << qPrintable(text);
  EXPECT_TRUE(text.contains("2.16.1 cccccccc")) << qPrintable(text);
  EXPECT_EQ(view.pointTextAt(QPoint(2, 2)), "");

  // The wheel zooms in around the cursor.
  auto* axisX = qobject_cast<QCategoryAxis*>(view.chart()->axes(Qt::Horizontal).value(0));
  ASSERT_NE(axisX, nullptr);
  const double span = axisX->max() - axisX->min();
  QWheelEvent wheel(QPointF(at), chartView->mapToGlobal(QPointF(at)), QPoint(), QPoint(0, 120),
                    Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(chartView->viewport(), &wheel);
  EXPECT_LT(axisX->max() - axisX->min(), span * 0.9);

  // The runner build as the x axis: labelled where the build changes.
  view.setAxis(TrendAxis::Build);
  axisX = qobject_cast<QCategoryAxis*>(view.chart()->axes(Qt::Horizontal).value(0));
  ASSERT_NE(axisX, nullptr);
  EXPECT_EQ(axisX->categoriesLabels(), QStringList{QString("2.16.1 cccccccc (#%1)").arg(runs_[0])});

  // A date range without runs empties the chart; the runs' day shows them all.
  const QDate today = QDateTime::currentDateTimeUtc().date();
  view.setDateRange(today.addDays(1), today.addDays(2));
  EXPECT_TRUE(view.runsShown().empty());
  view.setDateRange(today.addDays(-1), today.addDays(1));
  EXPECT_EQ(view.runsShown().size(), 12u);
}

TEST_F(PageViewsTest, FleetWithoutAFarmShowsTheLocalDevicesAndNoNodes) {
  FleetView view;
  view.setDatabase(db_);
  view.open(Location());
  ASSERT_TRUE(WaitReady(view));
  EXPECT_TRUE(view.nodesSummary().contains("no farm nodes")) << qPrintable(view.nodesSummary());
  EXPECT_EQ(view.nodesTable()->rowCount(), 0);
  ASSERT_EQ(view.devicesTable()->rowCount(), 1);
  EXPECT_EQ(view.devicesTable()->item(0, 0)->text(), "local");
  EXPECT_EQ(view.devicesTable()->item(0, 2)->text(), "quarantined");
  EXPECT_EQ(view.devicesTable()->item(0, 3)->text(), "battery swollen");
  EXPECT_EQ(view.devicesTable()->item(0, 4)->text(), "dfarm");  // who set it
  EXPECT_EQ(view.devicesTable()->item(0, 6)->text(), "idle");
  EXPECT_EQ(view.queueTable()->rowCount(), 0);
}

TEST_F(PageViewsTest, FleetShowsNodesQueueDepthAndTheJobEachDeviceRuns) {
  int64_t claimedId = 0;
  {
    auto s = store::OpenSqliteStore(db_.toStdString());
    ASSERT_TRUE(s.ok());
    auto run = (*s)->CreateRun("farm", "{}");
    ASSERT_TRUE(run.ok());
    ASSERT_TRUE((*s)->SetRunMode(*run, store::kRunModeQueue).ok());
    std::vector<store::JobRow> jobs;
    for (int t = 0; t < 3; ++t) jobs.push_back(PagesJob("cpu", t));
    ASSERT_TRUE((*s)->AddJobs(*run, jobs).ok());
    store::NodeRow node;
    node.name = "lab-1";
    node.host = "lab-host";
    node.pid = 42;
    node.devices = {"local"};
    ASSERT_TRUE((*s)->RegisterNode(node).ok());
    store::DeviceTraits local;
    local.name = "local";
    auto claimed = (*s)->ClaimJob("lab-1", local, 60);
    ASSERT_TRUE(claimed.ok() && claimed->has_value()) << claimed.message();
    claimedId = (*claimed)->id;
    // An urgent run queued after the claim, and an operator's hand on the device.
    auto urgent = (*s)->CreateRun("urgent", "{}");
    ASSERT_TRUE(urgent.ok());
    ASSERT_TRUE((*s)->SetRunMode(*urgent, store::kRunModeQueue).ok());
    ASSERT_TRUE((*s)->SetRunQueueing(*urgent, {9, 900, /*device_classes=*/{}}).ok());
    ASSERT_TRUE((*s)->AddJobs(*urgent, {PagesJob("xnnpack", 0)}).ok());
    ASSERT_TRUE(
        (*s)->SetOperatorState("local", store::kDeviceQuarantined, "battery swollen", "al@lab")
            .ok());
  }
  FleetView view;
  view.setDatabase(db_);
  view.open(Location());
  ASSERT_TRUE(WaitReady(view));
  ASSERT_EQ(view.nodesTable()->rowCount(), 1);
  EXPECT_EQ(view.nodesTable()->item(0, 0)->text(), "lab-1");
  EXPECT_EQ(view.nodesTable()->item(0, 1)->text(), "lab-host");
  EXPECT_EQ(view.nodesTable()->item(0, 6)->text(), "alive");
  EXPECT_TRUE(view.nodesSummary().contains("1, 1 alive")) << qPrintable(view.nodesSummary());
  ASSERT_EQ(view.devicesTable()->rowCount(), 1);
  EXPECT_EQ(view.devicesTable()->item(0, 6)->text(), QString("job %1 (lab-1)").arg(claimedId));
  EXPECT_EQ(view.devicesTable()->item(0, 2)->text(), "quarantined");
  EXPECT_EQ(view.devicesTable()->item(0, 4)->text(), "operator al@lab");
  // The queue in claim order: the urgent run (priority 9) first.
  ASSERT_EQ(view.queueTable()->rowCount(), 2);
  EXPECT_EQ(view.queueTable()->item(0, 1)->text(), "urgent");
  EXPECT_EQ(view.queueTable()->item(0, 2)->data(Qt::DisplayRole).toLongLong(), 9);
  EXPECT_EQ(view.queueTable()->item(1, 2)->data(Qt::DisplayRole).toLongLong(), 5);
  EXPECT_EQ(view.queueTable()->item(1, 4)->data(Qt::DisplayRole).toLongLong(), 2);  // queued
  EXPECT_EQ(view.queueTable()->item(1, 5)->data(Qt::DisplayRole).toLongLong(), 1);  // running
  EXPECT_TRUE(view.queueSummary().contains("3 jobs queued, 1 running"))
      << qPrintable(view.queueSummary());
  EXPECT_TRUE(view.queueSummary().contains(
      "priority 9: 1 queued, 0 running; priority 5: 2 queued, 1 running"))
      << qPrintable(view.queueSummary());
  QSignalSpy open(&view, &View::openJob);
  emit view.devicesTable()->cellActivated(0, 6);
  ASSERT_EQ(open.count(), 1);
  EXPECT_EQ(open.at(0).at(0).toLongLong(), claimedId);
}

// A location of every page, with what its subject needs.
Location Somewhere(Page page, const store::Cell& cell) {
  Location where;
  where.page = page;
  switch (pageInfo(page).subject) {
    case Subject::Database:
      break;
    case Subject::RunPair:
      where.baselineId = 3;
      [[fallthrough]];
    case Subject::Run:
      where.runId = 7;
      break;
    case Subject::Job:
      where.jobId = 12;
      break;
    case Subject::Cell:
      where.cell = cell;
      break;
  }
  return where;
}

TEST(LocationLink, EveryPageRoundTripsThroughItsLink) {
  store::Cell odd;  // every field set, with the characters a link must escape
  odd.model_sha256 = std::string(64, 'e');
  odd.delegate = "xnnpack";
  odd.delegate_options = "fp16:true;k:a,b&c=d%e f";
  odd.num_threads = 4;
  odd.runner = "main";
  odd.device = "tcp://10.0.0.7:7000?x=1#y";
  odd.inputs = "sets:0123456789abcdef";
  odd.model = "face detection,v2.tflite";
  for (int i = 0; i < kPageCount; ++i) {
    const Location where = Somewhere(static_cast<Page>(i), odd);
    const QString link = locationLink(where);
    EXPECT_TRUE(link.startsWith("dfarm://" + pageName(where.page))) << qPrintable(link);
    auto back = parseLocationLink(link);
    ASSERT_TRUE(back.ok()) << qPrintable(link) << ": " << back.message();
    EXPECT_TRUE(sameLocation(*back, where)) << qPrintable(link);
    EXPECT_EQ(back->cell.model, where.cell.model) << qPrintable(link);
  }
  Location several = Somewhere(Page::Trend, odd);
  store::Cell other = odd;
  other.device = "local";
  several.moreCells = {other};
  auto back = parseLocationLink(locationLink(several));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_TRUE(sameLocation(*back, several));
  EXPECT_EQ(locationLink(Somewhere(Page::Compare, odd)), "dfarm://compare?baseline=3&run=7");

  // A trend's metric, date range and zoom.
  Location tuned = Somewhere(Page::Trend, odd);
  tuned.trend.metric = reports::HistoryMetric::kP90;
  tuned.trend.from = QDate(2026, 11, 1);
  tuned.trend.to = QDate(2026, 11, 20);
  tuned.trend.zoomFirstRun = 3;
  tuned.trend.zoomLastRun = 7;
  const QString link = locationLink(tuned);
  EXPECT_TRUE(link.endsWith("&metric=p90&from=2026-11-01&to=2026-11-20&zoom=3-7"))
      << qPrintable(link);
  back = parseLocationLink(link);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_TRUE(sameLocation(*back, tuned)) << qPrintable(link);
  EXPECT_FALSE(sameLocation(*back, Somewhere(Page::Trend, odd)));
}

TEST(LocationLink, BadLinksSayWhatIsWrong) {
  const std::pair<const char*, const char*> bad[] = {
      {"http://matrix?run=1", "not a dfarm:// link"},
      {"dfarm://graphs?run=1", "unknown view 'graphs'"},
      {"dfarm://matrix", "the matrix view needs run=ID"},
      {"dfarm://matrix?run=abc", "run=abc is not an id"},
      {"dfarm://matrix?run=-4", "run=-4 is not an id"},
      {"dfarm://job?job=1&color=red", "unknown parameter 'color'"},
      {"dfarm://compare?run=2", "baseline=ID and run=ID"},
      {"dfarm://trend?cell=abc", "has 1 fields, not 8"},
      {"dfarm://trend?metric=p42", "metric=p42 is not a metric"},
      {"dfarm://trend?from=2026-02-30&to=2026-03-01", "from=2026-02-30 is not a date"},
      {"dfarm://trend?from=2026-03-02&to=2026-03-01", "from=2026-03-02 is after to=2026-03-01"},
      {"dfarm://trend?to=2026-03-01", "needs both from=YYYY-MM-DD and to=YYYY-MM-DD"},
      {"dfarm://trend?zoom=9-3", "zoom=9-3 is not FIRST-LAST"},
      {"dfarm://trend?zoom=x", "zoom=x is not FIRST-LAST"},
      {"dfarm://matrix?run=1&metric=p90", "belong to a cell's view (trend), not to matrix"},
  };
  for (const auto& [link, why] : bad) {
    auto where = parseLocationLink(link);
    ASSERT_FALSE(where.ok()) << link;
    EXPECT_EQ(where.error().kind, ErrorKind::kInvalidInput) << link;
    EXPECT_NE(where.message().find(why), std::string::npos) << link << ": " << where.message();
  }
}

TEST_F(PageViewsTest, CheckLocationFindsWhatALinkNamesOrSaysWhatIsMissing) {
  auto s = store::OpenSqliteStore(db_.toStdString());
  ASSERT_TRUE(s.ok());
  Location run = Somewhere(Page::Matrix, xnnpack_);
  run.runId = runs_[2];
  EXPECT_TRUE(checkLocation(**s, run, "farm.db").ok());
  run.runId = 999;
  auto missing = checkLocation(**s, run, "farm.db");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(missing.message().find("run 999 does not exist in 'farm.db'"), std::string::npos)
      << missing.message();
  Location job = Somewhere(Page::Job, xnnpack_);
  job.jobId = 99999;
  EXPECT_FALSE(checkLocation(**s, job, "farm.db").ok());
  Location cell = Somewhere(Page::Trend, xnnpack_);
  cell.cell.model.clear();  // a link's cell without its file name gets it back
  auto found = checkLocation(**s, cell, "farm.db");
  ASSERT_TRUE(found.ok()) << found.message();
  EXPECT_EQ(found->cell.model, "face.tflite");
  cell.moreCells = {cpu_};
  cell.moreCells[0].device = "pixel";
  auto gone = checkLocation(**s, cell, "farm.db");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.message().find("@pixel"), std::string::npos) << gone.message();
}

TEST_F(PageViewsTest, WindowOpensLinksCopiesThemAndRefusesBadOnes) {
  MainWindow window;
  window.openDatabase(db_);
  window.show();
  for (Page page : {Page::Overview, Page::Fleet, Page::Matrix, Page::Job, Page::Trend}) {
    Location where = Somewhere(page, xnnpack_);
    if (where.runId) where.runId = runs_[3];
    if (where.jobId) where.jobId = lastJob_;
    where.moreCells = page == Page::Trend ? std::vector<store::Cell>{cpu_} : where.moreCells;
    window.openLink(locationLink(where));
    ASSERT_TRUE(QTest::qWaitFor(
        [&] { return sameLocation(window.location(), where) && window.currentView()->isReady(); },
        20000))
        << qPrintable(pageName(page));
    EXPECT_EQ(window.link(), locationLink(where));
  }
  EXPECT_EQ(qobject_cast<TrendView*>(window.view(Page::Trend))->series().size(), 2u);

  for (const QString& bad : {QString("dfarm://matrix?run=999"), QString("dfarm://graphs")}) {
    const Location before = window.location();
    QSignalSpy failed(&window, &MainWindow::openFailed);
    window.openLink(bad);
    ASSERT_TRUE(failed.wait(20000)) << qPrintable(bad);
    EXPECT_TRUE(sameLocation(window.location(), before)) << qPrintable(bad);
  }
  // Add to the trend: the overview's cells join the trend shown last.
  window.goToPage(Page::Overview);
  emit window.view(Page::Overview)->addToTrend({store::CellOf(PagesJob("gpu", 0))});
  ASSERT_TRUE(QTest::qWaitFor(
      [&] { return window.location().page == Page::Trend && window.currentView()->isReady(); },
      20000));
  EXPECT_TRUE(window.location().cell == xnnpack_);
  EXPECT_EQ(window.location().moreCells.size(), 2u);

  // A trend's link opens with its metric, date range and zoom, and the copy carries them.
  auto* trend = qobject_cast<TrendView*>(window.view(Page::Trend));
  Location tuned = Somewhere(Page::Trend, xnnpack_);
  const QDate today = QDateTime::currentDateTimeUtc().date();
  tuned.trend.metric = reports::HistoryMetric::kP90;
  tuned.trend.from = today.addDays(-1);
  tuned.trend.to = today.addDays(1);
  tuned.trend.zoomFirstRun = runs_[3];
  tuned.trend.zoomLastRun = runs_[5];
  window.openLink(locationLink(tuned));
  ASSERT_TRUE(QTest::qWaitFor(
      [&] { return sameLocation(window.location(), tuned) && trend->isReady(); }, 20000));
  EXPECT_EQ(trend->metric(), reports::HistoryMetric::kP90);
  EXPECT_EQ(trend->series().front().metric, reports::HistoryMetric::kP90);
  const auto* axis = qobject_cast<QValueAxis*>(trend->chart()->axes(Qt::Horizontal).value(0));
  ASSERT_NE(axis, nullptr);
  EXPECT_DOUBLE_EQ(axis->min(), 2.5);  // runs_[3] to runs_[5]: the 4th to the 6th point
  EXPECT_DOUBLE_EQ(axis->max(), 5.5);
  // The y axis fits the runs in view: the 13 ms level after the step is not among them.
  const auto* yAxis = qobject_cast<QValueAxis*>(trend->chart()->axes(Qt::Vertical).value(0));
  ASSERT_NE(yAxis, nullptr);
  EXPECT_LT(yAxis->max(), 13.0 * 1.1);
  EXPECT_EQ(window.link(), locationLink(tuned));
  // What the user changes afterwards is in the copy too.
  trend->setMetric(reports::HistoryMetric::kMean);
  trend->setZoom(runs_[1], runs_[2]);
  tuned.trend.metric = reports::HistoryMetric::kMean;
  tuned.trend.zoomFirstRun = runs_[1];
  tuned.trend.zoomLastRun = runs_[2];
  EXPECT_EQ(window.link(), locationLink(tuned));
  trend->setZoom(0, 0);
  tuned.trend.zoomFirstRun = tuned.trend.zoomLastRun = 0;
  EXPECT_EQ(window.link(), locationLink(tuned));
}

}  // namespace
}  // namespace dfarm::gui
