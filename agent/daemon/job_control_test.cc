// End to end, with the real dfarm-agent binary: cancelling a job, progress
// frames, the device-state query, the plugin feature check, --runner-prefix
// (agent/protocol/PROTOCOL.md), and the ABI names of the device description.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <thread>

#include "agent/client/client.h"
#include "agent/daemon/device_info.h"
#include "agent/daemon/supervisor.h"
#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestAgent;

using testing::kTimeout;
using testing::RawConnect;

bool ProcessAlive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

class JobControlTest : public ::testing::Test {
 protected:
  void StartAgent(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--store", dir_.path() + "/store"};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<TestAgent>(args, dir_.path() + "/agent.log");
    port_ = agent_->ReadPort();
    ASSERT_GT(port_, 0) << testing::ReadFile(dir_.path() + "/agent.log");
  }

  std::unique_ptr<AgentClient> Connect() {
    ConnectOptions options;
    options.timeout = kTimeout;
    auto client = AgentClient::Connect("127.0.0.1", port_, options);
    EXPECT_TRUE(client.ok()) << client.message();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::string Put(AgentClient& client, const std::string& name, const std::string& bytes) {
    std::string path = dir_.path() + "/" + name;
    testing::WriteFile(path, bytes);
    std::string sha;
    auto r = client.PutArtifact(path, &sha);
    EXPECT_TRUE(r.ok()) << r.message();
    return sha;
  }

  // A runner that records its pid and a child's pid, then hangs (both in its
  // process group).
  std::string HangingRunner() {
    return "#!/bin/sh\nsleep 300 &\necho $! > " + dir_.path() + "/child.pid\necho $$ > " +
           dir_.path() + "/runner.pid\nwait\n";
  }

  pid_t ReadPid(const std::string& name) {
    for (int i = 0; i < 500; ++i) {
      std::string text = testing::ReadFile(dir_.path() + "/" + name);
      if (!text.empty() && text.back() == '\n') return static_cast<pid_t>(std::stol(text));
      std::this_thread::sleep_for(milliseconds(10));
    }
    return 0;
  }

  TempDir dir_;
  std::unique_ptr<TestAgent> agent_;
  uint16_t port_ = 0;
};

TEST_F(JobControlTest, CancelKillsTheRunnerAndTheAgentServesTheNextJob) {
  StartAgent();
  auto client = Connect();
  ASSERT_TRUE(client);
  for (auto f : {kFeatureCancel, kFeatureProgress, kFeatureDeviceState}) {
    EXPECT_THAT(client->device().features, ::testing::Contains(std::string(f)));
  }
  JobSpec job;
  job.runner_sha256 = Put(*client, "hang.sh", HangingRunner());
  job.model_sha256 = Put(*client, "m", "model");
  job.timeout_ms = 120000;

  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    // Cancel once the runner (and its child) are up.
    if (ReadPid("child.pid") > 0) cancel = true;
  });
  std::vector<std::string> phases;
  RunJobOptions options;
  options.cancel = &cancel;
  options.on_progress = [&](const JobProgress& p) { phases.push_back(p.phase); };
  auto r = client->RunJob(job, options);
  canceller.join();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "infra");
  EXPECT_EQ(r->error, "cancelled by host");
  EXPECT_EQ(r->signal, SIGKILL);
  ASSERT_FALSE(phases.empty());
  EXPECT_EQ(phases.front(), "starting");
  EXPECT_EQ(phases.back(), "done");

  pid_t runner = ReadPid("runner.pid"), child = ReadPid("child.pid");
  ASSERT_GT(runner, 0);
  ASSERT_GT(child, 0);
  // The whole process group is gone (reaped by the agent; the orphaned child
  // is reaped by init, so allow it a moment).
  for (int i = 0; i < 200 && (ProcessAlive(runner) || ProcessAlive(child)); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_FALSE(ProcessAlive(runner));
  EXPECT_FALSE(ProcessAlive(child));

  // Same connection, next job.
  job.runner_sha256 = Put(*client, "ok.sh", testing::kOkRunner);
  auto next = client->RunJob(job);
  ASSERT_TRUE(next.ok()) << next.message();
  EXPECT_EQ(next->status, "ok") << next->error;
}

TEST_F(JobControlTest, ProgressArrivesWhileALongJobRuns) {
  StartAgent();
  auto client = Connect();
  ASSERT_TRUE(client);
  JobSpec job;
  job.runner_sha256 =
      Put(*client, "slow.sh", std::string("#!/bin/sh\nsleep 1.6\n") + (testing::kOkRunner + 10));
  job.model_sha256 = Put(*client, "m", "model");
  std::vector<JobProgress> got;
  RunJobOptions options;
  options.on_progress = [&](const JobProgress& p) { got.push_back(p); };
  auto r = client->RunJob(job, options);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  // starting, at least one running (every 1000 ms over 1.6 s), done; elapsed never decreases.
  ASSERT_GE(got.size(), 3u);
  EXPECT_EQ(got.front().phase, "starting");
  EXPECT_EQ(got.back().phase, "done");
  EXPECT_EQ(got[1].phase, "running");
  EXPECT_GE(got[1].elapsed_ms, 1000u);
  for (size_t i = 1; i < got.size(); ++i) EXPECT_GE(got[i].elapsed_ms, got[i - 1].elapsed_ms);
  EXPECT_TRUE(client->Have({job.model_sha256}).ok());  // nothing left over on the stream
}

TEST_F(JobControlTest, DeviceStateQueryReadsTheDeviceTree) {
  // A fake sysfs: one zone at 41.5 C, one CPU capped below its maximum.
  std::string root = dir_.path() + "/root";
  std::filesystem::create_directories(root + "/sys/class/thermal/thermal_zone0");
  std::filesystem::create_directories(root + "/proc");
  testing::WriteFile(root + "/sys/class/thermal/thermal_zone0/type", "cpu-thermal\n");
  testing::WriteFile(root + "/sys/class/thermal/thermal_zone0/temp", "41500\n");
  testing::WriteFile(root + "/proc/loadavg", "0.50 0.25 0.10 1/100 42\n");
  StartAgent({"--device-state-root", root});
  auto client = Connect();
  ASSERT_TRUE(client);
  auto state = client->QueryDeviceState();
  ASSERT_TRUE(state.ok()) << state.message();
  ASSERT_EQ(state->thermal_zones.size(), 1u);
  EXPECT_EQ(state->thermal_zones[0].type, "cpu-thermal");
  ASSERT_TRUE(state->thermal_zones[0].temp_c.has_value());
  EXPECT_DOUBLE_EQ(*state->thermal_zones[0].temp_c, 41.5);
  ASSERT_TRUE(state->load_avg_1m.has_value());
  EXPECT_DOUBLE_EQ(*state->load_avg_1m, 0.5);
  EXPECT_GT(state->unix_ms, 0);
}

TEST_F(JobControlTest, OldHostGetsNoNewFramesAndCannotSendPlugins) {
  StartAgent();
  auto client = Connect();
  ASSERT_TRUE(client);
  JobSpec job;
  job.runner_sha256 = Put(*client, "ok.sh", testing::kOkRunner);
  job.model_sha256 = Put(*client, "m", "model");
  job.plugin_sha256 = Put(*client, "plugin.so", "not really a library");

  UniqueFd raw = RawConnect(port_);
  ASSERT_TRUE(raw);
  {  // a host of the first release: no cancel/progress/plugin
    flatbuffers::FlatBufferBuilder fbb;
    auto f = fbb.CreateVectorOfStrings({"artifacts", "run_job"});
    FinishFrame(fbb, 1, wire::CreateHello(fbb, kProtocolVersion, f));
    ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
    auto hello = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(hello.ok() && !hello->eof);
    auto features = Strings(hello->frame()->body_as_HelloReply()->features());
    EXPECT_THAT(features, ::testing::ElementsAre("artifacts", "run_job"));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, 2, BuildRunJob(fbb, job));
    ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    ASSERT_EQ(got->frame()->body_type(), wire::Body::ErrorReply);
    EXPECT_EQ(got->frame()->request_id(), 2u);
    EXPECT_THAT(Str(got->frame()->body_as_ErrorReply()->message()),
                HasSubstr("did not negotiate feature 'plugin'"));
  }
  {  // input sets without feature "inputs": refused the same way
    JobSpec with_sets = job;
    with_sets.plugin_sha256.clear();
    with_sets.input_set_sha256s = {std::string(64, 'c')};
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, 2, BuildRunJob(fbb, with_sets));
    ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    ASSERT_EQ(got->frame()->body_type(), wire::Body::ErrorReply);
    EXPECT_THAT(Str(got->frame()->body_as_ErrorReply()->message()),
                HasSubstr("did not negotiate feature 'inputs'"));
  }
  {  // the connection still works, and a job sends nothing but its JobResult
    job.plugin_sha256.clear();
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, 3, BuildRunJob(fbb, job));
    ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    ASSERT_EQ(got->frame()->body_type(), wire::Body::JobResult);
    EXPECT_EQ(Str(got->frame()->body_as_JobResult()->status()), "ok");
  }
  {  // CancelJob without the feature is refused
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, 4, wire::CreateCancelJob(fbb, 3));
    ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    ASSERT_EQ(got->frame()->body_type(), wire::Body::ErrorReply);
    EXPECT_THAT(Str(got->frame()->body_as_ErrorReply()->message()), HasSubstr("cancel"));
  }
}

TEST_F(JobControlTest, RunnerPrefixWordsComeFirst) {
  // The prefix program records its argv, then runs the rest as the runner would be.
  std::string prefix = dir_.path() + "/prefix.sh";
  testing::WriteFile(
      prefix, "#!/bin/sh\necho \"$@\" > " + dir_.path() + "/prefix.args\nshift 2\nexec \"$@\"\n");
  ASSERT_EQ(::chmod(prefix.c_str(), 0755), 0);
  StartAgent({"--runner-prefix", prefix + "  -L /usr/aarch64-linux-gnu"});
  auto client = Connect();
  ASSERT_TRUE(client);
  JobSpec job;
  job.runner_sha256 = Put(*client, "ok.sh", testing::kOkRunner);
  job.model_sha256 = Put(*client, "m", "model");
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  std::string args = testing::ReadFile(dir_.path() + "/prefix.args");
  std::string runner_path = dir_.path() + "/store/artifacts/" + job.runner_sha256;
  EXPECT_THAT(args,
              ::testing::StartsWith("-L /usr/aarch64-linux-gnu " + runner_path + " --model "));
}

TEST(RunnerArgvTest, PrefixOrDirect) {
  EXPECT_THAT(Supervisor::RunnerArgv({}, "/s/r", {"--json"}),
              ::testing::ElementsAre("dfarm-runner", "--json"));
  EXPECT_THAT(
      Supervisor::RunnerArgv({"qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"}, "/s/r", {"--json"}),
      ::testing::ElementsAre("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", "/s/r", "--json"));
}

TEST(DeviceInfoTest, AbiNamesFollowAndroid) {
  EXPECT_EQ(AbiForMachine("aarch64"), "arm64-v8a");
  EXPECT_EQ(AbiForMachine("armv7l"), "armeabi-v7a");
  EXPECT_EQ(AbiForMachine("armv7"), "armeabi-v7a");
  EXPECT_EQ(AbiForMachine("x86_64"), "x86_64");
  EXPECT_EQ(AbiForMachine("i686"), "x86");
  EXPECT_EQ(AbiForMachine("riscv64"), "riscv64");
}

}  // namespace
}  // namespace dfarm::agent
