// The dashboard window: TSV copy, navigation and Back, live refresh while
// the database is written (from another thread and by a real `dfarm sweep`),
// and a screenshot of every view of a real sweep's database.
#include "gui/main_window.h"

#include <gtest/gtest.h>

#include <QApplication>
#include <QClipboard>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHeaderView>
#include <QImage>
#include <QProcess>
#include <QSet>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>
#include <thread>

#include "gui/gui_test_util.h"
#include "gui/live.h"
#include "gui/table_copy.h"
#include "reports/store/store.h"

namespace dfarm::gui {
namespace {

using test_util::Job;

store::JobOutcome Ok(double meanUs) {
  store::JobOutcome ok;
  ok.status = "ok";
  ok.exit_code = 0;
  ok.wall_ms = 900;
  store::JobMetrics m;
  m.mean_us = meanUs;
  m.p50_us = meanUs;
  m.p90_us = meanUs * 1.1;
  ok.metrics = m;
  ok.samples_us = {meanUs, meanUs * 1.05, meanUs * 0.95};
  return ok;
}

// Waits until the window's current page is ready (true) or timeoutMs passed.
bool waitReady(MainWindow& window, Page page, int timeoutMs = 20000) {
  return QTest::qWaitFor(
      [&] { return window.location().page == page && window.currentView()->isReady(); }, timeoutMs);
}

QString currentTsv(MainWindow& window) {
  QTableView* table = tableToCopy(window.currentView());
  return table != nullptr ? tableToTsv(*table) : QString();
}

TEST(TableCopy, ModelAsTsvWithHeaderAndCleanFields) {
  QStandardItemModel model(2, 2);
  model.setHorizontalHeaderLabels({"Model", "Mean"});
  model.setItem(0, 0, new QStandardItem("face\tdetect"));
  model.setItem(0, 1, new QStandardItem("1.5 ms"));
  model.setItem(1, 0, new QStandardItem("hand\nlite"));
  model.setItem(1, 1, new QStandardItem("2 ms"));
  EXPECT_EQ(modelToTsv(model), "Model\tMean\nface detect\t1.5 ms\nhand lite\t2 ms\n");
}

TEST(TableCopy, TableViewOrderWithoutHiddenColumnsOrRows) {
  QStandardItemModel model(3, 3);
  model.setHorizontalHeaderLabels({"A", "B", "C"});
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      model.setItem(r, c, new QStandardItem(QString("%1%2").arg(r).arg(c)));
  QTableView view;
  view.setModel(&model);
  view.setColumnHidden(1, true);
  view.setRowHidden(0, true);
  view.horizontalHeader()->moveSection(2, 0);  // C shown first
  EXPECT_EQ(tableToTsv(view), "C\tA\n12\t10\n22\t20\n");
}

class WindowTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("farm.db");
    auto opened = store::OpenSqliteStore(db_.toStdString());
    ASSERT_TRUE(opened.ok()) << opened.message();
    auto& s = *opened;
    for (const char* name : {"nightly", "candidate"}) {
      auto run = s->CreateRun(name, "{}");
      ASSERT_TRUE(run.ok()) << run.message();
      auto ids = s->AddJobs(*run, {Job("face.tflite", "cpu"), Job("face.tflite", "xnnpack")});
      ASSERT_TRUE(ids.ok()) << ids.message();
      for (int64_t id : *ids) ASSERT_TRUE(s->RecordJobResult(id, Ok(1000)).ok());
      ASSERT_TRUE(s->FinishRun(*run, store::kRunFinished).ok());
      runs_.push_back(*run);
    }
  }

  QTemporaryDir dir_;
  QString db_;
  std::vector<int64_t> runs_;
};

TEST_F(WindowTest, CtrlCCopiesTheFocusedTableAsTsv) {
  MainWindow window;
  window.openDatabase(db_);
  window.show();
  ASSERT_TRUE(waitReady(window, Page::Runs));
  QTableView* table = tableToCopy(window.currentView());
  ASSERT_NE(table, nullptr);
  table->setFocus();
  QApplication::clipboard()->clear();
  QTest::keyClick(table, Qt::Key_C, Qt::ControlModifier);
  const QString tsv = QApplication::clipboard()->text();
  EXPECT_EQ(tsv, tableToTsv(*table));
  const QStringList lines = tsv.split('\n', Qt::SkipEmptyParts);
  ASSERT_EQ(lines.size(), 3) << qPrintable(tsv);  // header + two runs
  EXPECT_TRUE(lines[0].contains('\t'));
  EXPECT_TRUE(tsv.contains("nightly")) << qPrintable(tsv);
  EXPECT_TRUE(tsv.contains("candidate")) << qPrintable(tsv);
}

TEST_F(WindowTest, KeysOpenEveryViewAndBackReturns) {
  MainWindow window;
  window.openDatabase(db_);
  window.show();
  ASSERT_TRUE(waitReady(window, Page::Runs));
  const Page pages[] = {Page::Matrix, Page::Trend,   Page::Compare,
                        Page::Job,    Page::Devices, Page::Runs};
  for (int i : {2, 3, 4, 5, 6, 1}) {
    QTest::keyClick(&window, static_cast<Qt::Key>(Qt::Key_0 + i), Qt::ControlModifier);
    ASSERT_TRUE(waitReady(window, pages[i == 1 ? 5 : i - 2])) << "Ctrl+" << i;
  }
  window.goToPage(Page::Matrix);
  ASSERT_TRUE(waitReady(window, Page::Matrix));
  EXPECT_EQ(window.location().runId, runs_.back());  // the newest run
  emit window.view(Page::Matrix)->openJob(1);
  ASSERT_TRUE(waitReady(window, Page::Job));
  EXPECT_EQ(window.location().jobId, 1);
  QTest::keyClick(&window, Qt::Key_Left, Qt::AltModifier);
  ASSERT_TRUE(waitReady(window, Page::Matrix));
  emit window.view(Page::Runs)->compareRuns(runs_[0], runs_[1]);
  ASSERT_TRUE(waitReady(window, Page::Compare));
  EXPECT_EQ(window.location().baselineId, runs_[0]);
  EXPECT_EQ(window.location().runId, runs_[1]);
}

TEST_F(WindowTest, EveryPageOfTheTableOpensByItsName) {
  MainWindow window;
  window.openDatabase(db_);
  window.show();
  ASSERT_TRUE(waitReady(window, kFirstPage));
  for (int i = kPageCount - 1; i >= 0; --i) {
    Page page = kFirstPage;
    ASSERT_TRUE(parsePage(pageName(static_cast<Page>(i)), &page));
    window.goToPage(page);
    ASSERT_TRUE(waitReady(window, page)) << qPrintable(pageName(page));
    EXPECT_EQ(window.currentView(), window.view(page));
    EXPECT_TRUE(window.location().valid()) << qPrintable(pageName(page));
  }
}

TEST_F(WindowTest, ViewsSignalsGoToThePageOfTheirSubject) {
  MainWindow window;
  window.openDatabase(db_);
  window.show();
  ASSERT_TRUE(waitReady(window, Page::Runs));
  emit window.view(Page::Runs)->openRun(runs_[0]);
  ASSERT_TRUE(waitReady(window, pageShowing(Subject::Run)->page));
  EXPECT_EQ(window.location().runId, runs_[0]);
  window.goToPage(Page::Trend);  // the newest run's first cell
  ASSERT_TRUE(waitReady(window, Page::Trend));
  const store::Cell cell = window.location().cell;
  ASSERT_FALSE(cell.model.empty());
  window.back();
  ASSERT_TRUE(waitReady(window, Page::Matrix));
  emit window.view(Page::Matrix)->openCell(cell);
  ASSERT_TRUE(waitReady(window, pageShowing(Subject::Cell)->page));
  EXPECT_TRUE(window.location().cell == cell);
  EXPECT_EQ(window.location().jobId, 0);
}

TEST_F(WindowTest, TheWindowsOwnReadsAreNoChange) {
  // The views' own reads (each opens and closes the database) must not look
  // like writes, or the window would re-read forever.
  MainWindow window;
  window.watcher()->setInterval(50);
  window.openDatabase(db_);
  window.show();
  for (Page page :
       {Page::Runs, Page::Matrix, Page::Trend, Page::Compare, Page::Job, Page::Devices}) {
    window.goToPage(page);
    ASSERT_TRUE(waitReady(window, page)) << qPrintable(pageName(page));
  }
  QTest::qWait(1000);
  EXPECT_EQ(window.watcher()->changeCount(), 0u);
}

TEST_F(WindowTest, OpenRunShowsNewJobsAppendedFromAnotherThreadWithoutReload) {
  MainWindow window;
  window.watcher()->setInterval(100);
  window.openDatabase(db_);
  window.show();
  Location matrix;
  matrix.page = Page::Matrix;
  matrix.runId = runs_.back();
  window.go(matrix);
  ASSERT_TRUE(waitReady(window, Page::Matrix));
  ASSERT_FALSE(currentTsv(window).contains("late_model")) << qPrintable(currentTsv(window));
  QSignalSpy changes(window.watcher(), &DatabaseWatcher::changed);

  const int64_t run = runs_.back();
  std::string error;
  std::thread writer([this, run, &error] {
    auto s = store::OpenSqliteStore(db_.toStdString());
    if (!s) {
      error = s.message();
      return;
    }
    auto ids = (*s)->AddJobs(run, {Job("late_model.tflite", "cpu")});
    if (!ids) {
      error = ids.message();
      return;
    }
    auto done = (*s)->RecordJobResult(ids->front(), Ok(2000));
    if (!done) error = done.message();
  });
  writer.join();
  ASSERT_EQ(error, "");
  // No refresh() or reload: the watcher sees the write, the view re-reads.
  EXPECT_TRUE(QTest::qWaitFor([&] { return currentTsv(window).contains("late_model"); }, 10000))
      << "the runs view did not show the run written after it was read";
  EXPECT_GE(changes.count(), 1);
}

// ---- A real sweep's database (dfarm, the agent and the runner built).

const QString kDfarm = QStringLiteral(DFARM_BIN);
const QString kModel = QStringLiteral(DFARM_MODELS_DIR "/face_detection_short_range.tflite");

// numRuns and repeats set how long the sweep takes (about 1 ms a run).
bool writeSpec(const QString& file, int numRuns, int repeats) {
  QFile f(file);
  if (!f.open(QIODevice::WriteOnly)) return false;
  f.write(QStringLiteral("{\"name\": \"dashboard\", \"models\": [\"%1\"],\n"
                         " \"delegates\": [{\"name\": \"cpu\"}, {\"name\": \"xnnpack\"}],\n"
                         " \"devices\": [\"local\"],\n"
                         " \"benchmark\": {\"warmup_runs\": 2, \"num_runs\": %2, "
                         "\"repeats\": %3}}\n")
              .arg(kModel)
              .arg(numRuns)
              .arg(repeats)
              .toUtf8());
  return true;
}

QProcess* startSweep(const QString& spec, const QString& db, QObject* parent) {
  auto* p = new QProcess(parent);
  p->setProcessChannelMode(QProcess::MergedChannels);
  p->start(kDfarm, {"sweep", spec, "--db", db});
  return p;
}

class SweepTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!QFile::exists(kDfarm) || !QFile::exists(kModel))
      GTEST_SKIP() << "needs " << qPrintable(kDfarm) << " and " << qPrintable(kModel);
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("farm.db");
    spec_ = dir_.filePath("spec.json");
    ASSERT_TRUE(writeSpec(spec_, 20, 2));
    slowSpec_ = dir_.filePath("slow.json");
    ASSERT_TRUE(writeSpec(slowSpec_, 100, 2));
  }
  // Runs one sweep to its end; its output on failure.
  void sweep() {
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(kDfarm, {"sweep", spec_, "--db", db_});
    ASSERT_TRUE(p.waitForFinished(300000));
    ASSERT_EQ(p.exitCode(), 0) << p.readAll().toStdString();
  }

  QTemporaryDir dir_;
  QString db_;
  QString spec_;
  QString slowSpec_;  // a longer sweep (the test holds it mid-run)
};

// The newest run's status in `db` ("" when there is none after `after`).
std::string newestRunStatus(const QString& db, size_t after) {
  auto st = store::OpenStore(db.toStdString());
  if (!st) return "";
  auto runs = (*st)->ListRuns();
  if (!runs || runs->size() <= after) return "";
  return runs->back().status;
}

TEST_F(SweepTest, OpenRunUpdatesLiveWhileASweepWrites) {
  sweep();  // a first run, so the window has something to open
  MainWindow window;
  window.openDatabase(db_);
  window.show();
  ASSERT_TRUE(waitReady(window, Page::Runs));
  const int runsBefore = currentTsv(window).count('\n');

  QProcess* sweeping = startSweep(slowSpec_, db_, &window);
  ASSERT_TRUE(sweeping->waitForStarted());
  // Hold the sweep (SIGSTOP) as soon as its run exists, so the window reads
  // the run half written however fast the machine is; it goes on (SIGCONT)
  // after that read.
  std::string status;
  for (int i = 0; i < 60000 && status.empty() && sweeping->state() != QProcess::NotRunning; ++i) {
    status = newestRunStatus(db_, 1);
    if (status.empty()) QTest::qWait(5);
  }
  const pid_t pid = static_cast<pid_t>(sweeping->processId());
  const bool held = pid > 0 && ::kill(pid, SIGSTOP) == 0;
  const bool stillRunning = held && newestRunStatus(db_, 1) == store::kRunRunning;
  QSignalSpy matrixReads(window.view(Page::Matrix), &View::ready);
  // The new run appears in the runs view on its own.
  ASSERT_TRUE(QTest::qWaitFor([&] { return currentTsv(window).count('\n') > runsBefore; }, 60000))
      << "the new run did not appear in the runs view";
  // Open the newest run while the sweep is held mid-run.
  window.goToPage(Page::Matrix);
  ASSERT_TRUE(waitReady(window, Page::Matrix));
  const QString whileRunning = currentTsv(window);
  if (held) ::kill(pid, SIGCONT);
  ASSERT_TRUE(sweeping->waitForFinished(300000));
  ASSERT_EQ(sweeping->exitCode(), 0) << sweeping->readAll().toStdString();

  // What a fresh window shows of the finished run...
  MainWindow fresh;
  fresh.openDatabase(db_);
  fresh.go(window.location());
  ASSERT_TRUE(waitReady(fresh, Page::Matrix));
  const QString finished = currentTsv(fresh);
  // ... the open window shows too, without a reload.
  QTest::qWaitFor([&] { return currentTsv(window) == finished; }, 15000);
  EXPECT_EQ(currentTsv(window).toStdString(), finished.toStdString());
  if (stillRunning) {
    EXPECT_NE(whileRunning, finished) << "the run did not change after the window read it";
    EXPECT_GE(matrixReads.count(), 2) << "the matrix was not re-read while the sweep wrote";
  } else {
    std::fprintf(stderr, "note: the sweep finished before it could be held (status '%s')\n",
                 status.c_str());
  }
}

bool notBlank(const QImage& image) {
  QSet<QRgb> colours;
  for (int y = 0; y < image.height(); y += 3)
    for (int x = 0; x < image.width(); x += 3) colours.insert(image.pixel(x, y));
  return colours.size() > 8;
}

TEST_F(SweepTest, ScreenshotOfEveryViewOfTwoRealRuns) {
  sweep();
  sweep();
  const QString out = QStringLiteral(DFARM_GUI_TEST_OUT);
  ASSERT_TRUE(QDir().mkpath(out));

  // In this process: every view opens on the real database and gets ready.
  MainWindow window;
  window.openDatabase(db_);
  window.show();
  for (Page page :
       {Page::Runs, Page::Matrix, Page::Trend, Page::Compare, Page::Job, Page::Devices}) {
    window.goToPage(page);
    ASSERT_TRUE(waitReady(window, page)) << qPrintable(pageName(page));
  }

  // Ctrl+E's export: the job view's chart as PNG and SVG.
  window.goToPage(Page::Job);
  ASSERT_TRUE(waitReady(window, Page::Job));
  for (const char* suffix : {".png", ".svg"}) {
    const QString file = out + "/job_chart" + suffix;
    QFile::remove(file);
    EXPECT_TRUE(window.exportChart(file)) << qPrintable(file);
    EXPECT_GT(QFileInfo(file).size(), 1000) << qPrintable(file);
  }

  // The program: --view X --screenshot FILE for each view.
  for (int i = 0; i < kPageCount; ++i) {
    const QString name = pageName(static_cast<Page>(i));
    const QString png = out + "/dash_" + name + ".png";
    QFile::remove(png);
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(QStringLiteral(DFARM_DASHBOARD_BIN), {db_, "--view", name, "--screenshot", png});
    ASSERT_TRUE(p.waitForFinished(90000)) << qPrintable(name);
    EXPECT_EQ(p.exitCode(), 0) << qPrintable(name) << ": " << p.readAll().toStdString();
    QImage image(png);
    ASSERT_FALSE(image.isNull()) << qPrintable(png);
    EXPECT_GE(image.width(), 800);
    EXPECT_TRUE(notBlank(image)) << qPrintable(png) << " is (nearly) one colour";
    QFile::remove("/tmp/dash_" + name + ".png");
    QFile::copy(png, "/tmp/dash_" + name + ".png");
  }
}

TEST(DashboardProgram, UnknownViewNamesTheChoices) {
  QProcess p;
  p.setProcessChannelMode(QProcess::MergedChannels);
  p.start(QStringLiteral(DFARM_DASHBOARD_BIN), {"x.db", "--view", "graphs"});
  ASSERT_TRUE(p.waitForFinished(30000));
  EXPECT_EQ(p.exitCode(), 1);
  EXPECT_TRUE(p.readAll().contains("runs|matrix|trend|compare|job|devices"));
}

TEST(DashboardProgram, UnknownViewListsEveryPageAndHelpToo) {
  for (const char* option : {"--view", "--help"}) {
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(QStringLiteral(DFARM_DASHBOARD_BIN), {"x.db", option, "graphs"});
    ASSERT_TRUE(p.waitForFinished(30000)) << option;
    const QString out = QString::fromUtf8(p.readAll());
    EXPECT_TRUE(out.contains(pageChoices())) << option << ": " << qPrintable(out);
    for (int i = 0; i < kPageCount; ++i) {
      const PageInfo& info = pageInfo(static_cast<Page>(i));
      EXPECT_TRUE(out.contains(QLatin1String(info.name))) << option << ": " << info.name;
    }
  }
}

// A link opens its view (a positional dfarm:// argument or --open); a bad
// one, or one naming a run the database does not hold, exits 4 with the
// reason on stderr, without a crash.
TEST(DashboardProgram, LinksOpenTheirViewAndBadLinksExitFour) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString db = dir.filePath("links.db");
  int64_t run = 0;
  Location tuned;  // a trend with its metric, date range and zoom
  {
    auto s = store::OpenSqliteStore(db.toStdString());
    ASSERT_TRUE(s.ok()) << s.message();
    auto created = (*s)->CreateRun("nightly", "{}");
    ASSERT_TRUE(created.ok());
    run = *created;
    ASSERT_TRUE((*s)->AddJobs(run, {test_util::Job("m.tflite", "cpu")}).ok());
    auto jobs = (*s)->ListJobs(run);
    ASSERT_TRUE(jobs.ok() && !jobs->empty());
    tuned.page = Page::Trend;
    tuned.cell = store::CellOf(jobs->front());
    tuned.trend.metric = reports::HistoryMetric::kMean;
    tuned.trend.from = QDate(2020, 1, 1);
    tuned.trend.to = QDate(2030, 1, 1);
    tuned.trend.zoomFirstRun = tuned.trend.zoomLastRun = run;
  }
  const QString png = dir.filePath("link.png");
  const struct {
    QStringList args;
    int code;
    const char* says;
  } cases[] = {
      {{db, QString("dfarm://matrix?run=%1").arg(run)}, 0, ""},
      {{db, "--open", "dfarm://overview"}, 0, ""},
      {{db, "dfarm://matrix?run=999"}, 4, "run 999 does not exist"},
      {{db, "--open", "dfarm://graphs"}, 4, "unknown view 'graphs'"},
      {{db, "dfarm://job?job=x"}, 4, "job=x is not an id"},
      {{db, locationLink(tuned)}, 0, ""},
      {{db, "dfarm://trend?metric=nope"}, 4, "metric=nope is not a metric"},
      {{db, "dfarm://trend?zoom=2-1"}, 4, "zoom=2-1 is not FIRST-LAST"},
  };
  for (const auto& c : cases) {
    QFile::remove(png);
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(QStringLiteral(DFARM_DASHBOARD_BIN), c.args + QStringList{"--screenshot", png});
    ASSERT_TRUE(p.waitForFinished(90000)) << qPrintable(c.args.join(' '));
    const QString out = QString::fromUtf8(p.readAll());
    EXPECT_EQ(p.exitCode(), c.code) << qPrintable(c.args.join(' ')) << ": " << qPrintable(out);
    EXPECT_EQ(p.exitStatus(), QProcess::NormalExit);
    EXPECT_TRUE(out.contains(c.says)) << qPrintable(out);
    if (c.code == 0) EXPECT_FALSE(QImage(png).isNull()) << qPrintable(c.args.join(' '));
  }
}

}  // namespace
}  // namespace dfarm::gui
