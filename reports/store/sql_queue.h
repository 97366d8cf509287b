// The distributed queue of the store over the SQL layer: node
// registry, claims with leases, the reaper, and content-addressed blobs.
// SqlStore's queue methods call these; errors are raw (the store names
// itself). Internal to reports/store.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/base/result.h"
#include "reports/store/sql.h"
#include "reports/store/store.h"

namespace dfarm::store::sql {

Result<void> SetRunMode(Conn& db, int64_t run_id, const std::string& mode);
Result<void> SetRunQueueing(Conn& db, int64_t run_id, const RunQueueing& q);
// Store::CancelRun; kNotFound / kInvalidInput errors name the run only.
Result<CancelledRun> CancelRun(Conn& db, int64_t run_id, const std::string& by);
Result<std::vector<int64_t>> EndUnservedJobs(Conn& db);
Result<void> RegisterNode(Conn& db, const NodeRow& node);
Result<int64_t> NodeHeartbeat(Conn& db, const std::string& node, const std::string& state,
                              int64_t lease_s);
Result<std::vector<NodeRow>> ListNodes(Conn& db);
// The parsed device classes of queue runs (runs.device_classes, a JSON
// object), by run id, for ClaimJob: a run's classes are parsed on its first
// claim and again only when its stored text differs, so a claim parses no
// JSON. One per connection (not thread-safe, like the store).
class DeviceClassCache {
 public:
  // Run `run_id`'s classes, `text` as stored now.
  const DeviceClasses& Get(int64_t run_id, const std::string& text);
  // Forgets every run but `run_ids` (the running queue runs).
  void KeepOnly(const std::set<int64_t>& run_ids);

 private:
  std::map<int64_t, std::pair<std::string, DeviceClasses>> by_run_;  // id -> text, parsed
};

// The id of the job claimed; unset when none.
Result<std::optional<int64_t>> ClaimJob(Conn& db, const std::string& node,
                                        const DeviceTraits& device, int64_t lease_s,
                                        DeviceClassCache& classes);
Result<bool> ReleaseClaim(Conn& db, int64_t job_id, int64_t claim_id);
Result<std::vector<int64_t>> ReapExpiredClaims(Conn& db, int64_t max_claims);
Result<std::vector<JobClaimRow>> ListJobClaims(Conn& db, int64_t job_id);

// The condition under which claim `claim_id` may change job `id` (a WHERE
// clause of `jobs`, no bind parameters): a claim (> 0) while it holds the
// running job; 0 (a job of a run its sweep runs itself) while the job is
// unclaimed and pending (queued or running).
std::string HeldBy(int64_t claim_id);
// A job no claim ever held (a job of a run its sweep runs itself), in any
// status: a WHERE clause of `jobs` like HeldBy.
std::string Unclaimed();
// Why a statement guarded by HeldBy(claim_id) changed no row of job
// `job_id`, as an error: kNotFound without such a job, else kConflict naming
// its status and holder now. `action` names what was refused ("not marked
// running").
Error NotHeld(Conn& db, int64_t job_id, int64_t claim_id, const std::string& action);
// In RecordJobResult's transaction, after the job's row is written: ends
// the claim "finished" (when claim_id > 0).
Result<void> AfterJobRecorded(Conn& db, int64_t job_id, int64_t claim_id);
// After a job's result committed (its own short transaction): marks the
// job's queue run finished when no job of it is pending any more. Locks the
// run only when it looks done, so recording results takes no shared lock.
Result<void> FinishQueueRunIfDone(Conn& db, int64_t job_id);

Result<void> PutBlob(Conn& db, const std::string& sha256, const std::string& path);
Result<bool> HasBlob(Conn& db, const std::string& sha256);
Result<void> GetBlob(Conn& db, const std::string& sha256, const std::string& path);

}  // namespace dfarm::store::sql
