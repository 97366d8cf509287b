// Latency statistics and memory figures of a runner job.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace dfarm::runner {

struct LatencyStats {
  double mean_us = 0;
  double std_us = 0;  // sample standard deviation (n - 1); 0 for one sample
  double min_us = 0;
  double max_us = 0;
  // Percentiles by linear interpolation between the closest ranks (like
  // numpy.percentile's default), so p50 of an even count is the midpoint.
  double p50_us = 0;
  double p90_us = 0;
  double p99_us = 0;
};

// All zero for no samples.
LatencyStats ComputeLatencyStats(std::span<const double> samples_us);

// p in [0, 100] of ascending `sorted`; 0 when empty.
double Percentile(std::span<const double> sorted, double p);

// The process's peak resident set (VmHWM of /proc/self/status), when known.
std::optional<uint64_t> PeakRssBytes();

}  // namespace dfarm::runner
