#include "reports/store/delegation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reports/store/store.h"
#include "reports/store/store_test_fixture.h"

namespace dfarm::store {
namespace {

JobRow Placed(const std::string& delegate, int64_t nodes, int64_t delegated, int64_t folded,
              const std::string& reason) {
  JobRow j;
  j.delegate = delegate;
  PlacementSummary p;
  p.nodes = nodes;
  p.delegated_nodes = delegated;
  p.cpu_nodes = nodes - delegated;
  p.folded_nodes = folded;
  p.delegates = delegated > 0 ? delegate : "";
  p.main_reason = reason;
  j.placement = p;
  return j;
}

TEST(DelegationTest, ALabelSaysHowManyNodesTheDelegateTookAndWhyNotTheRest) {
  auto none = PartialDelegationOf(
      Placed("xnnpack", 60, 0, 0, "xnnpack: tensor 3 is sized only at Prepare()"));
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->TookNone());
  EXPECT_EQ(none->Count(), "xnnpack: 0 of 60 nodes");
  EXPECT_EQ(none->Label(), "xnnpack: 0 of 60 nodes (tensor 3 is sized only at Prepare())");
  // Folded nodes never run: 90 nodes, 10 folded, 50 delegated is 50 of 80.
  auto some = PartialDelegationOf(Placed("gpu", 90, 50, 10, ""));
  ASSERT_TRUE(some.has_value());
  EXPECT_FALSE(some->TookNone());
  EXPECT_EQ(some->Label(), "gpu: 50 of 80 nodes");
}

TEST(DelegationTest, WholeGraphsCpuJobsAndUncountedPlacementsHaveNone) {
  EXPECT_FALSE(PartialDelegationOf(Placed("xnnpack", 90, 80, 10, "")).has_value());
  EXPECT_FALSE(PartialDelegationOf(Placed("cpu", 40, 0, 0, "")).has_value());
  EXPECT_FALSE(PartialDelegationOf(Placed("xnnpack", 0, 0, 0, "")).has_value());
  JobRow no_placement;
  no_placement.delegate = "xnnpack";
  EXPECT_FALSE(PartialDelegationOf(no_placement).has_value());
}

TEST(DelegationTest, ACellShowsItsTrialThatDelegatedFewest) {
  const JobRow whole = Placed("xnnpack", 10, 10, 0, "");
  const JobRow seven = Placed("xnnpack", 10, 7, 0, "xnnpack: a");
  const JobRow three = Placed("xnnpack", 10, 3, 0, "xnnpack: b");
  auto d = PartialDelegationOf(std::vector<const JobRow*>{&whole, &seven, &three});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->Label(), "xnnpack: 3 of 10 nodes (b)");
  EXPECT_FALSE(PartialDelegationOf(std::vector<const JobRow*>{&whole}).has_value());
}

TEST(DelegationTest, ShortReasonTakesTheDelegatesEntryAndCutsAtAWord) {
  EXPECT_EQ(ShortReason("xnnpack: RELU is not supported", "xnnpack"), "RELU is not supported");
  EXPECT_EQ(ShortReason("gpu: no; xnnpack: CONV_2D with filter [3,3]", "xnnpack"),
            "CONV_2D with filter [3,3]");
  EXPECT_EQ(ShortReason("gpu: no; other: x", "xnnpack"), "no");
  EXPECT_EQ(ShortReason("tensor 3: sized late", "xnnpack"), "tensor 3: sized late");
  const std::string cut = ShortReason(
      "xnnpack: its partition has 91 nodes, fewer than min_nodes_per_partition 100000", "xnnpack");
  EXPECT_EQ(cut, "its partition has 91 nodes, fewer than...");
  EXPECT_LE(cut.size(), kMaxReasonChars);
  EXPECT_EQ(ShortReason("", "xnnpack"), "");
}

// The store gives each job's main reason: the most common one of the nodes
// on cpu that run, the lowest node's of equals, folded nodes left out.
TEST_P(StoreTest, ListJobsGivesThePlacementsMainReason) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  auto ids = store->AddJobs(*run, {MakeJob("a.tflite"), MakeJob("b.tflite")});
  ASSERT_TRUE(ids.ok()) << ids.message();
  JobOutcome o;
  o.status = "ok";
  o.exit_code = 0;
  o.metrics = JobMetrics{};
  JobPlacement p;
  p.partitions = 1;
  p.nodes.push_back({0, "PAD", "cpu", std::nullopt, false, "xnnpack: PAD of rank 5"});
  p.nodes.push_back({1, "RELU", "cpu", std::nullopt, false, "xnnpack: tensor sized at Prepare"});
  p.nodes.push_back({2, "ADD", "xnnpack", 0, false, ""});
  p.nodes.push_back({3, "RELU", "cpu", std::nullopt, false, "xnnpack: tensor sized at Prepare"});
  p.nodes.push_back({4, "DEQUANTIZE", "cpu", std::nullopt, true, "xnnpack: folded"});
  p.nodes.push_back({5, "DEQUANTIZE", "cpu", std::nullopt, true, "xnnpack: folded"});
  p.nodes.push_back({6, "DEQUANTIZE", "cpu", std::nullopt, true, "xnnpack: folded"});
  o.placement = p;
  ASSERT_TRUE(store->RecordJobResult((*ids)[0], o).ok());
  o.placement->nodes = {{0, "PAD", "cpu", std::nullopt, false, "b"},
                        {1, "PAD", "cpu", std::nullopt, false, "a"},
                        {2, "PAD", "cpu", std::nullopt, false, ""}};
  ASSERT_TRUE(store->RecordJobResult((*ids)[1], o).ok());
  auto jobs = store->ListJobs(*run);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  ASSERT_EQ(jobs->size(), 2u);
  ASSERT_TRUE((*jobs)[0].placement.has_value());
  EXPECT_EQ((*jobs)[0].placement->main_reason, "xnnpack: tensor sized at Prepare");
  EXPECT_EQ((*jobs)[1].placement->main_reason, "b");
  auto one = store->GetJob((*ids)[0]);
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ(one->placement->main_reason, "xnnpack: tensor sized at Prepare");
}

}  // namespace
}  // namespace dfarm::store
