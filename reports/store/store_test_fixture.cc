#include "reports/store/store_test_fixture.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "reports/store/testing/pg_server.h"

namespace dfarm::store {
namespace {

namespace fs = std::filesystem;
using testing::PgServer;

// The binary's one server: the CTest run's, else one started by the first
// PostgreSQL test (on the test thread, which lives until the end) and stopped
// at exit; null when it could not start (`why` says why).
PgServer* SharedServer(std::string* why) {
  static std::string failure;
  static std::unique_ptr<PgServer> server = []() -> std::unique_ptr<PgServer> {
    if (auto shared = PgServer::AttachToRun()) return shared;
    std::string missing;
    if (!testing::PgServerAvailable(&missing)) {
      failure = "no PostgreSQL server here: " + missing;
      return std::unique_ptr<PgServer>();
    }
    auto s = PgServer::Start();
    if (!s.ok()) {
      failure = "PostgreSQL did not start: " + s.message();
      return std::unique_ptr<PgServer>();
    }
    return std::move(*s);
  }();
  *why = failure;
  return server.get();
}

// On the CTest run's server the databases a process made go when it exits
// (after every fixture and store of its tests is gone).
void DropAtExit(int port, const std::string& database) {
  struct Dropper {
    int port = 0;
    std::vector<std::string> databases;
    ~Dropper() {
      auto server = PgServer::Attach(port);
      for (const std::string& d : databases) (void)server->DropDatabase(d);
    }
  };
  static Dropper dropper;
  dropper.port = port;
  dropper.databases.push_back(database);
}

bool SkipPostgres() {
  const char* v = std::getenv("DFARM_SKIP_POSTGRES");
  return v != nullptr && std::string(v) == "1";
}

struct PgCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};

}  // namespace

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "sqlite" : "postgres";
}

void StoreTestBase::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  dir_ =
      fs::temp_directory_path() / ("dfarm_store_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  path_ = (dir_ / "x.db").string();
  where_ = path_;
  if (!pg()) return;
  std::string why;
  PgServer* server = SharedServer(&why);
  if (server == nullptr) {
    if (SkipPostgres()) GTEST_SKIP() << why << " (DFARM_SKIP_POSTGRES=1)";
    FAIL() << why << " (set DFARM_SKIP_POSTGRES=1 to skip the PostgreSQL tests)";
  }
  static int counter = 0;
  const std::string database = "t" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
  auto url = server->CreateDatabase(database);
  ASSERT_TRUE(url.ok()) << url.message();
  where_ = *url;
  if (server->dir().empty()) DropAtExit(server->port(), database);
}

void StoreTestBase::TearDown() { fs::remove_all(dir_); }

std::unique_ptr<Store> StoreTestBase::Open() {
  auto s = OpenStore(where_);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.message());
  return s.ok() ? std::move(*s) : nullptr;
}

void StoreTestBase::ExecSql(const std::string& sql) {
  if (pg()) {
    std::unique_ptr<PGconn, PgCloser> conn(PQconnectdb(where_.c_str()));
    ASSERT_EQ(PQstatus(conn.get()), CONNECTION_OK) << PQerrorMessage(conn.get());
    PGresult* r = PQexec(conn.get(), sql.c_str());
    const auto status = PQresultStatus(r);
    const std::string error = PQresultErrorMessage(r);
    PQclear(r);
    ASSERT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) << sql << ": " << error;
    return;
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  const std::string full = "PRAGMA foreign_keys = ON; " + sql;
  EXPECT_EQ(sqlite3_exec(db, full.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sql << ": " << sqlite3_errmsg(db);
  sqlite3_close(db);
}

std::string StoreTestBase::QueryValue(const std::string& sql) {
  std::string out;
  if (pg()) {
    std::unique_ptr<PGconn, PgCloser> conn(PQconnectdb(where_.c_str()));
    EXPECT_EQ(PQstatus(conn.get()), CONNECTION_OK) << PQerrorMessage(conn.get());
    PGresult* r = PQexec(conn.get(), sql.c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << sql << ": " << PQresultErrorMessage(r);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
    PQclear(r);
    return out;
  }
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK)
      << sql << ": " << sqlite3_errmsg(db);
  if (st != nullptr && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

JobRow StoreTestBase::MakeJob(const std::string& model) {
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

}  // namespace dfarm::store
