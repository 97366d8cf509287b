// The culprit finder (`dfarm culprit RUN --job ID`): which node's delegation
// pushes a job's outputs past a threshold. It runs the job's model again on
// the job's device with its delegate restricted to the first k of the nodes
// the job delegated (the partition options first_delegate_node_index /
// last_delegate_node_index, so any delegate, external plugins included), and
// bisects over k: about log2(N) runs for N delegated nodes. The run at the
// culprit also compares every layer with the CPU reference (the runner's
// --accuracy-reference layers), the per-layer error profile.
//
// Nothing is recorded in the store: the runs are the finder's evidence only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/runner/runner_json.h"
#include "harness/devices/devices.h"
#include "harness/run/sweep.h"
#include "reports/store/store.h"

namespace dfarm::harness {

struct CulpritOptions {
  int64_t run_id = 0;
  int64_t job_id = 0;
  // An output "fails" when its max_abs_error exceeds max_abs_error, or, for a
  // quantized output (max_abs_error_lsb reported), when that exceeds
  // max_abs_error_lsb; NaN/Inf only on the delegate's side fail too. The
  // defaults are the release gate's (reports/gate/policy.cc DefaultPolicy).
  double max_abs_error = 2e-3;
  double max_abs_error_lsb = 2;
  // The runs' measured runs (1 is enough: only the outputs matter).
  uint32_t num_runs = 1;
};

// One run of the bisection: the delegate restricted to nodes 0..last_node.
struct CulpritStep {
  int64_t last_node = 0;
  int64_t delegated = 0;     // nodes the run delegated (its placement)
  double max_abs_error = 0;  // the worst output's
  bool fails = false;
};

struct CulpritResult {
  int64_t run_id = 0;
  int64_t job_id = 0;
  std::string model, delegate, device;
  int64_t candidates = 0;  // nodes the job delegated
  // The first node (in execution order) whose delegation makes an output
  // fail, and its op; unset when the job's outputs pass with every node
  // delegated (then `note` says so).
  std::optional<int64_t> node;
  std::string op;
  std::string note;
  std::vector<CulpritStep> steps;  // in the order run; runs = steps.size()
  // The per-layer error profile of the run delegating up to the culprit
  // (empty when the agent lacks feature layer_errors, or no culprit).
  std::vector<runner_json::LayerError> layers;
};

// Finds the culprit of job `options.job_id` of run `options.run_id` (read
// from `store`: the run's spec, the job's model, delegate, device, runner
// build and placement) on its device through `devices`. `sweep` gives the
// default runner builds (SweepOptions::runner_path); progress lines go to
// sweep.progress when set. Errors: no such run or job, a cpu job or one
// with no delegated node, a model, plugin or runner build that changed since
// the run, the device unreachable, a run that did not end ok.
Result<CulpritResult> FindCulprit(const CulpritOptions& options, store::Store& store,
                                  DeviceProvider& devices, const SweepOptions& sweep);

}  // namespace dfarm::harness
