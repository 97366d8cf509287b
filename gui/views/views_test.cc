// The runs, matrix, compare and devices views and their models over a real
// SQLite store, offscreen.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QElapsedTimer>
#include <QKeyEvent>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <cstdlib>
#include <string>
#include <vector>

#include "gui/store_loader.h"
#include "gui/views/compare_view.h"
#include "gui/views/devices_view.h"
#include "gui/views/matrix_view.h"
#include "gui/views/runs_view.h"
#include "gui/views/view_testing.h"
#include "reports/report.h"

namespace dfarm::gui {
namespace {

using viewtest::g_warnings;
using viewtest::WaitReady;
using viewtest::WarningCounter;

store::JobRow Job(const std::string& model, const std::string& delegate, const std::string& device,
                  int64_t trial) {
  store::JobRow job;
  job.job_key = model + "/" + delegate + "/" + device + "/" + std::to_string(trial);
  job.model = model;
  job.model_path = "/models/" + model;
  job.model_sha256 = std::string(64, model[0]);
  job.delegate = delegate;
  job.device = device;
  job.num_threads = 1;
  job.trial = trial;
  return job;
}

store::JobOutcome Ok(double median_us, double error) {
  store::JobOutcome ok;
  ok.status = "ok";
  ok.exit_code = 0;
  ok.wall_ms = 100;
  store::JobMetrics m;
  m.mean_us = m.p50_us = median_us;
  m.p90_us = median_us * 1.1;
  m.num_runs = 20;
  m.peak_rss_bytes = 40 << 20;
  ok.metrics = m;
  for (int i = 0; i < 20; ++i) ok.samples_us.push_back(median_us * (0.97 + 0.003 * i));
  if (error > 0) {
    store::OutputAccuracy acc;
    acc.name = "out";
    acc.compared = 4;
    acc.max_abs_error = error;
    ok.accuracy = store::Accuracy{"cpu", {acc}};
  }
  return ok;
}

class ViewsTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("farm.db");
    auto opened = store::OpenSqliteStore(db_.toStdString());
    ASSERT_TRUE(opened.ok()) << opened.message();
    store_ = std::move(*opened);
    base_ = MakeRun("nightly", 1.0, false);
    cand_ = MakeRun("candidate", 1.5, true);
    ASSERT_TRUE(store_->TagRun(base_, "baseline", false).ok());
    ASSERT_TRUE(store_->TagRun(cand_, "rc1", false).ok());
    store::DeviceRow d;
    d.name = "local";
    d.abi = "x86_64";
    d.os = "Linux 6.1";
    d.cpu = "Xeon";
    d.cores = 16;
    d.memory_bytes = int64_t{64} << 30;
    d.agent_version = "0.9.0";
    ASSERT_TRUE(store_->UpsertDevice(d).ok());
    d.name = "pixel7";
    d.abi = "arm64-v8a";
    d.os = "Android 14";
    d.opencl.push_back(store::OpenClDevice{"ARM Platform", "Mali-G710", "ARM", "v1.r38p1",
                                           "OpenCL 3.0", true, true, 7, int64_t{8} << 30});
    ASSERT_TRUE(store_->UpsertDevice(d).ok());
    ASSERT_TRUE(store_->SetDeviceState("pixel7", store::kDeviceOk, "").ok());
    ASSERT_TRUE(
        store_->SetDeviceState("pixel7", store::kDeviceQuarantined, "3 infra failures in a row")
            .ok());
  }

  // {face, hand} x {cpu, xnnpack} x {local, pixel7}, five trials; xnnpack on local
  // `slow` times slower than the baseline's; hand x xnnpack on pixel7 crashes
  // when `crash`.
  int64_t MakeRun(const std::string& name, double slow, bool crash) {
    auto run = store_->CreateRun(name, "{}");
    EXPECT_TRUE(run.ok());
    std::vector<store::JobRow> jobs;
    for (const char* model : {"face.tflite", "hand.tflite"}) {
      for (const char* delegate : {"cpu", "xnnpack"}) {
        for (const char* device : {"local", "pixel7"}) {
          for (int64_t t = 0; t < 5; ++t) jobs.push_back(Job(model, delegate, device, t));
        }
      }
    }
    auto ids = store_->AddJobs(*run, jobs);
    EXPECT_TRUE(ids.ok());
    for (size_t i = 0; i < jobs.size(); ++i) {
      const store::JobRow& j = jobs[i];
      const bool xnn = j.delegate == "xnnpack";
      if (crash && xnn && j.model == "hand.tflite" && j.device == "pixel7") {
        store::JobOutcome crashed;
        crashed.status = "crashed";
        crashed.error = "runner killed by signal 11 (SIGSEGV)";
        EXPECT_TRUE(store_->RecordJobResult((*ids)[i], crashed).ok());
        continue;
      }
      double us = xnn ? 5000 : 20000;
      if (xnn && j.device == "local") us *= slow;
      us *= 1.0 + 0.01 * static_cast<double>(j.trial);  // trials differ a little
      EXPECT_TRUE(store_->RecordJobResult((*ids)[i], Ok(us, xnn ? 2e-5 : 0)).ok());
    }
    EXPECT_TRUE(store_->FinishRun(*run, crash ? store::kRunFailed : store::kRunFinished).ok());
    return *run;
  }

  QTemporaryDir dir_;
  QString db_;
  std::unique_ptr<store::Store> store_;
  int64_t base_ = 0, cand_ = 0;
};

TEST_F(ViewsTest, RunSummariesModelPassesTheTesterAndShowsCounts) {
  RunSummariesModel model;
  {
    WarningCounter counter;
    QAbstractItemModelTester tester(&model,
                                    QAbstractItemModelTester::FailureReportingMode::Warning);
    auto runs = ReadRunSummaries(*store_, {});
    ASSERT_TRUE(runs.ok()) << runs.message();
    model.setRuns(*runs);  // data set
    model.setRuns(*runs);  // updated in place (same runs)
    model.setRuns({});     // reset
    model.setRuns(*runs);
    EXPECT_EQ(g_warnings, 0);
  }
  ASSERT_EQ(model.rowCount(), 2);
  EXPECT_EQ(model.index(0, RunSummariesModel::NameColumn).data().toString(), "candidate");
  EXPECT_EQ(model.index(0, RunSummariesModel::JobsColumn).data().toLongLong(), 40);
  EXPECT_EQ(model.index(0, RunSummariesModel::CountsColumn).data().toString(), "35 ok, 5 crashed");
  EXPECT_EQ(model.index(0, RunSummariesModel::TagsColumn).data().toString(), "rc1");
  EXPECT_EQ(model.index(1, RunSummariesModel::TagsColumn).data().toString(), "baseline");
}

TEST_F(ViewsTest, RunsViewFiltersOpensAndCompares) {
  RunsView view;
  view.setDatabase(db_);
  view.resize(1000, 400);
  view.showRuns();
  ASSERT_TRUE(WaitReady(view));
  ASSERT_EQ(view.table()->model()->rowCount(), 2);
  // Newest first, sortable by column.
  EXPECT_EQ(view.table()->model()->index(0, 0).data(RunSummariesModel::RunIdRole).toLongLong(),
            cand_);

  QSignalSpy open(&view, &View::openRun);
  view.table()->setFocus();
  view.table()->setCurrentIndex(view.table()->model()->index(1, 0));
  QTest::keyClick(view.table(), Qt::Key_Return);
  ASSERT_EQ(open.count(), 1);
  EXPECT_EQ(open.takeFirst().at(0).toLongLong(), base_);

  QSignalSpy compare(&view, &View::compareRuns);
  view.selectRuns({cand_, base_});
  ASSERT_EQ(view.selectedRuns().size(), 2u);
  view.compareSelected();
  ASSERT_EQ(compare.count(), 1);
  EXPECT_EQ(compare.at(0).at(0).toLongLong(), base_);  // the older one is the baseline
  EXPECT_EQ(compare.at(0).at(1).toLongLong(), cand_);

  // A refresh keeps the selection.
  QSignalSpy ready(&view, &View::ready);
  view.refresh();
  ASSERT_TRUE(ready.wait(20000));
  EXPECT_EQ(view.selectedRuns().size(), 2u);
}

TEST_F(ViewsTest, RunsFilterGoesToTheStore) {
  RunsFilter f;
  f.tag = "baseline";
  auto runs = ReadRunSummaries(*store_, f);
  ASSERT_TRUE(runs.ok()) << runs.message();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().run.id, base_);
  f = {};
  f.status = store::kRunFailed;
  runs = ReadRunSummaries(*store_, f);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().run.id, cand_);
}

TEST_F(ViewsTest, MatrixModelLaysOutTheReportsCells) {
  auto data = ReadMatrix(*store_, cand_);
  ASSERT_TRUE(data.ok()) << data.message();
  MatrixModel model;
  {
    WarningCounter counter;
    QAbstractItemModelTester tester(&model,
                                    QAbstractItemModelTester::FailureReportingMode::Warning);
    model.setMatrix(*data);
    model.setMatrix(*data);  // the same run: updated in place
    model.setColour(MatrixModel::Colour::kLatency);
    model.setMatrix({});  // reset
    model.setMatrix(*data);
    model.setColour(MatrixModel::Colour::kSpeedup);
    EXPECT_EQ(g_warnings, 0);
  }
  // Rows: model x configuration; columns: model, config, then devices.
  ASSERT_EQ(model.rowCount(), 4);
  ASSERT_EQ(model.columnCount(), 4);
  EXPECT_EQ(model.headerData(2, Qt::Horizontal).toString(), "local");
  EXPECT_EQ(model.headerData(3, Qt::Horizontal).toString(), "pixel7");
  EXPECT_EQ(model.index(0, 0).data().toString(), "face.tflite");
  EXPECT_EQ(model.index(0, 1).data().toString(), "cpu x1");
  EXPECT_EQ(model.index(1, 1).data().toString(), "xnnpack x1");
  EXPECT_EQ(model.index(0, 2).data().toString(), "cpu ref");
  EXPECT_EQ(model.index(1, 2).data().toString(), "2.67×");  // 20 ms / 7.5 ms
  EXPECT_EQ(model.index(1, 3).data().toString(), "4.00×");
  // The failed cell shows its status class, its tooltip the error.
  EXPECT_EQ(model.index(3, 3).data().toString(), "crashed");
  EXPECT_TRUE(model.index(3, 3).data(MatrixModel::FailedRole).toBool());
  EXPECT_TRUE(model.index(3, 3).data(Qt::ToolTipRole).toString().contains("SIGSEGV"));
  EXPECT_TRUE(model.index(1, 2).data(Qt::ToolTipRole).toString().contains("trials ok: 5 of 5"));
  model.setColour(MatrixModel::Colour::kLatency);
  EXPECT_TRUE(model.index(1, 2).data().toString().endsWith(" ms"));
  model.setColour(MatrixModel::Colour::kAccuracy);
  EXPECT_EQ(model.index(1, 2).data().toString(), "2e-05");
  EXPECT_EQ(model.index(0, 2).data().toString(), "reference");
  EXPECT_GT(model.index(1, 2).data(MatrixModel::JobIdRole).toLongLong(), 0);
}

TEST_F(ViewsTest, MatrixViewOpensJobsCellsAndGatesAgainstTheBaseline) {
  MatrixView view;
  view.setDatabase(db_);
  view.resize(900, 400);
  view.showRun(cand_);
  ASSERT_TRUE(WaitReady(view));
  ASSERT_EQ(view.model()->rowCount(), 4);

  QSignalSpy job(&view, &View::openJob);
  view.activateCell(view.model()->index(1, 2));
  ASSERT_EQ(job.count(), 1);
  EXPECT_GT(job.at(0).at(0).toLongLong(), 0);
  QSignalSpy cell(&view, &View::openCell);
  view.trendOfCell(view.model()->index(1, 3));
  ASSERT_EQ(cell.count(), 1);
  const auto ref = cell.at(0).at(0).value<store::Cell>();
  EXPECT_EQ(ref.model, "face.tflite");
  EXPECT_EQ(ref.delegate, "xnnpack");
  EXPECT_EQ(ref.device, "pixel7");
  EXPECT_EQ(ref.num_threads, 1u);

  QSignalSpy gate(&view, &MatrixView::gateLoaded);
  view.colourSwitch()->setCurrentIndex(3);
  ASSERT_TRUE(gate.wait(20000));
  EXPECT_TRUE(view.gateNote().contains("vs run " + QString::number(base_)))
      << view.gateNote().toStdString();
  EXPECT_EQ(view.model()->index(1, 2).data().toString(), "regressed");  // 1.5x slower
  EXPECT_EQ(view.model()->index(0, 2).data().toString(), "pass");

  // The baseline itself has none.
  MatrixView base;
  base.setDatabase(db_);
  base.showRun(base_);
  ASSERT_TRUE(WaitReady(base));
  QSignalSpy none(&base, &MatrixView::gateLoaded);
  base.colourSwitch()->setCurrentIndex(3);
  ASSERT_TRUE(none.wait(20000));
  EXPECT_TRUE(base.gateNote().startsWith("no baseline")) << base.gateNote().toStdString();
}

TEST_F(ViewsTest, MatrixViewShowsAnErrorForAMissingRun) {
  MatrixView view;
  view.setDatabase(db_);
  view.showRun(999);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_EQ(view.model()->rowCount(), 0);
}

TEST_F(ViewsTest, CompareViewGatesCellByCell) {
  CompareModel model;
  auto data = ReadCompare(*store_, base_, cand_);
  ASSERT_TRUE(data.ok()) << data.message();
  {
    WarningCounter counter;
    QAbstractItemModelTester tester(&model,
                                    QAbstractItemModelTester::FailureReportingMode::Warning);
    model.setCells(data->gate.cells);
    model.setCells(data->gate.cells);  // updated in place
    model.setCells({});                // reset
    model.setCells(data->gate.cells);
    EXPECT_EQ(g_warnings, 0);
  }
  ASSERT_EQ(model.rowCount(), 8);

  CompareView view;
  view.setDatabase(db_);
  view.showCompare(base_, cand_);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_EQ(view.model()->rowCount(), 8);
  EXPECT_TRUE(view.summary().contains("failed")) << view.summary().toStdString();
  EXPECT_TRUE(view.table()->isColumnHidden(CompareModel::TaskColumn));  // no "eval" in either run
  QStringList verdicts;
  for (int r = 0; r < view.model()->rowCount(); ++r) {
    verdicts << view.model()->index(r, CompareModel::VerdictColumn).data().toString();
  }
  EXPECT_TRUE(verdicts.contains("regressed")) << verdicts.join(",").toStdString();
  EXPECT_TRUE(verdicts.contains("fail")) << verdicts.join(",").toStdString();
  EXPECT_TRUE(verdicts.contains("pass")) << verdicts.join(",").toStdString();
}

TEST_F(ViewsTest, DevicesViewListsDevicesAndTheirHistory) {
  DevicesModel devices;
  DeviceEventsModel events;
  {
    WarningCounter counter;
    QAbstractItemModelTester t1(&devices, QAbstractItemModelTester::FailureReportingMode::Warning);
    QAbstractItemModelTester t2(&events, QAbstractItemModelTester::FailureReportingMode::Warning);
    auto list = store_->ListDevices();
    ASSERT_TRUE(list.ok());
    devices.setDevices(*list);
    devices.setDevices(*list);  // updated in place
    devices.setDevices({});
    devices.setDevices(*list);
    auto history = store_->ListDeviceEvents("pixel7");
    ASSERT_TRUE(history.ok());
    events.setEvents(*history);
    events.setEvents({});
    events.setEvents(*history);
    EXPECT_EQ(g_warnings, 0);
  }
  DevicesView view;
  view.setDatabase(db_);
  QSignalSpy history(&view, &DevicesView::historyLoaded);
  view.showDevices();
  ASSERT_TRUE(WaitReady(view));
  ASSERT_EQ(view.model()->rowCount(), 2);
  EXPECT_EQ(view.model()->index(1, DevicesModel::StateColumn).data().toString(), "quarantined");
  EXPECT_EQ(view.model()->index(1, DevicesModel::ReasonColumn).data().toString(),
            "3 infra failures in a row");
  // Who set each state, as the fleet view says it.
  EXPECT_EQ(view.model()->headerData(DevicesModel::SetByColumn, Qt::Horizontal).toString(),
            "Set by");
  EXPECT_EQ(view.model()->index(1, DevicesModel::SetByColumn).data().toString(), "dfarm");
  EXPECT_EQ(view.model()->index(0, DevicesModel::SetByColumn).data().toString(), "");
  // The OpenCL devices its agent saw; the tooltip has the details.
  EXPECT_EQ(view.model()->index(1, DevicesModel::OpenClColumn).data().toString(),
            "Mali-G710 (driver v1.r38p1), GPU, fp16");
  const QString tip =
      view.model()->index(1, DevicesModel::OpenClColumn).data(Qt::ToolTipRole).toString();
  EXPECT_TRUE(tip.contains("ARM, OpenCL 3.0, 7 compute units")) << tip.toStdString();
  EXPECT_EQ(view.model()->index(0, DevicesModel::OpenClColumn).data().toString(), "");
  ASSERT_TRUE(view.selectDevice("pixel7"));
  ASSERT_TRUE(QTest::qWaitFor([&] { return view.eventsModel()->rowCount() == 2; }, 20000));
  EXPECT_EQ(view.eventsModel()->index(1, DeviceEventsModel::StateColumn).data().toString(),
            "quarantined");
  // A refresh keeps the selected device, and shows an operator's state.
  ASSERT_TRUE(
      store_->SetOperatorState("local", store::kDeviceQuarantined, "battery swollen", "al@lab")
          .ok());
  QSignalSpy ready(&view, &View::ready);
  view.refresh();
  ASSERT_TRUE(ready.wait(20000));
  EXPECT_EQ(view.table()->currentIndex().data(DevicesModel::NameRole).toString(), "pixel7");
  EXPECT_EQ(view.model()->index(0, DevicesModel::SetByColumn).data().toString(), "operator al@lab");
}

// The matrix of a 1,000-job run (with samples): read, laid out and painted.
// Prints the figure (not a timed test: the benchmark reports it).
TEST_F(ViewsTest, MatrixOfAThousandJobs) {
  auto run = store_->CreateRun("big", "{}");
  ASSERT_TRUE(run.ok());
  std::vector<store::JobRow> jobs;
  for (int m = 0; m < 10; ++m) {
    for (const char* delegate : {"cpu", "xnnpack", "gpu", "nnapi", "example"}) {
      for (int d = 0; d < 4; ++d) {
        for (int64_t t = 0; t < 5; ++t) {
          jobs.push_back(Job(std::string(1, static_cast<char>('a' + m)) + "_model.tflite", delegate,
                             "device" + std::to_string(d), t));
        }
      }
    }
  }
  auto ids = store_->AddJobs(*run, jobs);
  ASSERT_TRUE(ids.ok());
  for (size_t i = 0; i < ids->size(); ++i) {
    ASSERT_TRUE(store_->RecordJobResult((*ids)[i], Ok(1000 + 10 * (i % 97), 1e-5)).ok());
  }
  MatrixView view;
  view.setDatabase(db_);
  view.resize(1200, 900);
  view.show();
  QElapsedTimer timer;
  timer.start();
  view.showRun(*run);
  ASSERT_TRUE(WaitReady(view));
  const qint64 ms = timer.elapsed();
  std::printf("matrix_load_paint_ms %lld (1000 jobs, %d rows x %d devices)\n",
              static_cast<long long>(ms), view.model()->rowCount(),
              view.model()->columnCount() - 2);
  // How fast is build/bin/dfarm_dashboard_benchmark's to say (matrix_paint_ms):
  // a test's verdict must not depend on how busy the machine is.
  EXPECT_EQ(view.model()->rowCount(), 50);
}

// Renders each view on the database DFARM_VIEWS_DB into PNGs under
// DFARM_VIEWS_PNG_PREFIX (runs.png, ...); skipped without them.
TEST(ViewsScreenshot, RendersEveryViewOnARealSweep) {
  const char* db = std::getenv("DFARM_VIEWS_DB");
  const char* prefix = std::getenv("DFARM_VIEWS_PNG_PREFIX");
  if (!db || !prefix) GTEST_SKIP() << "set DFARM_VIEWS_DB and DFARM_VIEWS_PNG_PREFIX";
  auto opened = OpenDashboardStore(db);
  ASSERT_TRUE(opened.ok()) << opened.message();
  auto runs = (*opened)->ListRuns();
  ASSERT_TRUE(runs.ok() && runs->size() >= 2);
  const int64_t newest = runs->back().id, older = (*runs)[runs->size() - 2].id;
  auto save = [&](View& v, const char* name) {
    v.resize(1280, 560);
    v.show();
    ASSERT_TRUE(WaitReady(v)) << name;
    QTest::qWait(50);
    const QString path = QString::fromUtf8(prefix) + name + ".png";
    EXPECT_TRUE(v.grab().save(path)) << path.toStdString();
  };
  RunsView runsView;
  runsView.setDatabase(db);
  runsView.showRuns();
  save(runsView, "runs");
  MatrixView matrix;
  matrix.setDatabase(db);
  matrix.showRun(newest);
  save(matrix, "matrix");
  QSignalSpy gate(&matrix, &MatrixView::gateLoaded);
  matrix.colourSwitch()->setCurrentIndex(3);
  ASSERT_TRUE(gate.wait(60000));
  QTest::qWait(50);
  EXPECT_TRUE(matrix.grab().save(QString::fromUtf8(prefix) + "matrix_verdict.png"));
  CompareView compare;
  compare.setDatabase(db);
  compare.showCompare(older, newest);
  save(compare, "compare");
  DevicesView devices;
  devices.setDatabase(db);
  devices.showDevices();
  save(devices, "devices");
}

}  // namespace
}  // namespace dfarm::gui
