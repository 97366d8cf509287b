#include "agent/runner/metrics.h"

#include <gtest/gtest.h>

#include <vector>

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
