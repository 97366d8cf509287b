#include "harness/run/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "agent/protocol/bundle.h"
#include "agent/protocol/features.h"
#include "agent/protocol/runner_kinds.h"
#include "harness/devices/device_row.h"
#include "harness/import/benchmark_log.h"  // ToolRunnerOutput
#include "harness/run/sweep.h"
#include "harness/spec/matrix.h"

namespace dfarm::harness {
namespace {

std::string Label(const SweepJob& job, const std::string& device) {
  return JobLabel(job.model.file, job.delegate.name,
                  job.delegate.options.empty() ? "" : job.delegate.ShownOptionsString(),
                  job.benchmark.num_threads, device);
}

// Spec benchmark.sustained_s in whole milliseconds (0: off).
uint32_t SustainedMs(const BenchmarkSpec& b) {
  return static_cast<uint32_t>(std::llround(b.sustained_s * 1000));
}

// The wire form of a scheduled job: the one conversion from the host's job to
// what the agent runs (runner_sha256: the runner pushed over this connection;
// features: the agent's, from hello).
agent::JobSpec ToJobSpec(const SweepJob& job, const std::string& runner_sha256,
                         const std::vector<std::string>& features) {
  agent::JobSpec spec;
  spec.runner_sha256 = runner_sha256;
  // "" is dfarm-runner's contract, which "tflite" speaks too: an agent
  // without "runner_kinds" runs it the same (CheckDeviceTakesJob refuses
  // the tool kinds there).
  if (job.runner_kind != agent::kRunnerKindDfarm &&
      agent::HasFeature(features, agent::kFeatureRunnerKinds)) {
    spec.runner_kind = job.runner_kind;
  }
  // CheckDeviceTakesJob refuses a profile job where the feature is missing.
  spec.profile = job.benchmark.profile && agent::HasFeature(features, agent::kFeatureProfile);
  // CheckDeviceTakesJob refuses a pinned job where the feature is missing.
  if (agent::HasFeature(features, agent::kFeatureCpuAffinity)) {
    spec.cpu_affinity = job.benchmark.cpu_affinity;
  }
  // CheckDeviceTakesJob refuses a sustained job where it is missing.
  if (agent::HasFeature(features, agent::kFeatureSustained)) {
    spec.sustained_ms = SustainedMs(job.benchmark);
  }
  spec.model_sha256 = job.model_sha256;
  spec.delegate = job.delegate.name;
  spec.delegate_options = job.delegate.AgentOptionsString();
  spec.plugin_sha256 = job.plugin_sha256;
  spec.input_set_sha256s = job.input_set_sha256s;
  spec.num_threads = job.benchmark.num_threads;
  spec.warmup_runs = job.benchmark.warmup_runs;
  spec.num_runs = job.benchmark.num_runs;
  spec.timeout_ms = job.benchmark.timeout_s * 1000 + SustainedMs(job.benchmark);
  // cpu against the cpu reference says nothing: only other delegates compare.
  // benchmark_model cannot compare outputs at all (inference_diff always
  // does): the spec's reference, "cpu" by default, does not apply to it.
  if (job.benchmark.accuracy_reference == "cpu" && job.delegate.name != "cpu" &&
      job.runner_kind != agent::kRunnerKindBenchmarkModel) {
    spec.accuracy_reference = "cpu";
  }
  return spec;
}

struct Worker {
  explicit Worker(std::string d) : device(std::move(d)) {}
  std::string device;
  // Guarded by Scheduler::mu_.
  std::deque<size_t> queue;  // indices into jobs_
  std::string abi;           // from hello (or the store), empty while unknown
  bool quarantined = false;
  bool probed = false;  // its first connection attempt is over (abi known if it worked)
  bool idle = false;    // waiting for work that may move here
  bool done = false;    // its thread has ended or is ending
  uint32_t infra_in_a_row = 0;
  bool cooldown_noted = false;  // its worker thread only
  std::thread thread;
};

class Scheduler {
 public:
  Scheduler(const SchedulerContext& ctx, std::vector<SweepJob> jobs)
      : ctx_(ctx),
        jobs_(std::make_move_iterator(jobs.begin()), std::make_move_iterator(jobs.end())) {}

  Result<SchedulerStats> Run(const std::vector<std::string>& devices) {
    for (const std::string& d : devices) {
      if (by_name_.count(d)) continue;
      workers_.push_back(std::make_unique<Worker>(d));
      by_name_[d] = workers_.back().get();
    }
    for (const auto& [name, abi] : ctx_.known_abis) {
      if (auto it = by_name_.find(name); it != by_name_.end()) it->second->abi = abi;
    }
    for (size_t i = 0; i < jobs_.size(); ++i) {
      auto it = by_name_.find(jobs_[i].device);
      if (it == by_name_.end()) {
        return MakeError("job " + std::to_string(jobs_[i].id) + " names device '" +
                         jobs_[i].device + "', which the sweep does not have");
      }
      it->second->queue.push_back(i);
    }
    if (auto r = CheckRunner(); !r) return r.error();
    busy_ = workers_.size();
    for (auto& w : workers_) {
      Worker* raw = w.get();
      w->thread = std::thread([this, raw] { WorkerMain(*raw); });
    }
    for (auto& w : workers_) w->thread.join();
    if (fatal_) return *fatal_;
    SchedulerStats stats;
    stats.bytes_pushed = bytes_pushed_;
    stats.any_reached = any_reached_;
    stats.quarantined = quarantined_;
    return stats;
  }

 private:
  // Records the runner build with the run, or refuses a run recorded with another.
  Result<void> CheckRunner() {
    if (jobs_.empty() || ctx_.runner_path.empty()) return Ok();
    auto sha = Sha256OfFile(ctx_.runner_path);
    if (!sha) return Ok();  // unreadable: each device's push records why
    auto opened = ctx_.open_store();
    if (!opened) return opened.error();
    store::Store& store = **opened;
    auto job = store.GetJob(jobs_.front().id);
    if (!job) return job.error();
    auto recorded =
        store.RecordRunRunner(job->run_id, ctx_.runner_path, *sha, ctx_.allow_runner_change);
    if (!recorded) return recorded.error();
    if (*recorded != *sha) {
      return MakeError("run " + std::to_string(job->run_id) + " ran '" + ctx_.runner_path +
                       "' as build " + recorded->substr(0, 12) + ", but that file is build " +
                       sha->substr(0, 12) +
                       " now; resume with the same dfarm-runner build, or "
                       "pass --allow-runner-change to mix builds in one run");
    }
    return Ok();
  }

  bool Cancelled() const { return (ctx_.cancel && ctx_.cancel->load()) || stop_.load(); }
  bool Draining() const { return ctx_.node.drain && ctx_.node.drain->load(); }

  // The next job for `w`, or nothing when the worker should end: cancelled,
  // quarantined, or every worker idle (then none can move work here).
  std::optional<size_t> NextJob(Worker& w) {
    std::unique_lock lock(mu_);
    for (;;) {
      if (Cancelled() || w.quarantined) {
        RetireLocked(w);
        return std::nullopt;
      }
      if (!w.queue.empty()) {
        size_t i = w.queue.front();
        w.queue.pop_front();
        return i;
      }
      // Idle: jobs may still move here from a device being quarantined; the
      // mover makes this worker busy again (PushLocked).
      w.idle = true;
      RetireLocked(w);
      w.done = false;
      while (w.idle && !all_idle_ && !Cancelled()) {
        cv_.wait_for(lock, std::chrono::milliseconds(100));
      }
      if (w.idle) {
        w.done = true;
        return std::nullopt;
      }
    }
  }

  // Guarded by mu_: `w` stops being busy.
  void RetireLocked(Worker& w) {
    w.done = true;
    if (--busy_ == 0) all_idle_ = true;
    cv_.notify_all();
  }

  // Guarded by mu_: job `k` moves to `target`'s queue.
  void PushLocked(Worker& target, size_t k) {
    target.queue.push_back(k);
    if (target.idle) {
      target.idle = false;
      ++busy_;
    }
    cv_.notify_all();
  }

  void WorkerMain(Worker& w) {
    auto opened = ctx_.open_store();
    if (!opened) {
      Fatal(opened.error());
      std::lock_guard lock(mu_);
      RetireLocked(w);
      return;
    }
    store::Store& store = **opened;
    Connection s;
    if (ctx_.node.claim) {
      ClaimLoop(w, store, s);
      s.session.reset();
      std::lock_guard lock(mu_);
      RetireLocked(w);
      return;
    }
    // Connect before the first job, so that the ABI is known when another
    // device's jobs look for an equivalent device. A failure here costs
    // nothing: the first job's attempt connects again and records why.
    bool wanted;
    {
      std::lock_guard lock(mu_);
      wanted = !w.queue.empty() || ctx_.policy.failover == "same_abi";
    }
    if (wanted && !Cancelled()) {
      auto c = Connect(w, store, s);
      if (!c) {
        Fatal(c.error());
      }
    }
    {
      std::lock_guard lock(mu_);
      w.probed = true;
      cv_.notify_all();
    }
    while (auto i = NextJob(w)) {
      if (auto r = RunOne(w, store, s, *i); !r) {
        Fatal(r.error());
        break;
      }
    }
    s.session.reset();  // closes the connection, stops a local agent
  }

  // A worker's connection to its device, and what it pushed over it.
  struct Connection {
    std::unique_ptr<DeviceSession> session;
    std::string runner_path;  // the build pushed last (runner_sha)
    std::string runner_sha;
    std::set<std::string> pushed;  // model and plugin sha256s pushed over this session
    // An attempt ended infra over this session: the agent may have dropped
    // the runner (deleted as corrupt), so the next attempt asks it again.
    bool runner_unsure = false;
  };

  // Node mode: connects, claims a job the device may run, runs it; waits for
  // work when there is none; until drained, cancelled or quarantined. Store
  // trouble (the database restarting) is noted and retried, never fatal.
  void ClaimLoop(Worker& w, store::Store& store, Connection& c) {
    bool noted_unreachable = false;
    // Without a health check a quarantined device stops; with one it waits
    // for its check to pass (device_ready).
    while (!Cancelled() && !Draining() && !(w.quarantined && !ctx_.node.device_ready)) {
      if (!c.session) {
        auto reached = Connect(w, store, c);
        if (!reached || !reached->empty()) {
          if (ctx_.progress && !noted_unreachable) {
            ctx_.progress->Note("device '" + w.device +
                                "' is not reachable; claiming nothing for it: " +
                                (reached ? *reached : reached.message()));
          }
          noted_unreachable = true;
          SleepUnlessCancelled(std::chrono::milliseconds(2000));
          continue;
        }
        if (noted_unreachable && ctx_.progress) {
          ctx_.progress->Note("device '" + w.device + "' is reachable again");
        }
        noted_unreachable = false;
      }
      if (ctx_.node.device_ready) {
        auto ready = ctx_.node.device_ready(store, w.device, c.session->client());
        if (!ready || !*ready) {
          if (!ready && ctx_.progress) {
            ctx_.progress->Note("device '" + w.device + "': " + ready.message());
          }
          if (!ready) c.session.reset();  // its state is unknown now
          SleepUnlessCancelled(std::chrono::milliseconds(2000));
          continue;
        }
        std::lock_guard lock(mu_);
        if (w.quarantined) {  // its health check put it back
          w.quarantined = false;
          w.infra_in_a_row = 0;
        }
      }
      auto job = ctx_.node.claim(store, w.device, c.session->client().device());
      if (!job) {
        if (ctx_.progress) ctx_.progress->Note("device '" + w.device + "': " + job.message());
        SleepUnlessCancelled(std::chrono::milliseconds(2000));
        continue;
      }
      if (!*job) {
        if (ctx_.node.wait_for_work) ctx_.node.wait_for_work();
        continue;
      }
      size_t i;
      {
        std::lock_guard lock(mu_);
        jobs_.push_back(std::move(**job));
        i = jobs_.size() - 1;
      }
      if (auto r = RunOne(w, store, c, i); !r && ctx_.progress) {
        ctx_.progress->Note("device '" + w.device + "': " + r.message());
      }
    }
  }

  // The runtime build `job` runs: its own in node mode, else the sweep's.
  const std::string& RunnerFor(const SweepJob& job) const {
    return ctx_.node.claim && !job.runner_path.empty() ? job.runner_path : ctx_.runner_path;
  }

  // Back to the queue: a claimed job gives its claim back; else "queued".
  Result<void> Requeue(store::Store& store, const SweepJob& job) {
    if (job.claim_id > 0) {
      auto released = store.ReleaseClaim(job.id, job.claim_id);
      if (!released) return released.error();
      return Ok();
    }
    return store.RequeueJob(job.id);
  }

  void Fatal(const Error& e) {
    std::lock_guard lock(mu_);
    if (!fatal_) fatal_ = e;
    stop_ = true;
    cv_.notify_all();
  }

  // Opens the device, records it, pushes the runner. Returns why the device
  // cannot be used (empty when it can); an error is a store failure.
  Result<std::string> Connect(Worker& w, store::Store& store, Connection& s) {
    auto session = OpenWhenFree(w);
    if (!session) return session.message();
    const agent::DeviceInfo& info = (*session)->client().device();
    store::DeviceRow row = DeviceRowOf(w.device, info);
    row.node = ctx_.node_name;
    if (auto t = ctx_.device_tags.find(w.device); t != ctx_.device_tags.end()) row.tags = t->second;
    if (auto r = store.UpsertDevice(row); !r) return r.error();
    {
      std::lock_guard lock(mu_);
      w.abi = info.abi;
      any_reached_ = true;
    }
    s.runner_path.clear();
    // A bundle the agent cannot run is not pushed; its jobs are refused in TryOnce.
    if (!ctx_.runner_path.empty() && (agent::HasFeature(info.features, agent::kFeatureBundles) ||
                                      !agent::IsBundleFile(ctx_.runner_path))) {
      auto pushed = PushRunner(w, store, (*session)->client(), ctx_.runner_path, &s.runner_sha);
      if (!pushed || !pushed->empty()) return pushed;
      s.runner_path = ctx_.runner_path;
    }
    s.session = std::move(*session);
    s.pushed.clear();
    s.runner_unsure = false;
    return std::string();
  }

  // Opens the device; while another dfarm holds it (ErrorKind::kConflict: its
  // agent's store is locked by a live agent) waits for it, noted once, until
  // it is free or the sweep is cancelled. A device busy with someone else's
  // benchmark is not broken: no attempt is spent and nothing is recorded.
  Result<std::unique_ptr<DeviceSession>> OpenWhenFree(Worker& w) {
    bool noted = false;
    for (;;) {
      auto session = ctx_.devices->Open(w.device);
      if (session || session.error().kind != ErrorKind::kConflict || Cancelled()) return session;
      if (!noted && ctx_.progress) ctx_.progress->Note(session.message() + "; waiting for it");
      noted = true;
      SleepUnlessCancelled(std::chrono::milliseconds(1000));
    }
  }

  // Pushes the runner unless the agent has it (PutArtifact asks first).
  // Returns why it cannot (empty when pushed); an error is a store failure.
  Result<std::string> PushRunner(Worker& w, store::Store& store, agent::AgentClient& client,
                                 const std::string& path, std::string* runner_sha) {
    auto sent = client.PutArtifact(path, runner_sha);
    if (!sent) {
      return "cannot push runner '" + path + "' to device '" + w.device + "': " + sent.message();
    }
    bytes_pushed_ += *sent;
    if (auto r = RecordArtifact(store, "runner", *runner_sha, path); !r) {
      return r.error();
    }
    return std::string();
  }

  // Runs job `i` on `w` until it ends in a status other than infra, runs out
  // of attempts, or moves. Errors are store failures only.
  Result<void> RunOne(Worker& w, store::Store& store, Connection& c, size_t i) {
    SweepJob& job = jobs_[i];
    uint64_t backoff_ms = ctx_.policy.backoff_ms;
    for (uint32_t attempt = 0;; ++attempt) {
      auto tried = TryOnce(w, store, c, job);
      if (!tried) return tried.error();
      if (!tried->infra) return Ok();  // recorded, or back in the queue
      const std::string& infra = *tried->infra;
      // The agent may have dropped what this connection pushed (evicted under
      // its quota, deleted as corrupt): the next attempt asks it again.
      c.pushed.clear();
      c.runner_unsure = true;
      if (attempt < ctx_.policy.retries && !Cancelled()) {
        if (ctx_.progress) {
          ctx_.progress->Note("retrying " + Label(job, w.device) + " in " +
                              std::to_string(backoff_ms) + " ms (attempt " +
                              std::to_string(attempt + 2) + " of " +
                              std::to_string(ctx_.policy.retries + 1) + "): " + OneLine(infra));
        }
        SleepUnlessCancelled(std::chrono::milliseconds(backoff_ms));
        backoff_ms = std::min<uint64_t>(backoff_ms * 2, 10 * 60 * 1000);
        if (!Cancelled()) continue;
      }
      if (Cancelled() && attempt < ctx_.policy.retries) {
        if (auto r = Requeue(store, job); !r) return r;  // stays pending
        return Ok();
      }
      store::JobOutcome outcome = std::move(tried->outcome);
      outcome.status = store::kJobInfra;
      outcome.error = OneLine(infra) +
                      (attempt > 0 ? " (after " + std::to_string(attempt + 1) + " attempts)" : "");
      return RecordOutOfAttempts(w, store, i, outcome);
    }
  }

  // What one attempt at a job came to: `infra` holds why it failed on the
  // device's side (to retry); unset when the job was recorded, requeued, or
  // left queued by a cancellation.
  struct AttemptEnd {
    std::optional<std::string> infra;
    store::JobOutcome outcome;  // the agent's own infra result, when it gave one
  };

  // Connects when needed, pushes what the job needs, waits for cooldown and
  // runs the job once.
  Result<AttemptEnd> TryOnce(Worker& w, store::Store& store, Connection& c, SweepJob& job) {
    if (!c.session) {
      auto reached = Connect(w, store, c);
      if (!reached) return reached.error();
      if (!reached->empty()) return NotStarted(w, store, job, *reached);
    }
    const std::vector<std::string>& features = c.session->client().device().features;
    if (Result<void> takes = CheckDeviceTakesJob(features, w.device, job, RunnerFor(job)); !takes) {
      store::JobOutcome o;
      o.status = store::kJobInfra;
      o.error = takes.message();
      if (auto rec = Record(w, store, job, o); !rec) return rec.error();
      return AttemptEnd{};
    }
    if (c.runner_unsure || c.runner_path != RunnerFor(job)) {
      auto runner = PushRunner(w, store, c.session->client(), RunnerFor(job), &c.runner_sha);
      if (!runner) return runner.error();
      if (!runner->empty()) {
        c.session.reset();  // the connection's state is unknown now
        return NotStarted(w, store, job, *runner);
      }
      c.runner_path = RunnerFor(job);
      c.runner_unsure = false;
    }
    auto model =
        PushOnce(w, store, c, "model", "model", job.model.path, job.model.file, job.model_sha256);
    if (!model) return model.error();
    if (!model->empty()) return NotStarted(w, store, job, *model);
    if (!job.plugin_sha256.empty()) {
      const std::string plugin = job.delegate.PluginPath();
      auto pushed =
          PushOnce(w, store, c, "plugin", "delegate plugin", plugin, plugin, job.plugin_sha256);
      if (!pushed) return pushed.error();
      if (!pushed->empty()) return NotStarted(w, store, job, *pushed);
    }
    if (!job.input_set_sha256s.empty()) {
      auto pushed = PushInputSets(w, store, c, job);
      if (!pushed) return pushed.error();
      if (pushed->has_value()) return std::move(**pushed);
    }
    CooldownOutcome cool;
    if (Cooling()) {
      cool = WaitForCooldown(ctx_.policy.cooldown,
                             AgentCooldownSource(c.session->client(), ctx_.cancel));
      if (!cool.note.empty() && ctx_.progress && (cool.gave_up || !w.cooldown_noted)) {
        ctx_.progress->Note("device '" + w.device + "': " + cool.note);
      }
      if (!cool.checked) w.cooldown_noted = true;  // a skipped rule is said once per device
      if (Cancelled()) return AttemptEnd{};        // the job was never started: it stays queued
    }
    return RunOnDevice(w, store, c, job, cool);
  }

  // Pushes the job's input sets (artifact kind "inputs"), each once per
  // connection. Returns how the attempt ended when it cannot go on (a device
  // without feature "inputs": the job is recorded infra naming it, no retry;
  // a failed push: infra to retry); unset when every set is there.
  Result<std::optional<AttemptEnd>> PushInputSets(Worker& w, store::Store& store, Connection& c,
                                                  const SweepJob& job) {
    const auto& features = c.session->client().device().features;
    if (!agent::HasFeature(features, agent::kFeatureInputs)) {
      store::JobOutcome o;
      o.status = store::kJobInfra;
      o.error = "device '" + w.device + "': its dfarm-agent does not speak feature '" +
                std::string(agent::kFeatureInputs) +
                "', so it cannot run the model's input sets (update dfarm-agent there)";
      if (auto rec = Record(w, store, job, o); !rec) return rec.error();
      return std::optional<AttemptEnd>(AttemptEnd{});
    }
    for (size_t k = 0; k < job.input_set_sha256s.size(); ++k) {
      const std::string& path = job.input_set_paths.at(k);
      auto pushed =
          PushOnce(w, store, c, "inputs", "input set", path,
                   job.model.file + " input set " + std::to_string(k), job.input_set_sha256s[k]);
      if (!pushed) return pushed.error();
      if (!pushed->empty()) {
        auto ended = NotStarted(w, store, job, *pushed);
        if (!ended) return ended.error();
        return std::optional<AttemptEnd>(std::move(*ended));
      }
    }
    return std::optional<AttemptEnd>();
  }

  // An attempt that ended `infra` before the job reached the device (no
  // connection, a failed push) is still an attempt: jobs.attempts counts it,
  // as the error's "(after N attempts)" does.
  Result<AttemptEnd> NotStarted(Worker& w, store::Store& store, const SweepJob& job,
                                std::string infra) {
    auto held = MarkRunning(w, store, job);
    if (!held) return held.error();
    if (!*held) return AttemptEnd{};
    return AttemptEnd{std::move(infra), {}};
  }

  // Marks `job` running under its claim (store::Store::MarkJobRunning).
  // False, with a note, when the job is no longer this worker's (its claim
  // was lost: the lease expired while this node was stopped or cut off, and
  // the job went back to the queue, maybe finished elsewhere): the worker
  // drops it and never tries it again. An error is a store failure.
  Result<bool> MarkRunning(Worker& w, store::Store& store, const SweepJob& job) {
    auto r = store.MarkJobRunning(job.id, job.claim_id);
    if (r) return true;
    if (r.error().kind != ErrorKind::kConflict) return r.error();
    if (ctx_.progress) ctx_.progress->Note("dropping " + Label(job, w.device) + ": " + r.message());
    return false;
  }

  // Pushes the artifact at `path` unless this connection already did (`kind`
  // as the store records it, `noun` and `shown` for messages). Returns the
  // infra reason when it cannot (empty when pushed); an error is a store failure.
  Result<std::string> PushOnce(Worker& w, store::Store& store, Connection& c, const char* kind,
                               const std::string& noun, const std::string& path,
                               const std::string& shown, const std::string& want_sha256) {
    if (c.pushed.count(want_sha256)) return std::string();
    std::string sha;
    auto sent = c.session->client().PutArtifact(path, &sha);
    if (!sent) {
      c.session.reset();  // the connection's state is unknown now
      return "cannot push " + noun + " '" + shown + "' to device '" + w.device +
             "': " + sent.message();
    }
    if (sha != want_sha256) {
      return noun + " '" + path + "' changed during the sweep (sha256 " + sha + ", expected " +
             want_sha256 + ")";
    }
    bytes_pushed_ += *sent;
    c.pushed.insert(want_sha256);
    if (auto r = RecordArtifact(store, kind, sha, path); !r) return r.error();
    return std::string();
  }

  // Runs the job on the connected device and records what it came to.
  Result<AttemptEnd> RunOnDevice(Worker& w, store::Store& store, Connection& c, const SweepJob& job,
                                 const CooldownOutcome& cool) {
    auto held = MarkRunning(w, store, job);
    if (!held) return held.error();
    if (!*held) return AttemptEnd{};
    const std::string label = Label(job, w.device);
    if (ctx_.progress) ctx_.progress->JobStarted(label);
    agent::RunJobOptions run_options;
    run_options.cancel = ctx_.cancel;
    if (ctx_.progress) {
      run_options.on_progress = [this, &label](const agent::JobProgress& p) {
        ctx_.progress->JobPhase(label, p.phase, p.elapsed_ms);
      };
    }
    auto result = c.session->client().RunJob(
        ToJobSpec(job, c.runner_sha, c.session->client().device().features), run_options);
    if (ctx_.progress) ctx_.progress->JobStopped(label);
    if (result && ctx_.cancel && ctx_.cancel->load() && result->status == store::kJobInfra) {
      // Cancelled in flight (Ctrl-C): back to queued for --resume.
      if (auto r = Requeue(store, job); !r) return r.error();
      if (ctx_.progress) ctx_.progress->Note("cancelled " + Label(job, w.device));
      return AttemptEnd{};
    }
    if (!result) {
      c.session.reset();  // reconnect (restarting a local agent) for the next attempt
      return AttemptEnd{"device '" + w.device + "': " + result.message(), {}};
    }
    store::JobOutcome outcome = ClassifyJobResult(*result, job);
    if (!cool.note.empty()) {
      outcome.state_note =
          outcome.state_note.empty() ? cool.note : outcome.state_note + "; " + cool.note;
    }
    outcome.noisy = cool.noisy;
    if (outcome.status == store::kJobInfra) return AttemptEnd{outcome.error, outcome};
    if (auto r = Record(w, store, job, outcome); !r) return r.error();
    std::lock_guard lock(mu_);
    w.infra_in_a_row = 0;
    return AttemptEnd{};
  }

  // Job `i` ran out of attempts on `w`: quarantines `w` when this makes
  // quarantine_after infra jobs in a row (then the job and the rest of the
  // queue move when they can), else records the job infra.
  Result<void> RecordOutOfAttempts(Worker& w, store::Store& store, size_t i,
                                   const store::JobOutcome& outcome) {
    if (ctx_.node.claim) return ReleaseOutOfAttempts(w, store, i, outcome);
    std::vector<size_t> leaving;
    {
      std::lock_guard lock(mu_);
      if (++w.infra_in_a_row < ctx_.policy.quarantine_after) {
        leaving.clear();
      } else {
        w.quarantined = true;
        quarantined_.push_back(w.device);
        leaving.push_back(i);
        leaving.insert(leaving.end(), w.queue.begin(), w.queue.end());
        w.queue.clear();
      }
    }
    if (leaving.empty()) return Record(w, store, jobs_[i], outcome);

    std::string reason = "quarantined after " + std::to_string(ctx_.policy.quarantine_after) +
                         " jobs in a row ended infra; last: " + outcome.error;
    if (auto r = store.SetDeviceState(w.device, store::kDeviceQuarantined, reason); !r) return r;
    std::map<std::string, size_t> moved;
    size_t recorded = 0;
    for (size_t k : leaving) {
      SweepJob& job = jobs_[k];
      Worker* target = PickTarget(w);
      if (!target) {
        store::JobOutcome o;
        o.status = store::kJobInfra;
        o.error = k == i ? outcome.error
                         : "device '" + w.device + "' was quarantined before this job ran" +
                               (ctx_.policy.failover == "none"
                                    ? " (scheduler.failover is none)"
                                    : " and no other device has ABI '" + w.abi + "'");
        if (auto r = Record(w, store, job, o); !r) return r;
        ++recorded;
        continue;
      }
      job.device = target->device;
      job.job_key = JobKeyOf(job);  // its runner build too, as the expansion keyed it
      if (auto r = store.MoveJob(job.id, target->device, job.job_key); !r) return r;
      ++moved[target->device];
      std::lock_guard lock(mu_);
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
  Worker* PickTarget(const Worker& from) {
    if (ctx_.policy.failover != "same_abi") return nullptr;
    std::unique_lock lock(mu_);
    if (from.abi.empty()) return nullptr;
    // Wait until every other live device has tried to connect once.
    auto unprobed = [&] {
      for (auto& w : workers_) {
        if (w.get() != &from && !w->probed && !w->done) return true;
      }
      return false;
    };
    while (unprobed() && !Cancelled()) cv_.wait_for(lock, std::chrono::milliseconds(100));
    Worker* best = nullptr;
    for (auto& w : workers_) {
      if (w.get() == &from || w->quarantined || w->done || w->abi != from.abi) continue;
      if (!best || w->queue.size() < best->queue.size()) best = w.get();
    }
    return best;
  }

  // Node mode's RecordOutOfAttempts: the job goes back to the queue for
  // another device while it was claimed fewer than max_claims times (else it
  // is recorded infra); the device is quarantined after quarantine_after
  // such jobs in a row (recorded in the store; its worker stops claiming).
  Result<void> ReleaseOutOfAttempts(Worker& w, store::Store& store, size_t i,
                                    const store::JobOutcome& outcome) {
    const SweepJob& job = jobs_[i];
    bool quarantine;
    {
      std::lock_guard lock(mu_);
      quarantine = ++w.infra_in_a_row >= ctx_.policy.quarantine_after;
      if (quarantine) {
        w.quarantined = true;
        quarantined_.push_back(w.device);
      }
    }
    if (quarantine) {
      const std::string reason = "quarantined after " +
                                 std::to_string(ctx_.policy.quarantine_after) +
                                 " jobs in a row ended infra; last: " + outcome.error;
      if (auto r = store.SetDeviceState(w.device, store::kDeviceQuarantined, reason); !r) return r;
      if (ctx_.progress) ctx_.progress->Note("device '" + w.device + "' " + reason);
    }
    if (job.claim_id >= ctx_.node.max_claims) return Record(w, store, job, outcome);
    if (ctx_.progress) {
      ctx_.progress->Note("giving " + Label(job, w.device) +
                          " back to the queue: " + outcome.error);
    }
    return Requeue(store, job);
  }

  Result<void> Record(Worker& w, store::Store& store, const SweepJob& job,
                      const store::JobOutcome& given) {
    store::JobOutcome o = given;
    o.claim_id = job.claim_id;
    if (auto r = store.RecordJobResult(job.id, o); !r) {
      if (r.error().kind != ErrorKind::kConflict) return r;
      if (ctx_.progress) ctx_.progress->Note(Label(job, w.device) + ": " + r.message());
      return Ok();
    }
    if (ctx_.progress) {
      ctx_.progress->JobDone(
          Label(job, w.device), o.status,
          JobDoneDetail(o.status, o.error,
                        o.metrics ? std::optional<double>(o.metrics->mean_us) : std::nullopt));
    }
    return Ok();
  }

  bool Cooling() const {
    return ctx_.policy.cooldown.pause_ms > 0 || ctx_.policy.cooldown.max_temp_c > 0 ||
           ctx_.policy.cooldown.max_cpu_busy_pct > 0;
  }

  Result<void> RecordArtifact(store::Store& store, const char* kind, const std::string& sha,
                              const std::string& path) {
    std::error_code ec;
    auto size = std::filesystem::file_size(path, ec);
    store::ArtifactRow row;
    row.sha256 = sha;
    row.kind = kind;
    row.size_bytes = ec ? 0 : static_cast<int64_t>(size);
    row.host_path = path;
    return store.RecordArtifact(row);
  }

  void SleepUnlessCancelled(std::chrono::milliseconds d) {
    auto deadline = std::chrono::steady_clock::now() + d;
    std::unique_lock lock(mu_);
    while (!Cancelled() && std::chrono::steady_clock::now() < deadline) {
      cv_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() +
                                                  std::chrono::milliseconds(50)));
    }
  }

  const SchedulerContext& ctx_;
  // A job's device changes only under mu_, by its worker. A deque: claimed
  // jobs are appended (under mu_) while workers hold references to others.
  std::deque<SweepJob> jobs_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::map<std::string, Worker*> by_name_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t busy_ = 0;        // guarded by mu_: workers not waiting for work
  bool all_idle_ = false;  // guarded by mu_
  std::optional<Error> fatal_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> bytes_pushed_{0};
  bool any_reached_ = false;              // guarded by mu_
  std::vector<std::string> quarantined_;  // guarded by mu_
};

}  // namespace

Result<SchedulerStats> RunJobs(const SchedulerContext& ctx, const std::vector<std::string>& devices,
                               std::vector<SweepJob> jobs) {
  Scheduler s(ctx, std::move(jobs));
  return s.Run(devices);
}

}  // namespace dfarm::harness
