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
#include "harness/run/scheduler_parts.h"
#include "harness/run/sweep.h"
#include "harness/spec/matrix.h"

namespace dfarm::harness {
std::string ScheduledJobLabel(const SweepJob& job, const std::string& device) {
  return JobLabel(job.model.file, job.delegate.name,
                  job.delegate.options.empty() ? "" : job.delegate.ShownOptionsString(),
                  job.benchmark.num_threads, device);
}

namespace {

// Spec benchmark.sustained_s in whole milliseconds (0: off).
uint32_t SustainedMs(const BenchmarkSpec& b) {
  return static_cast<uint32_t>(std::llround(b.sustained_s * 1000));
}

}  // namespace

// The wire form of a scheduled job: the one conversion from the host's job to
// what the agent runs.
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
  // CheckDeviceTakesJob refuses an eval job where it is missing.
  if (job.model.eval && agent::HasFeature(features, agent::kFeatureTaskOutputs)) {
    spec.task_outputs = job.model.eval->TaskOutputsArg();
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

Worker* SchedulerCore::Find(const std::string& device) const {
  auto it = by_name_.find(device);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<SchedulerStats> SchedulerCore::Run(const std::vector<std::string>& devices,
                                          JobSource& source) {
  source_ = &source;
  for (const std::string& d : devices) {
    if (by_name_.count(d)) continue;
    workers_.push_back(std::make_unique<Worker>(d));
    by_name_[d] = workers_.back().get();
  }
  for (const auto& [name, abi] : ctx_.known_abis) {
    if (auto it = by_name_.find(name); it != by_name_.end()) it->second->abi = abi;
  }
  if (ctx_.store_pool) {
    pool_ = ctx_.store_pool;
  } else {
    own_pool_ =
        std::make_unique<store::StorePool>(ctx_.open_store, static_cast<int>(workers_.size()));
    pool_ = own_pool_.get();
  }
  if (auto r = source.Start(); !r) return r.error();
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

void SchedulerCore::WorkerMain(Worker& w) {
  // The database answers before the worker starts (a connection stays open
  // in the pool for its calls).
  auto reached = pool_->Call([](store::Store&) -> Result<void> { return Ok(); });
  if (!reached) {
    Fatal(reached.error());
    std::lock_guard lock(mu_);
    source_->RetireLocked(w);
    return;
  }
  WorkerConnection s;
  source_->Serve(w, *pool_, s);
}

// Back to the queue: a claimed job gives its claim back; else "queued".
Result<void> SchedulerCore::Requeue(store::StorePool& db, const SweepJob& job) {
  if (job.claim_id > 0) {
    auto released = db.Call(&store::Store::ReleaseClaim, job.id, job.claim_id);
    if (!released) return released.error();
    return Ok();
  }
  return db.Call(&store::Store::RequeueJob, job.id);
}

void SchedulerCore::Fatal(const Error& e) {
  std::lock_guard lock(mu_);
  if (!fatal_) fatal_ = e;
  stop_ = true;
  cv_.notify_all();
}

// Opens the device, records it, pushes the runner. Returns why the device
// cannot be used (empty when it can); an error is a store failure.
Result<std::string> SchedulerCore::Connect(Worker& w, store::StorePool& db, WorkerConnection& s) {
  auto session = OpenWhenFree(w);
  if (!session) return session.message();
  const agent::DeviceInfo& info = (*session)->client().device();
  store::DeviceRow row = DeviceRowOf(w.device, info);
  row.node = ctx_.node_name;
  if (auto t = ctx_.device_tags.find(w.device); t != ctx_.device_tags.end()) row.tags = t->second;
  if (auto r = db.Call(&store::Store::UpsertDevice, row); !r) return r.error();
  {
    std::lock_guard lock(mu_);
    w.abi = info.abi;
    any_reached_ = true;
  }
  s.runner_path.clear();
  // A bundle the agent cannot run is not pushed; its jobs are refused in TryOnce.
  if (!ctx_.runner_path.empty() && (agent::HasFeature(info.features, agent::kFeatureBundles) ||
                                    !agent::IsBundleFile(ctx_.runner_path))) {
    auto pushed = PushRunner(w, db, (*session)->client(), ctx_.runner_path, &s.runner_sha);
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
Result<std::unique_ptr<DeviceSession>> SchedulerCore::OpenWhenFree(Worker& w) {
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
Result<std::string> SchedulerCore::PushRunner(Worker& w, store::StorePool& db,
                                              agent::AgentClient& client, const std::string& path,
                                              std::string* runner_sha) {
  auto sent = client.PutArtifact(path, runner_sha);
  if (!sent) {
    return "cannot push runner '" + path + "' to device '" + w.device + "': " + sent.message();
  }
  bytes_pushed_ += *sent;
  if (auto r = RecordArtifact(db, "runner", *runner_sha, path); !r) {
    return r.error();
  }
  return std::string();
}

// Runs `job` on `w` until it ends in a status other than infra, runs out
// of attempts, or moves. Errors are store failures only.
Result<void> SchedulerCore::RunOne(Worker& w, store::StorePool& db, WorkerConnection& c,
                                   SweepJob& job) {
  uint64_t backoff_ms = ctx_.policy.backoff_ms;
  for (uint32_t attempt = 0;; ++attempt) {
    auto tried = TryOnce(w, db, c, job);
    if (!tried) return tried.error();
    if (!tried->infra) return Ok();  // recorded, or back in the queue
    const std::string& infra = *tried->infra;
    // The agent may have dropped what this connection pushed (evicted under
    // its quota, deleted as corrupt): the next attempt asks it again.
    c.pushed.clear();
    c.runner_unsure = true;
    if (attempt < ctx_.policy.retries && !Cancelled()) {
      if (ctx_.progress) {
        ctx_.progress->Note("retrying " + ScheduledJobLabel(job, w.device) + " in " +
                            std::to_string(backoff_ms) + " ms (attempt " +
                            std::to_string(attempt + 2) + " of " +
                            std::to_string(ctx_.policy.retries + 1) + "): " + OneLine(infra));
      }
      SleepUnlessCancelled(std::chrono::milliseconds(backoff_ms));
      backoff_ms = std::min<uint64_t>(backoff_ms * 2, 10 * 60 * 1000);
      if (!Cancelled()) continue;
    }
    if (Cancelled() && attempt < ctx_.policy.retries) {
      if (auto r = Requeue(db, job); !r) return r;  // stays pending
      return Ok();
    }
    store::JobOutcome outcome = std::move(tried->outcome);
    outcome.status = store::kJobInfra;
    outcome.error = OneLine(infra) +
                    (attempt > 0 ? " (after " + std::to_string(attempt + 1) + " attempts)" : "");
    return source_->OutOfAttempts(w, db, job, outcome);
  }
}

// Connects when needed, pushes what the job needs, waits for cooldown and
// runs the job once.
Result<SchedulerCore::AttemptEnd> SchedulerCore::TryOnce(Worker& w, store::StorePool& db,
                                                         WorkerConnection& c, SweepJob& job) {
  if (!c.session) {
    auto reached = Connect(w, db, c);
    if (!reached) return reached.error();
    if (!reached->empty()) return NotStarted(w, db, job, *reached);
  }
  const std::vector<std::string>& features = c.session->client().device().features;
  if (Result<void> takes = CheckDeviceTakesJob(features, w.device, job, source_->RunnerFor(job));
      !takes) {
    store::JobOutcome o;
    o.status = store::kJobInfra;
    o.error = takes.message();
    if (auto rec = Record(w, db, job, o); !rec) return rec.error();
    return AttemptEnd{};
  }
  if (c.runner_unsure || c.runner_path != source_->RunnerFor(job)) {
    auto runner = PushRunner(w, db, c.session->client(), source_->RunnerFor(job), &c.runner_sha);
    if (!runner) return runner.error();
    if (!runner->empty()) {
      c.session.reset();  // the connection's state is unknown now
      return NotStarted(w, db, job, *runner);
    }
    c.runner_path = source_->RunnerFor(job);
    c.runner_unsure = false;
  }
  {
    auto pushed = PushJobArtifacts(w, db, c, job);
    if (!pushed) return pushed.error();
    if (pushed->has_value()) return std::move(**pushed);
  }
  const CooldownOutcome cool = CoolDown(w, c);
  if (Cooling() && Cancelled()) return AttemptEnd{};  // never started: the job stays queued
  return RunOnDevice(w, db, c, job, cool);
}

// Pushes what the job needs besides the runner (its model, delegate plugin
// and input sets), each once per connection, in one pipelined
// AgentClient::PutArtifacts. Returns how the attempt ended when it cannot go
// on (a device without feature "inputs" for a job with input sets: the job
// is recorded infra naming it, no retry; a failed push: infra to retry);
// unset when everything is there.
Result<std::optional<SchedulerCore::AttemptEnd>> SchedulerCore::PushJobArtifacts(
    Worker& w, store::StorePool& db, WorkerConnection& c, const SweepJob& job) {
  const auto& features = c.session->client().device().features;
  if (!job.input_set_sha256s.empty() && !agent::HasFeature(features, agent::kFeatureInputs)) {
    store::JobOutcome o;
    o.status = store::kJobInfra;
    o.error = "device '" + w.device + "': its dfarm-agent does not speak feature '" +
              std::string(agent::kFeatureInputs) +
              "', so it cannot run the model's input sets (update dfarm-agent there)";
    if (auto rec = Record(w, db, job, o); !rec) return rec.error();
    return std::optional<AttemptEnd>(AttemptEnd{});
  }
  // One artifact to push: the store's kind, a noun and a name for messages.
  struct Wanted {
    const char* kind;
    std::string noun, path, shown, sha256;
  };
  std::vector<Wanted> wanted = {
      {"model", "model", job.model.path, job.model.file, job.model_sha256}};
  if (!job.plugin_sha256.empty()) {
    const std::string plugin = job.delegate.PluginPath();
    wanted.push_back({"plugin", "delegate plugin", plugin, plugin, job.plugin_sha256});
  }
  for (size_t k = 0; k < job.input_set_sha256s.size(); ++k) {
    wanted.push_back({"inputs", "input set", job.input_set_paths.at(k),
                      job.model.file + " input set " + std::to_string(k),
                      job.input_set_sha256s[k]});
  }
  std::erase_if(wanted, [&c](const Wanted& a) { return c.pushed.count(a.sha256) > 0; });
  if (wanted.empty()) return std::optional<AttemptEnd>();
  std::vector<agent::ArtifactPush> files;
  for (const Wanted& a : wanted) files.push_back({a.path, a.sha256});
  std::vector<std::string> shas;
  auto sent = c.session->client().PutArtifacts(files, &shas);
  for (size_t i = 0; i < wanted.size(); ++i) {
    const Wanted& a = wanted[i];
    std::string infra;
    if (shas.at(i) != a.sha256) {
      infra = a.noun + " '" + a.path + "' changed during the sweep (sha256 " + shas[i] +
              ", expected " + a.sha256 + ")";
    } else if (!sent.at(i)) {
      c.session.reset();  // the connection's state is unknown now
      infra = "cannot push " + a.noun + " '" + a.shown + "' to device '" + w.device +
              "': " + sent[i].message();
    }
    if (!infra.empty()) {
      auto ended = NotStarted(w, db, job, std::move(infra));
      if (!ended) return ended.error();
      return std::optional<AttemptEnd>(std::move(*ended));
    }
    bytes_pushed_ += *sent[i];
    c.pushed.insert(a.sha256);
    if (auto r = RecordArtifact(db, a.kind, a.sha256, a.path); !r) return r.error();
  }
  return std::optional<AttemptEnd>();
}

// An attempt that ended `infra` before the job reached the device (no
// connection, a failed push) is still an attempt: jobs.attempts counts it,
// as the error's "(after N attempts)" does.
Result<SchedulerCore::AttemptEnd> SchedulerCore::NotStarted(Worker& w, store::StorePool& db,
                                                            const SweepJob& job,
                                                            std::string infra) {
  auto held = MarkRunning(w, db, job);
  if (!held) return held.error();
  if (!*held) return AttemptEnd{};
  return AttemptEnd{std::move(infra), {}};
}

// Marks `job` running under its claim (store::Store::MarkJobRunning).
// False, with a note, when the job is no longer this worker's (its claim
// was lost: the lease expired while this node was stopped or cut off, and
// the job went back to the queue, maybe finished elsewhere): the worker
// drops it and never tries it again. An error is a store failure.
Result<bool> SchedulerCore::MarkRunning(Worker& w, store::StorePool& db, const SweepJob& job) {
  auto r = db.Call(&store::Store::MarkJobRunning, job.id, job.claim_id);
  if (r) return true;
  if (r.error().kind != ErrorKind::kConflict) return r.error();
  if (ctx_.progress)
    ctx_.progress->Note("dropping " + ScheduledJobLabel(job, w.device) + ": " + r.message());
  return false;
}

// Runs the job on the connected device and records what it came to.
Result<SchedulerCore::AttemptEnd> SchedulerCore::RunOnDevice(Worker& w, store::StorePool& db,
                                                             WorkerConnection& c,
                                                             const SweepJob& job,
                                                             const CooldownOutcome& cool) {
  auto held = MarkRunning(w, db, job);
  if (!held) return held.error();
  if (!*held) return AttemptEnd{};
  const std::string label = ScheduledJobLabel(job, w.device);
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
    if (auto r = Requeue(db, job); !r) return r.error();
    if (ctx_.progress) ctx_.progress->Note("cancelled " + ScheduledJobLabel(job, w.device));
    return AttemptEnd{};
  }
  if (!result) {
    c.session.reset();  // reconnect (restarting a local agent) for the next attempt
    return AttemptEnd{"device '" + w.device + "': " + result.message(), {}};
  }
  const store::JobOutcome outcome = OutcomeOf(*result, job, cool);
  if (outcome.status == store::kJobInfra) return AttemptEnd{outcome.error, outcome};
  if (auto r = Record(w, db, job, outcome); !r) return r.error();
  std::lock_guard lock(mu_);
  w.infra_in_a_row = 0;
  return AttemptEnd{};
}

Result<void> SchedulerCore::Record(Worker& w, store::StorePool& db, const SweepJob& job,
                                   const store::JobOutcome& given) {
  store::JobOutcome o = given;
  o.claim_id = job.claim_id;
  if (auto r = db.Call(&store::Store::RecordJobResult, job.id, o); !r) {
    if (r.error().kind != ErrorKind::kConflict) return r;
    if (ctx_.progress) ctx_.progress->Note(ScheduledJobLabel(job, w.device) + ": " + r.message());
    return Ok();
  }
  if (ctx_.progress) {
    ctx_.progress->JobDone(
        ScheduledJobLabel(job, w.device), o.status,
        JobDoneDetail(o.status, o.error,
                      o.metrics ? std::optional<double>(o.metrics->mean_us) : std::nullopt));
  }
  return Ok();
}

bool SchedulerCore::Cooling() const {
  return ctx_.policy.cooldown.pause_ms > 0 || ctx_.policy.cooldown.max_temp_c > 0 ||
         ctx_.policy.cooldown.max_cpu_busy_pct > 0;
}

store::JobOutcome SchedulerCore::OutcomeOf(const agent::JobResult& r, const SweepJob& job,
                                           const CooldownOutcome& cool) {
  store::JobOutcome outcome = ClassifyJobResult(r, job);
  if (!cool.note.empty()) {
    outcome.state_note =
        outcome.state_note.empty() ? cool.note : outcome.state_note + "; " + cool.note;
  }
  outcome.noisy = cool.noisy;
  return outcome;
}

CooldownOutcome SchedulerCore::CoolDown(Worker& w, WorkerConnection& c) {
  CooldownOutcome cool;
  if (!Cooling()) return cool;
  cool =
      WaitForCooldown(ctx_.policy.cooldown, AgentCooldownSource(c.session->client(), ctx_.cancel));
  if (!cool.note.empty() && ctx_.progress && (cool.gave_up || !w.cooldown_noted)) {
    ctx_.progress->Note("device '" + w.device + "': " + cool.note);
  }
  if (!cool.checked) w.cooldown_noted = true;  // a skipped rule is said once per device
  return cool;
}

Result<void> SchedulerCore::RecordArtifact(store::StorePool& db, const char* kind,
                                           const std::string& sha, const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  store::ArtifactRow row;
  row.sha256 = sha;
  row.kind = kind;
  row.size_bytes = ec ? 0 : static_cast<int64_t>(size);
  row.host_path = path;
  return db.Call(&store::Store::RecordArtifact, row);
}

void SchedulerCore::SleepUnlessCancelled(std::chrono::milliseconds d) {
  auto deadline = std::chrono::steady_clock::now() + d;
  std::unique_lock lock(mu_);
  while (!Cancelled() && std::chrono::steady_clock::now() < deadline) {
    cv_.wait_until(
        lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  }
}

Result<SchedulerStats> RunJobs(const SchedulerContext& ctx, const std::vector<std::string>& devices,
                               std::vector<SweepJob> jobs) {
  SchedulerCore core(ctx);
  std::unique_ptr<JobSource> source =
      ctx.node.claim ? MakeClaimSource(core) : MakeSweepSource(core, std::move(jobs));
  return core.Run(devices, *source);
}

}  // namespace dfarm::harness
