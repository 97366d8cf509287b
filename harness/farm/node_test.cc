// `dfarm node`'s registration (RunNode on a real SQLite store): which earlier
// holder of a node name keeps it. The node drains from the start, so it
// registers, reaps and stops without claiming.
#include "harness/farm/node.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness/devices/devices.h"
#include "harness/test_util.h"
#include "reports/store/store.h"

namespace dfarm::harness {
namespace {

using ::testing::HasSubstr;

std::string HostName() {
  char name[256] = "";
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// A child process that waits until killed; killed and reaped at the end.
class Sleeper {
 public:
  Sleeper() : pid_(::fork()) {
    if (pid_ == 0) {
      ::pause();
      ::_exit(0);
    }
  }
  ~Sleeper() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// A pid no process holds: a child's that exited and was reaped.
pid_t DeadPid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

class NodeRegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = (dir_.path() / "farm.db").string();
    auto opened = store::OpenSqliteStore(db_);
    ASSERT_TRUE(opened.ok()) << opened.message();
    store_ = std::move(*opened);
    provider_ = MakeDeviceProvider(DefaultProviderOptions());
  }

  // A node row as a process left it: heartbeat now (a fresh one).
  void Leave(const std::string& name, const std::string& host, int64_t pid,
             const std::string& started_at = store::NowIso8601()) {
    store::NodeRow n{name, host, pid, started_at, 0, 0, "", {device_}};
    ASSERT_TRUE(store_->RegisterNode(n).ok());
  }

  Result<NodeSummary> Start(const std::string& name) {
    NodeOptions o;
    o.name = name;
    o.devices = {device_};
    o.cache_dir = (dir_.path() / "cache").string();
    const std::string db = db_;
    o.open_store = [db] { return store::OpenSqliteStore(db); };
    o.provider = provider_.get();
    o.drain = &drain_;
    o.heartbeat = std::chrono::milliseconds(100);
    return RunNode(o);
  }

  store::NodeRow Row(const std::string& name) {
    auto nodes = store_->ListNodes();
    EXPECT_TRUE(nodes.ok());
    for (const store::NodeRow& n : *nodes) {
      if (n.name == name) return n;
    }
    return {};
  }

  TempDir dir_;
  std::string db_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<DeviceProvider> provider_;
  std::atomic<bool> drain_{true};
  const std::string device_ = "tcp://127.0.0.1:1";
};

// Its predecessor on this host is dead (a crash): the name is taken over at
// once, and the jobs the predecessor held go back to the queue.
TEST_F(NodeRegistrationTest, ADeadPredecessorOnThisHostIsTakenOverAtOnce) {
  const pid_t dead = DeadPid();
  Leave("lab-a", HostName(), dead);
  auto run = store_->CreateRun("farm", "{}");
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(store_->SetRunMode(*run, store::kRunModeQueue).ok());
  store::JobRow j;
  j.model = "m.tflite";
  j.delegate = "cpu";
  j.device = "phone";
  j.target = store::kTargetAny;
  auto job = store_->AddJob(*run, j);
  ASSERT_TRUE(job.ok());
  store::DeviceTraits traits;
  traits.name = device_;
  auto claimed = store_->ClaimJob("lab-a", traits, 3600);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());

  auto started = Start("lab-a");
  ASSERT_TRUE(started.ok()) << started.message();
  EXPECT_EQ(Row("lab-a").pid, ::getpid());
  auto after = store_->GetJob(*job);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->status, store::kJobQueued);
  EXPECT_EQ(after->claimed_by, "");
  EXPECT_EQ(store_->ListJobClaims(*job)->at(0).outcome, store::kClaimReaped);
}

// A pid reused by a process that started after the predecessor registered:
// the predecessor is dead all the same.
TEST_F(NodeRegistrationTest, AReusedPidDoesNotKeepTheName) {
  Sleeper other;
  Leave("lab-a", HostName(), other.pid(), "2020-01-01T00:00:00Z");
  auto started = Start("lab-a");
  ASSERT_TRUE(started.ok()) << started.message();
  EXPECT_EQ(Row("lab-a").pid, ::getpid());
}

// A live predecessor, or one on another host (its pid cannot be checked
// from here), keeps the name and its devices until its heartbeat is 2
// leases old.
TEST_F(NodeRegistrationTest, ALivePredecessorOrOneElsewhereKeepsTheName) {
  Sleeper live;
  Leave("lab-a", HostName(), live.pid());
  auto refused = Start("lab-a");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kInvalidInput);
  EXPECT_THAT(refused.message(),
              HasSubstr("node name 'lab-a' is in use by pid " + std::to_string(live.pid())));
  refused = Start("lab-b");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("device '" + device_ + "' is served by node 'lab-a'"));

  Leave("lab-a", "elsewhere", DeadPid());
  refused = Start("lab-a");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("node name 'lab-a' is in use by pid"));
  EXPECT_EQ(Row("lab-a").host, "elsewhere");
}

}  // namespace
}  // namespace dfarm::harness
