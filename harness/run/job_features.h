// The agent features a job needs, one row each: a job whose device's agent
// lacks one (an older dfarm-agent) is refused before anything is pushed,
// naming the device, the feature and what to do, and recorded `infra` (no
// retry; the device still serves other jobs). The features are the agent's
// hello (agent/protocol/features.h, PROTOCOL.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/base/result.h"
#include "harness/spec/matrix.h"  // SweepJob

namespace dfarm::harness {

struct JobFeatureNeed {
  std::string_view feature;
  // What a device without the feature cannot do for `job` (run on the build
  // at runner_path); "" when the job does not need it.
  std::string (*cannot)(const SweepJob& job, const std::string& runner_path);
  // The spec key that asks for it, for the advice to leave it out; "" when
  // the job's runner or delegate needs it.
  std::string_view spec_key;
};

// Every feature a job may need, in the order they are checked.
const std::vector<JobFeatureNeed>& JobFeatureNeeds();

// Fails with the first need of `job` the agent's `features` lack: "device
// 'D': its dfarm-agent does not speak feature 'F', so it cannot ... (update
// dfarm-agent there)", or with a spec key "... (spec K): update dfarm-agent
// there, or leave out K".
Result<void> CheckDeviceTakesJob(const std::vector<std::string>& features,
                                 const std::string& device, const SweepJob& job,
                                 const std::string& runner_path);

}  // namespace dfarm::harness
