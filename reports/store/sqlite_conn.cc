// The SQLite backend of the store's SQL layer (sql.h).
#include <sqlite3.h>

#include <chrono>
#include <thread>
#include <type_traits>

#include "reports/store/sql.h"

namespace dfarm::store::sql {
namespace {

class SqliteCursor final : public Cursor {
 public:
  SqliteCursor(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteCursor() override { sqlite3_finalize(stmt_); }

  void Bind(int i, const Value& v) override {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::monostate>) {
            sqlite3_bind_null(stmt_, i);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            sqlite3_bind_int64(stmt_, i, x);
          } else if constexpr (std::is_same_v<T, double>) {
            sqlite3_bind_double(stmt_, i, x);
          } else if constexpr (std::is_same_v<T, std::string>) {
            sqlite3_bind_text(stmt_, i, x.data(), static_cast<int>(x.size()), SQLITE_TRANSIENT);
          } else {
            sqlite3_bind_blob(stmt_, i, x.data.data(), static_cast<int>(x.data.size()),
                              SQLITE_TRANSIENT);
          }
        },
        v.data());
  }

  Result<bool> Step() override {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return MakeError(sqlite3_errmsg(db_));
  }

  void Reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  int64_t Int(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const override { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const override {
    const auto* p = sqlite3_column_text(stmt_, col);
    if (!p) return {};
    return std::string(reinterpret_cast<const char*>(p),
                       static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  std::string Blob(int col) const override {
    const void* p = sqlite3_column_blob(stmt_, col);
    if (!p) return {};
    return std::string(static_cast<const char*>(p),
                       static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

class SqliteConn final : public Conn {
 public:
  explicit SqliteConn(sqlite3* db) : db_(db) {}
  ~SqliteConn() override { sqlite3_close_v2(db_); }

  Dialect dialect() const override { return Dialect::kSqlite; }
  bool Lost() const override { return false; }

  Result<void> Exec(const std::string& sql) override {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      return MakeError(message);
    }
    return Ok();
  }

  Result<std::unique_ptr<Cursor>> Prepare(std::string_view sql) override {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
        SQLITE_OK) {
      return MakeError(sqlite3_errmsg(db_));
    }
    return std::unique_ptr<Cursor>(std::make_unique<SqliteCursor>(db_, stmt));
  }

  int64_t Changes() const override { return sqlite3_changes(db_); }

  Result<void> Begin() override { return Exec("BEGIN IMMEDIATE"); }
  Result<void> Listen(const std::string&) override { return Ok(); }
  Result<void> Notify(const std::string&) override { return Ok(); }
  Result<bool> WaitForNotification(int timeout_ms) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return false;
  }

 private:
  sqlite3* db_;
};

}  // namespace

Result<std::unique_ptr<Conn>> OpenSqlite(const std::string& path, SqliteSync sync) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  auto conn = std::make_unique<SqliteConn>(raw);
  if (rc != SQLITE_OK) return MakeError(raw ? sqlite3_errmsg(raw) : "out of memory");
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, 10000);
  // WAL so the dashboard can read while a sweep writes. FULL fsyncs the WAL
  // at every commit: a result the store returned from survives an OS crash
  // or a power loss, not only a crash of dfarm (NORMAL's promise).
  // Connections opening a new file at once race to switch it to WAL; the
  // loser gets SQLITE_BUSY without the busy handler, so it tries again for
  // as long as the busy timeout.
  const char* synchronous = sync == SqliteSync::kFull ? "FULL" : "NORMAL";
  const std::string pragmas = std::string("PRAGMA journal_mode = WAL; PRAGMA synchronous = ") +
                              synchronous + "; PRAGMA foreign_keys = ON;";
  for (int waited_ms = 0;; waited_ms += 10) {
    auto r = conn->Exec(pragmas);
    if (r) break;
    if ((sqlite3_extended_errcode(raw) & 0xff) != SQLITE_BUSY || waited_ms >= 10000) {
      return r.error();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::unique_ptr<Conn>(std::move(conn));
}

}  // namespace dfarm::store::sql
