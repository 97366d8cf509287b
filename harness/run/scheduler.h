// Scheduler: runs a run's pending jobs on their devices. One worker thread per
// device, devices in parallel, one job at a time per device. Each worker owns
// its device session (AgentClient); the workers' store calls borrow a
// connection each from one store::StorePool (one connection per worker
// unless SchedulerContext::store_pool says otherwise).
//
// - A job that ends `infra` (device unreachable, push or transport failure,
//   an agent-side infra result) is retried up to SchedulerSpec::retries times
//   with exponential backoff; no other status is ever retried.
// - A device whose jobs end `infra` quarantine_after times in a row is
//   quarantined for the rest of the sweep (recorded in the store's devices
//   table). Its current and remaining jobs move to an equivalent device when
//   failover is "same_abi" and one exists, else they are recorded `infra`.
// - A job whose delegate names a plugin pushes the plugin file like the model
//   (by sha256, counted in bytes_pushed) and sends it as JobSpec::plugin_sha256,
//   with the `path` option left out of the delegate options sent.
// - Cancellation (the borrowed flag, set by Ctrl-C) stops workers between
//   jobs and cancels the jobs in flight on their agents (CancelJob, or a
//   dropped connection for an old agent): those go back to "queued", so every
//   job is either recorded in a final status or queued, and --resume runs them.
// - Cooldown (SchedulerSpec::cooldown): before each job, a pause, then
//   waiting for the device's hottest thermal zone (WaitForCooldown, cooldown.h).
// - A job whose device's agent lacks a feature it needs (job_features.h) is
//   recorded `infra` at once, naming the feature; the device serves others.
// - What the agent returns is classified and validated (job_outcome.h).
// - The run records the sha256 of each runner build by its host path
//   (store::Store::RecordRunRunner); scheduling jobs of a run whose runner
//   file changed since is refused unless allow_runner_change.
// - Every artifact pushed is recorded in the store's artifacts table.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/devices/devices.h"
#include "harness/run/cooldown.h"
#include "harness/run/job_features.h"
#include "harness/run/job_outcome.h"
#include "harness/run/progress.h"
#include "harness/run/runner_output.h"  // ParseRunnerJson, ParseRunnerAccuracy
#include "harness/spec/matrix.h"        // SweepJob
#include "harness/spec/spec.h"
#include "reports/store/store.h"
#include "reports/store/store_pool.h"

namespace dfarm::harness {

using StoreOpener = std::function<Result<std::unique_ptr<store::Store>>()>;

struct SchedulerStats {
  uint64_t bytes_pushed = 0;
  bool any_reached = false;              // some device answered hello
  std::vector<std::string> quarantined;  // devices quarantined, in order
};

// Node mode's job source. Each device's worker connects to its device and
// then asks claim() for its next job (with the workers' store pool, and
// what the device said at hello): a claimed job (id, claim_id,
// runner_path set), or nothing, then it calls wait_for_work() and asks again,
// until *drain (finish the job in hand, claim no more) or cancel. Each job
// pushes its own runner build. Every state change of a job is made under its
// claim; a claim that was lost (its lease expired and the job went back to
// the queue) drops the result with a note, and a worker that finds its claim
// lost before an attempt (store::Store::MarkJobRunning) drops the job and
// never retries it. A job that runs out of attempts goes back to the queue
// (another device may take it) until it was claimed max_claims times, then
// is recorded infra. The callbacks are called concurrently by the workers
// and kept for the whole RunJobs call.
struct NodeClaims {
  std::function<Result<std::optional<SweepJob>>(store::StorePool& db, const std::string& device,
                                                const agent::DeviceInfo& info)>
      claim;  // unset: not node mode
  std::function<void()> wait_for_work;
  // Optional: asked before each claim, with the workers' store pool and the
  // worker's agent connection; false: the device must not claim now
  // (quarantined: health.h), then the worker waits and asks again.
  std::function<Result<bool>(store::StorePool& db, const std::string& device,
                             agent::AgentClient& client)>
      device_ready;
  const std::atomic<bool>* drain = nullptr;  // borrowed, may be null
  int64_t max_claims = 3;
};

struct SchedulerContext {
  DeviceProvider* devices = nullptr;  // shared by the workers; Open() is called concurrently
  StoreOpener open_store;  // a connection to the run's store (the pool's, and Start's own)
  // Borrowed, may be null: the connections the workers share (a node's,
  // harness/farm/node.h); null: a pool of open_store with one per worker.
  store::StorePool* store_pool = nullptr;
  std::string runner_path;  // pushed to every device before its first job
  // A paired sweep's pairs may run as stepped pairs (spec pairing.stepped).
  bool stepped_pairs = true;
  SchedulerSpec policy;
  Progress* progress = nullptr;               // borrowed, may be null
  const std::atomic<bool>* cancel = nullptr;  // borrowed, may be null
  // ABIs known from earlier sweeps (store's devices table), so a device that
  // has not connected yet can still take jobs that move.
  std::vector<std::pair<std::string, std::string>> known_abis;
  // Resume with a runner build other than the one the run recorded.
  bool allow_runner_change = false;

  // Node mode (`dfarm node`, harness/farm/node.h): where the workers' jobs
  // come from when node.claim is set; else `jobs` given to RunJobs.
  NodeClaims node;
  // Recorded with each device (store::DeviceRow::node, tags).
  std::string node_name;
  std::map<std::string, std::vector<std::string>> device_tags;
};

// Runs `jobs` (stored: each has its id) on workers for `devices` (every
// device a job names must be in it; extra devices only serve as failover
// targets); each job goes to its agent as scheduler.cc's ToJobSpec makes it.
// In node mode (ctx.node.claim set) the workers claim their jobs and `jobs`
// is not used. Returns when every job is recorded, or the sweep was cancelled. An error
// means a store write failed: then the sweep stopped early, and what was
// recorded stays.
Result<SchedulerStats> RunJobs(const SchedulerContext& ctx, const std::vector<std::string>& devices,
                               std::vector<SweepJob> jobs);

}  // namespace dfarm::harness
