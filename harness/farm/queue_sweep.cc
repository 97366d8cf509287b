// A sweep on a farm's queue: EnqueueSweep and FollowRun (sweep.h).
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include "harness/farm/queue_job.h"
#include "harness/run/progress.h"
#include "harness/run/sweep.h"
#include "harness/run/sweep_parts.h"
#include "harness/spec/matrix.h"

namespace dfarm::harness {
namespace {

// Stores every build of every runner of the sweep (PutBlob); returns runner
// name -> ABI -> sha256.
Result<std::map<std::string, std::map<std::string, std::string>>> UploadRunners(
    const std::vector<RunnerSpec>& runners, store::Store& store) {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const RunnerSpec& r : runners) {
    for (const auto& [abi, path] : r.builds) {
      auto sha = Sha256OfFile(path);
      if (!sha) return MakeError("runner '" + r.name + "' build for " + abi + ": " + sha.message());
      if (auto put = store.PutBlob(*sha, path); !put) return put.error();
      out[r.name][abi] = *sha;
    }
  }
  return out;
}

// Stores the models, plugins and input sets the jobs use (PutBlob, each once).
Result<void> UploadFiles(const std::vector<SweepJob>& jobs, store::Store& store) {
  std::set<std::string> done;
  auto put = [&](const std::string& sha, const std::string& path) -> Result<void> {
    if (sha.empty() || !done.insert(sha).second) return Ok();
    return store.PutBlob(sha, path);
  };
  for (const SweepJob& j : jobs) {
    if (auto r = put(j.model_sha256, j.model.path); !r) return r;
    if (auto r = put(j.plugin_sha256, j.delegate.PluginPath()); !r) return r;
    for (size_t k = 0; k < j.input_set_sha256s.size(); ++k) {
      if (auto r = put(j.input_set_sha256s[k], j.input_set_paths.at(k)); !r) return r;
    }
  }
  return Ok();
}

// Which of `targets` (device name or job target) no device of a live node
// matches now, as lines for the user.
std::vector<std::string> UnservedTargets(const std::map<std::string, std::string>& targets,
                                         store::Store& store) {
  std::set<std::string> live;
  if (auto nodes = store.ListNodes(); nodes) {
    for (const store::NodeRow& n : *nodes) {
      if (store::NodeAlive(n)) live.insert(n.name);
    }
  }
  std::vector<store::DeviceTraits> served;
  if (auto devices = store.ListDevices(); devices) {
    for (const store::DeviceRow& d : *devices) {
      if (!live.count(d.node)) continue;
      served.push_back(
          store::DeviceTraits{d.name, d.abi, d.os, d.cpu, d.memory_bytes, d.tags, /*model=*/""});
    }
  }
  std::vector<std::string> out;
  for (const auto& [device, target] : targets) {
    bool any = false;
    for (const store::DeviceTraits& t : served)
      any = any || store::TargetMatches(target, device, t);
    if (any) continue;
    out.push_back(
        (target.empty()                ? "device '" + device + "'"
         : target == store::kTargetAny ? std::string("any device")
                                       : "a device matching " + target) +
        ": no live node serves one now; its jobs wait in the queue until one does, up to the "
        "spec's farm.unserved_timeout_s (start `dfarm node --db URL --device URI` on a host "
        "that has it)");
  }
  return out;
}

// The jobs of the sweep, each with its runner: the default runner's (not
// keyed, as on one host), or one job set per spec runner (keyed on its name,
// and on its build when it has one build only: which build runs is known
// only when a node's device claims the job).
std::vector<SweepJob> JobsPerRunner(
    const SweepSpec& spec, std::vector<SweepJob> planned,
    const std::map<std::string, std::map<std::string, std::string>>& builds) {
  if (spec.runners.empty()) return planned;
  std::vector<SweepJob> out;
  for (const RunnerSpec& r : spec.runners) {
    for (SweepJob j : planned) {
      j.runner = r.name;
      j.runner_kind = r.kind;
      const auto& of = builds.at(r.name);
      if (of.size() == 1) j.runner_sha256 = of.begin()->second;
      j.job_key = JobKeyOf(j);
      out.push_back(std::move(j));
    }
  }
  return out;
}

std::string Label(const store::JobRow& j) {
  return JobLabel(j.model, j.delegate, j.delegate_options, j.num_threads, j.device);
}

// Adds `jobs` (a model's whose labelled data failed to load) to run
// `run_id` and records each model_error with its model's data error.
Result<void> RecordDataErrors(int64_t run_id, std::vector<SweepJob> jobs, store::Store& store) {
  if (jobs.empty()) return Ok();
  std::vector<store::JobRow> rows;
  for (const SweepJob& j : jobs) rows.push_back(ToJobRow(j));
  auto ids = store.AddJobs(run_id, rows);
  if (!ids) return ids.error();
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].id = (*ids)[i];
    if (auto r = RecordDataError(store, jobs[i]); !r) return r.error();
  }
  return Ok();
}

}  // namespace

Result<int64_t> EnqueueSweep(const SweepSpec& spec, store::Store& store,
                             const SweepOptions& options, std::ostream* log) {
  if (spec.pairing.enabled()) {
    // A farm's nodes claim jobs in their own order, on any device they hold.
    return MakeError(ErrorKind::kInvalidInput,
                     "sweep '" + spec.name +
                         "': \"pairing\" runs on this host's sweep only (a farm's nodes claim "
                         "jobs in their own order, on their own devices); sweep it with a "
                         "SQLite --db, or leave \"pairing\" out");
  }
  if (auto r = CheckDefaultRunner(spec, options); !r) return r.error();
  auto hashes = HashModels(spec);
  if (!hashes) return hashes.error();
  auto plugins = HashPlugins(spec);
  if (!plugins) return plugins.error();
  const std::vector<RunnerSpec> runners = EffectiveRunners(spec, options);
  auto builds = UploadRunners(runners, store);
  if (!builds) return builds.error();
  // device name as the jobs show it until claimed -> its target
  std::map<std::string, std::string> targets;
  std::vector<std::string> devices;
  for (const std::string& d : spec.devices) {
    devices.push_back(d);
    targets[d] = d == kAnyDevice ? store::kTargetAny : "";
  }
  for (const DeviceSelector& sel : spec.device_selectors) {
    devices.push_back(SelectorTarget(sel));
    targets[devices.back()] = devices.back();
  }
  std::vector<SweepJob> jobs =
      JobsPerRunner(spec, ExpandMatrix(spec, *hashes, *plugins, {}, devices), *builds);
  std::map<std::string, std::string> eval_errors;
  auto inputs = PrepareModelInputs(spec, options, &eval_errors);
  if (!inputs) return inputs.error();
  for (SweepJob& j : jobs) {
    AttachInputSets(*inputs, &j);
    MarkEvalError(eval_errors, &j);
    if (!j.input_set_sha256s.empty()) j.job_key = JobKeyOf(j);
  }
  if (auto r = UploadFiles(jobs, store); !r) return r.error();
  std::vector<store::JobRow> rows;
  std::vector<SweepJob> bad_data;  // jobs of a model whose labelled data failed to load
  for (const SweepJob& j : jobs) {
    if (!j.model.data_error.empty()) {
      bad_data.push_back(j);
      continue;
    }
    rows.push_back(ToJobRow(j));
    rows.back().target = targets.at(j.device);
    rows.back().payload =
        EncodePayload(j, builds->at(spec.runners.empty() ? runners.front().name : j.runner));
  }
  auto run_id = store.CreateRun(spec.name, spec.ToJson());
  if (!run_id) return run_id.error();
  // Recorded before the run joins the queue, so that no node claims them.
  if (auto r = RecordDataErrors(*run_id, bad_data, store); !r) return r.error();
  NoteDataErrors(bad_data, log);
  if (auto r = store.SetRunMode(*run_id, store::kRunModeQueue); !r) return r.error();
  store::RunQueueing queueing;
  queueing.priority = options.priority.value_or(spec.farm.priority);
  queueing.unserved_timeout_s = spec.farm.unserved_timeout_s;
  queueing.device_classes = spec.device_classes;
  if (auto r = store.SetRunQueueing(*run_id, queueing); !r) return r.error();
  if (auto r = store.AddJobs(*run_id, rows); !r) return r.error();
  if (log) {
    for (const std::string& line : UnservedTargets(targets, store))
      *log << "note: " << line << "\n";
  }
  return *run_id;
}

Result<SweepSummary> FollowRun(int64_t run_id, store::Store& store, const SweepOptions& options,
                               std::chrono::milliseconds poll,
                               std::chrono::milliseconds unserved_check) {
  auto rows = store.ListJobs(run_id);
  if (!rows) return rows.error();
  std::set<int64_t> ended;
  for (const store::JobRow& j : *rows) {
    if (store::IsFinalJobStatus(j.status)) ended.insert(j.id);
  }
  Progress progress(options.progress, options.progress_tty, rows->size(), ended.size());
  std::set<int64_t> running;
  int failures = 0;
  auto next_unserved_check = std::chrono::steady_clock::now();
  for (;;) {
    for (const store::JobRow& j : *rows) {
      const bool final = store::IsFinalJobStatus(j.status);
      if (j.status == store::kJobRunning && running.insert(j.id).second) {
        progress.JobStarted(Label(j));
      }
      if (!final || !ended.insert(j.id).second) continue;
      if (running.erase(j.id)) progress.JobStopped(Label(j));
      progress.JobDone(
          Label(j), j.status,
          JobDoneDetail(j.status, j.error,
                        j.metrics ? std::optional<double>(j.metrics->mean_us) : std::nullopt));
    }
    if (ended.size() == rows->size()) break;
    auto deadline = std::chrono::steady_clock::now() + poll;
    while (std::chrono::steady_clock::now() < deadline && !(options.cancel && *options.cancel)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (options.cancel && *options.cancel) break;
    if (std::chrono::steady_clock::now() >= next_unserved_check) {
      // Best effort: the nodes do it too, and a failure shows in the read below.
      (void)store.EndUnservedJobs();
      next_unserved_check = std::chrono::steady_clock::now() + unserved_check;
    }
    auto again = store.ListJobs(run_id);
    if (!again) {
      // The database may be restarting: keep following for a while.
      if (++failures >= 20) return again.error();
      continue;
    }
    failures = 0;
    rows = std::move(again);
  }
  progress.Finish();
  SweepSummary summary = CountJobs(run_id, *rows);
  auto run = store.GetRun(run_id);
  if (!run) return run.error();
  if (summary.not_run == 0 && run->status == store::kRunRunning) {
    // Every job ended, but the node that recorded the last one could not
    // mark the run (store::Store::RecordJobResult): do it here.
    if (auto r = store.FinishRun(run_id, store::kRunFinished); !r) return r.error();
    run->status = store::kRunFinished;
  }
  summary.status = run->status;
  return summary;
}

}  // namespace dfarm::harness
