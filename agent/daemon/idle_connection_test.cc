// Idle connections must not lock anyone out: a peer
// that connects and says nothing is closed after the hello deadline, also on
// a loopback listener without a token, and connections that have not
// completed hello cannot take the slots of those that did.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <thread>

#include "agent/client/client.h"
#include "agent/daemon/server.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using std::chrono::milliseconds;
using testing::TempDir;
using testing::TestAgent;
using Clock = std::chrono::steady_clock;

using testing::kTimeout;
using testing::RawConnect;

// Milliseconds until the agent closes fd (EOF or reset), or -1 if it stays
// open for `within`.
int64_t ClosedWithin(int fd, milliseconds within) {
  auto start = Clock::now();
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(within.count())) <= 0) return -1;
  char c;
  if (::recv(fd, &c, 1, 0) > 0) return -1;  // it said something instead
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// A dfarm-agent server on loopback in this process, without a token.
class InProcessAgent {
 public:
  explicit InProcessAgent(ServerOptions options) {
    auto server = Server::Create(options);
    EXPECT_TRUE(server.ok()) << server.message();
    if (!server.ok()) return;
    server_ = std::move(*server);
    thread_ = std::thread([this] { server_->Serve(); });
  }
  ~InProcessAgent() {
    if (!server_) return;
    server_->Stop();
    thread_.join();
  }
  uint16_t port() const { return server_ ? server_->port() : 0; }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

TEST(IdleConnectionTest, SilentConnectionIsClosedAfterTheHelloDeadline) {
  TempDir dir;
  ServerOptions options;
  options.store_dir = dir.path() + "/store";
  options.hello_timeout = milliseconds(500);
  InProcessAgent agent(options);
  ASSERT_GT(agent.port(), 0);

  UniqueFd silent = RawConnect(agent.port());
  // A frame begun and never finished is held no longer than the deadline.
  UniqueFd stalled = RawConnect(agent.port());
  ASSERT_EQ(::send(stalled.get(), "\x20\0", 2, MSG_NOSIGNAL), 2);
  int64_t silent_ms = ClosedWithin(silent.get(), milliseconds(3000));
  int64_t stalled_ms = ClosedWithin(stalled.get(), milliseconds(3000));
  EXPECT_GE(silent_ms, 0) << "a silent connection is still open 3 s after a 500 ms deadline";
  EXPECT_GE(stalled_ms, 0) << "a stalled frame is still open 3 s after a 500 ms deadline";

  // A client that says hello in time is served.
  ConnectOptions connect;
  connect.timeout = kTimeout;
  auto client = AgentClient::Connect("127.0.0.1", agent.port(), connect);
  ASSERT_TRUE(client.ok()) << client.message();
  std::this_thread::sleep_for(milliseconds(800));  // past the deadline: hello is done
  EXPECT_TRUE((*client)->Have({std::string(64, 'a')}).ok());
}

TEST(IdleConnectionTest, SeventyIdleConnectionsLockNobodyOut) {
  TempDir dir;
  TestAgent agent({"--listen", "127.0.0.1:0", "--store", dir.path() + "/store"},
                  dir.path() + "/agent.log");
  uint16_t port = agent.ReadPort();
  ASSERT_GT(port, 0) << testing::ReadFile(dir.path() + "/agent.log");
  ConnectOptions connect;
  connect.timeout = kTimeout;
  auto early = AgentClient::Connect("127.0.0.1", port, connect);
  ASSERT_TRUE(early.ok()) << early.message();

  std::vector<UniqueFd> idle;
  for (int i = 0; i < 70; ++i) idle.push_back(RawConnect(port));

  // A 71st peer still completes hello and runs a job.
  auto late = AgentClient::Connect("127.0.0.1", port, connect);
  ASSERT_TRUE(late.ok()) << late.message() << "\n" << testing::ReadFile(dir.path() + "/agent.log");
  JobSpec job;
  std::string runner = dir.path() + "/ok.sh", model = dir.path() + "/m";
  testing::WriteFile(runner, testing::kOkRunner);
  testing::WriteFile(model, "model");
  ASSERT_TRUE((*late)->PutArtifact(runner, &job.runner_sha256).ok());
  ASSERT_TRUE((*late)->PutArtifact(model, &job.model_sha256).ok());
  auto r = (*late)->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;

  // The session that completed hello before the flood kept its slot.
  auto again = (*early)->RunJob(job);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->status, "ok") << again->error;
  EXPECT_THAT(testing::ReadFile(dir.path() + "/agent.log"),
              ::testing::HasSubstr("connections from 127.0.0.1 are waiting for hello, at most 8"));
}

}  // namespace
}  // namespace dfarm::agent
