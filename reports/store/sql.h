// The store's SQL layer: one connection interface with two backends (SQLite,
// sqlite_conn.cc; PostgreSQL through libpq, pg_conn.cc), so that the store's
// queries and its schema are written once. Statements use "?" parameters
// (the PostgreSQL backend numbers them); what differs between the dialects is
// asked of the connection (Dialect, NowUnixSql, ...). Internal to reports/store.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/base/result.h"
#include "reports/store/store.h"  // SqliteSync

namespace dfarm::store::sql {

enum class Dialect { kSqlite, kPostgres };

// Bytes to bind as a BLOB / BYTEA.
struct Bytes {
  std::string data;
};

// One value to bind: NULL, an integer (bools as 0/1), a real, a text or
// bytes. An unset optional binds NULL. Copied, so a temporary may be given.
class Value {
 public:
  using Data = std::variant<std::monostate, int64_t, double, std::string, Bytes>;
  Value() = default;        // NULL
  Value(std::nullopt_t) {}  // NOLINT(google-explicit-constructor)
  template <std::integral T>
  Value(T v) : data_(static_cast<int64_t>(v)) {}   // NOLINT(google-explicit-constructor)
  Value(double v) : data_(v) {}                    // NOLINT(google-explicit-constructor)
  Value(std::string v) : data_(std::move(v)) {}    // NOLINT(google-explicit-constructor)
  Value(const char* v) : data_(std::string(v)) {}  // NOLINT(google-explicit-constructor)
  Value(Bytes v) : data_(std::move(v)) {}          // NOLINT(google-explicit-constructor)
  template <typename T>
  Value(const std::optional<T>& v) {  // NOLINT(google-explicit-constructor)
    if (v) *this = Value(*v);
  }

  const Data& data() const { return data_; }

 private:
  Data data_;
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
// InsertSql("INSERT INTO results", row); with rows > 1, that many value lists.
std::string InsertSql(std::string_view verb_and_table, std::span<const Column> columns,
                      size_t rows = 1);

// One prepared statement of a backend. Bind indexes are 1-based, column
// indexes 0-based.
class Cursor {
 public:
  virtual ~Cursor() = default;
  virtual void Bind(int i, const Value& v) = 0;
  // Steps once: true when a row is available, false when done.
  virtual Result<bool> Step() = 0;
  // Back to before the first Step, bindings cleared.
  virtual void Reset() = 0;
  virtual int64_t Int(int col) const = 0;  // a boolean column reads 0/1
  virtual double Double(int col) const = 0;
  virtual bool IsNull(int col) const = 0;
  virtual std::string Text(int col) const = 0;
  virtual std::string Blob(int col) const = 0;  // the bytes of a BLOB / BYTEA column
};

// One connection. Not thread-safe.
class Conn {
 public:
  virtual ~Conn() = default;
  virtual Dialect dialect() const = 0;
  // Runs one or more statements without parameters.
  virtual Result<void> Exec(const std::string& sql) = 0;
  virtual Result<std::unique_ptr<Cursor>> Prepare(std::string_view sql) = 0;
  // Rows changed by the last INSERT/UPDATE/DELETE run on this connection.
  virtual int64_t Changes() const = 0;
  // Starts a transaction that takes the write lock at once (SQLite: BEGIN
  // IMMEDIATE; PostgreSQL: BEGIN, rows are locked as they are written).
  virtual Result<void> Begin() = 0;
  // LISTEN/NOTIFY (PostgreSQL; SQLite has none: Listen does nothing, Notify
  // does nothing and WaitForNotification sleeps and returns false).
  virtual Result<void> Listen(const std::string& channel) = 0;
  virtual Result<void> Notify(const std::string& channel) = 0;
  // Waits up to timeout_ms for a notification on a channel this connection
  // listens to; true when one came (all pending ones are consumed).
  virtual Result<bool> WaitForNotification(int timeout_ms) = 0;
  // Whether the server dropped this connection (PostgreSQL); SQLite: never.
  virtual bool Lost() const = 0;
};

// "a,b,c" and back (tags, device lists: names without commas).
std::string JoinComma(const std::vector<std::string>& items);
std::vector<std::string> SplitComma(const std::string& joined);

// The database clock as unix seconds, as an SQL expression.
std::string NowUnixSql(Dialect d);
// "FOR UPDATE SKIP LOCKED" on PostgreSQL; "" on SQLite (BEGIN IMMEDIATE has
// the one writer already).
std::string ForUpdateSkipLocked(Dialect d);
// "FOR NO KEY UPDATE" on PostgreSQL, "" on SQLite: the lock a transaction
// takes on a run's row before it changes the run or its jobs. Not FOR UPDATE:
// that would also block the foreign key checks (FOR KEY SHARE) of a result
// being recorded, which holds its job's row meanwhile, and the two would
// wait for each other.
std::string LockRunRow(Dialect d);
// group_concat / string_agg of `expr` joined by `separator` (an SQL string literal).
std::string GroupConcat(Dialect d, const std::string& expr, const std::string& separator,
                        bool distinct = false);
// The 1-based position of `needle` in `haystack` (0 when absent), as SQL.
std::string Position(Dialect d, const std::string& haystack, const std::string& needle);

// A statement: Prepare, bind, step, read columns.
class Stmt {
 public:
  static Result<Stmt> Prepare(Conn& conn, std::string_view sql);

  Stmt& Bind(int i, const Value& v) {
    cursor_->Bind(i, v);
    return *this;
  }
  Stmt& BindNull(int i) { return Bind(i, Value()); }
  // Binds the columns' values to parameters 1, 2, ... in order.
  Stmt& BindColumns(std::span<const Column> columns, int first = 1);

  Result<bool> Step() { return cursor_->Step(); }
  // Steps until done (for statements that return no rows).
  Result<void> Run();
  void Reset() { cursor_->Reset(); }

  int64_t Int(int col) const { return cursor_->Int(col); }
  double Double(int col) const { return cursor_->Double(col); }
  bool IsNull(int col) const { return cursor_->IsNull(col); }
  std::string Text(int col) const { return cursor_->Text(col); }
  std::string Blob(int col) const { return cursor_->Blob(col); }

 private:
  explicit Stmt(std::unique_ptr<Cursor> c) : cursor_(std::move(c)) {}
  std::unique_ptr<Cursor> cursor_;
};

// Conn::Begin on construction; ROLLBACK on destruction unless Commit() ran.
class Transaction {
 public:
  static Result<Transaction> Begin(Conn& conn);
  Transaction(Transaction&& o) noexcept : conn_(o.conn_), done_(o.done_) { o.done_ = true; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  Result<void> Commit();

 private:
  explicit Transaction(Conn* conn) : conn_(conn) {}
  Conn* conn_;
  bool done_ = false;
};

// Opens a SQLite database file (created when absent), WAL mode, foreign keys
// on, a 10 s busy timeout, commits synced as `sync` says.
Result<std::unique_ptr<Conn>> OpenSqlite(const std::string& path,
                                         SqliteSync sync = SqliteSync::kFull);
// Connects to PostgreSQL at a libpq URL ("postgresql://user@host:port/db").
Result<std::unique_ptr<Conn>> OpenPostgres(const std::string& url);

}  // namespace dfarm::store::sql
