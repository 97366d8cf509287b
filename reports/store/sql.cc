#include "reports/store/sql.h"

namespace dfarm::store::sql {

std::string InsertSql(std::string_view verb_and_table, std::span<const Column> columns,
                      size_t rows) {
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
  std::string sql = std::string(verb_and_table) + "(" + names + ") VALUES";
  for (size_t r = 0; r < rows; ++r) sql += (r == 0 ? "(" : ", (") + params + ")";
  return sql;
}

std::string JoinComma(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) {
    if (!out.empty()) out += ',';
    out += s;
  }
  return out;
}

std::vector<std::string> SplitComma(const std::string& joined) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < joined.size()) {
    size_t end = joined.find(',', start);
    if (end == std::string::npos) end = joined.size();
    if (end > start) out.push_back(joined.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string NowUnixSql(Dialect d) {
  return d == Dialect::kPostgres ? "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS BIGINT)"
                                 : "CAST(strftime('%s', 'now') AS INTEGER)";
}

std::string ForUpdateSkipLocked(Dialect d) {
  return d == Dialect::kPostgres ? " FOR UPDATE SKIP LOCKED" : "";
}

std::string LockRunRow(Dialect d) { return d == Dialect::kPostgres ? " FOR NO KEY UPDATE" : ""; }

std::string GroupConcat(Dialect d, const std::string& expr, const std::string& separator,
                        bool distinct) {
  const std::string dist = distinct ? "DISTINCT " : "";
  if (d == Dialect::kPostgres) {
    return "string_agg(" + dist + expr + ", " + separator +
           (distinct ? " ORDER BY " + expr : std::string()) + ")";
  }
  // SQLite's group_concat(DISTINCT x) takes no separator: it is ','.
  return distinct ? "group_concat(DISTINCT " + expr + ")"
                  : "group_concat(" + expr + ", " + separator + ")";
}

std::string Position(Dialect d, const std::string& haystack, const std::string& needle) {
  return d == Dialect::kPostgres ? "strpos(" + haystack + ", " + needle + ")"
                                 : "instr(" + haystack + ", " + needle + ")";
}

Result<Stmt> Stmt::Prepare(Conn& conn, std::string_view sql) {
  auto c = conn.Prepare(sql);
  if (!c) return c.error();
  return Stmt(std::move(*c));
}

Stmt& Stmt::BindColumns(std::span<const Column> columns, int first) {
  for (size_t i = 0; i < columns.size(); ++i) {
    Bind(first + static_cast<int>(i), columns[i].value);
  }
  return *this;
}

Result<void> Stmt::Run() {
  for (;;) {
    auto row = Step();
    if (!row) return row.error();
    if (!*row) return Ok();
  }
}

Result<Transaction> Transaction::Begin(Conn& conn) {
  auto r = conn.Begin();
  if (!r) return r.error();
  return Transaction(&conn);
}

Transaction::~Transaction() {
  if (!done_) (void)conn_->Exec("ROLLBACK");
}

Result<void> Transaction::Commit() {
  auto r = conn_->Exec("COMMIT");
  if (r) done_ = true;
  return r;
}

}  // namespace dfarm::store::sql
