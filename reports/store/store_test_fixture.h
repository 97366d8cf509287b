// A fresh store per test on either backend, for the store's tests: SQLite (a
// temp file) or PostgreSQL (a fresh database on one PgServer for the whole
// test binary, started on first use on the test thread).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "reports/store/store.h"

namespace dfarm::store {

enum class Backend { kSqlite, kPostgres };

// "sqlite" / "postgres": the names of INSTANTIATE_TEST_SUITE_P's instances.
std::string BackendName(const ::testing::TestParamInfo<Backend>& info);

// Both backends, for INSTANTIATE_TEST_SUITE_P(Backends, X, kBothBackends, BackendName).
#define DFARM_BOTH_BACKENDS ::testing::Values(Backend::kSqlite, Backend::kPostgres)

// The fixture's work; StoreTest and SqliteStoreTest pick the backend.
class StoreTestBase : public ::testing::Test {
 protected:
  virtual Backend backend() const = 0;
  bool pg() const { return backend() == Backend::kPostgres; }

  // A fresh store location: SQLite a temp file, PostgreSQL a fresh database.
  // Without a PostgreSQL server the test fails, unless DFARM_SKIP_POSTGRES=1.
  void SetUp() override;
  void TearDown() override;

  // Opens the store at where_ (again: a reopen).
  std::unique_ptr<Store> Open();
  // Runs `sql` straight on the database (as another process would).
  void ExecSql(const std::string& sql);
  // The first column of the first row of `sql` on the database, "" when none.
  std::string QueryValue(const std::string& sql);

  static JobRow MakeJob(const std::string& model);

  std::filesystem::path dir_;
  std::string path_;   // the SQLite file
  std::string where_;  // what OpenStore takes: path_ or the PostgreSQL URL
};

// Value-parameterized over the backend.
class StoreTest : public StoreTestBase, public ::testing::WithParamInterface<Backend> {
 protected:
  Backend backend() const override { return GetParam(); }
};

// SQLite only (the file opened with sqlite3 directly, migrations of old files).
class SqliteStoreTest : public StoreTestBase {
 protected:
  Backend backend() const override { return Backend::kSqlite; }
};

}  // namespace dfarm::store
