// Fault injection over real processes (CTest label e2e-faults, which
// `ctest -L faults` selects): the real dfarm, dfarm-agent and dfarm-runner with
// a connection stalled or cut by a proxy, an agent stopped mid-job, two resumes
// of one run at once, a runner that exits 0 and says nothing, and the database
// or an agent's store on a full filesystem. Each test ends with
// CheckRunInvariants: every job in one terminal state, results stored once, no
// wrong ok, no stray process.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_util.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;
namespace tfl = ::dfarm::tflite;

const char* kFace = "face_detection_short_range.tflite";

// A TCP proxy on 127.0.0.1 in front of an agent, that forwards until told to
// stall (stop forwarding, keep the sockets open) or cuts one connection (the
// first to get there) once `cut_after` bytes went on it from the host to the agent.
class Proxy {
 public:
  explicit Proxy(uint16_t agent_port) : agent_port_(agent_port) {
    listen_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(listen_.get(), 16) != 0 ||
        ::getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    threads_.emplace_back([this] { AcceptLoop(); });
  }
  ~Proxy() {
    stop_ = true;
    std::lock_guard<std::mutex> lock(mu_);  // no thread is added after this
    for (auto& t : threads_) t.join();
  }

  std::string uri() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  void Stall() { stall_ = true; }
  void Unstall() { stall_ = false; }
  // `at_cut`, when set, runs on the proxy's thread just before the cut.
  void CutOnceAfter(int64_t bytes, std::function<void()> at_cut = nullptr) {
    at_cut_ = std::move(at_cut);
    cut_after_ = bytes;
  }
  int connections() const { return connections_; }
  bool cut() const { return cut_; }

 private:
  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      UniqueFd down(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!down) continue;
      UniqueFd up(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(agent_port_);
      if (::connect(up.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) continue;
      ++connections_;
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
      threads_.emplace_back([this, d = std::move(down), u = std::move(up)]() mutable {
        Pump(std::move(d), std::move(u));
      });
    }
  }

  // Copies both ways until either side closes, the proxy stops, or a fault.
  void Pump(UniqueFd down, UniqueFd up) {
    int64_t to_agent = 0;
    char buf[16384];
    while (!stop_) {
      if (stall_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      pollfd p[2] = {{down.get(), POLLIN, 0}, {up.get(), POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(p[i].fd, buf, sizeof buf);
        if (n <= 0) return;  // closes both
        if (i == 0 && cut_after_ > 0 && to_agent + n >= cut_after_ && !cut_.exchange(true)) {
          if (at_cut_) at_cut_();
          return;
        }
        if (i == 0) to_agent += n;
        const int to = i == 0 ? up.get() : down.get();
        for (ssize_t off = 0; off < n;) {
          ssize_t w = ::send(to, buf + off, n - off, MSG_NOSIGNAL);
          if (w <= 0) return;
          off += w;
        }
      }
    }
  }

  uint16_t agent_port_;
  uint16_t port_ = 0;
  UniqueFd listen_;
  std::atomic<bool> stop_{false}, stall_{false}, cut_{false};
  std::atomic<int64_t> cut_after_{0};
  std::function<void()> at_cut_;
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

class FaultsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    face_ = fs::path(DFARM_MODELS_DIR) / kFace;
    if (!fs::exists(face_)) GTEST_SKIP() << face_ << " is absent (run scripts/setup.sh)";
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << exe << " is not built";
    }
    dir_ = fs::temp_directory_path() /
           ("dfarm_faults_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "x.db").string();
  }
  void TearDown() override {
    for (const fs::path& m : mounts_) ::umount2(m.c_str(), MNT_DETACH);
    if (!dir_.empty() && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  // dfarm with `args`, the test's database and local store; `env` (NAME=value)
  // set through env(1).
  std::vector<std::string> DfarmArgs(const std::vector<std::string>& args,
                                     const std::vector<std::string>& env = {}) const {
    std::vector<std::string> all;
    if (!env.empty()) {
      all.push_back("/usr/bin/env");
      all.insert(all.end(), env.begin(), env.end());
    }
    all.push_back((BinDir() / "dfarm").string());
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--db", db_, "--agent-store", (dir_ / "local-store").string()});
    return all;
  }

  Outcome Dfarm(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    return RunToEnd(DfarmArgs(args, env), dir_ / "out", dir_ / "err");
  }
  Outcome Finish(Child& c, const std::string& out, const std::string& err) {
    int status = c.Wait();
    Outcome o;
    o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.out = Slurp(dir_ / out);
    o.err = Slurp(dir_ / err);
    return o;
  }

  // A model of one ADD (input + constant): the cheapest job there is.
  std::string AddModel() {
    testing::ModelBuilder b;
    int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "in");
    int c = b.AddConstFloat32({1, 4}, {1, 2, 3, 4}, "c");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
    b.AddAdd(in, c, out);
    b.SetInputs({in});
    b.SetOutputs({out});
    std::string path = (dir_ / "add.tflite").string();
    EXPECT_TRUE(b.WriteFile(path));
    return path;
  }

  std::string WriteSpec(const json& spec, const std::string& name = "spec.json") {
    fs::path p = dir_ / name;
    std::ofstream(p) << spec.dump(2);
    return p.string();
  }

  int64_t Count(const std::string& where) {
    return QueryInt(db_, "SELECT count(*) FROM jobs WHERE " + where);
  }

  // A tmpfs of `size` at dir_/name, or "" when this machine does not let the
  // test mount one (not root, no CAP_SYS_ADMIN, a seccomp filter).
  fs::path SmallFilesystem(const std::string& name, const std::string& size, std::string* why) {
    fs::path m = dir_ / name;
    fs::create_directories(m);
    const std::string data = "size=" + size + ",mode=0700";
    if (::mount("tmpfs", m.c_str(), "tmpfs", 0, data.c_str()) != 0) {
      *why = std::string("cannot mount a small tmpfs here: ") + std::strerror(errno);
      return {};
    }
    mounts_.push_back(m);
    return m;
  }

  fs::path face_, dir_;
  std::string db_;
  std::vector<fs::path> mounts_;
};

// A proxy that cuts the connection mid-upload of the model: the scheduler
// retries, the artifact is pushed again from the start, every job ends ok.
TEST_F(FaultsE2eTest, ConnectionCutMidUploadIsRePushed) {
  Agent a = StartAgent(dir_ / "store-a", dir_ / "agent-a.log");
  ASSERT_NE(a.port, 0) << Slurp(dir_ / "agent-a.log");
  Proxy proxy(a.port);
  ASSERT_NE(proxy.port(), 0);
  // Both the runner (about 2 MB) and the model are larger than this.
  proxy.CutOnceAfter(static_cast<int64_t>(fs::file_size(face_) / 2));
  std::string spec = WriteSpec({{"name", "cut"},
                                {"models", {face_.string()}},
                                {"devices", {proxy.uri()}},
                                {"benchmark", {{"num_runs", 3}, {"num_threads", {1, 2}}}},
                                {"scheduler", {{"retries", 2}, {"backoff_ms", 50}}}});
  Outcome o = Dfarm({"sweep", spec, "--json"});
  EXPECT_TRUE(proxy.cut()) << "the proxy never cut the upload";
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["jobs"], 2);
  EXPECT_EQ(s["ok"], 2);
  EXPECT_GE(proxy.connections(), 2);
  EXPECT_GE(s["bytes_pushed"].get<uint64_t>(), fs::file_size(face_));
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_, {a.process->pid()}, false, /*healthy=*/true), "");
}

// A proxy that stops forwarding while a job runs: the host's heartbeat gives
// up on the silent agent (3 missed pings, about 15 s), the job is retried on a
// fresh connection or ends infra, and never becomes an ok it did not earn.
TEST_F(FaultsE2eTest, ConnectionStalledMidJobIsNeverAWrongOk) {
  Agent a = StartAgent(dir_ / "store-a", dir_ / "agent-a.log");
  ASSERT_NE(a.port, 0) << Slurp(dir_ / "agent-a.log");
  Proxy proxy(a.port);
  ASSERT_NE(proxy.port(), 0);
  std::string spec = WriteSpec({{"name", "stall"},
                                {"models", {face_.string()}},
                                {"devices", {proxy.uri()}},
                                {"benchmark", {{"num_runs", 50}, {"num_threads", 1}}},
                                {"scheduler", {{"retries", 1}, {"backoff_ms", 50}}}});
  Child dfarm = Child::Spawn(DfarmArgs({"sweep", spec, "--json"}), (dir_ / "out").string(),
                             (dir_ / "err").string());
  ASSERT_TRUE(WaitFor([&] { return Count("status = 'running'") >= 1; }, std::chrono::seconds(20)))
      << Slurp(dir_ / "err");
  const int before = proxy.connections();
  proxy.Stall();
  // Stalled connections stay stalled; the retry's new one is let through.
  // The heartbeat gives up after about 15 s; the margin is for a loaded
  // machine (sanitizer builds, other tests beside it).
  ASSERT_TRUE(WaitFor([&] { return proxy.connections() > before; }, std::chrono::seconds(45)))
      << Slurp(dir_ / "err");
  proxy.Unstall();
  Outcome o = Finish(dfarm, "out", "err");
  EXPECT_TRUE(o.code == 0 || o.code == 1) << o.out << o.err;
  EXPECT_EQ(Count("status NOT IN ('ok', 'infra')"), 0) << o.err;
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_, {a.process->pid()}), "");
}

// An agent stopped (SIGSTOP) mid-job is silent: the heartbeat notices, the job
// is retried (after SIGCONT) or ends infra; no wrong ok, no stray runner.
TEST_F(FaultsE2eTest, StoppedAgentMidJob) {
  Agent a = StartAgent(dir_ / "store-a", dir_ / "agent-a.log");
  ASSERT_NE(a.port, 0) << Slurp(dir_ / "agent-a.log");
  std::string spec =
      WriteSpec({{"name", "stop"},
                 {"models", {face_.string()}},
                 {"devices", {a.uri()}},
                 {"benchmark", {{"num_runs", 50}, {"num_threads", {1, 2}}}},
                 {"scheduler", {{"retries", 1}, {"backoff_ms", 50}, {"quarantine_after", 1}}}});
  Child dfarm = Child::Spawn(DfarmArgs({"sweep", spec, "--json"}), (dir_ / "out").string(),
                             (dir_ / "err").string());
  ASSERT_TRUE(WaitFor([&] { return Count("status = 'running'") >= 1; }, std::chrono::seconds(20)))
      << Slurp(dir_ / "err");
  const pid_t agent = a.process->pid();
  ::kill(agent, SIGSTOP);
  // The heartbeat gives up on the job after 3 silent intervals (about 15 s).
  bool given_up =
      WaitFor([&] { return Slurp(dir_ / "err").find("heartbeats missed") != std::string::npos; },
              std::chrono::seconds(25));
  ::kill(agent, SIGCONT);
  Outcome o = Finish(dfarm, "out", "err");
  EXPECT_TRUE(given_up) << o.err;
  EXPECT_TRUE(o.code == 0 || o.code == 1) << o.out << o.err;
  EXPECT_EQ(Count("status NOT IN ('ok', 'infra')"), 0) << o.err;
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_, {agent}), "");
}

// dfarm killed mid-run, then two `dfarm sweep --resume 1` at once: exactly
// one resumes, the other refuses naming the owner's pid; no result doubled.
TEST_F(FaultsE2eTest, TwoResumesAtOnceOneWins) {
  std::string spec = WriteSpec(
      {{"name", "two-resumes"},
       {"models", {face_.string()}},
       {"devices", {"local"}},
       {"benchmark",
        {{"warmup_runs", 1}, {"num_runs", 40}, {"num_threads", {1, 2, 3, 4, 5, 6, 7, 8}}}}});
  Child dfarm = Child::Spawn(DfarmArgs({"sweep", spec, "--json"}), (dir_ / "out").string(),
                             (dir_ / "err").string());
  ASSERT_TRUE(WaitFor([&] { return Count(std::string("status IN ") + kFinal) >= 1; },
                      std::chrono::seconds(30)))
      << Slurp(dir_ / "err");
  dfarm.Kill(SIGKILL);
  const int64_t done_before = Count(std::string("status IN ") + kFinal);
  ASSERT_LT(done_before, 6) << "the sweep ended before it could be killed";

  Child one = Child::Spawn(DfarmArgs({"sweep", "--resume", "1", "--json"}),
                           (dir_ / "out1").string(), (dir_ / "err1").string());
  Child two = Child::Spawn(DfarmArgs({"sweep", "--resume", "1", "--json"}),
                           (dir_ / "out2").string(), (dir_ / "err2").string());
  const pid_t pids[2] = {one.pid(), two.pid()};
  Outcome o[2] = {Finish(one, "out1", "err1"), Finish(two, "out2", "err2")};
  ASSERT_TRUE((o[0].code == 0) != (o[1].code == 0))
      << "exit codes " << o[0].code << " and " << o[1].code << "\n"
      << o[0].err << "\n"
      << o[1].err;
  const int winner = o[0].code == 0 ? 0 : 1;
  const Outcome& lost = o[1 - winner];
  EXPECT_NE(lost.err.find("in use by another dfarm process (pid " + std::to_string(pids[winner])),
            std::string::npos)
      << lost.err;
  json s = json::parse(o[winner].out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o[winner].out;
  EXPECT_EQ(s["jobs"], 8);
  EXPECT_EQ(s["ok"], 8);
  EXPECT_EQ(s["resumed"], 8 - done_before);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM results"), 8);
  EXPECT_LE(QueryInt(db_, "SELECT sum(attempts) FROM jobs"), 9);
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_, {}, false, /*healthy=*/true), "");
}

// A runner that exits 0 and prints nothing (DFARM_RUNNER, a shell script) did
// not measure anything: its jobs are crashed, never ok.
TEST_F(FaultsE2eTest, SilentExitZeroRunnerIsCrashedNotOk) {
  fs::path runner = dir_ / "silent-runner.sh";
  std::ofstream(runner) << "#!/bin/sh\nexit 0\n";
  fs::permissions(runner, fs::perms::owner_all);
  std::string spec = WriteSpec({{"name", "silent"},
                                {"models", {AddModel()}},
                                {"devices", {"local"}},
                                {"benchmark", {{"num_runs", 3}, {"num_threads", {1, 2}}}}});
  Outcome o = Dfarm({"sweep", spec, "--json"}, {"DFARM_RUNNER=" + runner.string()});
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  EXPECT_EQ(Count("status = 'crashed'"), 2) << o.err;
  EXPECT_EQ(Count("status = 'ok'"), 0);
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_), "");
}

// `dfarm devices` in another terminal (another database) while a sweep's job
// runs on `local`: its agent refuses the store the sweep's agent holds, the
// device is reported busy, nothing of the sweep is touched and every job of
// the sweep ends ok. A second sweep there (another database too) waits for the
// device and then runs: no attempt spent, no job of it infra. The runner waits
// for a file, so the first sweep's job is surely running meanwhile.
TEST_F(FaultsE2eTest, DevicesBesideASweepSeesBusyAndTouchesNothing) {
  const fs::path release = dir_ / "release";
  fs::path runner = dir_ / "waiting-runner.sh";
  std::ofstream(runner) << "#!/bin/sh\nwhile [ ! -e " << release.string()
                        << " ]; do sleep 0.02; done\nexec " << (BinDir() / "dfarm-runner").string()
                        << " \"$@\"\n";
  fs::permissions(runner, fs::perms::owner_all);
  std::string spec = WriteSpec({{"name", "beside"},
                                {"models", {AddModel()}},
                                {"devices", {"local"}},
                                {"benchmark", {{"num_runs", 3}, {"num_threads", {1, 2}}}}});
  Child dfarm =
      Child::Spawn(DfarmArgs({"sweep", spec, "--json"}, {"DFARM_RUNNER=" + runner.string()}),
                   (dir_ / "out").string(), (dir_ / "err").string());
  ASSERT_TRUE(WaitFor([&] { return Count("status = 'running'") >= 1; }, std::chrono::seconds(30)))
      << Slurp(dir_ / "err");

  std::vector<std::string> devices = DfarmArgs({"devices", "--device", "local", "--json"});
  devices[devices.size() - 3] = (dir_ / "other.db").string();  // --db: another terminal's
  Outcome seen = RunToEnd(devices, dir_ / "devices.out", dir_ / "devices.err");
  json d = json::parse(seen.out, nullptr, false);
  ASSERT_TRUE(d.is_object()) << seen.out << seen.err;
  ASSERT_EQ(d["devices"].size(), 1u) << seen.out;
  EXPECT_EQ(d["devices"][0]["state"], "busy") << seen.out;
  EXPECT_NE(d["devices"][0].value("reason", "").find("is in use by another dfarm-agent"),
            std::string::npos)
      << seen.out;

  std::vector<std::string> second = DfarmArgs({"sweep", spec, "--json"});
  const std::string second_db = (dir_ / "second.db").string();
  second[second.size() - 3] = second_db;
  Child waiting = Child::Spawn(second, (dir_ / "out2").string(), (dir_ / "err2").string());
  ASSERT_TRUE(
      WaitFor([&] { return Slurp(dir_ / "err2").find("waiting for it") != std::string::npos; },
              std::chrono::seconds(60)))
      << Slurp(dir_ / "err2");
  EXPECT_NE(Slurp(dir_ / "err2").find("device 'local' is busy"), std::string::npos)
      << Slurp(dir_ / "err2");

  std::ofstream(release) << "";
  Outcome o = Finish(dfarm, "out", "err");
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_EQ(Count("status = 'ok'"), 2) << o.err;
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_, {waiting.pid()}, false, /*healthy=*/true), "");
  Outcome after = Finish(waiting, "out2", "err2");
  EXPECT_EQ(after.code, 0) << after.out << after.err;
  EXPECT_EQ(QueryInt(second_db, "SELECT count(*) FROM jobs WHERE status = 'ok'"), 2) << after.err;
  EXPECT_EQ(QueryInt(second_db, "SELECT sum(attempts) FROM jobs"), 2) << after.err;
  EXPECT_EQ(CheckRunInvariants(second_db, 1, dir_, {}, false, /*healthy=*/true), "");
}

// The database on a full filesystem: the sweep fails cleanly (exit 3, the
// database named), the run recorded before stays readable and whole.
TEST_F(FaultsE2eTest, DatabaseOnAFullFilesystemFailsCleanly) {
  std::string why;
  fs::path small = SmallFilesystem("small", "768k", &why);
  if (small.empty()) GTEST_SKIP() << why;
  db_ = (small / "x.db").string();
  std::string model = AddModel();
  std::string first = WriteSpec({{"name", "fits"},
                                 {"models", {model}},
                                 {"devices", {"local"}},
                                 {"benchmark", {{"num_runs", 3}, {"num_threads", 1}}}},
                                "fits.json");
  Outcome fits = Dfarm({"sweep", first, "--json"});
  ASSERT_EQ(fits.code, 0) << fits.out << fits.err;
  // 20,000 samples per job: the filesystem fills mid-run.
  std::string big = WriteSpec(
      {{"name", "fills"},
       {"models", {model}},
       {"delegates", {"cpu", "xnnpack"}},
       {"devices", {"local"}},
       {"benchmark", {{"warmup_runs", 0}, {"num_runs", 20000}, {"num_threads", {1, 2, 3, 4}}}}},
      "fills.json");
  Outcome o = Dfarm({"sweep", big, "--json"});
  EXPECT_EQ(o.code, 3) << o.out << o.err;
  EXPECT_NE(o.err.find(db_), std::string::npos) << o.err;
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM jobs WHERE run_id = 1 AND status = 'ok'"), 1);
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_), "");
  auto integrity = QueryRows(db_, "PRAGMA integrity_check");
  ASSERT_EQ(integrity.size(), 1u);
  EXPECT_EQ(integrity[0][0], "ok");
  // What the failed sweep stored (if anything) is consistent too, bar jobs cut off.
  EXPECT_EQ(QueryInt(db_,
                     "SELECT count(*) FROM jobs j LEFT JOIN results r ON r.job_id = j.id "
                     "WHERE j.status = 'ok' AND r.job_id IS NULL"),
            0);
}

// An agent whose store is on a full filesystem: the push fails, the jobs end
// infra, dfarm reports it and the agent lives on.
TEST_F(FaultsE2eTest, AgentStoreOnAFullFilesystemIsInfra) {
  std::string why;
  fs::path small = SmallFilesystem("small", "128k", &why);
  if (small.empty()) GTEST_SKIP() << why;
  Agent a = StartAgent(small / "store", dir_ / "agent-a.log");
  ASSERT_NE(a.port, 0) << Slurp(dir_ / "agent-a.log");
  std::string spec = WriteSpec({{"name", "full-store"},
                                {"models", {face_.string()}},
                                {"devices", {a.uri()}},
                                {"benchmark", {{"num_runs", 3}, {"num_threads", {1, 2}}}},
                                {"scheduler", {{"retries", 1}, {"backoff_ms", 50}}}});
  Outcome o = Dfarm({"sweep", spec, "--json"});
  EXPECT_TRUE(o.code == 1 || o.code == 3) << o.out << o.err;
  EXPECT_EQ(Count("status = 'infra'"), 2) << o.err;
  const std::string agent_stat = Slurp("/proc/" + std::to_string(a.process->pid()) + "/stat");
  EXPECT_FALSE(agent_stat.empty() || agent_stat.find(") Z") != std::string::npos)
      << "the agent died: " << Slurp(dir_ / "agent-a.log");
  EXPECT_EQ(Slurp(dir_ / "agent-a.log").find("Segmentation"), std::string::npos);
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_, {a.process->pid()}), "");
}

// The checker itself sees what it is there to see: a wrong ok (another
// model's sha256), a job recorded twice, an ok without samples, and a process
// left behind naming the test's directory.
TEST_F(FaultsE2eTest, CheckRunInvariantsSeesWhatIsWrong) {
  std::string spec = WriteSpec({{"name", "checked"},
                                {"models", {AddModel()}},
                                {"devices", {"local"}},
                                {"benchmark", {{"num_runs", 3}, {"num_threads", {1, 2}}}}});
  Outcome o = Dfarm({"sweep", spec, "--json"});
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  ASSERT_EQ(CheckRunInvariants(db_, 1, dir_), "");

  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h,
                         "UPDATE jobs SET model_sha256 = printf('%064d', 0) WHERE id = 1;"
                         "DELETE FROM samples WHERE job_id = 2;"
                         "INSERT INTO jobs(run_id, job_key, model, model_path, model_sha256, "
                         "delegate, device, status) SELECT run_id, job_key, model, model_path, "
                         "model_sha256, delegate, device, 'running' FROM jobs WHERE id = 2;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(h);
  sqlite3_close(h);
  // An orphan: a copy of sleep(1) under dir_, started by a shell that exits.
  fs::copy_file("/bin/sleep", dir_ / "sleep");
  const std::string sleeper = (dir_ / "sleep").string();
  ASSERT_EQ(std::system(("/bin/sh -c '" + sleeper + " 30 >/dev/null 2>&1 &'").c_str()), 0);
  // Until the orphan has exec'd the copy, its command line is the shell's,
  // and a scan that reads it mid-exec sees none (CI saw the checker miss it).
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const std::string& s : StrayProcesses(dir_, {})) {
          if (s.find("): " + sleeper + " 30") != std::string::npos) return true;
        }
        return false;
      },
      std::chrono::seconds(5)))
      << "the orphan " << sleeper << " did not start";

  const std::string bad = CheckRunInvariants(db_, 1, dir_);
  for (const std::string& pid_line : StrayProcesses(dir_, {})) {
    ::kill(std::stoi(pid_line.substr(4)), SIGKILL);  // "pid N (parent P): ..."
  }
  EXPECT_NE(bad.find("ok job 1 has model sha256 0000"), std::string::npos) << bad;
  EXPECT_NE(bad.find("ok job 2 ran 3 times but has 0 samples"), std::string::npos) << bad;
  EXPECT_NE(bad.find("recorded 2 times"), std::string::npos) << bad;
  EXPECT_NE(bad.find("is 'running', not terminal"), std::string::npos) << bad;
  EXPECT_NE(bad.find("stray process"), std::string::npos) << bad;
  EXPECT_NE(bad.find(sleeper), std::string::npos) << bad;
  EXPECT_NE(bad.find("run 1 is 'finished' yet job 3 is 'running'"), std::string::npos) << bad;
  EXPECT_EQ(bad.find("wrong failure"), std::string::npos) << bad;

  // A healthy run's infra job is a wrong failure; a run that allows faults has none.
  ASSERT_EQ(sqlite3_open(db_.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "UPDATE jobs SET status = 'infra', error = 'cut' WHERE id = 3", nullptr,
                         nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(h);
  sqlite3_close(h);
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_).find("wrong failure"), std::string::npos);
  const std::string wrong = CheckRunInvariants(db_, 1, dir_, {}, false, /*healthy=*/true);
  EXPECT_NE(wrong.find("wrong failure: job 3 is 'infra' on a healthy device and runner: cut"),
            std::string::npos)
      << wrong;
}

// A runner that hangs (a shell script whose child sleeps) past the job's 1 s
// timeout: the job is timeout, and the child it started dies with it (the
// agent kills the runner's process group), so no process is left behind.
TEST_F(FaultsE2eTest, HangingRunnerTimesOutAndLeavesNothing) {
  fs::copy_file("/bin/sleep", dir_ / "hang-sleep");
  fs::path runner = dir_ / "hanging-runner.sh";
  std::ofstream(runner) << "#!/bin/sh\n" << (dir_ / "hang-sleep").string() << " 30\n";
  fs::permissions(runner, fs::perms::owner_all);
  std::string spec =
      WriteSpec({{"name", "hang"},
                 {"models", {AddModel()}},
                 {"devices", {"local"}},
                 {"benchmark", {{"num_runs", 3}, {"num_threads", 1}, {"timeout_s", 1}}}});
  Outcome o = Dfarm({"sweep", spec, "--json"}, {"DFARM_RUNNER=" + runner.string()});
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  EXPECT_EQ(Count("status = 'timeout'"), 1) << o.err;
  const std::string bad = CheckRunInvariants(db_, 1, dir_);
  for (const std::string& pid_line : StrayProcesses(dir_, {})) {
    ::kill(std::stoi(pid_line.substr(4)), SIGKILL);
  }
  EXPECT_EQ(bad, "");
}

// The agent SIGKILLed mid-upload (the proxy kills it half-way through the
// first large artifact): the device is quarantined, its jobs move to local and
// end ok there, and nothing is left running.
TEST_F(FaultsE2eTest, AgentKilledMidUploadJobsMove) {
  Agent a = StartAgent(dir_ / "store-a", dir_ / "agent-a.log");
  ASSERT_NE(a.port, 0) << Slurp(dir_ / "agent-a.log");
  Proxy proxy(a.port);
  ASSERT_NE(proxy.port(), 0);
  const pid_t agent = a.process->pid();
  proxy.CutOnceAfter(static_cast<int64_t>(fs::file_size(face_) / 2),
                     [agent] { ::kill(agent, SIGKILL); });
  std::string spec = WriteSpec(
      {{"name", "kill-mid-upload"},
       {"models", {face_.string()}},
       {"devices", {proxy.uri(), "local"}},
       {"benchmark", {{"num_runs", 3}, {"num_threads", {1, 2, 3, 4}}}},
       {"scheduler",
        {{"retries", 1}, {"backoff_ms", 50}, {"quarantine_after", 1}, {"failover", "same_abi"}}}});
  Outcome o = Dfarm({"sweep", spec, "--json"});
  EXPECT_TRUE(proxy.cut()) << "the proxy never cut the upload";
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["jobs"], 8);  // 2 devices x 4 thread counts
  EXPECT_EQ(s["ok"], 8);
  EXPECT_EQ(s["quarantined"], json::array({proxy.uri()}));
  EXPECT_EQ(Count("status = 'ok' AND device = '" + proxy.uri() + "'"), 0);
  EXPECT_EQ(Count("moved_from = '" + proxy.uri() + "' AND device = 'local' AND status = 'ok'"), 4);
  EXPECT_EQ(Count("moved_from = '" + proxy.uri() + "'"), s["moved"].get<int64_t>());
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_, {agent}), "");
}

}  // namespace
}  // namespace dfarm::e2e
