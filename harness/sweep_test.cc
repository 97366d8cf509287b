#include "harness/sweep.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

#include "harness/matrix.h"
#include "harness/test_util.h"

namespace dfarm::harness {
namespace {

using ::testing::HasSubstr;

// An agent in memory: stores artifacts by sha256 and answers jobs with `run`.
class FakeClient : public agent::AgentClient {
 public:
  std::function<Result<agent::JobResult>(const agent::JobSpec&)> run;
  std::set<std::string>* stored;  // shared across reconnects, like a device's disk
  std::vector<agent::JobSpec>* jobs_seen;

  const agent::DeviceInfo& device() const override { return info_; }
  Result<std::vector<bool>> Have(const std::vector<std::string>& shas) override {
    std::vector<bool> out;
    for (const auto& s : shas) out.push_back(stored->count(s) > 0);
    return out;
  }
  Result<uint64_t> PutArtifact(const std::string& path, std::string* sha256_out) override {
    auto sha = Sha256OfFile(path);
    if (!sha) return sha.error();
    *sha256_out = *sha;
    if (!stored->insert(*sha).second) return uint64_t{0};
    return static_cast<uint64_t>(std::filesystem::file_size(path));
  }
  Result<agent::JobResult> RunJob(const agent::JobSpec& job) override {
    jobs_seen->push_back(job);
    return run(job);
  }

 private:
  agent::DeviceInfo info_{"0.1.0", 1, {}, "Linux", "x86_64", "cpu", 2, 1 << 30, "host"};
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
  std::function<Result<agent::JobResult>(const agent::JobSpec&)> run;
  std::set<std::string> stored;
  std::vector<agent::JobSpec> jobs_seen;
  int opens = 0;

  std::vector<std::string> KnownDevices() const override { return {"local"}; }
  Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) override {
    ++opens;
    if (name != "local") return MakeError("device '" + name + "': connection refused");
    auto c = std::make_unique<FakeClient>();
    c->run = run;
    c->stored = &stored;
    c->jobs_seen = &jobs_seen;
    return std::unique_ptr<DeviceSession>(std::make_unique<FakeSession>(name, std::move(c)));
  }
};

constexpr const char* kOkJson =
    R"({"status":"ok","model":"a.tflite","delegate":"cpu","num_threads":1,
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
  devices_.run = [](const agent::JobSpec& j) -> Result<agent::JobResult> {
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
  devices_.run = [&n](const agent::JobSpec&) -> Result<agent::JobResult> {
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
  EXPECT_EQ(devices_.opens, 2);  // reconnected after the transport error
  auto jobs = store_->ListJobs(s->run_id);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].status, "model_error");
  EXPECT_EQ((*jobs)[0].error, "failed to load model 'a.tflite': bad");
  EXPECT_EQ((*jobs)[1].status, "crashed");
  EXPECT_EQ((*jobs)[1].error, "runner reported ok without metrics");
  EXPECT_EQ((*jobs)[1].delegate_options, "precision:fp16");
  EXPECT_EQ((*jobs)[2].status, "infra");
  EXPECT_THAT((*jobs)[2].error, HasSubstr("connection reset by peer"));
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
  EXPECT_EQ(devices_.opens, 1);  // given up on after one try
  auto jobs = store_->ListJobs(s->run_id);
  for (const auto& j : *jobs) {
    EXPECT_EQ(j.status, "infra");
    EXPECT_THAT(j.error, HasSubstr("connection refused"));
  }
  EXPECT_EQ(store_->GetRun(s->run_id)->status, "failed");
}

TEST_F(SweepTest, OneReachableDeviceIsEnough) {
  spec_.devices = {"local", "tcp://127.0.0.1:1"};
  devices_.run = [](const agent::JobSpec&) -> Result<agent::JobResult> { return Ok(); };
  auto s = RunSweep(spec_, *store_, devices_, options_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->status, "finished");
  EXPECT_EQ(s->ok, 2u);
  EXPECT_EQ(s->failed, 2u);
}

TEST_F(SweepTest, CancelLeavesJobsQueued) {
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  devices_.run = [&cancel](const agent::JobSpec&) -> Result<agent::JobResult> {
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
  EXPECT_EQ(r->samples_us.size(), 3u);
  EXPECT_FALSE(ParseRunnerJson("").ok());
  EXPECT_FALSE(ParseRunnerJson("[1]").ok());
}

}  // namespace
}  // namespace dfarm::harness
