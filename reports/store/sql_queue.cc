#include "reports/store/sql_queue.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/base/sha256.h"

namespace dfarm::store::sql {
namespace {

constexpr size_t kBlobChunkBytes = 4 << 20;  // 4 MiB a row

// runs.device_classes: a JSON object of class name -> globs; '' for none.
std::string DeviceClassesJson(const DeviceClasses& classes) {
  return classes.empty() ? std::string() : nlohmann::json(classes).dump();
}
DeviceClasses ParseDeviceClasses(const std::string& text) {
  if (text.empty()) return {};
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  DeviceClasses out;
  if (!doc.is_object()) return out;
  for (const auto& [name, globs] : doc.items()) {
    if (!globs.is_array()) continue;
    for (const auto& g : globs) {
      if (g.is_string()) out[name].push_back(g.get<std::string>());
    }
  }
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Steps `s` to its end, failing with `what`.
Result<void> RunAll(Stmt& s) { return s.Run(); }

// Runs `sql` with `values` bound in order.
Result<void> RunWith(Conn& db, const std::string& sql, std::initializer_list<Value> values) {
  auto s = Stmt::Prepare(db, sql);
  if (!s) return s.error();
  int i = 1;
  for (const Value& v : values) s->Bind(i++, v);
  return RunAll(*s);
}

// A job whose status was written outside RecordJobResult still gets a
// results row, so that every final job has one.
// Ends claim `claim_id` of a job: its end time and how it ended (kClaim*).
Result<void> EndClaim(Conn& db, int64_t job_id, int64_t claim_id, const char* outcome) {
  return RunWith(db,
                 "UPDATE job_claims SET ended_unix = " + NowUnixSql(db.dialect()) +
                     ", outcome = ? WHERE job_id = ? AND claim_id = ?",
                 {outcome, job_id, claim_id});
}

// Gives every job of run `run_id` in `status` that has no results row one
// without figures (exit -1): every final job has a results row.
Result<void> InsertEmptyResults(Conn& db, int64_t run_id, const char* status) {
  return RunWith(db,
                 "INSERT INTO results(job_id, exit_code, signal, runner_json, stderr_tail, "
                 "finished_at) SELECT j.id, -1, 0, '', '', ? FROM jobs j WHERE j.run_id = ? AND "
                 "j.status = ? AND NOT EXISTS (SELECT 1 FROM results r WHERE r.job_id = j.id)",
                 {NowIso8601(), run_id, status});
}

// Unix seconds of an ISO-8601 UTC time ("2024-05-01T12:34:56Z"); 0 when it is not one.
int64_t IsoToUnix(const std::string& text) {
  std::tm tm{};
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != 0) return 0;
  return static_cast<int64_t>(::timegm(&tm));
}

Result<int64_t> DatabaseNow(Conn& db) {
  auto s = Stmt::Prepare(db, "SELECT " + NowUnixSql(db.dialect()));
  if (!s) return s.error();
  auto row = s->Step();
  if (!row) return row.error();
  const int64_t now = s->Int(0);
  if (auto r = s->Run(); !r) return r.error();
  return now;
}

Result<void> InsertInfraResult(Conn& db, int64_t job_id) {
  if (auto r = RunWith(db, "DELETE FROM results WHERE job_id = ?", {job_id}); !r) return r;
  return RunWith(db,
                 "INSERT INTO results(job_id, exit_code, signal, runner_json, stderr_tail, "
                 "finished_at) VALUES(?, -1, 0, '', '', ?)",
                 {job_id, NowIso8601()});
}

}  // namespace

Result<void> SetRunMode(Conn& db, int64_t run_id, const std::string& mode) {
  if (auto r = RunWith(db, "UPDATE runs SET mode = ? WHERE id = ?", {mode, run_id}); !r) return r;
  if (db.Changes() == 0) {
    return MakeError(ErrorKind::kNotFound, "no run " + std::to_string(run_id));
  }
  return Ok();
}

Result<void> SetRunQueueing(Conn& db, int64_t run_id, const RunQueueing& q) {
  if (q.priority < kRunPriorityMin || q.priority > kRunPriorityMax) {
    return MakeError(ErrorKind::kInvalidInput,
                     "priority " + std::to_string(q.priority) + " is out of range [" +
                         std::to_string(kRunPriorityMin) + ", " + std::to_string(kRunPriorityMax) +
                         "] (higher is claimed first)");
  }
  if (q.unserved_timeout_s < 0 || q.unserved_timeout_s > kUnservedTimeoutMaxS) {
    return MakeError(ErrorKind::kInvalidInput,
                     "unserved_timeout_s " + std::to_string(q.unserved_timeout_s) +
                         " is out of range [0, " + std::to_string(kUnservedTimeoutMaxS) + "]");
  }
  if (auto r =
          RunWith(db,
                  "UPDATE runs SET priority = ?, unserved_timeout_s = ?, device_classes = ? "
                  "WHERE id = ?",
                  {q.priority, q.unserved_timeout_s, DeviceClassesJson(q.device_classes), run_id});
      !r) {
    return r;
  }
  if (db.Changes() == 0) {
    return MakeError(ErrorKind::kNotFound, "no run " + std::to_string(run_id));
  }
  return Ok();
}

Result<CancelledRun> CancelRun(Conn& db, int64_t run_id, const std::string& by) {
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  auto run = Stmt::Prepare(
      db, "SELECT status, finished_at FROM runs WHERE id = ?" + LockRunRow(db.dialect()));
  if (!run) return run.error();
  run->Bind(1, run_id);
  auto found = run->Step();
  if (!found) return found.error();
  if (!*found) return MakeError(ErrorKind::kNotFound, "no run " + std::to_string(run_id));
  const std::string status = run->Text(0);
  const std::string finished_at = run->Text(1);
  if (auto r = run->Run(); !r) return r.error();
  if (status != kRunRunning) {
    return MakeError(ErrorKind::kInvalidInput,
                     "run " + std::to_string(run_id) + " is " + status +
                         (finished_at.empty() ? "" : " (since " + finished_at + ")") +
                         ", not running: there is nothing to cancel");
  }
  CancelledRun out;
  out.run_id = run_id;
  const std::string why = "cancelled by " + by + " at " + NowIso8601() + " (dfarm cancel)";
  // Each job under its row lock: a result being recorded commits first (the
  // job is no longer pending then) or finds the job cancelled and records nothing.
  for (const char* pending : {kJobQueued, kJobRunning}) {
    auto u = Stmt::Prepare(db,
                           "UPDATE jobs SET status = ?, error = ?, claimed_by = '', lease_until = "
                           "0 WHERE run_id = ? AND status = ? RETURNING id, claim_id");
    if (!u) return u.error();
    u->Bind(1, kJobCancelled).Bind(2, why).Bind(3, run_id).Bind(4, pending);
    std::vector<std::pair<int64_t, int64_t>> ended;
    for (;;) {
      auto row = u->Step();
      if (!row) return row.error();
      if (!*row) break;
      ended.emplace_back(u->Int(0), u->Int(1));
    }
    (pending == kJobQueued ? out.queued : out.running) = static_cast<int64_t>(ended.size());
    if (pending == kJobQueued) continue;
    for (const auto& [job, claim] : ended) {
      if (claim == 0) continue;
      if (auto r = RunWith(db,
                           "UPDATE job_claims SET ended_unix = " + NowUnixSql(db.dialect()) +
                               ", outcome = ? WHERE job_id = ? AND claim_id = ? AND ended_unix = 0",
                           {kClaimCancelled, job, claim});
          !r) {
        return r.error();
      }
    }
  }
  if (auto r = InsertEmptyResults(db, run_id, kJobCancelled); !r) return r.error();
  if (auto r = RunWith(db,
                       "UPDATE runs SET status = ?, finished_at = ?, owner_pid = 0, owner_host = "
                       "'', owner_since = 0 WHERE id = ?",
                       {kRunCancelled, NowIso8601(), run_id});
      !r) {
    return r.error();
  }
  if (auto r = tx->Commit(); !r) return r.error();
  return out;
}

Result<void> RegisterNode(Conn& db, const NodeRow& n) {
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  if (auto r =
          RunWith(db,
                  "INSERT INTO nodes(name, host, pid, started_at, heartbeat_unix, state, devices) "
                  "VALUES(?, ?, ?, ?, " +
                      NowUnixSql(db.dialect()) +
                      ", ?, ?) ON CONFLICT(name) DO UPDATE SET host = excluded.host, pid = "
                      "excluded.pid, started_at = excluded.started_at, heartbeat_unix = "
                      "excluded.heartbeat_unix, state = excluded.state, devices = excluded.devices",
                  {n.name, n.host, n.pid, n.started_at, kNodeRunning, JoinComma(n.devices)});
      !r) {
    return r;
  }
  // A node that registers holds no claim yet: the jobs still claimed under
  // its name are a dead predecessor's, whose leases end now (else this
  // node's heartbeat would renew them forever).
  if (auto r = RunWith(db,
                       "UPDATE jobs SET lease_until = 0 WHERE claimed_by = ? AND status = ? AND "
                       "lease_until > 0",
                       {n.name, kJobRunning});
      !r) {
    return r;
  }
  return tx->Commit();
}

Result<int64_t> NodeHeartbeat(Conn& db, const std::string& node, const std::string& state,
                              int64_t lease_s) {
  const std::string now = NowUnixSql(db.dialect());
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  if (auto r =
          RunWith(db, "UPDATE nodes SET heartbeat_unix = " + now + ", state = ? WHERE name = ?",
                  {state, node});
      !r) {
    return r.error();
  }
  if (db.Changes() == 0) {
    return MakeError(ErrorKind::kNotFound, "no node '" + node + "' is registered");
  }
  // Renew what is not locked right now: a job being recorded needs no lease,
  // and waiting for it would hold the heartbeat behind every result.
  const std::string renew =
      db.dialect() == Dialect::kPostgres
          ? "UPDATE jobs SET lease_until = " + now +
                " + ? WHERE id IN (SELECT id FROM jobs WHERE claimed_by = ? AND status = ? "
                "FOR UPDATE SKIP LOCKED)"
          : "UPDATE jobs SET lease_until = " + now + " + ? WHERE claimed_by = ? AND status = ?";
  if (auto r = RunWith(db, renew, {lease_s, node, kJobRunning}); !r) return r.error();
  const int64_t n = db.Changes();
  if (auto r = tx->Commit(); !r) return r.error();
  return n;
}

Result<std::vector<NodeRow>> ListNodes(Conn& db) {
  auto s = Stmt::Prepare(
      db, "SELECT name, host, pid, started_at, heartbeat_unix, state, devices, " +
              NowUnixSql(db.dialect()) + " - heartbeat_unix FROM nodes ORDER BY name");
  if (!s) return s.error();
  std::vector<NodeRow> out;
  for (;;) {
    auto row = s->Step();
    if (!row) return row.error();
    if (!*row) return out;
    NodeRow n;
    n.name = s->Text(0);
    n.host = s->Text(1);
    n.pid = s->Int(2);
    n.started_at = s->Text(3);
    n.heartbeat_unix = s->Int(4);
    n.state = s->Text(5);
    n.devices = SplitComma(s->Text(6));
    n.heartbeat_age_s = s->Int(7);
    out.push_back(std::move(n));
  }
}

namespace {

// A running queue run as ClaimJob sees it: its id and its device classes
// as stored (runs.device_classes).
struct QueueRun {
  int64_t id = 0;
  std::string device_classes;
};

// The running queue runs in claim order: highest priority first; of equal
// priority, the one with the fewest jobs running, then the oldest.
Result<std::vector<QueueRun>> RunsInClaimOrder(Conn& db) {
  auto q = Stmt::Prepare(
      db,
      "SELECT r.id, r.priority, (SELECT count(*) FROM jobs k WHERE k.run_id = r.id AND k.status "
      "= ?) AS busy, r.device_classes FROM runs r WHERE r.mode = ? AND r.status = ? ORDER BY "
      "r.priority DESC, busy, r.id");
  if (!q) return q.error();
  q->Bind(1, kJobRunning).Bind(2, kRunModeQueue).Bind(3, kRunRunning);
  std::vector<QueueRun> out;
  for (;;) {
    auto row = q->Step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back({q->Int(0), q->Text(3)});
  }
}

// Locks the first of `ids` (queued jobs) that no other node is claiming
// right now (SKIP LOCKED: one row, so the others stay free for the other
// nodes); unset when every one is taken.
Result<std::optional<int64_t>> LockFirstFree(Conn& db, const std::vector<int64_t>& ids) {
  std::string in;
  for (size_t i = 0; i < ids.size(); ++i) in += i ? ", ?" : "?";
  auto lock = Stmt::Prepare(db, "SELECT id FROM jobs WHERE id IN (" + in +
                                    ") AND status = ? ORDER BY id LIMIT 1" +
                                    ForUpdateSkipLocked(db.dialect()));
  if (!lock) return lock.error();
  int k = 1;
  for (int64_t id : ids) lock->Bind(k++, id);
  lock->Bind(k, kJobQueued);
  auto row = lock->Step();
  if (!row) return row.error();
  std::optional<int64_t> chosen;
  if (*row) chosen = lock->Int(0);
  if (auto r = lock->Run(); !r) return r.error();
  return chosen;
}

// The job ChooseJob picked: its id, its target and its run.
struct ChosenJob {
  int64_t id = 0;
  std::string target;
  const QueueRun* run = nullptr;  // an element of ChooseJob's `runs`
};

// In ClaimJob's transaction: the job `device` takes next from `runs`
// (RunsInClaimOrder), locked; unset when none.
Result<std::optional<ChosenJob>> ChooseJob(Conn& db, const std::vector<QueueRun>& runs,
                                           const DeviceTraits& device) {
  // Per run, its oldest candidates read without locks; then the first that
  // matches and is free is locked.
  auto q = Stmt::Prepare(db,
                         "SELECT j.id, j.device, j.target FROM jobs j WHERE j.run_id = ? AND "
                         "j.status = ? AND (j.target <> '' OR j.device = ?) ORDER BY j.id "
                         "LIMIT 200");
  if (!q) return q.error();
  for (const QueueRun& run : runs) {
    q->Reset();
    q->Bind(1, run.id).Bind(2, kJobQueued).Bind(3, device.name);
    std::vector<int64_t> matching;
    std::map<int64_t, std::string> targets;
    for (;;) {
      auto row = q->Step();
      if (!row) return row.error();
      if (!*row) break;
      if (!TargetMatches(q->Text(2), q->Text(1), device)) continue;
      matching.push_back(q->Int(0));
      targets[q->Int(0)] = q->Text(2);
    }
    if (matching.empty()) continue;
    auto chosen = LockFirstFree(db, matching);
    if (!chosen) return chosen.error();
    if (*chosen) return std::optional<ChosenJob>(ChosenJob{**chosen, targets[**chosen], &run});
  }
  return std::optional<ChosenJob>();
}

}  // namespace

const DeviceClasses& DeviceClassCache::Get(int64_t run_id, const std::string& text) {
  auto it = by_run_.find(run_id);
  if (it == by_run_.end() || it->second.first != text) {
    it = by_run_.insert_or_assign(run_id, std::make_pair(text, ParseDeviceClasses(text))).first;
  }
  return it->second.second;
}

void DeviceClassCache::KeepOnly(const std::set<int64_t>& run_ids) {
  for (auto it = by_run_.begin(); it != by_run_.end();) {
    it = run_ids.count(it->first) ? std::next(it) : by_run_.erase(it);
  }
}

namespace {

// The class `device` gives job `chosen` ("" for a job aimed at its own
// device; DeviceClassOf with its run's classes for a job aimed at `any` or
// a selector).
std::string ClassForClaim(const ChosenJob& chosen, const DeviceTraits& device,
                          DeviceClassCache& classes) {
  if (chosen.target.empty()) return std::string();
  return DeviceClassOf(classes.Get(chosen.run->id, chosen.run->device_classes), device);
}

}  // namespace

Result<std::optional<int64_t>> ClaimJob(Conn& db, const std::string& node,
                                        const DeviceTraits& device, int64_t lease_s,
                                        DeviceClassCache& classes) {
  const std::string now = NowUnixSql(db.dialect());
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  auto runs = RunsInClaimOrder(db);
  if (!runs) return runs.error();
  std::set<int64_t> running;
  for (const QueueRun& r : *runs) running.insert(r.id);
  classes.KeepOnly(running);
  auto picked = ChooseJob(db, *runs, device);
  if (!picked) return picked.error();
  if (!*picked) {
    if (auto r = tx->Commit(); !r) return r.error();
    return std::optional<int64_t>();
  }
  const std::optional<int64_t> chosen = (*picked)->id;
  const std::string device_class = ClassForClaim(**picked, device, classes);
  auto u = Stmt::Prepare(db,
                         "UPDATE jobs SET status = ?, claimed_by = ?, claim_id = claim_id + 1, "
                         "lease_until = " +
                             now +
                             " + ?, device = ?, started_at = ?, device_class = ?, cell_device = ? "
                             "WHERE id = ? AND status = ? RETURNING claim_id");
  if (!u) return u.error();
  u->Bind(1, kJobRunning).Bind(2, node).Bind(3, lease_s).Bind(4, device.name);
  u->Bind(5, NowIso8601()).Bind(6, device_class);
  u->Bind(7, CellDevice(device.name, device_class));
  u->Bind(8, *chosen).Bind(9, kJobQueued);
  auto updated = u->Step();
  if (!updated) return updated.error();
  if (!*updated) return MakeError("job " + std::to_string(*chosen) + " vanished while claimed");
  const int64_t claim_id = u->Int(0);
  if (auto r = u->Run(); !r) return r.error();
  if (auto r = RunWith(db,
                       "INSERT INTO job_claims(job_id, claim_id, node, device, claimed_unix) "
                       "VALUES(?, ?, ?, ?, " +
                           now + ")",
                       {*chosen, claim_id, node, device.name});
      !r) {
    return r.error();
  }
  if (auto r = tx->Commit(); !r) return r.error();
  return chosen;
}

Result<bool> ReleaseClaim(Conn& db, int64_t job_id, int64_t claim_id) {
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  if (auto r = RunWith(db,
                       "UPDATE jobs SET status = ?, claimed_by = '', lease_until = 0 WHERE id = ? "
                       "AND claim_id = ? AND status = ?",
                       {kJobQueued, job_id, claim_id, kJobRunning});
      !r) {
    return r.error();
  }
  const bool held = db.Changes() > 0;
  if (held) {
    if (auto r = EndClaim(db, job_id, claim_id, kClaimReleased); !r) return r.error();
    if (auto r = db.Notify(kWorkChannel); !r) return r.error();
  }
  if (auto r = tx->Commit(); !r) return r.error();
  return held;
}

Result<std::vector<int64_t>> ReapExpiredClaims(Conn& db, int64_t max_claims) {
  const std::string now = NowUnixSql(db.dialect());
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  auto q = Stmt::Prepare(
      db,
      "SELECT j.id, j.claim_id, j.claimed_by FROM jobs j WHERE j.status = ? AND j.claimed_by <> '' "
      "AND j.lease_until < " +
          now + " ORDER BY j.id" + ForUpdateSkipLocked(db.dialect()));
  if (!q) return q.error();
  q->Bind(1, kJobRunning);
  struct Expired {
    int64_t id, claim_id;
    std::string node;
  };
  std::vector<Expired> expired;
  for (;;) {
    auto row = q->Step();
    if (!row) return row.error();
    if (!*row) break;
    expired.push_back({q->Int(0), q->Int(1), q->Text(2)});
  }
  std::vector<int64_t> ids;
  std::vector<int64_t> failed;  // recorded infra: their runs may be done
  bool requeued = false;
  // Each under the claim it read: a job that changed since is left alone.
  const std::string held = " WHERE id = ? AND claim_id = ? AND status = ? AND claimed_by <> ''";
  for (const Expired& e : expired) {
    if (e.claim_id >= max_claims) {
      const std::string why = "lost " + std::to_string(e.claim_id) +
                              " times: the node running it stopped renewing its lease (last: '" +
                              e.node + "')";
      if (auto r = RunWith(db,
                           "UPDATE jobs SET status = ?, error = ?, claimed_by = '', "
                           "lease_until = 0" +
                               held,
                           {kJobInfra, why, e.id, e.claim_id, kJobRunning});
          !r) {
        return r.error();
      }
      if (db.Changes() == 0) continue;
      if (auto r = InsertInfraResult(db, e.id); !r) return r.error();
      failed.push_back(e.id);
    } else {
      if (auto r =
              RunWith(db, "UPDATE jobs SET status = ?, claimed_by = '', lease_until = 0" + held,
                      {kJobQueued, e.id, e.claim_id, kJobRunning});
          !r) {
        return r.error();
      }
      if (db.Changes() == 0) continue;
      requeued = true;
    }
    if (auto r = EndClaim(db, e.id, e.claim_id, kClaimReaped); !r) return r.error();
    ids.push_back(e.id);
  }
  if (requeued) {
    if (auto r = db.Notify(kWorkChannel); !r) return r.error();
  }
  if (auto r = tx->Commit(); !r) return r.error();
  for (int64_t id : failed) {
    if (auto r = FinishQueueRunIfDone(db, id); !r) return r.error();
  }
  return ids;
}

namespace {

// A queue run whose unserved timeout may have passed.
struct WaitingRun {
  int64_t id = 0;
  int64_t since = 0;  // unix seconds: its creation
  int64_t timeout_s = 0;
};

// The running queue runs older than their unserved timeout at `now`.
Result<std::vector<WaitingRun>> RunsPastUnservedTimeout(Conn& db, int64_t now) {
  auto q = Stmt::Prepare(db,
                         "SELECT id, created_at, unserved_timeout_s FROM runs WHERE mode = ? AND "
                         "status = ? ORDER BY id");
  if (!q) return q.error();
  q->Bind(1, kRunModeQueue).Bind(2, kRunRunning);
  std::vector<WaitingRun> out;
  for (;;) {
    auto row = q->Step();
    if (!row) return row.error();
    if (!*row) return out;
    WaitingRun w{q->Int(0), IsoToUnix(q->Text(1)), q->Int(2)};
    if (w.since > 0 && w.since + w.timeout_s <= now) out.push_back(w);
  }
}

// A device of a node, with its node's liveness and heartbeat.
struct NodeDevice {
  DeviceTraits traits;
  bool alive = false;
  int64_t heartbeat_unix = 0;
};

Result<std::vector<NodeDevice>> NodeDevices(Conn& db) {
  auto nodes = ListNodes(db);
  if (!nodes) return nodes.error();
  std::map<std::string, const NodeRow*> by_name;
  for (const NodeRow& n : *nodes) by_name[n.name] = &n;
  auto q = Stmt::Prepare(
      db, "SELECT name, abi, os, cpu, memory_bytes, tags, node FROM devices WHERE node <> ''");
  if (!q) return q.error();
  std::vector<NodeDevice> out;
  for (;;) {
    auto row = q->Step();
    if (!row) return row.error();
    if (!*row) return out;
    auto node = by_name.find(q->Text(6));
    if (node == by_name.end()) continue;
    // A node lists the devices it serves now; a device row keeps its last node.
    const std::vector<std::string>& serves = node->second->devices;
    if (std::find(serves.begin(), serves.end(), q->Text(0)) == serves.end()) continue;
    // The devices table keeps no model: DeviceClassOf falls back to the cpu.
    out.push_back(NodeDevice{DeviceTraits{q->Text(0), q->Text(1), q->Text(2), q->Text(3), q->Int(4),
                                          SplitComma(q->Text(5)), /*model=*/""},
                             NodeAlive(*node->second), node->second->heartbeat_unix});
  }
}

std::string TargetLabel(const std::string& device, const std::string& target) {
  if (target.empty()) return "device '" + device + "'";
  if (target == kTargetAny) return "any device";
  return "a device matching " + target;
}

// Ends run `w`'s queued jobs that no live node has served for its timeout;
// returns their ids.
Result<std::vector<int64_t>> EndUnservedOfRun(Conn& db, const WaitingRun& w, int64_t now,
                                              const std::vector<NodeDevice>& devices) {
  auto q =
      Stmt::Prepare(db, "SELECT DISTINCT device, target FROM jobs WHERE run_id = ? AND status = ?");
  if (!q) return q.error();
  q->Bind(1, w.id).Bind(2, kJobQueued);
  std::vector<std::pair<std::string, std::string>> unserved;
  for (;;) {
    auto row = q->Step();
    if (!row) return row.error();
    if (!*row) break;
    const std::string device = q->Text(0), target = q->Text(1);
    int64_t last = w.since;
    bool live = false;
    for (const NodeDevice& d : devices) {
      if (!TargetMatches(target, device, d.traits)) continue;
      live = live || d.alive;
      last = std::max(last, d.heartbeat_unix);
    }
    if (!live && last + w.timeout_s <= now) unserved.emplace_back(device, target);
  }
  std::vector<int64_t> ended;
  if (unserved.empty()) return ended;
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  for (const auto& [device, target] : unserved) {
    const std::string why = "no live node served " + TargetLabel(device, target) + " for " +
                            std::to_string(w.timeout_s) +
                            " s (the spec's farm.unserved_timeout_s): start `dfarm node "
                            "--device URI` on a host that has one, then sweep again";
    auto u = Stmt::Prepare(db,
                           "UPDATE jobs SET status = ?, error = ? WHERE run_id = ? AND status = ? "
                           "AND device = ? AND target = ? RETURNING id");
    if (!u) return u.error();
    u->Bind(1, kJobNotRun).Bind(2, why).Bind(3, w.id).Bind(4, kJobQueued);
    u->Bind(5, device).Bind(6, target);
    for (;;) {
      auto row = u->Step();
      if (!row) return row.error();
      if (!*row) break;
      ended.push_back(u->Int(0));
    }
  }
  if (auto r = InsertEmptyResults(db, w.id, kJobNotRun); !r) return r.error();
  if (auto r = tx->Commit(); !r) return r.error();
  if (!ended.empty()) {
    if (auto r = FinishQueueRunIfDone(db, ended.front()); !r) return r.error();
  }
  return ended;
}

}  // namespace

Result<std::vector<int64_t>> EndUnservedJobs(Conn& db) {
  auto now = DatabaseNow(db);
  if (!now) return now.error();
  auto runs = RunsPastUnservedTimeout(db, *now);
  if (!runs) return runs.error();
  std::vector<int64_t> ended;
  if (runs->empty()) return ended;
  auto devices = NodeDevices(db);
  if (!devices) return devices.error();
  for (const WaitingRun& w : *runs) {
    auto of_run = EndUnservedOfRun(db, w, *now, *devices);
    if (!of_run) return of_run.error();
    ended.insert(ended.end(), of_run->begin(), of_run->end());
  }
  return ended;
}

Result<std::vector<JobClaimRow>> ListJobClaims(Conn& db, int64_t job_id) {
  auto s = Stmt::Prepare(db,
                         "SELECT claim_id, node, device, claimed_unix, ended_unix, outcome FROM "
                         "job_claims WHERE job_id = ? ORDER BY id");
  if (!s) return s.error();
  s->Bind(1, job_id);
  std::vector<JobClaimRow> out;
  for (;;) {
    auto row = s->Step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(JobClaimRow{s->Int(0), s->Text(1), s->Text(2), s->Int(3), s->Int(4), s->Text(5)});
  }
}

std::string HeldBy(int64_t claim_id) {
  if (claim_id > 0) {
    return "claim_id = " + std::to_string(claim_id) + " AND status = '" + kJobRunning +
           "' AND claimed_by <> ''";
  }
  return std::string("claim_id = 0 AND claimed_by = '' AND status IN ('") + kJobQueued + "', '" +
         kJobRunning + "')";
}

std::string Unclaimed() { return "claim_id = 0 AND claimed_by = ''"; }

Error NotHeld(Conn& db, int64_t job_id, int64_t claim_id, const std::string& action) {
  const std::string job = "job " + std::to_string(job_id);
  auto s = Stmt::Prepare(db, "SELECT status, claim_id, claimed_by FROM jobs WHERE id = ?");
  if (!s) return s.error();
  s->Bind(1, job_id);
  auto row = s->Step();
  if (!row) return row.error();
  if (!*row) return MakeError(ErrorKind::kNotFound, "no " + job);
  const std::string status = s->Text(0);
  const int64_t holder = s->Int(1);
  const std::string node = s->Text(2);
  (void)s->Run();
  std::string now = "it is " + status;
  if (!node.empty()) now += " under claim " + std::to_string(holder) + " of node '" + node + "'";
  if (claim_id > 0) {
    return MakeError(ErrorKind::kConflict, job + " is no longer held by claim " +
                                               std::to_string(claim_id) + " (" + now +
                                               "; the lease expired or the job was given "
                                               "back): " +
                                               action);
  }
  if (holder > 0) {
    return MakeError(ErrorKind::kConflict, job + " is a job of the farm's queue, claimed " +
                                               std::to_string(holder) + " time(s) (" + now +
                                               "): " + action + " without its claim");
  }
  return MakeError(ErrorKind::kConflict, job + " is not pending (" + now + "): " + action);
}

Result<void> AfterJobRecorded(Conn& db, int64_t job_id, int64_t claim_id) {
  if (claim_id > 0) {
    if (auto r = RunWith(db,
                         "UPDATE jobs SET claimed_by = '', lease_until = 0 WHERE id = ? AND "
                         "claim_id = ?",
                         {job_id, claim_id});
        !r) {
      return r;
    }
    if (auto r = EndClaim(db, job_id, claim_id, kClaimFinished); !r) return r;
  }
  return Ok();
}

Result<void> FinishQueueRunIfDone(Conn& db, int64_t job_id) {
  // Without a lock first: while any job of the run is pending (the common
  // case), nothing is locked at all.
  auto q = Stmt::Prepare(
      db,
      "SELECT r.id FROM runs r WHERE r.id = (SELECT j.run_id FROM jobs j WHERE j.id = ?) AND "
      "r.mode = ? AND r.status = ? AND NOT EXISTS (SELECT 1 FROM jobs p WHERE p.run_id = r.id "
      "AND p.status IN (?, ?))");
  if (!q) return q.error();
  q->Bind(1, job_id).Bind(2, kRunModeQueue).Bind(3, kRunRunning);
  q->Bind(4, kJobQueued).Bind(5, kJobRunning);
  auto row = q->Step();
  if (!row) return row.error();
  if (!*row) return Ok();
  const int64_t run_id = q->Int(0);
  if (auto r = q->Run(); !r) return r;
  // Then under the run's lock, checked again: of two nodes that recorded a
  // run's last two jobs, the later one sees the other's commit.
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  if (auto r = RunWith(db, "SELECT id FROM runs WHERE id = ?" + LockRunRow(db.dialect()), {run_id});
      !r) {
    return r;
  }
  if (auto r = RunWith(db,
                       "UPDATE runs SET status = ?, finished_at = ? WHERE id = ? AND status = ? "
                       "AND NOT EXISTS (SELECT 1 FROM jobs p WHERE p.run_id = runs.id AND "
                       "p.status IN (?, ?))",
                       {kRunFinished, NowIso8601(), run_id, kRunRunning, kJobQueued, kJobRunning});
      !r) {
    return r;
  }
  return tx->Commit();
}

Result<bool> HasBlob(Conn& db, const std::string& sha256) {
  auto s = Stmt::Prepare(db, "SELECT 1 FROM blobs WHERE sha256 = ?");
  if (!s) return s.error();
  s->Bind(1, sha256);
  auto row = s->Step();
  if (!row) return row.error();
  return *row;
}

Result<void> PutBlob(Conn& db, const std::string& sha256, const std::string& path) {
  auto has = HasBlob(db, sha256);
  if (!has) return has.error();
  if (*has) return Ok();
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError("cannot read '" + path + "'");
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  // Claim the name first: a host putting the same file at once waits here,
  // then finds it taken and writes nothing.
  if (auto r = RunWith(db,
                       "INSERT INTO blobs(sha256, size_bytes, chunks) VALUES(?, 0, 0) ON CONFLICT "
                       "DO NOTHING",
                       {sha256});
      !r) {
    return r;
  }
  if (db.Changes() == 0) return tx->Commit();
  agent::Sha256 hash;
  std::string buf(kBlobChunkBytes, '\0');
  int64_t size = 0;
  int64_t idx = 0;
  auto insert = Stmt::Prepare(db, "INSERT INTO blob_chunks(sha256, idx, data) VALUES(?, ?, ?)");
  if (!insert) return insert.error();
  for (;;) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (got == 0) break;
    hash.Update(buf.data(), got);
    insert->Reset();
    insert->Bind(1, sha256).Bind(2, idx).Bind(3, Bytes{buf.substr(0, got)});
    if (auto r = insert->Run(); !r) return r;
    size += static_cast<int64_t>(got);
    ++idx;
  }
  if (in.bad()) return MakeError("cannot read '" + path + "'");
  const std::string got = hash.FinishHex();
  if (got != sha256) {
    return MakeError("'" + path + "' changed: its sha256 is " + got + ", expected " + sha256);
  }
  if (auto r = RunWith(db, "UPDATE blobs SET size_bytes = ?, chunks = ? WHERE sha256 = ?",
                       {size, idx, sha256});
      !r) {
    return r;
  }
  return tx->Commit();
}

Result<void> GetBlob(Conn& db, const std::string& sha256, const std::string& path) {
  auto s = Stmt::Prepare(db, "SELECT size_bytes, chunks FROM blobs WHERE sha256 = ?");
  if (!s) return s.error();
  s->Bind(1, sha256);
  auto row = s->Step();
  if (!row) return row.error();
  if (!*row) {
    return MakeError(ErrorKind::kNotFound, "the database holds no file with sha256 " + sha256);
  }
  const int64_t size = s->Int(0);
  const int64_t chunks = s->Int(1);
  if (auto r = s->Run(); !r) return r;
  const std::string tmp = path + ".part" + std::to_string(::getpid());
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return MakeError("cannot write '" + tmp + "'");
  agent::Sha256 hash;
  int64_t written = 0;
  auto c = Stmt::Prepare(db, "SELECT data FROM blob_chunks WHERE sha256 = ? AND idx = ?");
  if (!c) return c.error();
  for (int64_t i = 0; i < chunks; ++i) {
    c->Reset();
    c->Bind(1, sha256).Bind(2, i);
    auto got = c->Step();
    if (!got) return got.error();
    if (!*got) return MakeError("file " + sha256 + " lacks chunk " + std::to_string(i));
    const std::string data = c->Blob(0);
    hash.Update(data.data(), data.size());
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    written += static_cast<int64_t>(data.size());
  }
  out.close();
  std::error_code ec;
  if (!out || written != size || hash.FinishHex() != sha256) {
    std::filesystem::remove(tmp, ec);
    return MakeError("file " + sha256 + " read back from the database does not match its sha256");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return MakeError("cannot write '" + path + "': " + ec.message());
  return Ok();
}

}  // namespace dfarm::store::sql

namespace dfarm::store {

std::string TargetString(const TargetSelector& s) {
  std::string out;
  auto add = [&](const char* key, const std::string& v) {
    if (v.empty()) return;
    if (!out.empty()) out += ';';
    out += key;
    out += '=';
    out += v;
  };
  add("abi", s.abi);
  add("os", s.os);
  add("soc", s.soc);
  add("tags", sql::JoinComma(s.tags));
  if (s.min_memory_mb > 0) add("min_memory_mb", std::to_string(s.min_memory_mb));
  return "select:" + out;
}

Result<TargetSelector> ParseTarget(const std::string& target) {
  const std::string prefix = "select:";
  if (target.rfind(prefix, 0) != 0) {
    return MakeError(ErrorKind::kInvalidInput,
                     "target '" + target + "' is not \"any\" nor \"select:KEY=VALUE;...\"");
  }
  TargetSelector s;
  std::string rest = target.substr(prefix.size());
  size_t start = 0;
  while (start < rest.size()) {
    size_t end = rest.find(';', start);
    if (end == std::string::npos) end = rest.size();
    const std::string item = rest.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "abi") {
      s.abi = value;
    } else if (key == "os") {
      s.os = value;
    } else if (key == "soc") {
      s.soc = value;
    } else if (key == "tags") {
      s.tags = sql::SplitComma(value);
    } else if (key == "min_memory_mb") {
      char* endp = nullptr;
      s.min_memory_mb = std::strtoll(value.c_str(), &endp, 10);
      if (value.empty() || *endp != 0 || s.min_memory_mb < 0) {
        return MakeError(ErrorKind::kInvalidInput,
                         "target '" + target + "': min_memory_mb '" + value + "' is not a number");
      }
    } else {
      return MakeError(ErrorKind::kInvalidInput, "target '" + target + "': unknown key '" + key +
                                                     "' (abi, os, soc, tags, min_memory_mb)");
    }
  }
  return s;
}

bool TargetMatches(const std::string& target, const std::string& job_device,
                   const DeviceTraits& d) {
  if (target.empty()) return job_device == d.name;
  if (target == kTargetAny) return true;
  auto sel = ParseTarget(target);
  if (!sel) return false;
  auto contains = [](const std::string& hay, const std::string& needle) {
    return needle.empty() || sql::Lower(hay).find(sql::Lower(needle)) != std::string::npos;
  };
  if (!sel->abi.empty() && sel->abi != d.abi) return false;
  if (!contains(d.os, sel->os) || !contains(d.cpu, sel->soc)) return false;
  if (sel->min_memory_mb > 0 && d.memory_bytes < sel->min_memory_mb * 1024 * 1024) return false;
  for (const std::string& t : sel->tags) {
    if (std::find(d.tags.begin(), d.tags.end(), t) == d.tags.end()) return false;
  }
  return true;
}

}  // namespace dfarm::store
