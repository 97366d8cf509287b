// RAII wrappers over the SQLite C API for the store. Internal to reports/store.
#pragma once

#include <sqlite3.h>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::store::sqlite {

// Owns one sqlite3 connection.
class Db {
 public:
  Db() = default;
  explicit Db(sqlite3* db) : db_(db) {}
  ~Db() { sqlite3_close_v2(db_); }
  Db(Db&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Db& operator=(Db&& o) noexcept {
    if (this != &o) {
      sqlite3_close_v2(db_);
      db_ = o.db_;
      o.db_ = nullptr;
    }
    return *this;
  }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* get() const { return db_; }
  std::string errmsg() const { return db_ ? sqlite3_errmsg(db_) : "no database"; }

  // Runs one or more statements that return no rows we need.
  Result<void> Exec(const std::string& sql);

 private:
  sqlite3* db_ = nullptr;
};

// One value to bind: NULL, an integer (bools as 0/1), a real or a text. An
// unset optional binds NULL. Texts are copied, so a temporary may be given.
class Value {
 public:
  Value() = default;        // NULL
  Value(std::nullopt_t) {}  // NOLINT(google-explicit-constructor)
  template <std::integral T>
  Value(T v) : data_(static_cast<int64_t>(v)) {}  // NOLINT(google-explicit-constructor)
  Value(double v) : data_(v) {}                   // NOLINT(google-explicit-constructor)
  Value(std::string v) : data_(std::move(v)) {}   // NOLINT(google-explicit-constructor)
  template <typename T>
  Value(const std::optional<T>& v) {  // NOLINT(google-explicit-constructor)
    if (v) *this = Value(*v);
  }

  const std::variant<std::monostate, int64_t, double, std::string>& data() const { return data_; }

 private:
  std::variant<std::monostate, int64_t, double, std::string> data_;
};

// A real that is NULL when not finite (a figure over nothing).
inline Value FiniteOrNull(double v) { return std::isfinite(v) ? Value(v) : Value(); }

// A column and the value it gets, so that a statement's column list and its
// values stand side by side instead of in two lists matched by position.
struct Column {
  std::string_view name;
  Value value;
};

// "<verb_and_table>(a, b, c) VALUES(?, ?, ?)" over the columns' names, e.g.
// InsertSql("INSERT OR REPLACE INTO results", row).
std::string InsertSql(std::string_view verb_and_table, std::span<const Column> columns);

// Owns one prepared statement. Bind indexes are 1-based, column indexes 0-based.
class Stmt {
 public:
  static Result<Stmt> Prepare(const Db& db, std::string_view sql);
  Stmt(Stmt&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  Stmt& Bind(int i, int64_t v);
  Stmt& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  Stmt& Bind(int i, double v);
  Stmt& Bind(int i, const std::string& v);
  Stmt& BindNull(int i);
  Stmt& Bind(int i, const Value& v);
  // Binds the columns' values to parameters 1, 2, ... in order.
  Stmt& BindColumns(std::span<const Column> columns);

  // Steps once: true when a row is available, false when done.
  Result<bool> Step();
  // Steps until done (for statements that return no rows).
  Result<void> Run();
  void Reset();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const;

 private:
  Stmt(const Db* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  const Db* db_;
  sqlite3_stmt* stmt_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless Commit() ran.
class Transaction {
 public:
  static Result<Transaction> Begin(Db& db);
  Transaction(Transaction&& o) noexcept : db_(o.db_), done_(o.done_) { o.done_ = true; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  Result<void> Commit();

 private:
  explicit Transaction(Db* db) : db_(db) {}
  Db* db_;
  bool done_ = false;
};

}  // namespace dfarm::store::sqlite
