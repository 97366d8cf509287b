#include "reports/store/sql_queue.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "agent/base/sha256.h"

namespace dfarm::store::sql {
namespace {

constexpr size_t kBlobChunkBytes = 4 << 20;  // 4 MiB a row

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

Result<std::optional<int64_t>> ClaimJob(Conn& db, const std::string& node,
                                        const DeviceTraits& device, int64_t lease_s) {
  const std::string now = NowUnixSql(db.dialect());
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  // Candidates, oldest first, read without locks; then the first that
  // matches and that no other node is claiming right now is locked (SKIP
  // LOCKED: one row, so the others stay free for the other nodes).
  auto q = Stmt::Prepare(
      db,
      "SELECT j.id, j.device, j.target FROM jobs j WHERE j.status = ? AND (j.target <> '' OR "
      "j.device = ?) AND j.run_id IN (SELECT r.id FROM runs r WHERE r.mode = ? AND r.status = ?) "
      "ORDER BY j.id LIMIT 200");
  if (!q) return q.error();
  q->Bind(1, kJobQueued).Bind(2, device.name).Bind(3, kRunModeQueue).Bind(4, kRunRunning);
  std::vector<int64_t> matching;
  for (;;) {
    auto row = q->Step();
    if (!row) return row.error();
    if (!*row) break;
    if (TargetMatches(q->Text(2), q->Text(1), device)) matching.push_back(q->Int(0));
  }
  std::optional<int64_t> chosen;
  if (!matching.empty()) {
    std::string in;
    for (size_t i = 0; i < matching.size(); ++i) in += i ? ", ?" : "?";
    auto lock = Stmt::Prepare(db, "SELECT id FROM jobs WHERE id IN (" + in +
                                      ") AND status = ? ORDER BY id LIMIT 1" +
                                      ForUpdateSkipLocked(db.dialect()));
    if (!lock) return lock.error();
    int k = 1;
    for (int64_t id : matching) lock->Bind(k++, id);
    lock->Bind(k, kJobQueued);
    auto row = lock->Step();
    if (!row) return row.error();
    if (*row) chosen = lock->Int(0);
    if (auto r = lock->Run(); !r) return r.error();
  }
  if (!chosen) {
    if (auto r = tx->Commit(); !r) return r.error();
    return std::optional<int64_t>();
  }
  auto u = Stmt::Prepare(db,
                         "UPDATE jobs SET status = ?, claimed_by = ?, claim_id = claim_id + 1, "
                         "lease_until = " +
                             now +
                             " + ?, device = ?, started_at = ? WHERE id = ? AND status = ? "
                             "RETURNING claim_id");
  if (!u) return u.error();
  u->Bind(1, kJobRunning).Bind(2, node).Bind(3, lease_s).Bind(4, device.name);
  u->Bind(5, NowIso8601()).Bind(6, *chosen).Bind(7, kJobQueued);
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
  const std::string lock_sql = db.dialect() == Dialect::kPostgres ? " FOR NO KEY UPDATE" : "";
  if (auto r = RunWith(db, "SELECT id FROM runs WHERE id = ?" + lock_sql, {run_id}); !r) return r;
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
