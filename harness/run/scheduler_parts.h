// The scheduler's pieces (scheduler.h), internal to harness/run/: the common
// machinery every worker uses (SchedulerCore: connect, push, cooldown, run a
// job with retries, record) and the JobSource interface that says where a
// worker's jobs come from and where a job that ran out of attempts goes.
// Two sources: a sweep's fixed job list (sweep_source.cc) and a farm node's
// claims (claim_source.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/base/result.h"
#include "harness/run/scheduler.h"

namespace dfarm::harness {

// One device's worker. Its fields from `queue` to `infra_in_a_row` are
// guarded by SchedulerCore::mu().
struct Worker {
  explicit Worker(std::string d) : device(std::move(d)) {}
  std::string device;
  std::deque<SweepJob*> queue;  // the sweep source's: jobs waiting for this worker
  std::string abi;              // from hello (or the store), empty while unknown
  bool quarantined = false;
  bool probed = false;  // its first connection attempt is over (abi known if it worked)
  bool idle = false;    // waiting for work that may move here
  bool done = false;    // its thread has ended or is ending
  uint32_t infra_in_a_row = 0;
  bool cooldown_noted = false;  // its worker thread only
  bool stepping_noted = false;  // its worker thread only: why pairs do not step, said once
  std::thread thread;
};

// A worker's connection to its device, and what it pushed over it.
struct WorkerConnection {
  std::unique_ptr<DeviceSession> session;
  std::string runner_path;  // the build pushed last (runner_sha)
  std::string runner_sha;
  std::set<std::string> pushed;  // model, plugin and input set sha256s pushed over this session
  // An attempt ended infra over this session: the agent may have dropped
  // the runner (deleted as corrupt), so the next attempt asks it again.
  bool runner_unsure = false;
};

class SchedulerCore;

// Where a worker's jobs come from. Each method but Start is called on the
// worker's own thread, with the workers' store pool (each call borrows a
// connection).
class JobSource {
 public:
  virtual ~JobSource() = default;
  // Before any worker starts (the workers exist): a refusal stops RunJobs.
  virtual Result<void> Start() = 0;
  // The worker's life: takes jobs and runs each (SchedulerCore::RunOne) until
  // none is left for `w`; then closes `c`'s session.
  virtual void Serve(Worker& w, store::StorePool& db, WorkerConnection& c) = 0;
  // Guarded by mu(): `w` stops being busy (it ends, or waits for work).
  virtual void RetireLocked(Worker& w) = 0;
  // `job` ran out of attempts on `w` (outcome: infra, saying why).
  virtual Result<void> OutOfAttempts(Worker& w, store::StorePool& db, SweepJob& job,
                                     const store::JobOutcome& outcome) = 0;
  // The runner build `job` runs.
  virtual const std::string& RunnerFor(const SweepJob& job) const = 0;
};

// The wire form of a scheduled job (runner_sha256: the runner pushed over
// this connection; features: the agent's, from hello).
agent::JobSpec ToJobSpec(const SweepJob& job, const std::string& runner_sha256,
                         const std::vector<std::string>& features);

// `jobs`: stored, each naming one of the core's workers (Start checks).
std::unique_ptr<JobSource> MakeSweepSource(SchedulerCore& core, std::vector<SweepJob> jobs);
std::unique_ptr<JobSource> MakeClaimSource(SchedulerCore& core);

// What the workers share, whatever their source: the context, the workers,
// the lock and the common steps of a job. Borrows `ctx` for its lifetime.
class SchedulerCore {
 public:
  explicit SchedulerCore(const SchedulerContext& ctx) : ctx_(ctx) {}

  // Makes the workers, runs them on `source` and waits for them.
  Result<SchedulerStats> Run(const std::vector<std::string>& devices, JobSource& source);

  const SchedulerContext& ctx() const { return ctx_; }
  std::mutex& mu() { return mu_; }
  std::condition_variable& cv() { return cv_; }
  // Fixed once Run starts the workers.
  const std::vector<std::unique_ptr<Worker>>& workers() const { return workers_; }
  Worker* Find(const std::string& device) const;

  bool Cancelled() const { return (ctx_.cancel && ctx_.cancel->load()) || stop_.load(); }
  // Records the first store failure and stops every worker.
  void Fatal(const Error& e);
  void SleepUnlessCancelled(std::chrono::milliseconds d);
  // Guarded by mu(): `w` is quarantined for the rest of the run.
  void QuarantineLocked(Worker& w) {
    w.quarantined = true;
    quarantined_.push_back(w.device);
  }

  // Opens the device, records it, pushes the runner. Returns why the device
  // cannot be used (empty when it can); an error is a store failure.
  Result<std::string> Connect(Worker& w, store::StorePool& db, WorkerConnection& s);
  // Runs `job` on `w` until it ends in a status other than infra, runs out
  // of attempts (JobSource::OutOfAttempts), or moves. Errors are store
  // failures only.
  Result<void> RunOne(Worker& w, store::StorePool& db, WorkerConnection& c, SweepJob& job);
  Result<void> Record(Worker& w, store::StorePool& db, const SweepJob& job,
                      const store::JobOutcome& given);
  // Runs `first` and `second`, the two jobs of one pair of a paired sweep in
  // the order they would run, as one stepped pair (stepped_pairs.h): `first`
  // drives. False when they cannot step, or the attempt ended infra, with
  // neither recorded (the caller runs them back to back); true when both
  // were recorded (a partner that did not step beside its driver was run
  // alone) or left queued by a cancel. Errors are store failures only.
  Result<bool> RunPair(Worker& w, store::StorePool& db, WorkerConnection& c, SweepJob& first,
                       SweepJob& second);
  // Back to the queue: a claimed job gives its claim back; else "queued".
  Result<void> Requeue(store::StorePool& db, const SweepJob& job);

 private:
  // What one attempt at a job came to: `infra` holds why it failed on the
  // device's side (to retry); unset when the job was recorded, requeued, or
  // left queued by a cancellation.
  struct AttemptEnd {
    std::optional<std::string> infra;
    store::JobOutcome outcome;  // the agent's own infra result, when it gave one
  };

  void WorkerMain(Worker& w);
  Result<std::unique_ptr<DeviceSession>> OpenWhenFree(Worker& w);
  Result<std::string> PushRunner(Worker& w, store::StorePool& db, agent::AgentClient& client,
                                 const std::string& path, std::string* runner_sha);
  Result<AttemptEnd> TryOnce(Worker& w, store::StorePool& db, WorkerConnection& c, SweepJob& job);
  Result<std::optional<AttemptEnd>> PushJobArtifacts(Worker& w, store::StorePool& db,
                                                     WorkerConnection& c, const SweepJob& job);
  Result<AttemptEnd> NotStarted(Worker& w, store::StorePool& db, const SweepJob& job,
                                std::string infra);
  Result<bool> MarkRunning(Worker& w, store::StorePool& db, const SweepJob& job);
  Result<AttemptEnd> RunOnDevice(Worker& w, store::StorePool& db, WorkerConnection& c,
                                 const SweepJob& job, const CooldownOutcome& cool);
  Result<bool> RunPairOnDevice(Worker& w, store::StorePool& db, WorkerConnection& c,
                               SweepJob& first, SweepJob& second, const std::string& partner_sha);
  bool Cooling() const;
  // Waits for the spec's cooldown rule on w's device when there is one
  // (Cooling()), and notes what the wait says on the progress (a skipped
  // rule once per device). A cancel ends the wait: check Cancelled() after.
  CooldownOutcome CoolDown(Worker& w, WorkerConnection& c);
  // The outcome of a job's result as recorded: ClassifyJobResult() plus the
  // cooldown's note and its noisy flag.
  static store::JobOutcome OutcomeOf(const agent::JobResult& r, const SweepJob& job,
                                     const CooldownOutcome& cool);
  Result<void> RecordArtifact(store::StorePool& db, const char* kind, const std::string& sha,
                              const std::string& path);

  const SchedulerContext& ctx_;
  JobSource* source_ = nullptr;       // borrowed for Run
  store::StorePool* pool_ = nullptr;  // ctx_.store_pool, or own_pool_
  std::unique_ptr<store::StorePool> own_pool_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::map<std::string, Worker*> by_name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Error> fatal_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> bytes_pushed_{0};
  bool any_reached_ = false;              // guarded by mu_
  std::vector<std::string> quarantined_;  // guarded by mu_
};

// The label a job's notes and progress lines name it by.
std::string ScheduledJobLabel(const SweepJob& job, const std::string& device);

}  // namespace dfarm::harness
