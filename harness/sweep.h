// A sweep: expand the spec into jobs, record them in the store, run them on
// their devices one at a time and record each result the moment it arrives.
#pragma once

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "agent/result.h"
#include "harness/devices.h"
#include "harness/spec.h"
#include "harness/store/store.h"

namespace dfarm::harness {

struct SweepOptions {
  std::string runner_path;                    // the dfarm-runner build pushed to every device
  std::ostream* progress = nullptr;           // one line per job when set (borrowed)
  const std::atomic<bool>* cancel = nullptr;  // checked between jobs when set (borrowed)
};

struct SweepSummary {
  int64_t run_id = 0;
  std::string status;  // the run's final status (store::kRun*)
  size_t jobs = 0;
  size_t ok = 0;
  size_t failed = 0;   // ended in any status but ok
  size_t not_run = 0;  // left queued because the sweep was cancelled
  uint64_t bytes_pushed = 0;
};

// Runs `spec` and records it in `store`. Device trouble does not fail the
// call: it is recorded as jobs with status infra (and the run as failed when
// no device could be reached at all). Errors are for what stops the sweep
// from being recorded: unreadable models or runner, or a store failure.
Result<SweepSummary> RunSweep(const SweepSpec& spec, store::Store& store, DeviceProvider& devices,
                              const SweepOptions& options);

// The runner's --json document (docs/CONTRACTS.md): metrics and samples when
// present. Fails with a message when the text is not a JSON object.
struct RunnerOutput {
  std::string status;
  std::string error;
  std::optional<store::Metrics> metrics;
  std::vector<double> samples_us;
};
Result<RunnerOutput> ParseRunnerJson(const std::string& text);

}  // namespace dfarm::harness
