// Runner kinds (docs/CONTRACTS.md, "Runner kinds"): which command-line
// contract a runner build speaks. The host sends a job's kind in
// RunJob.runner_kind (feature "runner_kinds"); the agent builds the runner's
// command line and reads its output by kind.
#pragma once

#include <string_view>

namespace dfarm::agent {

// Our dfarm-runner (the default; "" on the wire means it too).
inline constexpr std::string_view kRunnerKindDfarm = "dfarm";
// dfarm-tflite-runner: the same command line and --json document, on
// TensorFlow Lite's own C library (libtensorflowlite_c.so).
inline constexpr std::string_view kRunnerKindTflite = "tflite";
// Google's tools, brought by the user: their own flags (--graph=...,
// --num_threads=...) and their text log, which the host parses
// (harness/import/benchmark_log.h).
inline constexpr std::string_view kRunnerKindBenchmarkModel = "benchmark_model";
inline constexpr std::string_view kRunnerKindInferenceDiff = "inference_diff";

inline constexpr std::string_view kRunnerKinds[] = {
    kRunnerKindDfarm, kRunnerKindTflite, kRunnerKindBenchmarkModel, kRunnerKindInferenceDiff};

// Whether runners of `kind` take --profile (RunJob.profile, feature
// "profile"): dfarm-runner only ("" is its kind on the wire).
inline bool RunnerKindProfiles(std::string_view kind) {
  return kind.empty() || kind == kRunnerKindDfarm;
}

inline bool IsRunnerKind(std::string_view kind) {
  for (std::string_view k : kRunnerKinds) {
    if (k == kind) return true;
  }
  return false;
}

// Delegates Google's tools have flags for beyond ours (--use_gpu,
// --use_nnapi, --use_hexagon): a spec may name them when one of its runners
// is a tool kind. Our runners report them unsupported.
inline constexpr std::string_view kToolDelegateNames[] = {"gpu", "nnapi", "hexagon"};

inline bool IsToolDelegateName(std::string_view name) {
  for (std::string_view d : kToolDelegateNames) {
    if (d == name) return true;
  }
  return false;
}

// True for kinds that take dfarm-runner's command line and print its --json
// document (dfarm, tflite, and "" for dfarm).
inline bool SpeaksRunnerContract(std::string_view kind) {
  return kind.empty() || kind == kRunnerKindDfarm || kind == kRunnerKindTflite;
}

}  // namespace dfarm::agent
