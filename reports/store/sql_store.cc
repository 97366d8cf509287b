// The Store over the SQL layer (sql.h): one implementation for SQLite and
// PostgreSQL. The schema and its migrations are in schema.cc.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "reports/store/schema.h"
#include "reports/store/sql.h"
#include "reports/store/sql_profile.h"
#include "reports/store/sql_queue.h"
#include "reports/store/store.h"

namespace dfarm::store {
namespace {

using runner::Number;
using runner::ToDouble;
using sql::Column;
using sql::Conn;
using sql::Dialect;
using sql::FiniteOrNull;
using sql::Stmt;
using sql::Transaction;
using sql::Value;

// The columns ReadJob reads, FROM jobs j and its result r.
std::string JobColumns(Dialect d) {
  return "j.id, j.run_id, j.job_key, j.model, j.model_path, j.model_sha256, j.delegate, "
         "j.delegate_options, j.device, j.status, j.error, j.wall_ms, "
         "r.init_us, r.first_us, r.warmup_mean_us, r.mean_us, r.std_us, r.min_us, r.max_us, "
         "r.p50_us, r.p90_us, r.p99_us, r.num_runs, r.peak_rss_bytes, r.arena_bytes, "
         "j.num_threads, j.attempts, j.moved_from, r.partitions, "
         "(SELECT count(*) FROM placement p WHERE p.job_id = j.id), "
         "(SELECT count(*) FROM placement p WHERE p.job_id = j.id AND p.delegate <> 'cpu'), "
         "(SELECT " +
         sql::GroupConcat(d, "p.delegate", "','", true) +
         " FROM placement p WHERE p.job_id = j.id AND p.delegate <> 'cpu'), "
         "coalesce(r.started_hot, 0), coalesce(r.throttled, 0), coalesce(r.state_note, ''), "
         "coalesce(r.threads_used, 0), "
         "(SELECT count(*) FROM placement p WHERE p.job_id = j.id AND p.folded <> 0), "
         "j.trial, j.runner, j.runner_sha256, j.target, j.payload, j.claimed_by, j.claim_id, "
         "j.runner_kind, j.runner_version, coalesce(r.noisy, 0), r.energy_mj, "
         "r.init_cold_us, r.init_warm_us, j.inputs, "
         "coalesce((SELECT p.reason FROM placement p WHERE p.job_id = j.id AND p.delegate = 'cpu' "
         "AND p.folded = 0 AND p.reason <> '' GROUP BY p.reason "
         "ORDER BY count(*) DESC, min(p.node_index) LIMIT 1), ''), j.pair_number, j.device_class "
         "FROM jobs j LEFT JOIN results r ON r.job_id = j.id ";
}

JobRow ReadJob(const Stmt& s) {
  JobRow j;
  j.id = s.Int(0);
  j.run_id = s.Int(1);
  j.job_key = s.Text(2);
  j.model = s.Text(3);
  j.model_path = s.Text(4);
  j.model_sha256 = s.Text(5);
  j.delegate = s.Text(6);
  j.delegate_options = s.Text(7);
  j.device = s.Text(8);
  j.status = s.Text(9);
  j.error = s.Text(10);
  j.wall_ms = s.Double(11);
  if (!s.IsNull(15)) {
    JobMetrics m;
    m.init_us = s.Double(12);
    m.first_us = s.Double(13);
    m.warmup_mean_us = s.Double(14);
    m.mean_us = s.Double(15);
    m.std_us = s.Double(16);
    m.min_us = s.Double(17);
    m.max_us = s.Double(18);
    m.p50_us = s.Double(19);
    m.p90_us = s.Double(20);
    m.p99_us = s.Double(21);
    m.num_runs = s.Int(22);
    m.peak_rss_bytes = s.Int(23);
    m.arena_bytes = s.Int(24);
    m.threads_used = s.Int(35);
    if (!s.IsNull(48)) m.init_cold_us = s.Double(48);
    if (!s.IsNull(49)) m.init_warm_us = s.Double(49);
    j.metrics = m;
  }
  j.num_threads = static_cast<uint32_t>(s.Int(25));
  j.attempts = s.Int(26);
  j.moved_from = s.Text(27);
  if (!s.IsNull(28)) {
    PlacementSummary p;
    p.partitions = s.Int(28);
    p.nodes = s.Int(29);
    p.delegated_nodes = s.Int(30);
    p.cpu_nodes = p.nodes - p.delegated_nodes;
    p.folded_nodes = s.Int(36);
    p.delegates = s.Text(31);
    p.main_reason = s.Text(51);
    j.placement = p;
  }
  j.started_hot = s.Int(32) != 0;
  j.throttled = s.Int(33) != 0;
  j.state_note = s.Text(34);
  j.trial = s.Int(37);
  j.runner = s.Text(38);
  j.runner_sha256 = s.Text(39);
  j.target = s.Text(40);
  j.payload = s.Text(41);
  j.claimed_by = s.Text(42);
  j.claim_id = s.Int(43);
  j.runner_kind = s.Text(44);
  j.runner_version = s.Text(45);
  j.noisy = s.Int(46) != 0;
  if (!s.IsNull(47)) j.energy_mj = s.Double(47);
  j.inputs = s.Text(50);
  j.pair = s.Int(52);
  j.device_class = s.Text(53);
  return j;
}

// The tags of run `runs`, ","-joined (tag names hold no ","), as SQL.
std::string TagsSql(Dialect d) {
  return "(SELECT " + sql::GroupConcat(d, "tn.name", "','") +
         " FROM (SELECT t.name FROM run_tags t WHERE t.run_id = runs.id ORDER BY t.name) tn)";
}

// The columns ReadRun reads, FROM runs: kRunColumnCount of them.
constexpr int kRunColumnCount = 14;
std::string RunColumns(Dialect d) {
  return "runs.id, runs.name, runs.created_at, runs.finished_at, runs.status, runs.spec_json, "
         "runs.owner_pid, runs.owner_host, runs.owner_since, runs.parent_run_id, " +
         TagsSql(d) + ", runs.mode, runs.priority, runs.unserved_timeout_s ";
}

RunRow ReadRun(const Stmt& s) {
  RunRow r;
  r.id = s.Int(0);
  r.name = s.Text(1);
  r.created_at = s.Text(2);
  r.finished_at = s.Text(3);
  r.status = s.Text(4);
  r.spec_json = s.Text(5);
  r.owner_pid = s.Int(6);
  r.owner_host = s.Text(7);
  r.owner_since = s.Int(8);
  r.parent_run_id = s.Int(9);
  r.mode = s.Text(11);
  r.priority = s.Int(12);
  r.unserved_timeout_s = s.Int(13);
  if (!s.IsNull(10)) {
    std::string all = s.Text(10);
    for (size_t start = 0; start <= all.size();) {
      size_t end = all.find(',', start);
      if (end == std::string::npos) end = all.size();
      r.tags.push_back(all.substr(start, end - start));
      start = end + 1;
    }
    std::sort(r.tags.begin(), r.tags.end());
  }
  return r;
}

std::string ThisHost() {
  char name[256] = "";
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

int64_t UnixNow() { return static_cast<int64_t>(std::time(nullptr)); }

// Whether a run's owner may still be working on it.
bool OwnerAlive(int64_t pid, const std::string& host, int64_t since) {
  if (pid <= 0) return false;
  if (host == ThisHost()) {
    if (pid == ::getpid()) return false;  // ourselves: re-entrant
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
  }
  return UnixNow() - since < kRunClaimStaleSeconds;
}

// The results row of a job: metrics (NULL when the runner reported none),
// the runner's raw output and the device state around it.
std::vector<Column> ResultColumns(int64_t job_id, const JobOutcome& o) {
  const JobMetrics* m = o.metrics ? &*o.metrics : nullptr;
  auto metric = [m](auto field) { return m ? Value(m->*field) : Value(); };
  return {
      {"job_id", job_id},
      {"init_us", metric(&JobMetrics::init_us)},
      {"first_us", metric(&JobMetrics::first_us)},
      {"warmup_mean_us", metric(&JobMetrics::warmup_mean_us)},
      {"mean_us", metric(&JobMetrics::mean_us)},
      {"std_us", metric(&JobMetrics::std_us)},
      {"min_us", metric(&JobMetrics::min_us)},
      {"max_us", metric(&JobMetrics::max_us)},
      {"p50_us", metric(&JobMetrics::p50_us)},
      {"p90_us", metric(&JobMetrics::p90_us)},
      {"p99_us", metric(&JobMetrics::p99_us)},
      {"num_runs", metric(&JobMetrics::num_runs)},
      // NULL: unknown (runner::Metrics says 0), read back as 0.
      {"peak_rss_bytes", m && m->peak_rss_bytes > 0 ? Value(m->peak_rss_bytes) : Value()},
      {"arena_bytes", metric(&JobMetrics::arena_bytes)},
      {"init_cold_us", m && m->init_cold_us ? Value(*m->init_cold_us) : Value()},
      {"init_warm_us", m && m->init_warm_us ? Value(*m->init_warm_us) : Value()},
      {"exit_code", o.exit_code},
      {"signal", o.signal},
      {"runner_json", o.runner_json},
      {"stderr_tail", o.stderr_tail},
      {"finished_at", NowIso8601()},
      {"partitions", o.placement ? Value(o.placement->partitions) : Value()},
      {"state_before", o.state_before_json},
      {"state_after", o.state_after_json},
      {"started_hot", o.started_hot},
      {"throttled", o.throttled},
      {"noisy", o.noisy},
      {"energy_mj", o.energy_mj ? Value(*o.energy_mj) : Value()},
      {"hot_threshold_c", o.hot_threshold_c},
      {"state_note", o.state_note},
      // NULL: the runner did not report it.
      {"threads_used", m && m->threads_used > 0 ? Value(m->threads_used) : Value()},
  };
}

// Columns of the child tables, after job_id.
std::vector<Column> PlacementColumns(const PlacementNode& n, size_t) {
  return {{"node_index", n.index},          {"op", n.op},         {"delegate", n.delegate},
          {"partition_index", n.partition}, {"folded", n.folded}, {"reason", n.reason}};
}

// The reference is the job's, repeated on each output's row.
std::vector<Column> AccuracyColumns(const std::string& reference, std::optional<int64_t> sets,
                                    const OutputAccuracy& a) {
  return {{"output_index", a.index},
          {"name", a.name},
          {"reference", reference},
          {"compared", a.compared},
          {"mean_abs_error", FiniteOrNull(a.mean_abs_error)},
          {"std_abs_error", FiniteOrNull(a.std_abs_error)},
          {"max_abs_error", FiniteOrNull(a.max_abs_error)},
          {"rmse", FiniteOrNull(a.rmse)},
          {"nan_count", a.nan_count},
          {"inf_count", a.inf_count},
          {"reference_nan_count", a.reference_nan_count},
          {"reference_inf_count", a.reference_inf_count},
          {"top1_agree", a.top1_agree},
          {"top5_agree", a.top5_agree},
          {"max_abs_error_lsb",
           FiniteOrNull(a.max_abs_error_lsb ? ToDouble(*a.max_abs_error_lsb) : std::nan(""))},
          {"input_sets", sets},
          {"top1_agreement", a.top1_agreement},
          {"top5_agreement", a.top5_agreement},
          {"snr_db", a.snr_db},
          {"psnr_db", a.psnr_db}};
}

std::vector<Column> TelemetryColumns(const TelemetryRow& t, size_t) {
  return {{"phase", t.phase},
          {"unix_ms", t.unix_ms},
          {"hottest_temp_c", t.hottest_temp_c},
          {"load_avg_1m", t.load_avg_1m},
          {"battery_temp_c", t.battery_temp_c},
          {"battery_level_pct", t.battery_level_pct}};
}

std::vector<Column> SampleColumns(double value_us, size_t i) {
  return {{"idx", i}, {"value_us", value_us}};
}

// For child rows whose errors need no per-row label.
constexpr auto kNoLabel = [](const auto&, size_t) { return std::string(); };

// The runs of ListRunSummaries with their job counts: one row per (run, job
// status), newest run first. Job filters are EXISTS probes on the v9 indexes
// (device, run_id), (delegate, run_id), (model, run_id), (model_sha256, run_id);
// the counts come from the covering index jobs_by_run_status.
std::string RunSummaryColumns(Dialect d) {
  return RunColumns(d) + ", j.status, count(j.run_id) FROM runs LEFT JOIN jobs j " +
         (d == Dialect::kSqlite ? "INDEXED BY jobs_by_run_status " : "") + "ON j.run_id = runs.id ";
}

std::pair<std::string, std::vector<std::string>> RunSummariesSql(Dialect d, const RunFilter& f) {
  std::string where;
  std::vector<std::string> params;
  auto add = [&](const std::string& value, const char* condition) {
    if (value.empty()) return;
    where += where.empty() ? "WHERE " : " AND ";
    where += condition;
    params.push_back(value);
  };
  const std::string name_in = sql::Position(d, "lower(runs.name)", "lower(?)") + " > 0";
  add(f.name_contains, name_in.c_str());
  add(f.tag, "EXISTS (SELECT 1 FROM run_tags t WHERE t.name = ? AND t.run_id = runs.id)");
  add(f.created_from, "runs.created_at >= ?");
  // "~" sorts after every character of an ISO-8601 time: the prefix's whole span.
  add(f.created_to.empty() ? "" : f.created_to + "~", "runs.created_at < ?");
  add(f.status, "runs.status = ?");
  add(f.device, "EXISTS (SELECT 1 FROM jobs d WHERE d.device = ? AND d.run_id = runs.id)");
  add(f.delegate, "EXISTS (SELECT 1 FROM jobs d WHERE d.delegate = ? AND d.run_id = runs.id)");
  add(f.model,
      "(EXISTS (SELECT 1 FROM jobs d WHERE d.model = ? AND d.run_id = runs.id) OR "
      "EXISTS (SELECT 1 FROM jobs d WHERE d.model_sha256 = lower(?) AND d.run_id = runs.id))");
  if (!f.model.empty()) params.push_back(f.model);  // the second "?" of the model filter
  return {"SELECT " + RunSummaryColumns(d) + where +
              " GROUP BY runs.id, j.status ORDER BY runs.id DESC, j.status",
          params};
}

// The jobs of one cell across runs (ListCellJobs): jobs_by_cell finds them
// in this order. The placeholders take the Cell's identity, in its order; a
// cell's device is the jobs' cell_device (their class, else their device).
constexpr const char* kCellJobsWhere =
    "WHERE j.model_sha256 = ? AND j.delegate = ? AND j.delegate_options = ? AND "
    "j.num_threads = ? AND j.runner = ? AND j.cell_device = ? AND j.inputs = ? "
    "ORDER BY j.run_id, j.trial, j.id";

// Binds `c`'s identity to kCellJobsWhere's placeholders 1..7.
void BindCell(Stmt& s, const Cell& c) {
  s.Bind(1, c.model_sha256).Bind(2, c.delegate).Bind(3, c.delegate_options);
  s.Bind(4, static_cast<int64_t>(c.num_threads)).Bind(5, c.runner).Bind(6, c.device);
  s.Bind(7, c.inputs);
}

// The cell columns of ListCells' inner query, in the order of jobs_by_cell
// (so that the query reads only that index), and the Cell they make.
constexpr const char* kCellColumns =
    "j.model_sha256, j.delegate, j.delegate_options, j.cell_device, j.runner, j.num_threads, "
    "j.inputs";
Cell ReadCell(const Stmt& s) {
  Cell c;
  c.model_sha256 = s.Text(0);
  c.delegate = s.Text(1);
  c.delegate_options = s.Text(2);
  c.device = s.Text(3);
  c.runner = s.Text(4);
  c.num_threads = static_cast<uint32_t>(s.Int(5));
  c.inputs = s.Text(6);
  c.model = s.Text(8);  // after MAX(j.id): the newest job's file name
  return c;
}

// ListRecentCellValues: every cell (its columns as kCellColumns, its newest
// run, the file name of that run's newest job of it) with the p50 of each
// ok trial in its newest ? runs. A loose index scan over jobs_by_cell finds
// the cells: each cell's successor is the first entry past it at the
// deepest column that has one (a few index seeks per cell, not a read of
// every job); each cell's window and trials are ranges of the same index.
std::string RecentCellValuesSql() {
  static const char* const kCols[] = {"model_sha256", "delegate", "delegate_options",
                                      "cell_device",  "runner",   "num_threads",
                                      "inputs"};
  const auto join = [](const char* prefix, const char* sep, size_t n, const char* suffix = "") {
    std::string out;
    for (size_t i = 0; i < n; ++i) {
      out += (i ? sep : "") + std::string(prefix) + kCols[i] + suffix;
    }
    return out;
  };
  const size_t n = std::size(kCols);
  const std::string order = join("k.", ", ", n);
  std::string successor;
  for (size_t level = n; level-- > 0;) {
    std::string where;
    for (size_t i = 0; i < level; ++i) {
      where += "k." + std::string(kCols[i]) + " = c." + kCols[i] + " AND ";
    }
    where += "k." + std::string(kCols[level]) + " > c." + kCols[level];
    successor += std::string(successor.empty() ? "" : ", ") + "(SELECT k.id FROM jobs k WHERE " +
                 where + " ORDER BY " + order + " LIMIT 1)";
  }
  std::string same;
  for (size_t i = 0; i < n; ++i) {
    same += std::string(i ? " AND " : "") + "k." + kCols[i] + " = w." + kCols[i];
  }
  std::string same_c = same;
  for (size_t at = same_c.find("w."); at != std::string::npos; at = same_c.find("w.", at)) {
    same_c.replace(at, 2, "c.");
  }
  std::string same_v = same;
  for (size_t at = same_v.find("w."); at != std::string::npos; at = same_v.find("w.", at)) {
    same_v.replace(at, 2, "v.");
  }
  std::string same_j = same;
  for (size_t at = same_j.find("k."); at != std::string::npos; at = same_j.find("k.", at)) {
    same_j.replace(at, 2, "j.");
  }
  return "WITH RECURSIVE cells(" + join("", ", ", n) + ") AS (SELECT * FROM (SELECT " +
         join("j.", ", ", n) + " FROM jobs j ORDER BY " + join("j.", ", ", n) +
         " LIMIT 1) f UNION ALL SELECT " + join("j.", ", ", n) +
         " FROM cells c JOIN jobs j ON j.id = COALESCE(" + successor + ")), " +
         "v AS (SELECT c.*, (SELECT k.run_id FROM jobs k WHERE " + same_c +
         " ORDER BY k.run_id DESC LIMIT 1) AS last_run, (SELECT MIN(x.run_id) FROM (SELECT "
         "DISTINCT k.run_id FROM jobs k WHERE " +
         same_c + " ORDER BY k.run_id DESC LIMIT ?) x) AS since FROM cells c), " +
         "w AS (SELECT v.*, (SELECT k.model FROM jobs k WHERE " + same_v +
         " AND k.run_id = v.last_run ORDER BY k.id DESC LIMIT 1) AS model FROM v) " + "SELECT " +
         join("w.", ", ", n) +
         ", w.last_run, w.model, j.run_id, r.p50_us FROM w LEFT JOIN jobs j ON " + same_j +
         " AND j.run_id >= w.since AND j.status = 'ok' LEFT JOIN results r ON r.job_id = j.id "
         "ORDER BY " +
         join("w.", ", ", n) + ", j.run_id, j.trial, j.id";
}

// ListClaimedJobs: the jobs nodes hold now (jobs_claimed finds them).
constexpr const char* kClaimedJobsWhere =
    "WHERE j.claimed_by <> '' AND j.status = 'running' ORDER BY j.device, j.id";

class SqlStore final : public Store {
 public:
  // `where` names the database in messages (a file, or a URL without its password).
  SqlStore(std::string where, std::unique_ptr<Conn> db)
      : path_(std::move(where)), db_(std::move(db)) {}

  Result<int64_t> CreateRun(const std::string& name, const std::string& spec_json) override {
    auto s = Prepare(
        "INSERT INTO runs(name, created_at, status, spec_json, owner_pid, owner_host, "
        "owner_since) VALUES(?, ?, ?, ?, ?, ?, ?) RETURNING id");
    if (!s) return s.error();
    s->Bind(1, name).Bind(2, NowIso8601()).Bind(3, std::string(kRunRunning)).Bind(4, spec_json);
    s->Bind(5, static_cast<int64_t>(::getpid())).Bind(6, ThisHost()).Bind(7, UnixNow());
    return ReturnedId(*s, "create run");
  }

  Result<int64_t> AddJob(int64_t run_id, const JobRow& job) override {
    auto ids = AddJobs(run_id, {job});
    if (!ids) return ids.error();
    return ids->front();
  }

  Result<std::vector<int64_t>> AddJobs(int64_t run_id, const std::vector<JobRow>& jobs) override {
    auto tx = Transaction::Begin(*db_);
    if (!tx) return Fail("add jobs", tx);
    auto s = Prepare(
        "INSERT INTO jobs(run_id, job_key, model, model_path, model_sha256, delegate, "
        "delegate_options, device, status, num_threads, trial, runner, runner_sha256, target, "
        "payload, runner_kind, inputs, pair_number, device_class, cell_device) "
        "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "RETURNING id");
    if (!s) return s.error();
    std::vector<int64_t> ids;
    ids.reserve(jobs.size());
    for (const JobRow& j : jobs) {
      s->Reset();
      s->Bind(1, run_id).Bind(2, j.job_key).Bind(3, j.model).Bind(4, j.model_path);
      s->Bind(5, j.model_sha256).Bind(6, j.delegate).Bind(7, j.delegate_options);
      s->Bind(8, j.device).Bind(9, std::string(kJobQueued));
      s->Bind(10, static_cast<int64_t>(j.num_threads)).Bind(11, j.trial);
      s->Bind(12, j.runner == kDefaultRunnerName ? std::string() : j.runner);
      s->Bind(13, j.runner_sha256).Bind(14, j.target).Bind(15, j.payload);
      s->Bind(16, j.runner_kind).Bind(17, j.inputs.empty() ? kSeededInputs : j.inputs);
      s->Bind(18, j.pair).Bind(19, j.device_class).Bind(20, CellOf(j).device);
      auto id = ReturnedId(*s, "add job to run " + std::to_string(run_id));
      if (!id) return id.error();
      ids.push_back(*id);
    }
    // Idle nodes wake up (PostgreSQL delivers it at commit).
    if (auto r = db_->Notify(kWorkChannel); !r) return Fail("add jobs", r);
    if (auto r = tx->Commit(); !r) return Fail("add jobs", r);
    return ids;
  }

  Result<void> MarkJobRunning(int64_t job_id, int64_t claim_id) override {
    auto s = Prepare(
        "UPDATE jobs SET status = ?, started_at = ?, attempts = attempts + 1 WHERE id = ? AND " +
        sql::HeldBy(claim_id));
    if (!s) return s.error();
    s->Bind(1, std::string(kJobRunning)).Bind(2, NowIso8601()).Bind(3, job_id);
    if (auto r = s->Run(); !r) return Fail("mark job running", r);
    return ExpectHeld(job_id, claim_id, "not marked running");
  }

  Result<void> MoveJob(int64_t job_id, const std::string& device,
                       const std::string& job_key) override {
    auto s = Prepare(
        "UPDATE jobs SET moved_from = CASE WHEN moved_from = '' THEN device ELSE moved_from END, "
        "device = ?, job_key = ? WHERE id = ? AND " +
        sql::HeldBy(0));
    if (!s) return s.error();
    s->Bind(1, device).Bind(2, job_key).Bind(3, job_id);
    if (auto r = s->Run(); !r) return Fail("move job", r);
    return ExpectHeld(job_id, 0, "not moved");
  }

  Result<void> ReopenRun(int64_t run_id) override {
    auto tx = Transaction::Begin(*db_);  // BEGIN IMMEDIATE: one claimant at a time
    if (!tx) return Fail("reopen run", tx);
    {
      // On PostgreSQL BEGIN locks nothing: two resumes must not both see no owner.
      auto q = Prepare("SELECT owner_pid, owner_host, owner_since FROM runs WHERE id = ?" +
                       sql::LockRunRow(dialect()));
      if (!q) return q.error();
      q->Bind(1, run_id);
      auto row = q->Step();
      if (!row) return Fail("reopen run", row);
      if (!*row)
        return MakeError(ErrorKind::kNotFound,
                         "no run " + std::to_string(run_id) + " in '" + path_ + "'");
      int64_t pid = q->Int(0);
      std::string host = q->Text(1);
      int64_t since = q->Int(2);
      if (OwnerAlive(pid, host, since)) {
        return MakeError("run " + std::to_string(run_id) + " is in use by another dfarm process " +
                         "(pid " + std::to_string(pid) + " on " + host + ", since " +
                         std::to_string(UnixNow() - since) +
                         " s ago); wait for it to end or stop it before resuming");
      }
    }
    auto s = Prepare(
        "UPDATE runs SET status = ?, finished_at = '', owner_pid = ?, owner_host = ?, "
        "owner_since = ? WHERE id = ?");
    if (!s) return s.error();
    s->Bind(1, std::string(kRunRunning)).Bind(2, static_cast<int64_t>(::getpid()));
    s->Bind(3, ThisHost()).Bind(4, UnixNow()).Bind(5, run_id);
    if (auto r = s->Run(); !r) return Fail("reopen run", r);
    if (auto r = ExpectChanged("run", run_id); !r) return r;
    if (auto r = tx->Commit(); !r) return Fail("reopen run", r);
    return Ok();
  }

  Result<bool> RefreshRunClaim(int64_t run_id) override {
    auto s = Prepare(
        "UPDATE runs SET owner_since = ? WHERE id = ? AND owner_pid = ? AND owner_host = ?");
    if (!s) return s.error();
    s->Bind(1, UnixNow()).Bind(2, run_id).Bind(3, static_cast<int64_t>(::getpid()));
    s->Bind(4, ThisHost());
    if (auto r = s->Run(); !r) return Fail("renew the claim on run", r);
    return db_->Changes() > 0;
  }

  Result<std::string> RecordRunRunner(int64_t run_id, const std::string& host_path,
                                      const std::string& sha256, bool replace) override {
    auto tx = Transaction::Begin(*db_);
    if (!tx) return Fail("record the runner of run", tx);
    auto s =
        Prepare(std::string("INSERT INTO run_runners(run_id, host_path, sha256) VALUES(?, ?, ?) ") +
                (replace ? "ON CONFLICT(run_id, host_path) DO UPDATE SET sha256 = excluded.sha256"
                         : "ON CONFLICT DO NOTHING"));
    if (!s) return s.error();
    s->Bind(1, run_id).Bind(2, host_path).Bind(3, sha256);
    if (auto r = s->Run(); !r) return Fail("record the runner of run " + std::to_string(run_id), r);
    auto q = Prepare("SELECT sha256 FROM run_runners WHERE run_id = ? AND host_path = ?");
    if (!q) return q.error();
    q->Bind(1, run_id).Bind(2, host_path);
    auto row = q->Step();
    if (!row) return Fail("read the runner of run", row);
    std::string recorded = *row ? q->Text(0) : sha256;
    if (auto r = tx->Commit(); !r) return Fail("record the runner of run", r);
    return recorded;
  }

  Result<std::vector<std::pair<std::string, std::string>>> ListRunRunners(int64_t run_id) override {
    auto s =
        Prepare("SELECT host_path, sha256 FROM run_runners WHERE run_id = ? ORDER BY host_path");
    if (!s) return s.error();
    s->Bind(1, run_id);
    std::vector<std::pair<std::string, std::string>> out;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list the runners of run", row);
      if (!*row) break;
      out.emplace_back(s->Text(0), s->Text(1));
    }
    return out;
  }

  Result<void> RequeueJob(int64_t job_id) override {
    auto s =
        Prepare("UPDATE jobs SET status = ? WHERE id = ? AND status = ? AND " + sql::HeldBy(0));
    if (!s) return s.error();
    s->Bind(1, std::string(kJobQueued)).Bind(2, job_id).Bind(3, std::string(kJobRunning));
    if (auto r = s->Run(); !r) return Fail("requeue job", r);
    return Ok();
  }

  Result<std::optional<Accuracy>> GetAccuracy(int64_t job_id) override {
    if (auto j = GetJob(job_id); !j) return j.error();
    auto s = Prepare(
        "SELECT output_index, name, reference, compared, mean_abs_error, std_abs_error, "
        "max_abs_error, rmse, nan_count, inf_count, reference_nan_count, reference_inf_count, "
        "top1_agree, top5_agree, max_abs_error_lsb, input_sets, top1_agreement, top5_agreement, "
        "snr_db, psnr_db FROM output_accuracy WHERE job_id = ? ORDER BY output_index");
    if (!s) return s.error();
    s->Bind(1, job_id);
    std::optional<Accuracy> out;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("read accuracy", row);
      if (!*row) break;
      // One reference per job: the runner names it once for all outputs.
      if (!out) {
        out = Accuracy{s->Text(2), {}};
        if (!s->IsNull(15)) out->sets = s->Int(15);
      }
      OutputAccuracy a;
      a.index = s->Int(0);
      a.name = s->Text(1);
      a.compared = s->Int(3);
      // NULL: not finite (no element compared).
      auto real = [&](int col) { return s->IsNull(col) ? std::nan("") : s->Double(col); };
      a.mean_abs_error = real(4);
      a.std_abs_error = real(5);
      a.max_abs_error = real(6);
      a.rmse = real(7);
      if (!s->IsNull(14)) a.max_abs_error_lsb = Number(s->Double(14));
      a.nan_count = s->Int(8);
      a.inf_count = s->Int(9);
      a.reference_nan_count = s->Int(10);
      a.reference_inf_count = s->Int(11);
      if (!s->IsNull(12)) a.top1_agree = s->Int(12) != 0;
      if (!s->IsNull(13)) a.top5_agree = s->Int(13) != 0;
      if (!s->IsNull(16)) a.top1_agreement = s->Double(16);
      if (!s->IsNull(17)) a.top5_agreement = s->Double(17);
      if (!s->IsNull(18)) a.snr_db = s->Double(18);
      if (!s->IsNull(19)) a.psnr_db = s->Double(19);
      out->outputs.push_back(std::move(a));
    }
    return out;
  }

  Result<std::vector<TelemetryRow>> GetTelemetry(int64_t job_id) override {
    auto s = Prepare(
        "SELECT phase, unix_ms, hottest_temp_c, load_avg_1m, battery_temp_c, battery_level_pct "
        "FROM device_telemetry WHERE job_id = ? ORDER BY phase <> 'before', phase");
    if (!s) return s.error();
    s->Bind(1, job_id);
    std::vector<TelemetryRow> out;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("read telemetry", row);
      if (!*row) break;
      TelemetryRow t;
      t.phase = s->Text(0);
      t.unix_ms = s->Int(1);
      if (!s->IsNull(2)) t.hottest_temp_c = s->Double(2);
      if (!s->IsNull(3)) t.load_avg_1m = s->Double(3);
      if (!s->IsNull(4)) t.battery_temp_c = s->Double(4);
      if (!s->IsNull(5)) t.battery_level_pct = s->Int(5);
      out.push_back(std::move(t));
    }
    return out;
  }

  Result<void> RecordArtifact(const ArtifactRow& a) override {
    auto s = Prepare(
        "INSERT INTO artifacts(sha256, kind, size_bytes, first_seen, host_path) "
        "VALUES(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
    if (!s) return s.error();
    s->Bind(1, a.sha256).Bind(2, a.kind).Bind(3, a.size_bytes).Bind(4, NowIso8601());
    s->Bind(5, a.host_path);
    if (auto r = s->Run(); !r) return Fail("record artifact " + a.sha256.substr(0, 12), r);
    return Ok();
  }

  Result<std::vector<ArtifactRow>> ListArtifacts() override {
    auto s = Prepare(
        "SELECT sha256, kind, size_bytes, first_seen, host_path FROM artifacts "
        "ORDER BY first_seen, sha256");
    if (!s) return s.error();
    std::vector<ArtifactRow> out;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list artifacts", row);
      if (!*row) break;
      out.push_back(ArtifactRow{s->Text(0), s->Text(1), s->Int(2), s->Text(3), s->Text(4)});
    }
    return out;
  }

  Result<void> RecordJobResult(int64_t job_id, const JobOutcome& o) override {
    if (!IsFinalJobStatus(o.status)) {
      return MakeError("cannot record job " + std::to_string(job_id) + ": status '" + o.status +
                       "' is not a final job status");
    }
    if (auto r = Retrying([&] { return WriteJobResult(job_id, o); }); !r) return r;
    // The result is in. A queue run whose last job this was is finished;
    // should that fail, the next result, the reaper or the sweep following
    // the run does it.
    (void)sql::FinishQueueRunIfDone(*db_, job_id);
    return Ok();
  }

  // RecordJobResult's transaction.
  Result<void> WriteJobResult(int64_t job_id, const JobOutcome& o) {
    auto tx = Transaction::Begin(*db_);
    if (!tx) return Fail("record job result", tx);
    {
      // The first write: it locks the job (PostgreSQL), so the claim holds
      // until the commit. Without a claim, a job of a sweep's own run, whose
      // result may be recorded again (replaced).
      auto s = Prepare(
          "UPDATE jobs SET status = ?, error = ?, wall_ms = ?, "
          "runner_version = coalesce(nullif(?, ''), runner_version) WHERE id = ? AND " +
          (o.claim_id > 0 ? sql::HeldBy(o.claim_id)
                          : sql::Unclaimed() + " AND status <> '" + kJobCancelled + "'"));
      if (!s) return s.error();
      s->Bind(1, o.status).Bind(2, o.error).Bind(3, o.wall_ms).Bind(4, o.runner_version);
      s->Bind(5, job_id);
      if (auto r = s->Run(); !r) return Fail("record job result", r);
      if (auto r = ExpectHeld(job_id, o.claim_id, "result dropped"); !r) return r;
    }
    {
      auto del = Prepare("DELETE FROM results WHERE job_id = ?");
      if (!del) return del.error();
      del->Bind(1, job_id);
      if (auto r = del->Run(); !r) return Fail("record job result", r);
    }
    if (auto r = Insert("INSERT INTO results", ResultColumns(job_id, o), "record job result"); !r) {
      return r;
    }
    static const std::vector<PlacementNode> kNoNodes;
    if (auto r = ReplaceJobRows(
            job_id, "placement", "placement", o.placement ? o.placement->nodes : kNoNodes,
            PlacementColumns,
            [](const PlacementNode& n, size_t) { return " of node " + std::to_string(n.index); });
        !r) {
      return r;
    }
    static const std::vector<OutputAccuracy> kNoOutputs;
    const std::string reference = o.accuracy ? o.accuracy->reference : "";
    const std::optional<int64_t> sets = o.accuracy ? o.accuracy->sets : std::nullopt;
    if (auto r = ReplaceJobRows(
            job_id, "output_accuracy", "accuracy", o.accuracy ? o.accuracy->outputs : kNoOutputs,
            [&reference, sets](const OutputAccuracy& a, size_t) {
              return AccuracyColumns(reference, sets, a);
            },
            [](const OutputAccuracy& a, size_t) {
              return " of output " + std::to_string(a.index);
            });
        !r) {
      return r;
    }
    if (auto r = ReplaceJobRows(job_id, "device_telemetry", "telemetry", o.telemetry,
                                TelemetryColumns, kNoLabel);
        !r) {
      return r;
    }
    if (auto r =
            ReplaceJobRows(job_id, "samples", "samples", o.samples_us, SampleColumns, kNoLabel);
        !r) {
      return r;
    }
    if (auto r = sql::ReplaceProfile(*db_, job_id, o.profile); !r) {
      return Fail("record profile", r);
    }
    if (auto r = sql::ReplaceSustained(*db_, job_id, o.sustained); !r) {
      return Fail("record sustained curve", r);
    }
    if (auto r = sql::ReplaceTaskAccuracy(*db_, job_id, o.task); !r) {
      return Fail("record task accuracy", r);
    }
    if (auto r = sql::AfterJobRecorded(*db_, job_id, o.claim_id); !r) {
      return Fail("record job result", r);
    }
    if (auto r = tx->Commit(); !r) return Fail("record job result", r);
    return Ok();
  }

  Result<void> FinishRun(int64_t run_id, const std::string& status) override {
    if (status != kRunFinished && status != kRunFailed && status != kRunCancelled) {
      return MakeError("cannot finish run " + std::to_string(run_id) + ": status '" + status +
                       "' is not finished, failed or cancelled");
    }
    // A run cancelled by CancelRun (its jobs cancelled) stays cancelled: the
    // sweep that ran it may finish it after the cancel.
    auto s = Prepare(
        "UPDATE runs SET status = ?, finished_at = ?, owner_pid = 0, owner_host = '', "
        "owner_since = 0 WHERE id = ? AND NOT (status = ? AND EXISTS (SELECT 1 FROM jobs j WHERE "
        "j.run_id = runs.id AND j.status = ?))");
    if (!s) return s.error();
    s->Bind(1, status).Bind(2, NowIso8601()).Bind(3, run_id).Bind(4, kRunCancelled);
    s->Bind(5, kJobCancelled);
    if (auto r = s->Run(); !r) return Fail("finish run", r);
    if (db_->Changes() > 0) return Ok();
    if (auto r = GetRun(run_id); !r) return r.error();
    return Ok();
  }

  Result<std::vector<RunRow>> ListRuns() override {
    auto s = Prepare("SELECT " + RunColumns(dialect()) + "FROM runs ORDER BY id");
    if (!s) return s.error();
    std::vector<RunRow> runs;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list runs", row);
      if (!*row) break;
      runs.push_back(ReadRun(*s));
    }
    return runs;
  }

  Result<RunRow> GetRun(int64_t run_id) override {
    auto s = Prepare("SELECT " + RunColumns(dialect()) + "FROM runs WHERE id = ?");
    if (!s) return s.error();
    s->Bind(1, run_id);
    auto row = s->Step();
    if (!row) return Fail("read run", row);
    if (!*row)
      return MakeError(ErrorKind::kNotFound,
                       "no run " + std::to_string(run_id) + " in '" + path_ + "'");
    return ReadRun(*s);
  }

  Result<std::vector<JobRow>> ListJobs(int64_t run_id) override {
    auto s = Prepare("SELECT " + JobColumns(dialect()) + "WHERE j.run_id = ? ORDER BY j.id");
    if (!s) return s.error();
    s->Bind(1, run_id);
    std::vector<JobRow> jobs;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list jobs", row);
      if (!*row) break;
      jobs.push_back(ReadJob(*s));
    }
    return jobs;
  }

  Result<JobRow> GetJob(int64_t job_id) override {
    auto s = Prepare("SELECT " + JobColumns(dialect()) + "WHERE j.id = ?");
    if (!s) return s.error();
    s->Bind(1, job_id);
    auto row = s->Step();
    if (!row) return Fail("read job", row);
    if (!*row) return MakeError("no job " + std::to_string(job_id) + " in '" + path_ + "'");
    return ReadJob(*s);
  }

  Result<std::vector<double>> GetSamples(int64_t job_id) override {
    auto s = Prepare("SELECT value_us FROM samples WHERE job_id = ? ORDER BY idx");
    if (!s) return s.error();
    s->Bind(1, job_id);
    std::vector<double> samples;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("read samples", row);
      if (!*row) break;
      samples.push_back(s->Double(0));
    }
    return samples;
  }

  Result<JobDetail> GetJobDetail(int64_t job_id) override {
    auto s = Prepare(
        "SELECT exit_code, signal, runner_json, stderr_tail, finished_at, state_before, "
        "state_after, started_hot, throttled, hot_threshold_c, state_note FROM results "
        "WHERE job_id = ?");
    if (!s) return s.error();
    s->Bind(1, job_id);
    auto row = s->Step();
    if (!row) return Fail("read job result", row);
    if (!*row) return MakeError("job " + std::to_string(job_id) + " has no result yet");
    JobDetail d;
    d.exit_code = static_cast<int>(s->Int(0));
    d.signal = static_cast<int>(s->Int(1));
    d.runner_json = s->Text(2);
    d.stderr_tail = s->Text(3);
    d.finished_at = s->Text(4);
    if (!s->IsNull(5)) d.state_before_json = s->Text(5);
    if (!s->IsNull(6)) d.state_after_json = s->Text(6);
    d.started_hot = s->Int(7) != 0;
    d.throttled = s->Int(8) != 0;
    d.hot_threshold_c = s->Double(9);
    d.state_note = s->Text(10);
    return d;
  }

  Result<std::optional<JobPlacement>> GetPlacement(int64_t job_id) override {
    auto job = Prepare(
        "SELECT r.partitions FROM jobs j LEFT JOIN results r ON r.job_id = j.id WHERE j.id = ?");
    if (!job) return job.error();
    job->Bind(1, job_id);
    auto row = job->Step();
    if (!row) return Fail("read placement", row);
    if (!*row) return MakeError("no job " + std::to_string(job_id) + " in '" + path_ + "'");
    if (job->IsNull(0)) return std::optional<JobPlacement>();
    JobPlacement p;
    p.partitions = job->Int(0);
    auto s = Prepare(
        "SELECT node_index, op, delegate, partition_index, folded, reason FROM placement "
        "WHERE job_id = ? ORDER BY node_index");
    if (!s) return s.error();
    s->Bind(1, job_id);
    for (;;) {
      auto r = s->Step();
      if (!r) return Fail("read placement", r);
      if (!*r) break;
      PlacementNode n;
      n.index = s->Int(0);
      n.op = s->Text(1);
      n.delegate = s->Text(2);
      if (!s->IsNull(3)) n.partition = s->Int(3);
      n.folded = s->Int(4) != 0;
      n.reason = s->Text(5);
      p.nodes.push_back(std::move(n));
    }
    return std::optional<JobPlacement>(std::move(p));
  }

  Result<std::optional<JobProfile>> GetProfile(int64_t job_id) override {
    if (auto j = GetJob(job_id); !j) return j.error();
    auto p = sql::ReadProfile(*db_, job_id);
    if (!p) return Fail("read profile", p);
    return p;
  }

  Result<std::map<int64_t, JobProfile>> ListRunProfiles(int64_t run_id) override {
    auto p = sql::ReadRunProfiles(*db_, run_id);
    if (!p) return Fail("read the profiles of run", p);
    return p;
  }

  Result<std::map<int64_t, JobSustained>> ListRunSustained(int64_t run_id) override {
    auto p = sql::ReadRunSustained(*db_, run_id);
    if (!p) return Fail("read the sustained curves of run", p);
    return p;
  }

  Result<std::map<int64_t, TaskAccuracy>> ListRunTaskAccuracy(int64_t run_id) override {
    auto t = sql::ReadRunTaskAccuracy(*db_, run_id);
    if (!t) return Fail("read the task accuracy of run", t);
    return t;
  }

  Result<void> UpsertDevice(const DeviceRow& d) override {
    auto s = Prepare(
        "INSERT INTO devices(name, abi, os, cpu, cores, memory_bytes, hostname, agent_version, "
        "last_seen, node, tags, opencl) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON "
        "CONFLICT(name) DO UPDATE SET abi = excluded.abi, os = excluded.os, cpu = excluded.cpu, "
        "cores = excluded.cores, memory_bytes = excluded.memory_bytes, hostname = "
        "excluded.hostname, agent_version = excluded.agent_version, last_seen = "
        "excluded.last_seen, node = excluded.node, tags = excluded.tags, opencl = "
        "excluded.opencl");
    if (!s) return s.error();
    s->Bind(1, d.name).Bind(2, d.abi).Bind(3, d.os).Bind(4, d.cpu).Bind(5, d.cores);
    s->Bind(6, d.memory_bytes).Bind(7, d.hostname).Bind(8, d.agent_version);
    s->Bind(9, NowIso8601()).Bind(10, d.node).Bind(11, sql::JoinComma(d.tags));
    s->Bind(12, OpenClDevicesJson(d.opencl));
    if (auto r = s->Run(); !r) return Fail("record device '" + d.name + "'", r);
    return Ok();
  }

  Result<void> SetDeviceState(const std::string& name, const std::string& state,
                              const std::string& reason) override {
    auto set = SetDeviceStateBy(name, state, reason, kSetByDfarm);
    if (!set) return set.error();
    return Ok();
  }

  Result<bool> SetDeviceStateBy(const std::string& name, const std::string& state,
                                const std::string& reason, const std::string& set_by) override {
    const std::string what = "record the state of device '" + name + "'";
    auto tx = Transaction::Begin(*db_);
    if (!tx) return Fail(what, tx);
    // An operator's state stays: the update skips its row (and the row lock
    // orders this after an operator's write in flight).
    auto s = Prepare(
        "INSERT INTO devices(name, state, state_reason, state_by) VALUES(?, ?, ?, ?) ON "
        "CONFLICT(name) DO UPDATE SET state = excluded.state, state_reason = "
        "excluded.state_reason, state_by = excluded.state_by, state_user = '' WHERE "
        "devices.state_by <> ?");
    if (!s) return s.error();
    s->Bind(1, name).Bind(2, state).Bind(3, reason).Bind(4, set_by).Bind(5, kSetByOperator);
    if (auto r = s->Run(); !r) return Fail(what, r);
    if (db_->Changes() == 0) return false;
    if (auto r = AddDeviceEvent(name, state, reason, set_by, ""); !r) return Fail(what, r);
    if (auto r = tx->Commit(); !r) return Fail(what, r);
    return true;
  }

  Result<void> SetOperatorState(const std::string& name, const std::string& state,
                                const std::string& reason, const std::string& user) override {
    const std::string what = "record the state of device '" + name + "'";
    auto tx = Transaction::Begin(*db_);
    if (!tx) return Fail(what, tx);
    auto s =
        Prepare(state.empty() ? "UPDATE devices SET state_by = ?, state_user = ? WHERE name = ? "
                                "RETURNING state"
                              : "UPDATE devices SET state = ?, state_reason = ?, state_by = ?, "
                                "state_user = ? WHERE name = ? RETURNING state");
    if (!s) return s.error();
    if (state.empty()) {
      s->Bind(1, std::string()).Bind(2, std::string()).Bind(3, name);
    } else {
      s->Bind(1, state).Bind(2, reason).Bind(3, kSetByOperator).Bind(4, user).Bind(5, name);
    }
    auto row = s->Step();
    if (!row) return Fail(what, row);
    if (!*row)
      return MakeError(ErrorKind::kNotFound, "no device '" + name + "' in '" + path_ + "'");
    const std::string now = s->Text(0);
    if (auto r = s->Run(); !r) return Fail(what, r);
    const std::string event_reason =
        state.empty() ? "operator lifted the hand-set state; the health check and dfarm decide "
                        "again" +
                            (reason.empty() ? std::string() : ": " + reason)
                      : reason;
    if (auto r = AddDeviceEvent(name, now, event_reason, kSetByOperator, user); !r) {
      return Fail(what, r);
    }
    if (auto r = tx->Commit(); !r) return Fail(what, r);
    return Ok();
  }

  Result<bool> SetDeviceReachable(const std::string& name, const std::string& node,
                                  const std::string& unreachable) override {
    const std::string what = "record whether node '" + node + "' reaches device '" + name + "'";
    auto tx = Transaction::Begin(*db_);
    if (!tx) return Fail(what, tx);
    auto n = Prepare(
        "INSERT INTO devices(name, node) VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET node = "
        "excluded.node WHERE devices.node <> excluded.node");
    if (!n) return n.error();
    n->Bind(1, name).Bind(2, node);
    if (auto r = n->Run(); !r) return Fail(what, r);
    const bool offline = !unreachable.empty();
    const std::string state = offline ? kDeviceOffline : kDeviceOk;
    const std::string reason = offline ? "not reachable from node " + node + ": " + unreachable
                                       : "reachable again from node " + node;
    // Offline replaces any state but an operator's or a quarantine (and
    // itself with the same reason); online replaces only offline.
    auto s = Prepare(
        offline ? "UPDATE devices SET state = ?, state_reason = ?, state_by = ?, state_user = '' "
                  "WHERE name = ? AND state_by <> ? AND state <> ? AND NOT (state = ? AND "
                  "state_reason = ?)"
                : "UPDATE devices SET state = ?, state_reason = ?, state_by = ?, state_user = '' "
                  "WHERE name = ? AND state_by <> ? AND state = ?");
    if (!s) return s.error();
    s->Bind(1, state).Bind(2, reason).Bind(3, kSetByDfarm).Bind(4, name).Bind(5, kSetByOperator);
    if (offline) {
      s->Bind(6, kDeviceQuarantined).Bind(7, kDeviceOffline).Bind(8, reason);
    } else {
      s->Bind(6, kDeviceOffline);
    }
    if (auto r = s->Run(); !r) return Fail(what, r);
    const bool changed = db_->Changes() > 0;
    if (changed) {
      if (auto r = AddDeviceEvent(name, state, reason, kSetByDfarm, ""); !r) return Fail(what, r);
    }
    if (auto r = tx->Commit(); !r) return Fail(what, r);
    return changed;
  }

  Result<void> AddDeviceEvent(const std::string& name, const std::string& state,
                              const std::string& reason, const std::string& set_by,
                              const std::string& user) {
    auto e = Prepare(
        "INSERT INTO device_events(name, at, state, reason, set_by, user_host) VALUES(?, ?, ?, "
        "?, ?, ?)");
    if (!e) return e.error();
    e->Bind(1, name).Bind(2, NowIso8601()).Bind(3, state).Bind(4, reason).Bind(5, set_by);
    e->Bind(6, user);
    return e->Run();
  }

  Result<std::vector<DeviceEvent>> ListDeviceEvents(const std::string& name) override {
    auto s = Prepare(
        "SELECT name, at, state, reason, set_by, user_host FROM device_events WHERE name = ? "
        "ORDER BY id");
    if (!s) return s.error();
    s->Bind(1, name);
    std::vector<DeviceEvent> out;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list the states of device '" + name + "'", row);
      if (!*row) break;
      out.push_back(
          DeviceEvent{s->Text(0), s->Text(1), s->Text(2), s->Text(3), s->Text(4), s->Text(5)});
    }
    return out;
  }

  Result<std::string> RecordHealthGolden(const std::string& model_sha256,
                                         const std::string& runner_sha256,
                                         const std::string& outputs,
                                         const std::string& device) override {
    const std::string what = "record the known outputs of health model " + model_sha256;
    auto s = Prepare(
        "INSERT INTO health_golden(model_sha256, runner_sha256, outputs, device, recorded_at) "
        "VALUES(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
    if (!s) return s.error();
    s->Bind(1, model_sha256).Bind(2, runner_sha256).Bind(3, outputs).Bind(4, device);
    s->Bind(5, NowIso8601());
    if (auto r = s->Run(); !r) return Fail(what, r);
    // The row is never updated or deleted by the store: once inserted (by
    // this call or another), it is what this read returns.
    auto golden = GetHealthGolden(model_sha256, runner_sha256);
    if (!golden) return golden.error();
    if (!*golden) return MakeError("cannot " + what + ": it is not there");
    return (*golden)->outputs;
  }

  Result<std::optional<HealthGolden>> GetHealthGolden(const std::string& model_sha256,
                                                      const std::string& runner_sha256) override {
    auto s = Prepare(
        "SELECT outputs, device, recorded_at FROM health_golden WHERE model_sha256 = ? AND "
        "runner_sha256 = ?");
    if (!s) return s.error();
    s->Bind(1, model_sha256).Bind(2, runner_sha256);
    auto row = s->Step();
    if (!row) return Fail("read the known outputs of health model " + model_sha256, row);
    if (!*row) return std::optional<HealthGolden>();
    return std::optional<HealthGolden>(
        HealthGolden{model_sha256, runner_sha256, s->Text(0), s->Text(1), s->Text(2)});
  }

  Result<std::vector<RunSummary>> ListRunSummaries(const RunFilter& f) override {
    auto [sql, params] = RunSummariesSql(dialect(), f);
    auto s = Prepare(sql);
    if (!s) return s.error();
    for (size_t i = 0; i < params.size(); ++i) s->Bind(static_cast<int>(i + 1), params[i]);
    std::vector<RunSummary> out;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list runs", row);
      if (!*row) break;
      const int64_t id = s->Int(0);
      if (out.empty() || out.back().run.id != id) out.push_back(RunSummary{ReadRun(*s), 0, {}});
      const int64_t n = s->Int(kRunColumnCount + 1);
      if (n == 0) continue;  // a run without jobs: the LEFT JOIN's one NULL row
      out.back().jobs += n;
      out.back().by_status[s->Text(kRunColumnCount)] += n;
    }
    return out;
  }

  Result<std::vector<JobRow>> ListCellJobs(const Cell& c) override {
    // INDEXED BY: without ANALYZE statistics the planner would take the
    // narrower jobs_by_model_sha256_run and read every job of the model;
    // jobs_by_cell holds the cell's jobs in run and trial order.
    std::string sql = "SELECT " + JobColumns(dialect()) + kCellJobsWhere;
    if (dialect() == Dialect::kSqlite) {
      const std::string from = "FROM jobs j ";
      sql.replace(sql.find(from), from.size(), from + "INDEXED BY jobs_by_cell ");
    }
    auto s = Prepare(sql);
    if (!s) return s.error();
    BindCell(*s, c);
    std::vector<JobRow> jobs;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list the jobs of a cell", row);
      if (!*row) break;
      jobs.push_back(ReadJob(*s));
    }
    return jobs;
  }

  Result<std::vector<JobRow>> ListCellTrials(const Cell& c) override {
    const std::string indexed = dialect() == Dialect::kSqlite ? "INDEXED BY jobs_by_cell " : "";
    auto s = Prepare(
        "SELECT j.id, j.run_id, j.trial, j.model, j.status, j.runner_sha256, j.runner_version, "
        "r.mean_us, r.p50_us, r.p90_us, r.p99_us, r.num_runs, r.peak_rss_bytes FROM jobs j " +
        indexed + "LEFT JOIN results r ON r.job_id = j.id " + kCellJobsWhere);
    if (!s) return s.error();
    BindCell(*s, c);
    std::vector<JobRow> jobs;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list the trials of a cell", row);
      if (!*row) break;
      JobRow j;
      j.model_sha256 = c.model_sha256;
      j.delegate = c.delegate;
      j.delegate_options = c.delegate_options;
      j.num_threads = c.num_threads;
      j.runner = c.runner;
      j.device = c.device;
      j.inputs = c.inputs;
      j.id = s->Int(0);
      j.run_id = s->Int(1);
      j.trial = s->Int(2);
      j.model = s->Text(3);
      j.status = s->Text(4);
      j.runner_sha256 = s->Text(5);
      j.runner_version = s->Text(6);
      if (!s->IsNull(7)) {
        JobMetrics m;
        m.mean_us = s->Double(7);
        m.p50_us = s->Double(8);
        m.p90_us = s->Double(9);
        m.p99_us = s->Double(10);
        m.num_runs = s->Int(11);
        m.peak_rss_bytes = s->Int(12);
        j.metrics = m;
      }
      jobs.push_back(std::move(j));
    }
    return jobs;
  }

  Result<std::vector<Cell>> ListCells(const CellFilter& f) override {
    std::vector<std::string> where;
    std::vector<std::string> binds;
    if (!f.model.empty()) {
      std::string hex = f.model;
      for (char& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const bool sha_prefix =
          hex.size() >= 8 && hex.size() <= 64 &&
          std::all_of(hex.begin(), hex.end(), [](unsigned char c) { return std::isxdigit(c); });
      if (sha_prefix) {  // a range on the sha256, so that an index finds it
        where.push_back("(j.model = ? OR (j.model_sha256 >= ? AND j.model_sha256 < ?))");
        binds.insert(binds.end(), {f.model, hex, hex + "~"});
      } else {
        where.push_back("j.model = ?");
        binds.push_back(f.model);
      }
    }
    auto add = [&](const char* column, const std::optional<std::string>& v) {
      if (!v) return;
      where.push_back(std::string(column) + " = ?");
      binds.push_back(*v);
    };
    add("j.delegate", f.delegate.empty() ? std::nullopt : std::optional<std::string>(f.delegate));
    add("j.delegate_options", f.delegate_options);
    add("j.cell_device", f.device);
    add("j.runner", f.runner);
    if (f.inputs) {  // an id or a prefix of one
      where.push_back("j.inputs >= ? AND j.inputs < ?");
      binds.insert(binds.end(), {*f.inputs, *f.inputs + "~"});
    }
    if (f.num_threads) {
      where.push_back("j.num_threads = ?");
      binds.push_back(std::to_string(*f.num_threads));
    }
    // The inner query reads only the covering index jobs_by_cell
    // when nothing filters; the model's file name is one lookup per cell.
    std::string sql =
        "SELECT c.*, (SELECT m.model FROM jobs m WHERE m.id = c.newest) FROM (SELECT " +
        std::string(kCellColumns) + ", MAX(j.id) AS newest FROM jobs j";
    for (size_t i = 0; i < where.size(); ++i) sql += (i == 0 ? " WHERE " : " AND ") + where[i];
    sql += " GROUP BY 1, 2, 3, 4, 5, 6, 7) c";
    auto s = Prepare(sql);
    if (!s) return s.error();
    for (size_t i = 0; i < binds.size(); ++i) {
      const bool threads = f.num_threads && i + 1 == binds.size();
      if (threads) {
        s->Bind(static_cast<int>(i + 1), static_cast<int64_t>(*f.num_threads));
      } else {
        s->Bind(static_cast<int>(i + 1), binds[i]);
      }
    }
    std::vector<Cell> cells;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list the cells", row);
      if (!*row) break;
      cells.push_back(ReadCell(*s));
    }
    // Sorted here, not by the database: its collation need not be std::string's.
    std::sort(cells.begin(), cells.end());
    return cells;
  }

  Result<std::vector<CellRecentValues>> ListRecentCellValues(int64_t runs) override {
    static const std::string sql = RecentCellValuesSql();
    auto s = Prepare(sql);
    if (!s) return s.error();
    s->Bind(1, std::max<int64_t>(runs, 0));
    std::vector<CellRecentValues> out;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list the cells' recent values", row);
      if (!*row) break;
      Cell c = ReadCell(*s);
      if (out.empty() || !(out.back().cell == c)) out.push_back({std::move(c), s->Int(7), {}});
      if (!s->IsNull(9) && !s->IsNull(10)) out.back().p50_us.emplace_back(s->Int(9), s->Double(10));
    }
    std::stable_sort(
        out.begin(), out.end(),
        [](const CellRecentValues& a, const CellRecentValues& b) { return a.cell < b.cell; });
    return out;
  }

  Result<std::vector<DeviceRow>> ListDevices() override { return ReadDevices(""); }

  Result<std::optional<DeviceRow>> GetDevice(const std::string& name) override {
    auto rows = ReadDevices(name);
    if (!rows) return rows.error();
    if (rows->empty()) return std::optional<DeviceRow>();
    return std::optional<DeviceRow>(std::move(rows->front()));
  }

  Result<void> TagRun(int64_t run_id, const std::string& name, bool move) override {
    if (!IsValidTagName(name)) return BadTagName(name);
    auto tx = Transaction::Begin(*db_);
    if (!tx) return Fail("tag run", tx);
    if (auto r = GetRun(run_id); !r) return r.error();
    auto holder = FindTag(name);
    if (!holder) return holder.error();
    if (*holder && **holder != run_id && !move) {
      return MakeError(ErrorKind::kInvalidInput,
                       "tag '" + name + "' is already on run " + std::to_string(**holder) +
                           "; pass --move to move it to run " + std::to_string(run_id) +
                           ", or untag it first");
    }
    auto s = Prepare(
        "INSERT INTO run_tags(name, run_id, tagged_at) VALUES(?, ?, ?) ON CONFLICT(name) DO "
        "UPDATE SET run_id = excluded.run_id, tagged_at = excluded.tagged_at");
    if (!s) return s.error();
    s->Bind(1, name).Bind(2, run_id).Bind(3, NowIso8601());
    if (auto r = s->Run(); !r) return Fail("tag run " + std::to_string(run_id), r);
    if (auto r = tx->Commit(); !r) return Fail("tag run", r);
    return Ok();
  }

  Result<void> UntagRun(const std::string& name) override {
    auto s = Prepare("DELETE FROM run_tags WHERE name = ?");
    if (!s) return s.error();
    s->Bind(1, name);
    if (auto r = s->Run(); !r) return Fail("untag '" + name + "'", r);
    if (db_->Changes() == 0) {
      return MakeError(ErrorKind::kNotFound, "no run is tagged '" + name + "' in '" + path_ + "'");
    }
    return Ok();
  }

  Result<std::optional<int64_t>> FindTag(const std::string& name) override {
    auto s = Prepare("SELECT run_id FROM run_tags WHERE name = ?");
    if (!s) return s.error();
    s->Bind(1, name);
    auto row = s->Step();
    if (!row) return Fail("read tag '" + name + "'", row);
    if (!*row) return std::optional<int64_t>();
    return std::optional<int64_t>(s->Int(0));
  }

  Result<void> SetRunParent(int64_t run_id, int64_t parent_run_id) override {
    auto s = Prepare("UPDATE runs SET parent_run_id = ? WHERE id = ?");
    if (!s) return s.error();
    s->Bind(1, parent_run_id).Bind(2, run_id);
    if (auto r = s->Run(); !r) return Fail("set the parent of run", r);
    if (db_->Changes() == 0) {
      return MakeError(ErrorKind::kNotFound,
                       "no run " + std::to_string(run_id) + " in '" + path_ + "'");
    }
    return Ok();
  }

  Result<void> SetRunMode(int64_t run_id, const std::string& mode) override {
    if (auto r = sql::SetRunMode(*db_, run_id, mode); !r) return Fail("set the mode of run", r);
    return Ok();
  }

  Result<void> SetRunQueueing(int64_t run_id, const RunQueueing& q) override {
    if (auto r = sql::SetRunQueueing(*db_, run_id, q); !r) {
      if (r.error().kind == ErrorKind::kInvalidInput) return r;
      if (r.error().kind == ErrorKind::kNotFound) {
        return MakeError(ErrorKind::kNotFound, r.message() + " in '" + path_ + "'");
      }
      return Fail("set the priority of run", r);
    }
    return Ok();
  }

  Result<CancelledRun> CancelRun(int64_t run_id, const std::string& by) override {
    auto r = Retrying([&] { return sql::CancelRun(*db_, run_id, by); });
    if (!r) {
      if (r.error().kind == ErrorKind::kInvalidInput || r.error().kind == ErrorKind::kNotFound) {
        return MakeError(r.error().kind, r.message() + " in '" + path_ + "'");
      }
      return Fail("cancel run " + std::to_string(run_id), r);
    }
    return *r;
  }

  Result<std::vector<int64_t>> EndUnservedJobs() override {
    auto r = sql::EndUnservedJobs(*db_);
    if (!r) return Fail("end the jobs no node serves", r);
    return std::move(*r);
  }

  Result<void> RegisterNode(const NodeRow& node) override {
    if (auto r = sql::RegisterNode(*db_, node); !r) return Fail("register node " + node.name, r);
    return Ok();
  }

  Result<int64_t> NodeHeartbeat(const std::string& node, const std::string& state,
                                int64_t lease_s) override {
    auto n = sql::NodeHeartbeat(*db_, node, state, lease_s);
    if (!n) return Fail("renew the heartbeat of node " + node, n);
    return *n;
  }

  Result<std::vector<NodeRow>> ListNodes() override {
    auto n = sql::ListNodes(*db_);
    if (!n) return Fail("list nodes", n);
    return std::move(*n);
  }

  bool ConnectionLost() const override { return db_->Lost(); }

  Result<std::optional<JobRow>> ClaimJob(const std::string& node, const DeviceTraits& device,
                                         int64_t lease_s) override {
    auto id = Retrying([&] { return sql::ClaimJob(*db_, node, device, lease_s, device_classes_); });
    if (!id) return Fail("claim a job for device '" + device.name + "'", id);
    if (!*id) return std::optional<JobRow>();
    auto job = GetJob(**id);
    if (!job) return job.error();
    return std::optional<JobRow>(std::move(*job));
  }

  Result<bool> ReleaseClaim(int64_t job_id, int64_t claim_id) override {
    auto r = sql::ReleaseClaim(*db_, job_id, claim_id);
    if (!r) return Fail("release job " + std::to_string(job_id), r);
    return *r;
  }

  Result<std::vector<int64_t>> ReapExpiredClaims(int64_t max_claims) override {
    auto r = sql::ReapExpiredClaims(*db_, max_claims);
    if (!r) return Fail("reap expired claims", r);
    return std::move(*r);
  }

  Result<std::vector<JobClaimRow>> ListJobClaims(int64_t job_id) override {
    auto r = sql::ListJobClaims(*db_, job_id);
    if (!r) return Fail("list the claims of job " + std::to_string(job_id), r);
    return std::move(*r);
  }

  Result<std::vector<JobRow>> ListClaimedJobs() override {
    auto s = Prepare("SELECT " + JobColumns(dialect()) + kClaimedJobsWhere);
    if (!s) return s.error();
    std::vector<JobRow> jobs;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list the claimed jobs", row);
      if (!*row) break;
      jobs.push_back(ReadJob(*s));
    }
    return jobs;
  }

  Result<bool> WaitForWork(int timeout_ms) override {
    if (!listening_) {
      if (auto r = db_->Listen(kWorkChannel); !r) return Fail("listen for work", r);
      listening_ = true;
    }
    auto r = db_->WaitForNotification(timeout_ms);
    if (!r) return Fail("wait for work", r);
    return *r;
  }

  Result<void> PutBlob(const std::string& sha256, const std::string& path) override {
    if (auto r = sql::PutBlob(*db_, sha256, path); !r) return Fail("store file '" + path + "'", r);
    return Ok();
  }

  Result<int64_t> ChangeCount() override {
    auto s = Prepare("SELECT CAST(sum(n) AS BIGINT) FROM store_changes");
    if (!s) return s.error();
    auto row = s->Step();
    if (!row) return Fail("read the change counter", row);
    return *row ? s->Int(0) : 0;
  }

  Result<bool> HasBlob(const std::string& sha256) override {
    auto r = sql::HasBlob(*db_, sha256);
    if (!r) return Fail("look up file " + sha256, r);
    return *r;
  }

  Result<void> GetBlob(const std::string& sha256, const std::string& path) override {
    if (auto r = sql::GetBlob(*db_, sha256, path); !r) {
      if (r.error().kind == ErrorKind::kNotFound) return r;
      return Fail("fetch file " + sha256.substr(0, 12), r);
    }
    return Ok();
  }

 private:
  // Every device by name, or only the one named `only` (when not empty).
  Result<std::vector<DeviceRow>> ReadDevices(const std::string& only) {
    auto s = Prepare(std::string("SELECT name, abi, os, cpu, cores, memory_bytes, hostname, "
                                 "agent_version, last_seen, state, state_reason, node, tags, "
                                 "opencl, state_by, state_user FROM devices ") +
                     (only.empty() ? "" : "WHERE name = ? ") + "ORDER BY name");
    if (!s) return s.error();
    if (!only.empty()) s->Bind(1, only);
    std::vector<DeviceRow> devices;
    for (;;) {
      auto row = s->Step();
      if (!row) return Fail("list devices", row);
      if (!*row) break;
      devices.push_back(DeviceRow{s->Text(0), s->Text(1), s->Text(2), s->Text(3), s->Int(4),
                                  s->Int(5), s->Text(6), s->Text(7), s->Text(8), s->Text(9),
                                  s->Text(10), s->Text(11), sql::SplitComma(s->Text(12)),
                                  ParseOpenClDevices(s->Text(13)), s->Text(14), s->Text(15)});
    }
    return devices;
  }

  static Error BadTagName(const std::string& name) {
    return MakeError(
        ErrorKind::kInvalidInput,
        "tag name '" + name + "' is not valid: use 1 to 64 of the characters A-Z a-z 0-9 _ . -");
  }

  // Runs "<verb_and_table>(columns...) VALUES(...)" once; errors read "cannot <what>".
  Result<void> Insert(std::string_view verb_and_table, const std::vector<Column>& columns,
                      const std::string& what) {
    auto s = Prepare(sql::InsertSql(verb_and_table, columns));
    if (!s) return s.error();
    s->BindColumns(columns);
    if (auto r = s->Run(); !r) return Fail(what, r);
    return Ok();
  }

  // Replaces the job's rows in child table `table` (keyed by job_id) with one
  // row per item: columns_of(item, i) gives the columns after job_id. Errors
  // read "cannot record <what><label_of(item, i)>".
  template <typename Item, typename ColumnsOf, typename LabelOf>
  Result<void> ReplaceJobRows(int64_t job_id, const std::string& table, const std::string& what,
                              const std::vector<Item>& items, ColumnsOf columns_of,
                              LabelOf label_of) {
    auto del = Prepare("DELETE FROM " + table + " WHERE job_id = ?");
    if (!del) return del.error();
    del->Bind(1, job_id);
    if (auto r = del->Run(); !r) return Fail("record " + what, r);
    // Many rows a statement (a round trip each on PostgreSQL): up to 256, and
    // fewer than 30000 parameters (SQLite's limit is 32766).
    size_t i = 0;
    while (i < items.size()) {
      std::vector<Column> first = columns_of(items[i], i);
      const size_t per_row = first.size() + 1;
      const size_t n = std::min({items.size() - i, size_t{256}, size_t{30000} / per_row});
      std::vector<Column> batch;
      batch.reserve(n * per_row);
      for (size_t k = i; k < i + n; ++k) {
        batch.push_back(Column{"job_id", job_id});
        std::vector<Column> row = k == i ? std::move(first) : columns_of(items[k], k);
        for (Column& c : row) batch.push_back(std::move(c));
      }
      auto s = Prepare(sql::InsertSql("INSERT INTO " + table,
                                      std::span<const Column>(batch.data(), per_row), n));
      if (!s) return s.error();
      s->BindColumns(batch);
      if (auto r = s->Run(); !r) return Fail("record " + what + label_of(items[i], i), r);
      i += n;
    }
    return Ok();
  }

  Dialect dialect() const { return db_->dialect(); }

  // The id a "... RETURNING id" statement gives.
  Result<int64_t> ReturnedId(Stmt& s, const std::string& what) {
    auto row = s.Step();
    if (!row) return Fail(what, row);
    if (!*row) return MakeError("store '" + path_ + "': cannot " + what + ": no id returned");
    int64_t id = s.Int(0);
    if (auto r = s.Run(); !r) return Fail(what, r);
    return id;
  }

  Result<Stmt> Prepare(std::string_view sql) {
    auto s = Stmt::Prepare(*db_, sql);
    if (!s) return MakeError("store '" + path_ + "': " + s.message());
    return s;
  }

  // The kind of a rolled-back transaction (kTransient) is kept: Retrying()
  // runs it again.
  template <typename R>
  Error Fail(const std::string& what, const R& r) {
    const ErrorKind kind =
        r.error().kind == ErrorKind::kTransient ? ErrorKind::kTransient : ErrorKind::kFailed;
    return MakeError(kind, "store '" + path_ + "': cannot " + what + ": " + r.message());
  }

  // Runs `once` (one transaction) again while the server rolls it back as a
  // deadlock or a serialization failure (ErrorKind::kTransient; PostgreSQL
  // only): two nodes and a `dfarm cancel` may lock a run's rows in different
  // orders. The last attempt's error is returned.
  template <typename F>
  auto Retrying(F once) -> decltype(once()) {
    constexpr int kTries = 5;
    for (int attempt = 1;; ++attempt) {
      auto r = once();
      if (r || r.error().kind != ErrorKind::kTransient || attempt == kTries) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * attempt));
    }
  }

  // After a statement guarded by sql::HeldBy(claim_id): kConflict (naming
  // the job's state) when it changed nothing.
  Result<void> ExpectHeld(int64_t job_id, int64_t claim_id, const std::string& action) {
    if (db_->Changes() > 0) return Ok();
    Error e = sql::NotHeld(*db_, job_id, claim_id, action);
    if (e.kind == ErrorKind::kConflict) return e;
    return MakeError(e.kind, "store '" + path_ + "': " + e.message);
  }

  Result<void> ExpectChanged(const char* what, int64_t id) {
    if (db_->Changes() == 0) {
      return MakeError("no " + std::string(what) + " " + std::to_string(id) + " in '" + path_ +
                       "'");
    }
    return Ok();
  }

  std::string path_;
  std::unique_ptr<Conn> db_;
  bool listening_ = false;
  sql::DeviceClassCache device_classes_;  // ClaimJob's
};

}  // namespace

bool IsFinalJobStatus(const std::string& status) { return ParseJobStatus(status).has_value(); }

bool IsValidTagName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

int CurrentSchemaVersion() { return sql::SchemaVersion(); }

std::string NowIso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<void> CreateSqliteStoreAtVersionForTesting(const std::string& path, int version) {
  if (version < 1 || version > sql::SchemaVersion()) {
    return MakeError("schema version " + std::to_string(version) + " is not in 1.." +
                     std::to_string(sql::SchemaVersion()));
  }
  auto db = sql::OpenSqlite(path);
  if (!db) return MakeError("cannot open '" + path + "': " + db.message());
  return sql::Migrate(**db, version);
}

bool IsPostgresUrl(const std::string& where) {
  return where.rfind("postgresql://", 0) == 0 || where.rfind("postgres://", 0) == 0;
}

std::string RedactUrl(const std::string& where) {
  if (!IsPostgresUrl(where)) return where;
  const size_t question = where.find('?');
  std::string base = where.substr(0, question);
  // The userinfo's password: postgresql://USER:PASSWORD@HOST...
  const size_t scheme = base.find("://") + 3;
  const size_t at = base.find('@', scheme);
  const size_t colon = base.find(':', scheme);
  if (at != std::string::npos && at < base.find('/', scheme) && colon < at) {
    base = base.substr(0, colon) + ":***" + base.substr(at);
  }
  if (question == std::string::npos) return base;
  // The query's: ...?password=PASSWORD&sslpassword=PASSPHRASE (libpq's keys).
  std::string query;
  size_t start = question + 1;
  for (;;) {
    size_t end = where.find('&', start);
    if (end == std::string::npos) end = where.size();
    std::string item = where.substr(start, end - start);
    const std::string key = item.substr(0, item.find('='));
    if (key != item && (key == "password" || key == "sslpassword")) item = key + "=***";
    query += (start == question + 1 ? "" : "&") + item;
    if (end == where.size()) break;
    start = end + 1;
  }
  return base + "?" + query;
}

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, SqliteSync sync) {
  auto fail = [&](const std::string& why) -> Error {
    return MakeError("cannot open store '" + path + "': " + why);
  };
  auto db = sql::OpenSqlite(path, sync);
  if (!db) return fail(db.message());
  if (auto r = sql::Migrate(**db, sql::SchemaVersion()); !r) return fail(r.message());
  return std::unique_ptr<Store>(std::make_unique<SqlStore>(path, std::move(*db)));
}

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url) {
  const std::string shown = RedactUrl(url);
  auto fail = [&](const std::string& why) -> Error {
    return MakeError("cannot open store '" + shown + "': " + why);
  };
  auto db = sql::OpenPostgres(url);
  if (!db) return fail(db.message());
  if (auto r = sql::Migrate(**db, sql::SchemaVersion()); !r) return fail(r.message());
  return std::unique_ptr<Store>(std::make_unique<SqlStore>(shown, std::move(*db)));
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& where) {
  return IsPostgresUrl(where) ? OpenPostgresStore(where) : OpenSqliteStore(where);
}

}  // namespace dfarm::store
