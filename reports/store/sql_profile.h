// Per-op profiles, sustained-mode curves and task accuracy of the store
// over the SQL layer: what RecordJobResult writes of a JobOutcome's profile
// and curve, and what GetProfile, ListRunProfiles and ListRunSustained read. SqlStore's methods
// call these; errors are raw (the store names itself). Internal to reports/store.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "agent/base/result.h"
#include "reports/store/sql.h"
#include "reports/store/store.h"

namespace dfarm::store::sql {

// In RecordJobResult's transaction: replaces the job's profile rows with
// `profile` (none when unset).
Result<void> ReplaceProfile(Conn& db, int64_t job_id, const std::optional<JobProfile>& profile);
// The job's profile; unset when it has none (the job's existence is the
// caller's to check).
Result<std::optional<JobProfile>> ReadProfile(Conn& db, int64_t job_id);
// Every profiled job of the run: runs and by_op, by job id.
Result<std::map<int64_t, JobProfile>> ReadRunProfiles(Conn& db, int64_t run_id);

// Schema v16, in RecordJobResult's transaction (after the results row):
// replaces the job's sustained curve (none when unset) and sets
// results.sustained_s / sustained_window_ms.
Result<void> ReplaceSustained(Conn& db, int64_t job_id,
                              const std::optional<JobSustained>& sustained);
// The sustained curves of the run's jobs, by job id.
Result<std::map<int64_t, JobSustained>> ReadRunSustained(Conn& db, int64_t run_id);

// Schema v21, in RecordJobResult's transaction: replaces the job's task
// accuracy (none when unset).
Result<void> ReplaceTaskAccuracy(Conn& db, int64_t job_id, const std::optional<TaskAccuracy>& task);
// The task accuracy of the run's jobs that have it, by job id.
Result<std::map<int64_t, TaskAccuracy>> ReadRunTaskAccuracy(Conn& db, int64_t run_id);

}  // namespace dfarm::store::sql
