// Stepped pairs through the real dfarm-agent (feature "stepped_pairs"): the
// agent runs dfarm-runner with --partner-runner (dfarm-runner-slowdown, a
// second build in its store), returns the partner's document inside the
// runner's, and a cancel or a timeout kills both processes of the pair.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "agent/client/client.h"
#include "agent/protocol/features.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using json = nlohmann::json;
namespace tfl = dfarm::testing::tfl;

class SteppedPairAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kRunner)) << kRunner;
    ASSERT_TRUE(fs::exists(kPartner)) << kPartner;
    // out = a + b, float32 [1,4]
    dfarm::testing::ModelBuilder b;
    int a = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "a");
    int c = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "b");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
    b.AddAdd(a, c, out);
    b.SetInputs({a, c});
    b.SetOutputs({out});
    model_ = dir_.path() + "/add.tflite";
    ASSERT_TRUE(b.WriteFile(model_));
    agent_ = std::make_unique<testing::TestAgent>(
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--store", dir_.path() + "/store"},
        dir_.path() + "/agent.log");
    const uint16_t port = agent_->ReadPort();
    ASSERT_GT(port, 0);
    auto client = AgentClient::Connect("127.0.0.1", port, milliseconds(10000));
    ASSERT_TRUE(client.ok()) << client.message();
    client_ = std::move(*client);
    ASSERT_TRUE(client_->PutArtifact(kRunner, &job_.runner_sha256).ok());
    ASSERT_TRUE(client_->PutArtifact(kPartner, &job_.partner_runner_sha256).ok());
    ASSERT_TRUE(client_->PutArtifact(model_, &job_.model_sha256).ok());
    job_.partner_seed = 5;
    job_.num_runs = 6;
    job_.warmup_runs = 1;
  }

  std::string Stored(const std::string& sha) const {
    return dir_.path() + "/store/artifacts/" + sha;
  }

  const std::string kRunner = std::string(DFARM_BINARY_DIR) + "/bin/dfarm-runner";
  const std::string kPartner = std::string(DFARM_BINARY_DIR) + "/bin/dfarm-runner-slowdown";
  testing::TempDir dir_;
  std::string model_;
  std::unique_ptr<testing::TestAgent> agent_;
  std::unique_ptr<AgentClient> client_;
  JobSpec job_;
};

TEST_F(SteppedPairAgentTest, JobResultCarriesBothSidesInStepOrder) {
  EXPECT_TRUE(HasFeature(client_->device().features, kFeatureSteppedPairs));
  auto r = client_->RunJob(job_);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->status, "ok") << r->error << r->stderr_tail;
  const json doc = json::parse(r->runner_json);
  const json& steps = doc["steps"];
  EXPECT_EQ(steps["role"], "driver");
  EXPECT_FALSE(steps.contains("partner_error")) << steps.dump();
  EXPECT_EQ(steps["partner_steps"], 6);
  ASSERT_TRUE(doc.contains("partner"));
  const json& partner = doc["partner"];
  EXPECT_EQ(partner["status"], "ok");
  EXPECT_EQ(partner["samples_us"].size(), 6u);
  // The runs alternated in time as the driver's order says.
  std::vector<std::pair<double, char>> runs;
  for (const json& t : steps["starts_us"]) runs.emplace_back(t.get<double>(), 'A');
  for (const json& t : partner["steps"]["starts_us"]) runs.emplace_back(t.get<double>(), 'B');
  std::sort(runs.begin(), runs.end());
  std::string merged;
  for (const auto& run : runs) merged += run.second;
  EXPECT_EQ(merged, steps["order"].get<std::string>());
}

TEST_F(SteppedPairAgentTest, PartnerMissingFromTheStoreIsInfra) {
  job_.partner_runner_sha256 = std::string(64, 'a');
  auto r = client_->RunJob(job_);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "infra");
  EXPECT_THAT(r->error, HasSubstr("partner runner"));
}

TEST_F(SteppedPairAgentTest, PartnerOfAToolKindIsRefused) {
  job_.runner_kind = "benchmark_model";
  auto r = client_->RunJob(job_);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "infra");
  EXPECT_THAT(r->error, HasSubstr("cannot step a partner"));
}

// A pair whose runs never end (10^7 runs each) ends by cancel, or by the
// timeout; either way neither process of the pair is left.
TEST_F(SteppedPairAgentTest, CancelAndTimeoutKillBothProcesses) {
  job_.num_runs = 10000000;
  job_.timeout_ms = 600000;
  const std::string runner = Stored(job_.runner_sha256);
  const std::string partner = Stored(job_.partner_runner_sha256);
  std::atomic<bool> cancel{false};
  std::vector<pid_t> seen;
  RunJobOptions options;
  options.cancel = &cancel;
  options.on_progress = [&](const JobProgress& p) {
    if (p.phase != "running" || cancel) return;
    std::vector<pid_t> both = testing::ProcessesOfExe(runner),
                       other = testing::ProcessesOfExe(partner);
    if (both.empty() || other.empty()) return;
    both.insert(both.end(), other.begin(), other.end());
    seen = both;
    cancel = true;
  };
  auto r = client_->RunJob(job_, options);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "infra");
  EXPECT_EQ(r->error, "cancelled by host");
  ASSERT_EQ(seen.size(), 2u) << "the pair was never seen running";
  for (pid_t pid : seen) {
    errno = 0;
    EXPECT_EQ(::kill(pid, 0), -1) << "process " << pid << " still exists";
    EXPECT_EQ(errno, ESRCH);
  }

  job_.timeout_ms = 1500;
  r = client_->RunJob(job_);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "timeout") << r->error;
  EXPECT_TRUE(testing::ProcessesOfExe(runner).empty());
  EXPECT_TRUE(testing::ProcessesOfExe(partner).empty());
}

TEST(SteppedPairAgentPrefixTest, AgentWithARunnerPrefixDoesNotOfferStepping) {
  testing::TempDir dir;
  testing::TestAgent agent(
      {"--listen", "127.0.0.1:0", "--store", dir.path() + "/store", "--runner-prefix", "env"},
      dir.path() + "/agent.log");
  const uint16_t port = agent.ReadPort();
  ASSERT_GT(port, 0);
  auto client = AgentClient::Connect("127.0.0.1", port, milliseconds(10000));
  ASSERT_TRUE(client.ok()) << client.message();
  EXPECT_FALSE(HasFeature((*client)->device().features, kFeatureSteppedPairs));
  EXPECT_TRUE(HasFeature((*client)->device().features, kFeatureRunJob));
}

}  // namespace
}  // namespace dfarm::agent
