#include "agent/runner/metrics.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace dfarm::runner {

double Percentile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

std::string BenchmarkTimingsLine(const Metrics& m) {
  std::ostringstream line;
  line << "Inference timings in us: Init: " << std::llround(m.init_us)
       << ", First inference: " << std::llround(m.first_us)
       << ", Warmup (avg): " << m.warmup_mean_us << ", Inference (avg): " << m.mean_us;
  return line.str();
}

LatencyStats ComputeLatencyStats(std::span<const double> samples_us) {
  LatencyStats s;
  if (samples_us.empty()) return s;
  std::vector<double> sorted(samples_us.begin(), samples_us.end());
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  s.mean_us = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;
  if (sorted.size() > 1) {
    double sq = 0;
    for (double v : sorted) sq += (v - s.mean_us) * (v - s.mean_us);
    s.std_us = std::sqrt(sq / (n - 1));
  }
  s.min_us = sorted.front();
  s.max_us = sorted.back();
  s.p50_us = Percentile(sorted, 50);
  s.p90_us = Percentile(sorted, 90);
  s.p99_us = Percentile(sorted, 99);
  return s;
}

std::optional<uint64_t> PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      try {
        return static_cast<uint64_t>(std::stoull(line.substr(6))) * 1024;  // reported in kB
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

}  // namespace dfarm::runner
