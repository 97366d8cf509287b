// The store's schema: the migrations that build it, in order, written once in
// SQLite's dialect and translated for PostgreSQL (ForDialect), and the code
// that applies them. Internal to reports/store.
//
// Schema changes are appended as a new migration and never edited once
// released: a database records the number of migrations applied in
// schema_version, and opening it applies the rest in order.
#pragma once

#include "agent/base/result.h"
#include "reports/store/sql.h"

namespace dfarm::store::sql {

// The schema version this build writes: the number of migrations.
int SchemaVersion();

// Applies the migrations `db` lacks, up to `target` (SchemaVersion(), or older
// for tests), in one transaction (on PostgreSQL under an advisory lock, so
// that hosts opening a new database at once migrate it once). Fails on a
// database newer than this build or one that holds tables but no
// schema_version.
Result<void> Migrate(Conn& db, int target);

// A migration as the dialect writes it. SQLite's text is the schema's one
// description; for PostgreSQL "id INTEGER PRIMARY KEY" becomes BIGSERIAL,
// INTEGER BIGINT, REAL DOUBLE PRECISION, BLOB BYTEA, and WITHOUT ROWID goes.
std::string ForDialect(const std::string& sqlite_sql, Dialect d);

}  // namespace dfarm::store::sql
