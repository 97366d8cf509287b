#include "reports/store/sqlite_util.h"

#include <type_traits>

namespace dfarm::store::sqlite {

Result<void> Db::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = err ? err : errmsg();
    sqlite3_free(err);
    return MakeError(message);
  }
  return Ok();
}

Result<Stmt> Stmt::Prepare(const Db& db, std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db.get(), sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return MakeError(db.errmsg());
  }
  return Stmt(&db, stmt);
}

Stmt& Stmt::Bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

Stmt& Stmt::Bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}

Stmt& Stmt::Bind(int i, const std::string& v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::BindNull(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

Stmt& Stmt::Bind(int i, const Value& v) {
  std::visit(
      [&](const auto& x) {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::monostate>) {
          BindNull(i);
        } else {
          Bind(i, x);
        }
      },
      v.data());
  return *this;
}

Stmt& Stmt::BindColumns(std::span<const Column> columns) {
  for (size_t i = 0; i < columns.size(); ++i) Bind(static_cast<int>(i + 1), columns[i].value);
  return *this;
}

std::string InsertSql(std::string_view verb_and_table, std::span<const Column> columns) {
  std::string names;
  std::string params;
  for (const Column& c : columns) {
    if (!names.empty()) {
      names += ", ";
      params += ", ";
    }
    names += c.name;
    params += "?";
  }
  return std::string(verb_and_table) + "(" + names + ") VALUES(" + params + ")";
}

Result<bool> Stmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return MakeError(db_->errmsg());
}

Result<void> Stmt::Run() {
  for (;;) {
    auto row = Step();
    if (!row) return row.error();
    if (!*row) return Ok();
  }
}

void Stmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Stmt::Text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

Result<Transaction> Transaction::Begin(Db& db) {
  auto r = db.Exec("BEGIN IMMEDIATE");
  if (!r) return r.error();
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (!done_) (void)db_->Exec("ROLLBACK");
}

Result<void> Transaction::Commit() {
  auto r = db_->Exec("COMMIT");
  if (r) done_ = true;
  return r;
}

}  // namespace dfarm::store::sqlite
