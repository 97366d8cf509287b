#include "harness/run/runner_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace dfarm::harness {
namespace {

using ::testing::HasSubstr;

const std::string kSha(64, 'a');

// An ok report of 3 runs of model kSha, as dfarm-runner writes one.
RunnerOutput Report() {
  auto r = ParseRunnerJson(R"({"status":"ok","model":")" + kSha + R"(",
      "metrics":{"init_us":100,"first_us":2000,"warmup_mean_us":1500,"mean_us":1234.5,
                 "std_us":10,"min_us":1200,"max_us":1300,"p50_us":1230,"p90_us":1280,
                 "p99_us":1299,"num_runs":3,"peak_rss_bytes":1048576,"arena_bytes":4096},
      "samples_us":[1200,1230,1300]})");
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : RunnerOutput{};
}

RunnerExpectation Job() {
  RunnerExpectation job;
  job.num_runs = 3;
  job.model_file = "face.tflite";
  job.model_sha256 = kSha;
  return job;
}

TEST(ImplausibleReportTest, AnHonestReportPasses) {
  EXPECT_EQ(ImplausibleReport(Report(), Job()), "");
  RunnerOutput named = Report();
  named.model = "face.tflite";  // a runner given the user's file
  EXPECT_EQ(ImplausibleReport(named, Job()), "");
  RunnerOutput unnamed = Report();
  unnamed.model.clear();  // a runner that names no model
  EXPECT_EQ(ImplausibleReport(unnamed, Job()), "");
  // More runs than asked (dfarm-runner --min-secs) are possible.
  RunnerOutput more = Report();
  more.metrics->num_runs = 4;
  more.samples_us.push_back(1250);
  EXPECT_EQ(ImplausibleReport(more, Job()), "");
}

TEST(ImplausibleReportTest, NegativeOrNonFiniteLatencyIsNamed) {
  RunnerOutput r = Report();
  r.metrics->mean_us = -5;
  EXPECT_EQ(ImplausibleReport(r, Job()), "metrics.mean_us is -5");
  r = Report();
  r.metrics->p99_us = std::numeric_limits<double>::infinity();
  EXPECT_EQ(ImplausibleReport(r, Job()), "metrics.p99_us is inf");
  r = Report();
  r.metrics->init_warm_us = -1;
  EXPECT_EQ(ImplausibleReport(r, Job()), "metrics.init_warm_us is -1");
  r = Report();
  r.samples_us[1] = -1230;
  EXPECT_EQ(ImplausibleReport(r, Job()), "samples_us[1] is -1230");
  r = Report();
  r.samples_us[2] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(ImplausibleReport(r, Job()), "samples_us[2] is nan");
}

TEST(ImplausibleReportTest, NegativeMemoryIsNamed) {
  RunnerOutput r = Report();
  r.metrics->peak_rss_bytes = -4096;
  EXPECT_EQ(ImplausibleReport(r, Job()), "metrics.peak_rss_bytes is -4096");
  r = Report();
  r.metrics->arena_bytes = -1;
  EXPECT_EQ(ImplausibleReport(r, Job()), "metrics.arena_bytes is -1");
}

TEST(ImplausibleReportTest, FewerRunsThanAskedAreNamed) {
  RunnerOutput r = Report();
  r.metrics->num_runs = 2;
  r.samples_us.pop_back();
  EXPECT_EQ(ImplausibleReport(r, Job()), "metrics.num_runs is 2, but the job asked for 3 runs");
  r = Report();
  r.samples_us.pop_back();
  EXPECT_EQ(ImplausibleReport(r, Job()), "samples_us holds 2 samples, but metrics.num_runs is 3");
  // Sustained mode: the runner's clock decides the count.
  RunnerExpectation sustained = Job();
  sustained.sustained = true;
  r = Report();
  r.metrics->num_runs = 1;
  EXPECT_EQ(ImplausibleReport(r, sustained), "");
}

TEST(ImplausibleReportTest, AnotherModelIsNamed) {
  RunnerOutput r = Report();
  r.model = "other.tflite";
  EXPECT_EQ(ImplausibleReport(r, Job()), "model is 'other.tflite', but the job ran 'face.tflite'");
}

// A tool's log (benchmark_model) may count other runs and name a copy of the
// model; its figures must still be possible.
TEST(ImplausibleReportTest, ToolRunnersAreCheckedOnlyForImpossibleFigures) {
  RunnerExpectation tool = Job();
  tool.kind = "benchmark_model";
  RunnerOutput r = Report();
  r.metrics->num_runs = 50;
  r.samples_us.clear();
  r.model = "/data/local/tmp/copy.tflite";
  EXPECT_EQ(ImplausibleReport(r, tool), "");
  r.metrics->min_us = -1;
  EXPECT_EQ(ImplausibleReport(r, tool), "metrics.min_us is -1");
}

}  // namespace
}  // namespace dfarm::harness
