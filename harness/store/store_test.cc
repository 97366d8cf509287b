#include "harness/store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>

namespace dfarm::store {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dfarm_store_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "x.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Store> Open() {
    auto s = OpenSqliteStore(path_);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.message());
    return s.ok() ? std::move(*s) : nullptr;
  }

  static JobRow MakeJob(const std::string& model) {
    JobRow j;
    j.job_key = "key-" + model;
    j.model = model;
    j.model_path = "/models/" + model;
    j.model_sha256 = std::string(64, 'a');
    j.delegate = "cpu";
    j.delegate_options = "a:1";
    j.device = "local";
    return j;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(StoreTest, MigratesEmptyFile) {
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

TEST_F(StoreTest, RoundTripAndReopen) {
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
    ASSERT_TRUE(store->MarkJobRunning(ids[0]).ok());

    JobOutcome ok;
    ok.status = "ok";
    ok.exit_code = 0;
    ok.wall_ms = 123.5;
    Metrics m;
    m.init_us = 1000;
    m.first_us = 2000;
    m.mean_us = 1500.5;
    m.p50_us = 1400;
    m.p90_us = 1800;
    m.p99_us = 1900;
    m.num_runs = 3;
    m.peak_rss_bytes = 50 << 20;
    m.arena_bytes = 1 << 20;
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

TEST_F(StoreTest, ErrorsNameTheThing) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->GetRun(42);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.message().find("no run 42"), std::string::npos);
  EXPECT_FALSE(store->MarkJobRunning(7).ok());
  JobOutcome o;
  o.status = "queued";
  EXPECT_FALSE(store->RecordJobResult(1, o).ok());
  EXPECT_FALSE(store->FinishRun(1, "bogus").ok());
  // A job of a run that does not exist violates the foreign key.
  EXPECT_FALSE(store->AddJob(99, MakeJob("c.tflite")).ok());
}

TEST_F(StoreTest, RefusesForeignFiles) {
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

TEST_F(StoreTest, SchedulerColumns) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  JobRow j = MakeJob("a.tflite");
  j.num_threads = 4;
  auto id = store->AddJob(*run, j);
  ASSERT_TRUE(id.ok()) << id.message();
  ASSERT_TRUE(store->MarkJobRunning(*id).ok());
  ASSERT_TRUE(store->MarkJobRunning(*id).ok());
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

TEST_F(StoreTest, MigratesVersion1) {
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

}  // namespace
}  // namespace dfarm::store
