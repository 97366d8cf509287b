// A farm node's job source (scheduler_parts.h, SchedulerContext::node): each
// worker claims its jobs one at a time from the queue (NodeClaims::claim),
// and a job that runs out of attempts goes back to the queue.
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "harness/run/scheduler_parts.h"

namespace dfarm::harness {
namespace {

class ClaimSource final : public JobSource {
 public:
  // Borrows `core` for its lifetime.
  explicit ClaimSource(SchedulerCore& core)
      : core_(core), ctx_(core.ctx()), node_(core.ctx().node) {}

  Result<void> Start() override { return Ok(); }
  void Serve(Worker& w, store::StorePool& db, WorkerConnection& c) override;
  void RetireLocked(Worker& w) override;
  Result<void> OutOfAttempts(Worker& w, store::StorePool& db, SweepJob& job,
                             const store::JobOutcome& outcome) override;
  // Each claimed job names its own runner build.
  const std::string& RunnerFor(const SweepJob& job) const override {
    return !job.runner_path.empty() ? job.runner_path : ctx_.runner_path;
  }

 private:
  void ClaimLoop(Worker& w, store::StorePool& db, WorkerConnection& c);
  // Records in the store that this node reaches the device (`unreachable`
  // empty) or why not (store::Store::SetDeviceReachable); a store error is noted.
  void RecordReachable(const Worker& w, store::StorePool& db, const std::string& unreachable);
  bool Draining() const { return node_.drain && node_.drain->load(); }

  SchedulerCore& core_;
  const SchedulerContext& ctx_;
  const NodeClaims& node_;
};

void ClaimSource::Serve(Worker& w, store::StorePool& db, WorkerConnection& c) {
  ClaimLoop(w, db, c);
  c.session.reset();
  std::lock_guard lock(core_.mu());
  RetireLocked(w);
}

// Guarded by core_.mu(): nothing waits for a node's workers to go idle.
void ClaimSource::RetireLocked(Worker& w) {
  w.done = true;
  core_.cv().notify_all();
}

// Node mode: connects, claims a job the device may run, runs it; waits for
// work when there is none; until drained, cancelled or quarantined. Store
// trouble (the database restarting) is noted and retried, never fatal.
void ClaimSource::ClaimLoop(Worker& w, store::StorePool& db, WorkerConnection& c) {
  bool noted_unreachable = false;
  std::string recorded_unreachable;  // the last reason recorded in the store
  // Without a health check a quarantined device stops; with one it waits
  // for its check to pass (device_ready).
  while (!core_.Cancelled() && !Draining() && !(w.quarantined && !node_.device_ready)) {
    if (!c.session) {
      auto reached = core_.Connect(w, db, c);
      if (!reached || !reached->empty()) {
        if (ctx_.progress && !noted_unreachable) {
          ctx_.progress->Note("device '" + w.device +
                              "' is not reachable; claiming nothing for it: " +
                              (reached ? *reached : reached.message()));
        }
        noted_unreachable = true;
        if (reached && *reached != recorded_unreachable) {
          RecordReachable(w, db, *reached);
          recorded_unreachable = *reached;
        }
        core_.SleepUnlessCancelled(std::chrono::milliseconds(2000));
        continue;
      }
      if (noted_unreachable && ctx_.progress) {
        ctx_.progress->Note("device '" + w.device + "' is reachable again");
      }
      noted_unreachable = false;
      recorded_unreachable.clear();
      RecordReachable(w, db, "");
    }
    if (node_.device_ready) {
      auto ready = node_.device_ready(db, w.device, c.session->client());
      if (!ready || !*ready) {
        if (!ready && ctx_.progress) {
          ctx_.progress->Note("device '" + w.device + "': " + ready.message());
        }
        if (!ready) c.session.reset();  // its state is unknown now
        core_.SleepUnlessCancelled(std::chrono::milliseconds(2000));
        continue;
      }
      std::lock_guard lock(core_.mu());
      if (w.quarantined) {  // its health check put it back
        w.quarantined = false;
        w.infra_in_a_row = 0;
      }
    }
    auto job = node_.claim(db, w.device, c.session->client().device());
    if (!job) {
      if (ctx_.progress) ctx_.progress->Note("device '" + w.device + "': " + job.message());
      core_.SleepUnlessCancelled(std::chrono::milliseconds(2000));
      continue;
    }
    if (!*job) {
      if (node_.wait_for_work) node_.wait_for_work();
      continue;
    }
    SweepJob claimed = std::move(**job);
    if (auto r = core_.RunOne(w, db, c, claimed); !r && ctx_.progress) {
      ctx_.progress->Note("device '" + w.device + "': " + r.message());
    }
  }
}

void ClaimSource::RecordReachable(const Worker& w, store::StorePool& db,
                                  const std::string& unreachable) {
  auto set = db.Call(&store::Store::SetDeviceReachable, w.device, ctx_.node_name, unreachable);
  if (!set && ctx_.progress) ctx_.progress->Note("device '" + w.device + "': " + set.message());
}

// The job goes back to the queue for another device while it was claimed
// fewer than max_claims times (else it is recorded infra); the device is quarantined after
// quarantine_after such jobs in a row (recorded in the store; its worker stops claiming).
Result<void> ClaimSource::OutOfAttempts(Worker& w, store::StorePool& db, SweepJob& job,
                                        const store::JobOutcome& outcome) {
  bool quarantine;
  {
    std::lock_guard lock(core_.mu());
    quarantine = ++w.infra_in_a_row >= ctx_.policy.quarantine_after;
    if (quarantine) {
      core_.QuarantineLocked(w);
    }
  }
  if (quarantine) {
    const std::string reason = "quarantined after " + std::to_string(ctx_.policy.quarantine_after) +
                               " jobs in a row ended infra; last: " + outcome.error;
    if (auto r =
            db.Call(&store::Store::SetDeviceState, w.device, store::kDeviceQuarantined, reason);
        !r)
      return r;
    if (ctx_.progress) ctx_.progress->Note("device '" + w.device + "' " + reason);
  }
  if (job.claim_id >= node_.max_claims) return core_.Record(w, db, job, outcome);
  if (ctx_.progress) {
    ctx_.progress->Note("giving " + ScheduledJobLabel(job, w.device) +
                        " back to the queue: " + outcome.error);
  }
  return core_.Requeue(db, job);
}

}  // namespace

std::unique_ptr<JobSource> MakeClaimSource(SchedulerCore& core) {
  return std::make_unique<ClaimSource>(core);
}

}  // namespace dfarm::harness
