#include "reports/store/store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "reports/store/sql.h"
#include "reports/store/store_test_fixture.h"

namespace dfarm::store {
namespace {

namespace fs = std::filesystem;

TEST_F(SqliteStoreTest, MigratesEmptyFile) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto runs = store->ListRuns();
  ASSERT_TRUE(runs.ok()) << runs.message();
  EXPECT_TRUE(runs->empty());

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT max(version) FROM schema_version", -1, &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), CurrentSchemaVersion());
  sqlite3_finalize(st);
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

// Opening a store of the current schema only reads it: a writer holding
// its write transaction (a sweep recording a result, or stopped in the
// middle of one) does not keep a dashboard or a report from opening and
// reading the store. Before, every open took the write lock to check the
// schema and failed with "database is locked" after the busy timeout.
TEST_F(SqliteStoreTest, OpensAndReadsWhileAWriterHoldsItsTransaction) {
  ASSERT_NE(Open(), nullptr);  // a new store: created and migrated
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &writer), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(writer, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(writer);
  auto reader = OpenStore(path_);
  ASSERT_TRUE(reader.ok()) << reader.message();
  auto runs = (*reader)->ListRuns();
  EXPECT_TRUE(runs.ok()) << runs.message();
  EXPECT_EQ(sqlite3_exec(writer, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(writer);
}

// Every SQLite connection of the store (sql::OpenSqlite opens them all)
// fsyncs each commit: PRAGMA synchronous is per connection, so it is read on
// the connection the store would use. 2 = FULL, 1 = NORMAL.
TEST_F(SqliteStoreTest, CommitsAreSyncedToDisk) {
  auto pragma = [](sql::Conn& db, const char* name) {
    auto s = sql::Stmt::Prepare(db, std::string("PRAGMA ") + name);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) return std::string();
    auto row = s->Step();
    EXPECT_TRUE(row.ok() && *row);
    return s->Text(0);
  };
  auto full = sql::OpenSqlite(path_);
  ASSERT_TRUE(full.ok()) << full.message();
  EXPECT_EQ(pragma(**full, "synchronous"), "2");
  EXPECT_EQ(pragma(**full, "journal_mode"), "wal");
  auto normal = sql::OpenSqlite(path_, SqliteSync::kNormal);
  ASSERT_TRUE(normal.ok()) << normal.message();
  EXPECT_EQ(pragma(**normal, "synchronous"), "1");
  EXPECT_NE(Open(), nullptr);
}

TEST(RedactUrlTest, HidesEveryPassword) {
  EXPECT_EQ(RedactUrl("postgresql://dfarm:secret@db:5432/farm"),
            "postgresql://dfarm:***@db:5432/farm");
  EXPECT_EQ(RedactUrl("postgresql://dfarm@db/farm?password=secret"),
            "postgresql://dfarm@db/farm?password=***");
  EXPECT_EQ(RedactUrl("postgres://db/farm?user=u&password=s%40cret&sslmode=require"),
            "postgres://db/farm?user=u&password=***&sslmode=require");
  EXPECT_EQ(RedactUrl("postgresql://u:one@db/farm?sslpassword=two&password=three"),
            "postgresql://u:***@db/farm?sslpassword=***&password=***");
  EXPECT_EQ(RedactUrl("postgresql://db?password=a@b:c"), "postgresql://db?password=***");
  EXPECT_EQ(RedactUrl("postgresql://db/farm?application_name=password"),
            "postgresql://db/farm?application_name=password");
  EXPECT_EQ(RedactUrl("postgresql://u@db/farm"), "postgresql://u@db/farm");
  EXPECT_EQ(RedactUrl("farm.db"), "farm.db");
}

// The message of a store that cannot be reached names it without its password.
TEST(RedactUrlTest, AnUnreachableDatabaseIsNamedWithoutItsPassword) {
  auto opened =
      OpenStore("postgresql://dfarm:s3cr3tA@127.0.0.1:1/farm?password=s3cr3tB&connect_timeout=5");
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.message().find("'postgresql://dfarm:***@127.0.0.1:1/farm?password=***&"),
            std::string::npos)
      << opened.message();
  EXPECT_EQ(opened.message().find("s3cr3t"), std::string::npos) << opened.message();
}

TEST_P(StoreTest, RoundTripAndReopen) {
  int64_t run_id = 0;
  std::vector<int64_t> ids;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    auto run = store->CreateRun("quick", R"({"name":"quick"})");
    ASSERT_TRUE(run.ok()) << run.message();
    run_id = *run;
    auto added = store->AddJobs(run_id, {MakeJob("a.tflite"), MakeJob("b.tflite")});
    ASSERT_TRUE(added.ok()) << added.message();
    ids = *added;
    ASSERT_EQ(ids.size(), 2u);
    ASSERT_TRUE(store->MarkJobRunning(ids[0], 0).ok());

    JobOutcome ok;
    ok.status = "ok";
    ok.exit_code = 0;
    ok.wall_ms = 123.5;
    JobMetrics m;
    m.init_us = 1000;
    m.first_us = 2000;
    m.mean_us = 1500.5;
    m.p50_us = 1400;
    m.p90_us = 1800;
    m.p99_us = 1900;
    m.num_runs = 3;
    m.peak_rss_bytes = 50 << 20;
    m.arena_bytes = 1 << 20;
    m.threads_used = 2;
    ok.metrics = m;
    ok.samples_us = {1400, 1500, 1600.25};
    ok.runner_json = R"({"status":"ok"})";
    ASSERT_TRUE(store->RecordJobResult(ids[0], ok).ok());

    JobOutcome bad;
    bad.status = "infra";
    bad.error = "device 'local' unreachable";
    ASSERT_TRUE(store->RecordJobResult(ids[1], bad).ok());
    ASSERT_TRUE(store->FinishRun(run_id, kRunFinished).ok());

    DeviceRow d;
    d.name = "local";
    d.abi = "x86_64";
    d.cores = 2;
    ASSERT_TRUE(store->UpsertDevice(d).ok());
    d.cores = 4;
    ASSERT_TRUE(store->UpsertDevice(d).ok());
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto runs = store->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].name, "quick");
  EXPECT_EQ((*runs)[0].status, "finished");
  EXPECT_EQ((*runs)[0].spec_json, R"({"name":"quick"})");
  EXPECT_EQ((*runs)[0].created_at.size(), 20u);
  EXPECT_FALSE((*runs)[0].finished_at.empty());

  auto jobs = store->ListJobs(run_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  const JobRow& a = (*jobs)[0];
  EXPECT_EQ(a.model, "a.tflite");
  EXPECT_EQ(a.status, "ok");
  EXPECT_EQ(a.delegate_options, "a:1");
  EXPECT_DOUBLE_EQ(a.wall_ms, 123.5);
  ASSERT_TRUE(a.metrics.has_value());
  EXPECT_DOUBLE_EQ(a.metrics->mean_us, 1500.5);
  EXPECT_EQ(a.metrics->peak_rss_bytes, 50 << 20);
  EXPECT_EQ(a.metrics->num_runs, 3);
  EXPECT_EQ(a.metrics->threads_used, 2);
  const JobRow& b = (*jobs)[1];
  EXPECT_EQ(b.status, "infra");
  EXPECT_EQ(b.error, "device 'local' unreachable");
  EXPECT_FALSE(b.metrics.has_value());

  auto samples = store->GetSamples(ids[0]);
  ASSERT_TRUE(samples.ok());
  EXPECT_EQ(*samples, (std::vector<double>{1400, 1500, 1600.25}));
  auto detail = store->GetJobDetail(ids[0]);
  ASSERT_TRUE(detail.ok());
  EXPECT_EQ(detail->runner_json, R"({"status":"ok"})");
  auto job = store->GetJob(ids[1]);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->status, "infra");

  auto devices = store->ListDevices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].cores, 4);
}

TEST_P(StoreTest, ErrorsNameTheThing) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->GetRun(42);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.message().find("no run 42"), std::string::npos);
  EXPECT_FALSE(store->MarkJobRunning(7, 0).ok());
  JobOutcome o;
  o.status = "queued";
  EXPECT_FALSE(store->RecordJobResult(1, o).ok());
  EXPECT_FALSE(store->FinishRun(1, "bogus").ok());
  // A job of a run that does not exist violates the foreign key.
  EXPECT_FALSE(store->AddJob(99, MakeJob("c.tflite")).ok());
}

TEST_F(SqliteStoreTest, RefusesForeignFiles) {
  {
    std::ofstream(path_) << "this is not sqlite, just some text that is long enough to matter....."
                            "..............................................................";
  }
  auto s = OpenSqliteStore(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path_), std::string::npos);

  auto missing = OpenSqliteStore((dir_ / "no" / "such" / "dir.db").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot open store"), std::string::npos);
}

TEST_P(StoreTest, SchedulerColumns) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  JobRow j = MakeJob("a.tflite");
  j.num_threads = 4;
  auto id = store->AddJob(*run, j);
  ASSERT_TRUE(id.ok()) << id.message();
  ASSERT_TRUE(store->MarkJobRunning(*id, 0).ok());
  ASSERT_TRUE(store->MarkJobRunning(*id, 0).ok());
  ASSERT_TRUE(store->MoveJob(*id, "local:b", "key2").ok());
  ASSERT_TRUE(store->MoveJob(*id, "local:c", "key3").ok());  // keeps the first planned device
  auto got = store->GetJob(*id);
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(got->num_threads, 4u);
  EXPECT_EQ(got->attempts, 2);
  EXPECT_EQ(got->device, "local:c");
  EXPECT_EQ(got->job_key, "key3");
  EXPECT_EQ(got->moved_from, "local");
  EXPECT_FALSE(store->MoveJob(999, "x", "y").ok());

  ASSERT_TRUE(store->FinishRun(*run, kRunCancelled).ok());
  ASSERT_TRUE(store->ReopenRun(*run).ok());
  EXPECT_EQ(store->GetRun(*run)->status, kRunRunning);
  EXPECT_EQ(store->GetRun(*run)->finished_at, "");

  ASSERT_TRUE(store->SetDeviceState("tcp://127.0.0.1:9", kDeviceQuarantined, "boom").ok());
  DeviceRow d;
  d.name = "tcp://127.0.0.1:9";
  d.abi = "x86_64";
  ASSERT_TRUE(store->UpsertDevice(d).ok());  // keeps the state
  auto devices = store->ListDevices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].abi, "x86_64");
  EXPECT_EQ((*devices)[0].state, kDeviceQuarantined);
  EXPECT_EQ((*devices)[0].state_reason, "boom");
}

TEST_F(SqliteStoreTest, MigratesVersion1) {
  {
    // A database as schema v1 left it, with one job.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    const char* v1 =
        "CREATE TABLE schema_version(version INTEGER NOT NULL, applied_at TEXT NOT NULL);"
        "INSERT INTO schema_version VALUES(1, 'then');"
        "CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL,"
        " finished_at TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, spec_json TEXT NOT NULL);"
        "CREATE TABLE devices(name TEXT PRIMARY KEY, abi TEXT NOT NULL DEFAULT '', os TEXT NOT "
        "NULL DEFAULT '', cpu TEXT NOT NULL DEFAULT '', cores INTEGER NOT NULL DEFAULT 0, "
        "memory_bytes INTEGER NOT NULL DEFAULT 0, hostname TEXT NOT NULL DEFAULT '', "
        "agent_version TEXT NOT NULL DEFAULT '', last_seen TEXT NOT NULL DEFAULT '');"
        "CREATE TABLE jobs(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) "
        "ON DELETE CASCADE, job_key TEXT NOT NULL, model TEXT NOT NULL, model_path TEXT NOT "
        "NULL, model_sha256 TEXT NOT NULL, delegate TEXT NOT NULL, delegate_options TEXT NOT "
        "NULL DEFAULT '', device TEXT NOT NULL, status TEXT NOT NULL, error TEXT NOT NULL "
        "DEFAULT '', wall_ms REAL NOT NULL DEFAULT 0, started_at TEXT NOT NULL DEFAULT '');"
        "CREATE TABLE results(job_id INTEGER PRIMARY KEY, init_us REAL, first_us REAL, "
        "warmup_mean_us REAL, mean_us REAL, std_us REAL, min_us REAL, max_us REAL, p50_us REAL,"
        " p90_us REAL, p99_us REAL, num_runs INTEGER, peak_rss_bytes INTEGER, arena_bytes "
        "INTEGER, exit_code INTEGER NOT NULL, signal INTEGER NOT NULL, runner_json TEXT NOT "
        "NULL, stderr_tail TEXT NOT NULL, finished_at TEXT NOT NULL);"
        "CREATE TABLE samples(job_id INTEGER NOT NULL, idx INTEGER NOT NULL, value_us REAL NOT "
        "NULL, PRIMARY KEY(job_id, idx)) WITHOUT ROWID;"
        "INSERT INTO runs VALUES(1, 'old', 't', '', 'finished', '{}');"
        "INSERT INTO jobs(run_id, job_key, model, model_path, model_sha256, delegate, device, "
        "status) VALUES(1, 'k', 'm', '/m', 's', 'cpu', 'local', 'ok');";
    ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto jobs = store->ListJobs(1);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].num_threads, 0u);
  EXPECT_EQ((*jobs)[0].moved_from, "");
}

JobOutcome PlacedOutcome() {
  JobOutcome o;
  o.status = "ok";
  o.exit_code = 0;
  JobMetrics m;
  m.mean_us = 10;
  o.metrics = m;
  JobPlacement p;
  p.partitions = 1;
  p.nodes.push_back(
      {0, "CONV_2D", "cpu", std::nullopt, false, "example: CONV_2D is not supported"});
  p.nodes.push_back({1, "ADD", "example", 0, false, ""});
  p.nodes.push_back({2, "DEQUANTIZE", "cpu", std::nullopt, true, ""});
  o.placement = p;
  o.state_before_json = R"({"unix_ms":1,"load_avg_1m":0.5})";
  o.state_after_json = R"({"unix_ms":2})";
  o.started_hot = true;
  o.throttled = false;
  o.hot_threshold_c = 70;
  o.state_note = "thermal zone 0 (cpu-thermal) at 81.0 C";
  o.noisy = true;
  o.energy_mj = 12.5;
  return o;
}

TEST_P(StoreTest, PlacementAndDeviceStateRoundTrip) {
  int64_t run_id = 0;
  std::vector<int64_t> ids;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    auto run = store->CreateRun("p", "{}");
    ASSERT_TRUE(run.ok());
    run_id = *run;
    auto added = store->AddJobs(run_id, {MakeJob("a.tflite"), MakeJob("b.tflite")});
    ASSERT_TRUE(added.ok());
    ids = *added;
    ASSERT_TRUE(store->RecordJobResult(ids[0], PlacedOutcome()).ok());
    JobOutcome bad;
    bad.status = "crashed";
    bad.error = "boom";
    ASSERT_TRUE(store->RecordJobResult(ids[1], bad).ok());
  }
  auto store = Open();  // reopened: everything came from the file
  ASSERT_NE(store, nullptr);
  auto jobs = store->ListJobs(run_id);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  ASSERT_EQ(jobs->size(), 2u);
  const JobRow& a = (*jobs)[0];
  ASSERT_TRUE(a.placement.has_value());
  EXPECT_EQ(a.placement->partitions, 1);
  EXPECT_EQ(a.placement->nodes, 3);
  EXPECT_EQ(a.placement->delegated_nodes, 1);
  EXPECT_EQ(a.placement->cpu_nodes, 2);
  EXPECT_EQ(a.placement->delegates, "example");
  EXPECT_TRUE(a.started_hot);
  EXPECT_FALSE(a.throttled);
  EXPECT_EQ(a.state_note, "thermal zone 0 (cpu-thermal) at 81.0 C");
  EXPECT_TRUE(a.noisy);
  EXPECT_EQ(a.energy_mj, std::optional<double>(12.5));
  const JobRow& b = (*jobs)[1];
  EXPECT_FALSE(b.placement.has_value());
  EXPECT_FALSE(b.started_hot);
  EXPECT_FALSE(b.noisy);
  EXPECT_EQ(b.energy_mj, std::nullopt);
  EXPECT_EQ(b.state_note, "");

  auto placement = store->GetPlacement(ids[0]);
  ASSERT_TRUE(placement.ok()) << placement.message();
  ASSERT_TRUE(placement->has_value());
  const JobPlacement& p = **placement;
  EXPECT_EQ(p.partitions, 1);
  ASSERT_EQ(p.nodes.size(), 3u);
  EXPECT_EQ(p.nodes[0].op, "CONV_2D");
  EXPECT_EQ(p.nodes[0].delegate, "cpu");
  EXPECT_FALSE(p.nodes[0].partition.has_value());
  EXPECT_EQ(p.nodes[0].reason, "example: CONV_2D is not supported");
  EXPECT_EQ(p.nodes[1].delegate, "example");
  ASSERT_TRUE(p.nodes[1].partition.has_value());
  EXPECT_EQ(*p.nodes[1].partition, 0);
  EXPECT_TRUE(p.nodes[2].folded);
  EXPECT_FALSE(p.nodes[1].folded);

  auto none = store->GetPlacement(ids[1]);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(store->GetPlacement(999).ok());

  auto detail = store->GetJobDetail(ids[0]);
  ASSERT_TRUE(detail.ok());
  ASSERT_TRUE(detail->state_before_json.has_value());
  EXPECT_EQ(*detail->state_before_json, R"({"unix_ms":1,"load_avg_1m":0.5})");
  ASSERT_TRUE(detail->state_after_json.has_value());
  EXPECT_DOUBLE_EQ(detail->hot_threshold_c, 70);
  EXPECT_TRUE(detail->started_hot);
  auto bad_detail = store->GetJobDetail(ids[1]);
  ASSERT_TRUE(bad_detail.ok());
  EXPECT_FALSE(bad_detail->state_before_json.has_value());
  EXPECT_FALSE(bad_detail->state_after_json.has_value());

  // Recording again (a resumed job) replaces the nodes instead of doubling them.
  JobOutcome again = PlacedOutcome();
  again.placement->nodes.pop_back();
  again.started_hot = false;
  ASSERT_TRUE(store->RecordJobResult(ids[0], again).ok());
  auto replaced = store->GetPlacement(ids[0]);
  ASSERT_TRUE(replaced.ok() && replaced->has_value());
  EXPECT_EQ((*replaced)->nodes.size(), 2u);
  auto job = store->GetJob(ids[0]);
  ASSERT_TRUE(job.ok());
  EXPECT_FALSE(job->started_hot);
  EXPECT_EQ(job->placement->nodes, 2);
}

TEST_F(SqliteStoreTest, MigratesPreviousVersion) {
  const int previous = 2;  // before placement (v3) and accuracy (v4)
  ASSERT_GT(CurrentSchemaVersion(), previous);
  ASSERT_TRUE(CreateSqliteStoreAtVersionForTesting(path_, previous).ok());
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    const char* rows =
        "INSERT INTO runs VALUES(1, 'old', 't', '', 'finished', '{}');"
        "INSERT INTO jobs(run_id, job_key, model, model_path, model_sha256, delegate, device, "
        "status, num_threads) VALUES(1, 'k', 'm', '/m', 's', 'cpu', 'local', 'ok', 2);"
        "INSERT INTO results(job_id, mean_us, exit_code, signal, runner_json, stderr_tail, "
        "finished_at) VALUES(1, 5.5, 0, 0, '{}', '', 't');";
    ASSERT_EQ(sqlite3_exec(db, rows, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    // The previous version has no placement table yet.
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE name='placement'",
                                 -1, &st, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto job = store->GetJob(1);
  ASSERT_TRUE(job.ok()) << job.message();
  EXPECT_EQ(job->num_threads, 2u);
  ASSERT_TRUE(job->metrics.has_value());
  EXPECT_DOUBLE_EQ(job->metrics->mean_us, 5.5);
  // A job before device classes (v23) is the cell of its device.
  EXPECT_EQ(job->device_class, "");
  EXPECT_EQ(CellOf(*job).device, "local");
  auto cells = store->ListCells();
  ASSERT_TRUE(cells.ok()) << cells.message();
  ASSERT_EQ(cells->size(), 1u);
  EXPECT_EQ(cells->front().device, "local");
  auto trials = store->ListCellJobs(cells->front());
  ASSERT_TRUE(trials.ok()) << trials.message();
  EXPECT_EQ(trials->size(), 1u);
  EXPECT_EQ(job->inputs, kSeededInputs);  // schema 18: what every older job ran on
  EXPECT_EQ(job->pair, 0);                // schema 19: not paired
  EXPECT_EQ(CellOf(*job).inputs, kSeededInputs);
  EXPECT_EQ(job->metrics->threads_used, 0);  // not reported before v5
  EXPECT_FALSE(job->placement.has_value());
  EXPECT_FALSE(job->started_hot);
  EXPECT_FALSE(job->throttled);
  auto placement = store->GetPlacement(1);
  ASSERT_TRUE(placement.ok()) << placement.message();
  EXPECT_FALSE(placement->has_value());
  auto detail = store->GetJobDetail(1);
  ASSERT_TRUE(detail.ok());
  EXPECT_FALSE(detail->state_before_json.has_value());
  EXPECT_DOUBLE_EQ(detail->hot_threshold_c, 0);
  // The migrated file takes the new columns.
  ASSERT_TRUE(store->RecordJobResult(1, PlacedOutcome()).ok());
  auto again = store->GetJob(1);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->placement.has_value());
  EXPECT_EQ(again->placement->nodes, 3);
  EXPECT_TRUE(again->started_hot);
}

// --- accuracy, artifacts, run owner and runner ---------------------------------

TEST_P(StoreTest, AccuracyRoundTripKeepsNullsAndOrder) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("acc", "{}");
  ASSERT_TRUE(run.ok());
  auto job = store->AddJob(*run, MakeJob("m.tflite"));
  ASSERT_TRUE(job.ok());
  JobOutcome o;
  o.status = "ok";
  o.metrics = JobMetrics{};
  OutputAccuracy second;
  second.index = 1;
  second.name = "scores";
  second.compared = 10;
  second.mean_abs_error = 0.25;
  second.std_abs_error = 0.125;
  second.max_abs_error = 0.5;
  second.rmse = 0.3;
  second.nan_count = 2;
  second.inf_count = 1;
  second.reference_nan_count = 3;
  second.reference_inf_count = 4;
  second.top1_agree = true;
  second.top5_agree = false;
  second.max_abs_error_lsb = runner::Number(2.0);
  OutputAccuracy first;  // nothing compared: the runner's nulls
  first.index = 0;
  first.name = "boxes";
  first.mean_abs_error = first.std_abs_error = first.max_abs_error = first.rmse = std::nan("");
  o.accuracy = Accuracy{"cpu", {second, first}};
  ASSERT_TRUE(store->RecordJobResult(*job, o).ok());

  // Committed at once: a second connection sees it.
  auto reader = Open();
  ASSERT_NE(reader, nullptr);
  auto got = reader->GetAccuracy(*job);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_TRUE(got->has_value());
  const std::vector<OutputAccuracy>& outputs = (*got)->outputs;
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].index, 0);
  EXPECT_EQ(outputs[0].name, "boxes");
  EXPECT_TRUE(std::isnan(outputs[0].mean_abs_error));
  EXPECT_TRUE(std::isnan(outputs[0].rmse));
  EXPECT_FALSE(outputs[0].top1_agree.has_value());
  EXPECT_FALSE(outputs[0].max_abs_error_lsb.has_value());
  const OutputAccuracy& b = outputs[1];
  EXPECT_EQ(b.name, "scores");
  EXPECT_EQ((*got)->reference, "cpu");
  EXPECT_EQ(b.compared, 10);
  EXPECT_DOUBLE_EQ(b.mean_abs_error, 0.25);
  EXPECT_DOUBLE_EQ(b.std_abs_error, 0.125);
  EXPECT_DOUBLE_EQ(b.max_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(b.rmse, 0.3);
  EXPECT_EQ(b.nan_count, 2);
  EXPECT_EQ(b.inf_count, 1);
  EXPECT_EQ(b.reference_nan_count, 3);
  EXPECT_EQ(b.reference_inf_count, 4);
  EXPECT_EQ(b.top1_agree, std::optional<bool>(true));
  EXPECT_EQ(b.top5_agree, std::optional<bool>(false));
  EXPECT_EQ(b.max_abs_error_lsb, std::optional<runner::Number>(2.0));  // a REAL

  // Telemetry rows come back before, then after; unset figures stay unset.
  o.telemetry = {TelemetryRow{"after", 2000, 61.5, std::nullopt, std::nullopt, 80},
                 TelemetryRow{"before", 1000, 55.0, 0.5, 30.25, std::nullopt}};
  ASSERT_TRUE(store->RecordJobResult(*job, o).ok());
  auto telemetry = reader->GetTelemetry(*job);
  ASSERT_TRUE(telemetry.ok()) << telemetry.message();
  ASSERT_EQ(telemetry->size(), 2u);
  EXPECT_EQ((*telemetry)[0].phase, "before");
  EXPECT_EQ((*telemetry)[0].unix_ms, 1000);
  EXPECT_EQ((*telemetry)[0].hottest_temp_c, std::optional<double>(55.0));
  EXPECT_EQ((*telemetry)[0].load_avg_1m, std::optional<double>(0.5));
  EXPECT_EQ((*telemetry)[0].battery_temp_c, std::optional<double>(30.25));
  EXPECT_FALSE((*telemetry)[0].battery_level_pct.has_value());
  EXPECT_EQ((*telemetry)[1].phase, "after");
  EXPECT_FALSE((*telemetry)[1].load_avg_1m.has_value());
  EXPECT_EQ((*telemetry)[1].battery_level_pct, std::optional<int64_t>(80));

  // A re-recorded result replaces the rows.
  o.accuracy = Accuracy{"cpu", {second}};
  o.telemetry.clear();
  ASSERT_TRUE(store->RecordJobResult(*job, o).ok());
  got = store->GetAccuracy(*job);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->outputs.size(), 1u);
  EXPECT_TRUE(store->GetTelemetry(*job)->empty());
  EXPECT_FALSE(store->GetAccuracy(9999).ok());
}

// Schema v7: accuracy over input sets keeps the set count and the agreement
// fractions; a job on random inputs has neither.
TEST_P(StoreTest, AccuracyOverInputSetsRoundTrips) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("sets", "{}");
  ASSERT_TRUE(run.ok());
  auto job = store->AddJob(*run, MakeJob("m.tflite"));
  ASSERT_TRUE(job.ok());
  JobOutcome o;
  o.status = "ok";
  o.metrics = JobMetrics{};
  OutputAccuracy a;
  a.name = "scores";
  a.compared = 8;
  a.top1_agree = false;
  a.top5_agree = true;
  a.top1_agreement = 0.5;
  a.top5_agreement = 1.0;
  o.accuracy = Accuracy{"cpu", {a}};
  o.accuracy->sets = 2;
  ASSERT_TRUE(store->RecordJobResult(*job, o).ok());
  auto got = store->GetAccuracy(*job);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.message();
  EXPECT_EQ((*got)->sets, std::optional<int64_t>(2));
  EXPECT_EQ((*got)->outputs[0].top1_agreement, std::optional<double>(0.5));
  EXPECT_EQ((*got)->outputs[0].top5_agreement, std::optional<double>(1.0));
  o.accuracy = Accuracy{"cpu", {OutputAccuracy{}}};
  ASSERT_TRUE(store->RecordJobResult(*job, o).ok());
  got = store->GetAccuracy(*job);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_FALSE((*got)->sets.has_value());
  EXPECT_FALSE((*got)->outputs[0].top1_agreement.has_value());
}

// snr_db and psnr_db are kept as reported; unset ones read back unset.
TEST_P(StoreTest, AccuracyDecibelsRoundTrip) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("db", "{}");
  ASSERT_TRUE(run.ok());
  auto job = store->AddJob(*run, MakeJob("m.tflite"));
  ASSERT_TRUE(job.ok());
  JobOutcome o;
  o.status = "ok";
  o.metrics = JobMetrics{};
  OutputAccuracy noisy, exact;
  noisy.compared = 4;
  noisy.snr_db = 42.25;
  noisy.psnr_db = -3.5;
  exact.index = 1;
  exact.compared = 4;  // error 0: no figure
  o.accuracy = Accuracy{"cpu", {noisy, exact}};
  ASSERT_TRUE(store->RecordJobResult(*job, o).ok());
  auto got = store->GetAccuracy(*job);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.message();
  ASSERT_EQ((*got)->outputs.size(), 2u);
  EXPECT_EQ((*got)->outputs[0].snr_db, std::optional<double>(42.25));
  EXPECT_EQ((*got)->outputs[0].psnr_db, std::optional<double>(-3.5));
  EXPECT_FALSE((*got)->outputs[1].snr_db.has_value());
  EXPECT_FALSE((*got)->outputs[1].psnr_db.has_value());
}

TEST_P(StoreTest, ArtifactsKeepTheirFirstSighting) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ArtifactRow a{std::string(64, 'b'), "model", 1234, "", "/models/a.tflite"};
  ASSERT_TRUE(store->RecordArtifact(a).ok());
  ArtifactRow again = a;
  again.host_path = "/elsewhere/a.tflite";
  again.kind = "inputs";
  ASSERT_TRUE(store->RecordArtifact(again).ok());
  ASSERT_TRUE(store->RecordArtifact({std::string(64, 'c'), "runner", 99, "", "/bin/r"}).ok());
  auto list = store->ListArtifacts();
  ASSERT_TRUE(list.ok()) << list.message();
  ASSERT_EQ(list->size(), 2u);
  const ArtifactRow& first = (*list)[0].sha256 == a.sha256 ? (*list)[0] : (*list)[1];
  EXPECT_EQ(first.kind, "model");
  EXPECT_EQ(first.size_bytes, 1234);
  EXPECT_EQ(first.host_path, "/models/a.tflite");
  EXPECT_EQ(first.first_seen.size(), 20u);  // "2024-05-01T12:34:56Z"
}

TEST_P(StoreTest, IndexesForTheDashboardExist) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  for (const std::string index : {"runs_by_created", "jobs_by_run", "jobs_by_model_delegate"}) {
    const std::string sql =
        pg() ? "SELECT count(*) FROM pg_indexes WHERE indexname = '" + index + "'"
             : "SELECT count(*) FROM sqlite_master WHERE type='index' AND name='" + index + "'";
    EXPECT_EQ(QueryValue(sql), "1") << index;
  }
}

// A fresh database of either backend is at the current schema version.
TEST_P(StoreTest, MigratesEmptyDatabase) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto runs = store->ListRuns();
  ASSERT_TRUE(runs.ok()) << runs.message();
  EXPECT_TRUE(runs->empty());
  EXPECT_EQ(QueryValue("SELECT max(version) FROM schema_version"),
            std::to_string(CurrentSchemaVersion()));
  store.reset();
  EXPECT_NE(Open(), nullptr);  // a second open finds it migrated
}

TEST_P(StoreTest, RunRunnerAndRequeue) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  auto got = store->GetRun(*run);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->owner_pid, ::getpid());
  const std::string d(64, 'd'), e(64, 'e');
  EXPECT_EQ(*store->RecordRunRunner(*run, "/b/dfarm-runner", d, false), d);
  EXPECT_EQ(*store->RecordRunRunner(*run, "/b/dfarm-runner", e, false), d);  // kept
  EXPECT_EQ(*store->RecordRunRunner(*run, "/arm/dfarm-runner", e, false), e);
  auto runners = store->ListRunRunners(*run);
  ASSERT_TRUE(runners.ok());
  ASSERT_EQ(runners->size(), 2u);
  EXPECT_EQ((*runners)[0], std::make_pair(std::string("/arm/dfarm-runner"), e));
  EXPECT_EQ((*runners)[1], std::make_pair(std::string("/b/dfarm-runner"), d));
  EXPECT_EQ(*store->RecordRunRunner(*run, "/b/dfarm-runner", e, true), e);  // replaced
  ASSERT_TRUE(store->FinishRun(*run, kRunCancelled).ok());
  EXPECT_EQ(store->GetRun(*run)->owner_pid, 0);

  auto job = store->AddJob(*run, MakeJob("m"));
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(store->MarkJobRunning(*job, 0).ok());
  ASSERT_TRUE(store->RequeueJob(*job).ok());
  EXPECT_EQ(store->GetJob(*job)->status, kJobQueued);
  EXPECT_EQ(store->GetJob(*job)->attempts, 1);
}

// Sets run `id`'s owner to `pid` on this host (as another process would).
std::string SetOwnerSql(int64_t id, pid_t pid) {
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  return "UPDATE runs SET owner_pid = " + std::to_string(pid) + ", owner_host = '" + host +
         "', owner_since = " + std::to_string(::time(nullptr)) +
         " WHERE id = " + std::to_string(id);
}

std::string SetOwnerSinceSql(int64_t id, int64_t since) {
  return "UPDATE runs SET owner_since = " + std::to_string(since) +
         " WHERE id = " + std::to_string(id);
}

std::string OwnerSinceSql(int64_t id) {
  return "SELECT owner_since FROM runs WHERE id = " + std::to_string(id);
}

TEST_P(StoreTest, ResumeIsRefusedWhileTheOwnerLivesAndTakenOverWhenItDied) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  pid_t owner = ::fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    ::pause();
    ::_exit(0);
  }
  ExecSql(SetOwnerSql(*run, owner));
  auto refused = store->ReopenRun(*run);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("in use by another dfarm process (pid " + std::to_string(owner)),
            std::string::npos)
      << refused.message();
  ::kill(owner, SIGKILL);
  ::waitpid(owner, nullptr, 0);
  auto taken = store->ReopenRun(*run);
  ASSERT_TRUE(taken.ok()) << taken.message();
  EXPECT_EQ(store->GetRun(*run)->owner_pid, ::getpid());
  EXPECT_EQ(store->GetRun(*run)->status, kRunRunning);
}

// A long sweep renews its claim, so another host does not take it for
// abandoned; a claim this process does not hold is left alone.
TEST_P(StoreTest, RefreshRunClaimRenewsOnlyOurOwnClaim) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  ExecSql(SetOwnerSinceSql(*run, 1000));  // as if claimed long ago
  auto renewed = store->RefreshRunClaim(*run);
  ASSERT_TRUE(renewed.ok()) << renewed.message();
  EXPECT_TRUE(*renewed);
  EXPECT_GT(std::stoll(QueryValue(OwnerSinceSql(*run))),
            static_cast<int64_t>(::time(nullptr)) - 60);

  ExecSql(SetOwnerSql(*run, ::getpid() + 100000));  // another process's claim
  ExecSql(SetOwnerSinceSql(*run, 1000));
  renewed = store->RefreshRunClaim(*run);
  ASSERT_TRUE(renewed.ok()) << renewed.message();
  EXPECT_FALSE(*renewed);
  EXPECT_EQ(QueryValue(OwnerSinceSql(*run)), "1000");
  ASSERT_TRUE(store->FinishRun(*run, kRunFinished).ok());
}

TEST_P(StoreTest, TwoConcurrentResumesExactlyOneProceeds) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    auto run = store->CreateRun("r", "{}");
    ASSERT_TRUE(run.ok());
    ASSERT_TRUE(store->FinishRun(*run, kRunCancelled).ok());
  }
  // Two processes claim run 1 at once; each holds its claim (alive) until
  // the parent closes `hold`, and reports through its exit code.
  int go[2], hold[2], tried[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(hold), 0);
  ASSERT_EQ(::pipe(tried), 0);
  pid_t kids[2];
  for (pid_t& kid : kids) {
    kid = ::fork();
    ASSERT_GE(kid, 0);
    if (kid == 0) {
      ::close(go[1]);
      ::close(hold[1]);
      ::close(tried[0]);
      char c = 0;
      (void)!::read(go[0], &c, 1);
      auto s = OpenStore(where_);
      int code = !s.ok() ? 3 : (*s)->ReopenRun(1).ok() ? 0 : 1;
      (void)!::write(tried[1], &c, 1);
      (void)!::read(hold[0], &c, 1);  // until the parent closes it
      ::_exit(code);
    }
  }
  ::close(go[0]);
  ::close(hold[0]);
  ::close(tried[1]);
  ::close(go[1]);  // both start
  char c;
  for (int n = 0; n < 2 && ::read(tried[0], &c, 1) == 1; ++n) {
  }  // both have tried
  ::close(tried[0]);
  ::close(hold[1]);
  int ok = 0, refused = 0;
  for (pid_t kid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(kid, &status, 0), kid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 0) ++ok;
    if (WEXITSTATUS(status) == 1) ++refused;
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(refused, 1);
}

// The final job statuses are exactly the names of agent/protocol/status.h's list.
TEST(JobStatusTest, FinalStatusesAreTheProtocolList) {
#define DFARM_EXPECT_FINAL(e, name, meaning) EXPECT_TRUE(IsFinalJobStatus(name)) << name;
  DFARM_JOB_STATUSES(DFARM_EXPECT_FINAL)
#undef DFARM_EXPECT_FINAL
  EXPECT_FALSE(IsFinalJobStatus(kJobQueued));
  EXPECT_FALSE(IsFinalJobStatus(kJobRunning));
  EXPECT_FALSE(IsFinalJobStatus(""));
  EXPECT_FALSE(IsFinalJobStatus("OK"));
  EXPECT_STREQ(kJobOk, "ok");
  EXPECT_STREQ(kJobInfra, "infra");
}

TEST_P(StoreTest, RecordJobResultRefusesAStatusOutsideTheList) {
  auto store = Open();
  ASSERT_TRUE(store);
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  auto id = store->AddJob(*run, MakeJob("m.tflite"));
  ASSERT_TRUE(id.ok());
  JobOutcome o;
  o.status = kJobRunning;
  auto r = store->RecordJobResult(*id, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("is not a final job status"), std::string::npos) << r.message();
  o.status = JobStatusName(JobStatus::kTimeout);
  EXPECT_TRUE(store->RecordJobResult(*id, o).ok());
  EXPECT_EQ(store->GetJob(*id)->status, "timeout");
}

TEST_F(SqliteStoreTest, RefusesUnknownTestVersion) {
  EXPECT_FALSE(CreateSqliteStoreAtVersionForTesting(path_, 0).ok());
  EXPECT_FALSE(CreateSqliteStoreAtVersionForTesting(path_, CurrentSchemaVersion() + 1).ok());
}

// --- trials, runner of a job, run parent, tags ---------------------------------

TEST_F(SqliteStoreTest, MigratesVersion5WithV6Defaults) {
  ASSERT_TRUE(CreateSqliteStoreAtVersionForTesting(path_, 5).ok());
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    const char* rows =
        "INSERT INTO runs(id, name, created_at, status, spec_json) "
        "VALUES(1, 'old', 't', 'finished', '{}');"
        "INSERT INTO jobs(run_id, job_key, model, model_path, model_sha256, delegate, device, "
        "status, num_threads) VALUES(1, 'k', 'm', '/m', 's', 'cpu', 'local', 'ok', 2);";
    ASSERT_EQ(sqlite3_exec(db, rows, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto job = store->GetJob(1);
  ASSERT_TRUE(job.ok()) << job.message();
  EXPECT_EQ(job->trial, 0);
  EXPECT_EQ(job->runner, "");
  EXPECT_EQ(job->runner_sha256, "");
  auto run = store->GetRun(1);
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->parent_run_id, 0);
  EXPECT_TRUE(run->tags.empty());
  ASSERT_TRUE(store->TagRun(1, "old-baseline", false).ok());
  EXPECT_EQ(store->GetRun(1)->tags, std::vector<std::string>{"old-baseline"});
}

TEST_P(StoreTest, JobTrialAndRunnerRoundTrip) {
  auto store = Open();
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  JobRow a = MakeJob("m.tflite");
  a.trial = 2;
  a.runner = "main";
  a.runner_sha256 = std::string(64, 'b');
  JobRow b = MakeJob("n.tflite");
  auto ids = store->AddJobs(*run, {a, b});
  ASSERT_TRUE(ids.ok()) << ids.message();
  auto jobs = store->ListJobs(*run);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].trial, 2);
  EXPECT_EQ((*jobs)[0].runner, "main");
  EXPECT_EQ((*jobs)[0].runner_sha256, std::string(64, 'b'));
  EXPECT_EQ((*jobs)[1].trial, 0);
  EXPECT_EQ((*jobs)[1].runner, "");
  auto one = store->GetJob((*ids)[0]);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->trial, 2);
  EXPECT_EQ(one->runner, "main");
}

// Schema v13: a job's runner kind (stored with the job) and the version its
// runner reported (stored with the result; an empty one keeps the stored).
TEST_P(StoreTest, RunnerKindAndVersion) {
  auto store = Open();
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  JobRow a = MakeJob("m.tflite");
  a.runner = "tflite";
  a.runner_kind = "tflite";
  auto ids = store->AddJobs(*run, {a, MakeJob("n.tflite")});
  ASSERT_TRUE(ids.ok()) << ids.message();
  JobOutcome o;
  o.status = "crashed";
  o.error = "x";
  o.runner_version = "2.9.0";
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  auto job = store->GetJob((*ids)[0]);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->runner_kind, "tflite");
  EXPECT_EQ(job->runner_version, "2.9.0");
  o.runner_version.clear();  // a retry whose runner said nothing keeps the version
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  EXPECT_EQ(store->GetJob((*ids)[0])->runner_version, "2.9.0");
  auto other = store->GetJob((*ids)[1]);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->runner_kind, "");
  EXPECT_EQ(other->runner_version, "");
}

// Schema v16: a sustained job's curve round trips, windows in order (more
// than one statement inserts); rerecording without one removes it.
TEST_P(StoreTest, SustainedCurveRoundTrip) {
  auto store = Open();
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  auto ids = store->AddJobs(*run, {MakeJob("m.tflite"), MakeJob("n.tflite")});
  ASSERT_TRUE(ids.ok()) << ids.message();
  JobOutcome o;
  o.status = "ok";
  JobSustained curve;
  curve.secs = 60;
  curve.window_ms = 500;
  for (int64_t i = 0; i < 300; ++i) {
    curve.windows.push_back(SustainedWindow{i * 500.0, 10 + i, 1000.0 + i, 990.0 + i, 1500.0 + i});
  }
  o.sustained = curve;
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  o.sustained.reset();
  ASSERT_TRUE(store->RecordJobResult((*ids)[1], o).ok());
  auto all = store->ListRunSustained(*run);
  ASSERT_TRUE(all.ok()) << all.message();
  ASSERT_EQ(all->size(), 1u);
  const JobSustained& got = all->at((*ids)[0]);
  EXPECT_DOUBLE_EQ(got.secs, 60);
  EXPECT_DOUBLE_EQ(got.window_ms, 500);
  ASSERT_EQ(got.windows.size(), 300u);
  EXPECT_DOUBLE_EQ(got.windows[299].t_ms, 299 * 500.0);
  EXPECT_EQ(got.windows[299].runs, 309);
  EXPECT_DOUBLE_EQ(got.windows[7].mean_us, 1007);
  EXPECT_DOUBLE_EQ(got.windows[7].p50_us, 997);
  EXPECT_DOUBLE_EQ(got.windows[7].max_us, 1507);
  // Rerecorded without a curve: gone.
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  all = store->ListRunSustained(*run);
  ASSERT_TRUE(all.ok()) << all.message();
  EXPECT_TRUE(all->empty());
}

// Schema v21: a job's task accuracy round trips (metrics in order, a NaN
// bound as none); other jobs have none; rerecording without it removes it.
TEST_P(StoreTest, TaskAccuracyRoundTrip) {
  auto store = Open();
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  auto ids = store->AddJobs(*run, {MakeJob("m.tflite"), MakeJob("n.tflite")});
  ASSERT_TRUE(ids.ok()) << ids.message();
  JobOutcome o;
  o.status = "ok";
  TaskAccuracy t;
  t.task = "classification";
  t.dataset = "digits@0123456789ab";
  t.images = 3;
  t.metrics = {{"top1", 2.0 / 3, 0.25, 1.0}, {"top5", 1.0, std::nan(""), std::nan("")}};
  t.per_image = R"({"ranks":[0,2,0]})";
  o.task = t;
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  o.task.reset();
  ASSERT_TRUE(store->RecordJobResult((*ids)[1], o).ok());
  auto all = store->ListRunTaskAccuracy(*run);
  ASSERT_TRUE(all.ok()) << all.message();
  ASSERT_EQ(all->size(), 1u);
  const TaskAccuracy& got = all->at((*ids)[0]);
  EXPECT_EQ(got.task, "classification");
  EXPECT_EQ(got.dataset, "digits@0123456789ab");
  EXPECT_EQ(got.images, 3);
  EXPECT_EQ(got.per_image, R"({"ranks":[0,2,0]})");
  ASSERT_EQ(got.metrics.size(), 2u);
  EXPECT_EQ(got.metrics[0].name, "top1");
  EXPECT_DOUBLE_EQ(got.metrics[0].value, 2.0 / 3);
  EXPECT_DOUBLE_EQ(got.metrics[0].low, 0.25);
  EXPECT_DOUBLE_EQ(got.metrics[0].high, 1.0);
  ASSERT_NE(got.Find("top5"), nullptr);
  EXPECT_TRUE(std::isnan(got.Find("top5")->low));
  EXPECT_EQ(got.Find("map"), nullptr);
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  all = store->ListRunTaskAccuracy(*run);
  ASSERT_TRUE(all.ok()) << all.message();
  EXPECT_TRUE(all->empty());
}

// Schema v14: a job's per-op profile round trips (partition and its nodes,
// by_op in the runner's order); a job without one has none; a rerecorded
// result replaces it; a run's profiles come in one call.
TEST_P(StoreTest, ProfileRoundTrip) {
  auto store = Open();
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  auto ids = store->AddJobs(*run, {MakeJob("m.tflite"), MakeJob("n.tflite")});
  ASSERT_TRUE(ids.ok()) << ids.message();
  JobOutcome o;
  o.status = "ok";
  JobProfile p;
  p.runs = 5;
  p.nodes.push_back(ProfileNode{0, "CONV_2D", "cpu", std::nullopt, {}, 120.5});
  p.nodes.push_back(ProfileNode{1, "DELEGATE", "xnnpack", 0, {1, 2, 4}, 30.25});
  // A node timed inside its partition: the partition, no nodes.
  p.nodes.push_back(ProfileNode{2, "ADD", "xnnpack", 0, {}, 9.5});
  p.by_op.push_back(ProfileOp{"CONV_2D", 1, 120.5, 79.9});
  p.by_op.push_back(ProfileOp{"DELEGATE", 1, 30.25, 20.1});
  o.profile = p;
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  o.profile.reset();
  ASSERT_TRUE(store->RecordJobResult((*ids)[1], o).ok());

  auto got = store->GetProfile((*ids)[0]);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->runs, 5);
  ASSERT_EQ((*got)->nodes.size(), 3u);
  EXPECT_EQ((*got)->nodes[2].op, "ADD");
  EXPECT_EQ((*got)->nodes[2].partition, std::optional<int64_t>(0));
  EXPECT_TRUE((*got)->nodes[2].nodes.empty());
  EXPECT_DOUBLE_EQ((*got)->nodes[2].mean_us, 9.5);
  EXPECT_EQ((*got)->nodes[0].op, "CONV_2D");
  EXPECT_FALSE((*got)->nodes[0].partition.has_value());
  EXPECT_TRUE((*got)->nodes[0].nodes.empty());
  EXPECT_DOUBLE_EQ((*got)->nodes[0].mean_us, 120.5);
  EXPECT_EQ((*got)->nodes[1].index, 1);
  EXPECT_EQ((*got)->nodes[1].delegate, "xnnpack");
  EXPECT_EQ((*got)->nodes[1].partition, std::optional<int64_t>(0));
  EXPECT_EQ((*got)->nodes[1].nodes, (std::vector<int64_t>{1, 2, 4}));
  ASSERT_EQ((*got)->by_op.size(), 2u);
  EXPECT_EQ((*got)->by_op[0].op, "CONV_2D");
  EXPECT_EQ((*got)->by_op[1].op, "DELEGATE");
  EXPECT_EQ((*got)->by_op[1].count, 1);
  EXPECT_DOUBLE_EQ((*got)->by_op[1].total_us, 30.25);
  EXPECT_DOUBLE_EQ((*got)->by_op[1].pct, 20.1);

  auto none = store->GetProfile((*ids)[1]);
  ASSERT_TRUE(none.ok()) << none.message();
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(store->GetProfile(999999).ok());

  auto all = store->ListRunProfiles(*run);
  ASSERT_TRUE(all.ok()) << all.message();
  ASSERT_EQ(all->size(), 1u);
  const JobProfile& listed = all->at((*ids)[0]);
  EXPECT_EQ(listed.runs, 5);
  EXPECT_TRUE(listed.nodes.empty());
  ASSERT_EQ(listed.by_op.size(), 2u);
  EXPECT_EQ(listed.by_op[0].op, "CONV_2D");

  // A big model's profile: more steps than one statement inserts, in order.
  JobProfile big;
  big.runs = 1;
  for (int64_t i = 0; i < 600; ++i) {
    big.nodes.push_back(ProfileNode{i, "ADD", "cpu", std::nullopt, {}, static_cast<double>(i)});
  }
  o.profile = big;
  ASSERT_TRUE(store->RecordJobResult((*ids)[1], o).ok());
  auto many = store->GetProfile((*ids)[1]);
  ASSERT_TRUE(many.ok()) << many.message();
  ASSERT_EQ((*many)->nodes.size(), 600u);
  EXPECT_EQ((*many)->nodes[599].index, 599);
  EXPECT_DOUBLE_EQ((*many)->nodes[300].mean_us, 300);
  EXPECT_TRUE((*many)->by_op.empty());
  EXPECT_EQ(store->ListRunProfiles(*run)->size(), 2u);
  o.profile.reset();
  ASSERT_TRUE(store->RecordJobResult((*ids)[1], o).ok());

  // A retry without a profile leaves none behind.
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  EXPECT_FALSE(store->GetProfile((*ids)[0])->has_value());
  EXPECT_TRUE(store->ListRunProfiles(*run)->empty());
}

TEST_P(StoreTest, TagsMoveRefuseUntag) {
  auto store = Open();
  auto r1 = store->CreateRun("a", "{}");
  auto r2 = store->CreateRun("b", "{}");
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_TRUE(store->TagRun(*r1, "release-1.2", false).ok());
  ASSERT_TRUE(store->TagRun(*r1, "base", false).ok());
  ASSERT_TRUE(store->TagRun(*r1, "base", false).ok());  // again on the same run: fine
  EXPECT_EQ(store->GetRun(*r1)->tags, (std::vector<std::string>{"base", "release-1.2"}));
  auto found = store->FindTag("base");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, std::optional<int64_t>(*r1));

  // On another run: refused, naming the run that has it, unless moved.
  auto refused = store->TagRun(*r2, "base", false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kInvalidInput);
  EXPECT_NE(refused.message().find("already on run " + std::to_string(*r1)), std::string::npos)
      << refused.message();
  ASSERT_TRUE(store->TagRun(*r2, "base", true).ok());
  EXPECT_EQ(*store->FindTag("base"), std::optional<int64_t>(*r2));
  auto runs = store->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].tags, std::vector<std::string>{"release-1.2"});
  EXPECT_EQ((*runs)[1].tags, std::vector<std::string>{"base"});

  // Untag; an unknown name is kNotFound.
  ASSERT_TRUE(store->UntagRun("base").ok());
  EXPECT_FALSE(store->FindTag("base")->has_value());
  auto gone = store->UntagRun("base");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(gone.message().find("'base'"), std::string::npos) << gone.message();
}

TEST_P(StoreTest, TagRefusesBadNamesAndUnknownRuns) {
  auto store = Open();
  auto run = store->CreateRun("a", "{}");
  ASSERT_TRUE(run.ok());
  for (const std::string& bad :
       std::vector<std::string>{"", "has space", "a/b", "tag:x", std::string(65, 'x')}) {
    auto r = store->TagRun(*run, bad, false);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::kInvalidInput) << bad;
  }
  EXPECT_TRUE(store->TagRun(*run, std::string(64, 'x'), false).ok());
  EXPECT_TRUE(IsValidTagName("v1.2_rc-3"));
  auto missing = store->TagRun(*run + 10, "x", false);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
}

TEST_P(StoreTest, TagsGoWithADeletedRunAndParentLinks) {
  auto store = Open();
  auto r1 = store->CreateRun("a", "{}");
  auto r2 = store->CreateRun("b", "{}");
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_TRUE(store->SetRunParent(*r2, *r1).ok());
  EXPECT_EQ(store->GetRun(*r2)->parent_run_id, *r1);
  EXPECT_EQ(store->GetRun(*r1)->parent_run_id, 0);
  auto missing = store->SetRunParent(*r2 + 10, *r1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
  ASSERT_TRUE(store->TagRun(*r1, "gone", false).ok());
  store.reset();
  ExecSql("DELETE FROM runs WHERE id = " + std::to_string(*r1));
  store = Open();
  EXPECT_FALSE(store->FindTag("gone")->has_value());
}

// The dashboard's queries.

// Runs with jobs of two devices, two models and two delegates; one run's jobs
// get a result, another has none.
class RunSummaryTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = Open();
    ASSERT_NE(store_, nullptr);
    // Run 1 "nightly-a": local/cpu/m1 x2 ok + 1 crashed.
    r1_ = *store_->CreateRun("Nightly-A", "{}");
    JobRow a = MakeJob("m1.tflite");
    auto ids = store_->AddJobs(r1_, {a, a, a});
    ASSERT_TRUE(ids.ok()) << ids.message();
    for (size_t i = 0; i < ids->size(); ++i) {
      JobOutcome o;
      o.status = i == 2 ? "crashed" : "ok";
      ASSERT_TRUE(store_->RecordJobResult((*ids)[i], o).ok());
    }
    ASSERT_TRUE(store_->FinishRun(r1_, kRunFinished).ok());
    // Run 2 "pr-7": phone/xnnpack/m2, queued; tagged.
    r2_ = *store_->CreateRun("pr-7", "{}");
    JobRow b = MakeJob("m2.tflite");
    b.model_sha256 = std::string(64, 'b');
    b.delegate = "xnnpack";
    b.device = "phone";
    ASSERT_TRUE(store_->AddJobs(r2_, {b, b}).ok());
    ASSERT_TRUE(store_->TagRun(r2_, "baseline", false).ok());
    // Run 3: no jobs.
    r3_ = *store_->CreateRun("nightly-empty", "{}");
  }

  using Field = std::pair<std::string RunFilter::*, std::string>;
  static RunFilter F(const std::vector<Field>& fields) {
    RunFilter f;
    for (const auto& [member, value] : fields) f.*member = value;
    return f;
  }

  std::vector<int64_t> Ids(const RunFilter& f) {
    auto list = store_->ListRunSummaries(f);
    EXPECT_TRUE(list.ok()) << list.message();
    std::vector<int64_t> ids;
    if (list.ok()) {
      for (const RunSummary& r : *list) ids.push_back(r.run.id);
    }
    return ids;
  }

  std::unique_ptr<Store> store_;
  int64_t r1_ = 0, r2_ = 0, r3_ = 0;
};

TEST_P(RunSummaryTest, CountsJobsByStatusNewestFirstWithTags) {
  auto list = store_->ListRunSummaries();
  ASSERT_TRUE(list.ok()) << list.message();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].run.id, r3_);
  EXPECT_EQ((*list)[0].jobs, 0);
  EXPECT_TRUE((*list)[0].by_status.empty());
  EXPECT_EQ((*list)[1].run.id, r2_);
  EXPECT_EQ((*list)[1].jobs, 2);
  EXPECT_EQ((*list)[1].by_status, (std::map<std::string, int64_t>{{"queued", 2}}));
  EXPECT_EQ((*list)[1].run.tags, std::vector<std::string>{"baseline"});
  const RunSummary& first = (*list)[2];
  EXPECT_EQ(first.run.id, r1_);
  EXPECT_EQ(first.run.name, "Nightly-A");
  EXPECT_EQ(first.run.status, kRunFinished);
  EXPECT_EQ(first.jobs, 3);
  EXPECT_EQ(first.by_status, (std::map<std::string, int64_t>{{"crashed", 1}, {"ok", 2}}));
}

TEST_P(RunSummaryTest, FiltersCombine) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(Ids(F({{&RunFilter::name_contains, "NIGHTLY"}})), (V{r3_, r1_}));
  EXPECT_EQ(Ids(F({{&RunFilter::tag, "baseline"}})), V{r2_});
  EXPECT_EQ(Ids(F({{&RunFilter::tag, "nope"}})), V{});
  EXPECT_EQ(Ids(F({{&RunFilter::device, "phone"}})), V{r2_});
  EXPECT_EQ(Ids(F({{&RunFilter::model, "m1.tflite"}})), V{r1_});
  EXPECT_EQ(Ids(F({{&RunFilter::model, std::string(64, 'B')}})), V{r2_});  // a sha256, any case
  EXPECT_EQ(Ids(F({{&RunFilter::delegate, "cpu"}})), V{r1_});
  EXPECT_EQ(Ids(F({{&RunFilter::status, "running"}})), (V{r3_, r2_}));
  EXPECT_EQ(Ids(F({{&RunFilter::name_contains, "nightly"}, {&RunFilter::status, "running"}})),
            V{r3_});
  EXPECT_EQ(Ids(F({{&RunFilter::device, "local"}, {&RunFilter::delegate, "xnnpack"}})), V{});
  // Dates: inclusive prefixes; every run was created today.
  const std::string today = NowIso8601().substr(0, 10);
  EXPECT_EQ(Ids(F({{&RunFilter::created_from, today}, {&RunFilter::created_to, today}})).size(),
            3u);
  EXPECT_EQ(Ids(F({{&RunFilter::created_to, "2000-01-01"}})), V{});
  EXPECT_EQ(Ids(F({{&RunFilter::created_from, "2999-01-01"}})), V{});
}

TEST_F(SqliteStoreTest, QueryPlansUseTheIndexes) {
  ASSERT_NE(Open(), nullptr);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  auto plan = [db](const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, ("EXPLAIN QUERY PLAN " + sql).c_str(), -1, &st, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    std::string out;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
      out += reinterpret_cast<const char*>(sqlite3_column_text(st, 3));
      out += "\n";
    }
    sqlite3_finalize(st);
    return out;
  };
  const std::string cell = plan(
      "SELECT j.id FROM jobs j INDEXED BY jobs_by_cell WHERE j.model_sha256 = 'a' AND "
      "j.delegate = 'cpu' AND "
      "j.delegate_options = '' AND j.cell_device = 'local' AND j.runner = '' AND "
      "j.num_threads = 0 AND j.inputs = 'seeded:1/dfarm' ORDER BY j.run_id, j.trial, j.id");
  EXPECT_NE(cell.find("jobs_by_cell"), std::string::npos) << cell;
  EXPECT_EQ(cell.find("TEMP B-TREE"), std::string::npos) << cell;  // the index's order
  // ListCells without a filter reads only the covering index.
  const std::string cells = plan(
      "SELECT j.model_sha256, j.delegate, j.delegate_options, j.cell_device, j.runner, "
      "j.num_threads, j.inputs, MAX(j.id) FROM jobs j GROUP BY 1, 2, 3, 4, 5, 6, 7");
  EXPECT_NE(cells.find("COVERING INDEX jobs_by_cell"), std::string::npos) << cells;
  const std::string device = plan(
      "SELECT 1 FROM runs WHERE EXISTS (SELECT 1 FROM jobs d WHERE d.device = 'x' AND "
      "d.run_id = runs.id)");
  EXPECT_NE(device.find("jobs_by_device_run"), std::string::npos) << device;
  sqlite3_close(db);
}

TEST_P(StoreTest, ListCellJobsReadsOneCellAcrossRuns) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  JobRow cell = MakeJob("m.tflite");
  cell.num_threads = 4;
  cell.runner = "main";
  JobRow other_threads = cell;
  other_threads.num_threads = 2;
  JobRow other_runner = cell;
  other_runner.runner = "";
  JobRow other_device = cell;
  other_device.device = "phone";
  std::vector<int64_t> want;
  for (int r = 0; r < 2; ++r) {
    auto run = store->CreateRun("r" + std::to_string(r), "{}");
    ASSERT_TRUE(run.ok());
    JobRow t1 = cell, t0 = cell;
    t1.trial = 1;
    // Trial 1 is added before trial 0: the order is by trial, not by id.
    auto ids = store->AddJobs(*run, {t1, other_threads, t0, other_runner, other_device});
    ASSERT_TRUE(ids.ok()) << ids.message();
    want.push_back((*ids)[2]);
    want.push_back((*ids)[0]);
    JobOutcome o;
    o.status = "ok";
    o.metrics = JobMetrics{};
    o.metrics->mean_us = 100 + r;
    ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  }
  auto jobs =
      store->ListCellJobs({std::string(64, 'a'), "cpu", "a:1", 4, "main", "local", "m.tflite"});
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  std::vector<int64_t> got;
  for (const JobRow& j : *jobs) got.push_back(j.id);
  EXPECT_EQ(got, want);
  ASSERT_EQ(jobs->size(), 4u);
  ASSERT_TRUE((*jobs)[1].metrics.has_value());
  EXPECT_EQ((*jobs)[1].metrics->mean_us, 100);
  EXPECT_EQ((*jobs)[1].trial, 1);
  EXPECT_FALSE((*jobs)[0].metrics.has_value());
  auto none =
      store->ListCellJobs({std::string(64, 'a'), "cpu", "a:1", 8, "main", "local", "m.tflite"});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// A paired run's pairs (spec "pairing") are kept per job and read back by
// GetJob, ListJobs and ListCellJobs; unpaired jobs read 0.
TEST_P(StoreTest, KeepsThePairOfEachJob) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("paired", "{}");
  ASSERT_TRUE(run.ok());
  std::vector<JobRow> rows;
  for (int64_t pair = 1; pair <= 2; ++pair) {
    for (const char* runner : {"cand", "base"}) {
      JobRow j = MakeJob("m.tflite");
      j.runner = runner;
      j.trial = pair - 1;
      j.pair = pair;
      rows.push_back(j);
    }
  }
  rows.push_back(MakeJob("m.tflite"));  // not paired
  auto ids = store->AddJobs(*run, rows);
  ASSERT_TRUE(ids.ok()) << ids.message();
  auto listed = store->ListJobs(*run);
  ASSERT_TRUE(listed.ok()) << listed.message();
  ASSERT_EQ(listed->size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*listed)[i].pair, static_cast<int64_t>(i / 2 + 1)) << i;
    EXPECT_EQ((*listed)[i].runner, rows[i].runner) << i;
  }
  EXPECT_EQ((*listed)[4].pair, 0);
  auto one = store->GetJob((*ids)[3]);
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ(one->pair, 2);
  auto cell = store->ListCellJobs(CellOf(rows[1]));
  ASSERT_TRUE(cell.ok()) << cell.message();
  ASSERT_EQ(cell->size(), 2u);  // runner "base": one job of each pair
  EXPECT_EQ(cell->at(0).pair, 1);
  EXPECT_EQ(cell->at(1).pair, 2);
}

// Inputs are part of the cell: the same model, delegate and device on real
// input sets and on the seeded inputs are two cells, each with its jobs.
TEST_P(StoreTest, InputsTellCellsApart) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  JobRow seeded = MakeJob("m.tflite");
  JobRow sets = seeded;
  sets.inputs = InputsId({std::string(64, 'e')});
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  auto ids = store->AddJobs(*run, {seeded, sets});
  ASSERT_TRUE(ids.ok()) << ids.message();
  auto job = store->GetJob((*ids)[1]);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->inputs, sets.inputs);
  auto cells = store->ListCells({});
  ASSERT_TRUE(cells.ok()) << cells.message();
  ASSERT_EQ(cells->size(), 2u);
  EXPECT_EQ((*cells)[0].inputs, kSeededInputs);  // "seeded:" < "sets:"
  EXPECT_EQ((*cells)[1].inputs, sets.inputs);
  for (const Cell& c : *cells) {
    auto jobs = store->ListCellJobs(c);
    ASSERT_TRUE(jobs.ok()) << jobs.message();
    ASSERT_EQ(jobs->size(), 1u) << c.Label();
    EXPECT_EQ(jobs->front().inputs, c.inputs);
  }
  CellFilter f;
  f.inputs = sets.inputs.substr(0, 13);  // "sets:" and 8 hex digits, as a label shows them
  auto one = store->ListCells(f);
  ASSERT_TRUE(one.ok()) << one.message();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().inputs, sets.inputs);
  f.inputs = kSeededInputs;
  one = store->ListCells(f);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().inputs, kSeededInputs);
}

// Three runs of cell a (trials 0 and 1; run 1's trial 1 failed) and one of
// cell b, whose only job failed: a window of 2 runs keeps a's runs 2 and 3,
// every cell is listed, b without values.
TEST_P(StoreTest, ListRecentCellValuesGivesEveryCellItsNewestRunsOkTrials) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  JobRow a = MakeJob("a.tflite");
  JobRow b = MakeJob("b.tflite");
  b.model_sha256 = std::string(64, 'b');
  std::vector<int64_t> runs;
  for (int r = 0; r < 3; ++r) {
    auto run = store->CreateRun("r" + std::to_string(r), "{}");
    ASSERT_TRUE(run.ok()) << run.message();
    runs.push_back(*run);
    JobRow a1 = a;
    a1.trial = 1;
    std::vector<JobRow> jobs = {a1, a};  // trial 1 first: the values come back by trial
    if (r == 1) jobs.push_back(b);
    auto ids = store->AddJobs(*run, jobs);
    ASSERT_TRUE(ids.ok()) << ids.message();
    for (size_t i = 0; i < ids->size(); ++i) {
      JobOutcome o;
      o.status = (r == 0 && i == 0) || i == 2 ? "crashed" : "ok";
      JobMetrics m;
      m.p50_us = 1000.0 * (r + 1) + static_cast<double>(jobs[i].trial);
      if (o.status == "ok") o.metrics = m;
      ASSERT_TRUE(store->RecordJobResult((*ids)[i], o).ok());
    }
  }
  auto all = store->ListRecentCellValues(2);
  ASSERT_TRUE(all.ok()) << all.message();
  ASSERT_EQ(all->size(), 2u);
  const CellRecentValues& ra = (*all)[0];
  EXPECT_EQ(ra.cell.model, "a.tflite");
  EXPECT_EQ(ra.last_run_id, runs[2]);
  const std::vector<std::pair<int64_t, double>> want = {
      {runs[1], 2000}, {runs[1], 2001}, {runs[2], 3000}, {runs[2], 3001}};
  EXPECT_EQ(ra.p50_us, want);
  const CellRecentValues& rb = (*all)[1];
  EXPECT_EQ(rb.cell.model_sha256, std::string(64, 'b'));
  EXPECT_EQ(rb.last_run_id, runs[1]);
  EXPECT_TRUE(rb.p50_us.empty());
  auto wide = store->ListRecentCellValues(10);
  ASSERT_TRUE(wide.ok()) << wide.message();
  EXPECT_EQ((*wide)[0].p50_us.size(), 5u);  // run 1's failed trial has none

  // Cells apart in every identity column (the index walk steps through each
  // level) are all listed, as ListCells lists them.
  auto run = store->CreateRun("more", "{}");
  ASSERT_TRUE(run.ok());
  std::vector<JobRow> more;
  for (int field = 0; field < 6; ++field) {
    JobRow j = MakeJob("c.tflite");
    j.model_sha256 = std::string(64, 'b');
    if (field == 0) j.delegate = "xnnpack";
    if (field == 1) j.delegate_options = "z:1";
    if (field == 2) j.device = "pixel";
    if (field == 3) j.runner = "main";
    if (field == 4) j.num_threads = 4;
    if (field == 5) j.inputs = "sets:0123456789abcdef";
    more.push_back(j);
  }
  ASSERT_TRUE(store->AddJobs(*run, more).ok());
  auto cells = store->ListCells({});
  ASSERT_TRUE(cells.ok()) << cells.message();
  auto every = store->ListRecentCellValues(3);
  ASSERT_TRUE(every.ok()) << every.message();
  ASSERT_EQ(every->size(), 8u);
  ASSERT_EQ(cells->size(), every->size());
  for (size_t i = 0; i < cells->size(); ++i) {
    EXPECT_TRUE((*every)[i].cell == (*cells)[i]) << (*cells)[i].Label();
    EXPECT_EQ((*every)[i].cell.model, (*cells)[i].model);
  }
  auto none = store->ListRecentCellValues(0);
  ASSERT_TRUE(none.ok()) << none.message();
  ASSERT_EQ(none->size(), 8u);
  EXPECT_TRUE((*none)[0].p50_us.empty());
}

// The trend's lighter read gives the jobs ListCellJobs gives, with their
// metrics, in the same order.
TEST_P(StoreTest, ListCellTrialsIsListCellJobsWithWhatASeriesReads) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  JobRow a = MakeJob("a.tflite");
  a.runner_sha256 = std::string(64, 'c');
  for (int r = 0; r < 2; ++r) {
    auto run = store->CreateRun("r", "{}");
    ASSERT_TRUE(run.ok());
    JobRow a1 = a;
    a1.trial = 1;
    JobRow other = a;
    other.device = "pixel";
    auto ids = store->AddJobs(*run, {a1, a, other});
    ASSERT_TRUE(ids.ok());
    JobOutcome o;
    o.status = r == 0 ? "ok" : "crashed";
    o.runner_version = "2.16";
    JobMetrics m;
    m.mean_us = 11;
    m.p50_us = 10;
    m.p90_us = 12;
    m.peak_rss_bytes = 1 << 20;
    if (r == 0) o.metrics = m;
    ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  }
  const Cell cell = CellOf(a);
  auto want = store->ListCellJobs(cell);
  auto got = store->ListCellTrials(cell);
  ASSERT_TRUE(want.ok() && got.ok()) << got.message();
  ASSERT_EQ(got->size(), 4u);
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    const JobRow& g = (*got)[i];
    const JobRow& w = (*want)[i];
    EXPECT_EQ(g.id, w.id);
    EXPECT_EQ(g.run_id, w.run_id);
    EXPECT_EQ(g.trial, w.trial);
    EXPECT_EQ(g.status, w.status);
    EXPECT_EQ(g.model, w.model);
    EXPECT_EQ(g.runner_sha256, w.runner_sha256);
    EXPECT_EQ(g.runner_version, w.runner_version);
    EXPECT_TRUE(CellOf(g) == cell);
    ASSERT_EQ(g.metrics.has_value(), w.metrics.has_value());
    if (g.metrics) {
      EXPECT_EQ(g.metrics->p50_us, w.metrics->p50_us);
      EXPECT_EQ(g.metrics->mean_us, w.metrics->mean_us);
      EXPECT_EQ(g.metrics->peak_rss_bytes, w.metrics->peak_rss_bytes);
    }
  }
  EXPECT_TRUE((*got)[1].metrics.has_value());  // the first run's trial 1: ok
}

// A claimed job is listed while its node holds it, not once it ends.
TEST_P(StoreTest, ListClaimedJobsListsTheJobsNodesHoldNow) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("q", "{}");
  ASSERT_TRUE(run.ok()) << run.message();
  ASSERT_TRUE(store->SetRunMode(*run, kRunModeQueue).ok());
  ASSERT_TRUE(store->AddJobs(*run, {MakeJob("a.tflite"), MakeJob("b.tflite")}).ok());
  auto idle = store->ListClaimedJobs();
  ASSERT_TRUE(idle.ok()) << idle.message();
  EXPECT_TRUE(idle->empty());
  NodeRow node;
  node.name = "n1";
  node.host = "h";
  node.pid = 1;
  ASSERT_TRUE(store->RegisterNode(node).ok());
  DeviceTraits local;
  local.name = "local";
  auto claimed = store->ClaimJob("n1", local, 60);
  ASSERT_TRUE(claimed.ok()) << claimed.message();
  ASSERT_TRUE(claimed->has_value());
  auto held = store->ListClaimedJobs();
  ASSERT_TRUE(held.ok()) << held.message();
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ(held->front().id, (*claimed)->id);
  EXPECT_EQ(held->front().claimed_by, "n1");
  EXPECT_EQ(held->front().device, "local");
  JobOutcome o;
  o.status = "ok";
  o.claim_id = (*claimed)->claim_id;
  ASSERT_TRUE(store->RecordJobResult((*claimed)->id, o).ok());
  auto after = store->ListClaimedJobs();
  ASSERT_TRUE(after.ok()) << after.message();
  EXPECT_TRUE(after->empty());
}

TEST_P(StoreTest, ListCellsListsDistinctCellsThatMatchTheFilter) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  JobRow a = MakeJob("old_name.tflite");  // sha256 'a' x 64, cpu, a:1, local
  a.num_threads = 4;
  JobRow b = a;
  b.num_threads = 2;
  JobRow c = a;
  c.model_sha256 = std::string(64, 'b');
  c.model = "b.tflite";
  c.delegate = "xnnpack";
  c.delegate_options = "";
  c.runner = "main";
  for (int r = 0; r < 2; ++r) {
    auto run = store->CreateRun("r" + std::to_string(r), "{}");
    ASSERT_TRUE(run.ok());
    if (r == 1) a.model = b.model = "a.tflite";  // the newest job's file name names the cell
    JobRow a1 = a;
    a1.trial = 1;
    ASSERT_TRUE(store->AddJobs(*run, {a, a1, b, c}).ok());
  }
  auto all = store->ListCells({});
  ASSERT_TRUE(all.ok()) << all.message();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].num_threads, 2u);  // in Cell order: sha256, delegate, options, threads, ...
  EXPECT_EQ((*all)[1].num_threads, 4u);
  EXPECT_EQ((*all)[1].model, "a.tflite");
  EXPECT_EQ((*all)[1].delegate_options, "a:1");
  EXPECT_EQ((*all)[2].model, "b.tflite");
  EXPECT_EQ((*all)[2].runner, "main");
  EXPECT_EQ((*all)[2].delegate, "xnnpack");

  auto count = [&](CellFilter f) {
    auto cells = store->ListCells(f);
    EXPECT_TRUE(cells.ok()) << cells.message();
    return cells.ok() ? cells->size() : size_t{99};
  };
  auto by = [](std::string model, std::string delegate = "") {
    CellFilter f;
    f.model = std::move(model);
    f.delegate = std::move(delegate);
    return f;
  };
  EXPECT_EQ(count(by("a.tflite")), 2u);
  EXPECT_EQ(count(by("old_name.tflite")), 2u);  // any job's file name
  EXPECT_EQ(count(by("AAAAAAAA")), 2u);         // a sha256 prefix, any case
  EXPECT_EQ(count(by("aaaaaaa")), 0u);          // too short for a prefix
  EXPECT_EQ(count(by(std::string(64, 'b'))), 1u);
  EXPECT_EQ(count(by("", "cpu")), 2u);
  EXPECT_EQ(count(by("a.tflite", "xnnpack")), 0u);
  CellFilter f = by("", "cpu");
  f.num_threads = 4;
  EXPECT_EQ(count(f), 1u);
  f = by("");
  f.delegate_options = "";
  EXPECT_EQ(count(f), 1u);
  f = by("");
  f.device = "phone";
  EXPECT_EQ(count(f), 0u);
  f = by("");
  f.runner = "";
  EXPECT_EQ(count(f), 2u);
}

TEST_P(StoreTest, DeviceStatesLeaveEvents) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SetDeviceState("phone", kDeviceQuarantined, "3 infra failures").ok());
  ASSERT_TRUE(store->SetDeviceState("phone", kDeviceOk, "").ok());
  ASSERT_TRUE(store->SetDeviceState("other", kDeviceOk, "").ok());
  auto events = store->ListDeviceEvents("phone");
  ASSERT_TRUE(events.ok()) << events.message();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].state, kDeviceQuarantined);
  EXPECT_EQ((*events)[0].reason, "3 infra failures");
  EXPECT_EQ((*events)[0].name, "phone");
  EXPECT_EQ((*events)[0].at.size(), 20u);
  EXPECT_EQ((*events)[1].state, kDeviceOk);
  auto devices = store->ListDevices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 2u);
  EXPECT_TRUE(store->ListDeviceEvents("nobody")->empty());
}

// Cold/warm init and a device's OpenCL list round
// trip; a job without them reads NULL, a device without them an empty list.
TEST_P(StoreTest, InitColdWarmAndOpenClDevicesRoundTrip) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  auto ids = store->AddJobs(*run, {MakeJob("m.tflite"), MakeJob("n.tflite")});
  ASSERT_TRUE(ids.ok()) << ids.message();
  JobOutcome o;
  o.status = "ok";
  o.metrics = JobMetrics{};
  o.metrics->mean_us = 10;
  o.metrics->init_cold_us = 7500.5;
  o.metrics->init_warm_us = 1200.25;
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  o.metrics->init_cold_us.reset();
  o.metrics->init_warm_us.reset();
  ASSERT_TRUE(store->RecordJobResult((*ids)[1], o).ok());
  auto a = store->GetJob((*ids)[0]);
  auto b = store->GetJob((*ids)[1]);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->metrics && b->metrics);
  EXPECT_EQ(a->metrics->init_cold_us, std::optional<double>(7500.5));
  EXPECT_EQ(a->metrics->init_warm_us, std::optional<double>(1200.25));
  EXPECT_EQ(b->metrics->init_cold_us, std::nullopt);
  EXPECT_EQ(b->metrics->init_warm_us, std::nullopt);

  DeviceRow d;
  d.name = "phone";
  d.opencl.push_back(OpenClDevice{"QUALCOMM Snapdragon(TM)", "QUALCOMM Adreno(TM) 740", "QUALCOMM",
                                  "OpenCL 3.0 QUALCOMM build: 0800.22", "OpenCL 3.0 Adreno(TM) 740",
                                  true, true, 6, int64_t{3} << 32});
  d.opencl.push_back(OpenClDevice{"Portable Computing Language", "cpu-x86-64", "GenuineIntel",
                                  "5.0", "OpenCL 3.0 PoCL", false, false, 2, 1 << 30});
  ASSERT_TRUE(store->UpsertDevice(d).ok());
  DeviceRow plain;
  plain.name = "board";
  ASSERT_TRUE(store->UpsertDevice(plain).ok());
  auto devices = store->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.message();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_TRUE((*devices)[0].opencl.empty());  // "board"
  const std::vector<OpenClDevice>& cl = (*devices)[1].opencl;
  ASSERT_EQ(cl.size(), 2u);
  EXPECT_EQ(cl[0].name, "QUALCOMM Adreno(TM) 740");
  EXPECT_EQ(cl[0].driver_version, "OpenCL 3.0 QUALCOMM build: 0800.22");
  EXPECT_TRUE(cl[0].fp16);
  EXPECT_TRUE(cl[0].gpu);
  EXPECT_EQ(cl[0].compute_units, 6);
  EXPECT_EQ(cl[0].global_memory_bytes, int64_t{3} << 32);
  EXPECT_FALSE(cl[1].gpu);
  EXPECT_EQ(OpenClDeviceLabel(cl),
            "QUALCOMM Adreno(TM) 740 (driver OpenCL 3.0 QUALCOMM build: 0800.22)");
  EXPECT_EQ(OpenClDeviceLabel({}), "");
}

// A v16 file migrates: its results read no cold/warm init
// and its devices no OpenCL list, and it takes both afterwards.
TEST_F(SqliteStoreTest, MigratesVersion16) {
  ASSERT_GE(CurrentSchemaVersion(), 17);
  ASSERT_TRUE(CreateSqliteStoreAtVersionForTesting(path_, 16).ok());
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    const char* rows =
        "INSERT INTO runs(id, name, created_at, spec_json, status) VALUES(1, 'old', 't', '{}', "
        "'finished');"
        "INSERT INTO jobs(run_id, job_key, model, model_path, model_sha256, delegate, device, "
        "status, num_threads) VALUES(1, 'k', 'm', '/m', 's', 'gpu', 'local', 'ok', 1);"
        "INSERT INTO results(job_id, init_us, mean_us, exit_code, signal, runner_json, "
        "stderr_tail, finished_at) VALUES(1, 900, 5.5, 0, 0, '{}', '', 't');"
        "INSERT INTO devices(name, abi, os, cpu, cores, memory_bytes, hostname, agent_version, "
        "last_seen) VALUES('local', 'x86_64', 'Linux', 'cpu', 2, 1, 'h', '1', 't');";
    ASSERT_EQ(sqlite3_exec(db, rows, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto job = store->GetJob(1);
  ASSERT_TRUE(job.ok()) << job.message();
  ASSERT_TRUE(job->metrics.has_value());
  EXPECT_DOUBLE_EQ(job->metrics->init_us, 900);
  EXPECT_EQ(job->metrics->init_cold_us, std::nullopt);
  EXPECT_EQ(job->metrics->init_warm_us, std::nullopt);
  auto devices = store->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.message();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_TRUE((*devices)[0].opencl.empty());
  DeviceRow d = (*devices)[0];
  d.opencl.push_back(OpenClDevice{"p", "gpu0", "v", "1.0", "OpenCL 1.2", true, true, 4, 1 << 20});
  ASSERT_TRUE(store->UpsertDevice(d).ok());
  EXPECT_EQ(store->ListDevices()->at(0).opencl.at(0).name, "gpu0");
}

// A writer that sets a job's device or class but not its cell_device (plain
// SQL, an older tool) still leaves the job in the right cell: triggers keep it.
TEST_F(SqliteStoreTest, TriggersKeepTheCellDeviceOfPlainWrites) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  const char* rows =
      "INSERT INTO runs(id, name, created_at, spec_json, status) VALUES(1, 'r', 't', '{}', "
      "'finished');"
      "INSERT INTO jobs(run_id, job_key, model, model_path, model_sha256, delegate, device, "
      "status) VALUES(1, 'k', 'm', '/m', 's', 'cpu', 'local', 'ok');"
      "INSERT INTO jobs(run_id, job_key, model, model_path, model_sha256, delegate, device, "
      "device_class, status) VALUES(1, 'k', 'm', '/m', 's', 'cpu', 'tcp://a:1', 'lab', 'ok');"
      "INSERT INTO jobs(run_id, job_key, model, model_path, model_sha256, delegate, device, "
      "status) VALUES(1, 'k', 'm', '/m', 's', 'cpu', 'tcp://b:1', 'ok');"
      "UPDATE jobs SET device_class = 'lab' WHERE device = 'tcp://b:1';";
  ASSERT_EQ(sqlite3_exec(db, rows, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto cells = store->ListCells();
  ASSERT_TRUE(cells.ok()) << cells.message();
  ASSERT_EQ(cells->size(), 2u);
  EXPECT_EQ((*cells)[0].device, "class:lab");
  EXPECT_EQ((*cells)[1].device, "local");
  auto lab = store->ListCellJobs((*cells)[0]);
  ASSERT_TRUE(lab.ok()) << lab.message();
  EXPECT_EQ(lab->size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, DFARM_BOTH_BACKENDS, BackendName);
INSTANTIATE_TEST_SUITE_P(Backends, RunSummaryTest, DFARM_BOTH_BACKENDS, BackendName);

}  // namespace
}  // namespace dfarm::store
