#include "harness/run/sweep.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "agent/protocol/bundle.h"
#include "harness/farm/queue_job.h"
#include "harness/run/progress.h"
#include "harness/run/scheduler.h"
#include "harness/spec/matrix.h"
#include "harness/test_util.h"

namespace dfarm::harness {
namespace {

using ::testing::HasSubstr;

// An agent in memory: stores artifacts by sha256 and answers jobs with `run`.
// Device workers run in parallel threads: everything shared is under *mu.
class FakeClient : public agent::AgentClient {
 public:
  std::function<Result<agent::JobResult>(const std::string&, const agent::JobSpec&)> run;
  std::string device_name;
  std::mutex* mu;
  std::set<std::string>* stored;  // shared across reconnects, like a device's disk
  std::vector<agent::JobSpec>* jobs_seen;
  std::vector<size_t>* put_lists;  // the length of each PutArtifacts list
  std::string abi = "x86_64";
  std::vector<std::string> features = {"artifacts", "run_job", "plugin"};

  const agent::DeviceInfo& device() const override {
    info_.abi = abi;
    info_.features = features;
    return info_;
  }
  Result<std::vector<bool>> Have(const std::vector<std::string>& shas) override {
    std::lock_guard lock(*mu);
    std::vector<bool> out;
    for (const auto& s : shas) out.push_back(stored->count(s) > 0);
    return out;
  }
  Result<uint64_t> PutArtifact(const std::string& path, std::string* sha256_out) override {
    auto sha = Sha256OfFile(path);
    if (!sha) return sha.error();
    *sha256_out = *sha;
    std::lock_guard lock(*mu);
    if (!stored->insert(device_name + "/" + *sha).second) return uint64_t{0};
    return static_cast<uint64_t>(std::filesystem::file_size(path));
  }
  std::vector<Result<uint64_t>> PutArtifacts(const std::vector<agent::ArtifactPush>& files,
                                             std::vector<std::string>* sha256s_out) override {
    {
      std::lock_guard lock(*mu);
      put_lists->push_back(files.size());
    }
    return AgentClient::PutArtifacts(files, sha256s_out);
  }
  Result<agent::JobResult> RunJob(const agent::JobSpec& job) override {
    std::lock_guard lock(*mu);
    jobs_seen->push_back(job);
    return run(device_name, job);
  }

 private:
  mutable agent::DeviceInfo info_ = [] {
    agent::DeviceInfo d;
    d.agent_version = "0.1.0";
    d.protocol_version = 1;
    d.os = "Linux";
    d.cpu = "cpu";
    d.cores = 2;
    d.memory_bytes = 1 << 30;
    d.hostname = "host";
    return d;
  }();
};

class FakeSession : public DeviceSession {
 public:
  FakeSession(std::string name, std::unique_ptr<FakeClient> c)
      : name_(std::move(name)), client_(std::move(c)) {}
  const std::string& name() const override { return name_; }
  agent::AgentClient& client() override { return *client_; }

 private:
  std::string name_;
  std::unique_ptr<FakeClient> client_;
};

class FakeProvider : public DeviceProvider {
 public:
  // Answers every job; `device` is the device the job runs on.
  std::function<Result<agent::JobResult>(const std::string& device, const agent::JobSpec&)> run;
  std::mutex mu;
  std::set<std::string> stored;  // "device/sha256"
  std::vector<agent::JobSpec> jobs_seen;
  std::vector<size_t> put_lists;
  std::set<std::string> down;  // devices that refuse connections
  std::map<std::string, std::string> abis;
  std::set<std::string> no_plugin;     // devices whose agent lacks feature "plugin"
  std::set<std::string> with_inputs;   // devices whose agent speaks feature "inputs"
  std::set<std::string> with_profile;  // devices whose agent speaks feature "profile"
  int opens = 0;

  std::vector<std::string> KnownDevices() const override { return {"local"}; }
  Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) override {
    std::lock_guard lock(mu);
    ++opens;
    if (name.rfind("tcp://127.0.0.1:1", 0) == 0 || down.count(name)) {
      return MakeError("device '" + name + "': connection refused");
    }
    auto c = std::make_unique<FakeClient>();
    c->run = run;
    c->device_name = name;
    c->mu = &mu;
    c->stored = &stored;
    c->jobs_seen = &jobs_seen;
    c->put_lists = &put_lists;
    if (abis.count(name)) c->abi = abis[name];
    if (no_plugin.count(name)) c->features = {"artifacts", "run_job"};
    if (with_inputs.count(name)) c->features.push_back("inputs");
    if (with_profile.count(name)) c->features.push_back("profile");
    return std::unique_ptr<DeviceSession>(std::make_unique<FakeSession>(name, std::move(c)));
  }
};

constexpr const char* kOkJson =
    R"({"status":"ok","delegate":"cpu","num_threads":2,"threads_used":1,
        "metrics":{"init_us":100,"first_us":2000,"warmup_mean_us":1500,"mean_us":1234.5,
                   "std_us":10,"min_us":1200,"max_us":1300,"p50_us":1230,"p90_us":1280,
                   "p99_us":1299,"num_runs":3,"peak_rss_bytes":1048576,"arena_bytes":4096},
        "samples_us":[1200,1230,1300]})";

agent::JobResult Ok() {
  agent::JobResult r;
  r.status = "ok";
  r.exit_code = 0;
  r.runner_json = kOkJson;
  r.wall_ms = 12;
  return r;
}

class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runner_ = dir_.Write("bin/dfarm-runner", std::string(1000, 'r'));
    a_ = dir_.Write("a.tflite", std::string(300, 'a'));
    b_ = dir_.Write("b.tflite", std::string(200, 'b'));
    auto s = store::OpenSqliteStore((dir_.path() / "x.db").string());
    ASSERT_TRUE(s.ok()) << s.message();
    store_ = std::move(*s);
    spec_.name = "t";
    spec_.models = {{a_, "a.tflite"}, {b_, "b.tflite"}};
    spec_.delegates = {{"cpu", {}}};
    spec_.devices = {"local"};
    spec_.benchmark.num_runs = 3;
    options_.runner_path = runner_;
    options_.progress = &progress_;
    std::string db = (dir_.path() / "x.db").string();
    options_.open_store = [db] { return store::OpenSqliteStore(db); };
    spec_.scheduler.backoff_ms = 1;
  }

  TempDir dir_;
  std::string runner_, a_, b_;
  std::unique_ptr<store::Store> store_;
  SweepSpec spec_;
  SweepOptions options_;
  std::ostringstream progress_;
  FakeProvider devices_;
};

TEST_F(SweepTest, RecordsEveryJob) {
  devices_.run = [](const std::string&, const agent::JobSpec& j) -> Result<agent::JobResult> {
    if (j.num_runs != 3) return MakeError("wrong num_runs");
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->jobs, 2u);
  EXPECT_EQ(s->ok, 2u);
  EXPECT_EQ(s->failed, 0u);
  EXPECT_EQ(s->status, "finished");
  EXPECT_EQ(s->bytes_pushed, 1500u);
  EXPECT_EQ(progress_.str(),
            "[1/2] a cpu local: ok mean 1.2 ms\n[2/2] b cpu local: ok mean 1.2 ms\n");

  ASSERT_EQ(devices_.jobs_seen.size(), 2u);
  EXPECT_EQ(devices_.jobs_seen[0].runner_sha256, *Sha256OfFile(runner_));
  EXPECT_EQ(devices_.jobs_seen[1].model_sha256, *Sha256OfFile(b_));
  EXPECT_EQ(devices_.jobs_seen[0].timeout_ms, 120000u);

  auto run = store_->GetRun(s->run_id);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->status, "finished");
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].status, "ok");
  ASSERT_TRUE((*jobs)[0].metrics);
  EXPECT_DOUBLE_EQ((*jobs)[0].metrics->mean_us, 1234.5);
  EXPECT_EQ((*jobs)[0].metrics->peak_rss_bytes, 1048576);
  EXPECT_EQ((*jobs)[0].job_key.size(), 16u);
  auto samples = store_->GetSamples((*jobs)[0].id);
  ASSERT_TRUE(samples.ok());
  EXPECT_EQ(samples->size(), 3u);
  auto devs = store_->ListDevices();
  ASSERT_TRUE(devs.ok());
  ASSERT_EQ(devs->size(), 1u);
  EXPECT_EQ((*devs)[0].abi, "x86_64");

  // A second sweep pushes nothing new and yields the same job keys.
  progress_.str("");
  auto again = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->bytes_pushed, 0u);
  auto jobs2 = store_->ListJobs(again->run_id);
  EXPECT_EQ((*jobs2)[0].job_key, (*jobs)[0].job_key);
}

TEST_F(SweepTest, ClassifiesFailures) {
  int n = 0;
  devices_.run = [&n](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    agent::JobResult r;
    switch (n++) {
      case 0:
        r.status = "model_error";
        r.exit_code = 1;
        r.runner_json =
            R"({"status":"model_error","error":"failed to load model 'a.tflite': bad"})";
        return r;
      case 1:
        r.status = "ok";  // but no metrics
        r.runner_json = R"({"status":"ok"})";
        return r;
      case 2:
      case 3:
      case 4:  // three attempts of the third job
        return MakeError("connection reset by peer");
      default:
        r.status = "crashed";
        r.signal = 11;
        r.stderr_tail = "line one\nSegmentation fault\n";
        return r;
    }
  };
  spec_.delegates = {{"cpu", {}}, {"gpu", {{"precision", "fp16"}}}};
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->ok, 0u);
  EXPECT_EQ(s->failed, 4u);
  EXPECT_EQ(s->status, "finished");
  EXPECT_EQ(devices_.opens, 4);  // reconnected after each transport error
  EXPECT_EQ(n, 6);               // the infra job was tried 3 times, no other job twice
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].status, "model_error");
  EXPECT_EQ((*jobs)[0].error, "failed to load model 'a.tflite': bad");
  EXPECT_EQ((*jobs)[1].status, "crashed");
  EXPECT_EQ((*jobs)[1].error, "runner reported ok without metrics");
  EXPECT_EQ((*jobs)[1].delegate_options, "precision:fp16");
  EXPECT_EQ((*jobs)[2].status, "infra");
  EXPECT_THAT((*jobs)[2].error, HasSubstr("connection reset by peer (after 3 attempts)"));
  EXPECT_EQ((*jobs)[2].attempts, 3);
  EXPECT_EQ((*jobs)[0].attempts, 1);
  EXPECT_EQ((*jobs)[3].status, "crashed");
  EXPECT_EQ((*jobs)[3].error, "Segmentation fault");
  EXPECT_THAT(progress_.str(), HasSubstr("[2/4] a gpu(precision:fp16) local: crashed: runner"));
}

TEST_F(SweepTest, UnreachableDeviceFailsTheRun) {
  spec_.devices = {"tcp://127.0.0.1:1"};
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->status, "failed");
  EXPECT_EQ(s->failed, 2u);
  EXPECT_EQ(devices_.opens, 7);          // the first probe, then 2 jobs x 3 attempts
  EXPECT_EQ(s->quarantined.size(), 0u);  // 2 jobs in a row < quarantine_after
  auto jobs = store_->ListJobs(s->run_id);
  for (const auto& j : *jobs) {
    EXPECT_EQ(j.status, "infra");
    EXPECT_THAT(j.error, HasSubstr("connection refused"));
  }
  EXPECT_EQ(store_->GetRun(s->run_id)->status, "failed");
}

// An attempt that could not connect is an attempt: jobs.attempts counts it
// as the error's "(after 3 attempts)" does.
TEST_F(SweepTest, RefusedConnectsCountAsAttempts) {
  spec_.devices = {"tcp://127.0.0.1:1"};
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  for (const auto& j : *jobs) {
    EXPECT_EQ(j.status, "infra");
    EXPECT_THAT(j.error, HasSubstr("connection refused (after 3 attempts)"));
    EXPECT_EQ(j.attempts, 3);
  }
}

// After an attempt that ended infra the connection no longer trusts what it
// pushed: the agent may have dropped the model (quota, a corrupt blob), so
// the retry asks it again and pushes what it lacks.
TEST_F(SweepTest, AnInfraAttemptForgetsWhatWasPushed) {
  spec_.models = {{a_, "a.tflite"}};
  int runs = 0;
  devices_.run = [this, &runs](const std::string& device,
                               const agent::JobSpec& job) -> Result<agent::JobResult> {
    // Called with devices_.mu held.
    const std::string model = device + "/" + job.model_sha256;
    agent::JobResult r;
    if (runs++ == 0) {
      devices_.stored.erase(model);  // evicted while the job was refused
      r.status = "infra";
      r.error = "runner artifact missing";
      return r;
    }
    if (!devices_.stored.count(model)) {
      r.status = "infra";
      r.error = "model " + job.model_sha256 + " is not in the store";
      return r;
    }
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].status, "ok") << (*jobs)[0].error;
  EXPECT_EQ((*jobs)[0].attempts, 2);
  EXPECT_EQ(runs, 2);
}

// The same for the runner, which the connection pushed when it opened.
TEST_F(SweepTest, AnInfraAttemptAsksForTheRunnerAgain) {
  spec_.models = {{a_, "a.tflite"}};
  int runs = 0;
  devices_.run = [this, &runs](const std::string& device,
                               const agent::JobSpec& job) -> Result<agent::JobResult> {
    // Called with devices_.mu held.
    const std::string runner = device + "/" + job.runner_sha256;
    agent::JobResult r;
    if (runs++ == 0) {
      devices_.stored.erase(runner);  // deleted as corrupt
      r.status = "infra";
      r.error = "runner failed its sha256 check";
      return r;
    }
    if (!devices_.stored.count(runner)) {
      r.status = "infra";
      r.error = "runner " + job.runner_sha256 + " is not in the store";
      return r;
    }
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].status, "ok") << (*jobs)[0].error;
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(devices_.opens, 1);  // asked over the same connection
}

TEST_F(SweepTest, OneReachableDeviceIsEnough) {
  spec_.devices = {"local", "tcp://127.0.0.1:1"};
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->status, "finished");
  EXPECT_EQ(s->ok, 2u);
  EXPECT_EQ(s->failed, 2u);
}

TEST_F(SweepTest, CancelLeavesJobsQueued) {
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  devices_.run = [&cancel](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    cancel = true;
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->status, "cancelled");
  EXPECT_EQ(s->ok, 1u);
  EXPECT_EQ(s->not_run, 1u);
  EXPECT_EQ((*store_->ListJobs(s->run_id))[1].status, "queued");
}

TEST_F(SweepTest, MissingRunnerIsAnError) {
  options_.runner_path = (dir_.path() / "nope").string();
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("DFARM_RUNNER"));
  EXPECT_TRUE(store_->ListRuns()->empty());  // nothing recorded
}

TEST(RunnerJsonTest, Parses) {
  auto r = ParseRunnerJson(kOkJson);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok");
  ASSERT_TRUE(r->metrics);
  EXPECT_DOUBLE_EQ(r->metrics->p99_us, 1299);
  EXPECT_EQ(r->metrics->num_runs, 3);
  EXPECT_EQ(r->metrics->arena_bytes, 4096);
  EXPECT_EQ(r->metrics->threads_used, 1);
  EXPECT_EQ(r->samples_us.size(), 3u);
  EXPECT_FALSE(ParseRunnerJson("").ok());
  EXPECT_FALSE(ParseRunnerJson("[1]").ok());
}

constexpr const char* kPlacedJson =
    R"({"status":"ok","metrics":{"mean_us":10,"num_runs":3},"samples_us":[10,10,10],
        "placement":{"partitions":1,"nodes":[
          {"index":1,"op":"ADD","delegate":"example","partition":0},
          {"index":0,"op":"CONV_2D","delegate":"cpu","reason":"example: no CONV_2D"},
          {"index":2,"op":"DEQUANTIZE","delegate":"cpu","folded":true}]}})";

TEST(RunnerJsonTest, ParsesPlacement) {
  auto r = ParseRunnerJson(kPlacedJson);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_TRUE(r->placement.has_value());
  EXPECT_EQ(r->placement->partitions, 1);
  ASSERT_EQ(r->placement->nodes.size(), 3u);
  EXPECT_EQ(r->placement->nodes[0].index, 0);  // sorted by index
  EXPECT_EQ(r->placement->nodes[0].reason, "example: no CONV_2D");
  EXPECT_EQ(*r->placement->nodes[1].partition, 0);
  EXPECT_TRUE(r->placement->nodes[2].folded);
  EXPECT_FALSE(ParseRunnerJson(kOkJson)->placement.has_value());
  // A malformed placement is dropped, the metrics stay.
  auto bad = ParseRunnerJson(
      R"({"status":"ok","metrics":{"mean_us":1},"placement":{"partitions":1,"nodes":[{"op":"ADD"}]}})");
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->placement.has_value());
  EXPECT_TRUE(bad->metrics.has_value());
  auto dup = ParseRunnerJson(
      R"({"status":"ok","placement":{"partitions":0,"nodes":[{"index":0},{"index":0}]}})");
  ASSERT_TRUE(dup.ok());
  EXPECT_FALSE(dup->placement.has_value());
}

TEST(DeviceStateJsonTest, KeepsUnsetValuesAbsent) {
  agent::DeviceState st;
  st.unix_ms = 1700000000123;
  agent::CpuState cpu;
  cpu.cpu = 0;
  cpu.cur_freq_khz = 1800000;
  cpu.governor = "schedutil";
  st.cpus.push_back(cpu);
  agent::ThermalZoneState zone;
  zone.zone = 3;
  zone.type = "x86_pkg_temp";
  st.thermal_zones.push_back(zone);
  st.load_avg_1m = 0.25;
  auto doc = nlohmann::json::parse(DeviceStateToJson(st));
  EXPECT_EQ(doc["unix_ms"], 1700000000123);
  EXPECT_EQ(doc["cpus"][0]["cur_freq_khz"], 1800000);
  EXPECT_EQ(doc["cpus"][0]["governor"], "schedutil");
  EXPECT_FALSE(doc["cpus"][0].contains("online"));
  EXPECT_FALSE(doc["cpus"][0].contains("max_freq_khz"));
  EXPECT_EQ(doc["thermal_zones"][0]["type"], "x86_pkg_temp");
  EXPECT_FALSE(doc["thermal_zones"][0].contains("temp_c"));
  EXPECT_DOUBLE_EQ(doc["load_avg_1m"].get<double>(), 0.25);
  EXPECT_FALSE(doc.contains("load_avg_5m"));
  EXPECT_FALSE(doc.contains("battery_level_pct"));
}

TEST_F(SweepTest, RecordsPlacementAndDeviceState) {
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    agent::JobResult r = Ok();
    r.runner_json = kPlacedJson;
    agent::DeviceState before;
    before.unix_ms = 1;
    before.load_avg_1m = 1.5;
    r.state_before = before;
    agent::DeviceState after;
    after.unix_ms = 2;
    r.state_after = after;
    r.started_hot = true;
    r.throttled = true;
    r.hot_threshold_c = 65;
    r.state_note = "hot\nand throttled";
    return r;
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  for (const store::JobRow& j : *jobs) {
    ASSERT_TRUE(j.placement.has_value()) << j.model;
    EXPECT_EQ(j.placement->nodes, 3);
    EXPECT_EQ(j.placement->delegated_nodes, 1);
    EXPECT_EQ(j.placement->delegates, "example");
    EXPECT_TRUE(j.started_hot);
    EXPECT_TRUE(j.throttled);
    EXPECT_EQ(j.state_note, "hot and throttled");  // one line
    auto d = store_->GetJobDetail(j.id);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(d->state_before_json.has_value());
    EXPECT_DOUBLE_EQ(nlohmann::json::parse(*d->state_before_json)["load_avg_1m"].get<double>(),
                     1.5);
    ASSERT_TRUE(d->state_after_json.has_value());
    EXPECT_FALSE(nlohmann::json::parse(*d->state_after_json).contains("load_avg_1m"));
    EXPECT_DOUBLE_EQ(d->hot_threshold_c, 65);
  }
}

TEST_F(SweepTest, DevicesRunInParallel) {
  spec_.devices = {"local", "local:b"};
  // Each device's first job waits until the other device has a job running:
  // this finishes only when the two workers run at the same time.
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  devices_.run = [&](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    devices_.mu.unlock();  // FakeClient holds it; let the other device in
    ++running;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (running.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (running.load() >= 2) overlapped = true;
    devices_.mu.lock();
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(overlapped.load());
  EXPECT_EQ(s->ok, 4u);
  EXPECT_EQ(s->bytes_pushed, 2 * 1500u);  // runner and both models to each device
}

// While jobs run, the sweep renews its claim on the run on a connection of its
// own: a claim made to look ten minutes old during a job is fresh again before
// the job ends.
TEST_F(SweepTest, RenewsItsClaimOnTheRunWhileJobsRun) {
  options_.claim_refresh = std::chrono::milliseconds(20);
  spec_.models.resize(1);
  std::string db = (dir_.path() / "x.db").string();
  bool renewed = false;
  devices_.run = [&](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    devices_.mu.unlock();  // FakeClient holds it
    auto watcher = store::OpenSqliteStore(db);
    if (watcher.ok()) {
      const int64_t run_id = (*watcher)->ListRuns()->back().id;
      const int64_t stale = (*watcher)->GetRun(run_id)->owner_since - store::kRunClaimStaleSeconds;
      sqlite3* raw = nullptr;
      sqlite3_open(db.c_str(), &raw);
      sqlite3_busy_timeout(raw, 5000);
      const std::string sql = "UPDATE runs SET owner_since = " + std::to_string(stale) +
                              " WHERE id = " + std::to_string(run_id);
      sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr);
      sqlite3_close(raw);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!renewed && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        renewed = (*watcher)->GetRun(run_id)->owner_since > stale;
      }
    }
    devices_.mu.lock();
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(renewed);
  EXPECT_EQ(s->ok, 1u);
  EXPECT_EQ(store_->GetRun(s->run_id)->owner_pid, 0);  // released at the end
}

TEST_F(SweepTest, QuarantineMovesJobsToTheSameAbi) {
  spec_.devices = {"local", "local:bad", "local:arm"};
  spec_.scheduler.retries = 1;
  spec_.scheduler.quarantine_after = 1;
  spec_.scheduler.failover = "same_abi";
  devices_.abis["local:arm"] = "arm64-v8a";
  devices_.run = [](const std::string& device, const agent::JobSpec&) -> Result<agent::JobResult> {
    if (device == "local:bad") return MakeError("connection reset by peer");
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->jobs, 6u);
  EXPECT_EQ(s->ok, 6u) << progress_.str();
  EXPECT_EQ(s->moved, 2u);
  EXPECT_EQ(s->quarantined, std::vector<std::string>{"local:bad"});
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  for (const auto& j : *jobs) {
    if (j.moved_from.empty()) continue;
    EXPECT_EQ(j.moved_from, "local:bad");
    EXPECT_EQ(j.device, "local");  // x86_64 like local:bad; never local:arm
    EXPECT_EQ(j.status, "ok");
  }
  auto devs = store_->ListDevices();
  ASSERT_TRUE(devs.ok());
  bool seen = false;
  for (const auto& d : *devs) {
    if (d.name != "local:bad") continue;
    seen = true;
    EXPECT_EQ(d.state, "quarantined");
    EXPECT_THAT(d.state_reason, HasSubstr("connection reset by peer"));
  }
  EXPECT_TRUE(seen);
  EXPECT_THAT(progress_.str(), HasSubstr("device 'local:bad' quarantined after 1 jobs in a row"));
}

// A moved job is keyed like one planned on its new device, runner build
// included, so it stays comparable and --resume finds its build again.
TEST_F(SweepTest, AMovedJobKeepsItsRunnerInItsKey) {
  std::string a = dir_.Write("builds/a/dfarm-runner", std::string(70, 'a'));
  spec_.runners = {{"A", {{"x86_64", a}}}};
  spec_.devices = {"local", "local:bad"};
  spec_.scheduler.retries = 0;
  spec_.scheduler.quarantine_after = 1;
  spec_.scheduler.failover = "same_abi";
  devices_.run = [](const std::string& device, const agent::JobSpec&) -> Result<agent::JobResult> {
    if (device == "local:bad") return MakeError("connection reset by peer");
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->ok, 4u) << progress_.str();
  EXPECT_EQ(s->moved, 2u);
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  std::map<std::string, std::string> planned_key;  // model -> key of its job planned on local
  for (const auto& j : *jobs) {
    if (j.moved_from.empty()) planned_key[j.model + "@" + j.device] = j.job_key;
  }
  for (const auto& j : *jobs) {
    if (j.moved_from.empty()) continue;
    EXPECT_EQ(j.device, "local");
    EXPECT_EQ(j.job_key, planned_key[j.model + "@local"]) << j.model;
    EXPECT_EQ(j.job_key, JobKey(j.model_sha256, spec_.delegates[0], "local", spec_.benchmark, "",
                                "A", Sha256OfBytes(std::string(70, 'a'))));
  }
}

TEST_F(SweepTest, QuarantineWithoutFailoverRecordsInfra) {
  spec_.devices = {"local", "local:bad"};
  spec_.scheduler.retries = 0;
  spec_.scheduler.quarantine_after = 1;
  devices_.run = [](const std::string& device, const agent::JobSpec&) -> Result<agent::JobResult> {
    if (device == "local:bad") return MakeError("connection reset by peer");
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->ok, 2u);
  EXPECT_EQ(s->failed, 2u);
  EXPECT_EQ(s->moved, 0u);
  auto jobs = store_->ListJobs(s->run_id);
  EXPECT_THAT((*jobs)[3].error, HasSubstr("quarantined before this job ran"));
}

TEST_F(SweepTest, TestFailuresAreNeverRetried) {
  int calls = 0;
  devices_.run = [&](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    ++calls;
    agent::JobResult r;
    r.status = calls == 1 ? "timeout" : "crashed";
    r.error = "no";
    return r;
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(s->failed, 2u);
}

TEST_F(SweepTest, ResumeRunsOnlyPendingJobs) {
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  spec_.num_threads = {1, 2};  // 2 models x 2 thread counts
  devices_.run = [&cancel](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    cancel = true;
    return Ok();
  };
  auto first = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_EQ(first->status, "cancelled");
  ASSERT_EQ(first->ok, 1u);
  // A job left "running" by a killed dfarm has no result: it runs again.
  auto jobs = store_->ListJobs(first->run_id);
  ASSERT_TRUE(store_->MarkJobRunning((*jobs)[1].id, 0).ok());

  cancel = false;
  options_.cancel = nullptr;
  devices_.jobs_seen.clear();
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  progress_.str("");
  auto resumed = ResumeSweep(first->run_id, *store_, devices_, options_);
  ASSERT_TRUE(resumed.ok()) << resumed.message();
  EXPECT_EQ(resumed->run_id, first->run_id);
  EXPECT_EQ(resumed->resumed, 3u);
  EXPECT_EQ(resumed->jobs, 4u);
  EXPECT_EQ(resumed->ok, 4u);
  EXPECT_EQ(resumed->status, "finished");
  ASSERT_EQ(devices_.jobs_seen.size(), 3u);
  EXPECT_EQ(devices_.jobs_seen[0].num_threads, 2u);  // the job's own thread count
  EXPECT_THAT(progress_.str(), HasSubstr("[2/4] "));
  jobs = store_->ListJobs(first->run_id);
  ASSERT_EQ(jobs->size(), 4u);
  for (const auto& j : *jobs) EXPECT_EQ(j.status, "ok");
  EXPECT_EQ(store_->GetRun(first->run_id)->status, "finished");

  // Nothing left: a second resume runs nothing.
  devices_.jobs_seen.clear();
  auto again = ResumeSweep(first->run_id, *store_, devices_, options_);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->resumed, 0u);
  EXPECT_EQ(again->ok, 4u);
  EXPECT_TRUE(devices_.jobs_seen.empty());
  EXPECT_FALSE(ResumeSweep(99, *store_, devices_, options_).ok());
}

// benchmark.repeats 3: each cell runs as 3 jobs (trials 0..2) stored with
// their trial and runner build; a sweep cut short and resumed ends with
// exactly 3 ok jobs per cell.
TEST_F(SweepTest, RepeatsResumeToThreeOkTrialsPerCell) {
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  spec_.benchmark.repeats = 3;
  spec_.num_threads = {1, 2};  // 2 models x 2 thread counts = 4 cells
  std::atomic<int> ran{0};
  devices_.run = [&](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    if (++ran == 5) cancel = true;  // a partial run: 5 of 12 jobs
    return Ok();
  };
  auto first = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_EQ(first->status, "cancelled");
  EXPECT_EQ(first->jobs, 12u);
  EXPECT_EQ(first->ok, 5u);
  auto jobs = store_->ListJobs(first->run_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 12u);
  // Stored in run order: every cell's trial 0, then trial 1, then trial 2.
  for (size_t i = 0; i < jobs->size(); ++i) EXPECT_EQ((*jobs)[i].trial, int64_t(i / 4)) << i;
  for (const auto& j : *jobs) {
    EXPECT_EQ(j.runner, "");  // the default runner
    EXPECT_EQ(j.runner_sha256, *Sha256OfFile(runner_));
  }

  cancel = false;
  options_.cancel = nullptr;
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  auto resumed = ResumeSweep(first->run_id, *store_, devices_, options_);
  ASSERT_TRUE(resumed.ok()) << resumed.message();
  EXPECT_EQ(resumed->resumed, 7u);
  EXPECT_EQ(resumed->ok, 12u);
  EXPECT_EQ(resumed->status, "finished");
  jobs = store_->ListJobs(first->run_id);
  ASSERT_EQ(jobs->size(), 12u);
  std::map<std::pair<std::string, uint32_t>, std::set<int64_t>> trials;  // cell -> trials
  std::set<std::string> keys;
  for (const auto& j : *jobs) {
    EXPECT_EQ(j.status, "ok");
    trials[{j.model, j.num_threads}].insert(j.trial);
    keys.insert(j.job_key);
  }
  EXPECT_EQ(keys.size(), 12u);
  ASSERT_EQ(trials.size(), 4u);
  for (const auto& [cell, t] : trials) EXPECT_EQ(t, (std::set<int64_t>{0, 1, 2})) << cell.first;
}

// With "runners" (keyed builds), a resumed trial finds its build by its key too.
TEST_F(SweepTest, RepeatsResumeWithKeyedRunners) {
  std::string a = dir_.Write("builds/a/dfarm-runner", std::string(70, 'a'));
  spec_.runners = {{"A", {{"x86_64", a}}}};
  spec_.benchmark.repeats = 2;
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  devices_.run = [&](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    cancel = true;
    return Ok();
  };
  auto first = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_EQ(first->ok, 1u);
  options_.cancel = nullptr;
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  auto resumed = ResumeSweep(first->run_id, *store_, devices_, options_);
  ASSERT_TRUE(resumed.ok()) << resumed.message();
  EXPECT_EQ(resumed->ok, 4u);
  auto jobs = store_->ListJobs(first->run_id);
  ASSERT_TRUE(jobs.ok());
  for (const auto& j : *jobs) {
    EXPECT_EQ(j.runner, "A");
    EXPECT_EQ(j.runner_sha256, Sha256OfBytes(std::string(70, 'a')));
  }
}

TEST_F(SweepTest, PushesPluginsAndSendsThemBySha) {
  const std::string plugin = dir_.Write("plugins/libp.so", std::string(50, 'p'));
  const std::string plugin_sha = *Sha256OfFile(plugin);
  spec_.models = {{a_, "a.tflite"}};
  spec_.delegates = {{"cpu", {}}, {"external", {{"path", plugin}, {"k", "v"}}}};
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->ok, 2u);
  EXPECT_EQ(s->bytes_pushed, 1000u + 300u + 50u);  // runner, model, plugin
  ASSERT_EQ(devices_.jobs_seen.size(), 2u);
  EXPECT_EQ(devices_.jobs_seen[0].plugin_sha256, "");
  EXPECT_EQ(devices_.jobs_seen[1].delegate, "external");
  EXPECT_EQ(devices_.jobs_seen[1].plugin_sha256, plugin_sha);
  EXPECT_EQ(devices_.jobs_seen[1].delegate_options, "k:v");  // no host path reaches the agent
  EXPECT_TRUE(devices_.stored.count("local/" + plugin_sha));
  EXPECT_THAT(progress_.str(), HasSubstr("a external(k:v;path:libp.so) local: ok"));

  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[1].delegate_options, "k:v;path:libp.so");
  const std::string key = (*jobs)[1].job_key;
  EXPECT_EQ(key,
            JobKey(*Sha256OfFile(a_), spec_.delegates[1], "local", spec_.benchmark, plugin_sha));

  // The same plugin bytes elsewhere: same key, nothing pushed again.
  const std::string moved = dir_.Write("elsewhere/libq.so", std::string(50, 'p'));
  spec_.delegates[1].options["path"] = moved;
  auto again = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->bytes_pushed, 0u);
  EXPECT_EQ((*store_->ListJobs(again->run_id))[1].job_key, key);

  // A rebuilt plugin: a new key.
  dir_.Write("elsewhere/libq.so", std::string(51, 'p'));
  auto rebuilt = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.message();
  EXPECT_EQ(rebuilt->bytes_pushed, 51u);
  EXPECT_NE((*store_->ListJobs(rebuilt->run_id))[1].job_key, key);
}

TEST_F(SweepTest, PluginJobOnAnAgentWithoutThePluginFeatureIsInfra) {
  const std::string plugin = dir_.Write("libp.so", "plugin");
  spec_.models = {{a_, "a.tflite"}};
  spec_.delegates = {{"external", {{"path", plugin}}}, {"cpu", {}}};
  spec_.scheduler.retries = 2;
  spec_.scheduler.quarantine_after = 1;
  devices_.no_plugin.insert("local");
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->ok, 1u);
  EXPECT_EQ(s->failed, 1u);
  EXPECT_TRUE(s->quarantined.empty());  // the device still runs other jobs
  ASSERT_EQ(devices_.jobs_seen.size(), 1u);
  EXPECT_EQ(devices_.jobs_seen[0].delegate, "cpu");
  EXPECT_FALSE(devices_.stored.count("local/" + *Sha256OfFile(plugin)));
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].status, "infra");
  EXPECT_THAT((*jobs)[0].error, HasSubstr("device 'local'"));
  EXPECT_THAT((*jobs)[0].error, HasSubstr("does not speak feature 'plugin'"));
  EXPECT_THAT((*jobs)[0].error, ::testing::Not(HasSubstr("attempts")));  // not retried
  EXPECT_EQ((*jobs)[1].status, "ok");

  SweepJob with_plugin;
  with_plugin.plugin_sha256 = std::string(64, 'p');
  EXPECT_TRUE(CheckDeviceTakesJob({"run_job", "plugin"}, "d", with_plugin, "").ok());
  EXPECT_EQ(CheckDeviceTakesJob({"run_job"}, "tcp://127.0.0.1:9", with_plugin, "").message(),
            "device 'tcp://127.0.0.1:9': its dfarm-agent does not speak feature 'plugin', so it "
            "cannot load external delegate plugins (update dfarm-agent there)");
}

// benchmark.profile: the job asks the agent for a profile (feature
// "profile") and the runner's "profile" section reaches the store; an agent
// without the feature gets the job recorded infra naming the device and the
// feature, without a retry.
TEST_F(SweepTest, ProfileReachesTheStoreAndNeedsItsFeature) {
  spec_.models = {{a_, "a.tflite"}};
  spec_.benchmark.profile = true;
  devices_.with_profile.insert("local");
  devices_.run = [](const std::string&, const agent::JobSpec& j) -> Result<agent::JobResult> {
    agent::JobResult r = Ok();
    if (!j.profile) return r;
    r.runner_json.pop_back();  // the closing brace
    r.runner_json +=
        R"(,"profile":{"runs":3,"nodes":[{"index":0,"op":"CONV_2D","delegate":"cpu","mean_us":9},
           {"index":1,"op":"DELEGATE","delegate":"xnnpack","partition":0,"nodes":[1,2],
            "mean_us":3,"ops":[{"op":"ADD"}]}],
           "by_op":[{"op":"CONV_2D","count":1,"total_us":9,"pct":75},
                    {"op":"DELEGATE","count":1,"total_us":3,"pct":25}]}})";
    return r;
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(devices_.jobs_seen.size(), 1u);
  EXPECT_TRUE(devices_.jobs_seen[0].profile);
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ((*jobs)[0].status, "ok") << (*jobs)[0].error;
  auto profile = store_->GetProfile((*jobs)[0].id);
  ASSERT_TRUE(profile.ok()) << profile.message();
  ASSERT_TRUE(profile->has_value());
  EXPECT_EQ((*profile)->runs, 3);
  ASSERT_EQ((*profile)->nodes.size(), 2u);
  EXPECT_EQ((*profile)->nodes[1].nodes, (std::vector<int64_t>{1, 2}));  // "ops" ignored
  ASSERT_EQ((*profile)->by_op.size(), 2u);
  EXPECT_DOUBLE_EQ((*profile)->by_op[0].pct, 75);

  devices_.with_profile.clear();
  devices_.jobs_seen.clear();
  auto old = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(old.ok()) << old.message();
  EXPECT_TRUE(devices_.jobs_seen.empty());
  jobs = store_->ListJobs(old->run_id);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].status, "infra");
  EXPECT_EQ((*jobs)[0].error,
            "device 'local': its dfarm-agent does not speak feature 'profile', so it cannot "
            "profile jobs (spec benchmark.profile): update dfarm-agent there, or leave out "
            "benchmark.profile");
  EXPECT_FALSE(store_->GetProfile((*jobs)[0].id)->has_value());
}

// A farm job's payload carries benchmark.profile to the node that runs it
// (and leaves the key out when false, as payloads before it had).
TEST(QueuePayloadTest, CarriesProfile) {
  SweepJob job;
  job.model = {"/m.tflite", "m.tflite"};
  job.model_sha256 = std::string(64, 'a');
  job.delegate = {"cpu", {}};
  job.runner = "main";
  job.benchmark.profile = true;
  const std::map<std::string, std::string> builds = {{"x86_64", std::string(64, 'b')}};
  store::JobRow row;
  auto fetch = [](const std::string& sha, const std::string&) -> Result<std::string> {
    return "/fetched/" + sha.substr(0, 8);
  };
  row.payload = EncodePayload(job, builds);
  EXPECT_EQ(nlohmann::json::parse(row.payload)["benchmark"]["profile"], true);
  auto decoded = DecodePayload(row, "x86_64", fetch);
  ASSERT_TRUE(decoded.ok()) << decoded.message();
  EXPECT_TRUE(decoded->benchmark.profile);
  job.benchmark.profile = false;
  row.payload = EncodePayload(job, builds);
  EXPECT_FALSE(nlohmann::json::parse(row.payload)["benchmark"].contains("profile"));
  decoded = DecodePayload(row, "x86_64", fetch);
  ASSERT_TRUE(decoded.ok()) << decoded.message();
  EXPECT_FALSE(decoded->benchmark.profile);
}

// Runner kinds and bundles need their agent features (an older agent would
// run a tool with dfarm-runner's flags, or exec the archive).
TEST_F(SweepTest, RunnerKindsAndBundlesNeedTheirFeatures) {
  const std::string bundle = (dir_.path() / "r.bundle").string();
  const std::string exe = dir_.Write("prog", "#!/bin/sh\n");
  ASSERT_TRUE(agent::PackBundleFile({"bin/prog", "", "lib"}, {{"bin/prog", 0755, exe}}, bundle));
  const std::vector<std::string> old_agent = {"run_job", "plugin"};
  auto of_kind = [](const std::string& kind) {
    SweepJob job;
    job.runner_kind = kind;
    return job;
  };
  EXPECT_TRUE(CheckDeviceTakesJob(old_agent, "d", of_kind("dfarm"), exe).ok());
  EXPECT_TRUE(CheckDeviceTakesJob(old_agent, "d", of_kind("tflite"), exe).ok());  // our contract
  EXPECT_EQ(CheckDeviceTakesJob(old_agent, "adb:X", of_kind("benchmark_model"), exe).message(),
            "device 'adb:X': its dfarm-agent does not speak feature 'runner_kinds', so it cannot "
            "run runners of kind 'benchmark_model' (update dfarm-agent there)");
  EXPECT_THAT(CheckDeviceTakesJob(old_agent, "d", of_kind("dfarm"), bundle).message(),
              HasSubstr("does not speak feature 'bundles', so it cannot run the runner bundle"));
  EXPECT_TRUE(CheckDeviceTakesJob({"run_job", "runner_kinds", "bundles"}, "d",
                                  of_kind("inference_diff"), bundle)
                  .ok());
}

// A model's input sets are packed, pushed once per device (with the model,
// in one pipelined list) and named in the job; they change its key; an agent without feature
// "inputs" gets the job recorded infra naming the device, and still runs the model without sets.
TEST_F(SweepTest, InputSetsArePushedOnceAndKeyed) {
  dir_.Write("sets/s0/input_0.bin", "0000");
  dir_.Write("sets/s1/input_0.bin", "1111");
  auto inputs = ParseInputsSpec(nlohmann::json("sets"), "inputs", dir_.path().string());
  ASSERT_TRUE(inputs.ok()) << inputs.message();
  spec_.models = {{a_, "a.tflite", *inputs}, {b_, "b.tflite", {}}};
  spec_.delegates = {{"cpu", {}}, {"xnnpack", {}}};
  options_.inputs_cache_dir = (dir_.path() / "cache").string();
  devices_.with_inputs.insert("local");
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->ok, 4u);
  ASSERT_EQ(devices_.jobs_seen.size(), 4u);
  ASSERT_EQ(devices_.jobs_seen[0].input_set_sha256s.size(), 2u);
  EXPECT_EQ(devices_.jobs_seen[1].input_set_sha256s, devices_.jobs_seen[0].input_set_sha256s);
  EXPECT_TRUE(devices_.jobs_seen[2].input_set_sha256s.empty());
  const std::string set0 = devices_.jobs_seen[0].input_set_sha256s[0];
  EXPECT_TRUE(devices_.stored.count("local/" + set0));
  // runner 1000 + models 300 + 200 + two packed sets of one 4-byte file (24 bytes each), once.
  EXPECT_EQ(s->bytes_pushed, 1000u + 300 + 200 + 2 * 24);
  // Model a with its two sets in one list, then model b; nothing again.
  EXPECT_EQ(devices_.put_lists, (std::vector<size_t>{3, 1}));
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  SweepJob plain;
  plain.model_sha256 = (*jobs)[0].model_sha256;
  plain.delegate = {"cpu", {}};
  plain.device = "local";
  plain.benchmark = spec_.benchmark;
  EXPECT_NE((*jobs)[0].job_key, JobKeyOf(plain));
  plain.model_sha256 = (*jobs)[2].model_sha256;
  EXPECT_EQ((*jobs)[2].job_key, JobKeyOf(plain));  // no sets: the key as before
  auto artifacts = store_->ListArtifacts();
  ASSERT_TRUE(artifacts.ok());
  int input_sets = 0;
  for (const store::ArtifactRow& a : *artifacts) input_sets += a.kind == "inputs" ? 1 : 0;
  EXPECT_EQ(input_sets, 2);

  // An agent without the feature: the jobs with sets end infra, not retried.
  devices_.with_inputs.clear();
  devices_.jobs_seen.clear();
  auto old = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(old.ok()) << old.message();
  EXPECT_EQ(old->ok, 2u);
  EXPECT_EQ(old->failed, 2u);
  EXPECT_TRUE(old->quarantined.empty());
  auto old_jobs = store_->ListJobs(old->run_id);
  ASSERT_TRUE(old_jobs.ok());
  EXPECT_EQ((*old_jobs)[0].status, "infra");
  EXPECT_EQ((*old_jobs)[0].error,
            "device 'local': its dfarm-agent does not speak feature 'inputs', so it cannot run "
            "the model's input sets (update dfarm-agent there)");
}

// A resumed job gets its model's input sets again from the stored spec, and
// with "runners" (keyed builds) its key still matches with them.
TEST_F(SweepTest, ResumeFindsTheInputSetsAgain) {
  dir_.Write("sets/s0/input_0.bin", "0000");
  dir_.Write("sets/s1/input_0.bin", "1111");
  auto inputs = ParseInputsSpec(nlohmann::json("sets"), "inputs", dir_.path().string());
  ASSERT_TRUE(inputs.ok()) << inputs.message();
  spec_.models = {{a_, "a.tflite", *inputs}};
  spec_.delegates = {{"cpu", {}}, {"xnnpack", {}}};
  spec_.runners = {RunnerSpec{"main", {{HostAbi(), runner_}}}};
  options_.inputs_cache_dir = (dir_.path() / "cache").string();
  devices_.with_inputs.insert("local");
  devices_.abis["local"] = HostAbi();
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  devices_.run = [&cancel](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    cancel = true;
    return Ok();
  };
  auto first = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_EQ(first->ok, 1u);
  ASSERT_EQ(devices_.jobs_seen.size(), 1u);
  const std::vector<std::string> sets = devices_.jobs_seen[0].input_set_sha256s;
  ASSERT_EQ(sets.size(), 2u);

  options_.cancel = nullptr;
  devices_.jobs_seen.clear();
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  auto resumed = ResumeSweep(first->run_id, *store_, devices_, options_);
  ASSERT_TRUE(resumed.ok()) << resumed.message();
  EXPECT_EQ(resumed->ok, 2u);
  ASSERT_EQ(devices_.jobs_seen.size(), 1u);
  EXPECT_EQ(devices_.jobs_seen[0].input_set_sha256s, sets);
  EXPECT_EQ(devices_.jobs_seen[0].delegate, "xnnpack");
}

TEST_F(SweepTest, ResumeFindsThePluginByItsKey) {
  const std::string p1 = dir_.Write("one/libp.so", "plugin one");
  const std::string p2 = dir_.Write("two/libp.so", "plugin two");  // same file name
  spec_.models = {{a_, "a.tflite"}};
  spec_.delegates = {{"cpu", {}}, {"external", {{"path", p1}}}, {"external", {{"path", p2}}}};
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  devices_.run = [&cancel](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    cancel = true;
    return Ok();
  };
  auto first = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_EQ(first->not_run, 2u);

  options_.cancel = nullptr;
  devices_.jobs_seen.clear();
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  auto resumed = ResumeSweep(first->run_id, *store_, devices_, options_);
  ASSERT_TRUE(resumed.ok()) << resumed.message();
  EXPECT_EQ(resumed->ok, 3u);
  ASSERT_EQ(devices_.jobs_seen.size(), 2u);
  EXPECT_EQ(devices_.jobs_seen[0].plugin_sha256, *Sha256OfFile(p1));
  EXPECT_EQ(devices_.jobs_seen[1].plugin_sha256, *Sha256OfFile(p2));
  EXPECT_EQ(devices_.jobs_seen[1].delegate_options, "");

  // A plugin rebuilt since the run was created refuses the resume.
  options_.cancel = &cancel;
  cancel = false;
  devices_.run = [&cancel](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    cancel = true;
    return Ok();
  };
  auto second = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(second.ok()) << second.message();
  dir_.Write("two/libp.so", "plugin two, rebuilt");
  auto refused = ResumeSweep(second->run_id, *store_, devices_, options_);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("delegate plugin 'libp.so' of job"));
  EXPECT_THAT(refused.message(), HasSubstr("changed since the run was created"));
}

TEST(ProgressTest, PlainAndTerminal) {
  std::ostringstream plain;
  Progress p(&plain, false, 3, 1);
  p.JobDone("a cpu local", "ok", " mean 1.0 ms");
  p.JobDone("b cpu local", "crashed", ": boom");
  EXPECT_EQ(plain.str(), "[2/3] a cpu local: ok mean 1.0 ms\n[3/3] b cpu local: crashed: boom\n");
  std::ostringstream tty;
  Progress t(&tty, true, 4, 0);
  t.JobDone("a cpu local", "ok", "");
  t.JobDone("b cpu local", "crashed", ": boom");
  t.Finish();
  EXPECT_THAT(tty.str(), HasSubstr("[2/4] b cpu local: crashed: boom\n"));
  EXPECT_THAT(tty.str(), HasSubstr("2/4 jobs, 1 failed, 0 running, ETA "));
  EXPECT_EQ(tty.str().find("a cpu local"), std::string::npos);  // ok jobs only move the bar
  EXPECT_EQ(Progress::FormatDuration(std::chrono::seconds(65)), "1m05s");
  EXPECT_EQ(Progress::FormatDuration(std::chrono::seconds(7300)), "2h01m");
}

TEST_F(SweepTest, EachDeviceRunsTheBuildForItsAbi) {
  std::string x86 = dir_.Write("builds/x86/dfarm-runner", std::string(700, 'x'));
  std::string arm = dir_.Write("builds/arm/dfarm-runner", std::string(500, 'y'));
  spec_.runners = {{"main", {{"x86_64", x86}, {"arm64-v8a", arm}}}};
  spec_.devices = {"tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"};
  devices_.abis["tcp://127.0.0.1:7002"] = "arm64-v8a";
  std::map<std::string, std::set<std::string>> runner_of;  // under devices_.mu
  devices_.run = [&](const std::string& device,
                     const agent::JobSpec& j) -> Result<agent::JobResult> {
    runner_of[device].insert(j.runner_sha256);
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->ok, 4u);
  EXPECT_EQ(runner_of["tcp://127.0.0.1:7001"],
            std::set<std::string>{Sha256OfBytes(std::string(700, 'x'))});
  EXPECT_EQ(runner_of["tcp://127.0.0.1:7002"],
            std::set<std::string>{Sha256OfBytes(std::string(500, 'y'))});
  // Runner bytes: 700 to one device, 500 to the other; models 300 + 200 to both.
  EXPECT_EQ(s->bytes_pushed, 700u + 500u + 2 * (300u + 200u));
  // A second identical sweep pushes nothing.
  auto again = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->bytes_pushed, 0u);
  // Job keys cover the runner: equal across the two runs.
  auto first_jobs = store_->ListJobs(s->run_id);
  auto second_jobs = store_->ListJobs(again->run_id);
  ASSERT_TRUE(first_jobs.ok() && second_jobs.ok());
  ASSERT_EQ(first_jobs->size(), second_jobs->size());
  for (size_t i = 0; i < first_jobs->size(); ++i) {
    EXPECT_EQ((*first_jobs)[i].job_key, (*second_jobs)[i].job_key);
  }
}

TEST_F(SweepTest, TwoRunnersAreAMatrixAxis) {
  std::string a = dir_.Write("builds/a/dfarm-runner", std::string(70, 'a'));
  std::string b = dir_.Write("builds/b/dfarm-runner", std::string(90, 'b'));
  spec_.runners = {{"A", {{"x86_64", a}}}, {"B", {{"x86_64", b}}}};
  std::vector<std::string> order;
  devices_.run = [&](const std::string&, const agent::JobSpec& j) -> Result<agent::JobResult> {
    order.push_back(j.runner_sha256);
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->jobs, 4u);  // 2 models x 2 runners
  EXPECT_EQ(s->ok, 4u);
  std::string sa = Sha256OfBytes(std::string(70, 'a')), sb = Sha256OfBytes(std::string(90, 'b'));
  EXPECT_EQ(order, (std::vector<std::string>{sa, sa, sb, sb}));
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  std::set<std::string> keys;
  for (const auto& j : *jobs) keys.insert(j.job_key);
  EXPECT_EQ(keys.size(), 4u);
}

// A paired sweep runs both runners in one pass over each device's queue:
// the device sees the builds alternate pair by pair in the plan's order
// (ABBA blocks), every job runs the build of its own runner, and the store
// keeps each job's pair.
TEST_F(SweepTest, PairedRunnersRunInterleavedOnTheSameDevice) {
  std::string a = dir_.Write("builds/a/dfarm-runner", std::string(70, 'a'));
  std::string b = dir_.Write("builds/b/dfarm-runner", std::string(90, 'b'));
  spec_.runners = {{"A", {{"x86_64", a}}}, {"B", {{"x86_64", b}}}};
  spec_.pairing.baseline_runner = "A";
  spec_.benchmark.repeats = 4;
  spec_.devices = {"local", "local:two"};
  std::map<std::string, std::vector<std::string>> order;  // device -> builds run, in order
  devices_.run = [&](const std::string& device,
                     const agent::JobSpec& j) -> Result<agent::JobResult> {
    order[device].push_back(j.runner_sha256);
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->jobs, 32u);  // 2 devices x 2 models x 2 runners x 4 trials
  EXPECT_EQ(s->ok, 32u);
  const std::string sa = Sha256OfBytes(std::string(70, 'a'));
  const std::string sb = Sha256OfBytes(std::string(90, 'b'));
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  std::map<std::string, std::vector<store::JobRow>> by_device;  // in id order: the plan's
  for (const auto& j : *jobs) by_device[j.device].push_back(j);
  ASSERT_EQ(by_device.size(), 2u);
  for (const auto& [device, rows] : by_device) {
    ASSERT_EQ(rows.size(), 16u) << device;
    ASSERT_EQ(order[device].size(), 16u) << device;
    for (size_t i = 0; i < rows.size(); ++i) {
      // The device ran the jobs in id order, each with its own runner's build.
      EXPECT_EQ(order[device][i], rows[i].runner == "A" ? sa : sb) << device << " " << i;
      EXPECT_EQ(rows[i].runner_sha256, order[device][i]) << device << " " << i;
      ASSERT_GT(rows[i].pair, 0);
      if (i % 2 == 1) {  // a pair: two neighbours, one of each runner, one trial
        EXPECT_EQ(rows[i].pair, rows[i - 1].pair) << device << " " << i;
        EXPECT_NE(rows[i].runner, rows[i - 1].runner) << device << " " << i;
        EXPECT_EQ(rows[i].trial, rows[i - 1].trial) << device << " " << i;
        EXPECT_EQ(rows[i].model, rows[i - 1].model) << device << " " << i;
      }
    }
  }
  // Both runners' builds are recorded with the run (a resume checks them).
  auto recorded = store_->ListRunRunners(s->run_id);
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ(recorded->size(), 2u);
  // The stored spec keeps the pairing.
  auto run = store_->GetRun(s->run_id);
  ASSERT_TRUE(run.ok());
  EXPECT_THAT(run->spec_json, HasSubstr(R"("pairing":{"baseline_runner":"A"})"));
}

TEST_F(SweepTest, ADeviceWithoutABuildForItsAbiIsInfra) {
  std::string x86 = dir_.Write("builds/x86/dfarm-runner", std::string(700, 'x'));
  std::string arm = dir_.Write("builds/arm/dfarm-runner", std::string(500, 'y'));
  spec_.runners = {{"main", {{"x86_64", x86}, {"arm64-v8a", arm}}}};
  spec_.devices = {"local", "tcp://127.0.0.1:7003"};
  devices_.abis["tcp://127.0.0.1:7003"] = "riscv64";
  devices_.run = [](const std::string&, const agent::JobSpec&) -> Result<agent::JobResult> {
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->ok, 2u);
  EXPECT_EQ(s->failed, 2u);
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  for (const auto& j : *jobs) {
    if (j.device != "tcp://127.0.0.1:7003") continue;
    EXPECT_EQ(j.status, "infra");
    EXPECT_THAT(j.error, HasSubstr("runner 'main' has no build for ABI 'riscv64' of "
                                   "device 'tcp://127.0.0.1:7003'"));
  }
}

DeviceSelector Selector(const std::string& abi, const std::vector<std::string>& tags) {
  DeviceSelector s;
  s.abi = abi;
  s.tags = tags;
  return s;
}

// A selector counts as one device when the spec is read; once it has
// matched 60 devices the sweep counts again and refuses, storing nothing.
TEST_F(SweepTest, MatrixPastTheJobLimitAfterSelectorsIsRefused) {
  spec_.devices = {};
  spec_.device_selectors = {Selector("", {"lab"})};
  for (int i = 0; i < 60; ++i)
    spec_.device_tags["tcp://127.0.0.1:" + std::to_string(7100 + i)] = {"lab"};
  spec_.benchmark.repeats = 1000;
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kInvalidInput);
  EXPECT_THAT(s.message(),
              HasSubstr("sweep 't': the matrix has 120000 jobs (devices 60 x runners 1 "
                        "x models 2 x delegates 1 x num_threads 1 x repeats 1000)"));
  auto runs = store_->ListRuns();
  ASSERT_TRUE(runs.ok());
  EXPECT_TRUE(runs->empty());
}

TEST_F(SweepTest, SelectorsPickDevicesByAbiAndTags) {
  spec_.devices = {};
  spec_.device_selectors = {Selector("arm64-v8a", {})};
  spec_.device_tags = {{"tcp://127.0.0.1:7004", {"fast"}},
                       {"tcp://127.0.0.1:7005", {"fast", "big"}},
                       {"tcp://127.0.0.1:7006", {"slow"}}};
  devices_.abis["tcp://127.0.0.1:7005"] = "arm64-v8a";
  auto resolved = ResolveDevices(spec_, devices_, {}, false);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  ASSERT_EQ(resolved->size(), 1u);
  EXPECT_EQ((*resolved)[0].name, "tcp://127.0.0.1:7005");
  EXPECT_EQ((*resolved)[0].abi, "arm64-v8a");

  spec_.devices = {"local"};
  spec_.device_selectors = {Selector("", {"fast"})};
  resolved = ResolveDevices(spec_, devices_, {}, false);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  std::vector<std::string> names;
  for (const auto& d : *resolved) names.push_back(d.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"local", "tcp://127.0.0.1:7004", "tcp://127.0.0.1:7005"}));

  spec_.device_selectors = {Selector("mips", {"slow"})};
  resolved = ResolveDevices(spec_, devices_, {}, false);
  ASSERT_FALSE(resolved.ok());
  EXPECT_THAT(
      resolved.message(),
      HasSubstr("device selector {\"abi\":\"mips\",\"tags\":[\"slow\"]} matches no device"));
  EXPECT_THAT(resolved.message(), HasSubstr("tcp://127.0.0.1:7006 (x86_64, slow)"));

  // The sweep runs the selected devices' jobs only.
  spec_.devices = {};
  spec_.device_selectors = {Selector("", {"big"})};
  std::set<std::string> ran_on;
  devices_.run = [&](const std::string& device, const agent::JobSpec&) -> Result<agent::JobResult> {
    ran_on.insert(device);
    return Ok();
  };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->jobs, 2u);
  EXPECT_EQ(ran_on, std::set<std::string>{"tcp://127.0.0.1:7005"});
}

TEST_F(SweepTest, AnyDeviceNeedsAFarm) {
  spec_.devices = {"any"};
  auto resolved = ResolveDevices(spec_, devices_, {}, false);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.error().kind, ErrorKind::kInvalidInput);
  EXPECT_THAT(resolved.message(),
              HasSubstr("device \"any\" needs a farm: pass --db postgresql://"));
}

}  // namespace
}  // namespace dfarm::harness
