// Pieces of a sweep that the sweep on this host (sweep.cc) and the sweep on a
// farm's queue (queue_sweep.cc) share. Internal to harness/.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/run/sweep.h"
#include "harness/spec/input_sets.h"
#include "harness/spec/matrix.h"
#include "harness/spec/spec.h"
#include "reports/store/store.h"

namespace dfarm::harness {

// A planned job as the store keeps it (the store gives it its id).
store::JobRow ToJobRow(const SweepJob& job);

// Fails when the sweep runs the default runner (`spec` names no "runners")
// and options.runner_path cannot be read.
Result<void> CheckDefaultRunner(const SweepSpec& spec, const SweepOptions& options);

// The whole-run counts of a summary, from the run's jobs as stored.
SweepSummary CountJobs(int64_t run_id, const std::vector<store::JobRow>& rows);

// The packed input sets of each model of the spec with "inputs" (model path ->
// sets, in set order), prepared once per sweep.
using ModelInputSets = std::map<std::string, std::vector<PreparedInputSet>>;
Result<ModelInputSets> PrepareModelInputs(const SweepSpec& spec, const SweepOptions& options);

// Gives `job` the input sets of its model (none when the model has none);
// its key is left as it is.
void AttachInputSets(const ModelInputSets& sets, SweepJob* job);

}  // namespace dfarm::harness
