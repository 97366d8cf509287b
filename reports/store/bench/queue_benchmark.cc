// dfarm_queue_benchmark: the distributed queue at farm scale
// against one PostgreSQL server. Not a ctest: run it by hand.
//
//   dfarm_queue_benchmark --nodes 100 --agents 10 --jobs 20000 --job-ms 0
//       [--connections N] [--db URL] [--json]
//
// Without --db it starts its own throwaway server (PgServer, max_connections
// nodes*(connections+1)+20) and a fresh database. One queue run of --jobs
// jobs (target "any"). Each simulated node shares, like `dfarm node`, a
// StorePool of --connections N connections among its agents (device
// workers; default kNodeStoreConnections as `dfarm node`, 1: one shared by
// all, 0: one per agent), each claim and result borrowing one, first come
// first served, and has a further one for its heartbeat thread
// (NodeHeartbeat + ReapExpiredClaims every second). Each agent is a thread: ClaimJob -> sleep
// --job-ms -> RecordJobResult (ok, metrics, --samples samples, under its claim_id) until a claim
// finds nothing. Prints throughput, claim and record latency (the wait for the node's connection
// and the database call apart), what the server's backends waited on (pg_stat_activity, sampled
// every 50 ms), the CPU seconds of server and client, and checks that every job ended ok with
// exactly one finished claim (exit 1 otherwise, or on any error).
#include <libpq-fe.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "reports/store/store.h"
#include "reports/store/store_pool.h"
#include "reports/store/testing/pg_server.h"

namespace dfarm::store::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int nodes = 100;
  int agents = 10;
  int connections = kNodeStoreConnections;  // per node for its agents; 0: one per agent
  int64_t jobs = 20000;
  int job_ms = 0;
  int samples = 50;
  std::string db;
  bool json = false;
};

double MsSince(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// One call's latency: waiting for the node's connection, then the database call.
struct Split {
  std::vector<double> wait_ms, db_ms, total_ms;
  void Add(Clock::time_point t0, Clock::time_point t1, Clock::time_point t2) {
    wait_ms.push_back(MsSince(t0, t1));
    db_ms.push_back(MsSince(t1, t2));
    total_ms.push_back(MsSince(t0, t2));
  }
  void Merge(const Split& o) {
    wait_ms.insert(wait_ms.end(), o.wait_ms.begin(), o.wait_ms.end());
    db_ms.insert(db_ms.end(), o.db_ms.begin(), o.db_ms.end());
    total_ms.insert(total_ms.end(), o.total_ms.begin(), o.total_ms.end());
  }
};

struct Tally {
  Split claim, record;
  int64_t done = 0, empty = 0, errors = 0;
  std::string first_error;
  void Fail(const std::string& what) {
    if (errors++ == 0) first_error = what;
  }
};

struct Node {
  std::string name;
  std::unique_ptr<StorePool> pool;   // the agents' connections, as `dfarm node` shares them
  std::unique_ptr<Store> heartbeat;  // the heartbeat thread's own
  Tally hb;                          // heartbeat errors, reaped jobs in done
  std::vector<double> hb_ms;
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

// ---- libpq helpers: sampling, statistics, verification ----

class Pg {
 public:
  explicit Pg(const std::string& url) : c_(PQconnectdb(url.c_str())) {}
  ~Pg() { PQfinish(c_); }
  bool ok() const { return PQstatus(c_) == CONNECTION_OK; }
  std::string error() const { return PQerrorMessage(c_); }
  // Rows of `sql`, each a vector of text fields; empty on error (printed).
  std::vector<std::vector<std::string>> Query(const std::string& sql) {
    std::vector<std::vector<std::string>> rows;
    PGresult* r = PQexec(c_, sql.c_str());
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      std::cerr << "query failed: " << PQerrorMessage(c_) << sql << "\n";
    } else {
      for (int i = 0; i < PQntuples(r); ++i) {
        rows.emplace_back();
        for (int j = 0; j < PQnfields(r); ++j) rows.back().push_back(PQgetvalue(r, i, j));
      }
    }
    PQclear(r);
    return rows;
  }
  int64_t Int(const std::string& sql) {
    auto rows = Query(sql);
    return rows.empty() || rows[0].empty() ? -1 : std::stoll(rows[0][0]);
  }

 private:
  PGconn* c_;
};

// utime + stime of a process in seconds (0 when it is not ours to read).
double ProcCpuSeconds(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ServerCpuSeconds(const std::vector<int>& pids) {
  double s = 0;
  for (int pid : pids) s += ProcCpuSeconds(pid);
  return s;
}

double ClientCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// What the server's active backends were doing, sampled until stop.
struct ActivitySampler {
  std::map<std::string, int64_t> waits;       // "type:event" (CPU when none) -> samples
  std::map<std::string, int64_t> statements;  // "type:event statement" of lock waits -> samples
  int64_t samples = 0, active = 0;
  std::atomic<bool> stop{false};

  void Run(const std::string& url) {
    Pg pg(url);
    if (!pg.ok()) return;
    while (!stop) {
      auto rows = pg.Query(
          "SELECT coalesce(wait_event_type, 'CPU'), coalesce(wait_event, 'running'), count(*), "
          "left(regexp_replace(query, '\\s+', ' ', 'g'), 60) FROM pg_stat_activity WHERE "
          "datname = current_database() AND state = 'active' AND pid <> pg_backend_pid() "
          "GROUP BY 1, 2, 4");
      ++samples;
      for (const auto& r : rows) {
        waits[r[0] + ":" + r[1]] += std::stoll(r[2]);
        if (r[0] == "Lock" || r[0] == "LWLock")
          statements[r[0] + ":" + r[1] + " " + r[3]] += std::stoll(r[2]);
        active += std::stoll(r[2]);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
};

// ---- the simulated farm ----

JobOutcome MakeOutcome(int64_t claim_id, int samples) {
  JobOutcome o;
  o.status = kJobOk;
  o.exit_code = 0;
  o.wall_ms = 123.4;
  o.claim_id = claim_id;
  JobMetrics m;
  m.mean_us = 1000;
  m.std_us = 10;
  m.min_us = 980;
  m.max_us = 1100;
  m.p50_us = 999;
  m.p90_us = 1020;
  m.p99_us = 1090;
  m.init_us = 5000;
  m.first_us = 1500;
  m.num_runs = samples;
  m.threads_used = 4;
  o.metrics = m;
  for (int i = 0; i < samples; ++i) o.samples_us.push_back(1000.0 + i % 7);
  o.runner_json = R"({"status":"ok"})";
  return o;
}

void RunAgent(Node* node, int agent, int job_ms, int samples, Tally* t) {
  StorePool& pool = *node->pool;
  DeviceTraits dev{node->name + "/agent-" + std::to_string(agent),
                   "arm64-v8a",
                   "Android 14",
                   "Qualcomm SM8550",
                   int64_t{8} << 30,
                   {"lab"},
                   /*model=*/""};
  for (;;) {
    const auto t0 = Clock::now();
    Clock::time_point t1, t2;
    auto claimed = pool.Call([&](Store& s) {
      t1 = Clock::now();
      auto r = s.ClaimJob(node->name, dev, 30);
      t2 = Clock::now();
      return r;
    });
    if (!claimed.ok()) return t->Fail("claim: " + claimed.message());
    if (!claimed->has_value()) {
      ++t->empty;
      return;
    }
    t->claim.Add(t0, t1, t2);
    if (job_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(job_ms));
    const JobOutcome o = MakeOutcome((*claimed)->claim_id, samples);
    const auto r0 = Clock::now();
    Clock::time_point r1, r2;
    auto recorded = pool.Call([&](Store& s) {
      r1 = Clock::now();
      auto r = s.RecordJobResult((*claimed)->id, o);
      r2 = Clock::now();
      return r;
    });
    if (!recorded.ok()) {
      t->Fail("record job " + std::to_string((*claimed)->id) + ": " + recorded.message());
      continue;
    }
    t->record.Add(r0, r1, r2);
    ++t->done;
  }
}

struct Stopper {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  void Stop() {
    std::lock_guard l(mu);
    stop = true;
    cv.notify_all();
  }
  // Sleeps up to ms; true when stopped.
  bool Wait(int ms) {
    std::unique_lock l(mu);
    return cv.wait_for(l, std::chrono::milliseconds(ms), [this] { return stop; });
  }
};

void RunHeartbeat(Node* node, Stopper* stopper) {
  while (!stopper->Wait(1000)) {
    const auto t0 = Clock::now();
    auto held = node->heartbeat->NodeHeartbeat(node->name, kNodeRunning, 30);
    if (!held.ok()) node->hb.Fail("heartbeat: " + held.message());
    auto reaped = node->heartbeat->ReapExpiredClaims(3);
    if (!reaped.ok()) node->hb.Fail("reap: " + reaped.message());
    if (reaped.ok()) node->hb.done += static_cast<int64_t>(reaped->size());
    node->hb_ms.push_back(MsSince(t0, Clock::now()));
  }
}

Result<int64_t> QueueJobs(Store& store, int64_t jobs) {
  auto run = store.CreateRun("queue-benchmark", "{}");
  if (!run.ok()) return run.error();
  if (auto r = store.SetRunMode(*run, kRunModeQueue); !r.ok()) return r.error();
  constexpr int64_t kBatch = 1000;
  for (int64_t first = 0; first < jobs; first += kBatch) {
    std::vector<JobRow> batch;
    for (int64_t i = first; i < std::min(jobs, first + kBatch); ++i) {
      JobRow j;
      j.job_key = "key-" + std::to_string(i);
      j.model = "m" + std::to_string(i % 10) + ".tflite";
      j.model_path = "/models/" + j.model;
      j.model_sha256 = std::string(64, 'a');
      j.delegate = "cpu";
      j.device = "planned";
      j.target = kTargetAny;
      j.payload = R"({"model":")" + j.model + R"(","threads":4})";
      batch.push_back(std::move(j));
    }
    if (auto ids = store.AddJobs(*run, batch); !ids.ok()) return ids.error();
  }
  return *run;
}

// The connections a node's agents share: --connections, 0: one per agent.
int PoolSize(const Options& opt) { return opt.connections > 0 ? opt.connections : opt.agents; }

// Opens the nodes' connections (PoolSize + 1 each) and registers the nodes.
Result<void> OpenNodes(const std::string& url, int pool_size,
                       std::vector<std::unique_ptr<Node>>& nodes) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto n = std::make_unique<Node>();
    n->name = "node-" + std::to_string(i);
    n->pool = std::make_unique<StorePool>([url] { return OpenStore(url); }, pool_size);
    if (auto r = n->pool->Fill(); !r.ok()) return r.error();
    auto b = OpenStore(url);
    if (!b.ok()) return b.error();
    n->heartbeat = std::move(*b);
    NodeRow row{n->name, "bench-host", static_cast<int64_t>(i), NowIso8601(), 0, 0, "", {}};
    if (auto r = n->heartbeat->RegisterNode(row); !r.ok()) return r.error();
    nodes[i] = std::move(n);
  }
  return Ok();
}

struct Figures {
  Tally agents;
  std::vector<double> hb_ms;
  int64_t hb_errors = 0, reaped = 0;
  std::string hb_error;
  double wall_s = 0, server_cpu_s = 0, client_cpu_s = 0;
};

// Runs the agents and heartbeats until the queue is empty.
Figures RunFarm(const Options& opt, std::vector<std::unique_ptr<Node>>& nodes,
                const std::vector<int>& backend_pids) {
  Figures f;
  Stopper stopper;
  std::vector<Tally> tallies(static_cast<size_t>(opt.nodes * opt.agents));
  std::vector<std::thread> hb, agents;
  const double server0 = ServerCpuSeconds(backend_pids), client0 = ClientCpuSeconds();
  const auto start = Clock::now();
  for (auto& n : nodes) hb.emplace_back(RunHeartbeat, n.get(), &stopper);
  for (int i = 0; i < opt.nodes; ++i) {
    for (int a = 0; a < opt.agents; ++a) {
      agents.emplace_back(RunAgent, nodes[i].get(), a, opt.job_ms, opt.samples,
                          &tallies[static_cast<size_t>(i * opt.agents + a)]);
    }
  }
  for (auto& t : agents) t.join();
  f.wall_s = MsSince(start, Clock::now()) / 1000.0;
  f.server_cpu_s = ServerCpuSeconds(backend_pids) - server0;
  f.client_cpu_s = ClientCpuSeconds() - client0;
  stopper.Stop();
  for (auto& t : hb) t.join();
  for (const Tally& t : tallies) {
    f.agents.claim.Merge(t.claim);
    f.agents.record.Merge(t.record);
    f.agents.done += t.done;
    f.agents.empty += t.empty;
    if (t.errors > 0 && f.agents.errors == 0) f.agents.first_error = t.first_error;
    f.agents.errors += t.errors;
  }
  for (auto& n : nodes) {
    f.hb_ms.insert(f.hb_ms.end(), n->hb_ms.begin(), n->hb_ms.end());
    if (n->hb.errors > 0 && f.hb_errors == 0) f.hb_error = n->hb.first_error;
    f.hb_errors += n->hb.errors;
    f.reaped += n->hb.done;
  }
  return f;
}

// ---- output ----

struct Out {
  std::vector<std::pair<std::string, std::string>> kv;
  void Add(const std::string& k, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    std::string s = buf;
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    kv.emplace_back(k, s);
  }
  void AddInt(const std::string& k, int64_t v) { kv.emplace_back(k, std::to_string(v)); }
  void AddStr(const std::string& k, const std::string& v) {
    std::string q = "\"";
    for (char c : v) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    kv.emplace_back(k, q + "\"");
  }
  void AddLatency(const std::string& k, const std::vector<double>& v) {
    Add(k + "_p50_ms", Pct(v, 50));
    Add(k + "_p90_ms", Pct(v, 90));
    Add(k + "_p99_ms", Pct(v, 99));
    Add(k + "_max_ms", v.empty() ? 0 : *std::max_element(v.begin(), v.end()));
  }
  void Print(bool json) const {
    if (!json) {
      for (const auto& [k, v] : kv) std::cout << k << " " << v << "\n";
      return;
    }
    std::cout << "{";
    for (size_t i = 0; i < kv.size(); ++i) {
      std::cout << (i ? ", " : "") << "\"" << kv[i].first << "\": " << kv[i].second;
    }
    std::cout << "}\n";
  }
};

void AddFigures(Out& out, const Options& opt, const Figures& f) {
  out.AddInt("nodes", opt.nodes);
  out.AddInt("agents_per_node", opt.agents);
  out.AddInt("connections_per_node", PoolSize(opt));
  out.AddInt("jobs", opt.jobs);
  out.AddInt("job_ms", opt.job_ms);
  out.Add("wall_s", f.wall_s);
  out.Add("throughput_jobs_per_s",
          f.wall_s > 0 ? static_cast<double>(f.agents.done) / f.wall_s : 0);
  out.AddLatency("claim", f.agents.claim.total_ms);
  out.AddLatency("claim_wait", f.agents.claim.wait_ms);
  out.AddLatency("claim_db", f.agents.claim.db_ms);
  out.AddLatency("record", f.agents.record.total_ms);
  out.AddLatency("record_wait", f.agents.record.wait_ms);
  out.AddLatency("record_db", f.agents.record.db_ms);
  out.AddLatency("heartbeat", f.hb_ms);
  out.AddInt("jobs_done", f.agents.done);
  out.AddInt("claims_found_nothing", f.agents.empty);
  out.AddInt("reaped", f.reaped);
  out.AddInt("errors", f.agents.errors + f.hb_errors);
  if (!f.agents.first_error.empty()) out.AddStr("first_error", f.agents.first_error);
  if (!f.hb_error.empty()) out.AddStr("first_heartbeat_error", f.hb_error);
  out.Add("server_cpu_s", f.server_cpu_s);
  out.Add("client_cpu_s", f.client_cpu_s);
}

void AddActivity(Out& out, const ActivitySampler& s) {
  out.AddInt("activity_samples", s.samples);
  out.Add("active_backends_mean",
          s.samples ? static_cast<double>(s.active) / static_cast<double>(s.samples) : 0);
  std::vector<std::pair<int64_t, std::string>> top;
  for (const auto& [k, n] : s.waits) top.emplace_back(n, k);
  std::sort(top.rbegin(), top.rend());
  std::string line;
  for (size_t i = 0; i < top.size() && i < 6; ++i) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s%s=%.0f%%", i ? " " : "", top[i].second.c_str(),
                  s.active ? 100.0 * static_cast<double>(top[i].first) / s.active : 0.0);
    line += buf;
  }
  out.AddStr("backend_states", line);
  std::vector<std::pair<int64_t, std::string>> stmts;
  for (const auto& [k, n] : s.statements) stmts.emplace_back(n, k);
  std::sort(stmts.rbegin(), stmts.rend());
  for (size_t i = 0; i < stmts.size() && i < 5; ++i) {
    out.AddStr(
        "lock_wait_" + std::to_string(i + 1),
        std::to_string(s.active ? 100 * stmts[i].first / s.active : 0) + "% " + stmts[i].second);
  }
}

// Every job ok, with exactly one claim and that one finished; the run finished.
bool Verify(Pg& pg, int64_t run, int64_t jobs, int samples, Out& out) {
  const std::string r = std::to_string(run);
  const int64_t ok = pg.Int("SELECT count(*) FROM jobs WHERE run_id = " + r +
                            " AND status = 'ok' AND claimed_by = '' AND lease_until = 0");
  const int64_t once = pg.Int(
      "SELECT count(*) FROM (SELECT c.job_id FROM job_claims c JOIN jobs j ON j.id = c.job_id "
      "WHERE j.run_id = " +
      r + " GROUP BY c.job_id HAVING count(*) = 1 AND bool_and(c.outcome = 'finished')) x");
  const int64_t sample_rows =
      pg.Int("SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job_id WHERE j.run_id = " + r);
  const auto status = pg.Query("SELECT status FROM runs WHERE id = " + r);
  const bool finished = !status.empty() && status[0][0] == kRunFinished;
  out.AddInt("verified_jobs_ok", ok);
  out.AddInt("verified_jobs_one_finished_claim", once);
  out.AddInt("verified_sample_rows", sample_rows);
  out.AddStr("verified_run_status", status.empty() ? "" : status[0][0]);
  return ok == jobs && once == jobs && sample_rows == jobs * samples && finished;
}

// The server's counters on the jobs table and its indexes, after the run.
void AddTableStats(Pg& pg, Out& out, int64_t claims) {
  auto t = pg.Query(
      "SELECT seq_scan, idx_scan, n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables "
      "WHERE relname = 'jobs'");
  if (!t.empty()) {
    out.AddInt("jobs_seq_scan", std::stoll(t[0][0]));
    out.AddInt("jobs_idx_scan", std::stoll(t[0][1]));
    out.Add("jobs_idx_scan_per_claim", claims ? std::stod(t[0][1]) / claims : 0);
    out.AddInt("jobs_tup_upd", std::stoll(t[0][2]));
    out.AddInt("jobs_tup_hot_upd", std::stoll(t[0][3]));
  }
  for (const char* idx : {"jobs_pkey", "jobs_queued"}) {
    auto i =
        pg.Query("SELECT idx_scan, idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = '" +
                 std::string(idx) + "'");
    if (i.empty()) continue;
    out.AddInt(std::string(idx) + "_scans", std::stoll(i[0][0]));
    out.Add(std::string(idx) + "_tup_read_per_claim", claims ? std::stod(i[0][1]) / claims : 0);
  }
  out.AddInt("xact_commit", pg.Int("SELECT xact_commit FROM pg_stat_database WHERE datname = "
                                   "current_database()"));
}

std::vector<int> BackendPids(Pg& pg) {
  std::vector<int> pids;
  for (const auto& r : pg.Query("SELECT pid FROM pg_stat_activity WHERE datname = "
                                "current_database() AND pid <> pg_backend_pid()")) {
    pids.push_back(std::stoi(r[0]));
  }
  return pids;
}

int Bench(const Options& opt, const std::string& url) {
  auto setup = OpenStore(url);
  if (!setup.ok()) return std::cerr << "open " << url << ": " << setup.message() << "\n", 1;
  auto run = QueueJobs(**setup, opt.jobs);
  if (!run.ok()) return std::cerr << "queue jobs: " << run.message() << "\n", 1;
  std::vector<std::unique_ptr<Node>> nodes(static_cast<size_t>(opt.nodes));
  const auto open0 = Clock::now();
  if (auto r = OpenNodes(url, PoolSize(opt), nodes); !r.ok()) {
    return std::cerr << "open nodes: " << r.message() << "\n", 1;
  }
  std::cerr << "queued " << opt.jobs << " jobs; opened " << (PoolSize(opt) + 1) * opt.nodes
            << " connections in " << MsSince(open0, Clock::now()) << " ms; running\n";
  Pg pg(url);
  if (!pg.ok()) return std::cerr << "libpq: " << pg.error() << "\n", 1;
  pg.Query("SELECT pg_stat_reset()");
  ActivitySampler sampler;
  std::thread sampling([&] { sampler.Run(url); });
  const Figures f = RunFarm(opt, nodes, BackendPids(pg));
  sampler.stop = true;
  sampling.join();
  nodes.clear();  // closes the connections: their statistics reach the server
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  Out out;
  AddFigures(out, opt, f);
  AddActivity(out, sampler);
  AddTableStats(pg, out, f.agents.done);
  const bool verified = Verify(pg, *run, opt.jobs, opt.samples, out);
  out.AddStr("verified", verified ? "yes" : "NO");
  out.Print(opt.json);
  return verified && f.agents.errors == 0 && f.hb_errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dfarm::store::bench

int main(int argc, char** argv) {
  using dfarm::store::bench::Options;
  Options opt;
  CLI::App app{"The distributed queue at farm scale on one PostgreSQL server"};
  app.add_option("--nodes", opt.nodes, "simulated dfarm node processes")
      ->check(CLI::Range(1, 5000));
  app.add_option("--agents", opt.agents, "agents (devices) per node")->check(CLI::Range(1, 1000));
  app.add_option("--connections", opt.connections,
                 "database connections per node its agents share, each call borrowing one, as "
                 "dfarm node --connections (1: one shared by all; 0: one per agent)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--jobs", opt.jobs, "jobs in the queue run")->check(CLI::Range(1, 100000000));
  app.add_option("--job-ms", opt.job_ms, "simulated work per job (ms)")
      ->check(CLI::Range(0, 600000));
  app.add_option("--samples", opt.samples, "samples recorded per job")
      ->check(CLI::Range(0, 100000));
  app.add_option("--db", opt.db, "PostgreSQL URL (default: a throwaway server of our own)");
  app.add_flag("--json", opt.json, "one JSON object instead of KEY VALUE lines");
  CLI11_PARSE(app, argc, argv);
  if (!opt.db.empty()) return dfarm::store::bench::Bench(opt, opt.db);
  std::string why;
  if (!dfarm::store::testing::PgServerAvailable(&why)) {
    std::cerr << "no PostgreSQL server can be started here: " << why << "\n";
    return 1;
  }
  dfarm::store::testing::PgServerOptions pg_options;
  pg_options.max_connections = opt.nodes * (dfarm::store::bench::PoolSize(opt) + 1) + 20;
  auto server = dfarm::store::testing::PgServer::Start(pg_options);
  if (!server.ok()) return std::cerr << server.message() << "\n", 1;
  auto url = (*server)->CreateDatabase("queue_bench");
  if (!url.ok()) return std::cerr << url.message() << "\n", 1;
  return dfarm::store::bench::Bench(opt, *url);
}
