// The dashboard's shared pieces (tooltips, LoadAsync) over a real SQLite
// store, without a display. The views' models are tested in gui/views/.
#include <gtest/gtest.h>

#include <QFileInfo>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <QtGlobal>

#include "gui/format.h"
#include "gui/gui_test_util.h"
#include "gui/store_loader.h"

namespace dfarm::gui {
namespace {

using test_util::Job;

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

// Text in the database comes from agents: a tooltip that looks like HTML is
// shown as written, not rendered (strings from an agent).
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
  auto store = OpenDashboardStore(missing);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(store.message().find("nope.db"), std::string::npos) << store.message();
  EXPECT_FALSE(QFileInfo::exists(missing));
}

TEST_F(DashboardTest, LoadAsyncDeliversOnTheReceiversThread) {
  QObject receiver;
  bool called = false;
  LoadAsync<std::vector<store::JobRow>>(
      db_, &receiver, [this](store::Reader& s) { return s.ListJobs(first_run_); },
      [&](const Result<std::vector<store::JobRow>>& jobs) {
        called = true;
        EXPECT_EQ(QThread::currentThread(), receiver.thread());
        ASSERT_TRUE(jobs) << jobs.message();
        EXPECT_EQ(jobs->size(), 3u);
      });
  EXPECT_TRUE(QTest::qWaitFor([&] { return called; }, 10000)) << "no result was delivered";
}

TEST_F(DashboardTest, LoadAsyncReportsAMissingDatabase) {
  QObject receiver;
  std::string error;
  LoadAsync<int>(
      dir_.filePath("gone.db"), &receiver, [](store::Reader&) -> Result<int> { return 1; },
      [&](const Result<int>& r) { error = r ? "loaded" : r.message(); });
  EXPECT_TRUE(QTest::qWaitFor([&] { return !error.empty(); }, 10000)) << "no result was delivered";
  EXPECT_NE(error.find("gone.db"), std::string::npos) << error;
}

}  // namespace
}  // namespace dfarm::gui
