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
// sets, in set order), prepared once per sweep. With `eval_errors`, a model
// with an "eval" whose images cannot be prepared (one that cannot be decoded)
// is left out and its error kept there (model path -> message) instead of
// failing the call.
using ModelInputSets = std::map<std::string, std::vector<PreparedInputSet>>;
Result<ModelInputSets> PrepareModelInputs(
    const SweepSpec& spec, const SweepOptions& options,
    std::map<std::string, std::string>* eval_errors = nullptr);

// Records `job` (stored, unclaimed), whose model's labelled data could not be
// loaded (ModelSpec::data_error), as ended model_error with that message.
Result<void> RecordDataError(store::Store& store, const SweepJob& job);

// One line per model of `jobs` whose labelled data failed to load, to `out`
// (when set): the error and that its jobs are recorded model_error.
void NoteDataErrors(const std::vector<SweepJob>& jobs, std::ostream* out);

// Gives `job` its model's error from PrepareModelInputs' `eval_errors`, if
// any, as its ModelSpec::data_error.
void MarkEvalError(const std::map<std::string, std::string>& eval_errors, SweepJob* job);

// Gives `job` the input sets of its model (none when the model has none);
// its key is left as it is.
void AttachInputSets(const ModelInputSets& sets, SweepJob* job);

}  // namespace dfarm::harness
