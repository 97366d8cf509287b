#include "agent/runner/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "agent/runner/runner.h"

namespace dfarm::runner {
namespace {

TEST(MetricsTest, Statistics) {
  std::vector<double> samples = {40, 10, 30, 20};
  LatencyStats s = ComputeLatencyStats(samples);
  EXPECT_DOUBLE_EQ(s.mean_us, 25);
  EXPECT_NEAR(s.std_us, 12.909944, 1e-5);  // sample std of 10,20,30,40
  EXPECT_DOUBLE_EQ(s.min_us, 10);
  EXPECT_DOUBLE_EQ(s.max_us, 40);
  EXPECT_DOUBLE_EQ(s.p50_us, 25);
  EXPECT_DOUBLE_EQ(s.p90_us, 37);
  EXPECT_DOUBLE_EQ(s.p99_us, 39.7);
}

TEST(MetricsTest, OneAndNoSamples) {
  std::vector<double> one = {7};
  LatencyStats s = ComputeLatencyStats(one);
  EXPECT_DOUBLE_EQ(s.mean_us, 7);
  EXPECT_DOUBLE_EQ(s.std_us, 0);
  EXPECT_DOUBLE_EQ(s.p99_us, 7);
  EXPECT_DOUBLE_EQ(ComputeLatencyStats({}).mean_us, 0);
}

TEST(MetricsTest, PeakRssIsKnownOnLinux) {
  std::optional<uint64_t> rss = PeakRssBytes();
  ASSERT_TRUE(rss.has_value());
  EXPECT_GT(*rss, 1024u * 1024u);
}

}  // namespace
}  // namespace dfarm::runner

namespace dfarm::runner {
namespace {

// Sustained mode over an instant "model": hundreds of thousands of runs, so
// the kept samples are thinned; every run lands in one window.
TEST(SustainedTest, WindowsCoverEveryRunAndSamplesAreThinned) {
  int64_t runs = 0;
  auto timed = [&](double* us) {
    *us = static_cast<double>(100 + (runs++ % 7));
    return true;
  };
  RunOutcome outcome;
  ASSERT_TRUE(MeasureSustained(0.3, timed, &outcome));
  ASSERT_TRUE(outcome.sustained.has_value());
  const JobSustained& s = *outcome.sustained;
  EXPECT_DOUBLE_EQ(s.secs, 0.3);
  EXPECT_DOUBLE_EQ(s.window_ms, 100);  // the shortest window
  ASSERT_GE(s.windows.size(), 3u);
  int64_t in_windows = 0;
  double last_t = -1;
  for (const SustainedWindow& w : s.windows) {
    EXPECT_GT(w.t_ms, last_t);
    EXPECT_DOUBLE_EQ(std::fmod(w.t_ms, 100), 0);
    EXPECT_GE(w.p50_us, 100);
    EXPECT_LE(w.max_us, 106);
    last_t = w.t_ms;
    in_windows += w.runs;
  }
  EXPECT_EQ(in_windows, runs);
  EXPECT_EQ(outcome.metrics.num_runs, runs);
  ASSERT_GT(runs, static_cast<int64_t>(kMaxSustainedSamples)) << "too slow to thin";
  EXPECT_LT(outcome.samples_us.size(), kMaxSustainedSamples);
  EXPECT_GE(outcome.samples_us.size(), kMaxSustainedSamples / 2);
  EXPECT_DOUBLE_EQ(outcome.metrics.min_us, 100);
  EXPECT_DOUBLE_EQ(outcome.metrics.max_us, 106);
  EXPECT_NEAR(outcome.metrics.mean_us, 103, 0.01);
}

TEST(SustainedTest, AFailedRunEndsIt) {
  int calls = 0;
  auto timed = [&](double* us) {
    *us = 1;
    return ++calls < 5;
  };
  RunOutcome outcome;
  EXPECT_FALSE(MeasureSustained(10, timed, &outcome));
  EXPECT_EQ(calls, 5);
}

}  // namespace
}  // namespace dfarm::runner
