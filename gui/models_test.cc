// The dashboard's models and loader over a real SQLite store, without a
// display.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtGlobal>

#include "gui/format.h"
#include "gui/jobs_model.h"
#include "gui/runs_model.h"
#include "gui/store_loader.h"

namespace dfarm::gui {
namespace {

// Counts QAbstractItemModelTester complaints (it reports them as warnings).
int g_modelWarnings = 0;
void countWarnings(QtMsgType type, const QMessageLogContext&, const QString& msg) {
  if (type == QtWarningMsg || type == QtCriticalMsg || type == QtFatalMsg) {
    ++g_modelWarnings;
    fprintf(stderr, "qt: %s\n", qPrintable(msg));
  }
}

store::JobRow Job(const std::string& model, const std::string& delegate) {
  store::JobRow job;
  job.job_key = model + "/" + delegate;
  job.model = model;
  job.model_path = "/models/" + model;
  job.model_sha256 = std::string(64, 'a');
  job.delegate = delegate;
  job.device = "local";
  return job;
}

class DashboardTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("farm.db");
    auto opened = store::OpenSqliteStore(db_.toStdString());
    ASSERT_TRUE(opened.ok()) << opened.message();
    auto& s = *opened;

    auto first = s->CreateRun("nightly", "{}");
    ASSERT_TRUE(first.ok()) << first.message();
    first_run_ = *first;
    auto ids = s->AddJobs(first_run_, {Job("face.tflite", "cpu"), Job("hand<1>.tflite", "cpu"),
                                       Job("selfie.tflite", "cpu")});
    ASSERT_TRUE(ids.ok()) << ids.message();

    store::JobOutcome ok;
    ok.status = "ok";
    ok.exit_code = 0;
    ok.wall_ms = 900;
    store::JobMetrics m;
    m.init_us = 2500;
    m.first_us = 14000;
    m.mean_us = 12345.6;
    m.p50_us = 12000;
    m.p90_us = 13000;
    m.p99_us = 15000;
    m.num_runs = 3;
    m.peak_rss_bytes = 42 * 1024 * 1024;
    ok.metrics = m;
    ok.samples_us = {12000, 12500, 12536.8};
    store::JobPlacement placement;
    placement.partitions = 1;
    placement.nodes = {{0, "ADD", "example", 0, false, ""},
                       {1, "ADD", "example", 0, false, ""},
                       {2, "RELU", "cpu", std::nullopt, false, "example: RELU is not supported"}};
    ok.placement = placement;
    ok.started_hot = true;
    ok.state_note = "started hot: thermal zone 0 (cpu) at 81.0 C > 70.0 C";
    store::OutputAccuracy acc;
    acc.name = "out";
    acc.compared = 4;
    acc.max_abs_error = 0.0002;
    ok.accuracy = store::Accuracy{"cpu", {acc}};
    ASSERT_TRUE(s->RecordJobResult((*ids)[0], ok).ok());

    store::JobOutcome crashed;
    crashed.status = "crashed";
    crashed.error = "runner killed by signal 11 (SIGSEGV)";
    crashed.signal = 11;
    ASSERT_TRUE(s->RecordJobResult((*ids)[1], crashed).ok());
    ASSERT_TRUE(s->FinishRun(first_run_, store::kRunFinished).ok());

    auto second = s->CreateRun("candidate", "{}");
    ASSERT_TRUE(second.ok());
    second_run_ = *second;
  }

  QTemporaryDir dir_;
  QString db_;
  qint64 first_run_ = 0;
  qint64 second_run_ = 0;
};

// Prints a model as one line per row, cells separated by " | ".
QString Print(const QAbstractItemModel& model) {
  QString out;
  for (int r = 0; r < model.rowCount(); ++r) {
    QStringList cells;
    for (int c = 0; c < model.columnCount(); ++c) cells << model.index(r, c).data().toString();
    out += cells.join(" | ") + "\n";
  }
  return out;
}

TEST_F(DashboardTest, RunsModelListsRunsOldestFirst) {
  RunsModel model;
  g_modelWarnings = 0;
  QtMessageHandler previous = qInstallMessageHandler(countWarnings);
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Warning);
  RunsSnapshot snapshot = readRuns(db_);
  ASSERT_TRUE(snapshot.error.isEmpty()) << snapshot.error.toStdString();
  model.setRuns(snapshot.runs);
  qInstallMessageHandler(previous);
  EXPECT_EQ(g_modelWarnings, 0);

  ASSERT_EQ(model.rowCount(), 2);
  EXPECT_EQ(model.index(0, RunsModel::NameColumn).data().toString(), "nightly");
  EXPECT_EQ(model.index(0, RunsModel::StatusColumn).data().toString(), "finished");
  EXPECT_FALSE(model.index(0, RunsModel::FinishedColumn).data().toString().isEmpty());
  EXPECT_EQ(model.index(1, RunsModel::NameColumn).data().toString(), "candidate");
  EXPECT_EQ(model.index(1, RunsModel::StatusColumn).data().toString(), "running");
  EXPECT_EQ(model.index(1, 0).data(RunsModel::RunIdRole).toLongLong(), second_run_);
  EXPECT_EQ(model.headerData(RunsModel::StatusColumn, Qt::Horizontal).toString(), "Status");
}

TEST_F(DashboardTest, JobsModelShowsFiguresAndFailures) {
  JobsModel model;
  g_modelWarnings = 0;
  QtMessageHandler previous = qInstallMessageHandler(countWarnings);
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Warning);
  JobsSnapshot snapshot = readJobs(db_, first_run_);
  ASSERT_TRUE(snapshot.error.isEmpty()) << snapshot.error.toStdString();
  model.setJobs(snapshot.jobs, snapshot.accuracy);
  qInstallMessageHandler(previous);
  EXPECT_EQ(g_modelWarnings, 0);

  // Columns: model, delegate, options, device, status, init, first, mean,
  // p50, p90, p99, peak RSS, placement, device state, max abs error vs cpu, error.
  EXPECT_EQ(Print(model),
            "face.tflite | cpu |  | local | ok | 2.500 | 14.000 | 12.346 | 12.000 | 13.000 | "
            "15.000 | 42.0 | 2/3 on example | hot | 0.0002 | \n"
            "hand<1>.tflite | cpu |  | local | crashed |  |  |  |  |  |  |  |  |  |  | "
            "runner killed by signal 11 (SIGSEGV)\n"
            "selfie.tflite | cpu |  | local | queued |  |  |  |  |  |  |  |  |  |  | \n");
  EXPECT_DOUBLE_EQ(model.index(0, JobsModel::AccuracyColumn).data(JobsModel::SortRole).toDouble(),
                   0.0002);
  EXPECT_EQ(model.index(0, JobsModel::DeviceStateColumn).data(Qt::ToolTipRole).toString(),
            "started hot: thermal zone 0 (cpu) at 81.0 C > 70.0 C");
  EXPECT_TRUE(model.index(0, JobsModel::DeviceStateColumn).data(Qt::ForegroundRole).isValid());
  EXPECT_DOUBLE_EQ(model.index(0, JobsModel::MeanColumn).data(JobsModel::SortRole).toDouble(),
                   12345.6);
  EXPECT_TRUE(model.index(1, JobsModel::StatusColumn).data(Qt::ForegroundRole).isValid());
  EXPECT_FALSE(model.index(0, JobsModel::StatusColumn).data(Qt::ForegroundRole).isValid());
  EXPECT_FALSE(model.index(2, JobsModel::StatusColumn).data(Qt::ForegroundRole).isValid());
}

// Text in the database comes from agents: a tooltip that looks like HTML is
// shown as written, not rendered (issue 12, strings from an agent).
TEST(ToolTipTest, RichLookingTextIsEscaped) {
  EXPECT_EQ(plainToolTip("runner killed by signal 11 (SIGSEGV)"),
            "runner killed by signal 11 (SIGSEGV)");
  const QString tip = plainToolTip("<img src=\"/etc/passwd\"><b>boom</b>");
  EXPECT_FALSE(tip.contains("<img")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("&lt;img")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("&lt;b&gt;boom&lt;/b&gt;")) << tip.toStdString();
}

TEST_F(DashboardTest, MissingDatabaseIsAnErrorAndIsNotCreated) {
  const QString missing = dir_.filePath("nope.db");
  RunsSnapshot snapshot = readRuns(missing);
  EXPECT_TRUE(snapshot.runs.empty());
  EXPECT_TRUE(snapshot.error.contains("nope.db")) << snapshot.error.toStdString();
  EXPECT_FALSE(QFileInfo::exists(missing));
}

TEST_F(DashboardTest, LoaderDeliversOnTheGuiThread) {
  StoreLoader loader;
  QSignalSpy spy(&loader, &StoreLoader::jobsLoaded);
  loader.loadJobs(db_, first_run_);
  ASSERT_TRUE(spy.wait(10000));
  const auto snapshot = spy.takeFirst().at(0).value<JobsSnapshot>();
  EXPECT_EQ(snapshot.runId, first_run_);
  EXPECT_EQ(snapshot.jobs.size(), 3u);
}

}  // namespace
}  // namespace dfarm::gui
