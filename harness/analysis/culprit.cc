#include "harness/analysis/culprit.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <utility>

#include "agent/protocol/features.h"
#include "agent/runner/runner_json.h"
#include "delegates/delegate_options.h"
#include "harness/run/job_features.h"
#include "harness/run/scheduler.h"
#include "harness/spec/matrix.h"  // Sha256OfFile

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;

// What the finder runs again: the job as it ran, with host paths.
struct Target {
  store::JobRow row;
  DelegateSpec delegate;  // the plugin option holds its host path
  std::string runner_path;
  std::vector<int64_t> candidates;     // the nodes the job delegated, in index order
  std::map<int64_t, std::string> ops;  // by node index, from the job's placement
};

std::string RunLabel(int64_t run_id) { return "run " + std::to_string(run_id); }

// Fails naming `noun` when `path` no longer holds the content the job ran.
Result<void> CheckSame(const std::string& noun, const std::string& path, const std::string& want,
                       int64_t run_id) {
  auto sha = Sha256OfFile(path);
  if (!sha) return MakeError(noun + " " + sha.message());
  if (!want.empty() && *sha != want) {
    return MakeError(noun + " '" + path + "' changed since " + RunLabel(run_id) + " (sha256 " +
                     sha->substr(0, 12) + ", the job ran " + want.substr(0, 12) + ")");
  }
  return Ok();
}

// The job's delegate with its options as stored, the plugin's file name
// replaced by the host path of the spec's plugin of that name.
Result<DelegateSpec> JobDelegate(const SweepSpec& spec, const store::JobRow& row) {
  std::string error;
  auto listed =
      delegates::ParseDelegateOptions(row.delegate_options, "stored delegate option", &error);
  if (!listed) return MakeError("job " + std::to_string(row.id) + ": " + error);
  DelegateSpec d{row.delegate, {listed->begin(), listed->end()}};
  auto plugin = d.options.find(kPluginPathOption);
  if (plugin == d.options.end()) return d;
  for (const DelegateSpec& s : spec.delegates) {
    if (s.name == d.name && fs::path(s.PluginPath()).filename() == plugin->second) {
      plugin->second = s.PluginPath();
      return d;
    }
  }
  return MakeError("the run's spec has no plugin '" + plugin->second + "' for delegate '" + d.name +
                   "'");
}

// The build of the job's runner that it ran (by sha256), among the run's.
Result<std::string> JobRunnerPath(const SweepSpec& spec, const SweepOptions& sweep,
                                  const store::JobRow& row) {
  std::string tried;
  for (const RunnerSpec& runner : EffectiveRunners(spec, sweep)) {
    if (!row.runner.empty() ? runner.name != row.runner : !spec.runners.empty()) continue;
    for (const auto& [abi, path] : runner.builds) {
      auto sha = Sha256OfFile(path);
      if (sha && (row.runner_sha256.empty() || *sha == row.runner_sha256)) return path;
      tried += (tried.empty() ? "" : ", ") + path;
    }
  }
  return MakeError("no build of runner '" + (row.runner.empty() ? "default" : row.runner) +
                   "' has the content job " + std::to_string(row.id) + " ran (sha256 " +
                   row.runner_sha256.substr(0, 12) +
                   "; tried: " + (tried.empty() ? std::string("none") : tried) +
                   "): rebuild that version, or set DFARM_RUNNER to it");
}

Result<Target> LoadTarget(const CulpritOptions& o, store::Store& store, const SweepOptions& sweep) {
  auto run = store.GetRun(o.run_id);
  if (!run) return run.error();
  auto spec = ParseSpec(run->spec_json, RunLabel(o.run_id));
  if (!spec) {
    return MakeError("cannot read the spec of " + RunLabel(o.run_id) + ": " + spec.message());
  }
  auto rows = store.ListJobs(o.run_id);
  if (!rows) return rows.error();
  auto row = std::find_if(rows->begin(), rows->end(),
                          [&](const store::JobRow& r) { return r.id == o.job_id; });
  if (row == rows->end()) {
    return MakeError(ErrorKind::kNotFound, RunLabel(o.run_id) + " has no job " +
                                               std::to_string(o.job_id) + " (see 'dfarm show " +
                                               std::to_string(o.run_id) + "' for its job ids)");
  }
  if (row->delegate == "cpu") {
    return MakeError(
        ErrorKind::kInvalidInput,
        "job " + std::to_string(o.job_id) + " ran on the cpu delegate: nothing was delegated");
  }
  Target t;
  t.row = *row;
  auto placement = store.GetPlacement(o.job_id);
  if (!placement) return placement.error();
  if (*placement) {
    for (const auto& n : (*placement)->nodes) {
      if (n.delegate != "cpu") t.candidates.push_back(n.index);
      t.ops[n.index] = n.op;
    }
  }
  std::sort(t.candidates.begin(), t.candidates.end());
  if (t.candidates.empty()) {
    return MakeError(ErrorKind::kInvalidInput,
                     "job " + std::to_string(o.job_id) +
                         " has no delegated node in its placement (status " + row->status +
                         "): nothing to bisect");
  }
  auto delegate = JobDelegate(*spec, t.row);
  if (!delegate) return delegate.error();
  t.delegate = std::move(*delegate);
  if (auto r = CheckSame("model", t.row.model_path, t.row.model_sha256, o.run_id); !r) {
    return r.error();
  }
  auto runner = JobRunnerPath(*spec, sweep, t.row);
  if (!runner) return runner.error();
  t.runner_path = std::move(*runner);
  return t;
}

// An open device with the job's files pushed.
struct Device {
  std::unique_ptr<DeviceSession> session;
  agent::JobSpec base;  // the job's wire form, without the node range
  bool layers = false;  // the agent takes accuracy_reference "layers"
};

Result<Device> OpenDevice(const Target& t, const CulpritOptions& o, DeviceProvider& devices) {
  Device d;
  auto session = devices.Open(t.row.device);
  if (!session) return session.error();
  d.session = std::move(*session);
  agent::AgentClient& client = d.session->client();
  const std::string& device = t.row.device;
  auto push = [&](const std::string& noun, const std::string& path,
                  std::string* sha) -> Result<void> {
    if (auto sent = client.PutArtifact(path, sha); !sent) {
      return MakeError("cannot push " + noun + " '" + path + "' to device '" + device +
                       "': " + sent.message());
    }
    return Ok();
  };
  const std::vector<std::string>& features = client.device().features;
  const std::string plugin = t.delegate.PluginPath();
  SweepJob needs;  // what these runs ask of the agent: its plugin and runner
  needs.plugin_sha256 = plugin.empty() ? "" : "plugin";
  if (auto r = CheckDeviceTakesJob(features, device, needs, t.runner_path); !r) return r.error();
  std::string model_sha, plugin_sha;
  if (auto r = push("runner", t.runner_path, &d.base.runner_sha256); !r) return r.error();
  if (auto r = push("model", t.row.model_path, &model_sha); !r) return r.error();
  if (!plugin.empty()) {
    if (auto r = push("delegate plugin", plugin, &plugin_sha); !r) return r.error();
  }
  d.layers = agent::HasFeature(features, agent::kFeatureLayerErrors);
  d.base.model_sha256 = model_sha;
  d.base.delegate = t.delegate.name;
  d.base.plugin_sha256 = plugin_sha;
  d.base.num_threads = std::max<uint32_t>(1, static_cast<uint32_t>(t.row.num_threads));
  d.base.warmup_runs = 0;
  d.base.num_runs = o.num_runs;
  d.base.timeout_ms = 120 * 1000;
  return d;
}

// Whether one output of a run fails the thresholds.
bool Fails(const runner_json::OutputAccuracy& a, const CulpritOptions& o) {
  if (a.nan_count + a.inf_count > a.reference_nan_count + a.reference_inf_count) return true;
  if (a.max_abs_error_lsb) return runner_json::ToDouble(*a.max_abs_error_lsb) > o.max_abs_error_lsb;
  return !(a.max_abs_error <= o.max_abs_error);
}

// Runs the job delegating nodes 0..last only; the step and, with `layers`,
// the run's per-layer profile.
Result<CulpritStep> RunStep(const Target& t, const CulpritOptions& o, Device& d, int64_t last,
                            std::vector<runner_json::LayerError>* layers) {
  DelegateSpec delegate = t.delegate;
  delegate.options["first_delegate_node_index"] = "0";
  delegate.options["last_delegate_node_index"] = std::to_string(last);
  agent::JobSpec job = d.base;
  job.delegate_options = delegate.AgentOptionsString();
  job.accuracy_reference = d.layers ? "layers" : "cpu";
  auto result = d.session->client().RunJob(job);
  if (!result) {
    return MakeError("device '" + t.row.device + "': " + result.message());
  }
  const std::string where = "the run delegating nodes up to " + std::to_string(last);
  if (result->status != "ok") {
    return MakeError(where + " ended " + result->status + ": " + result->error);
  }
  auto doc = runner_json::ParseRunnerJson(result->runner_json);
  if (!doc) return MakeError(where + ": " + doc.message());
  if (!doc->accuracy) return MakeError(where + " reported no accuracy");
  CulpritStep step;
  step.last_node = last;
  if (doc->placement) {
    for (const auto& n : doc->placement->nodes) step.delegated += n.delegate != "cpu";
  }
  for (const runner_json::OutputAccuracy& a : doc->accuracy->outputs) {
    step.max_abs_error = std::max(step.max_abs_error, a.max_abs_error);
    step.fails = step.fails || Fails(a, o);
  }
  if (layers != nullptr) *layers = std::move(doc->accuracy->layers);
  return step;
}

void Note(const SweepOptions& sweep, const std::string& line) {
  if (sweep.progress != nullptr) *sweep.progress << "culprit: " << line << "\n";
}

}  // namespace

Result<CulpritResult> FindCulprit(const CulpritOptions& options, store::Store& store,
                                  DeviceProvider& devices, const SweepOptions& sweep) {
  auto target = LoadTarget(options, store, sweep);
  if (!target) return target.error();
  const Target& t = *target;
  auto device = OpenDevice(t, options, devices);
  if (!device) return device.error();
  CulpritResult out;
  out.run_id = options.run_id;
  out.job_id = options.job_id;
  out.model = t.row.model;
  out.delegate = t.row.delegate;
  out.device = t.row.device;
  out.candidates = static_cast<int64_t>(t.candidates.size());
  const std::vector<int64_t>& c = t.candidates;
  // Invariant: delegating c[0..hi] fails, c[0..lo] passes (lo = -1: none).
  std::map<int64_t, std::vector<runner_json::LayerError>> layers;  // by candidate position
  auto step = [&](int64_t k) -> Result<bool> {
    auto s = RunStep(t, options, *device, c[k], &layers[k]);
    if (!s) return s.error();
    Note(sweep, "nodes up to " + std::to_string(c[k]) + ": max abs error " +
                    std::to_string(s->max_abs_error) + (s->fails ? " (fails)" : " (passes)"));
    out.steps.push_back(*s);
    return s->fails;
  };
  int64_t lo = -1, hi = static_cast<int64_t>(c.size()) - 1;
  auto all = step(hi);
  if (!all) return all.error();
  if (!*all) {
    out.note = "the outputs pass with all " + std::to_string(c.size()) +
               " delegated nodes: nothing to find";
    return out;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    auto fails = step(mid);
    if (!fails) return fails.error();
    (*fails ? hi : lo) = mid;
  }
  out.node = c[hi];
  out.layers = std::move(layers[hi]);
  out.op = t.ops.count(c[hi]) ? t.ops.at(c[hi]) : "";
  return out;
}

}  // namespace dfarm::harness
