// Latency statistics and memory figures of a runner job (the values are
// runner_values.h's LatencyStats and Metrics).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "agent/runner/runner_values.h"

namespace dfarm::runner {

// All zero for no samples.
LatencyStats ComputeLatencyStats(std::span<const double> samples_us);

// p in [0, 100] of ascending `sorted`; 0 when empty.
double Percentile(std::span<const double> sorted, double p);

// The process's peak resident set (VmHWM of /proc/self/status), when known.
std::optional<uint64_t> PeakRssBytes();

}  // namespace dfarm::runner
