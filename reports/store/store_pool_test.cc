// StorePool on real stores of both backends: at most its size of
// connections, each call on one alone, first come first served; a lost
// PostgreSQL connection is replaced; a failed open is the call's error.
#include "reports/store/store_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "reports/store/store_test_fixture.h"

namespace dfarm::store {
namespace {

using std::chrono::seconds;

class StorePoolTest : public StoreTest {
 protected:
  StorePool::Opener Opener() {
    return [this]() -> Result<std::unique_ptr<Store>> {
      auto s = Open();
      if (!s) return MakeError("cannot open " + where_);
      return s;
    };
  }
};

// Waits (generously) until `done` holds; false on the deadline.
template <typename F>
bool WaitUntil(F done) {
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST_P(StorePoolTest, HandsOutAtMostItsSizeOneCallAConnection) {
  StorePool pool(Opener(), 2);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> inside{0}, most{0};
  std::vector<const Store*> held;
  auto hold = [&](Store& s) -> Result<void> {
    const int now = ++inside;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::unique_lock lock(mu);
    held.push_back(&s);
    cv.wait(lock, [&] { return release; });
    --inside;
    return Ok();
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { ASSERT_TRUE(pool.Call(hold).ok()); });
  ASSERT_TRUE(WaitUntil([&] { return inside.load() == 2; }));
  threads.emplace_back([&] { ASSERT_TRUE(pool.Call(hold).ok()); });
  ASSERT_TRUE(WaitUntil([&] { return pool.waiting() == 1; }));
  EXPECT_EQ(inside.load(), 2);  // the third waits for one of the two
  EXPECT_EQ(pool.open(), 2);
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(held.size(), 2u);
    EXPECT_NE(held[0], held[1]);
    release = true;
  }
  cv.notify_all();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(most.load(), 2);
  EXPECT_EQ(pool.waiting(), 0);

  // Eight threads of real writes and reads: never more than two connections.
  auto run = pool.Call(&Store::CreateRun, "pooled", "{}");
  ASSERT_TRUE(run.ok()) << run.message();
  threads.clear();
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto id = pool.Call([&](Store& s) {
          const int now = ++inside;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          auto added = s.AddJob(*run, MakeJob("m" + std::to_string(t) + ".tflite"));
          --inside;
          return added;
        });
        if (!id.ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(most.load(), 2);
  EXPECT_EQ(pool.opened(), 2);
  auto jobs = pool.Call(&Store::ListJobs, *run);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  EXPECT_EQ(jobs->size(), 80u);
}

TEST_P(StorePoolTest, AFailedOpenIsTheCallsErrorAndFreesItsPlace) {
  int tries = 0;
  auto open = Opener();
  StorePool pool(
      [&]() -> Result<std::unique_ptr<Store>> {
        if (++tries == 1) return MakeError("the database is starting up");
        return open();
      },
      1);
  auto failed = pool.Call(&Store::ListNodes);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.message(), "the database is starting up");
  EXPECT_EQ(pool.open(), 0);
  auto listed = pool.Call(&Store::ListNodes);
  ASSERT_TRUE(listed.ok()) << listed.message();
  EXPECT_EQ(pool.open(), 1);
  EXPECT_EQ(pool.opened(), 1);

  StorePool filled(Opener(), 3);
  ASSERT_TRUE(filled.Fill().ok());
  EXPECT_EQ(filled.open(), 3);
  EXPECT_EQ(filled.opened(), 3);
}

// The server ends the pool's one backend (a restart, a network cut, an
// administrator): the call that finds it gone fails, the pool closes that
// store, and the next call runs on a new connection.
TEST_P(StorePoolTest, ALostConnectionIsReplaced) {
  if (!pg()) GTEST_SKIP() << "a SQLite file has no connection to lose";
  StorePool pool(Opener(), 1);
  ASSERT_TRUE(pool.Call(&Store::ListNodes).ok());
  const std::string others =
      "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()";
  ASSERT_NE(QueryValue("SELECT count(*) " + others), "0");
  ExecSql("SELECT pg_terminate_backend(pid) " + others);
  ASSERT_TRUE(WaitUntil([&] { return QueryValue("SELECT count(*) " + others) == "0"; }));
  auto lost = pool.Call(&Store::ListNodes);
  EXPECT_FALSE(lost.ok());
  EXPECT_EQ(pool.open(), 0) << "the lost connection was kept";
  auto again = pool.Call(&Store::ListNodes);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(pool.opened(), 2);
  EXPECT_EQ(pool.open(), 1);
}

TEST_P(StorePoolTest, ACallInsideACallOfTheSamePoolAborts) {
  if (pg())
    GTEST_SKIP() << "the same on both backends; the child of a death test would start a server";
  StorePool pool(Opener(), 2);
  EXPECT_DEATH((void)pool.Call([&](Store&) { return pool.Call(&Store::ListNodes); }),
               "would wait for itself");
}

INSTANTIATE_TEST_SUITE_P(Backends, StorePoolTest, DFARM_BOTH_BACKENDS, BackendName);

}  // namespace
}  // namespace dfarm::store
