// The live mode on both backends (a SQLite file and a real PostgreSQL server,
// reports/store/testing/pg_server.h), written by another connection: the
// watcher reports results and status changes, never heartbeats or reads,
// and the window re-reads its open view only then, one read at a time.
#include "gui/live.h"

#include <gtest/gtest.h>

#include <QLabel>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "gui/gui_test_util.h"
#include "gui/main_window.h"
#include "gui/table_copy.h"
#include "reports/store/store.h"
#include "reports/store/testing/pg_server.h"

namespace dfarm::gui {
namespace {

using test_util::Job;

// A store on a backend with one queue run holding one job, a registered
// node serving "phone", and the device row, as a farm has them.
class LiveTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      std::string why;
      if (!store::testing::PgServerAvailable(&why)) {
        if (qEnvironmentVariableIsSet("DFARM_SKIP_POSTGRES")) GTEST_SKIP() << why;
        FAIL() << "PostgreSQL cannot start here: " << why;
      }
      auto server = store::testing::PgServer::Start();
      ASSERT_TRUE(server.ok()) << server.message();
      server_ = std::move(*server);
      auto url = server_->CreateDatabase("live");
      ASSERT_TRUE(url.ok()) << url.message();
      db_ = QString::fromStdString(*url);
    } else {
      ASSERT_TRUE(dir_.isValid());
      db_ = dir_.filePath("live.db");
    }
    auto writer = store::OpenStore(db_.toStdString());
    ASSERT_TRUE(writer.ok()) << writer.message();
    writer_ = std::move(*writer);
    store::DeviceRow device;
    device.name = "phone";
    device.node = "n1";
    ASSERT_TRUE(writer_->UpsertDevice(device).ok());
    ASSERT_TRUE(
        writer_->RegisterNode({"n1", "host", 42, store::NowIso8601(), 0, 0, "", {"phone"}}).ok());
    auto run = writer_->CreateRun("farm", "{}");
    ASSERT_TRUE(run.ok()) << run.message();
    run_ = *run;
    ASSERT_TRUE(writer_->SetRunMode(run_, store::kRunModeQueue).ok());
    store::JobRow job = Job("late_model.tflite", "cpu");
    job.target = store::kTargetAny;
    job.payload = "{}";
    auto id = writer_->AddJob(run_, job);
    ASSERT_TRUE(id.ok()) << id.message();
    job_ = *id;
  }

  // What a farm writes all the time without a change: node heartbeats that
  // renew leases, devices saying hello again, the sweep renewing its claim.
  void heartbeats() {
    ASSERT_TRUE(writer_->NodeHeartbeat("n1", store::kNodeRunning, 60).ok());
    store::DeviceRow device;
    device.name = "phone";
    device.node = "n1";
    ASSERT_TRUE(writer_->UpsertDevice(device).ok());
    ASSERT_TRUE(writer_->RefreshRunClaim(run_).ok());
  }

  void recordResult() {
    store::DeviceTraits phone{"phone",   "arm64-v8a", "Android",   "SM8550",
                              8LL << 30, {},          /*model=*/""};
    auto claimed = writer_->ClaimJob("n1", phone, 60);
    ASSERT_TRUE(claimed.ok() && claimed->has_value()) << claimed.message();
    store::JobOutcome ok;
    ok.status = store::kJobOk;
    ok.exit_code = 0;
    ok.claim_id = (*claimed)->claim_id;
    store::JobMetrics m;
    m.mean_us = 2000;
    ok.metrics = m;
    ok.samples_us = {2000, 2100};
    auto done = writer_->RecordJobResult(job_, ok);
    ASSERT_TRUE(done.ok()) << done.message();
  }

  // Waits for `n` more polls of watcher than now: what it saw by then, it
  // reported (each poll's report is queued before the next poll starts).
  static bool waitPolls(const DatabaseWatcher& watcher, quint64 n) {
    const quint64 target = watcher.polls() + n;
    return QTest::qWaitFor([&] { return watcher.polls() >= target; }, 20000);
  }

  QTemporaryDir dir_;
  std::unique_ptr<store::testing::PgServer> server_;
  QString db_;
  std::unique_ptr<store::Store> writer_;
  int64_t run_ = 0;
  int64_t job_ = 0;
};

TEST_P(LiveTest, WatcherReportsResultsNotHeartbeatsOrReads) {
  DatabaseWatcher watcher;
  watcher.setInterval(50);
  QSignalSpy changes(&watcher, &DatabaseWatcher::changed);
  watcher.watch(db_);
  EXPECT_TRUE(watcher.isWatching());
  ASSERT_TRUE(waitPolls(watcher, 1));  // the baseline
  for (int i = 0; i < 3; ++i) {
    heartbeats();
    ASSERT_TRUE(writer_->ListRuns().ok());
  }
  ASSERT_TRUE(waitPolls(watcher, 3));
  QCoreApplication::processEvents();
  EXPECT_EQ(changes.count(), 0) << "a heartbeat or a read counted as a change";

  recordResult();
  ASSERT_TRUE(changes.wait(20000)) << "a result was not reported";
  EXPECT_TRUE(watcher.error().isEmpty()) << qPrintable(watcher.error());
  watcher.stop();
  EXPECT_FALSE(watcher.isWatching());
}

TEST_P(LiveTest, WindowReReadsOnlyOnAChangeAndSaysUpdatedAfterPainting) {
  MainWindow window;
  window.watcher()->setInterval(50);
  window.openDatabase(db_);
  QSignalSpy reads(window.view(Page::Runs), &View::ready);
  QSignalSpy updated(&window, &MainWindow::liveUpdated);
  ASSERT_TRUE(QTest::qWaitFor([&] { return window.currentView()->isReady(); }, 20000));
  ASSERT_TRUE(waitPolls(*window.watcher(), 2));
  const int readsBefore = reads.count();
  heartbeats();
  ASSERT_TRUE(waitPolls(*window.watcher(), 3));
  QCoreApplication::processEvents();
  EXPECT_EQ(reads.count(), readsBefore) << "a heartbeat re-read the view";
  EXPECT_EQ(updated.count(), 0);

  recordResult();
  ASSERT_TRUE(updated.wait(20000)) << "the view was not re-read after a result";
  EXPECT_GT(reads.count(), readsBefore);
  // The runs view shows the finished job's count and the label says when.
  EXPECT_TRUE(tableToTsv(*tableToCopy(window.currentView())).contains("farm"));
  bool labelled = false;
  for (const QLabel* label : window.findChildren<QLabel*>())
    labelled = labelled || label->text().startsWith(QStringLiteral("Live: updated"));
  EXPECT_TRUE(labelled);
}

TEST_P(LiveTest, RefreshesDuringARead_ReadOnceMoreAfterIt) {
  MainWindow window;
  window.watcher()->setInterval(60000);  // only the refreshes below read
  window.openDatabase(db_);
  ASSERT_TRUE(QTest::qWaitFor([&] { return window.currentView()->isReady(); }, 20000));
  QSignalSpy reads(window.view(Page::Runs), &View::ready);
  window.refresh();
  window.refresh();  // in flight: these two coalesce into one pending read
  window.refresh();
  ASSERT_TRUE(QTest::qWaitFor([&] { return reads.count() >= 2; }, 20000));
  QTest::qWait(300);  // a third read would have started by now
  EXPECT_EQ(reads.count(), 2) << "a refresh during a read did not coalesce";
}

INSTANTIATE_TEST_SUITE_P(Backends, LiveTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "postgres" : "sqlite");
                         });

}  // namespace
}  // namespace dfarm::gui
