// A runner must not outlive its agent. With the real
// dfarm-agent: SIGKILL it while a job runs and the runner dies with it; what
// the runner started itself (not covered by its parent-death signal) is
// killed by the next agent started on the same store.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <thread>

#include "agent/client/client.h"
#include "agent/daemon/runner_records.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::agent {
namespace {

using std::chrono::milliseconds;
using testing::TempDir;
using testing::TestAgent;
using Clock = std::chrono::steady_clock;

using testing::kTimeout;

// Gone: no such process, or a zombie (dead, waiting for its new parent to reap it).
bool ProcessGone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::string stat = testing::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || (paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

// Waits up to `within` for pid to be gone; true if it is.
bool GoneWithin(pid_t pid, milliseconds within) {
  auto end = Clock::now() + within;
  while (!ProcessGone(pid)) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

class OrphanTest : public ::testing::Test {
 protected:
  ~OrphanTest() override {
    // Whatever a failing test left running.
    for (pid_t pid : started_) {
      if (!ProcessGone(pid)) ::kill(pid, SIGKILL);
    }
  }

  void StartAgent() {
    agent_ = std::make_unique<TestAgent>(
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--store", dir_.path() + "/store"},
        log_path());
    port_ = agent_->ReadPort();
    ASSERT_GT(port_, 0) << testing::ReadFile(log_path());
  }

  std::string log_path() const { return dir_.path() + "/agent.log"; }

  std::string Put(AgentClient& client, const std::string& name, const std::string& bytes) {
    std::string path = dir_.path() + "/" + name;
    testing::WriteFile(path, bytes);
    std::string sha;
    auto r = client.PutArtifact(path, &sha);
    EXPECT_TRUE(r.ok()) << r.message();
    return sha;
  }

  // The pid a runner wrote to `name` (0 if none came within 5 s).
  pid_t ReadPid(const std::string& name) {
    for (int i = 0; i < 500; ++i) {
      std::string text = testing::ReadFile(dir_.path() + "/" + name);
      if (!text.empty() && text.back() == '\n') {
        pid_t pid = static_cast<pid_t>(std::stol(text));
        started_.push_back(pid);
        return pid;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    return 0;
  }

  // Starts the runner script as a job on a thread of its own (the job's
  // result is lost with the agent). Returns once the job was sent.
  std::thread RunInBackground(const std::string& script) {
    ConnectOptions options;
    options.timeout = kTimeout;
    auto client = AgentClient::Connect("127.0.0.1", port_, options);
    EXPECT_TRUE(client.ok()) << client.message();
    if (!client.ok()) return std::thread();
    std::shared_ptr<AgentClient> shared = std::move(*client);
    JobSpec job;
    job.runner_sha256 = Put(*shared, "runner.sh", script);
    job.model_sha256 = Put(*shared, "m", "model");
    job.timeout_ms = 120000;
    return std::thread([shared, job] { (void)shared->RunJob(job); });
  }

  TempDir dir_;
  std::unique_ptr<TestAgent> agent_;
  uint16_t port_ = 0;
  std::vector<pid_t> started_;
};

TEST_F(OrphanTest, RunnerDiesWithAKilledAgent) {
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  std::thread job =
      RunInBackground("#!/bin/sh\necho $$ > " + dir_.path() + "/runner.pid\nexec sleep 300\n");
  pid_t runner = ReadPid("runner.pid");
  ASSERT_GT(runner, 0) << testing::ReadFile(log_path());
  ASSERT_FALSE(ProcessGone(runner));

  agent_->Kill();  // SIGKILL: the agent cannot clean anything up itself
  EXPECT_TRUE(GoneWithin(runner, milliseconds(2000)))
      << "runner " << runner << " outlived its agent";
  if (job.joinable()) job.join();
}

TEST_F(OrphanTest, RestartedAgentKillsWhatADeadOneLeftBehind) {
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  // The runner's child is outside the parent-death signal (its parent is the
  // runner), and stays in the runner's session when the runner dies.
  std::thread job = RunInBackground("#!/bin/sh\nsleep 300 &\necho $! > " + dir_.path() +
                                    "/child.pid\necho $$ > " + dir_.path() + "/runner.pid\nwait\n");
  pid_t runner = ReadPid("runner.pid"), child = ReadPid("child.pid");
  ASSERT_GT(runner, 0) << testing::ReadFile(log_path());
  ASSERT_GT(child, 0);

  agent_->Kill();
  if (job.joinable()) job.join();
  EXPECT_TRUE(GoneWithin(runner, milliseconds(2000))) << "runner " << runner;

  ASSERT_NO_FATAL_FAILURE(StartAgent());  // the same store
  EXPECT_TRUE(GoneWithin(child, milliseconds(2000)))
      << "the runner's child " << child << " survived a restarted agent\n"
      << testing::ReadFile(log_path());
  EXPECT_THAT(testing::ReadFile(log_path()),
              ::testing::HasSubstr("left behind 1 process(es); killed " + std::to_string(child)));
}

// An agent that holds the store but is stopping (SIGTERM, its host gone) is
// waited for: a successor started meanwhile (dfarm restarted after a crash)
// takes the store once it is free, instead of refusing.
TEST_F(OrphanTest, SuccessorWaitsForAStoppingAgent) {
  const std::string store = dir_.path() + "/store";
  ASSERT_EQ(::mkdir(store.c_str(), 0700), 0);
  UniqueFd held(::open((store + "/agent.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(held);
  ASSERT_EQ(::flock(held.get(), LOCK_EX | LOCK_NB), 0);
  const std::string line = "99999 stopping\n";
  ASSERT_EQ(::write(held.get(), line.data(), line.size()), static_cast<ssize_t>(line.size()));
  agent_ = std::make_unique<TestAgent>(
      std::vector<std::string>{"--listen", "127.0.0.1:0", "--store", store}, log_path());
  bool waiting = false;
  for (int i = 0; i < 1000 && !waiting; ++i) {
    waiting = testing::ReadFile(log_path()).find("which is stopping; waiting") != std::string::npos;
    if (!waiting) std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(waiting) << testing::ReadFile(log_path());
  held.reset();  // the stopping agent ends
  port_ = agent_->ReadPort();
  EXPECT_GT(port_, 0) << testing::ReadFile(log_path());
}

// A process that left the runner's session (setsid) is not in the session the
// restarted agent searches; it carries the job's mark in its environment.
TEST_F(OrphanTest, RestartedAgentKillsASetsidProcessADeadOneLeftBehind) {
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  const std::string pid_file = dir_.path() + "/escaped.pid";
  std::thread job = RunInBackground("#!/bin/sh\nsetsid sh -c 'echo $$ > " + pid_file + ".tmp; mv " +
                                    pid_file + ".tmp " + pid_file +
                                    "; exec sleep 300' </dev/null >/dev/null 2>&1 &\necho $$ > " +
                                    dir_.path() + "/runner.pid\nwait\n");
  pid_t runner = ReadPid("runner.pid"), escaped = ReadPid("escaped.pid");
  ASSERT_GT(runner, 0) << testing::ReadFile(log_path());
  ASSERT_GT(escaped, 0);

  agent_->Kill();  // SIGKILL: no job end, no clean-up by this agent
  if (job.joinable()) job.join();
  EXPECT_TRUE(GoneWithin(runner, milliseconds(2000))) << "runner " << runner;
  ASSERT_FALSE(ProcessGone(escaped));

  ASSERT_NO_FATAL_FAILURE(StartAgent());  // the same store
  EXPECT_TRUE(GoneWithin(escaped, milliseconds(2000)))
      << "process " << escaped << " (setsid) of a dead agent's job survived a restarted agent\n"
      << testing::ReadFile(log_path());
}

// One agent per store: a second agent started on the store of a live one
// (`dfarm devices` in another terminal while a sweep runs) refuses at once
// with exit code 3, naming the store and the holder, before it touches the
// store; the first agent's runner is never killed and its job ends ok.
TEST_F(OrphanTest, SecondAgentOnAStoreInUseRefusesAndKillsNothing) {
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  const std::string release = dir_.path() + "/release";
  ConnectOptions options;
  options.timeout = kTimeout;
  auto client = AgentClient::Connect("127.0.0.1", port_, options);
  ASSERT_TRUE(client.ok()) << client.message();
  JobSpec job;
  job.runner_sha256 =
      Put(**client, "runner.sh",
          "#!/bin/sh\necho $$ > " + dir_.path() + "/runner.pid\nwhile [ ! -e " + release +
              " ]; do sleep 0.02; done\n" + std::string(testing::kOkRunner).substr(10));
  job.model_sha256 = Put(**client, "m", "model");
  job.timeout_ms = 120000;
  Result<JobResult> result = MakeError("not run");
  std::thread run([&] { result = (*client)->RunJob(job); });
  pid_t runner = ReadPid("runner.pid");
  ASSERT_GT(runner, 0) << testing::ReadFile(log_path());

  const std::string second_log = dir_.path() + "/second.log";
  TestAgent second({"--listen", "127.0.0.1:0", "--store", dir_.path() + "/store"}, second_log);
  EXPECT_EQ(second.ReadPort(), 0) << "a second agent serves a store in use";
  int status = second.WaitExit(kTimeout);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << status;
  EXPECT_THAT(testing::ReadFile(second_log),
              ::testing::HasSubstr("artifact store '" + dir_.path() +
                                   "/store' is in use by another dfarm-agent (pid " +
                                   std::to_string(agent_->pid()) + ")"));
  EXPECT_FALSE(ProcessGone(runner)) << "the second agent killed the first one's runner";

  testing::WriteFile(release, "");
  run.join();
  ASSERT_TRUE(result.ok()) << result.message();
  EXPECT_EQ(result->status, "ok") << result->error;
}

// A process the runner started that left the job's session (setsid) and
// outlived the runner: it is killed when the job ends, before the result is
// sent, so nothing of the job is left when RunJob returns.
TEST_F(OrphanTest, SetsidGrandchildDiesWithItsJob) {
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  ConnectOptions options;
  options.timeout = kTimeout;
  auto client = AgentClient::Connect("127.0.0.1", port_, options);
  ASSERT_TRUE(client.ok()) << client.message();
  const std::string pid_file = dir_.path() + "/escaped.pid";
  JobSpec job;
  job.runner_sha256 =
      Put(**client, "runner.sh",
          "#!/bin/sh\nsetsid sh -c 'echo $$ > " + pid_file + ".tmp; mv " + pid_file + ".tmp " +
              pid_file + "; exec sleep 1000' </dev/null >/dev/null 2>&1 &\nwhile [ ! -s " +
              pid_file + " ]; do sleep 0.01; done\n" + std::string(testing::kOkRunner).substr(10));
  job.model_sha256 = Put(**client, "m", "model");
  auto r = (*client)->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
  pid_t escaped = ReadPid("escaped.pid");
  ASSERT_GT(escaped, 0);
  EXPECT_TRUE(ProcessGone(escaped))
      << "process " << escaped << " that the job started (setsid) outlived it\n"
      << testing::ReadFile(log_path());
  EXPECT_THAT(testing::ReadFile(log_path()),
              ::testing::HasSubstr("killed " + std::to_string(escaped)));
}

// The qemu-arm64 device's set-up: the aarch64 agent under qemu-user runs the
// aarch64 runner through the same qemu (--runner-prefix). The death signal
// must reach that runner too. Skipped without the cross build or qemu.
TEST(OrphanQemuTest, RunnerUnderQemuDiesWithAKilledAgent) {
  namespace fs = std::filesystem;
  const fs::path arm64 = fs::path(DFARM_BINARY_DIR) / "arm64" / "bin";
  const std::string qemu = "/usr/bin/qemu-aarch64", sysroot = "/usr/aarch64-linux-gnu";
  for (const fs::path& p : {arm64 / "dfarm-agent", arm64 / "dfarm-runner", fs::path(qemu)}) {
    if (!fs::exists(p)) GTEST_SKIP() << p << " is absent";
  }
  TempDir dir;
  const std::string store = dir.path() + "/store";
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  UniqueFd out_r(out[0]), out_w(out[1]);
  SpawnOptions options;
  options.stdout_fd = out_w.get();
  auto agent = SpawnProcess(
      {qemu, "-L", sysroot, (arm64 / "dfarm-agent").string(), "--listen", "127.0.0.1:0",
       "--insecure", "--store", store, "--runner-prefix", qemu + " -L " + sysroot},
      options);
  ASSERT_TRUE(agent.ok()) << agent.message();
  out_w.reset();
  std::string line;
  char c;
  pollfd p{out_r.get(), POLLIN, 0};
  while (::poll(&p, 1, 20000) > 0 && ::read(out_r.get(), &c, 1) == 1 && c != '\n') line += c;
  const std::string listening = "listening on 127.0.0.1:";
  if (line.rfind(listening, 0) != 0) {
    ::kill(*agent, SIGKILL), ::waitpid(*agent, nullptr, 0);
    FAIL() << "the agent under qemu printed '" << line << "'";
  }
  uint16_t port = static_cast<uint16_t>(std::stoi(line.substr(listening.size())));

  // out = a + b, float32 [1,4], run far longer than the test waits.
  dfarm::testing::ModelBuilder b;
  int a = b.AddTensor(dfarm::testing::tfl::TensorType::FLOAT32, {1, 4}, "a");
  int c2 = b.AddTensor(dfarm::testing::tfl::TensorType::FLOAT32, {1, 4}, "b");
  int sum = b.AddTensor(dfarm::testing::tfl::TensorType::FLOAT32, {1, 4}, "out");
  b.AddAdd(a, c2, sum);
  b.SetInputs({a, c2});
  b.SetOutputs({sum});
  const std::string model = dir.path() + "/add.tflite";
  ASSERT_TRUE(b.WriteFile(model));
  ConnectOptions connect;
  connect.timeout = milliseconds(20000);
  auto client = AgentClient::Connect("127.0.0.1", port, connect);
  ASSERT_TRUE(client.ok()) << client.message();
  std::shared_ptr<AgentClient> shared = std::move(*client);
  JobSpec job;
  ASSERT_TRUE(shared->PutArtifact((arm64 / "dfarm-runner").string(), &job.runner_sha256).ok());
  ASSERT_TRUE(shared->PutArtifact(model, &job.model_sha256).ok());
  job.num_runs = 10'000'000;
  job.warmup_runs = 0;
  job.timeout_ms = 600'000;
  std::thread run([shared, job] { (void)shared->RunJob(job); });

  // The runner: a qemu process whose command line names the stored runner.
  const std::string runner_path = store + "/artifacts/" + job.runner_sha256;
  pid_t runner = 0;
  for (int i = 0; i < 1000 && runner == 0; ++i) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc", ec)) {
      std::string cmdline = testing::ReadFile(entry.path().string() + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (cmdline.find(runner_path + " --model") != std::string::npos) {
        runner = static_cast<pid_t>(std::stol(entry.path().filename().string()));
      }
    }
    if (runner == 0) std::this_thread::sleep_for(milliseconds(10));
  }
  const bool running = runner > 0 && !ProcessGone(runner);
  ::kill(*agent, SIGKILL);
  ::waitpid(*agent, nullptr, 0);
  run.join();
  ASSERT_TRUE(running) << "the runner was never seen running";
  bool gone = GoneWithin(runner, milliseconds(2000));
  if (!gone) ::kill(runner, SIGKILL);
  EXPECT_TRUE(gone) << "runner " << runner << " (under qemu) outlived its agent";
}

// --- RunnerRecords, on processes of this test ----------------------------------

class RunnerRecordsTest : public ::testing::Test {
 protected:
  ~RunnerRecordsTest() override {
    if (victim_ > 0) ::kill(victim_, SIGKILL), ::waitpid(victim_, nullptr, 0);
  }

  // A process that stands for a runner: a child of this test, so a killed
  // one stays a zombie until reaped (ProcessGone counts it as gone).
  pid_t StartVictim() {
    auto pid = SpawnProcess({"/bin/sleep", "300"}, SpawnOptions{});
    EXPECT_TRUE(pid.ok()) << pid.message();
    victim_ = pid.ok() ? *pid : 0;
    return victim_;
  }

  // An agent that has ended: a pid that is free now.
  static ProcessStamp DeadAgent() {
    auto pid = SpawnProcess({"/bin/true"}, SpawnOptions{});
    EXPECT_TRUE(pid.ok()) << pid.message();
    ::waitpid(*pid, nullptr, 0);
    return ProcessStamp{*pid, 1};
  }

  std::string run_dir() const { return dir_.path() + "/run"; }
  std::string RecordOf(pid_t pid) const { return run_dir() + "/" + std::to_string(pid); }

  TempDir dir_;
  pid_t victim_ = 0;
};

TEST_F(RunnerRecordsTest, RecordOfALiveAgentIsKept) {
  pid_t victim = StartVictim();
  ASSERT_GT(victim, 0);
  RunnerRecords mine(run_dir());  // this process is the agent, and it runs
  ASSERT_TRUE(mine.Add(victim).ok());
  auto lines = RunnerRecords(run_dir()).ReapLeftovers();
  ASSERT_TRUE(lines.ok()) << lines.message();
  EXPECT_TRUE(lines->empty());
  EXPECT_FALSE(ProcessGone(victim));
  EXPECT_TRUE(std::filesystem::exists(RecordOf(victim)));
  mine.Remove(victim);
  EXPECT_FALSE(std::filesystem::exists(RecordOf(victim)));
}

TEST_F(RunnerRecordsTest, RunnerOfADeadAgentIsKilled) {
  pid_t victim = StartVictim();
  ASSERT_GT(victim, 0);
  ASSERT_TRUE(RunnerRecords(run_dir(), DeadAgent()).Add(victim).ok());
  auto lines = RunnerRecords(run_dir()).ReapLeftovers();
  ASSERT_TRUE(lines.ok()) << lines.message();
  EXPECT_THAT(*lines, ::testing::ElementsAre(::testing::HasSubstr(
                          "left behind 1 process(es); killed " + std::to_string(victim))));
  EXPECT_TRUE(GoneWithin(victim, milliseconds(2000)));
  EXPECT_FALSE(std::filesystem::exists(RecordOf(victim)));
}

TEST_F(RunnerRecordsTest, AReusedPidIsNeverKilled) {
  pid_t victim = StartVictim();
  ASSERT_GT(victim, 0);
  ASSERT_TRUE(RunnerRecords(run_dir(), DeadAgent()).Add(victim).ok());
  // The record's runner started at another time: the pid now belongs to someone else.
  std::string text = testing::ReadFile(RecordOf(victim));
  std::string start = std::to_string(StampOf(victim)->start_ticks);
  text.replace(text.find(" " + start + " "), start.size() + 2, " " + start + "0 ");
  testing::WriteFile(RecordOf(victim), text);
  auto lines = RunnerRecords(run_dir()).ReapLeftovers();
  ASSERT_TRUE(lines.ok()) << lines.message();
  EXPECT_THAT(*lines, ::testing::ElementsAre(::testing::HasSubstr("left nothing behind")));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(ProcessGone(victim));
  EXPECT_FALSE(std::filesystem::exists(RecordOf(victim)));
}

TEST_F(RunnerRecordsTest, UnreadableRecordIsRemoved) {
  std::filesystem::create_directories(run_dir());
  testing::WriteFile(run_dir() + "/123", "runner twelve");
  auto lines = RunnerRecords(run_dir()).ReapLeftovers();
  ASSERT_TRUE(lines.ok()) << lines.message();
  EXPECT_THAT(*lines, ::testing::ElementsAre(::testing::HasSubstr("unreadable runner record")));
  EXPECT_FALSE(std::filesystem::exists(run_dir() + "/123"));
}

}  // namespace
}  // namespace dfarm::agent
