// The PostgreSQL backend of the store's SQL layer (sql.h), over libpq.
//
// Parameters go as text with their types given (int8, float8, text; bytea
// as binary), so the server never has to guess a type; results come as text.
// A text that is not valid UTF-8 (a runner's stderr may hold anything) is
// repaired (U+FFFD) and NUL bytes are dropped: PostgreSQL's text holds neither.

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "reports/store/sql.h"

namespace dfarm::store::sql {
namespace {

constexpr Oid kInt8 = 20;
constexpr Oid kFloat8 = 701;
constexpr Oid kText = 25;
constexpr Oid kBytea = 17;

// "?" placeholders to "$1", "$2", ... outside quoted strings and identifiers.
std::string NumberParameters(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  char quote = 0;
  for (char c : sql) {
    if (quote) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += '$';
      out += std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

// `s` as valid UTF-8 without NUL bytes: invalid sequences become U+FFFD.
std::string CleanText(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c == 0) {
      ++i;
      continue;
    }
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && len == 2) ok = c >= 0xc2;
    if (ok && len == 3) {
      unsigned cp = ((c & 0x0fu) << 12) | ((p[i + 1] & 0x3fu) << 6) | (p[i + 2] & 0x3fu);
      ok = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);
    }
    if (ok && len == 4) {
      unsigned cp = ((c & 0x07u) << 18) | ((p[i + 1] & 0x3fu) << 12) | ((p[i + 2] & 0x3fu) << 6) |
                    (p[i + 3] & 0x3fu);
      ok = cp >= 0x10000 && cp <= 0x10ffff;
    }
    if (!ok) {
      out += "\xef\xbf\xbd";
      ++i;
      continue;
    }
    out.append(s, i, len);
    i += len;
  }
  return out;
}

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// libpq's message as one line: its inner line breaks and tabs become spaces.
std::string Trimmed(const char* message) {
  std::string s;
  for (const char* p = message ? message : ""; *p; ++p) {
    const bool blank = *p == '\n' || *p == '\t' || *p == '\r' || *p == ' ';
    if (blank && (s.empty() || s.back() == ' ')) continue;
    s += blank ? ' ' : *p;
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The error of a failed statement. SQLSTATE class 40 (transaction rollback:
// 40001 serialization failure, 40P01 deadlock detected) is ErrorKind::kTransient:
// the server rolled the transaction back, and running it again can succeed.
Error StatementError(PGconn* conn, const PGresult* res) {
  std::string message = Trimmed(PQresultErrorMessage(res));
  if (message.empty()) message = Trimmed(PQerrorMessage(conn));
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const bool transient = state != nullptr && std::strncmp(state, "40", 2) == 0;
  return MakeError(transient ? ErrorKind::kTransient : ErrorKind::kFailed, std::move(message));
}

class PgConn;

class PgCursor final : public Cursor {
 public:
  PgCursor(PgConn* conn, std::string sql) : conn_(conn), sql_(std::move(sql)) {}
  ~PgCursor() override { Clear(); }

  void Bind(int i, const Value& v) override {
    if (i < 1) return;
    const size_t k = static_cast<size_t>(i - 1);
    if (values_.size() <= k) {
      values_.resize(k + 1);
      types_.resize(k + 1, 0);
      formats_.resize(k + 1, 0);
    }
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          formats_[k] = 0;
          if constexpr (std::is_same_v<T, std::monostate>) {
            values_[k].reset();
            types_[k] = 0;
          } else if constexpr (std::is_same_v<T, int64_t>) {
            values_[k] = std::to_string(x);
            types_[k] = kInt8;
          } else if constexpr (std::is_same_v<T, double>) {
            values_[k] = FormatDouble(x);
            types_[k] = kFloat8;
          } else if constexpr (std::is_same_v<T, std::string>) {
            values_[k] = CleanText(x);
            types_[k] = kText;
          } else {
            values_[k] = x.data;
            types_[k] = kBytea;
            formats_[k] = 1;
          }
        },
        v.data());
  }

  Result<bool> Step() override;

  void Reset() override {
    Clear();
    values_.clear();
    types_.clear();
    formats_.clear();
  }

  int64_t Int(int col) const override {
    const char* v = PQgetvalue(res_, row_, col);
    if (v[0] == 't' && v[1] == 0) return 1;
    if (v[0] == 'f' && v[1] == 0) return 0;
    return std::strtoll(v, nullptr, 10);
  }
  double Double(int col) const override {
    return std::strtod(PQgetvalue(res_, row_, col), nullptr);
  }
  bool IsNull(int col) const override { return PQgetisnull(res_, row_, col) != 0; }
  std::string Text(int col) const override {
    return std::string(PQgetvalue(res_, row_, col),
                       static_cast<size_t>(PQgetlength(res_, row_, col)));
  }
  std::string Blob(int col) const override {
    size_t n = 0;
    unsigned char* raw =
        PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(res_, row_, col)), &n);
    if (!raw) return {};
    std::string out(reinterpret_cast<const char*>(raw), n);
    PQfreemem(raw);
    return out;
  }

 private:
  void Clear() {
    if (res_) PQclear(res_);
    res_ = nullptr;
    row_ = -1;
  }

  PgConn* conn_;
  std::string sql_;
  std::vector<std::optional<std::string>> values_;
  std::vector<Oid> types_;
  std::vector<int> formats_;
  PGresult* res_ = nullptr;
  int row_ = -1;  // the current row; -1 before the first Step
};

class PgConn final : public Conn {
 public:
  explicit PgConn(PGconn* conn) : conn_(conn) {}
  ~PgConn() override { PQfinish(conn_); }

  Dialect dialect() const override { return Dialect::kPostgres; }
  bool Lost() const override { return PQstatus(conn_) != CONNECTION_OK; }

  Result<void> Exec(const std::string& sql) override {
    if (auto r = EnsureConnected(); !r) return r;
    PGresult* res = PQexec(conn_, sql.c_str());
    ExecStatusType st = PQresultStatus(res);
    Result<void> out = Ok();
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
      out = StatementError(conn_, res);
    } else {
      NoteChanges(res);
    }
    PQclear(res);
    return out;
  }

  Result<std::unique_ptr<Cursor>> Prepare(std::string_view sql) override {
    return std::unique_ptr<Cursor>(std::make_unique<PgCursor>(this, NumberParameters(sql)));
  }

  int64_t Changes() const override { return changes_; }

  Result<void> Begin() override { return Exec("BEGIN"); }

  Result<void> Listen(const std::string& channel) override {
    auto r = Exec("LISTEN " + channel);
    if (r) listening_.push_back(channel);
    return r;
  }

  Result<void> Notify(const std::string& channel) override { return Exec("NOTIFY " + channel); }

  Result<bool> WaitForNotification(int timeout_ms) override;

  // Runs a prepared statement; `res` gets the result (freed by the caller).
  Result<PGresult*> Run(const std::string& sql, const std::vector<std::optional<std::string>>& v,
                        const std::vector<Oid>& types, const std::vector<int>& formats) {
    if (auto r = EnsureConnected(); !r) return r.error();
    std::vector<const char*> values(v.size());
    std::vector<int> lengths(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      values[i] = v[i] ? v[i]->data() : nullptr;
      lengths[i] = v[i] ? static_cast<int>(v[i]->size()) : 0;
    }
    PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(v.size()), types.data(),
                                 values.data(), lengths.data(), formats.data(), 0);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      Error error = StatementError(conn_, res);
      PQclear(res);
      return error;
    }
    NoteChanges(res);
    return res;
  }

 private:
  void NoteChanges(PGresult* res) {
    const char* n = PQcmdTuples(res);
    changes_ = n && *n ? std::strtoll(n, nullptr, 10) : 0;
  }

  // A connection the server dropped (a restart, a network blip) is opened
  // again once, outside a transaction (inside one, what it held is gone).
  Result<void> EnsureConnected() {
    if (PQstatus(conn_) == CONNECTION_OK) return Ok();
    if (PQtransactionStatus(conn_) == PQTRANS_UNKNOWN) PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) {
      return MakeError("lost the connection to PostgreSQL: " + Trimmed(PQerrorMessage(conn_)));
    }
    for (const std::string& c : listening_) {
      PGresult* res = PQexec(conn_, ("LISTEN " + c).c_str());
      PQclear(res);
    }
    return Ok();
  }

  PGconn* conn_;
  int64_t changes_ = 0;
  std::vector<std::string> listening_;
};

Result<bool> PgCursor::Step() {
  if (row_ < 0 && !res_) {
    auto res = conn_->Run(sql_, values_, types_, formats_);
    if (!res) return res.error();
    res_ = *res;
  }
  ++row_;
  return row_ < PQntuples(res_);
}

Result<bool> PgConn::WaitForNotification(int timeout_ms) {
  if (auto r = EnsureConnected(); !r) return r.error();
  bool got = false;
  auto drain = [&] {
    while (PGnotify* n = PQnotifies(conn_)) {
      got = true;
      PQfreemem(n);
    }
  };
  PQconsumeInput(conn_);
  drain();
  if (got) return true;
  pollfd pfd{PQsocket(conn_), POLLIN, 0};
  int rc = ::poll(&pfd, 1, timeout_ms);
  if (rc < 0 && errno != EINTR) return MakeError(std::string("poll: ") + std::strerror(errno));
  if (rc > 0) {
    if (!PQconsumeInput(conn_)) {
      return MakeError("lost the connection to PostgreSQL: " + Trimmed(PQerrorMessage(conn_)));
    }
    drain();
  }
  return got;
}

void IgnoreNotice(void*, const char*) {}

}  // namespace

Result<std::unique_ptr<Conn>> OpenPostgres(const std::string& url) {
  PGconn* raw = PQconnectdb(url.c_str());
  auto conn = std::make_unique<PgConn>(raw);
  if (!raw) return MakeError("out of memory");
  if (PQstatus(raw) != CONNECTION_OK) return MakeError(Trimmed(PQerrorMessage(raw)));
  PQsetNoticeProcessor(raw, IgnoreNotice, nullptr);
  if (auto r = conn->Exec("SET client_encoding = 'UTF8'; SET client_min_messages = warning"); !r) {
    return r.error();
  }
  return std::unique_ptr<Conn>(std::move(conn));
}

}  // namespace dfarm::store::sql
