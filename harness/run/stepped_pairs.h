// A paired sweep's pair as one stepped pair (agent/runner/stepped_pair.h):
// the pair's first job drives (its runner build gets --partner-runner), the
// second's build is its partner, and the agent's one JobResult is split back
// into one result per job, each recorded under its own job as before. Pairs
// that cannot step run back to back, as two jobs (docs/gate.md, "Paired A/B").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/protocol/types.h"
#include "harness/spec/matrix.h"

namespace dfarm::harness {

// Why `first` and `second` (one pair, in the order they would run) cannot run
// as one stepped pair on a device whose agent has `features`, with runner
// builds `first_path` and `second_path`; "" when they can.
std::string SteppedPairRefusal(const std::vector<std::string>& features, const SweepJob& first,
                               const SweepJob& second, const std::string& first_path,
                               const std::string& second_path);

// The seed of a stepped pair's order of runs: the spec's order_seed and the pair.
uint32_t SteppedPairSeed(const SweepJob& first);

// One stepped pair's JobResult split into the driver's and the partner's.
struct SteppedResults {
  // The driver's: the agent's result with "partner" taken out of its document.
  agent::JobResult driver;
  // The partner's, when it ran beside the driver to the end: its document,
  // classified as the agent classifies a runner's (its status's job class),
  // with the driver's process facts (device state, wall time, stderr).
  std::optional<agent::JobResult> partner;
  // Unset partner: why ("the driver failed: ...", the driver's
  // steps.partner_error, ...).
  std::string partner_missing;
};
SteppedResults SplitSteppedResult(const agent::JobResult& result);

}  // namespace dfarm::harness
