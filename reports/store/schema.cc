#include "reports/store/schema.h"

#include <algorithm>
#include <iterator>
#include <regex>
#include <string>

#include "reports/store/store.h"

namespace dfarm::store::sql {
namespace {

// kMigrations[i] takes the schema from version i to version i + 1.
constexpr const char* kMigrations[] = {
    // v1: runs, devices, jobs, results, samples.
    R"sql(
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  created_at TEXT NOT NULL,
  finished_at TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL,
  spec_json TEXT NOT NULL);
CREATE TABLE devices(
  name TEXT PRIMARY KEY,
  abi TEXT NOT NULL DEFAULT '',
  os TEXT NOT NULL DEFAULT '',
  cpu TEXT NOT NULL DEFAULT '',
  cores INTEGER NOT NULL DEFAULT 0,
  memory_bytes INTEGER NOT NULL DEFAULT 0,
  hostname TEXT NOT NULL DEFAULT '',
  agent_version TEXT NOT NULL DEFAULT '',
  last_seen TEXT NOT NULL DEFAULT '');
CREATE TABLE jobs(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  job_key TEXT NOT NULL,
  model TEXT NOT NULL,
  model_path TEXT NOT NULL,
  model_sha256 TEXT NOT NULL,
  delegate TEXT NOT NULL,
  delegate_options TEXT NOT NULL DEFAULT '',
  device TEXT NOT NULL,
  status TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  wall_ms REAL NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL DEFAULT '');
CREATE INDEX jobs_by_run ON jobs(run_id);
CREATE INDEX jobs_by_key ON jobs(job_key);
CREATE TABLE results(
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
  init_us REAL, first_us REAL, warmup_mean_us REAL, mean_us REAL, std_us REAL,
  min_us REAL, max_us REAL, p50_us REAL, p90_us REAL, p99_us REAL,
  num_runs INTEGER, peak_rss_bytes INTEGER, arena_bytes INTEGER,
  exit_code INTEGER NOT NULL,
  signal INTEGER NOT NULL,
  runner_json TEXT NOT NULL,
  stderr_tail TEXT NOT NULL,
  finished_at TEXT NOT NULL);
CREATE TABLE samples(
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  value_us REAL NOT NULL,
  PRIMARY KEY(job_id, idx)) WITHOUT ROWID;
)sql",
    // v2: per-job thread count, attempts and failover, device state,
    // an index for the scheduler's and dashboard's "pending jobs of a run".
    R"sql(
ALTER TABLE jobs ADD COLUMN num_threads INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN moved_from TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN state TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN state_reason TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_by_run_status ON jobs(run_id, status);
CREATE INDEX jobs_by_device ON jobs(device);
)sql",
    // v3: where each node ran (the runner's "placement"; partitions
    // NULL when it reported none) and the device state the agent read around
    // the runner (JSON objects, NULL when unread), with its hot/throttled flags.
    R"sql(
ALTER TABLE results ADD COLUMN partitions INTEGER;
ALTER TABLE results ADD COLUMN state_before TEXT;
ALTER TABLE results ADD COLUMN state_after TEXT;
ALTER TABLE results ADD COLUMN started_hot INTEGER NOT NULL DEFAULT 0;
ALTER TABLE results ADD COLUMN throttled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE results ADD COLUMN hot_threshold_c REAL NOT NULL DEFAULT 0;
ALTER TABLE results ADD COLUMN state_note TEXT NOT NULL DEFAULT '';
CREATE TABLE placement(
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  node_index INTEGER NOT NULL,
  op TEXT NOT NULL,
  delegate TEXT NOT NULL,
  partition_index INTEGER,
  folded INTEGER NOT NULL DEFAULT 0,
  reason TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(job_id, node_index)) WITHOUT ROWID;
)sql",
    // v4: per-output accuracy against the reference, the
    // artifacts pushed, the owner of a run (resume lock) and its runtime
    // build, and indexes for the dashboard (runs by time, results by
    // model + delegate across runs).
    R"sql(
CREATE TABLE output_accuracy(
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  output_index INTEGER NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  reference TEXT NOT NULL DEFAULT '',
  compared INTEGER NOT NULL DEFAULT 0,
  mean_abs_error REAL,
  std_abs_error REAL,
  max_abs_error REAL,
  rmse REAL,
  max_abs_error_lsb REAL,
  nan_count INTEGER NOT NULL DEFAULT 0,
  inf_count INTEGER NOT NULL DEFAULT 0,
  reference_nan_count INTEGER NOT NULL DEFAULT 0,
  reference_inf_count INTEGER NOT NULL DEFAULT 0,
  top1_agree INTEGER,
  top5_agree INTEGER,
  PRIMARY KEY(job_id, output_index)) WITHOUT ROWID;
CREATE TABLE device_telemetry(
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  phase TEXT NOT NULL,
  unix_ms INTEGER NOT NULL,
  hottest_temp_c REAL,
  load_avg_1m REAL,
  battery_temp_c REAL,
  battery_level_pct INTEGER,
  PRIMARY KEY(job_id, phase)) WITHOUT ROWID;
CREATE TABLE artifacts(
  sha256 TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  size_bytes INTEGER NOT NULL,
  first_seen TEXT NOT NULL,
  host_path TEXT NOT NULL DEFAULT '');
ALTER TABLE runs ADD COLUMN owner_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN owner_host TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_since INTEGER NOT NULL DEFAULT 0;
CREATE TABLE run_runners(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  host_path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY(run_id, host_path)) WITHOUT ROWID;
CREATE INDEX runs_by_created ON runs(created_at);
CREATE INDEX jobs_by_model_delegate ON jobs(model_sha256, delegate, delegate_options, device);
)sql",
    // v5: the threads the delegate ran with (the runner's threads_used; NULL
    // when the runner did not report it).
    R"sql(
ALTER TABLE results ADD COLUMN threads_used INTEGER;
)sql",
    // v6: independent trials of a cell (benchmark.repeats), the
    // runner name and build of each job, the run a rerun was made from, and
    // run tags (baselines).
    R"sql(
ALTER TABLE jobs ADD COLUMN trial INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN runner TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN runner_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN parent_run_id INTEGER NOT NULL DEFAULT 0;
CREATE TABLE run_tags(
  name TEXT PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  tagged_at TEXT);
CREATE INDEX run_tags_by_run ON run_tags(run_id);
)sql",
    // v7: accuracy over several input sets (spec model "inputs"):
    // how many sets the figures cover (the runner's accuracy.sets, the same
    // on every output row of a job) and the fraction of sets whose top-1 /
    // top-5 agreed; NULL for runs on seeded random inputs.
    R"sql(
ALTER TABLE output_accuracy ADD COLUMN input_sets INTEGER;
ALTER TABLE output_accuracy ADD COLUMN top1_agreement REAL;
ALTER TABLE output_accuracy ADD COLUMN top5_agreement REAL;
)sql",
    // v8: signal to error of each output in decibels (the
    // runner's snr_db and psnr_db); NULL when the runner reported none (no
    // finite figure, or a runner before them).
    R"sql(
ALTER TABLE output_accuracy ADD COLUMN snr_db REAL;
ALTER TABLE output_accuracy ADD COLUMN psnr_db REAL;
)sql",
    // v9: the history of device states (every SetDeviceState),
    // and indexes for the dashboard's runs filters: "runs with a job on this
    // device / of this model / with this delegate" is one index probe per run.
    R"sql(
CREATE TABLE device_events(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  at TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '');
CREATE INDEX device_events_by_name ON device_events(name, id);
CREATE INDEX jobs_by_device_run ON jobs(device, run_id);
CREATE INDEX jobs_by_delegate_run ON jobs(delegate, run_id);
CREATE INDEX jobs_by_model_run ON jobs(model, run_id);
CREATE INDEX jobs_by_model_sha256_run ON jobs(model_sha256, run_id);
)sql",
    // v10: the cells of the matrix (ListCells) and one cell's jobs
    // in run and trial order (ListCellJobs) from one covering index, without
    // reading the jobs table.
    R"sql(
CREATE INDEX jobs_by_cell ON jobs(model_sha256, delegate, delegate_options, device, runner,
  num_threads, run_id, trial);
)sql",
    // v11: the distributed farm. A run of mode "queue" is run by
    // `dfarm node` processes: its jobs carry what a node needs (payload, the
    // artifacts in blobs) and where they may run (target: "" = the job's
    // device, "any", or a selector as JSON); a node claims a job (claimed_by,
    // claim_id, a lease renewed by its heartbeat until lease_until, database
    // clock) and its result commits only under that claim. job_claims keeps
    // every claim and how it ended; nodes every node and its heartbeat.
    R"sql(
ALTER TABLE runs ADD COLUMN mode TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN target TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN payload TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN claim_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_queued ON jobs(id) WHERE status = 'queued';
CREATE INDEX jobs_claimed ON jobs(claimed_by, status) WHERE claimed_by <> '';
CREATE TABLE nodes(
  name TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  started_at TEXT NOT NULL,
  heartbeat_unix INTEGER NOT NULL,
  state TEXT NOT NULL,
  devices TEXT NOT NULL DEFAULT '');
CREATE TABLE job_claims(
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  claim_id INTEGER NOT NULL,
  node TEXT NOT NULL,
  device TEXT NOT NULL,
  claimed_unix INTEGER NOT NULL,
  ended_unix INTEGER NOT NULL DEFAULT 0,
  outcome TEXT NOT NULL DEFAULT '');
CREATE INDEX job_claims_by_job ON job_claims(job_id, claim_id);
CREATE TABLE blobs(
  sha256 TEXT PRIMARY KEY,
  size_bytes INTEGER NOT NULL,
  chunks INTEGER NOT NULL);
CREATE TABLE blob_chunks(
  sha256 TEXT NOT NULL,
  idx INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY(sha256, idx)) WITHOUT ROWID;
ALTER TABLE devices ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN tags TEXT NOT NULL DEFAULT '';
)sql",
    // v12: device health. The known outputs of a health model
    // for one runner build (the sha256 of each output, joined by ","), as
    // the first device that ran the check recorded them; the check compares
    // every later run with them (harness/devices/health.h).
    R"sql(
CREATE TABLE health_golden(
  model_sha256 TEXT NOT NULL,
  runner_sha256 TEXT NOT NULL,
  outputs TEXT NOT NULL,
  device TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  PRIMARY KEY(model_sha256, runner_sha256)) WITHOUT ROWID;
)sql",
    // v13: runner identity. The kind of the runner a job ran
    // ("dfarm", "tflite", "benchmark_model", "inference_diff"; '' in older
    // runs) and the version string it reported ('' when it reported none).
    R"sql(
ALTER TABLE jobs ADD COLUMN runner_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN runner_version TEXT NOT NULL DEFAULT '';
)sql",
    // v14: per-op profiles (spec benchmark.profile, the runner's
    // --profile). job_profiles: one row per profiled job with the runs the
    // times are the mean of; job_profile_ops: the time per op type as the
    // runner listed it (idx: its order); job_profile_nodes: one row per
    // interpreter step (a node, or a delegated partition with its nodes as
    // "1,2,3"), in execution order.
    R"sql(
CREATE TABLE job_profiles(
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
  runs INTEGER NOT NULL);
CREATE TABLE job_profile_ops(
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  op TEXT NOT NULL,
  count INTEGER NOT NULL,
  total_us REAL NOT NULL,
  pct REAL NOT NULL,
  PRIMARY KEY(job_id, idx)) WITHOUT ROWID;
CREATE TABLE job_profile_nodes(
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  node_index INTEGER NOT NULL,
  op TEXT NOT NULL,
  delegate TEXT NOT NULL,
  partition_index INTEGER,
  nodes TEXT NOT NULL DEFAULT '',
  mean_us REAL NOT NULL,
  PRIMARY KEY(job_id, step)) WITHOUT ROWID;
)sql",
    // v15: noise control. noisy: the job started after the
    // cooldown's load rule gave up (the device's CPUs busier than the
    // spec's max_cpu_busy_pct); the readings are in state_note. energy_mj:
    // the estimated energy of one inference (battery power while the runner
    // ran x mean latency), NULL where the device exposes no battery figures.
    R"sql(
ALTER TABLE results ADD COLUMN noisy INTEGER NOT NULL DEFAULT 0;
ALTER TABLE results ADD COLUMN energy_mj REAL;
)sql",
    // v16: sustained mode (spec benchmark.sustained_s, the
    // runner's --sustained-secs): results.sustained_s and
    // sustained_window_ms (NULL for other jobs), and the latency curve of
    // one job, one row per time window (t_ms: the window's start after the
    // first measured run; runs: the runs that started in it).
    R"sql(
ALTER TABLE results ADD COLUMN sustained_s REAL;
ALTER TABLE results ADD COLUMN sustained_window_ms REAL;
CREATE TABLE job_sustained(
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  t_ms REAL NOT NULL,
  runs INTEGER NOT NULL,
  mean_us REAL NOT NULL,
  p50_us REAL NOT NULL,
  max_us REAL NOT NULL,
  PRIMARY KEY(job_id, idx)) WITHOUT ROWID;
)sql",
    // v17: a delegate's cold and warm init (the runner's
    // metrics.init_cold_us / init_warm_us, NULL when it reported none), and
    // the OpenCL devices an agent saw (a JSON list, '' before it).
    R"sql(
ALTER TABLE results ADD COLUMN init_cold_us REAL;
ALTER TABLE results ADD COLUMN init_warm_us REAL;
ALTER TABLE devices ADD COLUMN opencl TEXT NOT NULL DEFAULT '';
)sql",
    // v18: a job's inputs, part of its cell's identity (store::Cell):
    // "sets:<16 hex>" for real input sets, "seeded:1/dfarm" for the runner's
    // seeded random inputs, which every job before v18 ran on. jobs_by_cell
    // covers it.
    R"sql(
ALTER TABLE jobs ADD COLUMN inputs TEXT NOT NULL DEFAULT 'seeded:1/dfarm';
DROP INDEX jobs_by_cell;
CREATE INDEX jobs_by_cell ON jobs(model_sha256, delegate, delegate_options, device, runner,
  num_threads, inputs, run_id, trial);
)sql",
    // v19: paired A/B (spec "pairing"): the pair a job belongs to, 1, 2, ...
    // in its run, shared by the baseline's and the candidate's job of one
    // trial of one cell on one device; 0 for jobs that are not paired.
    R"sql(
ALTER TABLE jobs ADD COLUMN pair_number INTEGER NOT NULL DEFAULT 0;
)sql",
    // v20: operating a farm. A queue run's priority (0..9, higher claimed
    // first) and how long its jobs wait for a live node that serves their
    // device (unserved_timeout_s); who set a device's state (state_by:
    // "dfarm", "health" or "operator"; "" before) and, for an operator,
    // USER@HOST (state_user), on the device and on each of its events.
    // jobs_queued_by_run: a run's queued jobs in id order (ClaimJob, per run).
    R"sql(
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 5;
ALTER TABLE runs ADD COLUMN unserved_timeout_s INTEGER NOT NULL DEFAULT 900;
ALTER TABLE devices ADD COLUMN state_by TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN state_user TEXT NOT NULL DEFAULT '';
ALTER TABLE device_events ADD COLUMN set_by TEXT NOT NULL DEFAULT '';
ALTER TABLE device_events ADD COLUMN user_host TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_queued_by_run ON jobs(run_id, id) WHERE status = 'queued';
)sql",
    // v21: task accuracy on a labelled set (spec "eval"): per job the task,
    // the set's identity, the images evaluated and what a paired comparison
    // needs per image (JSON), and its metrics in order (fractions with a
    // bootstrap interval; NULL bounds when there is none).
    R"sql(
CREATE TABLE job_task(
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
  task TEXT NOT NULL,
  dataset TEXT NOT NULL,
  images INTEGER NOT NULL,
  per_image TEXT NOT NULL);
CREATE TABLE job_task_metrics(
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  name TEXT NOT NULL,
  value REAL NOT NULL,
  low REAL,
  high REAL,
  PRIMARY KEY(job_id, idx)) WITHOUT ROWID;
)sql",
    // v22: the change counter (Reader::ChangeCount, the dashboard's live
    // mode): store_changes' n summed grows in the same transaction as every
    // run, job status, result, tag or device state change; heartbeats
    // (nodes, leases, last_seen, a run's owner_since) leave it alone.
    // Triggers bump it, so every write path counts. SQLite's one writer
    // bumps shard 0; PostgreSQL's text is kPostgresTexts': deferred
    // triggers bump once per transaction at its commit, after every other
    // row lock it takes (no deadlock with the queue's row locks), on a
    // shard by backend (concurrent writers rarely share a row). Jobs of a
    // spec runner named "default" become the default runner's ('').
    R"sql(
UPDATE jobs SET runner = '' WHERE runner = 'default';
CREATE TABLE store_changes(shard INTEGER PRIMARY KEY, n INTEGER NOT NULL);
INSERT INTO store_changes(shard, n) VALUES(0, 0);
CREATE TRIGGER runs_changed_insert AFTER INSERT ON runs BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER runs_changed_delete AFTER DELETE ON runs BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER runs_changed_update AFTER UPDATE ON runs
  WHEN OLD.status IS NOT NEW.status OR OLD.finished_at IS NOT NEW.finished_at
    OR OLD.name IS NOT NEW.name OR OLD.parent_run_id IS NOT NEW.parent_run_id
    OR OLD.mode IS NOT NEW.mode BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER jobs_changed_insert AFTER INSERT ON jobs BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER jobs_changed_delete AFTER DELETE ON jobs BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER jobs_changed_update AFTER UPDATE ON jobs
  WHEN OLD.status IS NOT NEW.status OR OLD.device IS NOT NEW.device BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER results_changed_insert AFTER INSERT ON results BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER results_changed_update AFTER UPDATE ON results BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER run_tags_changed_insert AFTER INSERT ON run_tags BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER run_tags_changed_delete AFTER DELETE ON run_tags BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER run_tags_changed_update AFTER UPDATE ON run_tags BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER devices_changed_insert AFTER INSERT ON devices BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
CREATE TRIGGER devices_changed_update AFTER UPDATE ON devices
  WHEN OLD.state IS NOT NEW.state OR OLD.state_reason IS NOT NEW.state_reason
    OR OLD.node IS NOT NEW.node BEGIN
  UPDATE store_changes SET n = n + 1 WHERE shard = 0; END;
)sql",
    // v23: device classes (store::DeviceClassOf): the class of the device
    // that claimed a job aimed at `any` or a selector ('' otherwise, and in
    // older runs), the spec's classes of a queue run, and the device of each
    // job's cell, cell_device: "class:" and its class, else its device.
    // jobs_by_cell is on cell_device, so that the cell queries read that
    // index alone (a generated column would not be covered on SQLite).
    // Triggers keep cell_device right on every write path that sets device
    // or device_class and not cell_device; AddJobs and ClaimJob write it
    // themselves, so the triggers' guard skips them. PostgreSQL's text is
    // kPostgresTexts'.
    R"sql(
ALTER TABLE jobs ADD COLUMN device_class TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN cell_device TEXT NOT NULL DEFAULT '';
UPDATE jobs SET cell_device = device;
ALTER TABLE runs ADD COLUMN device_classes TEXT NOT NULL DEFAULT '';
DROP INDEX jobs_by_cell;
CREATE INDEX jobs_by_cell ON jobs(model_sha256, delegate, delegate_options, cell_device, runner,
  num_threads, inputs, run_id, trial);
CREATE TRIGGER jobs_cell_device_insert AFTER INSERT ON jobs
  WHEN NEW.cell_device IS NOT
    (CASE WHEN NEW.device_class = '' THEN NEW.device ELSE 'class:' || NEW.device_class END) BEGIN
  UPDATE jobs SET cell_device =
    (CASE WHEN NEW.device_class = '' THEN NEW.device ELSE 'class:' || NEW.device_class END)
    WHERE id = NEW.id; END;
CREATE TRIGGER jobs_cell_device_update AFTER UPDATE OF device, device_class ON jobs
  WHEN NEW.cell_device IS NOT
    (CASE WHEN NEW.device_class = '' THEN NEW.device ELSE 'class:' || NEW.device_class END) BEGIN
  UPDATE jobs SET cell_device =
    (CASE WHEN NEW.device_class = '' THEN NEW.device ELSE 'class:' || NEW.device_class END)
    WHERE id = NEW.id; END;
)sql",
};

// The migrations whose PostgreSQL text is written out rather than
// translated (ForDialect does not translate triggers): the version each
// builds and its text.
struct PostgresText {
  int version;
  const char* sql;
};
constexpr PostgresText kPostgresTexts[] = {
    {22, R"sql(
UPDATE jobs SET runner = '' WHERE runner = 'default';
CREATE TABLE store_changes(shard BIGINT PRIMARY KEY, n BIGINT NOT NULL);
INSERT INTO store_changes(shard, n) SELECT g, 0 FROM generate_series(0, 15) AS g;
CREATE FUNCTION dfarm_note_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('dfarm.changed', true) IS DISTINCT FROM txid_current()::text THEN
    UPDATE store_changes SET n = n + 1 WHERE shard = pg_backend_pid() % 16;
    PERFORM set_config('dfarm.changed', txid_current()::text, true);
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER runs_changed AFTER INSERT OR DELETE ON runs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dfarm_note_change();
CREATE CONSTRAINT TRIGGER runs_changed_update AFTER UPDATE ON runs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.finished_at IS DISTINCT FROM NEW.finished_at
    OR OLD.name IS DISTINCT FROM NEW.name OR OLD.parent_run_id IS DISTINCT FROM NEW.parent_run_id
    OR OLD.mode IS DISTINCT FROM NEW.mode)
  EXECUTE FUNCTION dfarm_note_change();
CREATE CONSTRAINT TRIGGER jobs_changed AFTER INSERT OR DELETE ON jobs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dfarm_note_change();
CREATE CONSTRAINT TRIGGER jobs_changed_update AFTER UPDATE ON jobs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.device IS DISTINCT FROM NEW.device)
  EXECUTE FUNCTION dfarm_note_change();
CREATE CONSTRAINT TRIGGER results_changed AFTER INSERT OR UPDATE ON results
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dfarm_note_change();
CREATE CONSTRAINT TRIGGER run_tags_changed AFTER INSERT OR UPDATE OR DELETE ON run_tags
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dfarm_note_change();
CREATE CONSTRAINT TRIGGER devices_changed AFTER INSERT ON devices
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dfarm_note_change();
CREATE CONSTRAINT TRIGGER devices_changed_update AFTER UPDATE ON devices
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.state_reason IS DISTINCT FROM NEW.state_reason
    OR OLD.node IS DISTINCT FROM NEW.node)
  EXECUTE FUNCTION dfarm_note_change();
)sql"},
    {23, R"sql(
ALTER TABLE jobs ADD COLUMN device_class TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN cell_device TEXT NOT NULL DEFAULT '';
UPDATE jobs SET cell_device = device;
ALTER TABLE runs ADD COLUMN device_classes TEXT NOT NULL DEFAULT '';
DROP INDEX jobs_by_cell;
CREATE INDEX jobs_by_cell ON jobs(model_sha256, delegate, delegate_options, cell_device, runner,
  num_threads, inputs, run_id, trial);
CREATE FUNCTION dfarm_cell_device() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.cell_device := CASE WHEN NEW.device_class = '' THEN NEW.device
                          ELSE 'class:' || NEW.device_class END;
  RETURN NEW;
END $$;
CREATE TRIGGER jobs_cell_device BEFORE INSERT OR UPDATE OF device, device_class ON jobs
  FOR EACH ROW EXECUTE FUNCTION dfarm_cell_device();
)sql"},
};

// Migration v (to version v + 1) as the dialect writes it.
std::string MigrationText(int v, Dialect d) {
  if (d == Dialect::kPostgres) {
    for (const PostgresText& t : kPostgresTexts) {
      if (t.version == v + 1) return t.sql;
    }
  }
  return ForDialect(kMigrations[v], d);
}

constexpr int kSchemaVersion = static_cast<int>(std::size(kMigrations));

// The names of the tables of the database (its current schema).
Result<std::vector<std::string>> TableNames(Conn& db) {
  auto s = Stmt::Prepare(db, db.dialect() == Dialect::kPostgres
                                 ? "SELECT table_name FROM information_schema.tables WHERE "
                                   "table_schema = current_schema() ORDER BY table_name"
                                 : "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY "
                                   "name");
  if (!s) return s.error();
  std::vector<std::string> out;
  for (;;) {
    auto row = s->Step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(s->Text(0));
  }
}

Result<int> ReadSchemaVersion(Conn& db) {
  auto tables = TableNames(db);
  if (!tables) return tables.error();
  if (std::find(tables->begin(), tables->end(), "schema_version") == tables->end()) {
    if (!tables->empty()) {
      return MakeError("it holds tables but no schema_version: not a DelegateFarm database");
    }
    return 0;
  }
  auto s = Stmt::Prepare(db, "SELECT max(version) FROM schema_version");
  if (!s) return s.error();
  if (auto r = s->Step(); !r) return r.error();
  return static_cast<int>(s->Int(0));
}

// Every PostgreSQL host migrates under this lock (pg_advisory_xact_lock).
constexpr int64_t kMigrationLock = 0x64666172;  // "dfar"

}  // namespace

int SchemaVersion() { return kSchemaVersion; }

std::string ForDialect(const std::string& sqlite_sql, Dialect d) {
  if (d == Dialect::kSqlite) return sqlite_sql;
  std::string s = std::regex_replace(sqlite_sql, std::regex(R"(\bid INTEGER PRIMARY KEY\b)"),
                                     "id BIGSERIAL PRIMARY KEY");
  s = std::regex_replace(s, std::regex(R"(\bINTEGER\b)"), "BIGINT");
  s = std::regex_replace(s, std::regex(R"(\bREAL\b)"), "DOUBLE PRECISION");
  s = std::regex_replace(s, std::regex(R"(\bBLOB\b)"), "BYTEA");
  return std::regex_replace(s, std::regex(R"(\)\s*WITHOUT ROWID)"), ")");
}

Result<void> Migrate(Conn& db, int target) {
  // A store already at the target (every open but a new store's or an
  // upgrade's) is only read, outside a transaction: SQLite's BEGIN
  // IMMEDIATE takes the write lock, so an open waited out the busy timeout
  // behind a sweep holding a write transaction and then failed with
  // "database is locked", where WAL lets a reader read. A migration that
  // another connection starts meanwhile cannot lower the version.
  if (auto version = ReadSchemaVersion(db);
      version && *version >= target && *version <= kSchemaVersion) {
    return Ok();
  }
  auto tx = Transaction::Begin(db);
  if (!tx) return tx.error();
  if (db.dialect() == Dialect::kPostgres) {
    if (auto r = db.Exec("SELECT pg_advisory_xact_lock(" + std::to_string(kMigrationLock) + ")");
        !r) {
      return r;
    }
  }
  auto version = ReadSchemaVersion(db);
  if (!version) return version.error();
  if (*version > kSchemaVersion) {
    return MakeError("its schema version " + std::to_string(*version) +
                     " is newer than this build's " + std::to_string(kSchemaVersion) +
                     " (upgrade dfarm)");
  }
  if (*version >= target) return tx->Commit();
  if (*version == 0) {
    if (auto r = db.Exec(ForDialect("CREATE TABLE schema_version(version INTEGER NOT NULL, "
                                    "applied_at TEXT NOT NULL)",
                                    db.dialect()));
        !r) {
      return r;
    }
  }
  for (int v = *version; v < target; ++v) {
    if (auto r = db.Exec(MigrationText(v, db.dialect())); !r) {
      return MakeError("migration to schema version " + std::to_string(v + 1) +
                       " failed: " + r.message());
    }
    auto s = Stmt::Prepare(db, "INSERT INTO schema_version(version, applied_at) VALUES(?, ?)");
    if (!s) return s.error();
    s->Bind(1, v + 1).Bind(2, NowIso8601());
    if (auto r = s->Run(); !r) return r;
  }
  return tx->Commit();
}

}  // namespace dfarm::store::sql
