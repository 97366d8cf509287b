// The live view's watcher on a farm's database: a real PostgreSQL server
// (reports/store/testing/pg_server.h), written by another connection.
#include "gui/live.h"

#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTest>

#include "reports/store/store.h"
#include "reports/store/testing/pg_server.h"

namespace dfarm::gui {
namespace {

TEST(LivePostgresTest, ReportsAnotherConnectionsWritesAndNothingWhileIdle) {
  std::string why;
  if (!store::testing::PgServerAvailable(&why)) {
    if (qEnvironmentVariableIsSet("DFARM_SKIP_POSTGRES")) GTEST_SKIP() << why;
    FAIL() << "PostgreSQL cannot start here: " << why;
  }
  auto server = store::testing::PgServer::Start();
  ASSERT_TRUE(server.ok()) << server.message();
  auto url = (*server)->CreateDatabase("live");
  ASSERT_TRUE(url.ok()) << url.message();
  auto writer = store::OpenStore(*url);
  ASSERT_TRUE(writer.ok()) << writer.message();

  DatabaseWatcher watcher;
  watcher.setInterval(100);
  QSignalSpy changes(&watcher, &DatabaseWatcher::changed);
  watcher.watch(QString::fromStdString(*url));
  EXPECT_TRUE(watcher.isWatching());
  // Reads (the dashboard's own) are no change.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*writer)->ListRuns().ok());
    QTest::qWait(100);
  }
  EXPECT_EQ(changes.count(), 0);

  auto run = (*writer)->CreateRun("nightly", "{}");
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_TRUE(changes.wait(5000));
  const int after_first = changes.count();
  EXPECT_GE(after_first, 1);
  ASSERT_TRUE((*writer)->FinishRun(*run, store::kRunFinished).ok());
  EXPECT_TRUE(QTest::qWaitFor([&] { return changes.count() > after_first; }, 5000));
  watcher.stop();
  EXPECT_FALSE(watcher.isWatching());
}

}  // namespace
}  // namespace dfarm::gui
