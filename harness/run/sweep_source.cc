// A sweep's job source (scheduler_parts.h): a fixed list of stored jobs, each
// queued on the worker of its device. A worker whose queue is empty waits
// while jobs may still move to it (from a device being quarantined, when
// failover is "same_abi"), and ends when every worker is idle.
#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/run/scheduler_parts.h"
#include "harness/run/sweep.h"
#include "harness/spec/matrix.h"

namespace dfarm::harness {
namespace {

class SweepSource final : public JobSource {
 public:
  // Borrows `core` for its lifetime; owns `jobs`.
  SweepSource(SchedulerCore& core, std::vector<SweepJob> jobs)
      : core_(core),
        ctx_(core.ctx()),
        jobs_(std::make_move_iterator(jobs.begin()), std::make_move_iterator(jobs.end())) {}

  Result<void> Start() override;
  void Serve(Worker& w, store::StorePool& db, WorkerConnection& s) override;
  void RetireLocked(Worker& w) override;
  Result<void> OutOfAttempts(Worker& w, store::StorePool& db, SweepJob& job,
                             const store::JobOutcome& outcome) override;
  // The job's own build when it has one (a paired sweep's jobs of two
  // runners share one source), else the source's.
  const std::string& RunnerFor(const SweepJob& job) const override {
    return !job.runner_path.empty() ? job.runner_path : ctx_.runner_path;
  }

 private:
  Result<void> CheckRunner();
  Result<void> RunNext(Worker& w, store::StorePool& db, WorkerConnection& s, SweepJob& job);
  SweepJob* NextJob(Worker& w);
  void PushLocked(Worker& target, SweepJob* job);
  Worker* PickTarget(const Worker& from);

  SchedulerCore& core_;
  const SchedulerContext& ctx_;
  // A job's device changes only under core_.mu(), by its worker. A deque:
  // its elements stay where they are.
  std::deque<SweepJob> jobs_;
  size_t busy_ = 0;        // guarded by core_.mu(): workers not waiting for work
  bool all_idle_ = false;  // guarded by core_.mu()
};

Result<void> SweepSource::Start() {
  for (SweepJob& job : jobs_) {
    Worker* w = core_.Find(job.device);
    if (!w) {
      return MakeError("job " + std::to_string(job.id) + " names device '" + job.device +
                       "', which the sweep does not have");
    }
    w->queue.push_back(&job);
  }
  if (auto r = CheckRunner(); !r) return r.error();
  busy_ = core_.workers().size();
  return Ok();
}

void SweepSource::Serve(Worker& w, store::StorePool& db, WorkerConnection& s) {
  // Connect before the first job, so that the ABI is known when another
  // device's jobs look for an equivalent device. A failure here costs
  // nothing: the first job's attempt connects again and records why.
  bool wanted;
  {
    std::lock_guard lock(core_.mu());
    wanted = !w.queue.empty() || ctx_.policy.failover == "same_abi";
  }
  if (wanted && !core_.Cancelled()) {
    auto c = core_.Connect(w, db, s);
    if (!c) {
      core_.Fatal(c.error());
    }
  }
  {
    std::lock_guard lock(core_.mu());
    w.probed = true;
    core_.cv().notify_all();
  }
  while (auto i = NextJob(w)) {
    if (auto r = RunNext(w, db, s, *i); !r) {
      core_.Fatal(r.error());
      break;
    }
  }
  s.session.reset();  // closes the connection, stops a local agent
}

// Runs `job`; when the next job of `w` is its pair's other job, both, as
// one stepped pair where they can step, else back to back.
Result<void> SweepSource::RunNext(Worker& w, store::StorePool& db, WorkerConnection& s,
                                  SweepJob& job) {
  SweepJob* other = nullptr;
  if (job.pair != 0 && ctx_.stepped_pairs) {
    std::lock_guard lock(core_.mu());
    if (!w.queue.empty() && w.queue.front()->pair == job.pair) {
      other = w.queue.front();
      w.queue.pop_front();
    }
  }
  if (other == nullptr) return core_.RunOne(w, db, s, job);
  auto stepped = core_.RunPair(w, db, s, job, *other);
  if (!stepped) return stepped.error();
  if (*stepped) return Ok();
  if (auto r = core_.RunOne(w, db, s, job); !r) return r;
  if (core_.Cancelled()) {
    std::lock_guard lock(core_.mu());
    w.queue.push_front(other);  // still queued: NextJob retires the worker
    return Ok();
  }
  return core_.RunOne(w, db, s, *other);
}

// Records each runner build its jobs run with the run, or refuses a run
// recorded with another build at that path.
Result<void> SweepSource::CheckRunner() {
  if (jobs_.empty()) return Ok();
  std::set<std::string> paths;
  for (const SweepJob& job : jobs_) {
    if (!RunnerFor(job).empty()) paths.insert(RunnerFor(job));
  }
  if (paths.empty()) return Ok();
  auto opened = ctx_.open_store();
  if (!opened) return opened.error();
  store::Store& own = **opened;
  auto job = own.GetJob(jobs_.front().id);
  if (!job) return job.error();
  for (const std::string& path : paths) {
    auto sha = Sha256OfFile(path);
    if (!sha) continue;  // unreadable: each device's push records why
    auto recorded = own.RecordRunRunner(job->run_id, path, *sha, ctx_.allow_runner_change);
    if (!recorded) return recorded.error();
    if (*recorded != *sha) {
      return MakeError("run " + std::to_string(job->run_id) + " ran '" + path + "' as build " +
                       recorded->substr(0, 12) + ", but that file is build " + sha->substr(0, 12) +
                       " now; resume with the same dfarm-runner build, or "
                       "pass --allow-runner-change to mix builds in one run");
    }
  }
  return Ok();
}

// The next job for `w`, or nothing when the worker should end: cancelled,
// quarantined, or every worker idle (then none can move work here).
SweepJob* SweepSource::NextJob(Worker& w) {
  std::unique_lock lock(core_.mu());
  for (;;) {
    if (core_.Cancelled() || w.quarantined) {
      RetireLocked(w);
      return nullptr;
    }
    if (!w.queue.empty()) {
      SweepJob* job = w.queue.front();
      w.queue.pop_front();
      return job;
    }
    // Idle: jobs may still move here from a device being quarantined; the
    // mover makes this worker busy again (PushLocked).
    w.idle = true;
    RetireLocked(w);
    w.done = false;
    while (w.idle && !all_idle_ && !core_.Cancelled()) {
      core_.cv().wait_for(lock, std::chrono::milliseconds(100));
    }
    if (w.idle) {
      w.done = true;
      return nullptr;
    }
  }
}

// Guarded by core_.mu(): `w` stops being busy.
void SweepSource::RetireLocked(Worker& w) {
  w.done = true;
  if (--busy_ == 0) all_idle_ = true;
  core_.cv().notify_all();
}

// Guarded by core_.mu(): `job` moves to `target`'s queue.
void SweepSource::PushLocked(Worker& target, SweepJob* job) {
  target.queue.push_back(job);
  if (target.idle) {
    target.idle = false;
    ++busy_;
  }
  core_.cv().notify_all();
}

// `ran` ran out of attempts on `w`: quarantines `w` when this makes
// quarantine_after infra jobs in a row (then the job and the rest of the
// queue move when they can), else records the job infra.
Result<void> SweepSource::OutOfAttempts(Worker& w, store::StorePool& db, SweepJob& ran,
                                        const store::JobOutcome& outcome) {
  std::vector<SweepJob*> leaving;
  {
    std::lock_guard lock(core_.mu());
    if (++w.infra_in_a_row < ctx_.policy.quarantine_after) {
      leaving.clear();
    } else {
      core_.QuarantineLocked(w);
      leaving.push_back(&ran);
      leaving.insert(leaving.end(), w.queue.begin(), w.queue.end());
      w.queue.clear();
    }
  }
  if (leaving.empty()) return core_.Record(w, db, ran, outcome);

  std::string reason = "quarantined after " + std::to_string(ctx_.policy.quarantine_after) +
                       " jobs in a row ended infra; last: " + outcome.error;
  if (auto r = db.Call(&store::Store::SetDeviceState, w.device, store::kDeviceQuarantined, reason);
      !r)
    return r;
  std::map<std::string, size_t> moved;
  size_t recorded = 0;
  for (SweepJob* k : leaving) {
    SweepJob& job = *k;
    Worker* target = PickTarget(w);
    if (!target) {
      store::JobOutcome o;
      o.status = store::kJobInfra;
      o.error = k == &ran ? outcome.error
                          : "device '" + w.device + "' was quarantined before this job ran" +
                                (ctx_.policy.failover == "none"
                                     ? " (scheduler.failover is none)"
                                     : " and no other device has ABI '" + w.abi + "'");
      if (auto r = core_.Record(w, db, job, o); !r) return r;
      ++recorded;
      continue;
    }
    job.device = target->device;
    job.job_key = JobKeyOf(job);  // its runner build too, as the expansion keyed it
    if (auto r = db.Call(&store::Store::MoveJob, job.id, target->device, job.job_key); !r) return r;
    ++moved[target->device];
    std::lock_guard lock(core_.mu());
    PushLocked(*target, k);
  }
  if (ctx_.progress) {
    std::string line = "device '" + w.device + "' " + reason;
    for (const auto& [to, n] : moved) {
      line += "; " + std::to_string(n) + " job(s) move to '" + to + "'";
    }
    if (recorded) line += "; " + std::to_string(recorded) + " job(s) recorded infra";
    ctx_.progress->Note(line);
  }
  return Ok();
}

// An equivalent device for a quarantined worker's jobs: same ABI, not
// quarantined, the one with the shortest queue. Null when failover is off.
Worker* SweepSource::PickTarget(const Worker& from) {
  if (ctx_.policy.failover != "same_abi") return nullptr;
  std::unique_lock lock(core_.mu());
  if (from.abi.empty()) return nullptr;
  // Wait until every other live device has tried to connect once.
  auto unprobed = [&] {
    for (auto& w : core_.workers()) {
      if (w.get() != &from && !w->probed && !w->done) return true;
    }
    return false;
  };
  while (unprobed() && !core_.Cancelled())
    core_.cv().wait_for(lock, std::chrono::milliseconds(100));
  Worker* best = nullptr;
  for (auto& w : core_.workers()) {
    if (w.get() == &from || w->quarantined || w->done || w->abi != from.abi) continue;
    if (!best || w->queue.size() < best->queue.size()) best = w.get();
  }
  return best;
}

}  // namespace

std::unique_ptr<JobSource> MakeSweepSource(SchedulerCore& core, std::vector<SweepJob> jobs) {
  return std::make_unique<SweepSource>(core, std::move(jobs));
}

}  // namespace dfarm::harness
