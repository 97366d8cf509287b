// The scheduler's cooldown rule (WaitForCooldown) with a fake clock and fake
// temperatures, then against a real dfarm-agent reading a fake sysfs tree;
// and the runner's accuracy section as the scheduler stores it.
#include "harness/run/scheduler.h"

#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <thread>

#include "agent/runner/runner_json.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness/devices/devices.h"
#include "harness/farm/queue_job.h"
#include "harness/spec/matrix.h"
#include "reports/store/store.h"

namespace dfarm::harness {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

// A clock that moves only when the rule sleeps, and a list of readings.
struct FakeDevice {
  Clock::time_point now{};
  std::vector<int64_t> sleeps_ms;
  std::vector<std::optional<double>> temps;  // one per poll; the last repeats
  std::vector<std::optional<double>> busy;   // CPU busy %, one per poll; the last repeats
  size_t polls = 0;
  size_t busy_polls = 0;
  std::string error;  // when set, asking fails

  CooldownSource Source() {
    CooldownSource s;
    s.now = [this] { return now; };
    s.sleep = [this](milliseconds d) {
      sleeps_ms.push_back(d.count());
      now += d;
    };
    s.hottest_c = [this]() -> Result<std::optional<double>> {
      ++polls;
      if (!error.empty()) return MakeError(error);
      return temps[std::min(polls - 1, temps.size() - 1)];
    };
    s.busy_pct = [this]() -> Result<std::optional<double>> {
      ++busy_polls;
      if (busy.empty()) return std::optional<double>();
      return busy[std::min(busy_polls - 1, busy.size() - 1)];
    };
    return s;
  }
};

TEST(CooldownTest, PausesThenWaitsUntilCoolEnough) {
  FakeDevice dev;
  dev.temps = {80.0, 75.0, 60.0};
  CooldownSpec spec;
  spec.pause_ms = 500;
  spec.max_temp_c = 65;
  spec.max_wait_s = 60;
  CooldownOutcome out = WaitForCooldown(spec, dev.Source());
  EXPECT_THAT(dev.sleeps_ms, ElementsAre(500, 1000, 1000));
  EXPECT_EQ(dev.polls, 3u);
  EXPECT_EQ(out.waited_ms, 2500);
  EXPECT_TRUE(out.checked);
  EXPECT_FALSE(out.gave_up);
  EXPECT_EQ(out.last_temp_c, std::optional<double>(60.0));
  EXPECT_TRUE(out.note.empty()) << out.note;
}

TEST(CooldownTest, GivesUpAfterMaxWaitAndSaysSo) {
  FakeDevice dev;
  dev.temps = {90.0};
  CooldownSpec spec;
  spec.max_temp_c = 50;
  spec.max_wait_s = 3;
  CooldownOutcome out = WaitForCooldown(spec, dev.Source());
  // Polls at 0, 1, 2 and 3 s; at 3 s the wait is over.
  EXPECT_THAT(dev.sleeps_ms, ElementsAre(1000, 1000, 1000));
  EXPECT_EQ(dev.polls, 4u);
  EXPECT_TRUE(out.gave_up);
  EXPECT_EQ(out.waited_ms, 3000);
  EXPECT_THAT(out.note, HasSubstr("90.0 C > 50.0 C"));
  EXPECT_THAT(out.note, HasSubstr("ran anyway"));
}

TEST(CooldownTest, LastPollLandsOnTheDeadline) {
  FakeDevice dev;
  dev.temps = {90.0};
  CooldownSpec spec;
  spec.max_temp_c = 50;
  spec.max_wait_s = 0;  // one look, no wait
  CooldownOutcome out = WaitForCooldown(spec, dev.Source());
  EXPECT_TRUE(dev.sleeps_ms.empty());
  EXPECT_TRUE(out.gave_up);
}

TEST(CooldownTest, NoThermalZonesSkipsTheRule) {
  FakeDevice dev;
  dev.temps = {std::nullopt};
  CooldownSpec spec;
  spec.pause_ms = 20;
  spec.max_temp_c = 50;
  CooldownOutcome out = WaitForCooldown(spec, dev.Source());
  EXPECT_THAT(dev.sleeps_ms, ElementsAre(20));
  EXPECT_FALSE(out.checked);
  EXPECT_FALSE(out.gave_up);
  EXPECT_THAT(out.note, HasSubstr("skipped: the device exposes no thermal zone"));
}

TEST(CooldownTest, AnAgentThatCannotSaySkipsTheRule) {
  FakeDevice dev;
  dev.error = "agent at x does not speak feature 'device_state'";
  CooldownSpec spec;
  spec.max_temp_c = 50;
  CooldownOutcome out = WaitForCooldown(spec, dev.Source());
  EXPECT_FALSE(out.checked);
  EXPECT_THAT(out.note, HasSubstr("skipped: agent at x does not speak feature 'device_state'"));
}

TEST(CooldownTest, LoadRuleWaitsForQuietCpus) {
  FakeDevice dev;
  dev.busy = {90.0, 80.0, 20.0};
  CooldownSpec spec;
  spec.max_cpu_busy_pct = 50;
  spec.max_wait_s = 60;
  CooldownOutcome out = WaitForCooldown(spec, dev.Source());
  EXPECT_EQ(dev.busy_polls, 3u);
  EXPECT_EQ(dev.polls, 0u);  // no temperature rule, no temperature asked
  EXPECT_TRUE(out.checked);
  EXPECT_FALSE(out.noisy);
  EXPECT_EQ(out.last_busy_pct, std::optional<double>(20.0));
  EXPECT_TRUE(out.note.empty()) << out.note;
}

TEST(CooldownTest, BusyAfterMaxWaitIsNoisyWithTheReadings) {
  FakeDevice dev;
  dev.busy = {93.0};
  dev.temps = {71.0};
  CooldownSpec spec;
  spec.max_cpu_busy_pct = 50;
  spec.max_temp_c = 60;
  spec.max_wait_s = 2;
  CooldownOutcome out = WaitForCooldown(spec, dev.Source());
  EXPECT_TRUE(out.gave_up);
  EXPECT_TRUE(out.noisy);
  EXPECT_EQ(out.waited_ms, 2000);
  EXPECT_THAT(out.note, HasSubstr("noisy: device still at 71.0 C > 60.0 C and CPUs 93% busy > "
                                  "50% after waiting 2 s"));
  // Hot but quiet: gave up, not noisy.
  FakeDevice hot;
  hot.busy = {10.0};
  hot.temps = {71.0};
  out = WaitForCooldown(spec, hot.Source());
  EXPECT_TRUE(out.gave_up);
  EXPECT_FALSE(out.noisy);
}

TEST(CooldownTest, AnAgentWithoutABusyReadingSkipsTheLoadRule) {
  FakeDevice dev;  // busy empty: no reading
  CooldownSpec spec;
  spec.max_cpu_busy_pct = 50;
  CooldownOutcome out = WaitForCooldown(spec, dev.Source());
  EXPECT_FALSE(out.checked);
  EXPECT_FALSE(out.noisy);
  EXPECT_THAT(out.note, HasSubstr("cooldown load rule skipped: the agent reports no CPU busy"));
}

// The samples taken while the runner ran become telemetry rows "during:NNNN"
// in order, beside before and after.
TEST(ClassifyJobResultTest, SamplesDuringTheJobBecomeTelemetryRows) {
  agent::JobResult r;
  r.status = "crashed";
  r.error = "runner killed by signal 11";
  agent::DeviceState before;
  before.unix_ms = 1000;
  before.thermal_zones.push_back({0, "cpu", 40.0});
  r.state_before = before;
  for (int i = 0; i < 12; ++i) {
    agent::DeviceState s;
    s.unix_ms = 2000 + 1000 * i;
    s.thermal_zones.push_back({0, "cpu", 41.0 + i});
    s.load_avg_1m = 0.5;
    r.state_during.push_back(s);
  }
  store::JobOutcome o = ClassifyJobResult(r);
  ASSERT_EQ(o.telemetry.size(), 13u);
  EXPECT_EQ(o.telemetry[0].phase, "before");
  EXPECT_EQ(o.telemetry[1].phase, "during:0001");
  EXPECT_EQ(o.telemetry[12].phase, "during:0012");
  EXPECT_EQ(o.telemetry[12].unix_ms, 13000);
  EXPECT_EQ(o.telemetry[12].hottest_temp_c, std::optional<double>(52.0));
  EXPECT_EQ(DuringPhase(599), "during:0600");
}

// Battery power while the runner ran x mean latency: 0.5 A at 4 V = 2 W
// for 10 ms = 20 mJ per inference; without battery figures, nothing.
TEST(ClassifyJobResultTest, EnergyIsEstimatedFromTheBatteryWhileRunning) {
  agent::JobResult r;
  for (int64_t ua : {-400000, -600000}) {
    agent::DeviceState s;
    s.battery_current_ua = ua;  // the sign varies by vendor
    s.battery_voltage_uv = 4000000;
    r.state_during.push_back(s);
  }
  agent::DeviceState idle;
  idle.battery_current_ua = 100000;
  idle.battery_voltage_uv = 4000000;
  r.state_before = idle;
  auto mj = EnergyPerInferenceMj(r, 10000);
  ASSERT_TRUE(mj.has_value());
  EXPECT_NEAR(*mj, 20.0, 1e-9);
  // No samples while running: the before/after readings stand in.
  r.state_during.clear();
  EXPECT_NEAR(*EnergyPerInferenceMj(r, 10000), 4.0, 1e-9);
  EXPECT_EQ(EnergyPerInferenceMj(agent::JobResult{}, 10000), std::nullopt);
  // Through ClassifyJobResult, with the runner's mean latency.
  r.status = "ok";
  r.runner_json =
      R"({"status":"ok","metrics":{"mean_us":5000,"num_runs":2},"samples_us":[5000,5000]})";
  store::JobOutcome o = ClassifyJobResult(r);
  ASSERT_TRUE(o.energy_mj.has_value());
  EXPECT_NEAR(*o.energy_mj, 2.0, 1e-9);
}

TEST(CooldownTest, PauseOnlyNeverAsksTheDevice) {
  FakeDevice dev;
  CooldownSpec spec;
  spec.pause_ms = 250;
  CooldownOutcome out = WaitForCooldown(spec, dev.Source());
  EXPECT_THAT(dev.sleeps_ms, ElementsAre(250));
  EXPECT_EQ(dev.polls, 0u);
  EXPECT_EQ(out.waited_ms, 250);
}

class CooldownAgentTest : public ::testing::Test {
 protected:
  std::unique_ptr<agent::AgentClient> Start(const std::string& root) {
    agent_ = std::make_unique<agent::testing::TestAgent>(
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--store", dir_.path() + "/store",
                                 "--device-state-root", root},
        dir_.path() + "/agent.log");
    uint16_t port = agent_->ReadPort();
    EXPECT_GT(port, 0);
    auto client = agent::AgentClient::Connect("127.0.0.1", port, milliseconds(10000));
    EXPECT_TRUE(client.ok()) << client.message();
    return client.ok() ? std::move(*client) : nullptr;
  }

  agent::testing::TempDir dir_;
  std::unique_ptr<agent::testing::TestAgent> agent_;
};

TEST_F(CooldownAgentTest, ReadsTheHottestZoneOfARealAgent) {
  std::string root = dir_.path() + "/root";
  for (int z : {0, 1}) {
    std::filesystem::create_directories(root + "/sys/class/thermal/thermal_zone" +
                                        std::to_string(z));
  }
  agent::testing::WriteFile(root + "/sys/class/thermal/thermal_zone0/temp", "38000\n");
  agent::testing::WriteFile(root + "/sys/class/thermal/thermal_zone1/temp", "44500\n");
  auto client = Start(root);
  ASSERT_TRUE(client);
  CooldownSpec spec;
  spec.max_temp_c = 50;
  CooldownOutcome out = WaitForCooldown(spec, AgentCooldownSource(*client, nullptr));
  EXPECT_TRUE(out.checked);
  EXPECT_FALSE(out.gave_up);
  EXPECT_EQ(out.last_temp_c, std::optional<double>(44.5));  // the hotter of the two
  EXPECT_TRUE(out.note.empty()) << out.note;
}

TEST_F(CooldownAgentTest, AgentWithoutZonesSkipsTheRule) {
  std::string root = dir_.path() + "/empty";
  std::filesystem::create_directories(root);
  auto client = Start(root);
  ASSERT_TRUE(client);
  CooldownSpec spec;
  spec.max_temp_c = 50;
  spec.max_wait_s = 1;
  CooldownOutcome out = WaitForCooldown(spec, AgentCooldownSource(*client, nullptr));
  EXPECT_FALSE(out.checked);
  EXPECT_THAT(out.note, HasSubstr("no thermal zone"));
}

TEST(RunnerAccuracyTest, ParsesTheRunnersSection) {
  auto got =
      runner_json::ParseRunnerAccuracy(R"({"status":"ok","accuracy":{"reference":"cpu","outputs":[
      {"index":1,"name":"b","compared":4,"mean_abs_error":0.5,"std_abs_error":0.25,
       "max_abs_error":1.0,"rmse":0.75,"nan_count":1,"inf_count":2,"reference_nan_count":3,
       "reference_inf_count":0,"top1_agree":false,"top5_agree":true},
      {"index":0,"name":"a","compared":0,"mean_abs_error":null,"std_abs_error":null,
       "max_abs_error":null,"rmse":null,"nan_count":0,"inf_count":0,
       "reference_nan_count":0,"reference_inf_count":0}]}})");
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_TRUE(got->has_value());
  const store::Accuracy& accuracy = **got;
  ASSERT_EQ(accuracy.outputs.size(), 2u);
  EXPECT_EQ(accuracy.outputs[0].name, "a");
  EXPECT_TRUE(std::isnan(accuracy.outputs[0].rmse));
  EXPECT_FALSE(accuracy.outputs[0].top1_agree.has_value());
  const store::OutputAccuracy& b = accuracy.outputs[1];
  EXPECT_EQ(accuracy.reference, "cpu");
  EXPECT_EQ(b.compared, 4);
  EXPECT_DOUBLE_EQ(b.mean_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(b.std_abs_error, 0.25);
  EXPECT_DOUBLE_EQ(b.max_abs_error, 1.0);
  EXPECT_DOUBLE_EQ(b.rmse, 0.75);
  EXPECT_EQ(b.nan_count, 1);
  EXPECT_EQ(b.inf_count, 2);
  EXPECT_EQ(b.reference_nan_count, 3);
  EXPECT_EQ(b.top1_agree, std::optional<bool>(false));
  EXPECT_EQ(b.top5_agree, std::optional<bool>(true));

  auto none = runner_json::ParseRunnerAccuracy(R"({"status":"ok"})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto bad = runner_json::ParseRunnerAccuracy(R"({"accuracy":{"outputs":[{"name":"x"}]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("accuracy.outputs[0]"));
}

// A runner's "ok" that cannot be true is recorded crashed, naming the field.
TEST(ClassifyJobResultTest, AnImplausibleOkIsCrashed) {
  SweepJob job;
  job.model.file = "face.tflite";
  job.model_sha256 = std::string(64, 'b');
  job.benchmark.num_runs = 2;
  agent::JobResult r;
  r.status = "ok";
  r.runner_json = R"({"status":"ok","model":")" + job.model_sha256 +
                  R"(","metrics":{"mean_us":10,"num_runs":2},"samples_us":[10,10]})";
  EXPECT_EQ(ClassifyJobResult(r, job).status, "ok");
  for (const auto& [json, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"status":"ok","metrics":{"mean_us":-10,"num_runs":2},"samples_us":[10,10]})",
            "metrics.mean_us is -10"},
           {R"({"status":"ok","metrics":{"mean_us":10,"num_runs":1},"samples_us":[10]})",
            "metrics.num_runs is 1, but the job asked for 2 runs"},
           {R"({"status":"ok","metrics":{"mean_us":10,"num_runs":2,"peak_rss_bytes":-1},)"
            R"("samples_us":[10,10]})",
            "metrics.peak_rss_bytes is -1"},
           {R"({"status":"ok","model":"cat.tflite","metrics":{"mean_us":10,"num_runs":2},)"
            R"("samples_us":[10,10]})",
            "model is 'cat.tflite', but the job ran 'face.tflite'"}}) {
    r.runner_json = json;
    store::JobOutcome o = ClassifyJobResult(r, job);
    EXPECT_EQ(o.status, "crashed") << json;
    EXPECT_FALSE(o.metrics.has_value()) << json;  // nothing of it is kept
    EXPECT_TRUE(o.samples_us.empty()) << json;
    EXPECT_THAT(o.error, HasSubstr("runner reported ok, but its report is implausible: " + field));
  }
}

// The runner gets the model as an artifact named by its sha256: errors name
// the user's file instead.
TEST(ClassifyJobResultTest, ErrorsNameTheModelFile) {
  const std::string sha(64, 'c');
  EXPECT_EQ(NameModelFile("failed to load model '/tmp/s/artifacts/" + sha + "': bad magic", sha,
                          "face.tflite"),
            "failed to load model 'face.tflite': bad magic");
  EXPECT_EQ(NameModelFile("model '" + sha + "' tensor 3; model " + sha, sha, "face.tflite"),
            "model 'face.tflite' tensor 3; model face.tflite");
  EXPECT_EQ(NameModelFile("model 'x' failed", sha, "face.tflite"), "model 'x' failed");
  SweepJob job;
  job.model.file = "face.tflite";
  job.model_sha256 = sha;
  agent::JobResult r;
  r.status = "model_error";
  r.exit_code = 1;
  r.runner_json =
      R"({"status":"model_error","error":"model ')" + sha + R"(' tensor 17 refers to buffer 90"})";
  r.error = "runner: model '" + sha + "' tensor 17 refers to buffer 90";
  store::JobOutcome o = ClassifyJobResult(r, job);
  EXPECT_EQ(o.status, "model_error");
  EXPECT_EQ(o.error, "runner: model 'face.tflite' tensor 17 refers to buffer 90");
}

TEST(RunnerAccuracyTest, ClassifiedResultsCarryIt) {
  agent::JobResult r;
  r.status = "ok";
  r.runner_json =
      R"({"status":"ok","metrics":{"mean_us":10,"num_runs":1},"samples_us":[10],)"
      R"("accuracy":{"reference":"cpu","outputs":[{"index":0,"name":"y","compared":2,)"
      R"("mean_abs_error":0.125,"std_abs_error":0,"max_abs_error":0.125,"rmse":0.125,)"
      R"("nan_count":0,"inf_count":0,"reference_nan_count":0,"reference_inf_count":0}]}})";
  agent::DeviceState before;
  before.unix_ms = 5;
  before.thermal_zones = {{0, "a", 41.0}, {1, "b", 47.5}, {2, "c", std::nullopt}};
  before.battery_level_pct = 90;
  r.state_before = before;
  store::JobOutcome o = ClassifyJobResult(r);
  EXPECT_EQ(o.status, "ok");
  ASSERT_TRUE(o.accuracy.has_value());
  ASSERT_EQ(o.accuracy->outputs.size(), 1u);
  EXPECT_DOUBLE_EQ(o.accuracy->outputs[0].max_abs_error, 0.125);
  ASSERT_EQ(o.telemetry.size(), 1u);  // no state_after
  EXPECT_EQ(o.telemetry[0].phase, "before");
  EXPECT_EQ(o.telemetry[0].unix_ms, 5);
  EXPECT_EQ(o.telemetry[0].hottest_temp_c, std::optional<double>(47.5));
  EXPECT_EQ(o.telemetry[0].battery_level_pct, std::optional<int64_t>(90));
}

// Ctrl-C's flag cancels the job in flight on a real agent: the runner's
// process group dies, the job goes back to queued (as does the one never
// started), and a later RunJobs (what --resume does) finishes both; a runner
// file that changed in between is refused unless allow_runner_change.
TEST(SchedulerCancelTest, CancelledJobsStayQueuedAndResumeFinishesThem) {
  agent::testing::TempDir dir;
  agent::testing::TestAgent agent(
      {"--listen", "127.0.0.1:0", "--store", dir.path() + "/agent-store"},
      dir.path() + "/agent.log");
  uint16_t port = agent.ReadPort();
  ASSERT_GT(port, 0);
  const std::string device = "tcp://127.0.0.1:" + std::to_string(port);
  const std::string runner = dir.path() + "/dfarm-runner";
  const std::string pid_file = dir.path() + "/runner.pid";
  agent::testing::WriteFile(runner, "#!/bin/sh\necho $$ > " + pid_file + "\nsleep 300\n");
  const std::string model = dir.path() + "/m.tflite";
  agent::testing::WriteFile(model, "model bytes");
  auto model_sha = Sha256OfFile(model);
  ASSERT_TRUE(model_sha.ok());

  const std::string db = dir.path() + "/x.db";
  auto store = store::OpenSqliteStore(db);
  ASSERT_TRUE(store.ok()) << store.message();
  auto run = (*store)->CreateRun("cancel", "{}");
  ASSERT_TRUE(run.ok());
  std::vector<store::JobRow> rows(2);
  std::vector<SweepJob> jobs(2);
  for (int i = 0; i < 2; ++i) {
    rows[i].job_key = "k" + std::to_string(i);
    rows[i].model = "m.tflite";
    rows[i].model_path = model;
    rows[i].model_sha256 = *model_sha;
    rows[i].delegate = "cpu";
    rows[i].device = device;
  }
  auto ids = (*store)->AddJobs(*run, rows);
  ASSERT_TRUE(ids.ok());
  for (int i = 0; i < 2; ++i) {
    jobs[i].id = (*ids)[i];
    jobs[i].device = device;
    jobs[i].model = ModelSpec{model, "m.tflite"};
    jobs[i].model_sha256 = *model_sha;
    jobs[i].delegate.name = "cpu";
    jobs[i].benchmark.timeout_s = 120;
    jobs[i].benchmark.num_runs = 3;  // what kOkRunner reports
  }

  ProviderOptions popts = DefaultProviderOptions();
  auto provider = MakeDeviceProvider(popts);
  std::atomic<bool> cancel{false};
  SchedulerContext ctx;
  ctx.devices = provider.get();
  ctx.open_store = [&] { return store::OpenSqliteStore(db); };
  ctx.runner_path = runner;
  ctx.cancel = &cancel;
  ctx.policy.retries = 0;

  pid_t runner_pid = 0;
  std::thread ctrl_c([&] {
    for (int i = 0; i < 2000 && runner_pid == 0; ++i) {
      std::string text = agent::testing::ReadFile(pid_file);
      if (!text.empty() && text.back() == '\n') runner_pid = std::stoi(text);
      std::this_thread::sleep_for(milliseconds(10));
    }
    cancel = true;
  });
  auto stats = RunJobs(ctx, {device}, jobs);
  ctrl_c.join();
  ASSERT_TRUE(stats.ok()) << stats.message();
  ASSERT_GT(runner_pid, 0);
  errno = 0;
  EXPECT_EQ(::kill(runner_pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  auto listed = (*store)->ListJobs(*run);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].status, store::kJobQueued);
  EXPECT_EQ((*listed)[0].attempts, 1);
  EXPECT_EQ((*listed)[1].status, store::kJobQueued);
  EXPECT_EQ((*listed)[1].attempts, 0);
  auto artifacts = (*store)->ListArtifacts();
  ASSERT_TRUE(artifacts.ok());
  EXPECT_EQ(artifacts->size(), 2u);  // the runner and the model

  // The runner file is rebuilt: resuming is refused ...
  agent::testing::WriteFile(runner, agent::testing::kOkRunner);
  cancel = false;
  auto refused = RunJobs(ctx, {device}, jobs);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("--allow-runner-change"));
  // ... unless asked for; then both jobs finish.
  ctx.allow_runner_change = true;
  auto resumed = RunJobs(ctx, {device}, jobs);
  ASSERT_TRUE(resumed.ok()) << resumed.message();
  listed = (*store)->ListJobs(*run);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)[0].status, store::kJobOk) << (*listed)[0].error;
  EXPECT_EQ((*listed)[1].status, store::kJobOk) << (*listed)[1].error;
}

// Node mode: a node stopped past its lease (SIGSTOP) wakes up to a claim it
// lost: the reaper gave the job back and another node finished it. Its
// worker drops the job at its attempt (MarkJobRunning under the claim),
// never runs nor retries it, and the finished job and run stay finished.
TEST(SchedulerClaimTest, ALostClaimIsDroppedNeverRetried) {
  agent::testing::TempDir dir;
  agent::testing::TestAgent agent(
      {"--listen", "127.0.0.1:0", "--store", dir.path() + "/agent-store"},
      dir.path() + "/agent.log");
  uint16_t port = agent.ReadPort();
  ASSERT_GT(port, 0);
  const std::string device = "tcp://127.0.0.1:" + std::to_string(port);
  const std::string ran = dir.path() + "/ran";
  const std::string runner = dir.path() + "/dfarm-runner";
  agent::testing::WriteFile(runner, "#!/bin/sh\necho x >> " + ran + "\nexit 3\n");
  const std::string model = dir.path() + "/m.tflite";
  agent::testing::WriteFile(model, "model bytes");
  auto model_sha = Sha256OfFile(model);
  ASSERT_TRUE(model_sha.ok());

  const std::string db = dir.path() + "/x.db";
  auto store = store::OpenSqliteStore(db);
  ASSERT_TRUE(store.ok()) << store.message();
  auto run = (*store)->CreateRun("farm", "{}");
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE((*store)->SetRunMode(*run, store::kRunModeQueue).ok());
  store::JobRow row;
  row.job_key = "k";
  row.model = "m.tflite";
  row.model_path = model;
  row.model_sha256 = *model_sha;
  row.delegate = "cpu";
  row.device = device;
  row.target = store::kTargetAny;
  auto id = (*store)->AddJob(*run, row);
  ASSERT_TRUE(id.ok());

  ProviderOptions popts = DefaultProviderOptions();
  auto provider = MakeDeviceProvider(popts);
  std::atomic<bool> drain{false};
  std::ostringstream log;
  Progress progress(&log, false, 0, 0);
  SchedulerContext ctx;
  ctx.devices = provider.get();
  ctx.open_store = [&] { return store::OpenSqliteStore(db); };
  ctx.node.drain = &drain;
  ctx.progress = &progress;
  ctx.policy.retries = 3;
  ctx.node.wait_for_work = [] {};
  int asked = 0;
  std::string lost;  // why node a's claim is lost, as the test saw it happen
  ctx.node.claim = [&](store::StorePool& pool, const std::string& dev,
                       const agent::DeviceInfo& info) -> Result<std::optional<SweepJob>> {
    if (asked++ > 0) {
      drain = true;
      return std::optional<SweepJob>();
    }
    return pool.Call([&](store::Store& s) -> Result<std::optional<SweepJob>> {
      const store::DeviceTraits traits = TraitsOf(dev, info, {});
      auto a = s.ClaimJob("a", traits, -1);  // a lease already over: node a is stopped
      if (!a || !*a) return MakeError("node a claimed nothing");
      auto reaped = s.ReapExpiredClaims(3);
      if (!reaped || reaped->size() != 1) return MakeError("nothing reaped");
      auto b = s.ClaimJob("b", traits, 60);
      if (!b || !*b || (*b)->claim_id != 2) return MakeError("node b claimed nothing");
      store::JobOutcome ok;
      ok.status = store::kJobOk;
      ok.exit_code = 0;
      ok.claim_id = 2;
      if (auto r = s.RecordJobResult((*b)->id, ok); !r) return r.error();
      SweepJob job;  // node a wakes up with its claim 1
      job.id = (*a)->id;
      job.claim_id = (*a)->claim_id;
      job.device = dev;
      job.model = ModelSpec{model, "m.tflite"};
      job.model_sha256 = *model_sha;
      job.delegate.name = "cpu";
      job.benchmark.timeout_s = 60;
      job.runner_path = runner;
      return std::optional<SweepJob>(std::move(job));
    });
  };
  auto stats = RunJobs(ctx, {device}, {});
  progress.Finish();
  ASSERT_TRUE(stats.ok()) << stats.message();
  EXPECT_EQ(asked, 2);
  EXPECT_FALSE(std::filesystem::exists(ran)) << "the runner ran: " << log.str();
  auto job = (*store)->GetJob(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->status, store::kJobOk) << log.str();
  EXPECT_EQ(job->attempts, 0);
  EXPECT_EQ(job->claimed_by, "");
  EXPECT_EQ((*store)->GetRun(*run)->status, store::kRunFinished);
  auto claims = (*store)->ListJobClaims(*id);
  ASSERT_TRUE(claims.ok());
  ASSERT_EQ(claims->size(), 2u);
  EXPECT_EQ((*claims)[0].outcome, store::kClaimReaped);
  EXPECT_EQ((*claims)[1].outcome, store::kClaimFinished);
  EXPECT_THAT(log.str(), HasSubstr("is no longer held by claim 1"));
  EXPECT_THAT(log.str(), Not(HasSubstr("retrying")));
}

// The local agent refuses a store its group or others can write; dfarm
// creates that store (and the folders above it it creates) 0700, so that
// under umask 002 the agent still takes the store made for it.
TEST(LocalDeviceTest, UnderUmask002TheAgentTakesTheStoreMadeForIt) {
  agent::testing::TempDir dir;
  ProviderOptions popts = DefaultProviderOptions();
  popts.agent_path = agent::testing::kAgentBinary;
  const std::string made = dir.path() + "/cache/dfarm";
  popts.agent_store = made + "/agent-store";
  const mode_t old = ::umask(002);
  auto provider = MakeDeviceProvider(popts);
  auto session = provider->Open("local");
  ::umask(old);
  ASSERT_TRUE(session.ok()) << session.message();
  EXPECT_FALSE((*session)->client().device().abi.empty());
  for (const std::string& folder : {dir.path() + "/cache", made, popts.agent_store}) {
    struct stat st {};
    ASSERT_EQ(::stat(folder.c_str(), &st), 0) << folder;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << folder;
  }
}

}  // namespace
}  // namespace dfarm::harness
