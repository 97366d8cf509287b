#include "harness/run/sweep.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "delegates/delegate_options.h"
#include "harness/farm/queue_job.h"
#include "harness/run/sweep_parts.h"
#include "harness/spec/matrix.h"
#include "harness/spec/runner_builds.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Reads a stored job's delegate options (DelegateSpec::ShownOptionsString,
// written by the one codec) back into a spec's map.
Result<std::map<std::string, std::string>> StoredOptions(const store::JobRow& job) {
  std::string error;
  auto listed =
      delegates::ParseDelegateOptions(job.delegate_options, "stored delegate option", &error);
  if (!listed) return MakeError("job " + std::to_string(job.id) + ": " + error);
  return std::map<std::string, std::string>(listed->begin(), listed->end());
}

// A stored job to run again, with the run's benchmark settings (the row keeps
// only num_threads). Not yet runnable: a plugin option holds the plugin's
// file name, and the runner build is unset (ChooseRunnerBuild sets both).
Result<SweepJob> JobFromRow(const store::JobRow& row, const BenchmarkSpec& run_benchmark) {
  auto options = StoredOptions(row);
  if (!options) return options.error();
  SweepJob job;
  job.id = row.id;
  job.model = ModelSpec{row.model_path, row.model};
  job.model_sha256 = row.model_sha256;
  job.delegate = DelegateSpec{row.delegate, std::move(*options)};
  job.device = row.device;
  job.benchmark = run_benchmark;
  if (row.num_threads > 0) job.benchmark.num_threads = row.num_threads;
  job.trial = static_cast<uint32_t>(row.trial);
  job.pair = row.pair;
  job.job_key = row.job_key;
  return job;
}

// The plugin of a resumed job, whose stored options keep only its file name
// `file`: the spec's plugin file of that name whose content gives the job its
// key. Sets the job's plugin path option and plugin_sha256; fails when no
// file does (it changed or left the spec). `cache` keeps hashes.
Result<void> FindPlugin(const SweepSpec& spec, const std::string& file, SweepJob* job,
                        PluginHashes* cache) {
  for (const std::string& path : PluginPaths(spec)) {
    if (fs::path(path).filename() != file) continue;
    auto [it, fresh] = cache->emplace(path, "");
    if (fresh) {
      auto sha = Sha256OfFile(path);
      if (!sha) return MakeError("delegate plugin " + sha.message());
      it->second = *sha;
    }
    SweepJob keyed = *job;
    keyed.delegate.options[kPluginPathOption] = path;
    keyed.plugin_sha256 = it->second;
    if (JobKeyOf(keyed) == job->job_key) {
      *job = std::move(keyed);
      return Ok();
    }
  }
  return MakeError("delegate plugin '" + file + "' of job " + std::to_string(job->id) +
                   " changed since the run was created (no plugin of that name in the run's "
                   "spec has the content the job was keyed on)");
}

// Gives a resumed job (JobFromRow) its runner build and plugin: the first of
// `candidates` the job was keyed on (with its plugin, FindPlugin). Without
// "runners" (`keyed` false) the key holds no build: the one candidate, the
// default build for the device's ABI, serves.
Result<void> ChooseRunnerBuild(const SweepSpec& spec, const std::vector<RunnerBuild>& candidates,
                               bool keyed, SweepJob* job, PluginHashes* plugin_hashes) {
  auto shown = job->delegate.options.find(kPluginPathOption);
  const bool has_plugin = shown != job->delegate.options.end();
  const std::string file = has_plugin ? shown->second : "";
  std::string why;
  for (const RunnerBuild& c : candidates) {
    SweepJob tried = *job;
    tried.runner = c.runner;
    tried.runner_path = c.path;
    tried.runner_sha256 = c.sha256;
    tried.runner_kind = c.kind;
    if (has_plugin) {
      if (auto found = FindPlugin(spec, file, &tried, plugin_hashes); !found) {
        why = found.message();
        continue;
      }
    } else if (keyed && JobKeyOf(tried) != job->job_key) {
      continue;
    }
    *job = std::move(tried);
    return Ok();
  }
  if (why.empty()) {
    why = "the runner build of job " + std::to_string(job->id) +
          " changed since the run was created (no build of the run's runners has the "
          "content the job was keyed on)";
  }
  return MakeError(why);
}

// Renews this process's claim on a run every `period` on a connection of its
// own until destroyed, so a long sweep is not taken for abandoned by a dfarm
// on another host (store::kRunClaimStaleSeconds). A failure is retried at the
// next period: the claim only ages meanwhile.
class ClaimHeartbeat {
 public:
  ClaimHeartbeat(int64_t run_id, StoreOpener open, std::chrono::milliseconds period)
      : thread_([this, run_id, open = std::move(open), period] {
          std::unique_ptr<store::Store> store;
          std::unique_lock lock(mu_);
          while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
            if (store == nullptr) {
              auto opened = open();
              if (!opened) continue;
              store = std::move(*opened);
            }
            (void)store->RefreshRunClaim(run_id);
          }
        }) {}
  ~ClaimHeartbeat() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// The devices the store has seen, with their ABIs (those it knows one of). A
// store that cannot say gives none: the sweep does without.
std::vector<std::pair<std::string, std::string>> KnownAbis(store::Store& store) {
  std::vector<std::pair<std::string, std::string>> out;
  if (auto known = store.ListDevices(); known) {
    for (const store::DeviceRow& d : *known) {
      if (!d.abi.empty()) out.emplace_back(d.name, d.abi);
    }
  }
  return out;
}

// What every RunJobs call of a sweep shares (runner_path is set per group).
SchedulerContext SharedContext(const SweepSpec& spec, store::Store& store, DeviceProvider& provider,
                               const SweepOptions& options, Progress* progress) {
  SchedulerContext ctx;
  ctx.devices = &provider;
  ctx.open_store = options.open_store;
  ctx.policy = spec.scheduler;
  ctx.stepped_pairs = spec.pairing.stepped;
  ctx.progress = progress;
  ctx.cancel = options.cancel;
  ctx.allow_runner_change = options.allow_runner_change;
  ctx.known_abis = KnownAbis(store);
  return ctx;
}

// The devices of `devices` that a job of `group` names, in that order.
std::vector<std::string> DevicesOf(const std::vector<SweepJob>& group,
                                   const std::vector<std::string>& devices) {
  std::vector<std::string> out;
  for (const std::string& d : devices) {
    for (const SweepJob& j : group) {
      if (j.device == d) {
        out.push_back(d);
        break;
      }
    }
  }
  return out;
}

// Runs `jobs` on `devices` and sums what the scheduler reports.
//
// The scheduler pushes one runner build per RunJobs call, so jobs are run in
// rounds, one per runner (in order of first appearance), and within a round
// one RunJobs per distinct build, concurrently: those groups have disjoint
// devices (a device runs one build of a runner), and devices of one ABI share
// a group, so same_abi failover still finds its targets. An error is the
// first store failure; the groups of its round finish first, later rounds
// do not start.
// A paired sweep (`interleaved`) is one round of one RunJobs call: each job
// pushes its own runner build (the sweep source's RunnerFor), so a device
// runs the baseline's and the candidate's jobs in its queue's order.
// TODO(#6): once every sweep runs that way, this is one RunJobs call again.
Result<SchedulerStats> RunRounds(const SchedulerContext& base,
                                 const std::vector<std::string>& devices,
                                 std::vector<SweepJob> jobs, bool interleaved,
                                 const std::atomic<bool>* cancel) {
  // round (runner) -> build path -> jobs
  std::vector<std::string> rounds;
  std::map<std::string, std::map<std::string, std::vector<SweepJob>>> groups;
  for (SweepJob& j : jobs) {
    const std::string round = interleaved ? "" : j.runner;
    if (std::find(rounds.begin(), rounds.end(), round) == rounds.end()) {
      rounds.push_back(round);
    }
    // Interleaved: one group, keyed by its first job's build (pushed at connect).
    const std::string path =
        interleaved && !groups[round].empty() ? groups[round].begin()->first : j.runner_path;
    std::vector<SweepJob>& group = groups[round][path];
    group.push_back(std::move(j));
  }
  SchedulerStats stats;
  std::optional<Error> failure;
  for (const std::string& round : rounds) {
    if (cancel && cancel->load()) break;
    std::mutex mu;
    std::vector<std::thread> threads;
    for (auto& [path, group] : groups[round]) {
      SchedulerContext ctx = base;
      ctx.runner_path = path;
      threads.emplace_back(
          // `&group = group`: clang 14 cannot capture a structured binding by name.
          [&mu, &stats, &failure, ctx, group_devices = DevicesOf(group, devices), &group = group] {
            auto r = RunJobs(ctx, group_devices, std::move(group));
            std::lock_guard lock(mu);
            if (!r) {
              if (!failure) failure = r.error();
              return;
            }
            stats.bytes_pushed += r->bytes_pushed;
            stats.any_reached = stats.any_reached || r->any_reached;
            stats.quarantined.insert(stats.quarantined.end(), r->quarantined.begin(),
                                     r->quarantined.end());
          });
    }
    for (std::thread& t : threads) t.join();
    if (failure) break;
  }
  if (failure) return *failure;
  return stats;
}

// Closes run `run_id` once its jobs ran: the summary, and the run's final
// status (cancelled when jobs are left, failed when it had jobs to run and
// no device answered, else finished).
Result<SweepSummary> CloseRun(int64_t run_id, const SchedulerStats& stats, bool had_pending,
                              store::Store& store, const std::atomic<bool>* cancel) {
  auto rows = store.ListJobs(run_id);
  if (!rows) return rows.error();
  SweepSummary summary = CountJobs(run_id, *rows);
  summary.bytes_pushed = stats.bytes_pushed;
  summary.quarantined = stats.quarantined;
  bool cancelled = cancel && cancel->load() && summary.not_run > 0;
  summary.status = cancelled                           ? store::kRunCancelled
                   : had_pending && !stats.any_reached ? store::kRunFailed
                                                       : store::kRunFinished;
  if (auto r = store.FinishRun(run_id, summary.status); !r) return r.error();
  // A run cancelled meanwhile (`dfarm cancel`) stays cancelled.
  if (auto run = store.GetRun(run_id); run) summary.status = run->status;
  return summary;
}

// Runs `jobs` of run `run_id` (stored, each with its runner build) on
// `devices` (plus any device a job names) while renewing the run's claim,
// and closes the run with its summary. `total` and `already_done` are the
// progress line's counts. `jobs` is taken by rvalue reference, not by value:
// a by-value vector is moved from while the call's arguments are evaluated,
// in an order C++ leaves open, so a count taken from it in the same call read
// 0 with clang ("[3/2]"); bound by reference it is moved
// only in here.
Result<SweepSummary> Schedule(int64_t run_id, const SweepSpec& spec,
                              std::vector<std::string> devices, std::vector<SweepJob>&& jobs,
                              store::Store& store, DeviceProvider& provider,
                              const SweepOptions& options, size_t total, size_t already_done) {
  if (!options.open_store) return MakeError("internal: SweepOptions::open_store is unset");
  Progress progress(options.progress, options.progress_tty, total, already_done);
  const SchedulerContext base = SharedContext(spec, store, provider, options, &progress);
  for (const SweepJob& j : jobs) {
    if (std::find(devices.begin(), devices.end(), j.device) == devices.end()) {
      devices.push_back(j.device);
    }
  }
  const bool had_pending = !jobs.empty();
  auto stats = [&] {
    ClaimHeartbeat heartbeat(run_id, options.open_store, options.claim_refresh);
    return RunRounds(base, devices, std::move(jobs), spec.pairing.enabled(), options.cancel);
  }();
  progress.Finish();
  if (!stats) {
    (void)store.FinishRun(run_id, store::kRunFailed);
    return stats.error();
  }
  return CloseRun(run_id, *stats, had_pending, store, options.cancel);
}

std::string SelectorText(const DeviceSelector& sel) {
  json o = json::object();
  if (!sel.abi.empty()) o["abi"] = sel.abi;
  if (!sel.tags.empty()) o["tags"] = sel.tags;
  if (!sel.os.empty()) o["os"] = sel.os;
  if (!sel.soc.empty()) o["soc"] = sel.soc;
  if (sel.min_memory_mb > 0) o["min_memory_mb"] = sel.min_memory_mb;
  return o.dump();
}

// Asks each device of `ask` for its hello (in parallel; each session closed
// again) and fills its traits: ABI, OS, CPU/SoC, memory. An unreachable
// device keeps what it had.
void ProbeDevices(DeviceProvider& devices, const std::vector<std::string>& ask,
                  std::map<std::string, store::DeviceTraits>* traits) {
  std::mutex mu;
  std::vector<std::thread> threads;
  for (const std::string& d : ask) {
    // The session is opened and closed on this thread (a local agent is
    // tied to the thread that started it).
    threads.emplace_back([&devices, traits, &mu, d] {
      auto session = devices.Open(d);
      if (!session) return;
      const agent::DeviceInfo info = (*session)->client().device();
      session->reset();
      std::lock_guard lock(mu);
      store::DeviceTraits& t = (*traits)[d];
      t = TraitsOf(d, info, t.tags);
    });
  }
  for (std::thread& t : threads) t.join();
}

// The build of `runner` for a device of ABI `abi` ("" when unknown: the
// host's build, else the runner's only build), or nullptr when it has none.
const std::string* BuildFor(const RunnerSpec& runner, const std::string& abi) {
  auto it = runner.builds.find(abi.empty() ? HostAbi() : abi);
  if (it != runner.builds.end()) return &it->second;
  if (abi.empty() && runner.builds.size() == 1) return &runner.builds.begin()->second;
  return nullptr;
}

// Why a planned job has no runner build, by (device, SweepJob::runner).
using MissingBuilds = std::map<std::pair<std::string, std::string>, std::string>;

// Each device's build of each runner, hashed once per file, in runner order.
// A spec's own runners (`keyed`) are part of the job key, the default runner
// is not (keys stay comparable across rebuilds). A device without a build
// of a runner gets an entry without path, and `missing` says why.
Result<DeviceRunnerBuilds> PlanRunnerBuilds(const std::vector<RunnerSpec>& runners,
                                            const std::vector<ResolvedDevice>& devices, bool keyed,
                                            MissingBuilds* missing) {
  std::map<std::string, std::string> build_sha;  // path -> sha256
  DeviceRunnerBuilds builds;
  for (const ResolvedDevice& d : devices) {
    for (const RunnerSpec& runner : runners) {
      const std::string* path = BuildFor(runner, d.abi);
      RunnerBuild rb;
      rb.runner = keyed ? runner.name : "";
      rb.abi = d.abi;
      rb.kind = runner.kind;
      if (!path) {
        auto why = runner.missing_builds.find(d.abi);
        (*missing)[{d.name, rb.runner}] =
            "runner '" + runner.name + "' has no build for ABI '" + d.abi + "' of device '" +
            d.name + "' (" +
            (why != runner.missing_builds.end() ? why->second
                                                : "add \"" + d.abi + "\" to its \"builds\"") +
            ")";
      } else {
        auto [it, fresh] = build_sha.emplace(*path, "");
        if (fresh) {
          auto sha = Sha256OfFile(*path);
          if (!sha) {
            return MakeError("runner '" + runner.name + "': " + sha.message() +
                             (keyed ? "" : " (build dfarm-runner or set DFARM_RUNNER)"));
          }
          it->second = *sha;
        }
        rb.path = *path;
        if (keyed) rb.sha256 = it->second;
      }
      builds[d.name].push_back(std::move(rb));
    }
  }
  return builds;
}

// What a new sweep runs, before its run exists.
struct SweepPlan {
  std::vector<std::string> devices;  // as resolved, selectors matched
  std::vector<SweepJob> jobs;        // ExpandMatrix's, id 0
  MissingBuilds missing;
};

// Hashes the spec's files, resolves its devices (agents are asked their ABI
// only when it decides something) and their runner builds, and expands the
// matrix.
Result<SweepPlan> PlanSweep(const SweepSpec& spec, store::Store& store, DeviceProvider& devices,
                            const SweepOptions& options) {
  auto hashes = HashModels(spec);
  if (!hashes) return hashes.error();
  auto plugins = HashPlugins(spec);
  if (!plugins) return plugins.error();
  std::vector<RunnerSpec> runners = EffectiveRunners(spec, options);
  bool several_builds = false;
  for (const RunnerSpec& r : runners) several_builds = several_builds || r.builds.size() > 1;
  auto resolved = ResolveDevices(spec, devices, KnownAbis(store), several_builds);
  if (!resolved) return resolved.error();
  SweepPlan plan;
  for (const ResolvedDevice& d : *resolved) plan.devices.push_back(d.name);
  auto builds = PlanRunnerBuilds(runners, *resolved, !spec.runners.empty(), &plan.missing);
  if (!builds) return builds.error();
  // Selectors may have matched several devices each: the spec's count again.
  if (auto n = CountMatrixJobs(MatrixAxes(spec, plan.devices.size(), runners.size())); !n) {
    return MakeError(ErrorKind::kInvalidInput, "sweep '" + spec.name + "': " + n.message());
  }
  plan.jobs = ExpandMatrix(spec, *hashes, *plugins, *builds, plan.devices);
  std::map<std::string, std::string> eval_errors;
  auto inputs = PrepareModelInputs(spec, options, &eval_errors);
  if (!inputs) return inputs.error();
  for (SweepJob& j : plan.jobs) {
    AttachInputSets(*inputs, &j);
    MarkEvalError(eval_errors, &j);
    if (!j.input_set_sha256s.empty()) j.job_key = JobKeyOf(j);
  }
  return plan;
}

// Creates the run of `spec` and stores the plan's jobs, giving each its id; a
// job without a runner build is recorded `infra` at once, one whose model's
// labelled data could not be loaded `model_error` (RecordDataError). Returns the run's
// id and the jobs to schedule.
Result<std::pair<int64_t, std::vector<SweepJob>>> RecordRun(const SweepSpec& spec, SweepPlan& plan,
                                                            store::Store& store) {
  // The stored spec names its devices and runners as they were resolved, so
  // that --resume needs no selector matching and finds the same builds.
  SweepSpec stored = spec;
  stored.devices = plan.devices;
  stored.device_selectors.clear();
  auto run_id = store.CreateRun(spec.name, stored.ToJson());
  if (!run_id) return run_id.error();
  std::vector<store::JobRow> rows;
  std::map<std::string, std::string> build_sha;  // unkeyed builds: path -> sha256, hashed once
  for (const SweepJob& j : plan.jobs) {
    rows.push_back(ToJobRow(j));
    if (rows.back().runner_sha256.empty() && !j.runner_path.empty()) {
      // The default runner is not keyed, but the store keeps which build ran.
      auto [it, fresh] = build_sha.emplace(j.runner_path, "");
      if (fresh) {
        auto sha = Sha256OfFile(j.runner_path);
        if (sha) it->second = *sha;
      }
      rows.back().runner_sha256 = it->second;
    }
  }
  auto ids = store.AddJobs(*run_id, rows);
  if (!ids) return ids.error();
  std::vector<SweepJob> scheduled;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    SweepJob j = plan.jobs[i];
    j.id = (*ids)[i];
    if (auto m = plan.missing.find({j.device, j.runner}); m != plan.missing.end()) {
      store::JobOutcome o;
      o.status = store::kJobInfra;
      o.error = m->second;
      if (auto r = store.RecordJobResult(j.id, o); !r) return r.error();
      continue;
    }
    if (!j.model.data_error.empty()) {
      if (auto r = RecordDataError(store, j); !r) return r.error();
      continue;
    }
    scheduled.push_back(std::move(j));
  }
  return std::pair{*run_id, std::move(scheduled)};
}

// Every build of the spec's own runners, hashed: the builds a job of a spec
// with "runners" may have been keyed on (the key tells which).
Result<std::vector<RunnerBuild>> KeyedBuilds(const std::vector<RunnerSpec>& runners,
                                             const std::string& where) {
  std::vector<RunnerBuild> builds;
  for (const RunnerSpec& r : runners) {
    for (const auto& [abi, path] : r.builds) {
      auto sha = Sha256OfFile(path);
      if (!sha) {
        return MakeError("cannot resume " + where + ": runner '" + r.name + "' " + sha.message());
      }
      builds.push_back(RunnerBuild{r.name, abi, path, *sha, r.kind});
    }
  }
  return builds;
}

// Fails when the model of stored job `row` is missing or changed since the
// run was created. `hashes` keeps model path -> sha256 now.
Result<void> CheckModelUnchanged(const store::JobRow& row, const std::string& where,
                                 std::map<std::string, std::string>* hashes) {
  auto [it, fresh] = hashes->emplace(row.model_path, "");
  if (fresh) {
    auto sha = Sha256OfFile(row.model_path);
    if (!sha) return MakeError("cannot resume " + where + ": model " + sha.message());
    it->second = *sha;
  }
  if (it->second != row.model_sha256) {
    return MakeError("cannot resume " + where + ": model '" + row.model_path +
                     "' changed since the run was created (sha256 " + it->second +
                     ", the run has " + row.model_sha256 + ")");
  }
  return Ok();
}

// The jobs of `rows` without a result, to run again under their ids: each
// with its model checked, and its plugin and runner build found again by its
// key among every build of the spec's runners, or, without "runners", the
// default runner's build for the device's ABI (the runner given now).
Result<std::vector<SweepJob>> PlanResume(const SweepSpec& spec,
                                         const std::vector<store::JobRow>& rows,
                                         store::Store& store, DeviceProvider& devices,
                                         const SweepOptions& options, const std::string& where) {
  auto known = KnownAbis(store);
  std::map<std::string, std::string> device_abi(known.begin(), known.end());
  std::vector<RunnerSpec> runners = EffectiveRunners(spec, options);
  const bool keyed = !spec.runners.empty();
  std::vector<RunnerBuild> keyed_builds;
  if (keyed) {
    auto hashed = KeyedBuilds(runners, where);
    if (!hashed) return hashed.error();
    keyed_builds = std::move(*hashed);
  }
  std::map<std::string, std::string> model_hashes;
  PluginHashes plugin_hashes;  // plugin path -> sha256 now, hashed once
  auto inputs = PrepareModelInputs(spec, options);
  if (!inputs) return MakeError("cannot resume " + where + ": " + inputs.message());
  std::vector<SweepJob> pending;
  for (const store::JobRow& row : rows) {
    if (store::IsFinalJobStatus(row.status)) continue;
    if (auto r = CheckModelUnchanged(row, where, &model_hashes); !r) return r.error();
    auto job = JobFromRow(row, spec.benchmark);
    if (!job) return job.error();
    AttachInputSets(*inputs, &*job);
    std::vector<RunnerBuild> candidates = keyed_builds;
    if (!keyed) {
      std::string abi = devices.KnownAbi(row.device);
      if (abi.empty()) abi = device_abi[row.device];
      const std::string* path = BuildFor(runners.front(), abi);
      candidates.push_back(
          RunnerBuild{"", abi, path ? *path : options.runner_path, "", runners.front().kind});
    }
    if (auto r = ChooseRunnerBuild(spec, candidates, keyed, &*job, &plugin_hashes); !r) {
      return MakeError("cannot resume " + where + ": " + r.message());
    }
    pending.push_back(std::move(*job));
  }
  return pending;
}

}  // namespace

std::vector<RunnerSpec> EffectiveRunners(const SweepSpec& spec, const SweepOptions& options) {
  std::vector<RunnerSpec> runners = spec.runners;
  if (runners.empty()) {
    runners.emplace_back();
    runners.back().name = "default";
  }
  for (RunnerSpec& r : runners) {
    if (r.builds.empty()) FillDefaultBuilds(&r, options.runner_path, options.arm64_runner_path);
  }
  return runners;
}

Result<std::vector<ResolvedDevice>> ResolveDevices(
    const SweepSpec& spec, DeviceProvider& devices,
    const std::vector<std::pair<std::string, std::string>>& known_abis, bool want_abis) {
  if (std::find(spec.devices.begin(), spec.devices.end(), kAnyDevice) != spec.devices.end()) {
    return MakeError(ErrorKind::kInvalidInput,
                     "device \"any\" needs a farm: pass --db postgresql://USER@HOST:PORT/DB, where "
                     "`dfarm node` processes run the jobs on their devices");
  }
  // What a selector may ask beyond ABI and tags needs each candidate's hello.
  bool want_info = false;
  for (const DeviceSelector& sel : spec.device_selectors) {
    want_abis = want_abis || !sel.abi.empty();
    want_info = want_info || !sel.os.empty() || !sel.soc.empty() || sel.min_memory_mb > 0;
  }
  std::vector<std::string> candidates = spec.devices;
  auto add = [&](const std::string& d) {
    if (std::find(candidates.begin(), candidates.end(), d) == candidates.end()) {
      candidates.push_back(d);
    }
  };
  if (!spec.device_selectors.empty()) {
    for (const auto& [d, tags] : spec.device_tags) add(d);
    for (const std::string& d : devices.KnownDevices()) add(d);
  }
  // ABIs: known to the provider, else asked (in parallel), else the store's.
  std::map<std::string, store::DeviceTraits> traits;
  std::vector<std::string> ask;
  for (const std::string& d : candidates) {
    traits[d].name = d;
    traits[d].abi = devices.KnownAbi(d);
    if (auto t = spec.device_tags.find(d); t != spec.device_tags.end()) traits[d].tags = t->second;
    if (want_info || (traits[d].abi.empty() && want_abis)) ask.push_back(d);
  }
  ProbeDevices(devices, ask, &traits);
  for (const auto& [name, a] : known_abis) {
    auto it = traits.find(name);
    if (it != traits.end() && it->second.abi.empty()) it->second.abi = a;
  }
  std::vector<ResolvedDevice> out;
  std::set<std::string> chosen;
  for (const std::string& d : spec.devices) {
    out.push_back({d, traits[d].abi});
    chosen.insert(d);
  }
  for (const DeviceSelector& sel : spec.device_selectors) {
    bool any = false;
    for (const std::string& d : candidates) {
      if (!store::TargetMatches(SelectorTarget(sel), "", traits[d])) continue;
      any = true;
      if (chosen.insert(d).second) out.push_back({d, traits[d].abi});
    }
    if (!any) {
      std::string list;
      for (const std::string& d : candidates) {
        const store::DeviceTraits& t = traits[d];
        list += (list.empty() ? "" : ", ") + d + " (" + (t.abi.empty() ? "abi unknown" : t.abi);
        for (const std::string& tag : t.tags) list += ", " + tag;
        list += ")";
      }
      return MakeError(ErrorKind::kInvalidInput, "device selector " + SelectorText(sel) +
                                                     " matches no device (candidates: " +
                                                     (list.empty() ? "none" : list) + ")");
    }
  }
  if (out.empty()) return MakeError(ErrorKind::kInvalidInput, "the spec names no device");
  return out;
}

Result<SweepSummary> RunSweep(const SweepSpec& spec, store::Store& store, DeviceProvider& devices,
                              const SweepOptions& options) {
  if (auto r = CheckDefaultRunner(spec, options); !r) return r.error();
  auto plan = PlanSweep(spec, store, devices, options);
  if (!plan) return plan.error();
  auto recorded = RecordRun(spec, *plan, store);
  if (!recorded) return recorded.error();
  NoteDataErrors(plan->jobs, options.progress);
  auto& [run_id, scheduled] = *recorded;
  const size_t total = plan->jobs.size();
  const size_t already_done = total - scheduled.size();
  return Schedule(run_id, spec, plan->devices, std::move(scheduled), store, devices, options, total,
                  already_done);
}

Result<SweepSummary> ResumeSweep(int64_t run_id, store::Store& store, DeviceProvider& devices,
                                 const SweepOptions& options) {
  auto run = store.GetRun(run_id);
  if (!run) return run.error();
  std::string where = "run " + std::to_string(run_id);
  auto spec = ParseSpec(run->spec_json, where);
  if (!spec) return MakeError("cannot resume " + where + ": " + spec.message());
  if (auto r = CheckDefaultRunner(*spec, options); !r) return r.error();
  auto rows = store.ListJobs(run_id);
  if (!rows) return rows.error();
  auto pending = PlanResume(*spec, *rows, store, devices, options, where);
  if (!pending) return pending.error();
  const size_t resumed = pending->size();
  if (resumed == 0 && run->status != store::kRunRunning) {
    SweepSummary summary = CountJobs(run_id, *rows);  // nothing to do: the run as it stands
    summary.status = run->status;
    return summary;
  }
  if (auto r = store.ReopenRun(run_id); !r) return r.error();
  auto summary = Schedule(run_id, *spec, spec->devices, std::move(*pending), store, devices,
                          options, rows->size(), rows->size() - resumed);
  if (!summary) return summary.error();
  summary->resumed = resumed;
  return summary;
}

// A planned job as the store keeps it (the store gives it its id).
store::JobRow ToJobRow(const SweepJob& job) {
  store::JobRow row;
  row.job_key = job.job_key;
  row.model = job.model.file;
  row.model_path = job.model.path;
  row.model_sha256 = job.model_sha256;
  row.delegate = job.delegate.name;
  row.delegate_options = job.delegate.ShownOptionsString();
  row.device = job.device;
  row.num_threads = job.benchmark.num_threads;
  row.trial = job.trial;
  row.runner = job.runner;
  row.runner_sha256 = job.runner_sha256;
  row.runner_kind = job.runner_kind;
  row.inputs = store::InputsId(job.input_set_sha256s);
  row.pair = job.pair;
  return row;
}

// Fails when the sweep runs the default runner (`spec` names no "runners")
// and options.runner_path cannot be read.
Result<void> CheckDefaultRunner(const SweepSpec& spec, const SweepOptions& options) {
  if (!spec.runners.empty()) return Ok();
  if (auto runner = Sha256OfFile(options.runner_path); !runner) {
    return MakeError("runner: " + runner.message() + " (build dfarm-runner or set DFARM_RUNNER)");
  }
  return Ok();
}

// The whole-run counts of a summary, from the run's jobs as stored.
SweepSummary CountJobs(int64_t run_id, const std::vector<store::JobRow>& rows) {
  SweepSummary summary;
  summary.run_id = run_id;
  for (const store::JobRow& j : rows) {
    ++summary.jobs;
    if (!j.moved_from.empty()) ++summary.moved;
    if (!store::IsFinalJobStatus(j.status) || j.status == store::kJobCancelled) {
      ++summary.not_run;
    } else {
      (j.status == store::kJobOk ? summary.ok : summary.failed)++;
    }
  }
  return summary;
}

Result<ModelInputSets> PrepareModelInputs(const SweepSpec& spec, const SweepOptions& options,
                                          std::map<std::string, std::string>* eval_errors) {
  ModelInputSets out;
  const std::string cache =
      options.inputs_cache_dir.empty() ? DefaultInputsCacheDir() : options.inputs_cache_dir;
  for (const ModelSpec& m : spec.models) {
    if (m.inputs.empty()) continue;
    auto sets = PrepareInputSets(m.inputs, cache);
    if (!sets && m.eval && eval_errors != nullptr) {
      (*eval_errors)[m.path] = "model '" + m.file + "' eval images: " + sets.message();
      continue;
    }
    if (!sets) return MakeError("model '" + m.file + "' inputs: " + sets.message());
    out[m.path] = std::move(*sets);
  }
  return out;
}

Result<void> RecordDataError(store::Store& store, const SweepJob& job) {
  store::JobOutcome o;
  o.status = JobStatusName(JobStatus::kModelError);
  o.error = job.model.data_error;
  return store.RecordJobResult(job.id, o);
}

void NoteDataErrors(const std::vector<SweepJob>& jobs, std::ostream* out) {
  if (out == nullptr) return;
  std::set<std::string> noted;  // model paths
  for (const SweepJob& j : jobs) {
    if (j.model.data_error.empty() || !noted.insert(j.model.path).second) continue;
    *out << "error: " << j.model.data_error << " (the jobs of model '" << j.model.file
         << "' are recorded model_error; the others run)\n";
  }
}

void MarkEvalError(const std::map<std::string, std::string>& eval_errors, SweepJob* job) {
  auto it = eval_errors.find(job->model.path);
  if (it == eval_errors.end() || !job->model.data_error.empty()) return;
  job->model.data_error = it->second;
}

// Gives `job` the input sets of its model (none when the model has none);
// its key is left as it is.
void AttachInputSets(const ModelInputSets& sets, SweepJob* job) {
  job->input_set_sha256s.clear();
  job->input_set_paths.clear();
  auto it = sets.find(job->model.path);
  if (it == sets.end()) return;
  for (const PreparedInputSet& s : it->second) {
    job->input_set_sha256s.push_back(s.sha256);
    job->input_set_paths.push_back(s.path);
  }
}

}  // namespace dfarm::harness
