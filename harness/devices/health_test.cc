// The health check (harness/devices/health.h) against a real local dfarm-agent
// running the real dfarm-runner on a model built here, with a real SQLite
// store and a fake steady clock: the first pass records the known outputs,
// a tampered record quarantines the device, retries wait, a fixed record
// brings it back, and the history keeps every step in order.
#include "harness/devices/health.h"

#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "agent/base/sha256.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness/devices/devices.h"
#include "harness/farm/node.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::harness {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = HealthChecker::Clock;
namespace tfl = ::dfarm::tflite;

constexpr char kRunner[] = DFARM_BINARY_DIR "/bin/dfarm-runner";

// Runs `sql` on the SQLite file `db`, waiting up to 60 s for a writer's
// lock; "" or the error.
std::string Exec(const std::string& db, const std::string& sql) {
  sqlite3* conn = nullptr;
  std::string error;
  if (sqlite3_open(db.c_str(), &conn) != SQLITE_OK) error = "cannot open " + db;
  // A running node writes the same file: wait for its lock, as the store does.
  if (error.empty()) sqlite3_busy_timeout(conn, 60000);
  char* msg = nullptr;
  if (error.empty() && sqlite3_exec(conn, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    error = msg ? msg : "?";
  }
  sqlite3_free(msg);
  sqlite3_close(conn);
  return error;
}

// Polls `pred` every 100 ms for up to 60 s.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 600; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.path() + "/farm.db";
    auto store = store::OpenSqliteStore(db_);
    ASSERT_TRUE(store.ok()) << store.message();
    store_ = std::move(*store);
    const std::string db = db_;
    pool_ = std::make_unique<store::StorePool>([db] { return store::OpenSqliteStore(db); }, 1);
    // out = image + offset: one output, from the runner's seeded inputs.
    testing::ModelBuilder b;
    int in0 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1}, "image");
    int in1 = b.AddTensor(tfl::TensorType::FLOAT32, {1}, "offset");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1}, "shifted");
    b.AddAdd(in0, in1, out);
    b.SetInputs({in0, in1});
    b.SetOutputs({out});
    model_ = dir_.path() + "/health.tflite";
    ASSERT_TRUE(b.WriteFile(model_));
    ProviderOptions popts = DefaultProviderOptions();
    popts.agent_path = agent::testing::kAgentBinary;
    popts.agent_store = dir_.path() + "/agent-store";
    provider_ = MakeDeviceProvider(popts);
    auto session = provider_->Open("local");
    ASSERT_TRUE(session.ok()) << session.message();
    session_ = std::move(*session);
    options_.model_path = model_;
    options_.runner_path = kRunner;
  }

  std::unique_ptr<HealthChecker> Checker(const HealthOptions& options) {
    return std::make_unique<HealthChecker>(
        options, [this] { return now_; }, [this](const std::string& l) { notes_.push_back(l); });
  }

  Result<bool> Ready(HealthChecker& checker) {
    return checker.Ready(*pool_, "local", session_->client());
  }

  store::DeviceRow Row() {
    auto devices = store_->ListDevices();
    EXPECT_TRUE(devices.ok()) << devices.message();
    for (const store::DeviceRow& d : *devices) {
      if (d.name == "local") return d;
    }
    return {};
  }

  std::vector<store::DeviceEvent> Events() {
    auto events = store_->ListDeviceEvents("local");
    EXPECT_TRUE(events.ok()) << events.message();
    return events.ok() ? *events : std::vector<store::DeviceEvent>{};
  }

  std::string Golden() {
    auto model_sha = agent::Sha256File(model_);
    auto runner_sha = agent::Sha256File(kRunner);
    EXPECT_TRUE(model_sha.ok() && runner_sha.ok());
    auto golden = store_->GetHealthGolden(*model_sha, *runner_sha);
    EXPECT_TRUE(golden.ok()) << golden.message();
    return golden.ok() && *golden ? (*golden)->outputs + "@" + (*golden)->device : "";
  }

  agent::testing::TempDir dir_;
  std::string db_;
  std::string model_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::StorePool> pool_;  // the checker's, as a node's workers share one
  std::unique_ptr<DeviceProvider> provider_;
  std::unique_ptr<DeviceSession> session_;
  HealthOptions options_;
  Clock::time_point now_ = Clock::time_point(seconds(1'000'000));
  std::vector<std::string> notes_;
};

TEST_F(HealthTest, GoldenQuarantineRetryAndReturnInOrder) {
  auto checker = Checker(options_);
  // First check: records the known outputs (one sha256), device ok.
  auto ready = Ready(*checker);
  ASSERT_TRUE(ready.ok()) << ready.message();
  EXPECT_TRUE(*ready);
  const std::string golden = Golden();
  ASSERT_EQ(golden.size(), 64u + 6u) << golden;  // "<sha256>@local"
  EXPECT_EQ(golden.substr(64), "@local");
  EXPECT_EQ(Row().state, store::kDeviceOk);
  EXPECT_EQ(Row().state_reason,
            "health check passed: health.tflite, 1 outputs match the known outputs");
  // Not due again before `every`: no check, no event.
  notes_.clear();
  now_ += seconds(3599);
  EXPECT_TRUE(*Ready(*checker));
  EXPECT_TRUE(notes_.empty());
  ASSERT_EQ(Events().size(), 1u);

  // Tampered known outputs: the next due check fails and quarantines.
  ASSERT_EQ(Exec(db_, "UPDATE health_golden SET outputs = 'x'"), "");
  now_ += seconds(1);
  ready = Ready(*checker);
  ASSERT_TRUE(ready.ok()) << ready.message();
  EXPECT_FALSE(*ready);
  EXPECT_EQ(Row().state, store::kDeviceQuarantined);
  EXPECT_THAT(Row().state_reason,
              StartsWith("health check failed: health.tflite: outputs differ from the known "
                         "outputs (recorded on local at "));
  // Too early to retry: false without running the check.
  notes_.clear();
  now_ += seconds(59);
  EXPECT_FALSE(*Ready(*checker));
  EXPECT_TRUE(notes_.empty());
  EXPECT_EQ(Events().size(), 2u);

  // Known outputs fixed: the retry passes and the device is back.
  ASSERT_EQ(Exec(db_, "UPDATE health_golden SET outputs = '" + golden.substr(0, 64) + "'"), "");
  now_ += seconds(1);
  ready = Ready(*checker);
  ASSERT_TRUE(ready.ok()) << ready.message();
  EXPECT_TRUE(*ready);
  EXPECT_EQ(Row().state, store::kDeviceOk);
  const std::vector<store::DeviceEvent> events = Events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].state, "ok");
  EXPECT_THAT(events[0].reason, StartsWith("health check passed: "));
  EXPECT_EQ(events[1].state, "quarantined");
  EXPECT_THAT(events[1].reason, HasSubstr("outputs differ from the known outputs"));
  EXPECT_EQ(events[2].state, "ok");
  EXPECT_THAT(events[2].reason, StartsWith("health check passed: "));
}

// A quarantine by the scheduler (infra jobs) is checked at once; a failing
// retry with the same reason adds no event until `every` passed.
TEST_F(HealthTest, AQuarantinedDeviceIsCheckedAtOnceAndFailuresDoNotFloodTheHistory) {
  ASSERT_TRUE(store_
                  ->SetDeviceState("local", store::kDeviceQuarantined,
                                   "quarantined after 3 "
                                   "infra jobs")
                  .ok());
  HealthOptions no_arm = options_;
  no_arm.runner_path = "";  // no build for this host's ABI: the check fails, naming it
  auto checker = Checker(no_arm);
  EXPECT_FALSE(*Ready(*checker));
  EXPECT_THAT(Row().state_reason, StartsWith("health check failed: no runner build for ABI '"));
  for (int i = 0; i < 3; ++i) {
    now_ += seconds(60);
    EXPECT_FALSE(*Ready(*checker));
  }
  EXPECT_EQ(Events().size(), 2u);  // the scheduler's, the first failure
  auto fixed = Checker(options_);
  EXPECT_TRUE(*Ready(*fixed));
  ASSERT_EQ(Events().size(), 3u);
  EXPECT_EQ(Events()[2].state, "ok");
}

// A restarted node does not check again before `every`: it reads the last
// health event from the store.
TEST_F(HealthTest, ARestartedCheckerKeepsTheSchedule) {
  EXPECT_TRUE(*Ready(*Checker(options_)));
  notes_.clear();
  auto restarted = Checker(options_);
  EXPECT_TRUE(*Ready(*restarted));
  EXPECT_TRUE(notes_.empty());
  EXPECT_EQ(Events().size(), 1u);
  now_ += seconds(3600);
  EXPECT_TRUE(*Ready(*restarted));
  EXPECT_FALSE(notes_.empty());
  EXPECT_EQ(Events().size(), 2u);  // a scheduled pass is recorded
}

// Errors (a runner that cannot be pushed) are returned; three in a row quarantine.
TEST_F(HealthTest, ErrorsAreReturnedAndThreeInARowQuarantine) {
  HealthOptions broken = options_;
  broken.runner_path = dir_.path() + "/no-such-runner";
  auto checker = Checker(broken);
  for (int i = 0; i < kHealthErrorsInARow - 1; ++i) {
    auto r = Ready(*checker);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.message(), HasSubstr("cannot push the runner"));
    EXPECT_EQ(Row().state, "");
  }
  auto r = Ready(*checker);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(*r);
  EXPECT_EQ(Row().state, store::kDeviceQuarantined);
  EXPECT_THAT(Row().state_reason, HasSubstr("cannot push the runner"));
  EXPECT_THAT(Row().state_reason, HasSubstr("(3 checks in a row)"));
}

// Without a health model: a quarantined device stays out until released.
TEST_F(HealthTest, WithoutAModelQuarantineHoldsUntilReleased) {
  auto checker = Checker(HealthOptions{});
  EXPECT_TRUE(*Ready(*checker));
  ASSERT_TRUE(store_->SetDeviceState("local", store::kDeviceQuarantined, "bad").ok());
  EXPECT_FALSE(*Ready(*checker));
  now_ += seconds(100000);
  EXPECT_FALSE(*Ready(*checker));
  ASSERT_TRUE(store_->SetDeviceState("local", store::kDeviceOk, "released").ok());
  EXPECT_TRUE(*Ready(*checker));
  EXPECT_TRUE(notes_.empty());
  EXPECT_EQ(Golden(), "");
}

// An operator's quarantine survives the health check (twenty intervals,
// every check due, none runs); an operator's release keeps a failing device
// in service; once lifted, the health check decides again.
TEST_F(HealthTest, AHandQuarantineSurvivesTwentyHealthIntervals) {
  auto checker = Checker(options_);
  ASSERT_TRUE(*Ready(*checker));  // a pass: ok, the known outputs recorded
  const std::string golden = Golden();
  ASSERT_TRUE(
      store_->SetOperatorState("local", store::kDeviceQuarantined, "battery swollen", "al@lab")
          .ok());
  notes_.clear();
  for (int i = 0; i < 20; ++i) {
    now_ += options_.every + options_.retry;  // a check is due each time
    auto ready = Ready(*checker);
    ASSERT_TRUE(ready.ok()) << ready.message();
    EXPECT_FALSE(*ready) << "interval " << i;
  }
  EXPECT_TRUE(notes_.empty()) << notes_.front();  // no check ran
  EXPECT_EQ(Row().state, store::kDeviceQuarantined);
  EXPECT_EQ(Row().state_reason, "battery swollen");
  EXPECT_EQ(Row().state_by, store::kSetByOperator);
  EXPECT_EQ(Row().state_user, "al@lab");

  // Released by hand: in service although its check would fail.
  ASSERT_EQ(Exec(db_, "UPDATE health_golden SET outputs = 'x'"), "");
  ASSERT_TRUE(
      store_->SetOperatorState("local", store::kDeviceOk, "battery replaced", "al@lab").ok());
  for (int i = 0; i < 3; ++i) {
    now_ += options_.every;
    EXPECT_TRUE(*Ready(*checker));
  }
  EXPECT_EQ(Row().state, store::kDeviceOk);

  // Lifted: the next due check runs and its failure quarantines, set by health.
  ASSERT_TRUE(store_->SetOperatorState("local", "", "", "al@lab").ok());
  now_ += options_.every;
  auto ready = Ready(*checker);
  ASSERT_TRUE(ready.ok()) << ready.message();
  EXPECT_FALSE(*ready);
  EXPECT_EQ(Row().state, store::kDeviceQuarantined);
  EXPECT_EQ(Row().state_by, store::kSetByHealth);
  EXPECT_THAT(Row().state_reason, HasSubstr("outputs differ from the known outputs"));
  ASSERT_EQ(Exec(db_, "UPDATE health_golden SET outputs = '" + golden.substr(0, 64) + "'"), "");
}

// `dfarm node --health-model` end to end (RunNode on a SQLite store, its
// own local agent): the first check records the known outputs, a tampered
// record quarantines the device, the fixed record brings it back.
TEST_F(HealthTest, ANodeQuarantinesItsDeviceAndBringsItBack) {
  session_.reset();  // the node starts its own local agent
  std::atomic<bool> drain{false}, cancel{false};
  NodeOptions o;
  o.name = "n1";
  o.devices = {"local"};
  o.cache_dir = dir_.path() + "/cache";
  const std::string db = db_;
  o.open_store = [db] { return store::OpenSqliteStore(db); };
  o.provider = provider_.get();
  o.drain = &drain;
  o.cancel = &cancel;
  o.health = options_;
  o.health.every = seconds(1);
  o.health.retry = seconds(1);
  Result<NodeSummary> summary = MakeError("not run");
  std::thread node([&] { summary = RunNode(o); });
  std::string golden;
  EXPECT_TRUE(Eventually([&] { return !(golden = Golden()).empty(); }));
  EXPECT_EQ(Exec(db_, "UPDATE health_golden SET outputs = 'x'"), "");
  EXPECT_TRUE(Eventually([&] { return Row().state == store::kDeviceQuarantined; }));
  EXPECT_THAT(Row().state_reason, HasSubstr("outputs differ from the known outputs"));
  EXPECT_EQ(Exec(db_, "UPDATE health_golden SET outputs = '" + golden.substr(0, 64) + "'"), "");
  EXPECT_TRUE(Eventually([&] { return Row().state == store::kDeviceOk; }));
  drain = true;
  node.join();
  ASSERT_TRUE(summary.ok()) << summary.message();
  const std::vector<store::DeviceEvent> events = Events();
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front().state, "ok");
  EXPECT_EQ(events.back().state, "ok");
  int quarantines = 0;
  for (const store::DeviceEvent& e : events) quarantines += e.state == "quarantined";
  EXPECT_GE(quarantines, 1);
}

}  // namespace
}  // namespace dfarm::harness
