// Schema v22 on both backends: Reader::ChangeCount, what moves the counter
// (runs, job status, results, device states) and what does not
// (heartbeats), a database from before the counter getting one when opened;
// and a spec runner named "default" being the default runner's cell.
#include <gtest/gtest.h>

#include "reports/store/store_test_fixture.h"

namespace dfarm::store {
namespace {

class ChangeCountTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }

  int64_t Count() {
    auto n = store_->ChangeCount();
    EXPECT_TRUE(n.ok()) << n.message();
    return n.ok() ? *n : -1;
  }

  std::unique_ptr<Store> store_;
};

DeviceTraits Phone() {
  return {"phone", "arm64-v8a", "Android 14", "SM8550", 8LL << 30, {}, /*model=*/""};
}

TEST_P(ChangeCountTest, MovesOnResultsAndStatusNotOnHeartbeats) {
  DeviceRow device;
  device.name = "phone";
  device.node = "n1";
  ASSERT_TRUE(store_->UpsertDevice(device).ok());
  NodeRow node{"n1", "host", 42, NowIso8601(), 0, 0, "", {"phone"}};
  ASSERT_TRUE(store_->RegisterNode(node).ok());
  auto run = store_->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok()) << run.message();
  ASSERT_TRUE(store_->SetRunMode(*run, kRunModeQueue).ok());
  JobRow job = MakeJob("m.tflite");
  job.target = kTargetAny;
  job.payload = "{}";
  auto id = store_->AddJob(*run, job);
  ASSERT_TRUE(id.ok()) << id.message();

  // Heartbeats: a node's, a device's hello again, a sweep's claim renewal.
  const int64_t before = Count();
  ASSERT_TRUE(store_->NodeHeartbeat("n1", kNodeRunning, 60).ok());
  ASSERT_TRUE(store_->UpsertDevice(device).ok());
  ASSERT_TRUE(store_->RefreshRunClaim(*run).ok());
  EXPECT_EQ(Count(), before);

  auto claimed = store_->ClaimJob("n1", Phone(), 60);
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << claimed.message();
  const int64_t afterClaim = Count();
  EXPECT_GT(afterClaim, before) << "a job that starts running is a change";
  ASSERT_TRUE(store_->NodeHeartbeat("n1", kNodeRunning, 60).ok());  // renews the lease
  EXPECT_EQ(Count(), afterClaim);

  JobOutcome ok;
  ok.status = kJobOk;
  ok.exit_code = 0;
  ok.claim_id = (*claimed)->claim_id;
  ok.samples_us = {100, 110};
  ASSERT_TRUE(store_->RecordJobResult(*id, ok).ok());
  const int64_t afterResult = Count();
  EXPECT_GT(afterResult, afterClaim) << "a result is a change";

  ASSERT_TRUE(store_->SetDeviceState("phone", kDeviceQuarantined, "battery swollen").ok());
  const int64_t afterState = Count();
  EXPECT_GT(afterState, afterResult);
  ASSERT_TRUE(store_->TagRun(*run, "baseline", false).ok());
  EXPECT_GT(Count(), afterState) << "a tag is a change";
}

// A spec runner named "default" (kDefaultRunnerName) is the default runner:
// its jobs share the cell of a spec without runners.
TEST_P(ChangeCountTest, RunnerNamedDefaultIsTheDefaultRunnersCell) {
  auto first = store_->CreateRun("no runners", "{}");
  auto second = store_->CreateRun("runner named default", "{}");
  ASSERT_TRUE(first.ok() && second.ok());
  JobRow job = MakeJob("m.tflite");
  ASSERT_TRUE(store_->AddJob(*first, job).ok());
  job.runner = kDefaultRunnerName;
  auto id = store_->AddJob(*second, job);
  ASSERT_TRUE(id.ok()) << id.message();
  EXPECT_EQ(store_->GetJob(*id)->runner, "");
  auto cells = store_->ListCells();
  ASSERT_TRUE(cells.ok()) << cells.message();
  ASSERT_EQ(cells->size(), 1u);
  EXPECT_EQ(cells->front().runner, "");
  EXPECT_EQ(store_->ListCellJobs(cells->front())->size(), 2u);
  job.runner = "main";  // another name is a cell of its own
  ASSERT_TRUE(store_->AddJob(*second, job).ok());
  EXPECT_EQ(store_->ListCells()->size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Backends, ChangeCountTest, DFARM_BOTH_BACKENDS, BackendName);

TEST_F(SqliteStoreTest, DatabaseBeforeTheCounterCountsOnceOpened) {
  ASSERT_TRUE(CreateSqliteStoreAtVersionForTesting(path_, 21).ok());
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto before = store->ChangeCount();
  ASSERT_TRUE(before.ok()) << before.message();
  ASSERT_TRUE(store->CreateRun("r", "{}").ok());
  auto after = store->ChangeCount();
  ASSERT_TRUE(after.ok()) << after.message();
  EXPECT_GT(*after, *before);
}

}  // namespace
}  // namespace dfarm::store
