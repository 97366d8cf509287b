#include "harness/run/job_features.h"

#include "agent/protocol/bundle.h"
#include "agent/protocol/features.h"
#include "agent/protocol/runner_kinds.h"

namespace dfarm::harness {
namespace {

std::string RunnerKind(const SweepJob& job, const std::string&) {
  return agent::SpeaksRunnerContract(job.runner_kind)
             ? ""
             : "run runners of kind '" + job.runner_kind + "'";
}

std::string Bundle(const SweepJob&, const std::string& runner_path) {
  return agent::IsBundleFile(runner_path) ? "run the runner bundle '" + runner_path + "'" : "";
}

std::string Profile(const SweepJob& job, const std::string&) {
  return job.benchmark.profile ? "profile jobs" : "";
}

std::string Affinity(const SweepJob& job, const std::string&) {
  return job.benchmark.cpu_affinity.empty() ? "" : "pin runners to CPUs";
}

std::string Sustained(const SweepJob& job, const std::string&) {
  return job.benchmark.sustained_s > 0 ? "run jobs in sustained mode" : "";
}

std::string TaskOutputs(const SweepJob& job, const std::string&) {
  return job.model.eval ? "score task accuracy on a labelled set" : "";
}

std::string Plugin(const SweepJob& job, const std::string&) {
  return job.plugin_sha256.empty() ? "" : "load external delegate plugins";
}

}  // namespace

const std::vector<JobFeatureNeed>& JobFeatureNeeds() {
  static const std::vector<JobFeatureNeed> needs = {
      {agent::kFeatureRunnerKinds, RunnerKind, ""},
      {agent::kFeatureBundles, Bundle, ""},
      {agent::kFeatureProfile, Profile, "benchmark.profile"},
      {agent::kFeatureCpuAffinity, Affinity, "benchmark.cpu_affinity"},
      {agent::kFeatureSustained, Sustained, "benchmark.sustained_s"},
      {agent::kFeatureTaskOutputs, TaskOutputs, "models[].eval"},
      {agent::kFeaturePlugin, Plugin, ""},
  };
  return needs;
}

Result<void> CheckDeviceTakesJob(const std::vector<std::string>& features,
                                 const std::string& device, const SweepJob& job,
                                 const std::string& runner_path) {
  for (const JobFeatureNeed& need : JobFeatureNeeds()) {
    if (agent::HasFeature(features, need.feature)) continue;
    const std::string cannot = need.cannot(job, runner_path);
    if (cannot.empty()) continue;
    std::string message = "device '" + device + "': its dfarm-agent does not speak feature '" +
                          std::string(need.feature) + "', so it cannot " + cannot;
    if (need.spec_key.empty()) {
      message += " (update dfarm-agent there)";
    } else {
      const std::string key(need.spec_key);
      message += " (spec " + key + "): update dfarm-agent there, or leave out " + key;
    }
    return MakeError(message);
  }
  return Ok();
}

}  // namespace dfarm::harness
