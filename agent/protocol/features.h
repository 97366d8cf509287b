// Feature names of the agent protocol (agent/protocol/PROTOCOL.md, "Versioning and
// features"). Free of the FlatBuffers schema, so host code that only looks at
// DeviceInfo::features (the harness) needs nothing else of the protocol.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace dfarm::agent {

// Named features, negotiated at hello: each side lists what it speaks and
// the session uses the intersection. Unknown names are ignored.
inline constexpr std::string_view kFeatureArtifacts = "artifacts";  // Have/Put*
inline constexpr std::string_view kFeatureRunJob = "run_job";       // RunJob/JobResult
// AuthProof/AuthReply after hello. The agent lists it only when it requires a
// token; the host lists it always.
inline constexpr std::string_view kFeatureAuthHmac = "auth_hmac";
inline constexpr std::string_view kFeatureHeartbeat = "heartbeat";   // Ping/Pong both ways
inline constexpr std::string_view kFeaturePutResume = "put_resume";  // PutBeginReply{offset}
// RunJob.plugin_sha256: the agent turns a stored plugin artifact into the
// runner's `path:` delegate option. A host sends the field only to an agent
// that lists this feature (an older agent would drop it silently).
inline constexpr std::string_view kFeaturePlugin = "plugin";
// CancelJob{job_request_id}: the host stops a running job.
inline constexpr std::string_view kFeatureCancel = "cancel";
// JobProgress{phase, elapsed_ms} frames while a job runs.
inline constexpr std::string_view kFeatureProgress = "progress";
// DeviceStateRequest/DeviceStateReply: the device's state on demand (cooldown).
inline constexpr std::string_view kFeatureDeviceState = "device_state";
// RunJob.input_sets: the agent unpacks packed input-set artifacts and runs the
// runner over each (--inputs per set). A host sends the field only to an
// agent that lists this feature (an older agent would drop it silently and
// measure random inputs).
inline constexpr std::string_view kFeatureInputs = "inputs";
// Runner builds may be bundles (agent/protocol/bundle.h): the agent unpacks
// one and runs its program through its loader. A host pushes a bundle only
// to an agent that lists this feature (an older one would exec the archive).
inline constexpr std::string_view kFeatureBundles = "bundles";
// RunJob.runner_kind (agent/protocol/runner_kinds.h): runners of other
// command-line contracts (Google's benchmark_model, inference_diff).
inline constexpr std::string_view kFeatureRunnerKinds = "runner_kinds";
// RunJob.profile: runners of kind "dfarm" also profile each step (--profile).
// A host sends it only to an agent that lists this feature (an older agent
// would drop it silently and the job would have no profile).
inline constexpr std::string_view kFeatureProfile = "profile";
// RunJob.accuracy_reference "layers": the runner also compares every layer
// (--accuracy-reference layers, the culprit finder's). A host sends it only to
// an agent that lists this feature (an older agent refuses the job).
inline constexpr std::string_view kFeatureLayerErrors = "layer_errors";
// RunJob.cpu_affinity: the agent pins the runner to those CPUs. A host sends
// it only to an agent that lists this feature (an older one would drop it
// and run the job unpinned).
inline constexpr std::string_view kFeatureCpuAffinity = "cpu_affinity";
// RunJob.sustained_ms: sustained mode. A host sends it only to an agent that
// lists this feature (an older one would drop it and run num_runs runs).
inline constexpr std::string_view kFeatureSustained = "sustained";
// RunJob.task_outputs: the runner lists each input set's top classes
// (--task-outputs) for task accuracy. A host sends it only to an agent that
// lists this feature (an older one would drop it: no task accuracy).
inline constexpr std::string_view kFeatureTaskOutputs = "task_outputs";
// RunJob.partner_runner_sha256: stepped pairs (dfarm-runner --partner-runner).
// A host sends it only to an agent that lists this feature (an older one
// would drop it and run the runner alone). An agent that starts its runners
// through --runner-prefix does not list it.
inline constexpr std::string_view kFeatureSteppedPairs = "stepped_pairs";
inline constexpr std::string_view kKnownFeatures[] = {
    kFeatureArtifacts,   kFeatureRunJob,      kFeatureAuthHmac,    kFeatureHeartbeat,
    kFeaturePutResume,   kFeaturePlugin,      kFeatureCancel,      kFeatureProgress,
    kFeatureDeviceState, kFeatureInputs,      kFeatureBundles,     kFeatureRunnerKinds,
    kFeatureProfile,     kFeatureLayerErrors, kFeatureCpuAffinity, kFeatureSustained,
    kFeatureTaskOutputs, kFeatureSteppedPairs};

// Whether `features` (one side's list from hello) names `feature`.
inline bool HasFeature(const std::vector<std::string>& features, std::string_view feature) {
  return std::find(features.begin(), features.end(), feature) != features.end();
}

}  // namespace dfarm::agent
