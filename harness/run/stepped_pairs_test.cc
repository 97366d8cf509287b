// Splitting a stepped pair's one result into its two jobs' results, and
// which pairs can step (stepped_pairs.h). The documents are written by the
// runner document's one writer (runner_json.h).
#include "harness/run/stepped_pairs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/protocol/features.h"
#include "agent/runner/runner_json.h"

namespace dfarm::harness {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

runner_json::Document OkDocument(const std::string& role, double sample_us) {
  runner_json::Document doc;
  doc.status = "ok";
  doc.model = "m.tflite";
  doc.delegate = "cpu";
  doc.metrics = runner::Metrics{};
  doc.metrics->num_runs = 2;
  doc.metrics->mean_us = sample_us;
  doc.samples_us = {sample_us, sample_us};
  doc.steps = runner::JobSteps{role, {10.0, 30.0}, "", 0, ""};
  if (role == "driver") {
    doc.steps->starts_us = {20.0, 40.0};
    doc.steps->order = "BABA";
    doc.steps->partner_steps = 2;
  }
  return doc;
}

agent::JobResult DriverResult(const runner_json::Document& driver) {
  agent::JobResult r;
  r.status = "ok";
  r.exit_code = 0;
  r.wall_ms = 12;
  r.stderr_tail = "tail";
  r.runner_json = runner_json::WriteRunnerJson(driver);
  return r;
}

TEST(SplitSteppedResultTest, OkPairGivesTwoResults) {
  runner_json::Document driver = OkDocument("driver", 100);
  driver.partner = runner_json::WriteRunnerJson(OkDocument("partner", 110));
  const SteppedResults split = SplitSteppedResult(DriverResult(driver));
  ASSERT_TRUE(split.partner.has_value()) << split.partner_missing;
  EXPECT_EQ(split.driver.status, "ok");
  EXPECT_FALSE(json::parse(split.driver.runner_json).contains("partner"));
  EXPECT_EQ(json::parse(split.driver.runner_json)["samples_us"][0], 100.0);
  EXPECT_EQ(split.partner->status, "ok");
  EXPECT_EQ(split.partner->exit_code, 0);
  EXPECT_EQ(split.partner->wall_ms, 12);
  const json partner = json::parse(split.partner->runner_json);
  EXPECT_EQ(partner["samples_us"][0], 110.0);
  EXPECT_EQ(partner["steps"]["role"], "partner");
}

TEST(SplitSteppedResultTest, PartnerFailureIsItsOwnStatus) {
  runner_json::Document driver = OkDocument("driver", 100);
  runner_json::Document partner;
  partner.status = "delegate_error";
  partner.error = "xnnpack: cannot create";
  driver.partner = runner_json::WriteRunnerJson(partner);
  const SteppedResults split = SplitSteppedResult(DriverResult(driver));
  ASSERT_TRUE(split.partner.has_value()) << split.partner_missing;
  EXPECT_EQ(split.partner->status, "delegate_error");
  EXPECT_EQ(split.partner->exit_code, 3);
  EXPECT_EQ(split.partner->error, "xnnpack: cannot create");
}

TEST(SplitSteppedResultTest, PartnersThatDidNotStepAreMissing) {
  runner_json::Document driver = OkDocument("driver", 100);
  driver.steps->partner_error = "partner runner ended before it was ready";
  driver.partner = runner_json::WriteRunnerJson(OkDocument("partner", 110));
  SteppedResults split = SplitSteppedResult(DriverResult(driver));
  EXPECT_FALSE(split.partner.has_value());
  EXPECT_EQ(split.partner_missing, "partner runner ended before it was ready");
  EXPECT_FALSE(json::parse(split.driver.runner_json).contains("partner"));

  // A driver that predates stepping prints no "steps".
  runner_json::Document old = OkDocument("driver", 100);
  old.steps.reset();
  split = SplitSteppedResult(DriverResult(old));
  EXPECT_FALSE(split.partner.has_value());
  EXPECT_THAT(split.partner_missing, HasSubstr("no stepped pair"));

  // A driver that failed: nothing of its partner.
  agent::JobResult failed;
  failed.status = "model_error";
  failed.error = "bad model";
  split = SplitSteppedResult(failed);
  EXPECT_FALSE(split.partner.has_value());
  EXPECT_EQ(split.partner_missing, "the driver ended model_error: bad model");
  EXPECT_EQ(split.driver.status, "model_error");
}

TEST(SteppedPairRefusalTest, OnlyPlainDfarmRunnersOnAnAgentThatSteps) {
  const std::vector<std::string> features = {std::string(agent::kFeatureRunJob),
                                             std::string(agent::kFeatureSteppedPairs)};
  SweepJob a, b;
  a.runner = "release";
  b.runner = "rc";
  a.pair = b.pair = 1;
  EXPECT_EQ(SteppedPairRefusal(features, a, b, "/bin/true", "/bin/true"), "");
  EXPECT_THAT(
      SteppedPairRefusal({std::string(agent::kFeatureRunJob)}, a, b, "/bin/true", "/bin/true"),
      HasSubstr("does not speak feature 'stepped_pairs'"));
  b.runner_kind = "tflite";
  EXPECT_THAT(SteppedPairRefusal(features, a, b, "/bin/true", "/bin/true"),
              HasSubstr("runner 'rc' is of kind 'tflite'"));
  b.runner_kind = "dfarm";
  EXPECT_THAT(SteppedPairRefusal(features, a, b, "/bin/true", ""), HasSubstr("not a plain"));
  a.benchmark.sustained_s = 2;
  EXPECT_THAT(SteppedPairRefusal(features, a, b, "/bin/true", "/bin/true"), HasSubstr("sustained"));
}

TEST(SteppedPairSeedTest, SeedDependsOnOrderSeedAndPair) {
  SweepJob a;
  a.pair = 3;
  a.benchmark.order_seed = 7;
  const uint32_t seed = SteppedPairSeed(a);
  EXPECT_EQ(SteppedPairSeed(a), seed);
  a.pair = 4;
  EXPECT_NE(SteppedPairSeed(a), seed);
  a.pair = 3;
  a.benchmark.order_seed = 8;
  EXPECT_NE(SteppedPairSeed(a), seed);
}

}  // namespace
}  // namespace dfarm::harness
