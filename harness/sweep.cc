#include "harness/sweep.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "harness/matrix.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Parses "k1:v1;k2:v2" (DelegateSpec::OptionsString) back into options.
std::map<std::string, std::string> ParseOptionsString(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::string kv = text.substr(start, end - start);
    size_t colon = kv.find(':');
    if (colon != std::string::npos) out[kv.substr(0, colon)] = kv.substr(colon + 1);
    start = end + 1;
  }
  return out;
}

// The plugin of a stored job, whose delegate_options keep only its file name
// (DelegateSpec::ShownOptionsString): the spec's plugin file of that name
// whose content gives the job's key. Returns {host path, sha256}; fails when
// none does (the file changed or left the spec). `cache` keeps hashes.
Result<std::pair<std::string, std::string>> FindPlugin(const SweepSpec& spec,
                                                       const store::JobRow& job,
                                                       const std::string& file,
                                                       const BenchmarkSpec& benchmark,
                                                       PluginHashes* cache) {
  for (const std::string& path : PluginPaths(spec)) {
    if (fs::path(path).filename() != file) continue;
    auto [it, fresh] = cache->emplace(path, "");
    if (fresh) {
      auto sha = Sha256OfFile(path);
      if (!sha) return MakeError("delegate plugin " + sha.message());
      it->second = *sha;
    }
    DelegateSpec delegate{job.delegate, ParseOptionsString(job.delegate_options)};
    delegate.options[kPluginPathOption] = path;
    if (JobKey(job.model_sha256, delegate, job.device, benchmark, it->second) == job.job_key) {
      return std::pair{path, it->second};
    }
  }
  return MakeError("delegate plugin '" + file + "' of job " + std::to_string(job.id) +
                   " changed since the run was created (no plugin of that name in the run's "
                   "spec has the content the job was keyed on)");
}

// Runs `jobs` of run `run_id` and closes the run with its summary.
Result<SweepSummary> Schedule(int64_t run_id, const SweepSpec& spec,
                              std::vector<std::string> devices, std::vector<ScheduledJob> jobs,
                              store::Store& store, DeviceProvider& provider,
                              const SweepOptions& options, size_t total, size_t already_done) {
  if (!options.open_store) return MakeError("internal: SweepOptions::open_store is unset");
  Progress progress(options.progress, options.progress_tty, total, already_done);
  SchedulerContext ctx;
  ctx.devices = &provider;
  ctx.open_store = options.open_store;
  ctx.runner_path = options.runner_path;
  ctx.policy = spec.scheduler;
  ctx.progress = &progress;
  ctx.cancel = options.cancel;
  if (auto known = store.ListDevices(); known) {
    for (const store::DeviceRow& d : *known) {
      if (!d.abi.empty()) ctx.known_abis.emplace_back(d.name, d.abi);
    }
  }
  for (const ScheduledJob& j : jobs) {
    if (std::find(devices.begin(), devices.end(), j.device) == devices.end()) {
      devices.push_back(j.device);
    }
  }
  bool pending = !jobs.empty();
  auto stats = RunJobs(ctx, devices, std::move(jobs));
  progress.Finish();
  if (!stats) {
    (void)store.FinishRun(run_id, store::kRunFailed);
    return stats.error();
  }
  SweepSummary summary;
  summary.run_id = run_id;
  summary.bytes_pushed = stats->bytes_pushed;
  summary.quarantined = stats->quarantined;
  auto rows = store.ListJobs(run_id);
  if (!rows) return rows.error();
  for (const store::JobRow& j : *rows) {
    ++summary.jobs;
    if (!j.moved_from.empty()) ++summary.moved;
    if (!store::IsFinalJobStatus(j.status)) {
      ++summary.not_run;
    } else {
      (j.status == store::kJobOk ? summary.ok : summary.failed)++;
    }
  }
  bool cancelled = options.cancel && options.cancel->load() && summary.not_run > 0;
  summary.status = cancelled                          ? store::kRunCancelled
                   : pending && !stats->any_reached ? store::kRunFailed
                                                      : store::kRunFinished;
  if (auto r = store.FinishRun(run_id, summary.status); !r) return r.error();
  return summary;
}

}  // namespace

Result<SweepSummary> RunSweep(const SweepSpec& spec, store::Store& store, DeviceProvider& devices,
                              const SweepOptions& options) {
  if (auto runner = Sha256OfFile(options.runner_path); !runner) {
    return MakeError("runner: " + runner.message() + " (build dfarm-runner or set DFARM_RUNNER)");
  }
  auto hashes = HashModels(spec);
  if (!hashes) return hashes.error();
  auto plugins = HashPlugins(spec);
  if (!plugins) return plugins.error();
  std::vector<MatrixJob> jobs = ExpandMatrix(spec, *hashes, *plugins);

  auto run_id = store.CreateRun(spec.name, spec.ToJson());
  if (!run_id) return run_id.error();
  std::vector<store::JobRow> rows;
  for (const MatrixJob& j : jobs) {
    store::JobRow row;
    row.job_key = j.job_key;
    row.model = j.model.file;
    row.model_path = j.model.path;
    row.model_sha256 = j.model_sha256;
    row.delegate = j.delegate.name;
    row.delegate_options = j.delegate.ShownOptionsString();
    row.device = j.device;
    row.num_threads = j.benchmark.num_threads;
    rows.push_back(std::move(row));
  }
  auto ids = store.AddJobs(*run_id, rows);
  if (!ids) return ids.error();

  std::vector<ScheduledJob> scheduled;
  scheduled.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatrixJob& j = jobs[i];
    scheduled.push_back(ScheduledJob{(*ids)[i], j.device, j.model, j.model_sha256, j.delegate,
                                     j.benchmark, j.plugin_sha256});
  }
  return Schedule(*run_id, spec, spec.devices, std::move(scheduled), store, devices, options,
                  jobs.size(), 0);
}

Result<SweepSummary> ResumeSweep(int64_t run_id, store::Store& store, DeviceProvider& devices,
                                 const SweepOptions& options) {
  if (auto runner = Sha256OfFile(options.runner_path); !runner) {
    return MakeError("runner: " + runner.message() + " (build dfarm-runner or set DFARM_RUNNER)");
  }
  auto run = store.GetRun(run_id);
  if (!run) return run.error();
  std::string where = "run " + std::to_string(run_id);
  auto spec = ParseSpec(run->spec_json, where);
  if (!spec) return MakeError("cannot resume " + where + ": " + spec.message());
  auto rows = store.ListJobs(run_id);
  if (!rows) return rows.error();

  std::map<std::string, std::string> hashes;  // model path -> sha256 now
  PluginHashes plugin_hashes;                 // plugin path -> sha256 now, hashed once
  std::vector<ScheduledJob> pending;
  for (const store::JobRow& j : *rows) {
    if (store::IsFinalJobStatus(j.status)) continue;
    auto [it, fresh] = hashes.emplace(j.model_path, "");
    if (fresh) {
      auto sha = Sha256OfFile(j.model_path);
      if (!sha) return MakeError("cannot resume " + where + ": model " + sha.message());
      it->second = *sha;
    }
    if (it->second != j.model_sha256) {
      return MakeError("cannot resume " + where + ": model '" + j.model_path +
                       "' changed since the run was created (sha256 " + it->second +
                       ", the run has " + j.model_sha256 + ")");
    }
    ScheduledJob s;
    s.id = j.id;
    s.device = j.device;
    s.model = ModelSpec{j.model_path, j.model};
    s.model_sha256 = j.model_sha256;
    s.delegate = DelegateSpec{j.delegate, ParseOptionsString(j.delegate_options)};
    s.benchmark = spec->benchmark;
    if (j.num_threads > 0) s.benchmark.num_threads = j.num_threads;
    if (auto shown = s.delegate.options.find(kPluginPathOption);
        shown != s.delegate.options.end()) {
      auto found = FindPlugin(*spec, j, shown->second, s.benchmark, &plugin_hashes);
      if (!found) return MakeError("cannot resume " + where + ": " + found.message());
      shown->second = found->first;
      s.plugin_sha256 = found->second;
    }
    pending.push_back(std::move(s));
  }
  size_t resumed = pending.size();
  if (resumed == 0 && run->status != store::kRunRunning) {
    SweepSummary summary;  // nothing to do: report the run as it stands
    summary.run_id = run_id;
    summary.status = run->status;
    for (const store::JobRow& j : *rows) {
      ++summary.jobs;
      if (!j.moved_from.empty()) ++summary.moved;
      (j.status == store::kJobOk ? summary.ok : summary.failed)++;
    }
    return summary;
  }
  if (auto r = store.ReopenRun(run_id); !r) return r.error();
  auto summary = Schedule(run_id, *spec, spec->devices, std::move(pending), store, devices,
                          options, rows->size(), rows->size() - resumed);
  if (!summary) return summary.error();
  summary->resumed = resumed;
  return summary;
}

}  // namespace dfarm::harness
