// The store's SQLite schema: the migrations that build it, in order, and the
// code that applies them. Internal to reports/store.
//
// Schema changes are appended as a new migration and never edited once
// released: a database records the number of migrations applied in
// schema_version, and opening it applies the rest in order.
#pragma once

#include "agent/base/result.h"
#include "reports/store/sqlite_util.h"

namespace dfarm::store::sqlite {

// The schema version this build writes: the number of migrations.
int SchemaVersion();

// Applies the migrations `db` lacks, up to `target` (SchemaVersion(), or older
// for tests), in one transaction. Fails on a database newer than this build
// or one that holds tables but no schema_version.
Result<void> Migrate(Db& db, int target);

}  // namespace dfarm::store::sqlite
