// End to end, with the real dfarm-agent binary and AgentClient: the store
// checks what it holds before it reports it present or runs it (a corrupt or
// truncated blob is pushed again, a planted file is never executed), refuses a
// store or token file that others can reach, and keeps a connection's runner
// under a quota.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "agent/client/client.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestAgent;

using testing::kTimeout;

// Bytes that differ everywhere, so a flipped range changes the hash.
std::string Pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 31 + seed + (i >> 9));
  return s;
}

// kOkRunner padded with comment lines to about `bytes`.
std::string PaddedRunner(size_t bytes) {
  std::string s = testing::kOkRunner;
  while (s.size() < bytes) s += "# " + std::string(98, 'x') + "\n";
  return s;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

class StoreIntegrityTest : public ::testing::Test {
 protected:
  // Starts an agent on the store; false (with the log in *why) when it did not start.
  bool StartAgent(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--store", store()};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<TestAgent>(args, log_path());
    port_ = agent_->ReadPort();
    return port_ > 0;
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

  std::string Put(AgentClient& client, const std::string& name, const std::string& bytes,
                  uint64_t* sent = nullptr) {
    std::string sha;
    auto r = client.PutArtifact(WriteTemp(name, bytes), &sha);
    EXPECT_TRUE(r.ok()) << r.message();
    if (sent) *sent = r.ok() ? *r : 0;
    return sha;
  }

  std::string store() const { return dir_.path() + "/store"; }
  std::string stored(const std::string& sha) const { return store() + "/artifacts/" + sha; }
  std::string log_path() const { return dir_.path() + "/agent.log"; }
  std::string log() const { return testing::ReadFile(log_path()); }

  TempDir dir_;
  std::unique_ptr<TestAgent> agent_;
  uint16_t port_ = 0;
};

// 64 flipped bytes in a stored model. The next sweep (a new
// connection) must hear "missing", push the model again and run on good bytes.
TEST_F(StoreIntegrityTest, CorruptModelIsReportedMissingAndPushedAgain) {
  ASSERT_TRUE(StartAgent()) << log();
  const std::string model = Pattern(200'000, 7);
  JobSpec job;
  {
    auto client = Connect();
    ASSERT_TRUE(client);
    job.runner_sha256 = Put(*client, "ok.sh", testing::kOkRunner);
    job.model_sha256 = Put(*client, "m.tflite", model);
  }
  {
    UniqueFd fd(::open(stored(job.model_sha256).c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(fd);
    std::string flipped = model.substr(1000, 64);
    for (char& c : flipped) c = static_cast<char>(~c);
    ASSERT_EQ(::pwrite(fd.get(), flipped.data(), flipped.size(), 1000), 64);
  }
  auto client = Connect();
  ASSERT_TRUE(client);
  auto have = client->Have({job.model_sha256, job.runner_sha256});
  ASSERT_TRUE(have.ok()) << have.message();
  EXPECT_EQ(*have, (std::vector<bool>{false, true}));
  uint64_t sent = 0;
  EXPECT_EQ(Put(*client, "m.tflite", model, &sent), job.model_sha256);
  EXPECT_EQ(sent, model.size());
  EXPECT_TRUE(testing::ReadFile(stored(job.model_sha256)) == model) << "the stored bytes differ";
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  // Logged once, naming the artifact.
  std::string text = log();
  EXPECT_THAT(text, HasSubstr("artifact " + job.model_sha256.substr(0, 12) + " in store '" +
                              store() + "' is corrupt: its 200000 bytes hash to "));
  EXPECT_EQ(text.find(" is corrupt"), text.rfind(" is corrupt")) << text;
}

// A truncated runner is pushed again, and the job then runs.
TEST_F(StoreIntegrityTest, TruncatedRunnerIsPushedAgain) {
  ASSERT_TRUE(StartAgent()) << log();
  JobSpec job;
  {
    auto client = Connect();
    ASSERT_TRUE(client);
    job.runner_sha256 = Put(*client, "ok.sh", testing::kOkRunner);
    job.model_sha256 = Put(*client, "m.tflite", "model");
    auto r = client->RunJob(job);
    ASSERT_TRUE(r.ok()) << r.message();
    ASSERT_EQ(r->status, "ok") << r->error;
  }
  ASSERT_EQ(::truncate(stored(job.runner_sha256).c_str(), 12), 0);
  auto client = Connect();
  ASSERT_TRUE(client);
  uint64_t sent = 0;
  Put(*client, "ok.sh", testing::kOkRunner, &sent);
  EXPECT_EQ(sent, std::string(testing::kOkRunner).size());
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
}

// A file planted under an artifact's name whose bytes do not hash to
// that name is deleted, never executed; the job is infra ("not in the store").
TEST_F(StoreIntegrityTest, PlantedRunnerIsNotExecuted) {
  ASSERT_TRUE(StartAgent()) << log();
  auto client = Connect();
  ASSERT_TRUE(client);
  JobSpec job;
  job.model_sha256 = Put(*client, "m.tflite", "model");
  job.runner_sha256 = testing::HashOf("the runner the host means");
  const std::string marker = dir_.path() + "/planted-ran";
  testing::WriteFile(stored(job.runner_sha256), "#!/bin/sh\ntouch " + marker + "\n");
  ASSERT_EQ(::chmod(stored(job.runner_sha256).c_str(), 0700), 0);
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "infra");
  EXPECT_THAT(r->error, HasSubstr("not in the store"));
  EXPECT_NE(::access(marker.c_str(), F_OK), 0) << "the planted runner was executed";
  EXPECT_NE(::access(stored(job.runner_sha256).c_str(), F_OK), 0) << "the planted file is kept";
}

// What the agent creates is private to its user.
TEST_F(StoreIntegrityTest, StoreAndArtifactsArePrivate) {
  ASSERT_TRUE(StartAgent()) << log();
  auto client = Connect();
  ASSERT_TRUE(client);
  JobSpec job;
  job.runner_sha256 = Put(*client, "ok.sh", testing::kOkRunner);
  job.model_sha256 = Put(*client, "m.tflite", "model");
  EXPECT_EQ(ModeOf(store()), 0700u);
  EXPECT_EQ(ModeOf(store() + "/artifacts"), 0700u);
  EXPECT_EQ(ModeOf(stored(job.model_sha256)), 0600u);
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  EXPECT_EQ(ModeOf(stored(job.runner_sha256)), 0700u);
}

// A store others can write is refused, naming the folder and the fix.
TEST_F(StoreIntegrityTest, StoreOthersCanWriteIsRefused) {
  ASSERT_EQ(::mkdir(store().c_str(), 0700), 0);
  ASSERT_EQ(::chmod(store().c_str(), 01777), 0);
  EXPECT_FALSE(StartAgent());
  EXPECT_THAT(log(), HasSubstr("artifact store '" + store() +
                               "' is writable by others (mode 1777); chmod 700 " + store()));
}

// A token file others can read, and a 16-byte token, are refused.
TEST_F(StoreIntegrityTest, TokenFileOthersCanReadIsRefused) {
  std::string token = WriteTemp("token", std::string(40, 't') + "\n");
  ASSERT_EQ(::chmod(token.c_str(), 0644), 0);
  EXPECT_FALSE(StartAgent({"--token-file", token}));
  EXPECT_THAT(log(), HasSubstr("token file '" + token +
                               "' is readable by others (mode 0644); chmod 600 " + token));
}

TEST_F(StoreIntegrityTest, SixteenByteTokenIsRefused) {
  std::string token = WriteTemp("token", std::string(16, 'a'));
  ASSERT_EQ(::chmod(token.c_str(), 0600), 0);
  EXPECT_FALSE(StartAgent({"--token-file", token}));
  EXPECT_THAT(log(), HasSubstr("holds 16 bytes; a token needs at least 32"));
}

// Under a quota, pushing the next model evicts the previous model,
// never the runner this connection runs its jobs with (the host pushes the
// runner once per connection and does not ask again).
TEST_F(StoreIntegrityTest, QuotaKeepsTheConnectionsRunner) {
  ASSERT_TRUE(StartAgent({"--quota-mib", "1"})) << log();
  auto client = Connect();
  ASSERT_TRUE(client);
  JobSpec job;
  job.runner_sha256 = Put(*client, "ok.sh", PaddedRunner(300'000));
  const std::string m1 = Pattern(400'000, 1), m2 = Pattern(400'000, 2);
  job.model_sha256 = Put(*client, "m1.tflite", m1);
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->status, "ok") << r->error;

  job.model_sha256 = Put(*client, "m2.tflite", m2);
  r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  auto have = client->Have({testing::HashOf(m1), job.model_sha256, job.runner_sha256});
  ASSERT_TRUE(have.ok()) << have.message();
  EXPECT_EQ(*have, (std::vector<bool>{false, true, true}));
}

// A folder planted under an artifact's name (with a file in it) is not that
// artifact: it is removed, and the artifact is pushed and runs, every time.
TEST_F(StoreIntegrityTest, PlantedFolderUnderAnArtifactNameIsRemoved) {
  ASSERT_TRUE(StartAgent()) << log();
  const std::string model = Pattern(100'000, 5);
  const std::string sha = testing::HashOf(model);
  ASSERT_EQ(::mkdir((store() + "/artifacts").c_str(), 0700) == 0 || errno == EEXIST, true);
  ASSERT_EQ(::mkdir(stored(sha).c_str(), 0700), 0);
  testing::WriteFile(stored(sha) + "/inside", "planted");
  auto client = Connect();
  ASSERT_TRUE(client);
  JobSpec job;
  job.runner_sha256 = Put(*client, "ok.sh", testing::kOkRunner);
  uint64_t sent = 0;
  job.model_sha256 = Put(*client, "m.tflite", model, &sent);
  EXPECT_EQ(job.model_sha256, sha);
  EXPECT_EQ(sent, model.size());
  EXPECT_TRUE(testing::ReadFile(stored(sha)) == model) << "the stored bytes differ";
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  EXPECT_THAT(log(), HasSubstr("is corrupt: it is not a regular file"));
}

// A runner the quota evicted before its first job (the model pushed after it
// needed the room): the job's error names the quota and the fix, not just
// "not in the store".
TEST_F(StoreIntegrityTest, RunnerEvictedByTheQuotaIsNamedInTheError) {
  ASSERT_TRUE(StartAgent({"--quota-mib", "1"})) << log();
  auto client = Connect();
  ASSERT_TRUE(client);
  JobSpec job;
  job.runner_sha256 = Put(*client, "ok.sh", PaddedRunner(300'000));
  job.model_sha256 = Put(*client, "m.tflite", Pattern(800'000, 3));
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "infra");
  EXPECT_THAT(r->error, HasSubstr("artifact " + job.runner_sha256 + " is not in the store"));
  EXPECT_THAT(r->error, HasSubstr("the store quota of 1048576 bytes evicted it"));
  EXPECT_THAT(r->error, HasSubstr("to make room for artifact " + job.model_sha256.substr(0, 12)));
  EXPECT_THAT(r->error, HasSubstr("raise the agent's store quota (dfarm-agent --quota-mib)"));
}

}  // namespace
}  // namespace dfarm::agent
