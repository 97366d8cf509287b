// End to end: the real dfarm-agent binary as a child process on 127.0.0.1,
// driven through AgentClient and through raw sockets.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "agent/base/sha256.h"
#include "agent/base/unique_fd.h"
#include "agent/client/agent_process.h"
#include "agent/client/client.h"
#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testing::TempDir;

using testing::kAgentBinary;
using testing::kTimeout;
using testing::TestAgent;

class AgentEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent_ = std::make_unique<TestAgent>(
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--store", dir_.path() + "/store"});
    std::string line = agent_->ReadLine();
    const std::string prefix = "listening on 127.0.0.1:";
    ASSERT_EQ(line.rfind(prefix, 0), 0u) << "agent said: " << line;
    port_ = static_cast<uint16_t>(std::stoi(line.substr(prefix.size())));
    ASSERT_GT(port_, 0);
  }

  std::unique_ptr<AgentClient> Connect() {
    auto client = AgentClient::Connect("127.0.0.1", port_, kTimeout);
    EXPECT_TRUE(client.ok()) << client.message();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::string WriteTemp(const std::string& name, const std::string& bytes) {
    std::string path = dir_.path() + "/" + name;
    testing::WriteFile(path, bytes);
    return path;
  }

  UniqueFd RawConnect() {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port_);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    return fd;
  }

  TempDir dir_;
  std::unique_ptr<TestAgent> agent_;
  uint16_t port_ = 0;
};

TEST_F(AgentEndToEndTest, HelloReportsTheDevice) {
  auto client = Connect();
  ASSERT_TRUE(client);
  const DeviceInfo& d = client->device();
  EXPECT_EQ(d.protocol_version, 1u);
  EXPECT_THAT(d.features, Contains("artifacts"));
  EXPECT_THAT(d.features, Contains("run_job"));
  EXPECT_FALSE(d.agent_version.empty());
  EXPECT_THAT(d.os, HasSubstr("Linux"));
  EXPECT_FALSE(d.abi.empty());
  EXPECT_GT(d.cores, 0u);
  EXPECT_GT(d.memory_bytes, 0u);
  EXPECT_FALSE(d.hostname.empty());
}

TEST_F(AgentEndToEndTest, PutArtifactOnlyOnce) {
  auto client = Connect();
  ASSERT_TRUE(client);
  // Over two chunks, to exercise chunking.
  std::string bytes(2 * (1 << 20) + 12345, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + (i >> 12));
  std::string path = WriteTemp("model.tflite", bytes);
  std::string sha = testing::HashOf(bytes);

  auto have = client->Have({sha, std::string(64, '0'), "not-a-hash"});
  ASSERT_TRUE(have.ok()) << have.message();
  EXPECT_EQ(*have, (std::vector<bool>{false, false, false}));

  std::string sha_out;
  auto sent = client->PutArtifact(path, &sha_out);
  ASSERT_TRUE(sent.ok()) << sent.message();
  EXPECT_EQ(*sent, bytes.size());
  EXPECT_EQ(sha_out, sha);
  EXPECT_EQ(*Sha256File(path), sha);

  have = client->Have({sha});
  ASSERT_TRUE(have.ok());
  EXPECT_EQ(*have, std::vector<bool>{true});

  sent = client->PutArtifact(path, &sha_out);
  ASSERT_TRUE(sent.ok()) << sent.message();
  EXPECT_EQ(*sent, 0u);
  EXPECT_EQ(testing::ReadFile(dir_.path() + "/store/artifacts/" + sha), bytes);
}

TEST_F(AgentEndToEndTest, RunJobs) {
  auto client = Connect();
  ASSERT_TRUE(client);
  std::string runner_sha, crash_sha, model_sha;
  ASSERT_TRUE(client->PutArtifact(WriteTemp("runner.sh", testing::kOkRunner), &runner_sha).ok());
  ASSERT_TRUE(
      client->PutArtifact(WriteTemp("crash.sh", "#!/bin/sh\nkill -ABRT $$\n"), &crash_sha).ok());
  ASSERT_TRUE(client->PutArtifact(WriteTemp("m.tflite", "model"), &model_sha).ok());

  JobSpec job;
  job.runner_sha256 = runner_sha;
  job.model_sha256 = model_sha;
  job.num_runs = 3;
  job.timeout_ms = 10000;
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  EXPECT_THAT(r->runner_json, HasSubstr("\"samples_us\":[12,13,12.5]"));
  EXPECT_THAT(r->stderr_tail, HasSubstr("--num-runs 3 --json"));

  job.runner_sha256 = crash_sha;
  r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "crashed");
  EXPECT_THAT(r->error, HasSubstr("SIGABRT"));

  job.runner_sha256 = std::string(64, 'e');
  r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "infra");

  job.runner_sha256 = runner_sha;
  r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok");
}

TEST_F(AgentEndToEndTest, PluginJobGetsTheStorePath) {
  auto client = Connect();
  ASSERT_TRUE(client);
  EXPECT_THAT(client->device().features, Contains("plugin"));
  JobSpec job;
  ASSERT_TRUE(
      client->PutArtifact(WriteTemp("runner.sh", testing::kOkRunner), &job.runner_sha256).ok());
  ASSERT_TRUE(client->PutArtifact(WriteTemp("m.tflite", "model"), &job.model_sha256).ok());
  ASSERT_TRUE(client->PutArtifact(WriteTemp("libp.so", "plugin"), &job.plugin_sha256).ok());
  job.delegate = "external";
  job.delegate_options = "k:v";
  job.num_runs = 3;
  job.timeout_ms = 10000;
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  EXPECT_THAT(r->stderr_tail, HasSubstr("--delegate-options k:v;path:" + dir_.path() +
                                        "/store/artifacts/" + job.plugin_sha256 + " "));

  job.plugin_sha256 = std::string(64, 'f');  // never pushed
  r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "infra");
  EXPECT_THAT(r->error, HasSubstr("plugin: artifact " + job.plugin_sha256));
}

TEST_F(AgentEndToEndTest, JobResultCarriesDeviceState) {
  auto client = Connect();
  ASSERT_TRUE(client);
  JobSpec job;
  ASSERT_TRUE(
      client->PutArtifact(WriteTemp("runner.sh", testing::kOkRunner), &job.runner_sha256).ok());
  ASSERT_TRUE(client->PutArtifact(WriteTemp("m.tflite", "model"), &job.model_sha256).ok());
  job.timeout_ms = 10000;
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  ASSERT_TRUE(r->state_before.has_value());
  ASSERT_TRUE(r->state_after.has_value());
  // Linux always has /proc/loadavg; the rest depends on the machine.
  EXPECT_TRUE(r->state_before->load_avg_1m.has_value());
  EXPECT_TRUE(r->state_after->load_avg_15m.has_value());
  EXPECT_GT(r->state_before->unix_ms, 0);
  EXPECT_LE(r->state_before->unix_ms, r->state_after->unix_ms);
  EXPECT_EQ(r->hot_threshold_c, 70.0);
}

// The flags travel over the wire from the real binary, with its flags and a fake tree.
TEST(AgentEndToEndStateTest, HotAndThrottledFlagsReachTheHost) {
  TempDir dir;
  const std::string root = dir.path() + "/root";
  std::filesystem::create_directories(root + "/sys/class/thermal/thermal_zone0");
  std::filesystem::create_directories(root + "/sys/devices/system/cpu/cpu0/cpufreq");
  std::filesystem::create_directories(root + "/proc");
  testing::WriteFile(root + "/sys/class/thermal/thermal_zone0/type", "soc\n");
  testing::WriteFile(root + "/sys/class/thermal/thermal_zone0/temp", "65000\n");
  testing::WriteFile(root + "/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq", "900\n");
  testing::WriteFile(root + "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "1000\n");
  testing::WriteFile(root + "/proc/loadavg", "3.5 2.5 1.5 1/1 1\n");
  TestAgent agent({"--listen", "127.0.0.1:0", "--store", dir.path() + "/store",
                   "--device-state-root", root, "--hot-threshold-c", "60.5"});
  uint16_t port = agent.ReadPort();
  ASSERT_GT(port, 0);
  auto client = AgentClient::Connect("127.0.0.1", port, kTimeout);
  ASSERT_TRUE(client.ok()) << client.message();
  JobSpec job;
  testing::WriteFile(dir.path() + "/runner.sh", testing::kOkRunner);
  testing::WriteFile(dir.path() + "/m.tflite", "model");
  ASSERT_TRUE((*client)->PutArtifact(dir.path() + "/runner.sh", &job.runner_sha256).ok());
  ASSERT_TRUE((*client)->PutArtifact(dir.path() + "/m.tflite", &job.model_sha256).ok());
  auto r = (*client)->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  EXPECT_TRUE(r->started_hot);
  EXPECT_TRUE(r->throttled);
  EXPECT_EQ(r->hot_threshold_c, 60.5);
  EXPECT_THAT(r->state_note, HasSubstr("thermal zone 0 (soc) at 65.0 C > 60.5 C"));
  ASSERT_TRUE(r->state_before.has_value());
  EXPECT_EQ(r->state_before->load_avg_1m, 3.5);
}

TEST_F(AgentEndToEndTest, BadFrameClosesOnlyThatConnection) {
  auto client = Connect();
  ASSERT_TRUE(client);
  {
    UniqueFd raw = RawConnect();
    std::string garbage = std::string("\x20\x00\x00\x00", 4) + "garbage garbage garbage garbage!";
    ASSERT_EQ(garbage.size(), 36u);
    ASSERT_EQ(::write(raw.get(), garbage.data(), garbage.size()),
              static_cast<ssize_t>(garbage.size()));
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_TRUE(got->eof);  // the agent hung up
  }
  {
    UniqueFd raw = RawConnect();
    std::string huge = "\xff\xff\xff\x7f";
    ASSERT_EQ(::write(raw.get(), huge.data(), huge.size()), 4);
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_TRUE(got->eof);
  }
  // The first connection and new ones still work.
  EXPECT_TRUE(client->Have({std::string(64, 'a')}).ok());
  EXPECT_TRUE(Connect());
}

TEST_F(AgentEndToEndTest, VersionMismatchIsRefusedClearly) {
  UniqueFd raw = RawConnect();
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, 1, wire::CreateHelloDirect(fbb, 99, nullptr, "dfarm 9.0", ""));
  ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
  auto got = ReadFrame(raw.get(), kTimeout);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_FALSE(got->eof);
  ASSERT_EQ(got->frame()->body_type(), wire::Body::ErrorReply);
  EXPECT_THAT(Str(got->frame()->body_as_ErrorReply()->message()),
              HasSubstr("protocol version mismatch: the host speaks version 99"));
}

TEST_F(AgentEndToEndTest, UnknownFeaturesAreIgnored) {
  UniqueFd raw = RawConnect();
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<std::string> features = {"teleport", "run_job"};
  auto f = fbb.CreateVectorOfStrings(features);
  FinishFrame(fbb, 1, wire::CreateHello(fbb, 1, f));
  ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
  auto got = ReadFrame(raw.get(), kTimeout);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->frame()->body_type(), wire::Body::HelloReply);
  EXPECT_EQ(Strings(got->frame()->body_as_HelloReply()->features()),
            std::vector<std::string>{"run_job"});
}

TEST_F(AgentEndToEndTest, MessageBeforeHelloIsRefused) {
  UniqueFd raw = RawConnect();
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, 3, wire::CreateHaveRequest(fbb));
  ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
  auto got = ReadFrame(raw.get(), kTimeout);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->frame()->body_type(), wire::Body::ErrorReply);
  EXPECT_EQ(got->frame()->request_id(), 3u);
  EXPECT_THAT(Str(got->frame()->body_as_ErrorReply()->message()), HasSubstr("expected Hello"));
}

TEST_F(AgentEndToEndTest, SigtermExitsCleanly) {
  auto client = Connect();
  ASSERT_TRUE(client);
  int status = agent_->Terminate();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(AgentProcessTest, StartsConnectsAndStops) {
  TempDir dir;
  AgentProcessOptions options;
  options.agent_binary = kAgentBinary;
  options.store_dir = dir.path() + "/store";
  options.extra_args = {"--insecure"};
  options.log_file = dir.path() + "/agent.log";
  auto agent = AgentProcess::Start(options);
  ASSERT_TRUE(agent.ok()) << agent.message();
  auto client = AgentClient::Connect("127.0.0.1", (*agent)->port(), kTimeout);
  ASSERT_TRUE(client.ok()) << client.message();
  EXPECT_EQ((*client)->device().protocol_version, 1u);
  int status = (*agent)->Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_THAT(testing::ReadFile(options.log_file), HasSubstr("hello from"));
}

TEST(AgentProcessTest, MissingBinaryIsAnError) {
  AgentProcessOptions options;
  options.agent_binary = "/nonexistent/dfarm-agent";
  options.store_dir = "/tmp/unused";
  auto agent = AgentProcess::Start(options);
  ASSERT_FALSE(agent.ok());
  EXPECT_THAT(agent.message(), HasSubstr("/nonexistent/dfarm-agent"));
}

TEST(AgentProcessTest, AgentThatRefusesToStartIsAnError) {
  TempDir dir;
  AgentProcessOptions options;
  options.agent_binary = kAgentBinary;
  options.store_dir = "";  // --store "" is refused
  options.extra_args = {"--insecure"};
  options.log_file = dir.path() + "/agent.log";
  auto agent = AgentProcess::Start(options);
  ASSERT_FALSE(agent.ok());
  EXPECT_THAT(agent.message(), HasSubstr("exited before listening"));
}

// Over stdio the child needs no token: the socketpair is ours alone.
TEST(AgentProcessTest, StdioTransportSpeaksOnTheStream) {
  TempDir dir;
  AgentProcessOptions options;
  options.agent_binary = kAgentBinary;
  options.transport = AgentTransport::kStdio;
  options.store_dir = dir.path() + "/store";
  options.log_file = dir.path() + "/agent.log";
  auto agent = AgentProcess::Start(options);
  ASSERT_TRUE(agent.ok()) << agent.message();
  EXPECT_EQ((*agent)->port(), 0);
  int stream = (*agent)->TakeStream().release();
  ConnectOptions connect;
  connect.timeout = kTimeout;
  auto client = AgentClient::ConnectFds(stream, stream, "stdio", connect);
  ASSERT_TRUE(client.ok()) << client.message() << (*agent)->ExitReport();
  EXPECT_EQ((*client)->device().protocol_version, 1u);
  client->reset();  // the agent sees the stream close and stops by itself
  EXPECT_THAT((*agent)->ExitReport(std::chrono::milliseconds(5000)),
              HasSubstr("(it exited with code 0)"));
  EXPECT_THAT(testing::ReadFile(options.log_file), HasSubstr("serving on stdio"));
}

// --insecure: the agent listens without a token, and says what that means.
TEST(AgentCommandLineTest, InsecureListensAndWarns) {
  TempDir dir;
  const std::string log = dir.path() + "/agent.log";
  TestAgent agent({"--listen", "127.0.0.1:0", "--insecure", "--store", dir.path() + "/store"}, log);
  uint16_t port = agent.ReadPort();
  ASSERT_GT(port, 0);
  auto client = AgentClient::Connect("127.0.0.1", port, kTimeout);
  ASSERT_TRUE(client.ok()) << client.message();
  EXPECT_THAT(testing::ReadFile(log),
              HasSubstr("warning: --insecure: no token on 127.0.0.1:" + std::to_string(port) +
                        "; anyone who can reach this port can run code as this user"));
}

TEST(AgentCommandLineTest, RefusesNonLoopback) {
  TempDir dir;
  std::string cmd =
      std::string(kAgentBinary) + " --listen 0.0.0.0:0 --store " + dir.path() + "/s 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[512] = {};
  size_t n = fread(buf, 1, sizeof buf - 1, p);
  int status = ::pclose(p);
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_THAT(std::string(buf, n),
              HasSubstr("refusing to listen on 0.0.0.0: non-loopback listeners need --token-file"));
}

TEST(AgentCommandLineTest, ConnectToNothingFailsWithTheAddress) {
  // Bind a port and close it, so nothing listens there.
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t len = sizeof sa;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  uint16_t port = ntohs(sa.sin_port);
  fd.reset();
  auto client = AgentClient::Connect("127.0.0.1", port, std::chrono::milliseconds(2000));
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.message(), HasSubstr("127.0.0.1:" + std::to_string(port)));
}

}  // namespace
}  // namespace dfarm::agent
