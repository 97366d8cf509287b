// Sustained mode (--sustained-secs): the measured runs over a fixed
// time and their latency curve in windows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "agent/runner/metrics.h"
#include "agent/runner/runner.h"

namespace dfarm::runner {
namespace {

using Clock = std::chrono::steady_clock;

// About this many windows over the run, each at least kMinWindowMs long.
constexpr double kTargetWindows = 120;
constexpr double kMinWindowMs = 100;

// The runs that started in one window.
class WindowBuilder {
 public:
  explicit WindowBuilder(double window_ms) : window_ms_(window_ms) {}

  // A run that started `t_ms` after the first one and took `us`.
  void Add(double t_ms, double us, std::vector<SustainedWindow>* out) {
    const double index = std::floor(t_ms / window_ms_);
    if (!samples_.empty() && index != index_) Flush(out);
    index_ = index;
    samples_.push_back(us);
  }

  void Flush(std::vector<SustainedWindow>* out) {
    if (samples_.empty()) return;
    const LatencyStats stats = ComputeLatencyStats(samples_);
    out->push_back(SustainedWindow{index_ * window_ms_, static_cast<int64_t>(samples_.size()),
                                   stats.mean_us, stats.p50_us, stats.max_us});
    samples_.clear();
  }

 private:
  double window_ms_;
  double index_ = 0;
  std::vector<double> samples_;
};

// Exact mean, std (n - 1), min and max over every run (Welford).
class RunningStats {
 public:
  void Add(double us) {
    ++n_;
    const double delta = us - mean_;
    mean_ += delta / static_cast<double>(n_);
    m2_ += delta * (us - mean_);
    min_ = n_ == 1 ? us : std::min(min_, us);
    max_ = n_ == 1 ? us : std::max(max_, us);
  }
  void Into(Metrics* m) const {
    m->mean_us = mean_;
    m->std_us = n_ > 1 ? std::sqrt(m2_ / static_cast<double>(n_ - 1)) : 0;
    m->min_us = min_;
    m->max_us = max_;
    m->num_runs = n_;
  }

 private:
  int64_t n_ = 0;
  double mean_ = 0;
  double m2_ = 0;
  double min_ = 0;
  double max_ = 0;
};

}  // namespace

bool MeasureSustained(double secs, const std::function<bool(double*)>& timed, RunOutcome* outcome) {
  JobSustained curve;
  curve.secs = secs;
  curve.window_ms = std::max(kMinWindowMs, secs * 1000.0 / kTargetWindows);
  WindowBuilder windows(curve.window_ms);
  RunningStats all;
  std::vector<double>& kept = outcome->samples_us;
  size_t stride = 1;  // keep runs 0, stride, 2*stride, ...
  int64_t run = 0;
  const Clock::time_point start = Clock::now();
  const std::chrono::duration<double> duration(secs);
  do {
    const double t_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    double us = 0;
    if (!timed(&us)) return false;
    windows.Add(t_ms, us, &curve.windows);
    all.Add(us);
    if (run % static_cast<int64_t>(stride) == 0) kept.push_back(us);
    ++run;
    if (kept.size() >= kMaxSustainedSamples) {
      // Every other kept run: the sample still spans the whole time.
      size_t w = 0;
      for (size_t i = 0; i < kept.size(); i += 2) kept[w++] = kept[i];
      kept.resize(w);
      stride *= 2;
    }
  } while (Clock::now() - start < duration);
  windows.Flush(&curve.windows);
  Metrics& m = outcome->metrics;
  static_cast<LatencyStats&>(m) = ComputeLatencyStats(kept);
  all.Into(&m);
  outcome->sustained = std::move(curve);
  return true;
}

}  // namespace dfarm::runner
