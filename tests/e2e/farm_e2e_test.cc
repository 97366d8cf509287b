// A farm on a real PostgreSQL server: three real
// `dfarm node` processes, each serving four real dfarm-agent processes and,
// where the machine allows it (root, `ip`, `nsenter`), each in a network
// namespace of its own that reaches the server over a veth pair (else all on
// loopback, also when DFARM_E2E_NO_NETNS is set; the test property "netns"
// says which). One sweep of device "any" is queued, one node is killed with
// SIGKILL while it holds claims (its agents stay up), and every job must end
// exactly once: its held jobs reaped and finished elsewhere. Also: a
// token-protected agent reached through a node, and the node's usage errors.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "reports/store/store.h"
#include "reports/store/testing/pg_server.h"
#include "tests/e2e/e2e_util.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using store::testing::PgServer;

// Rows of `sql` on `url` as text; one row {"ERROR: ..."} when it fails.
std::vector<std::vector<std::string>> PgRows(const std::string& url, const std::string& sql) {
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(url.c_str()), &PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return {{std::string("ERROR: connect: ") + PQerrorMessage(conn.get())}};
  }
  std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(conn.get(), sql.c_str()), &PQclear);
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    return {{std::string("ERROR: ") + PQresultErrorMessage(r.get())}};
  }
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    rows.emplace_back();
    for (int c = 0; c < PQnfields(r.get()); ++c) rows.back().push_back(PQgetvalue(r.get(), i, c));
  }
  return rows;
}

std::string PgValue(const std::string& url, const std::string& sql) {
  auto rows = PgRows(url, sql);
  return rows.empty() || rows[0].empty() ? "" : rows[0][0];
}

// Whether `pid` (our child) has exited: a zombie, not reaped yet.
bool Exited(pid_t pid) {
  const std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  return close == std::string::npos || stat.substr(close + 2, 1) == "Z";
}

// SIGTERM, then its exit code once it exited (-1: killed, or not within `timeout`).
int TermAndWait(Child& c, milliseconds timeout = seconds(30)) {
  ::kill(c.pid(), SIGTERM);
  if (!WaitFor([&] { return Exited(c.pid()); }, timeout)) {
    c.Kill(SIGKILL);
    return -1;
  }
  const int status = c.Wait();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Polls `pred` (a query) every 50 ms until it holds or `timeout` passes.
template <typename Pred>
bool Poll(Pred pred, milliseconds timeout) {
  return WaitFor(
      [&] {
        if (pred()) return true;
        std::this_thread::sleep_for(milliseconds(40));
        return false;
      },
      timeout);
}

// Network namespaces, each with a veth pair to ours: "10.231.S.1/24" on our
// side, .2 inside. Deleted on destruction (their veths go with them).
class Namespaces {
 public:
  struct Ns {
    std::string name;     // ip netns name
    std::string host_ip;  // our side of its veth
    std::string cidr;     // host_ip/24
    std::vector<std::string> prefix() const {
      return {"/usr/bin/nsenter", "--net=/run/netns/" + name, "--"};
    }
  };

  explicit Namespaces(fs::path scratch) : scratch_(std::move(scratch)) {}
  ~Namespaces() {
    for (const Ns& n : ns_) Ip({"netns", "del", n.name});
  }

  // Creates `count` namespaces; "" when done, else why not (and none is left).
  std::string Create(int count) {
    if (std::getenv("DFARM_E2E_NO_NETNS")) return "DFARM_E2E_NO_NETNS is set";
    if (::geteuid() != 0) return "not root";
    if (!fs::exists("/usr/bin/nsenter")) return "no /usr/bin/nsenter";
    const std::string pid = std::to_string(::getpid());
    for (int k = 0; k < count; ++k) {
      const std::string sub = "10.231." + std::to_string((::getpid() % 80) * 3 + k + 1);
      Ns n{"dfarm" + pid + "n" + std::to_string(k), sub + ".1", sub + ".1/24"};
      const std::string veth = "dfh" + pid + "n" + std::to_string(k);
      std::string why = Ip({"netns", "add", n.name});
      if (!why.empty()) return Undo(why);
      ns_.push_back(n);
      for (const std::vector<std::string>& step : std::vector<std::vector<std::string>>{
               {"link", "add", veth, "type", "veth", "peer", "name", "veth0", "netns", n.name},
               {"addr", "add", n.cidr, "dev", veth},
               {"link", "set", veth, "up"},
               {"-n", n.name, "addr", "add", sub + ".2/24", "dev", "veth0"},
               {"-n", n.name, "link", "set", "veth0", "up"},
               {"-n", n.name, "link", "set", "lo", "up"}}) {
        if (why = Ip(step); !why.empty()) return Undo(why);
      }
    }
    return "";
  }
  const std::vector<Ns>& ns() const { return ns_; }

 private:
  // Runs `ip args`; "" when it exited 0, else the command and its stderr.
  std::string Ip(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/sbin/ip"};
    argv.insert(argv.end(), args.begin(), args.end());
    if (!fs::exists(argv[0])) argv[0] = "/sbin/ip";
    if (!fs::exists(argv[0])) return "no ip(8)";
    Outcome o = RunToEnd(argv, scratch_ / "ip.out", scratch_ / "ip.err");
    if (o.code == 0) return "";
    std::string cmd = "ip";
    for (const std::string& a : args) cmd += " " + a;
    return "'" + cmd + "' failed: " + o.err.substr(0, o.err.find('\n'));
  }
  std::string Undo(const std::string& why) {
    for (const Ns& n : ns_) Ip({"netns", "del", n.name});
    ns_.clear();
    return why;
  }

  fs::path scratch_;
  std::vector<Ns> ns_;
};

class FarmE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << (BinDir() / exe) << " is not built";
    }
    std::string why;
    if (!store::testing::PgServerAvailable(&why)) GTEST_SKIP() << "no PostgreSQL here: " << why;
    dir_ = fs::temp_directory_path() /
           ("dfarm_farm_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (HasFailure()) {
      for (const auto& entry : fs::directory_iterator(dir_)) {
        if (entry.path().extension() == ".log" && entry.path().filename() != "agents.log") {
          std::string text = Slurp(entry.path());
          if (text.size() > 3000) text = "..." + text.substr(text.size() - 3000);
          std::cerr << "--- " << entry.path().filename() << ":\n" << text << "\n";
        }
      }
    }
    if (!dir_.empty() && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  // A server and a fresh database on it (`url_`).
  void StartServer(const store::testing::PgServerOptions& options = {}) {
    auto server = PgServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.message();
    server_ = std::move(*server);
    auto url = server_->CreateDatabase("farm");
    ASSERT_TRUE(url.ok()) << url.message();
    url_ = *url;
  }

  // A dfarm-agent on 127.0.0.1 (of the namespace `prefix` enters) with a free port.
  Agent StartAgentIn(const std::string& name, const std::vector<std::string>& prefix,
                     const std::vector<std::string>& extra_args = {"--insecure"}) {
    agent::AgentProcessOptions options;
    options.agent_binary = (BinDir() / "dfarm-agent").string();
    options.prefix = prefix;
    options.store_dir = (dir_ / ("agent-" + name)).string();
    options.extra_args = extra_args;
    options.log_file = (dir_ / "agents.log").string();
    Agent a;
    auto started = agent::AgentProcess::Start(options);
    if (!started) {
      ADD_FAILURE() << "agent " << name << ": " << started.message();
      return a;
    }
    a.process = std::move(*started);
    a.port = a.process->port();
    return a;
  }

  // `dfarm node` in the background, its stderr in <dir>/node-NAME.log.
  // $DFARM_E2E_NODE_CONNECTIONS: the --connections of every node whose
  // `extra` names none (to run the whole farm on one connection a node).
  Child StartNode(const std::string& name, const std::string& db,
                  const std::vector<std::string>& devices,
                  const std::vector<std::string>& extra = {},
                  const std::vector<std::string>& prefix = {}) {
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(),
                {(BinDir() / "dfarm").string(), "node", "--db", db, "--name", name, "--lease-s",
                 "4", "--heartbeat-s", "1", "--cache-dir", (dir_ / ("cache-" + name)).string()});
    for (const std::string& d : devices) argv.insert(argv.end(), {"--device", d});
    argv.insert(argv.end(), extra.begin(), extra.end());
    const char* connections = std::getenv("DFARM_E2E_NODE_CONNECTIONS");
    if (connections && *connections &&
        std::find(extra.begin(), extra.end(), "--connections") == extra.end()) {
      argv.insert(argv.end(), {"--connections", connections});
    }
    return Child::Spawn(argv, "", NodeLog(name).string());
  }
  fs::path NodeLog(const std::string& name) const { return dir_ / ("node-" + name + ".log"); }

  Outcome Dfarm(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {(BinDir() / "dfarm").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunToEnd(argv, dir_ / "dfarm.out", dir_ / "dfarm.err");
  }

  // A spec of `repeats` jobs of a real model on device `device`.
  std::string WriteSpec(const std::string& name, const std::string& device, int repeats,
                        int num_runs, const json& farm = nullptr) {
    json spec = {{"name", name},
                 {"models", {(fs::path(DFARM_MODELS_DIR) / kModel).string()}},
                 {"delegates", {{{"name", "cpu"}}}},
                 {"devices", {device}},
                 {"benchmark", {{"warmup_runs", 1}, {"num_runs", num_runs}, {"repeats", repeats}}}};
    if (!farm.is_null()) spec["farm"] = farm;
    fs::path p = dir_ / (name + ".json");
    std::ofstream(p) << spec.dump(2);
    return p.string();
  }

  // `dfarm sweep SPEC --db url_ --detach --json`: the run's id (0 on failure).
  int64_t Enqueue(const std::string& spec, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"sweep", spec, "--db", url_, "--detach", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    Outcome o = Dfarm(args);
    EXPECT_EQ(o.code, 0) << o.all();
    json doc = json::parse(o.out, nullptr, false);
    if (!doc.is_object() || !doc.contains("run_id")) {
      ADD_FAILURE() << o.all();
      return 0;
    }
    return doc["run_id"].get<int64_t>();
  }

  // Whether node `name` is registered and running.
  bool NodeRunning(const std::string& name) {
    return PgValue(url_, "SELECT state FROM nodes WHERE name = '" + name + "'") == "running";
  }

  bool ModelPresent() const { return fs::exists(fs::path(DFARM_MODELS_DIR) / kModel); }

  // A token file of mode 600 holding `c` 64 times.
  std::string WriteToken(const std::string& name, char c) {
    fs::path p = dir_ / name;
    std::ofstream(p) << std::string(64, c) << "\n";
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
    return p.string();
  }

  // A node of the farm of ThreeNodesTwelveAgentsSigkillLosesNothing.
  struct FarmNode {
    std::string name;
    std::vector<std::string> prefix;  // enters its network namespace; empty: ours
    std::string db;                   // the server as seen from there
    std::vector<Agent> agents;
    Child process;
  };

  // Four agents per node, then the nodes; returns once every node is
  // registered. The first node's four devices share one database
  // connection, the others' the default pool. The agents' ports differ over the whole farm: each
  // namespace has a loopback of its own, and a device is named by its URI.
  void StartFarm(std::vector<FarmNode>& nodes) {
    std::set<uint16_t> ports;
    for (FarmNode& n : nodes) {
      for (int tries = 0; n.agents.size() < 4 && tries < 12; ++tries) {
        Agent a = StartAgentIn(n.name + "-" + std::to_string(n.agents.size()), n.prefix);
        ASSERT_NE(a.port, 0);
        if (ports.insert(a.port).second) n.agents.push_back(std::move(a));
      }
      ASSERT_EQ(n.agents.size(), 4u);
      std::vector<std::string> devices;
      for (const Agent& a : n.agents) devices.push_back(a.uri());
      std::vector<std::string> extra;
      if (&n == &nodes.front()) extra = {"--connections", "1"};
      n.process = StartNode(n.name, n.db, devices, extra, n.prefix);
      ASSERT_GT(n.process.pid(), 0);
    }
    for (FarmNode& n : nodes) {
      ASSERT_TRUE(WaitFor([&] { return NodeRunning(n.name); }, seconds(20)))
          << n.name << " did not register: " << Slurp(NodeLog(n.name));
    }
    const fs::path first = NodeLog(nodes.front().name);
    EXPECT_TRUE(WaitFor(
        [&] { return Slurp(first).find(", 1 database connection(s)") != std::string::npos; },
        seconds(20)))
        << Slurp(first);
  }

  // Every job of `run` ended ok with one result and exactly one finished
  // claim; each job in `held` (claims `victim` held when it was killed) has
  // that claim reaped and was finished by another node. Returns the reaped count.
  int CheckEveryJobOnce(int64_t run, size_t jobs, const std::string& victim,
                        const std::set<int64_t>& held) {
    auto st = store::OpenStore(url_);
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st) return 0;
    auto rows = (*st)->ListJobs(run);
    EXPECT_TRUE(rows.ok()) << rows.message();
    if (!rows) return 0;
    EXPECT_EQ(rows->size(), jobs);
    size_t ok = 0;
    int reaped = 0;
    for (const store::JobRow& j : *rows) {
      ok += j.status == store::kJobOk;
      EXPECT_EQ(j.status, store::kJobOk) << "job " << j.id << ": " << j.error;
      auto claims = (*st)->ListJobClaims(j.id);
      EXPECT_TRUE(claims.ok()) << claims.message();
      if (!claims) continue;
      std::string finished_by, trail;
      int finished = 0;
      for (const store::JobClaimRow& c : *claims) {
        trail += " " + c.node + ":" + (c.outcome.empty() ? "held" : c.outcome);
        if (c.outcome == store::kClaimFinished) ++finished, finished_by = c.node;
        reaped += c.outcome == store::kClaimReaped;
        if (held.count(j.id) && c.node == victim) {
          EXPECT_EQ(c.outcome, store::kClaimReaped);
        }
      }
      EXPECT_EQ(finished, 1) << "job " << j.id << " claims:" << trail;
      if (held.count(j.id)) {
        EXPECT_NE(finished_by, victim) << "job " << j.id << ":" << trail;
      }
    }
    EXPECT_EQ(ok, jobs);
    const std::string r = std::to_string(run);
    EXPECT_EQ(PgValue(url_, "SELECT count(*) FROM jobs j WHERE j.run_id = " + r +
                                " AND (SELECT count(*) FROM results x WHERE x.job_id = j.id) <> 1"),
              "0")
        << "jobs of run " << r << " without exactly one results row";
    return reaped;
  }

  // SIGKILLs `victim` once every node finished a job of `run` and while
  // `victim` holds a claim; *held: the jobs it held when it died.
  void KillWhileHolding(FarmNode& victim, int64_t run, std::set<int64_t>* held) {
    const std::string r = std::to_string(run);
    const std::string finishers =
        "SELECT count(DISTINCT c.node) FROM job_claims c JOIN jobs j ON j.id = c.job_id WHERE "
        "j.run_id = " +
        r + " AND c.outcome = 'finished'";
    const std::string holding = "SELECT count(*) FROM jobs WHERE run_id = " + r +
                                " AND status = 'running' AND claimed_by = '" + victim.name + "'";
    const std::string ready_sql = "SELECT (" + finishers + ") = 3 AND (" + holding + ") > 0";
    ASSERT_TRUE(Poll([&] { return PgValue(url_, ready_sql) == "t"; }, seconds(90)))
        << PgValue(url_, ready_sql);
    victim.process.Kill(SIGKILL);
    for (const auto& row : PgRows(url_, "SELECT job_id FROM job_claims WHERE node = '" +
                                            victim.name + "' AND outcome = ''")) {
      held->insert(std::stoll(row.at(0)));
    }
    ASSERT_FALSE(held->empty()) << victim.name
                                << " finished its claims between the poll and the kill";
  }

  // The survivors (all but `victim`) stop cleanly on SIGTERM and are
  // recorded stopped; once the agents and the server are gone too, nothing
  // is left running.
  void StopAndCheckNothingLeft(std::vector<FarmNode>& nodes, const std::string& victim) {
    for (FarmNode& n : nodes) {
      if (n.name != victim) {
        EXPECT_EQ(TermAndWait(n.process), 0) << Slurp(NodeLog(n.name));
      }
    }
    auto st = store::OpenStore(url_);
    ASSERT_TRUE(st.ok()) << st.message();
    auto listed = (*st)->ListNodes();
    ASSERT_TRUE(listed.ok()) << listed.message();
    ASSERT_EQ(listed->size(), 3u);
    for (const store::NodeRow& n : *listed) {
      if (n.name != victim) {
        EXPECT_EQ(n.state, store::kNodeStopped) << n.name;
      }
    }
    st->reset();
    nodes.clear();  // stops the agents
    std::vector<std::string> stray;
    EXPECT_TRUE(WaitFor([&] { return (stray = StrayProcesses(dir_, {})).empty(); }, seconds(5)))
        << ::testing::PrintToString(stray);
    const std::string pg_dir = server_->dir();
    const int port = server_->port();
    server_.reset();
    EXPECT_FALSE(fs::exists(pg_dir));
    EXPECT_NE(
        PQping(("host=127.0.0.1 port=" + std::to_string(port) + " connect_timeout=1").c_str()),
        PQPING_OK);
  }

  static constexpr const char* kModel = "face_detection_short_range.tflite";
  fs::path dir_;
  std::unique_ptr<PgServer> server_;
  std::string url_;
};

TEST_F(FarmE2eTest, ThreeNodesTwelveAgentsSigkillLosesNothing) {
  if (!ModelPresent()) GTEST_SKIP() << kModel << " is absent from " << DFARM_MODELS_DIR;
  const auto start = std::chrono::steady_clock::now();
  constexpr size_t kJobs = 48;
  Namespaces netns(dir_);
  const std::string no_netns = netns.Create(3);
  RecordProperty("netns", no_netns.empty() ? "yes" : "no: " + no_netns);
  store::testing::PgServerOptions po;
  po.max_connections = 150;
  for (const Namespaces::Ns& n : netns.ns()) po.extra_listen.push_back(n.cidr);
  ASSERT_NO_FATAL_FAILURE(StartServer(po));
  std::vector<FarmNode> nodes(3);
  for (size_t k = 0; k < nodes.size(); ++k) {
    nodes[k].name = "n" + std::to_string(k);
    nodes[k].db = url_;
    if (!no_netns.empty()) continue;
    nodes[k].prefix = netns.ns()[k].prefix();
    nodes[k].db = "postgresql://dfarm@" + netns.ns()[k].host_ip + ":" +
                  std::to_string(server_->port()) + "/farm";
  }
  ASSERT_NO_FATAL_FAILURE(StartFarm(nodes));
  // 40 runs a job: each node holds claims for most of the run (four agents,
  // 48 jobs), so the kill finds the victim holding some whatever the speed.
  const int64_t run = Enqueue(WriteSpec("farm", "any", kJobs, 40));
  ASSERT_GT(run, 0);
  const std::string r = std::to_string(run);

  FarmNode& victim = nodes[1];
  std::set<int64_t> held;
  ASSERT_NO_FATAL_FAILURE(KillWhileHolding(victim, run, &held));
  const std::string status_sql = "SELECT status FROM runs WHERE id = " + r;
  ASSERT_TRUE(Poll([&] { return PgValue(url_, status_sql) == store::kRunFinished; }, seconds(180)))
      << "run " << r << " is '" << PgValue(url_, status_sql) << "'";
  const int reaped = CheckEveryJobOnce(run, kJobs, victim.name, held);
  EXPECT_GE(reaped, static_cast<int>(held.size()));

  ASSERT_NO_FATAL_FAILURE(StopAndCheckNothingLeft(nodes, victim.name));
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("wall_s", std::to_string(wall));
  std::cout << "farm: " << kJobs << " jobs, " << held.size() << " held by the killed node, "
            << reaped << " reaped, netns " << (no_netns.empty() ? "yes" : "no: " + no_netns) << ", "
            << wall << " s\n";
}

TEST_F(FarmE2eTest, RemoteAgentWithTokenThroughANode) {
  if (!ModelPresent()) GTEST_SKIP() << kModel << " is absent from " << DFARM_MODELS_DIR;
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const std::string good = WriteToken("good.token", 'g');
  const std::string wrong = WriteToken("wrong.token", 'w');
  Agent agent = StartAgentIn("remote", {}, {"--token-file", good});
  ASSERT_NE(agent.port, 0);
  const int64_t run = Enqueue(WriteSpec("remote", agent.uri(), 1, 5));
  ASSERT_GT(run, 0);

  // A wrong token: a clear error naming the device, and no claim.
  Child wrong_node = StartNode("wrong", url_, {agent.uri()}, {"--token-file", wrong});
  ASSERT_TRUE(
      Poll([&] { return Slurp(NodeLog("wrong")).find("token") != std::string::npos; }, seconds(20)))
      << Slurp(NodeLog("wrong"));
  std::this_thread::sleep_for(milliseconds(1500));  // a claim would come now if it were to
  const std::string log = Slurp(NodeLog("wrong"));
  EXPECT_NE(log.find("device '" + agent.uri() + "' is not reachable; claiming nothing for it"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("the agent refused the token from '" + wrong + "'"), std::string::npos) << log;
  auto st = store::OpenStore(url_);
  ASSERT_TRUE(st.ok()) << st.message();
  auto jobs = (*st)->ListJobs(run);
  ASSERT_TRUE(jobs.ok() && jobs->size() == 1u) << jobs.message();
  const int64_t job = jobs->front().id;
  EXPECT_EQ(jobs->front().status, store::kJobQueued);
  EXPECT_TRUE((*st)->ListJobClaims(job)->empty());
  EXPECT_EQ(TermAndWait(wrong_node), 0) << Slurp(NodeLog("wrong"));

  // The right token: the node runs it, and `dfarm sweep --resume` follows it to the end.
  Child right_node = StartNode("right", url_, {agent.uri()}, {"--token-file", good});
  ASSERT_TRUE(Poll(
      [&] {
        return PgValue(url_, "SELECT status FROM runs WHERE id = " + std::to_string(run)) ==
               store::kRunFinished;
      },
      seconds(60)))
      << Slurp(NodeLog("right"));
  Outcome o = Dfarm({"sweep", "--resume", std::to_string(run), "--db", url_, "--json"});
  EXPECT_EQ(o.code, 0) << o.all();
  json summary = json::parse(o.out, nullptr, false);
  EXPECT_TRUE(summary.is_object() && summary.value("ok", 0) == 1) << o.all();
  auto claims = (*st)->ListJobClaims(job);
  ASSERT_TRUE(claims.ok() && claims->size() == 1u) << claims.message();
  EXPECT_EQ(claims->front().node, "right");
  EXPECT_EQ(claims->front().outcome, store::kClaimFinished);
  EXPECT_EQ((*st)->GetJob(job)->status, store::kJobOk);
  EXPECT_EQ(TermAndWait(right_node), 0) << Slurp(NodeLog("right"));
}

// A device its node cannot reach is offline in `dfarm devices` (text and
// --json) with the reason and the node; once an agent listens there again it
// is online.
TEST_F(FarmE2eTest, AnUnreachableDeviceIsOfflineUntilItsAgentIsBack) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  Agent gone = StartAgentIn("gone", {});
  ASSERT_NE(gone.port, 0);
  const std::string uri = gone.uri();
  const uint16_t port = gone.port;
  gone.Kill();
  gone.process.reset();  // reaped: nothing listens on the port now
  Child node = StartNode("n1", url_, {uri});
  // The device's entry of `dfarm devices --json` (null when absent).
  auto entry = [&]() -> json {
    Outcome o = Dfarm({"devices", "--db", url_, "--json"});
    json doc = json::parse(o.out, nullptr, false);
    if (o.code != 0 || !doc.is_object()) return nullptr;
    for (const json& d : doc["devices"]) {
      if (d.value("name", "") == uri) return d;
    }
    return nullptr;
  };
  json d;
  ASSERT_TRUE(Poll(
      [&] {
        d = entry();
        return d.is_object() && d.value("state", "") == "offline";
      },
      seconds(60)))
      << d.dump() << Slurp(NodeLog("n1"));
  EXPECT_EQ(d.value("node", ""), "n1");
  const std::string reason = d.value("reason", "");
  EXPECT_EQ(reason.rfind("not reachable from node n1: ", 0), 0u) << reason;
  Outcome text = Dfarm({"devices", "--db", url_});
  EXPECT_EQ(text.code, 0) << text.all();
  EXPECT_NE(text.out.find(uri + "\toffline\tnode n1\tnot reachable from node n1: "),
            std::string::npos)
      << text.all();

  // An agent on the same port: the node reaches it within its 2 s retry.
  Child back = Child::Spawn(
      {(BinDir() / "dfarm-agent").string(), "--listen", "127.0.0.1:" + std::to_string(port),
       "--store", (dir_ / "agent-back").string(), "--insecure"},
      "", (dir_ / "agent-back.log").string());
  ASSERT_TRUE(Poll(
      [&] {
        d = entry();
        return d.is_object() && d.value("state", "") == "online";
      },
      seconds(60)))
      << d.dump() << Slurp(NodeLog("n1")) << Slurp(dir_ / "agent-back.log");
  EXPECT_EQ(d.value("health", ""), store::kDeviceOk);
  EXPECT_FALSE(d.contains("reason")) << d.dump();
  Outcome history = Dfarm({"devices", "--db", url_, "--json", "--history"});
  EXPECT_NE(history.out.find("reachable again from node n1"), std::string::npos) << history.all();
  EXPECT_EQ(TermAndWait(node), 0) << Slurp(NodeLog("n1"));
}

// One node, one device: an urgent run queued behind a long one has its job
// claimed before every job the long run still had queued; then `dfarm
// cancel` mid-run ends every job of the long run in one terminal state, the
// job in flight recording nothing after the cancel.
TEST_F(FarmE2eTest, AnUrgentRunOvertakesAndCancelEndsEveryJobOnce) {
  if (!ModelPresent()) GTEST_SKIP() << kModel << " is absent from " << DFARM_MODELS_DIR;
  ASSERT_NO_FATAL_FAILURE(StartServer());
  Agent agent = StartAgentIn("one", {});
  ASSERT_NE(agent.port, 0);
  Child node = StartNode("n", url_, {agent.uri()});
  ASSERT_TRUE(Poll([&] { return NodeRunning("n"); }, seconds(20))) << Slurp(NodeLog("n"));
  // The long run also has jobs for a device no node serves: it is still
  // running (those wait) whenever it is cancelled, however fast the node is.
  const std::string long_spec = WriteSpec("long", agent.uri(), 12, 300);
  json with_absent = json::parse(Slurp(long_spec));
  with_absent["devices"].push_back("tcp://127.0.0.1:1");
  std::ofstream(long_spec) << with_absent.dump(2);
  const int64_t long_run = Enqueue(long_spec);
  ASSERT_GT(long_run, 0);
  const std::string l = std::to_string(long_run);
  ASSERT_TRUE(Poll(
      [&] {
        return PgValue(url_,
                       "SELECT count(*) FROM job_claims c JOIN jobs j ON "
                       "j.id = c.job_id WHERE j.run_id = " +
                           l) != "0";
      },
      seconds(60)));
  const int64_t urgent = Enqueue(WriteSpec("urgent", agent.uri(), 1, 5), {"--priority", "9"});
  ASSERT_GT(urgent, 0);
  const std::string u = std::to_string(urgent);
  // The long run's jobs queued now: each must be claimed after the urgent one.
  const auto waiting = PgRows(
      url_, "SELECT id FROM jobs WHERE run_id = " + l + " AND status = 'queued' ORDER BY id");
  ASSERT_FALSE(waiting.empty());
  EXPECT_EQ(PgValue(url_, "SELECT priority FROM runs WHERE id = " + u), "9");
  Outcome listed = Dfarm({"runs", "--db", url_, "--json"});
  ASSERT_EQ(listed.code, 0) << listed.all();
  json runs = json::parse(listed.out, nullptr, false);
  ASSERT_TRUE(runs.is_object() && runs["runs"].size() == 2u) << listed.out;
  EXPECT_EQ(runs["runs"][0]["priority"], 5);
  EXPECT_EQ(runs["runs"][1]["priority"], 9);
  EXPECT_EQ(runs["runs"][1]["unserved_timeout_s"], 900);
  ASSERT_TRUE(Poll(
      [&] {
        return PgValue(url_, "SELECT status FROM runs WHERE id = " + u) == store::kRunFinished;
      },
      seconds(120)))
      << Slurp(NodeLog("n"));
  const std::string urgent_claim =
      PgValue(url_,
              "SELECT min(c.id) FROM job_claims c JOIN jobs j ON j.id = c.job_id WHERE "
              "j.run_id = " +
                  u);
  for (const auto& row : waiting) {
    const std::string first = PgValue(
        url_, "SELECT coalesce(min(id), 1000000000) FROM job_claims WHERE job_id = " + row[0]);
    EXPECT_GT(std::stoll(first), std::stoll(urgent_claim)) << "job " << row[0];
  }

  // Cancel the long run, mostly while a job of it runs on the node.
  Poll(
      [&] {
        return PgValue(url_, "SELECT count(*) FROM jobs WHERE run_id = " + l +
                                 " AND status = 'running'") == "1";
      },
      seconds(10));
  Outcome o = Dfarm({"cancel", l, "--db", url_, "--json"});
  ASSERT_EQ(o.code, 0) << o.all();
  json doc = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << o.out;
  EXPECT_EQ(doc["status"], "cancelled");
  EXPECT_EQ(doc["run_id"], long_run);
  const int64_t in_flight = doc["running"].get<int64_t>();
  EXPECT_LE(in_flight, 1);
  EXPECT_GE(doc["queued"].get<int64_t>(), 1);
  // The node finishes (or drops) the job in hand and records nothing for it.
  if (in_flight == 1) {
    ASSERT_TRUE(
        Poll([&] { return Slurp(NodeLog("n")).find("it is cancelled") != std::string::npos; },
             seconds(120)))
        << Slurp(NodeLog("n"));
  }
  EXPECT_EQ(PgValue(url_, "SELECT status FROM runs WHERE id = " + l), store::kRunCancelled);
  EXPECT_EQ(PgValue(url_, "SELECT count(*) FROM jobs WHERE run_id = " + l +
                              " AND status NOT IN ('ok', 'cancelled')"),
            "0");
  EXPECT_EQ(PgValue(url_, "SELECT count(*) FROM jobs j WHERE j.run_id = " + l +
                              " AND (SELECT count(*) FROM results x WHERE x.job_id = j.id) <> 1"),
            "0");
  // No figure of a cancelled job: its results row is the empty one the cancel wrote.
  EXPECT_EQ(PgValue(url_,
                    "SELECT count(*) FROM jobs j JOIN results x ON x.job_id = j.id WHERE "
                    "j.run_id = " +
                        l +
                        " AND j.status = 'cancelled' AND (x.exit_code <> -1 "
                        "OR x.mean_us IS NOT NULL OR EXISTS (SELECT 1 FROM samples s WHERE "
                        "s.job_id = j.id))"),
            "0");
  EXPECT_EQ(PgValue(url_,
                    "SELECT count(*) FROM job_claims c JOIN jobs j ON j.id = c.job_id "
                    "WHERE j.run_id = " +
                        l + " AND c.outcome = ''"),
            "0");

  // A finished run (`last` is the urgent one), the cancelled one again, an unknown one.
  o = Dfarm({"cancel", "last", "--db", url_});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("run " + u + " is finished"), std::string::npos) << o.err;
  o = Dfarm({"cancel", l, "--db", url_});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("nothing to cancel"), std::string::npos) << o.err;
  o = Dfarm({"cancel", "999", "--db", url_});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("no run 999"), std::string::npos) << o.err;
  EXPECT_EQ(PgValue(url_, "SELECT status FROM runs WHERE id = " + u), store::kRunFinished);
  EXPECT_EQ(TermAndWait(node), 0) << Slurp(NodeLog("n"));
}

// A run aimed at a device no node serves ends its jobs not_run, naming why,
// after the spec's farm.unserved_timeout_s; a priority out of range is a
// usage error naming the option or key, and queues nothing.
TEST_F(FarmE2eTest, UnservedJobsEndNotRunAndBadPrioritiesAreRefused) {
  if (!ModelPresent()) GTEST_SKIP() << kModel << " is absent from " << DFARM_MODELS_DIR;
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const std::string absent = "tcp://127.0.0.1:1";
  Outcome o = Dfarm({"sweep", WriteSpec("absent", absent, 2, 1, {{"unserved_timeout_s", 0}}),
                     "--db", url_, "--json"});
  EXPECT_EQ(o.code, 1) << o.all();
  json doc = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << o.all();
  EXPECT_EQ(doc["failed"], 2);
  EXPECT_EQ(doc["status"], store::kRunFinished);
  const std::string run = std::to_string(doc["run_id"].get<int64_t>());
  EXPECT_EQ(PgValue(url_, "SELECT count(*) FROM jobs WHERE run_id = " + run +
                              " AND status = 'not_run' AND error LIKE 'no live node served "
                              "device ''" +
                              absent + "''%unserved_timeout_s%'"),
            "2")
      << PgValue(url_, "SELECT error FROM jobs WHERE run_id = " + run);

  const std::string runs_before = PgValue(url_, "SELECT count(*) FROM runs");
  o = Dfarm({"sweep", WriteSpec("p", absent, 1, 1), "--db", url_, "--priority", "12"});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("--priority"), std::string::npos) << o.err;
  o = Dfarm({"sweep", WriteSpec("q", absent, 1, 1, {{"priority", 12}}), "--db", url_});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("farm.priority"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("out of range [0, 9]"), std::string::npos) << o.err;
  EXPECT_EQ(PgValue(url_, "SELECT count(*) FROM runs"), runs_before);
  o = Dfarm({"sweep", WriteSpec("r", "local", 1, 1), "--db", (dir_ / "x.db").string(), "--priority",
             "3"});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("--priority orders a farm's queue"), std::string::npos) << o.err;
}

// A farm's sweep records the jobs of a model whose labelled set is broken
// model_error at once, naming the file and line, and never queues them; the
// other model's jobs are queued as usual.
TEST_F(FarmE2eTest, ABrokenLabelledSetEndsOnlyItsModelsJobs) {
  if (!ModelPresent()) GTEST_SKIP() << kModel << " is absent from " << DFARM_MODELS_DIR;
  ASSERT_NO_FATAL_FAILURE(StartServer());
  fs::copy_file(fs::path(DFARM_MODELS_DIR) / kModel, dir_ / "labelled.tflite",
                fs::copy_options::overwrite_existing);
  std::ofstream(dir_ / "broken.csv") << "image,label\nnope.png,0\n";
  json spec = json::parse(
      std::ifstream(WriteSpec("labelled", "tcp://127.0.0.1:1", 1, 1, {{"unserved_timeout_s", 0}})));
  spec["models"].push_back(
      {{"path", (dir_ / "labelled.tflite").string()},
       {"eval",
        {{"dataset", (dir_ / "broken.csv").string()}, {"preprocess", {{"size", {8, 8}}}}}}});
  std::ofstream(dir_ / "labelled.json") << spec.dump(2);
  Outcome o = Dfarm({"sweep", (dir_ / "labelled.json").string(), "--db", url_, "--json"});
  EXPECT_EQ(o.code, 1) << o.all();
  EXPECT_NE(o.err.find("broken.csv line 2: image 'nope.png' is not a file"), std::string::npos)
      << o.err;
  json doc = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << o.all();
  const std::string run = std::to_string(doc["run_id"].get<int64_t>());
  EXPECT_EQ(PgValue(url_, "SELECT count(*) FROM jobs WHERE run_id = " + run +
                              " AND model = 'labelled.tflite' AND status = 'model_error' AND "
                              "attempts = 0 AND claimed_by = '' AND error = 'models[1] "
                              "''labelled.tflite''.eval.dataset: broken.csv line 2: image "
                              "''nope.png'' is not a file'"),
            "1")
      << PgValue(url_,
                 "SELECT string_agg(status || ' ' || error, '; ') FROM jobs WHERE run_id = " + run);
  // The other model's job waited for a node (none serves the device).
  EXPECT_EQ(PgValue(url_, "SELECT status FROM jobs WHERE run_id = " + run +
                              " AND model <> 'labelled.tflite'"),
            "not_run");
}

// On SQLite: `dfarm cancel` from another process cancels a run a sweep is
// running; the sweep records nothing more for it and exits 130.
TEST_F(FarmE2eTest, CancelOnSqliteStopsASweepInAnotherProcess) {
  if (!ModelPresent()) GTEST_SKIP() << kModel << " is absent from " << DFARM_MODELS_DIR;
  const std::string db = (dir_ / "local.db").string();
  Child sweep = Child::Spawn({(BinDir() / "dfarm").string(), "sweep",
                              WriteSpec("local", "local", 40, 300), "--db", db, "--json"},
                             (dir_ / "sweep.out").string(), (dir_ / "sweep.log").string());
  // Once a job ended (the run is under way), cancel it.
  ASSERT_TRUE(Poll(
      [&] {
        Outcome runs = Dfarm({"show", "last", "--db", db, "--json"});
        return runs.code == 0 && runs.out.find("\"status\": \"ok\"") != std::string::npos;
      },
      seconds(120)))
      << Slurp(dir_ / "sweep.log");
  Outcome o = Dfarm({"cancel", "last", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.all();
  json doc = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << o.out;
  EXPECT_GE(doc["queued"].get<int64_t>(), 1);
  ASSERT_TRUE(WaitFor([&] { return Exited(sweep.pid()); }, seconds(180)))
      << Slurp(dir_ / "sweep.log");
  const int status = sweep.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << Slurp(dir_ / "sweep.log");
  EXPECT_NE(Slurp(dir_ / "sweep.log").find("was cancelled (dfarm cancel)"), std::string::npos)
      << Slurp(dir_ / "sweep.log");
  auto st = store::OpenStore(db);
  ASSERT_TRUE(st.ok()) << st.message();
  auto run = (*st)->GetRun(doc["run_id"].get<int64_t>());
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->status, store::kRunCancelled);
  auto jobs = (*st)->ListJobs(run->id);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  size_t cancelled = 0;
  for (const store::JobRow& j : *jobs) {
    EXPECT_TRUE(j.status == store::kJobOk || j.status == store::kJobCancelled)
        << "job " << j.id << ": " << j.status;
    if (j.status == store::kJobCancelled) {
      ++cancelled;
      EXPECT_FALSE(j.metrics.has_value()) << "job " << j.id;
    }
  }
  EXPECT_EQ(cancelled,
            static_cast<size_t>(doc["queued"].get<int64_t>() + doc["running"].get<int64_t>()));
}

// Device classes: a sweep aimed at `any` whose spec puts both agents in one
// class runs once on one agent and once on the other; every trial of both
// runs is one cell per config ("@class:lab"), so `dfarm history` finds it
// without --device and the gate compares the two runs cell by cell.
TEST_F(FarmE2eTest, AnyRunsOnTwoDevicesOfAClassAreOneCellPerConfig) {
  if (!ModelPresent()) GTEST_SKIP() << kModel << " is absent from " << DFARM_MODELS_DIR;
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const json spec_doc = {
      {"name", "classes"},
      {"models", {(fs::path(DFARM_MODELS_DIR) / kModel).string()}},
      {"delegates", {{{"name", "cpu"}}}},
      {"devices", {"any"}},
      {"device_classes", {{"lab", {"tcp://127.0.0.1:*"}}}},
      {"benchmark",
       {{"warmup_runs", 1}, {"num_runs", 20}, {"repeats", 3}, {"num_threads", {1, 2}}}}};
  const fs::path spec = dir_ / "classes.json";
  std::ofstream(spec) << spec_doc.dump(2);
  // One run on each agent: each node serves one of them.
  std::vector<int64_t> runs;
  std::vector<std::string> uris;
  for (const std::string name : {"a", "b"}) {
    Agent agent = StartAgentIn(name, {});
    ASSERT_NE(agent.port, 0);
    uris.push_back(agent.uri());
    Child node = StartNode("node-" + name, url_, {agent.uri()});
    ASSERT_TRUE(WaitFor([&] { return NodeRunning("node-" + name); }, seconds(20)))
        << Slurp(NodeLog("node-" + name));
    Outcome o = Dfarm({"sweep", spec.string(), "--db", url_, "--json"});
    ASSERT_EQ(o.code, 0) << o.all();
    json doc = json::parse(o.out, nullptr, false);
    ASSERT_TRUE(doc.is_object() && doc.contains("run_id")) << o.all();
    runs.push_back(doc["run_id"].get<int64_t>());
    EXPECT_EQ(TermAndWait(node), 0) << Slurp(NodeLog("node-" + name));
  }
  auto st = store::OpenStore(url_);
  ASSERT_TRUE(st.ok()) << st.message();
  for (size_t k = 0; k < runs.size(); ++k) {
    auto jobs = (*st)->ListJobs(runs[k]);
    ASSERT_TRUE(jobs.ok()) << jobs.message();
    ASSERT_EQ(jobs->size(), 6u);
    for (const store::JobRow& j : *jobs) {
      EXPECT_EQ(j.status, store::kJobOk) << j.error;
      EXPECT_EQ(j.device, uris[k]);
      EXPECT_EQ(j.device_class, "lab");
      EXPECT_EQ(store::CellOf(j).device, "class:lab");
    }
  }
  auto cells = (*st)->ListCells();
  ASSERT_TRUE(cells.ok()) << cells.message();
  ASSERT_EQ(cells->size(), 2u);  // one per thread count, on both devices
  for (const store::Cell& c : *cells) EXPECT_EQ(c.device, "class:lab") << c.Label();
  st->reset();

  // No --device needed: one cell has threads 1, with both runs' trials.
  Outcome o = Dfarm({"history", "--db", url_, "--model", kModel, "--delegate", "cpu", "--threads",
                     "1", "--json"});
  ASSERT_EQ(o.code, 0) << o.all();
  json history = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(history.is_object()) << o.out;
  EXPECT_EQ(history["cell"]["device"], "class:lab");
  ASSERT_EQ(history["points"].size(), 2u) << o.out;
  for (const json& p : history["points"]) EXPECT_EQ(p["trials"], 3) << o.out;
  o = Dfarm({"history", "--db", url_, "--model", kModel, "--delegate", "cpu", "--threads", "2",
             "--device", "class:lab"});
  EXPECT_EQ(o.code, 0) << o.all();

  // The gate: run b against run a, one cell per config, each with a baseline.
  o = Dfarm({"gate", std::to_string(runs[1]), "--baseline", std::to_string(runs[0]), "--db", url_,
             "--format", "json"});
  EXPECT_NE(o.code, 2) << o.all();
  json gate = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(gate.is_object() && gate.contains("cells")) << o.all();
  ASSERT_EQ(gate["cells"].size(), 2u) << o.out;
  for (const json& c : gate["cells"]) {
    EXPECT_EQ(c["device"], "class:lab") << c.dump();
    EXPECT_NE(c["verdict"], "new") << c.dump();
    EXPECT_NE(c["verdict"], "missing") << c.dump();
    EXPECT_EQ(c["baseline_jobs"].size(), 3u) << c.dump();  // job ids, of both devices' runs
    EXPECT_EQ(c["candidate_jobs"].size(), 3u) << c.dump();
    EXPECT_EQ(c["latency"]["candidate_trials"], 3) << c.dump();
  }
}

TEST_F(FarmE2eTest, NodeUsageErrors) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  Outcome o = Dfarm({"node", "--db", url_, "--name", "x"});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("at least one --device"), std::string::npos) << o.err;

  // A live node "a" (its device unreachable: it waits for it).
  const std::string device = "tcp://127.0.0.1:1";
  Child a = StartNode("a", url_, {device});
  ASSERT_TRUE(Poll([&] { return NodeRunning("a"); }, seconds(20))) << Slurp(NodeLog("a"));
  o = Dfarm({"node", "--db", url_, "--name", "a", "--device", "tcp://127.0.0.1:2"});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("node name 'a' is in use by pid " + std::to_string(a.pid())),
            std::string::npos)
      << o.err;
  o = Dfarm({"node", "--db", url_, "--name", "b", "--device", device});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("device '" + device + "' is served by node 'a'"), std::string::npos)
      << o.err;
  EXPECT_EQ(TermAndWait(a), 0) << Slurp(NodeLog("a"));

  // Device "any" needs a farm: not on SQLite.
  const std::string spec = WriteSpec("any", "any", 1, 1);
  o = Dfarm({"sweep", spec, "--db", (dir_ / "x.db").string()});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("device \"any\" needs a farm"), std::string::npos) << o.err;

  o = Dfarm({"node", "--db", url_, "--name", "c", "--device", device, "--connections", "0"});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("--connections"), std::string::npos) << o.err;

  o = Dfarm({"node", "--help"});
  EXPECT_EQ(o.code, 0) << o.all();
  EXPECT_NE(o.out.find("SIGTERM"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("--connections"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace dfarm::e2e
