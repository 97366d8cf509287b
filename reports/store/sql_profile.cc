#include "reports/store/sql_profile.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dfarm::store::sql {
namespace {

// NOT NULL columns: a time that is not finite is kept as 0.
double Finite(double v) { return std::isfinite(v) ? v : 0; }

// A partition's nodes as stored: "1,2,3".
std::string JoinNodes(const std::vector<int64_t>& nodes) {
  std::string out;
  for (int64_t n : nodes) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

std::vector<int64_t> SplitNodes(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& part : SplitComma(text)) {
    try {
      out.push_back(std::stoll(part));
    } catch (const std::exception&) {
      // Not written by this store: left out, as the runner's reader does.
    }
  }
  return out;
}

Result<void> DeleteRows(Conn& db, const char* table, int64_t job_id) {
  auto s = Stmt::Prepare(db, std::string("DELETE FROM ") + table + " WHERE job_id = ?");
  if (!s) return s.error();
  s->Bind(1, job_id);
  return s->Run();
}

// Inserts `rows` (each the columns after job_id, all of one shape) into
// `table`, up to 256 rows a statement (a round trip each on PostgreSQL).
Result<void> InsertRows(Conn& db, const char* table, int64_t job_id,
                        const std::vector<std::vector<Column>>& rows) {
  constexpr size_t kRowsPerStatement = 256;
  for (size_t i = 0; i < rows.size(); i += kRowsPerStatement) {
    const size_t n = std::min(kRowsPerStatement, rows.size() - i);
    std::vector<Column> batch;
    for (size_t k = i; k < i + n; ++k) {
      batch.push_back(Column{"job_id", job_id});
      batch.insert(batch.end(), rows[k].begin(), rows[k].end());
    }
    const size_t per_row = rows[i].size() + 1;
    auto s = Stmt::Prepare(db, InsertSql(std::string("INSERT INTO ") + table,
                                         std::span<const Column>(batch.data(), per_row), n));
    if (!s) return s.error();
    s->BindColumns(batch);
    if (auto r = s->Run(); !r) return r;
  }
  return Ok();
}

}  // namespace

Result<void> ReplaceProfile(Conn& db, int64_t job_id, const std::optional<JobProfile>& profile) {
  for (const char* table : {"job_profile_nodes", "job_profile_ops", "job_profiles"}) {
    if (auto r = DeleteRows(db, table, job_id); !r) return r;
  }
  if (!profile) return Ok();
  auto s = Stmt::Prepare(db, "INSERT INTO job_profiles(job_id, runs) VALUES(?, ?)");
  if (!s) return s.error();
  s->Bind(1, job_id).Bind(2, profile->runs);
  if (auto r = s->Run(); !r) return r;
  std::vector<std::vector<Column>> ops;
  for (size_t i = 0; i < profile->by_op.size(); ++i) {
    const ProfileOp& o = profile->by_op[i];
    ops.push_back({{"idx", i},
                   {"op", o.op},
                   {"count", o.count},
                   {"total_us", Finite(o.total_us)},
                   {"pct", Finite(o.pct)}});
  }
  if (auto r = InsertRows(db, "job_profile_ops", job_id, ops); !r) return r;
  std::vector<std::vector<Column>> nodes;
  for (size_t i = 0; i < profile->nodes.size(); ++i) {
    const ProfileNode& n = profile->nodes[i];
    nodes.push_back({{"step", i},
                     {"node_index", n.index},
                     {"op", n.op},
                     {"delegate", n.delegate},
                     {"partition_index", n.partition},
                     {"nodes", JoinNodes(n.nodes)},
                     {"mean_us", Finite(n.mean_us)}});
  }
  return InsertRows(db, "job_profile_nodes", job_id, nodes);
}

namespace {

// Reads the ops of the jobs `where` selects (its one parameter bound to
// `id`) into `out`, creating each job's entry with its runs.
Result<void> ReadOps(Conn& db, const std::string& where, int64_t id,
                     std::map<int64_t, JobProfile>* out) {
  auto s = Stmt::Prepare(db,
                         "SELECT p.job_id, p.runs, o.op, o.count, o.total_us, o.pct FROM "
                         "job_profiles p LEFT JOIN job_profile_ops o ON o.job_id = p.job_id " +
                             where + " ORDER BY p.job_id, o.idx");
  if (!s) return s.error();
  s->Bind(1, id);
  for (;;) {
    auto row = s->Step();
    if (!row) return row.error();
    if (!*row) return Ok();
    JobProfile& p = (*out)[s->Int(0)];
    p.runs = s->Int(1);
    if (s->IsNull(2)) continue;  // a profile without ops
    p.by_op.push_back(ProfileOp{s->Text(2), s->Int(3), s->Double(4), s->Double(5)});
  }
}

}  // namespace

Result<std::optional<JobProfile>> ReadProfile(Conn& db, int64_t job_id) {
  std::map<int64_t, JobProfile> one;
  if (auto r = ReadOps(db, "WHERE p.job_id = ?", job_id, &one); !r) return r.error();
  if (one.empty()) return std::optional<JobProfile>();
  JobProfile profile = std::move(one.begin()->second);
  auto s = Stmt::Prepare(db,
                         "SELECT node_index, op, delegate, partition_index, nodes, mean_us FROM "
                         "job_profile_nodes WHERE job_id = ? ORDER BY step");
  if (!s) return s.error();
  s->Bind(1, job_id);
  for (;;) {
    auto row = s->Step();
    if (!row) return row.error();
    if (!*row) break;
    ProfileNode n;
    n.index = s->Int(0);
    n.op = s->Text(1);
    n.delegate = s->Text(2);
    if (!s->IsNull(3)) n.partition = s->Int(3);
    n.nodes = SplitNodes(s->Text(4));
    n.mean_us = s->Double(5);
    profile.nodes.push_back(std::move(n));
  }
  return std::optional<JobProfile>(std::move(profile));
}

Result<void> ReplaceSustained(Conn& db, int64_t job_id,
                              const std::optional<JobSustained>& sustained) {
  if (auto r = DeleteRows(db, "job_sustained", job_id); !r) return r;
  auto s = Stmt::Prepare(
      db, "UPDATE results SET sustained_s = ?, sustained_window_ms = ? WHERE job_id = ?");
  if (!s) return s.error();
  if (sustained) {
    s->Bind(1, Finite(sustained->secs)).Bind(2, Finite(sustained->window_ms));
  } else {
    s->BindNull(1).BindNull(2);
  }
  s->Bind(3, job_id);
  if (auto r = s->Run(); !r) return r;
  if (!sustained) return Ok();
  std::vector<std::vector<Column>> rows;
  for (size_t i = 0; i < sustained->windows.size(); ++i) {
    const SustainedWindow& w = sustained->windows[i];
    rows.push_back({{"idx", i},
                    {"t_ms", Finite(w.t_ms)},
                    {"runs", w.runs},
                    {"mean_us", Finite(w.mean_us)},
                    {"p50_us", Finite(w.p50_us)},
                    {"max_us", Finite(w.max_us)}});
  }
  return InsertRows(db, "job_sustained", job_id, rows);
}

Result<std::map<int64_t, JobSustained>> ReadRunSustained(Conn& db, int64_t run_id) {
  std::map<int64_t, JobSustained> out;
  auto s = Stmt::Prepare(db,
                         "SELECT r.job_id, r.sustained_s, r.sustained_window_ms, w.t_ms, w.runs, "
                         "w.mean_us, w.p50_us, w.max_us FROM results r JOIN jobs j ON j.id = "
                         "r.job_id LEFT JOIN job_sustained w ON w.job_id = r.job_id WHERE "
                         "j.run_id = ? AND r.sustained_s IS NOT NULL ORDER BY r.job_id, w.idx");
  if (!s) return s.error();
  s->Bind(1, run_id);
  for (;;) {
    auto row = s->Step();
    if (!row) return row.error();
    if (!*row) return out;
    JobSustained& curve = out[s->Int(0)];
    curve.secs = s->Double(1);
    curve.window_ms = s->Double(2);
    if (s->IsNull(3)) continue;  // a curve without windows
    curve.windows.push_back(
        SustainedWindow{s->Double(3), s->Int(4), s->Double(5), s->Double(6), s->Double(7)});
  }
}

Result<void> ReplaceTaskAccuracy(Conn& db, int64_t job_id,
                                 const std::optional<TaskAccuracy>& task) {
  if (auto r = DeleteRows(db, "job_task_metrics", job_id); !r) return r;
  if (auto r = DeleteRows(db, "job_task", job_id); !r) return r;
  if (!task) return Ok();
  const Column row[] = {{"job_id", job_id},
                        {"task", task->task},
                        {"dataset", task->dataset},
                        {"images", task->images},
                        {"per_image", task->per_image}};
  auto s = Stmt::Prepare(db, InsertSql("INSERT INTO job_task", row));
  if (!s) return s.error();
  s->BindColumns(row);
  if (auto r = s->Run(); !r) return r;
  std::vector<std::vector<Column>> rows;
  for (size_t i = 0; i < task->metrics.size(); ++i) {
    const TaskMetric& m = task->metrics[i];
    rows.push_back({{"idx", i},
                    {"name", m.name},
                    {"value", Finite(m.value)},
                    {"low", FiniteOrNull(m.low)},
                    {"high", FiniteOrNull(m.high)}});
  }
  return InsertRows(db, "job_task_metrics", job_id, rows);
}

Result<std::map<int64_t, TaskAccuracy>> ReadRunTaskAccuracy(Conn& db, int64_t run_id) {
  std::map<int64_t, TaskAccuracy> out;
  auto s = Stmt::Prepare(db,
                         "SELECT t.job_id, t.task, t.dataset, t.images, t.per_image, m.name, "
                         "m.value, m.low, m.high FROM job_task t JOIN jobs j ON j.id = t.job_id "
                         "LEFT JOIN job_task_metrics m ON m.job_id = t.job_id WHERE j.run_id = ? "
                         "ORDER BY t.job_id, m.idx");
  if (!s) return s.error();
  s->Bind(1, run_id);
  const double nan = std::nan("");
  for (;;) {
    auto row = s->Step();
    if (!row) return row.error();
    if (!*row) return out;
    TaskAccuracy& t = out[s->Int(0)];
    t.task = s->Text(1);
    t.dataset = s->Text(2);
    t.images = s->Int(3);
    t.per_image = s->Text(4);
    if (s->IsNull(5)) continue;
    t.metrics.push_back({s->Text(5), s->Double(6), s->IsNull(7) ? nan : s->Double(7),
                         s->IsNull(8) ? nan : s->Double(8)});
  }
}

Result<std::map<int64_t, JobProfile>> ReadRunProfiles(Conn& db, int64_t run_id) {
  std::map<int64_t, JobProfile> out;
  if (auto r = ReadOps(db, "JOIN jobs j ON j.id = p.job_id WHERE j.run_id = ?", run_id, &out); !r) {
    return r.error();
  }
  return out;
}

}  // namespace dfarm::store::sql
