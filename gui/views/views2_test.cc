// The Trend and Job views, their models and chart export, over a real SQLite
// store built in a temporary folder, without a display.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QAreaSeries>
#include <QChart>
#include <QFile>
#include <QFileInfo>
#include <QLineSeries>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <cstdlib>
#include <map>
#include <memory>

#include "gui/chart_export.h"
#include "gui/views/compare_view.h"
#include "gui/views/job_view.h"
#include "gui/views/trend_view.h"
#include "gui/views/view_testing.h"

namespace dfarm::gui {
namespace {

using viewtest::g_warnings;
using viewtest::WaitReady;

const std::string kSha(64, 'b');

store::JobRow CellJob(const std::string& delegate, int64_t trial) {
  store::JobRow job;
  job.job_key = "face/" + delegate + "/" + std::to_string(trial);
  job.model = "face.tflite";
  job.model_path = "/models/face.tflite";
  job.model_sha256 = kSha;
  job.delegate = delegate;
  job.device = "local";
  job.num_threads = 4;
  job.trial = trial;
  job.runner = "main";
  job.runner_sha256 = std::string(64, 'c');
  return job;
}

store::JobOutcome Ok(double p50_us) {
  store::JobOutcome ok;
  ok.status = "ok";
  ok.exit_code = 0;
  ok.wall_ms = 500;
  store::JobMetrics m;
  m.init_us = 2000;
  m.init_cold_us = 2000;  // a delegate that compiled, then loaded its programs
  m.init_warm_us = 300;
  m.first_us = p50_us * 4;
  m.warmup_mean_us = p50_us * 1.3;
  m.mean_us = p50_us * 1.02;
  m.p50_us = p50_us;
  m.p90_us = p50_us * 1.1;
  m.num_runs = 6;
  m.peak_rss_bytes = 40 << 20;
  ok.metrics = m;
  ok.samples_us = {p50_us, p50_us * 1.01, p50_us * 0.99, p50_us * 1.2, p50_us, p50_us * 1.05};
  store::Accuracy acc;
  acc.reference = "cpu";
  store::OutputAccuracy out;
  out.name = "scores";
  out.compared = 10;
  out.max_abs_error = p50_us / 1e7;
  out.mean_abs_error = 1e-5;
  out.rmse = 2e-5;
  out.snr_db = 61.5;
  out.top1_agree = true;
  out.top5_agree = true;
  out.max_abs_error_lsb = runner::Number(int64_t{2});
  acc.outputs = {out};
  ok.accuracy = acc;
  store::JobPlacement placement;
  placement.partitions = 1;
  placement.nodes = {{0, "CONV_2D", "xnnpack", 0, false, ""},
                     {1, "RESHAPE", "cpu", std::nullopt, true, ""},
                     {2, "CUSTOM", "cpu", std::nullopt, false, "xnnpack: CUSTOM is not supported"}};
  ok.placement = placement;
  ok.task = store::TaskAccuracy{
      "classification", "digits@0123456789ab", 120, {{"top1", 0.975, 0.942, 1.0}}, "{}"};
  store::JobProfile profile;
  profile.runs = 6;
  profile.nodes = {{0, "DELEGATE", "xnnpack", 0, {0}, p50_us * 0.7},
                   {2, "CUSTOM", "cpu", std::nullopt, {}, p50_us * 0.3}};
  profile.by_op = {{"DELEGATE", 1, p50_us * 0.7, 70}, {"CUSTOM", 1, p50_us * 0.3, 30}};
  ok.profile = profile;
  ok.state_before_json = R"({"cpu_freq_khz":[1800000],"hottest_temp_c":45.5})";
  ok.state_after_json = R"({"cpu_freq_khz":[1200000],"hottest_temp_c":71.0})";
  ok.throttled = true;
  ok.state_note = "throttled: cpu0 at 1200 MHz of 1800 MHz";
  ok.telemetry = {{"before", 1000, 45.5, 0.5, std::nullopt, std::nullopt},
                  {"after", 2000, 71.0, 1.5, std::nullopt, std::nullopt},
                  {"during:0001", 1400, 52.0, 0.7, std::nullopt, std::nullopt},
                  {"during:0002", 1800, 66.5, 1.1, std::nullopt, std::nullopt}};
  return ok;
}

// 12 runs of one cell (3 trials each; p50 steps from 10 ms to 13 ms at the
// 7th run) plus a cpu job per run that is another cell, run 3 tagged
// "baseline", and a crashed job with a stderr tail in the last run.
class Views2Test : public testing::Test {
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
      auto ids = s->AddJobs(*run, {CellJob("xnnpack", 0), CellJob("xnnpack", 1),
                                   CellJob("xnnpack", 2), CellJob("cpu", 0)});
      ASSERT_TRUE(ids.ok()) << ids.message();
      const double level = r < 6 ? 10000 : 13000;
      for (int t = 0; t < 3; ++t) {
        store::JobOutcome o = Ok(level + 100 * t + 7 * (r % 3));
        // The newest run's xnnpack cell lost top-1; its cpu cell did not.
        if (r == 11) o.task->metrics[0] = {"top1", 0.9, 0.85, 0.95};
        ASSERT_TRUE(s->RecordJobResult((*ids)[t], o).ok());
      }
      ASSERT_TRUE(s->RecordJobResult((*ids)[3], Ok(50000)).ok());
      if (r == 0) firstJob_ = (*ids)[0];
      if (r == 11) {
        auto failed = s->AddJob(*run, CellJob("gpu", 0));
        ASSERT_TRUE(failed.ok());
        store::JobOutcome crash;
        crash.status = "crashed";
        crash.error = "runner died of signal 11";
        crash.signal = 11;
        crash.stderr_tail = "Segmentation fault in gpu delegate\nat node 3";
        ASSERT_TRUE(s->RecordJobResult(*failed, crash).ok());
        crashedJob_ = *failed;
      }
      ASSERT_TRUE(s->FinishRun(*run, store::kRunFinished).ok());
    }
    ASSERT_TRUE(s->TagRun(runs_[2], "baseline", false).ok());
    cell_.model = "face.tflite";
    cell_.model_sha256 = kSha;
    cell_.delegate = "xnnpack";
    cell_.device = "local";
    cell_.runner = "main";
    cell_.num_threads = 4;
    warnings_ = std::make_unique<viewtest::WarningCounter>();
  }
  void TearDown() override { warnings_.reset(); }

  QTemporaryDir dir_;
  QString db_;
  std::vector<int64_t> runs_;
  int64_t firstJob_ = 0;
  int64_t crashedJob_ = 0;
  store::Cell cell_;
  std::unique_ptr<viewtest::WarningCounter> warnings_;
};

TEST_F(Views2Test, TrendHasAPointPerRunTheSpreadTagsAndTheStepChange) {
  auto s = store::OpenSqliteStore(db_.toStdString());
  ASSERT_TRUE(s.ok());
  auto trend = loadTrend(**s, cell_, TrendMetric::kP50);
  ASSERT_TRUE(trend.ok()) << trend.message();
  ASSERT_EQ(trend->points.size(), 12u);
  EXPECT_EQ(trend->points[0].runId, runs_[0]);
  ASSERT_EQ(trend->points[0].trials.size(), 3u);   // the cpu cell's jobs are not in it
  EXPECT_DOUBLE_EQ(trend->points[0].value, 10.1);  // median of 10.0, 10.1, 10.2 ms
  EXPECT_DOUBLE_EQ(trend->points[0].min, 10.0);
  EXPECT_DOUBLE_EQ(trend->points[0].max, 10.2);
  EXPECT_EQ(trend->points[2].tags, QStringList{"baseline"});
  ASSERT_EQ(trend->changes.size(), 1u);
  EXPECT_EQ(trend->changes[0].index, 6u);
  EXPECT_EQ(trend->changes[0].runId, runs_[6]);
  EXPECT_TRUE(trend->changes[0].regression);
  EXPECT_NEAR(trend->changes[0].changePct, 29.7, 0.5);

  auto rss = loadTrend(**s, cell_, TrendMetric::kPeakRss);
  ASSERT_TRUE(rss.ok());
  EXPECT_DOUBLE_EQ(rss->points[0].value, 40.0);  // MiB
  store::Cell none = cell_;
  none.delegate = "nnapi";
  auto missing = loadTrend(**s, none, TrendMetric::kP50);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("nnapi"), std::string::npos) << missing.message();

  TrendModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Warning);
  model.setTrend(*trend);
  EXPECT_EQ(model.rowCount(), 12);
  EXPECT_EQ(model.index(2, TrendModel::TagsColumn).data().toString(), "baseline");
  EXPECT_TRUE(model.index(6, TrendModel::ChangeColumn).data().toString().startsWith("+29."));
  EXPECT_EQ(model.index(5, TrendModel::ChangeColumn).data().toString(), "");
  EXPECT_EQ(model.index(3, TrendModel::RunColumn).data(TrendModel::RunIdRole).toLongLong(),
            runs_[3]);
  model.setTrend({});
  EXPECT_EQ(g_warnings, 0);
}

TEST_F(Views2Test, TrendViewDrawsTheCellAndAClickOpensTheRun) {
  TrendView view;
  view.resize(1000, 700);
  view.setDatabase(db_);
  view.showCell(cell_);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_EQ(view.message(), "");
  QChart* chart = view.chart();
  QLineSeries* medians = nullptr;
  int changeLines = 0, tagMarkers = 0;
  for (QAbstractSeries* series : chart->series()) {
    if (series->name() == "median of ok trials") medians = qobject_cast<QLineSeries*>(series);
    if (series->name().startsWith(QString("run #%1: +").arg(runs_[6]))) ++changeLines;
    if (series->name() == "tagged run") ++tagMarkers;
  }
  ASSERT_NE(medians, nullptr);
  EXPECT_EQ(medians->count(), 12);
  EXPECT_EQ(changeLines, 1);
  EXPECT_EQ(tagMarkers, 1);
  ASSERT_NE(view.exportableChart(), nullptr);

  QSignalSpy open(&view, &View::openRun);
  emit medians->clicked(QPointF(4.1, 10.0));
  ASSERT_EQ(open.count(), 1);
  EXPECT_EQ(open.at(0).at(0).toLongLong(), runs_[4]);

  view.setMetric(TrendMetric::kMaxAbsError);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_EQ(view.model()->trend().metric, TrendMetric::kMaxAbsError);
  EXPECT_EQ(view.model()->rowCount(), 12);

  if (const char* dir = std::getenv("QV2_SHOT_DIR")) {
    view.setMetric(TrendMetric::kP50);
    ASSERT_TRUE(WaitReady(view));
    view.grab().save(QString(dir) + "/qv2_trend_synthetic.png");
  }

  store::Cell none = cell_;
  none.device = "pixel";
  view.showCell(none);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_TRUE(view.message().contains("pixel")) << view.message().toStdString();
  EXPECT_EQ(view.model()->rowCount(), 0);
}

// A sustained-mode job's timeline is its p50 curve over time, with the
// hottest thermal zone on a second axis.
TEST_F(Views2Test, JobViewDrawsASustainedCurveWithTheTemperature) {
  int64_t job = 0;
  {
    auto s = store::OpenSqliteStore(db_.toStdString());
    ASSERT_TRUE(s.ok()) << s.message();
    auto id = (*s)->AddJob(runs_[0], CellJob("cpu", 1));
    ASSERT_TRUE(id.ok()) << id.message();
    job = *id;
    store::JobOutcome o = Ok(9000);
    store::JobSustained curve;
    curve.secs = 30;
    curve.window_ms = 250;
    for (int i = 0; i < 120; ++i) curve.windows.push_back({i * 250.0, 20, 9000, 9000.0 + i, 9900});
    o.sustained = curve;
    o.telemetry.clear();
    for (int k = 0; k < 4; ++k) {
      store::TelemetryRow t;
      t.phase = k == 0 ? "before" : k == 3 ? "after" : "during:000" + std::to_string(k);
      t.unix_ms = 1'700'000'000'000 + k * 10'000;
      t.hottest_temp_c = 40.0 + k * 8;
      o.telemetry.push_back(t);
    }
    auto recorded = (*s)->RecordJobResult(job, o);
    ASSERT_TRUE(recorded.ok()) << recorded.message();
  }
  JobView view;
  view.resize(1300, 800);
  view.setDatabase(db_);
  view.showJob(job);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_EQ(view.timelineChart()->title(), "Latency over time (sustained 30.0 s)");
  const QList<QAbstractSeries*> series = view.timelineChart()->series();
  ASSERT_EQ(series.size(), 2);
  auto* p50 = qobject_cast<QLineSeries*>(series[0]);
  ASSERT_NE(p50, nullptr);
  EXPECT_EQ(p50->count(), 120);
  EXPECT_DOUBLE_EQ(p50->at(119).y(), 9.119);
  auto* temp = qobject_cast<QLineSeries*>(series[1]);
  ASSERT_NE(temp, nullptr);
  ASSERT_EQ(temp->count(), 4);
  EXPECT_DOUBLE_EQ(temp->at(3).x(), 30);  // in time order, from the first reading
  EXPECT_DOUBLE_EQ(temp->at(3).y(), 64);
  if (const char* dir = std::getenv("QV2_SHOT_DIR")) {
    view.grab().save(QString(dir) + "/qv2_job_sustained.png");
  }
}

TEST_F(Views2Test, JobViewShowsEveryPartOfAJob) {
  JobView view;
  view.resize(1300, 800);
  view.setDatabase(db_);
  QAbstractItemModelTester accuracy(view.accuracyModel(),
                                    QAbstractItemModelTester::FailureReportingMode::Warning);
  QAbstractItemModelTester placement(view.placementModel(),
                                     QAbstractItemModelTester::FailureReportingMode::Warning);
  QAbstractItemModelTester profile(view.profileModel(),
                                   QAbstractItemModelTester::FailureReportingMode::Warning);
  QAbstractItemModelTester telemetry(view.telemetryModel(),
                                     QAbstractItemModelTester::FailureReportingMode::Warning);
  view.showJob(firstJob_);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_EQ(view.message(), "");
  const QString header = view.headerText();
  EXPECT_TRUE(header.contains("face.tflite")) << header.toStdString();
  EXPECT_TRUE(header.contains(QString(64, 'c'))) << header.toStdString();  // runner build
  EXPECT_TRUE(header.contains("runner <b>main</b>")) << header.toStdString();
  EXPECT_TRUE(
      header.contains("cold (compiling) <b>2.00 ms</b>, warm (serialized cache) "
                      "<b>0.30 ms</b>"))
      << header.toStdString();
  EXPECT_TRUE(header.contains("task accuracy on digits@0123456789ab (120 images)"))
      << header.toStdString();
  EXPECT_TRUE(header.contains("top-1 <b>97.5% (94.2-100.0)</b>")) << header.toStdString();
  EXPECT_EQ(view.stderrText(), "");  // an ok job shows no stderr

  const auto* acc = view.accuracyModel();
  ASSERT_EQ(acc->rowCount(), 1);
  EXPECT_EQ(acc->index(0, AccuracyModel::NameColumn).data().toString(), "scores");
  EXPECT_EQ(acc->index(0, AccuracyModel::SnrColumn).data().toString(), "61.5");
  EXPECT_EQ(acc->index(0, AccuracyModel::PsnrColumn).data().toString(), "");
  EXPECT_EQ(acc->index(0, AccuracyModel::LsbColumn).data().toString(), "2");
  EXPECT_EQ(acc->index(0, AccuracyModel::Top1Column).data().toString(), "yes");

  const auto* pl = view.placementModel();
  ASSERT_EQ(pl->rowCount(), 3);
  // The folded node is listed last, apart.
  EXPECT_EQ(pl->index(2, PlacementModel::OpColumn).data().toString(), "RESHAPE");
  EXPECT_EQ(pl->index(2, PlacementModel::DelegateColumn).data().toString(), "folded at load");
  EXPECT_EQ(pl->index(1, PlacementModel::ReasonColumn).data().toString(),
            "xnnpack: CUSTOM is not supported");
  EXPECT_EQ(pl->index(0, PlacementModel::PartitionColumn).data().toLongLong(), 0);

  const auto* prof = view.profileModel();
  ASSERT_EQ(prof->rowCount(), 2);
  EXPECT_EQ(prof->index(0, ProfileModel::OpColumn).data().toString(), "DELEGATE");
  EXPECT_EQ(prof->index(1, ProfileModel::ShareColumn).data().toString(), "30.0");
  EXPECT_TRUE(view.profileTitle().contains("2 op type(s)")) << view.profileTitle().toStdString();
  EXPECT_TRUE(view.profileTitle().contains("mean of 6 runs")) << view.profileTitle().toStdString();

  const auto* tel = view.telemetryModel();
  bool sawHottest = false, sawFreq = false, sawDuring = false;
  for (int r = 0; r < tel->rowCount(); ++r) {
    const QString fig = tel->index(r, TelemetryModel::FigureColumn).data().toString();
    if (fig.startsWith("hottest zone")) {
      sawHottest = true;
      EXPECT_EQ(tel->index(r, TelemetryModel::BeforeColumn).data().toString(), "45.5");
      EXPECT_EQ(tel->index(r, TelemetryModel::AfterColumn).data().toString(), "71.0");
    }
    if (fig == "while running: hottest zone (C)") {
      sawDuring = true;
      EXPECT_EQ(tel->index(r, TelemetryModel::BeforeColumn).data().toString(), "52.0 to 66.5");
      EXPECT_EQ(tel->index(r, TelemetryModel::AfterColumn).data().toString(), "2 sample(s)");
    }
    if (fig == "cpu freq") {  // the state's cpu_freq_khz, with its unit
      sawFreq = true;
      EXPECT_EQ(tel->index(r, TelemetryModel::AfterColumn).data().toString(), "1200 MHz");
    }
  }
  EXPECT_TRUE(sawHottest);
  EXPECT_TRUE(sawDuring);
  EXPECT_TRUE(sawFreq);
  EXPECT_FALSE(view.histogramChart()->series().isEmpty());
  EXPECT_TRUE(view.timelineChart()->title().contains("throttled"));
  bool warmup = false;
  for (QAbstractSeries* s : view.timelineChart()->series()) {
    warmup = warmup || s->name().startsWith("warm-up mean");
  }
  EXPECT_TRUE(warmup);
  if (const char* dir = std::getenv("QV2_SHOT_DIR")) {
    view.grab().save(QString(dir) + "/qv2_job_synthetic.png");
  }

  view.showJob(crashedJob_);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_TRUE(view.headerText().contains("crashed"));
  EXPECT_TRUE(view.stderrText().contains("Segmentation fault")) << view.stderrText().toStdString();
  EXPECT_EQ(view.accuracyModel()->rowCount(), 0);
  EXPECT_TRUE(view.histogramChart()->title().contains("no samples"));

  view.showJob(999999);
  ASSERT_TRUE(WaitReady(view));
  EXPECT_TRUE(view.message().contains("999999")) << view.message().toStdString();
  EXPECT_EQ(g_warnings, 0);
}

TEST(LatencyHistogram, BinsEverySampleOnce) {
  EXPECT_TRUE(latencyHistogram({}).empty());
  auto one = latencyHistogram({5, 5, 5});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].count, 3);
  std::vector<double> samples;
  for (int i = 0; i < 100; ++i) samples.push_back(1000 + i);
  auto bins = latencyHistogram(samples);
  ASSERT_EQ(bins.size(), 10u);
  int total = 0;
  for (const HistogramBin& b : bins) total += b.count;
  EXPECT_EQ(total, 100);
  EXPECT_EQ(bins.back().count, 10);  // the maximum lands in the last bin
}

// The compare view shows each cell's task accuracy on both sides, with its
// interval; the column stays hidden for runs without any.
TEST_F(Views2Test, CompareViewShowsTaskAccuracyOfBothRuns) {
  CompareView view;
  view.resize(1600, 600);
  view.setDatabase(db_);
  view.showCompare(runs_[0], runs_[11]);
  ASSERT_TRUE(WaitReady(view));
  const CompareModel* model = view.model();
  ASSERT_EQ(model->rowCount(), 3);  // xnnpack, cpu, and gpu (candidate only)
  EXPECT_TRUE(model->hasTask());
  EXPECT_FALSE(view.table()->isColumnHidden(CompareModel::TaskColumn));
  EXPECT_EQ(model->headerData(CompareModel::TaskColumn, Qt::Horizontal).toString(),
            "Task accuracy");
  std::map<QString, QString> shown;  // delegate -> baseline → candidate
  for (int r = 0; r < model->rowCount(); ++r) {
    shown[QString::fromStdString(model->cells()[r].cell.delegate)] =
        model->index(r, CompareModel::TaskColumn).data().toString();
  }
  EXPECT_EQ(shown["xnnpack"], "top-1 97.5% (94.2-100.0) → 90.0% (85.0-95.0)");
  EXPECT_EQ(shown["cpu"], "top-1 97.5% (94.2-100.0) → 97.5% (94.2-100.0)");
  EXPECT_EQ(shown["gpu"], "–");  // crashed, and not in the baseline

  // Without task accuracy on either side the column is hidden.
  CompareModel plain;
  auto s = store::OpenSqliteStore(db_.toStdString());
  ASSERT_TRUE(s.ok());
  auto data = ReadCompare(**s, runs_[0], runs_[11]);
  ASSERT_TRUE(data.ok()) << data.message();
  EXPECT_FALSE(data->task.empty());
  plain.setCells(data->gate.cells);
  EXPECT_FALSE(plain.hasTask());
  EXPECT_EQ(plain.index(0, CompareModel::TaskColumn).data().toString(), "–");
}

TEST_F(Views2Test, ExportChartWritesPngAndSvg) {
  TrendView view;
  view.resize(900, 600);
  view.setDatabase(db_);
  view.showCell(cell_);
  ASSERT_TRUE(WaitReady(view));
  const QString png = dir_.filePath("trend.png");
  const QString svg = dir_.filePath("trend.SVG");
  auto a = ExportChart(view.exportableChart(), png);
  ASSERT_TRUE(a.ok()) << a.message();
  auto b = ExportChart(view.exportableChart(), svg);
  ASSERT_TRUE(b.ok()) << b.message();
  QFile pngFile(png);
  ASSERT_TRUE(pngFile.open(QIODevice::ReadOnly));
  EXPECT_TRUE(pngFile.read(8).startsWith("\x89PNG"));
  QFile svgFile(svg);
  ASSERT_TRUE(svgFile.open(QIODevice::ReadOnly));
  const QByteArray text = svgFile.readAll();
  EXPECT_TRUE(text.contains("<svg")) << text.left(200).toStdString();
  EXPECT_TRUE(text.contains("median of ok trials"));  // the legend, as text

  auto bad = ExportChart(view.exportableChart(), dir_.filePath("trend.jpg"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(".svg"), std::string::npos);
  EXPECT_FALSE(ExportChart(nullptr, png).ok());
  auto nodir = ExportChart(view.exportableChart(), dir_.filePath("no/such/dir/t.svg"));
  EXPECT_FALSE(nodir.ok());
  EXPECT_FALSE(ExportChart(view.exportableChart(), dir_.filePath("no/such/dir/t.png")).ok());
}

// Renders both views on a real sweep's database (QV2_DB, screenshots to
// QV2_SHOT_DIR): the first cell's trend and its first job.
TEST(Views2RealDb, ScreenshotsOfTheFirstCell) {
  const char* db = std::getenv("QV2_DB");
  const char* dir = std::getenv("QV2_SHOT_DIR");
  if (!db || !dir) GTEST_SKIP() << "set QV2_DB and QV2_SHOT_DIR to render a real database";
  auto s = store::OpenSqliteStore(db);
  ASSERT_TRUE(s.ok()) << s.message();
  auto runs = (*s)->ListRuns();
  ASSERT_TRUE(runs.ok() && !runs->empty());
  auto jobs = (*s)->ListJobs(runs->back().id);
  ASSERT_TRUE(jobs.ok() && !jobs->empty());
  const store::JobRow& j = (*jobs)[0];
  const store::Cell cell = store::CellOf(j);
  TrendView trend;
  trend.resize(1200, 800);
  trend.setDatabase(db);
  trend.showCell(cell);
  ASSERT_TRUE(WaitReady(trend));
  EXPECT_EQ(trend.message(), "");
  EXPECT_TRUE(trend.grab().save(QString(dir) + "/qv2_trend.png"));
  EXPECT_TRUE(ExportChart(trend.exportableChart(), QString(dir) + "/qv2_trend_chart.svg").ok());
  JobView job;
  job.resize(1400, 900);
  job.setDatabase(db);
  job.showJob(j.id);
  ASSERT_TRUE(WaitReady(job));
  EXPECT_EQ(job.message(), "");
  EXPECT_TRUE(job.grab().save(QString(dir) + "/qv2_job.png"));
}

}  // namespace
}  // namespace dfarm::gui
