// Latency statistics and memory figures of a runner job (the values are
// runner_values.h's LatencyStats and Metrics).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "agent/runner/runner_values.h"

namespace dfarm::runner {

// All zero for no samples.
LatencyStats ComputeLatencyStats(std::span<const double> samples_us);

// p in [0, 100] of ascending `sorted`; 0 when empty.
double Percentile(std::span<const double> sorted, double p);

// benchmark_model's summary line, from our metrics, so scripts that parse
// TensorFlow Lite's tool read ours: "Inference timings in us: Init: X, First
// inference: Y, Warmup (avg): Z, Inference (avg): W". Init and First
// inference are whole microseconds (benchmark_model's are integers); the
// averages are written as a C++ stream writes a double (6 significant digits),
// as benchmark_model does.
std::string BenchmarkTimingsLine(const Metrics& m);

// The process's peak resident set (VmHWM of /proc/self/status), when known.
std::optional<uint64_t> PeakRssBytes();

}  // namespace dfarm::runner
