// End to end, with the real dfarm-agent binary: token authentication, the
// heartbeat, resumable uploads and the stdio transport (agent/protocol/PROTOCOL.md).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "agent/client/client.h"
#include "agent/daemon/device_info.h"
#include "agent/daemon/server.h"
#include "agent/protocol/auth.h"
#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::kAgentBinary;
using testing::TempDir;
using testing::TestAgent;
using Clock = std::chrono::steady_clock;

using testing::FilesIn;
using testing::kTimeout;
using testing::RawConnect;
constexpr char kToken[] = "correct horse battery staple, long enough";

// Sends Hello with the given features and returns the HelloReply frame.
ReceivedFrame RawHello(int fd, std::vector<std::string> features) {
  flatbuffers::FlatBufferBuilder fbb;
  auto f = fbb.CreateVectorOfStrings(features);
  FinishFrame(fbb, 1, wire::CreateHello(fbb, kProtocolVersion, f));
  EXPECT_TRUE(WriteFrame(fd, fbb).ok());
  auto got = ReadFrame(fd, kTimeout);
  EXPECT_TRUE(got.ok() && !got->eof);
  EXPECT_EQ(got->frame()->body_type(), wire::Body::HelloReply);
  return std::move(*got);
}

template <typename T>
void Send(int fd, uint64_t id, flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<T> body) {
  FinishFrame(fbb, id, body);
  ASSERT_TRUE(WriteFrame(fd, fbb, kTimeout).ok());
}

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

class AgentSessionTest : public ::testing::Test {
 protected:
  void StartAgent(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--store", dir_.path() + "/store"};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<TestAgent>(args, log_path());
    port_ = agent_->ReadPort();
    ASSERT_GT(port_, 0) << testing::ReadFile(log_path());
  }

  std::string log_path() const { return dir_.path() + "/agent.log"; }

  std::string WriteTemp(const std::string& name, const std::string& bytes) {
    std::string path = dir_.path() + "/" + name;
    testing::WriteFile(path, bytes);
    ::chmod(path.c_str(), 0600);  // a token file others can read is refused
    return path;
  }

  Result<std::unique_ptr<AgentClient>> Connect(const std::string& token,
                                               milliseconds heartbeat = milliseconds(5000)) {
    ConnectOptions options;
    options.timeout = kTimeout;
    options.token = token;
    options.heartbeat_interval = heartbeat;
    return AgentClient::Connect("127.0.0.1", port_, options);
  }

  TempDir dir_;
  std::unique_ptr<TestAgent> agent_;
  uint16_t port_ = 0;
};

// --- (a) token authentication -------------------------------------------------

TEST_F(AgentSessionTest, TokenIsRequiredAndChecked) {
  std::string token_file = WriteTemp("token", std::string(kToken) + "\n");
  StartAgent({"--token-file", token_file});

  auto none = Connect("");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.message(), HasSubstr("requires a token"));

  auto wrong = Connect("the wrong token, long enough");
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.message(), HasSubstr("authentication failed"));

  // The right token is accepted, after the delay the failure above earned.
  auto start = Clock::now();
  auto right = Connect(kToken);
  ASSERT_TRUE(right.ok()) << right.message();
  EXPECT_GE(MsSince(start), 150);
  EXPECT_THAT((*right)->device().features, ::testing::Contains("auth_hmac"));
  auto have = (*right)->Have({std::string(64, 'a')});
  ASSERT_TRUE(have.ok()) << have.message();
  EXPECT_EQ(*have, std::vector<bool>{false});

  std::string log = testing::ReadFile(log_path());
  EXPECT_THAT(log, HasSubstr("authentication failed: the host's proof does not match"));
  EXPECT_THAT(log, HasSubstr("failure 1 from 127.0.0.1"));
  EXPECT_THAT(log, HasSubstr("authenticated"));
}

TEST_F(AgentSessionTest, RequestBeforeAuthenticationIsRefused) {
  StartAgent({"--token-file", WriteTemp("token", kToken)});
  UniqueFd raw = RawConnect(port_);
  ReceivedFrame hello = RawHello(raw.get(), {"artifacts", "auth_hmac"});
  const auto* challenge = hello.frame()->body_as_HelloReply()->auth_challenge();
  ASSERT_NE(challenge, nullptr);
  EXPECT_EQ(challenge->size(), kAuthChallengeBytes);

  flatbuffers::FlatBufferBuilder fbb;
  auto list = fbb.CreateVectorOfStrings(std::vector<std::string>{std::string(64, 'a')});
  Send(raw.get(), 2, fbb, wire::CreateHaveRequest(fbb, list));
  auto got = ReadFrame(raw.get(), kTimeout);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->frame()->body_type(), wire::Body::ErrorReply);
  EXPECT_THAT(Str(got->frame()->body_as_ErrorReply()->message()),
              HasSubstr("authentication failed: expected AuthProof"));
  got = ReadFrame(raw.get(), kTimeout);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->eof);  // closed
}

TEST_F(AgentSessionTest, HostWithoutAuthFeatureIsRefused) {
  StartAgent({"--token-file", WriteTemp("token", kToken)});
  UniqueFd raw = RawConnect(port_);
  flatbuffers::FlatBufferBuilder fbb;
  auto f = fbb.CreateVectorOfStrings(std::vector<std::string>{"artifacts"});
  Send(raw.get(), 1, fbb, wire::CreateHello(fbb, kProtocolVersion, f));
  auto got = ReadFrame(raw.get(), kTimeout);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->frame()->body_type(), wire::Body::ErrorReply);
  EXPECT_THAT(Str(got->frame()->body_as_ErrorReply()->message()),
              HasSubstr("requires token authentication"));
}

TEST_F(AgentSessionTest, ClientWithTokenRefusesAnAgentWithoutOne) {
  StartAgent();
  auto client = Connect(kToken);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.message(), HasSubstr("does not ask for one"));
  EXPECT_TRUE(Connect("").ok());
}

TEST(AgentTokenCommandLineTest, NonLoopbackNeedsATokenFile) {
  // Parsing only: tests never bind a non-loopback address.
  auto refused = ParseListenAddress("0.0.0.0:7000");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("non-loopback listeners need --token-file"));
  auto allowed = ParseListenAddress("0.0.0.0:7000", /*have_token=*/true);
  ASSERT_TRUE(allowed.ok()) << allowed.message();
  EXPECT_EQ(allowed->host, "0.0.0.0");
  EXPECT_TRUE(ParseListenAddress("127.0.0.2:0").ok());
}

TEST(AgentTokenCommandLineTest, ShortTokenFileRefusesToStart) {
  TempDir dir;
  testing::WriteFile(dir.path() + "/token", "short");
  ::chmod((dir.path() + "/token").c_str(), 0600);
  std::string cmd = std::string(kAgentBinary) + " --listen 127.0.0.1:0 --token-file " + dir.path() +
                    "/token --store " + dir.path() + "/s 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[512] = {};
  size_t n = fread(buf, 1, sizeof buf - 1, p);
  int status = ::pclose(p);
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_THAT(std::string(buf, n), HasSubstr("a token needs at least 32"));
}

// --- (b) heartbeats and interleaving ------------------------------------------

TEST_F(AgentSessionTest, PingsInterleaveWithARunningJob) {
  StartAgent({"--heartbeat-ms", "100"});
  auto client = Connect("");
  ASSERT_TRUE(client.ok());
  std::string runner, model;
  ASSERT_TRUE((*client)
                  ->PutArtifact(WriteTemp("slow.sh", std::string("#!/bin/sh\nsleep 0.6\n") +
                                                         testing::kOkRunner),
                                &runner)
                  .ok());
  ASSERT_TRUE((*client)->PutArtifact(WriteTemp("m", "model"), &model).ok());
  client->reset();

  UniqueFd raw = RawConnect(port_);
  RawHello(raw.get(), {"run_job", "heartbeat"});
  JobSpec job;
  job.runner_sha256 = runner;
  job.model_sha256 = model;
  job.timeout_ms = 10000;
  flatbuffers::FlatBufferBuilder fbb;
  Send(raw.get(), 5, fbb, BuildRunJob(fbb, job));
  flatbuffers::FlatBufferBuilder ping;
  Send(raw.get(), 6, ping, wire::CreatePing(ping));

  bool pong6 = false, result_after_pong = false;
  int agent_pings = 0;
  for (;;) {
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    const wire::Frame& f = *got->frame();
    if (f.body_type() == wire::Body::Pong) {
      EXPECT_EQ(f.request_id(), 6u);
      pong6 = true;
    } else if (f.body_type() == wire::Body::Ping) {
      EXPECT_TRUE(f.request_id() & kAgentRequestIdBit);
      ++agent_pings;
      flatbuffers::FlatBufferBuilder pong;
      Send(raw.get(), f.request_id(), pong, wire::CreatePong(pong));
    } else {
      ASSERT_EQ(f.body_type(), wire::Body::JobResult);
      EXPECT_EQ(f.request_id(), 5u);
      EXPECT_EQ(Str(f.body_as_JobResult()->status()), "ok");
      result_after_pong = pong6;
      break;
    }
  }
  EXPECT_TRUE(result_after_pong);  // the Pong came while the job still ran
  EXPECT_GE(agent_pings, 2);
}

TEST_F(AgentSessionTest, ClientKeepsALongJobAlive) {
  StartAgent({"--heartbeat-ms", "100"});
  auto client = Connect("", milliseconds(100));
  ASSERT_TRUE(client.ok());
  std::string runner, model;
  ASSERT_TRUE((*client)
                  ->PutArtifact(WriteTemp("slow.sh", std::string("#!/bin/sh\nsleep 0.5\n") +
                                                         testing::kOkRunner),
                                &runner)
                  .ok());
  ASSERT_TRUE((*client)->PutArtifact(WriteTemp("m", "model"), &model).ok());
  JobSpec job;
  job.runner_sha256 = runner;
  job.model_sha256 = model;
  auto r = (*client)->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  EXPECT_TRUE((*client)->Have({runner}).ok());  // the stream is still in step
}

TEST_F(AgentSessionTest, SilentHostLosesItsJob) {
  StartAgent({"--heartbeat-ms", "100"});
  auto client = Connect("");
  ASSERT_TRUE(client.ok());
  std::string hang, ok_runner, model;
  ASSERT_TRUE((*client)->PutArtifact(WriteTemp("hang.sh", "#!/bin/sh\nsleep 30\n"), &hang).ok());
  ASSERT_TRUE((*client)->PutArtifact(WriteTemp("ok.sh", testing::kOkRunner), &ok_runner).ok());
  ASSERT_TRUE((*client)->PutArtifact(WriteTemp("m", "model"), &model).ok());

  UniqueFd raw = RawConnect(port_);
  RawHello(raw.get(), {"run_job", "heartbeat"});
  JobSpec job;
  job.runner_sha256 = hang;
  job.model_sha256 = model;
  job.timeout_ms = 60000;
  flatbuffers::FlatBufferBuilder fbb;
  Send(raw.get(), 2, fbb, BuildRunJob(fbb, job));
  // Never answer the agent's Pings: it gives up on this host and kills the job.
  auto start = Clock::now();
  for (;;) {
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok()) << got.message();
    if (got->eof) break;
    if (got->frame()->body_type() == wire::Body::JobResult) {  // may arrive before the close
      EXPECT_EQ(Str(got->frame()->body_as_JobResult()->status()), "infra");
      EXPECT_THAT(Str(got->frame()->body_as_JobResult()->error()), HasSubstr("cancelled"));
      continue;
    }
    ASSERT_EQ(got->frame()->body_type(), wire::Body::Ping);
  }
  EXPECT_LT(MsSince(start), 5000);
  // The device is free again at once.
  job.runner_sha256 = ok_runner;
  start = Clock::now();
  auto r = (*client)->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok");
  EXPECT_LT(MsSince(start), 5000);
  EXPECT_THAT(testing::ReadFile(log_path()), HasSubstr("cancelling the job"));
}

// A fake agent that completes hello (with heartbeats) and then never speaks.
TEST(AgentClientHeartbeatTest, SilentAgentIsGivenUpEarly) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(listener.get(), 1), 0);
  socklen_t len = sizeof sa;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  std::thread fake([&] {
    UniqueFd conn(::accept(listener.get(), nullptr, nullptr));
    auto hello = ReadFrame(conn.get(), kTimeout);
    if (!hello.ok() || hello->eof) return;
    DeviceInfo info;
    info.protocol_version = kProtocolVersion;
    info.features = {"run_job", "heartbeat"};
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, hello->frame()->request_id(), BuildHelloReply(fbb, info));
    (void)WriteFrame(conn.get(), fbb);
    for (;;) {  // swallow everything until the client hangs up
      auto got = ReadFrame(conn.get(), kTimeout);
      if (!got.ok() || got->eof) return;
    }
  });
  ConnectOptions options;
  options.heartbeat_interval = milliseconds(100);
  auto client = AgentClient::Connect("127.0.0.1", ntohs(sa.sin_port), options);
  ASSERT_TRUE(client.ok()) << client.message();
  JobSpec job;
  job.runner_sha256 = job.model_sha256 = std::string(64, 'a');
  job.timeout_ms = 60000;
  auto start = Clock::now();
  auto r = (*client)->RunJob(job);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("3 heartbeats missed"));
  EXPECT_LT(MsSince(start), 3000);
  client->reset();
  fake.join();
}

// An agent from before feature "plugin": the client refuses a plugin job
// without sending it (the agent would drop the field and run no plugin), and
// the connection stays usable.
TEST(AgentClientPluginTest, AgentWithoutThePluginFeatureGetsNoPluginJob) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(listener.get(), 1), 0);
  socklen_t len = sizeof sa;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  std::vector<std::string> plugins_seen;  // plugin_sha256 of each RunJob the fake got
  std::thread fake([&] {
    UniqueFd conn(::accept(listener.get(), nullptr, nullptr));
    auto hello = ReadFrame(conn.get(), kTimeout);
    if (!hello.ok() || hello->eof) return;
    DeviceInfo info;
    info.protocol_version = kProtocolVersion;
    info.features = {"artifacts", "run_job"};
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, hello->frame()->request_id(), BuildHelloReply(fbb, info));
    (void)WriteFrame(conn.get(), fbb);
    for (;;) {
      auto got = ReadFrame(conn.get(), kTimeout);
      if (!got.ok() || got->eof) return;
      if (got->frame()->body_type() != wire::Body::RunJob) continue;
      plugins_seen.push_back(ReadRunJob(*got->frame()->body_as_RunJob()).plugin_sha256);
      JobResult result;
      result.status = "ok";
      flatbuffers::FlatBufferBuilder reply;
      FinishFrame(reply, got->frame()->request_id(), BuildJobResult(reply, result));
      (void)WriteFrame(conn.get(), reply);
    }
  });
  ConnectOptions options;
  options.heartbeat_interval = milliseconds(0);
  auto client = AgentClient::Connect("127.0.0.1", ntohs(sa.sin_port), options);
  ASSERT_TRUE(client.ok()) << client.message();
  JobSpec job;
  job.runner_sha256 = job.model_sha256 = std::string(64, 'a');
  job.delegate = "external";
  job.plugin_sha256 = std::string(64, 'b');
  auto r = (*client)->RunJob(job);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("does not speak feature 'plugin'"));

  job.delegate = "cpu";
  job.plugin_sha256.clear();
  job.input_set_sha256s = {std::string(64, 'c')};
  r = (*client)->RunJob(job);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("does not speak feature 'inputs'"));
  job.input_set_sha256s.clear();
  r = (*client)->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok");
  client->reset();
  fake.join();
  EXPECT_EQ(plugins_seen, std::vector<std::string>{""});
}

// --- (c) resumable uploads ----------------------------------------------------

class ResumeTest : public AgentSessionTest {
 protected:
  void SetUp() override {
    bytes_.resize(3 * 100'000 + 123);
    for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = static_cast<char>(i * 13 + (i >> 9));
    sha_ = testing::HashOf(bytes_);
    path_ = WriteTemp("model.tflite", bytes_);
  }

  // A host that starts the upload, sends the first `chunks` chunks of
  // 100000 bytes, makes sure the agent has read them (Ping/Pong) and hangs up;
  // or, with `stalled`, keeps the connection open there and sends nothing more
  // (a half-open connection: the host has given up, the agent does not know).
  void UploadPartly(int chunks, UniqueFd* stalled = nullptr) {
    UniqueFd raw = RawConnect(port_);
    RawHello(raw.get(), {"artifacts", "heartbeat", "put_resume"});
    flatbuffers::FlatBufferBuilder begin;
    Send(raw.get(), 2, begin, wire::CreatePutBeginDirect(begin, sha_.c_str(), bytes_.size()));
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    ASSERT_EQ(got->frame()->body_type(), wire::Body::PutBeginReply);
    ASSERT_TRUE(got->frame()->body_as_PutBeginReply()->ok());
    ASSERT_EQ(got->frame()->body_as_PutBeginReply()->offset(), 0u);
    for (int i = 0; i < chunks; ++i) {
      flatbuffers::FlatBufferBuilder fbb;
      auto data =
          fbb.CreateVector(reinterpret_cast<const uint8_t*>(bytes_.data()) + i * 100'000, 100'000);
      Send(raw.get(), 3 + i, fbb, wire::CreatePutChunk(fbb, i * 100'000, data));
    }
    flatbuffers::FlatBufferBuilder ping;
    Send(raw.get(), 99, ping, wire::CreatePing(ping));
    got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    ASSERT_EQ(got->frame()->body_type(), wire::Body::Pong);
    if (stalled) *stalled = std::move(raw);
  }

  void ExpectResumedAt(uint64_t offset) {
    auto client = Connect("");
    ASSERT_TRUE(client.ok()) << client.message();
    auto sent = (*client)->PutArtifact(path_, nullptr);
    ASSERT_TRUE(sent.ok()) << sent.message();
    EXPECT_EQ(*sent, bytes_.size() - offset);
    EXPECT_EQ(testing::ReadFile(dir_.path() + "/store/artifacts/" + sha_), bytes_);
    sent = (*client)->PutArtifact(path_, nullptr);  // a second push sends nothing
    ASSERT_TRUE(sent.ok());
    EXPECT_EQ(*sent, 0u);
  }

  std::string bytes_, sha_, path_;
};

TEST_F(ResumeTest, DroppedConnectionResumesAtTheOffset) {
  StartAgent();
  UploadPartly(2);
  ExpectResumedAt(200'000);
  EXPECT_THAT(testing::ReadFile(log_path()), HasSubstr("resumed at 200000"));
}

TEST_F(ResumeTest, KilledAgentLosesNothing) {
  StartAgent();
  UploadPartly(1);
  agent_->Kill();
  StartAgent();  // same store
  ExpectResumedAt(100'000);
}

// A runner upload stalls mid-way on a half-open connection; the host pushes
// the runner again on a new connection and runs a job with it at once. The
// job must run, not end infra because the stalled upload still holds the
// installed runner open for writing (ETXTBSY) until its connection times out.
TEST_F(ResumeTest, StalledUploadDoesNotBlockTheRunnerItUploaded) {
  bytes_ = testing::kOkRunner;
  while (bytes_.size() < 250'000) bytes_ += "# " + std::string(98, 'x') + "\n";
  sha_ = testing::HashOf(bytes_);
  path_ = WriteTemp("runner.sh", bytes_);
  StartAgent();
  UniqueFd stalled;
  UploadPartly(2, &stalled);
  ASSERT_TRUE(stalled);
  auto client = Connect("");
  ASSERT_TRUE(client.ok()) << client.message();
  JobSpec job;
  auto sent = (*client)->PutArtifact(path_, &job.runner_sha256);
  ASSERT_TRUE(sent.ok()) << sent.message();
  EXPECT_EQ(*sent, bytes_.size() - 200'000);  // resumed where the stalled upload was
  ASSERT_TRUE((*client)->PutArtifact(WriteTemp("m.tflite", "model"), &job.model_sha256).ok());
  auto r = (*client)->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  EXPECT_TRUE(stalled);  // the stalled connection was open all along
}

// A push under a hash the caller holds resumes at the agent's offset; the
// agent checks the whole file's hash (the partial bytes rehashed).
TEST_F(ResumeTest, PushUnderAKnownHashResumes) {
  StartAgent();
  UploadPartly(2);
  auto client = Connect("");
  ASSERT_TRUE(client.ok()) << client.message();
  std::string sha_out;
  auto sent = (*client)->PutArtifactAs(path_, sha_, &sha_out);
  ASSERT_TRUE(sent.ok()) << sent.message();
  EXPECT_EQ(*sent, bytes_.size() - 200'000);
  EXPECT_EQ(sha_out, sha_);
  EXPECT_EQ(testing::ReadFile(dir_.path() + "/store/artifacts/" + sha_), bytes_);
}

// The file changed after the partial upload and after it was hashed: the
// agent's check refuses it and the host, hashing the file again, says it
// changed; nothing is stored, the partial file is gone and the connection
// stays usable.
TEST_F(ResumeTest, ChangedFileUnderAKnownHashIsRefusedAndLeavesNoFile) {
  StartAgent();
  UploadPartly(2);
  std::string changed = bytes_;
  changed[changed.size() - 1] ^= 1;
  testing::WriteFile(path_, changed);
  auto client = Connect("");
  ASSERT_TRUE(client.ok()) << client.message();
  std::string sha_out;
  auto sent = (*client)->PutArtifactAs(path_, sha_, &sha_out);
  ASSERT_FALSE(sent.ok());
  EXPECT_THAT(sent.message(), HasSubstr("'" + path_ + "' changed since it was hashed"));
  EXPECT_EQ(sha_out, testing::HashOf(changed));
  for (const char* sub : {"artifacts", "partial", "tmp"}) {
    EXPECT_TRUE(FilesIn(dir_.path() + "/store/" + sub).empty()) << sub;
  }
  sent = (*client)->PutArtifact(path_, &sha_out);
  ASSERT_TRUE(sent.ok()) << sent.message();
  EXPECT_EQ(testing::ReadFile(dir_.path() + "/store/artifacts/" + sha_out), changed);
}

// A chunk corrupted on the way (one byte flipped) fails the agent's hash as it
// writes: PutReply names the artifact and the mismatch, and no file is left,
// with and without put_resume (partial and temp files).
TEST_F(AgentSessionTest, CorruptedChunkIsRefusedAndLeavesNoFile) {
  StartAgent();
  std::string bytes(300'000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + (i >> 10));
  const std::string sha = testing::HashOf(bytes);
  bytes[150'000] ^= 0x40;
  for (bool resume : {false, true}) {
    SCOPED_TRACE(resume ? "put_resume" : "one-shot");
    UniqueFd raw = RawConnect(port_);
    RawHello(raw.get(), resume ? std::vector<std::string>{"artifacts", "put_resume"}
                               : std::vector<std::string>{"artifacts"});
    flatbuffers::FlatBufferBuilder begin;
    Send(raw.get(), 2, begin, wire::CreatePutBeginDirect(begin, sha.c_str(), bytes.size()));
    if (resume) {
      auto got = ReadFrame(raw.get(), kTimeout);
      ASSERT_TRUE(got.ok() && !got->eof);
      ASSERT_EQ(got->frame()->body_type(), wire::Body::PutBeginReply);
      ASSERT_TRUE(got->frame()->body_as_PutBeginReply()->ok());
    }
    flatbuffers::FlatBufferBuilder chunk;
    auto data = chunk.CreateVector(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    Send(raw.get(), 3, chunk, wire::CreatePutChunk(chunk, 0, data));
    flatbuffers::FlatBufferBuilder end;
    Send(raw.get(), 4, end, wire::CreatePutEnd(end));
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    ASSERT_EQ(got->frame()->body_type(), wire::Body::PutReply);
    const auto* reply = got->frame()->body_as_PutReply();
    EXPECT_FALSE(reply->ok());
    EXPECT_THAT(Str(reply->error()), HasSubstr("artifact " + sha.substr(0, 12)));
    EXPECT_THAT(Str(reply->error()), HasSubstr("sha256 mismatch"));
    for (const char* sub : {"artifacts", "partial", "tmp"}) {
      EXPECT_TRUE(FilesIn(dir_.path() + "/store/" + sub).empty()) << sub;
    }
  }
}

// A large artifact (many chunks) pushed under its known hash arrives intact;
// pushed again it is not read at all (Have answers first).
TEST_F(AgentSessionTest, LargeArtifactUnderAKnownHashArrivesIntact) {
  StartAgent();
  std::string bytes(24 * (1 << 20) + 4321, '\0');
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < bytes.size(); i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(&bytes[i], &x, std::min<size_t>(8, bytes.size() - i));
  }
  const std::string sha = testing::HashOf(bytes);
  const std::string path = WriteTemp("large.bin", bytes);
  auto client = Connect("");
  ASSERT_TRUE(client.ok()) << client.message();
  auto sent = (*client)->PutArtifactAs(path, sha, nullptr);
  ASSERT_TRUE(sent.ok()) << sent.message();
  EXPECT_EQ(*sent, bytes.size());
  EXPECT_EQ(testing::ReadFile(dir_.path() + "/store/artifacts/" + sha), bytes);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  sent = (*client)->PutArtifactAs(path, sha, nullptr);
  ASSERT_TRUE(sent.ok()) << sent.message();
  EXPECT_EQ(*sent, 0u);
}

// --- (d) stdio transport ------------------------------------------------------

TEST_F(AgentSessionTest, StdioTransportWithTheRealBinary) {
  ConnectOptions options;
  auto client = AgentClient::Spawn({kAgentBinary, "--stdio", "--store", dir_.path() + "/store"},
                                   options, log_path());
  ASSERT_TRUE(client.ok()) << client.message();
  EXPECT_EQ((*client)->device().protocol_version, kProtocolVersion);
  EXPECT_THAT((*client)->device().features, ::testing::Contains("put_resume"));
  std::string runner, model;
  auto sent = (*client)->PutArtifact(WriteTemp("ok.sh", testing::kOkRunner), &runner);
  ASSERT_TRUE(sent.ok()) << sent.message();
  EXPECT_GT(*sent, 0u);
  ASSERT_TRUE((*client)->PutArtifact(WriteTemp("m", "model"), &model).ok());
  JobSpec job;
  job.runner_sha256 = runner;
  job.model_sha256 = model;
  auto r = (*client)->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  client->reset();  // closes the stream: the agent exits
  std::string log = testing::ReadFile(log_path());
  EXPECT_THAT(log, HasSubstr("serving on stdio"));
  EXPECT_THAT(log, HasSubstr("stopping"));
}

TEST_F(AgentSessionTest, StdioOverPipes) {
  int to_agent[2], from_agent[2];
  ASSERT_EQ(::pipe2(to_agent, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(from_agent, O_CLOEXEC), 0);
  std::string store = dir_.path() + "/store";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(to_agent[0], 0);
    ::dup2(from_agent[1], 1);
    ::execl(kAgentBinary, kAgentBinary, "--stdio", "--store", store.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(to_agent[0]);
  ::close(from_agent[1]);
  ConnectOptions options;
  auto client = AgentClient::ConnectFds(from_agent[0], to_agent[1], "pipes", options);
  ASSERT_TRUE(client.ok()) << client.message();
  auto sent = (*client)->PutArtifact(WriteTemp("a", std::string(300'000, 'x')), nullptr);
  ASSERT_TRUE(sent.ok()) << sent.message();
  EXPECT_EQ(*sent, 300'000u);
  client->reset();
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(AgentStdioTest, SpawnFailureNamesTheCommand) {
  ConnectOptions options;
  auto client = AgentClient::Spawn({"/nonexistent/dfarm-agent", "--stdio"}, options);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.message(), HasSubstr("/nonexistent/dfarm-agent"));
}

// --- (e) device description -------------------------------------------------

TEST(DeviceInfoTest, ParseOsRelease) {
  EXPECT_EQ(ParseOsRelease("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 "
                           "(bookworm)\"\nVERSION_ID=\"12\"\n"),
            "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ(ParseOsRelease("# comment\nNAME='Alpine Linux'\nVERSION_ID=3.19\n"),
            "Alpine Linux 3.19");
  EXPECT_EQ(ParseOsRelease(""), "");
}

TEST(DeviceInfoTest, NewHelloFieldsRoundTrip) {
  DeviceInfo info;
  info.protocol_version = kProtocolVersion;
  info.os_release = "Android 14";
  info.kernel_version = "#1 SMP PREEMPT";
  info.core_max_freq_khz = {1800000, 1800000, 2850000, 0};
  info.properties = {{"ro.product.model", "Pixel 8"}, {"ro.build.version.sdk", "34"}};
  std::vector<uint8_t> challenge(kAuthChallengeBytes, 7);
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, 1, BuildHelloReply(fbb, info, &challenge));
  auto frame = VerifyFrame(fbb.GetBufferPointer(), fbb.GetSize());
  ASSERT_TRUE(frame.ok()) << frame.message();
  const wire::HelloReply& reply = *(*frame)->body_as_HelloReply();
  DeviceInfo back = ReadHelloReply(reply);
  EXPECT_EQ(back.os_release, "Android 14");
  EXPECT_EQ(back.kernel_version, "#1 SMP PREEMPT");
  EXPECT_EQ(back.core_max_freq_khz, info.core_max_freq_khz);
  EXPECT_EQ(back.properties, info.properties);
  ASSERT_NE(reply.auth_challenge(), nullptr);
  EXPECT_EQ(reply.auth_challenge()->size(), kAuthChallengeBytes);
}

TEST_F(AgentSessionTest, HelloDescribesTheDevice) {
  StartAgent();
  auto client = Connect("");
  ASSERT_TRUE(client.ok()) << client.message();
  const DeviceInfo& d = (*client)->device();
  DeviceInfo local = CollectDeviceInfo();  // the agent runs on this machine
  EXPECT_FALSE(d.kernel_version.empty());
  EXPECT_EQ(d.kernel_version, local.kernel_version);
  EXPECT_EQ(d.os_release, local.os_release);
  EXPECT_FALSE(d.os_release.empty());
  EXPECT_GE(d.core_max_freq_khz.size(), d.cores);
  EXPECT_EQ(d.core_max_freq_khz, local.core_max_freq_khz);
  EXPECT_EQ(d.properties, local.properties);  // empty off Android
}

// The OpenCL devices travel in HelloReply (old replies: none).
TEST(DeviceInfoTest, OpenClDevicesRoundTrip) {
  DeviceInfo info;
  info.opencl_devices = {{"QUALCOMM Snapdragon(TM)", "QUALCOMM Adreno(TM) 740", "QUALCOMM",
                          "OpenCL 3.0 QUALCOMM build: 0800.22", "OpenCL 3.0 Adreno(TM) 740", true,
                          true, 6, uint64_t{3} << 32},
                         {"Portable Computing Language", "cpu", "GenuineIntel", "5.0",
                          "OpenCL 3.0 PoCL", false, false, 2, 1 << 30}};
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, 1, BuildHelloReply(fbb, info, nullptr));
  auto frame = VerifyFrame(fbb.GetBufferPointer(), fbb.GetSize());
  ASSERT_TRUE(frame.ok()) << frame.message();
  DeviceInfo back = ReadHelloReply(*(*frame)->body_as_HelloReply());
  ASSERT_EQ(back.opencl_devices.size(), 2u);
  const OpenClDeviceInfo& gpu = back.opencl_devices[0];
  EXPECT_EQ(gpu.name, "QUALCOMM Adreno(TM) 740");
  EXPECT_EQ(gpu.driver_version, "OpenCL 3.0 QUALCOMM build: 0800.22");
  EXPECT_TRUE(gpu.fp16);
  EXPECT_TRUE(gpu.gpu);
  EXPECT_EQ(gpu.compute_units, 6u);
  EXPECT_EQ(gpu.global_memory_bytes, uint64_t{3} << 32);
  EXPECT_EQ(back.opencl_devices[1].platform, "Portable Computing Language");
  EXPECT_FALSE(back.opencl_devices[1].fp16);
}

// The real agent lists the OpenCL devices of this machine at hello: with
// pocl installed (CI), at least one, each with a name; without an OpenCL
// library, none and no error.
TEST_F(AgentSessionTest, HelloListsTheOpenClDevices) {
  StartAgent();
  auto client = Connect("");
  ASSERT_TRUE(client.ok()) << client.message();
  const std::vector<OpenClDeviceInfo>& seen = (*client)->device().opencl_devices;
  const std::vector<OpenClDeviceInfo> local = CollectOpenClDevices();
  ASSERT_EQ(seen.size(), local.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_FALSE(seen[i].name.empty());
    EXPECT_EQ(seen[i].name, local[i].name);
    EXPECT_EQ(seen[i].driver_version, local[i].driver_version);
    EXPECT_FALSE(seen[i].platform.empty());
    EXPECT_GT(seen[i].compute_units, 0u);
  }
#ifdef DFARM_HAVE_OPENCL
  if (::access("/etc/OpenCL/vendors/pocl.icd", R_OK) == 0) {
    EXPECT_GE(seen.size(), 1u) << "pocl is installed, but the agent lists no OpenCL device";
  }
#endif
}

}  // namespace
}  // namespace dfarm::agent
