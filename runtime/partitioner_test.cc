#include "runtime/partitioner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dfarm::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// "S[0,2] U[1]": the subsets' kinds and nodes.
std::string Describe(const std::vector<NodeSubset>& subsets) {
  std::string s;
  for (const NodeSubset& subset : subsets) {
    if (!s.empty()) s += " ";
    s += subset.supported ? "S[" : "U[";
    for (size_t i = 0; i < subset.nodes.size(); ++i) {
      if (i > 0) s += ",";
      s += std::to_string(subset.nodes[i]);
    }
    s += "]";
  }
  return s;
}

PartitionerNode N(std::vector<int> inputs, std::vector<int> outputs, bool supported) {
  return {std::move(inputs), std::move(outputs), supported};
}

TEST(PartitionerTest, EmptyGraph) { EXPECT_THAT(PartitionGraph({}), IsEmpty()); }

TEST(PartitionerTest, AllSupportedIsOnePartition) {
  EXPECT_EQ(Describe(PartitionGraph({N({0}, {1}, true), N({1}, {2}, true), N({2}, {3}, true)})),
            "S[0,1,2]");
}

// A chain alternating supported / unsupported: every node is its own subset.
TEST(PartitionerTest, AlternatingChain) {
  std::vector<PartitionerNode> g = {N({0}, {1}, true), N({1}, {2}, false), N({2}, {3}, true),
                                    N({3}, {4}, false), N({4}, {5}, true)};
  EXPECT_EQ(Describe(PartitionGraph(g)), "S[0] U[1] S[2] U[3] S[4]");
}

// TFLite's case: 0 and 2 are supported, 1 is not and reads 0's output. Node 2
// reads only the model input, so it joins 0 without a cycle.
TEST(PartitionerTest, IndependentSupportedNodesMerge) {
  std::vector<PartitionerNode> g = {N({0}, {1}, true), N({1}, {2}, false), N({0}, {3}, true)};
  EXPECT_EQ(Describe(PartitionGraph(g)), "S[0,2] U[1]");
}

// Merging 0 and 2 would make a cycle (0 -> 1 -> 2 with 1 unsupported), so
// they stay apart.
TEST(PartitionerTest, DependencyThroughUnsupportedNodeSplits) {
  std::vector<PartitionerNode> g = {N({0}, {1}, true), N({1}, {2}, false), N({1, 2}, {3}, true)};
  EXPECT_EQ(Describe(PartitionGraph(g)), "S[0] U[1] S[2]");
}

// Diamond: 0 feeds an unsupported branch (1) and a supported one (2); 3 joins
// them. The supported branch is taken early with 0, the join waits for 1.
TEST(PartitionerTest, Diamond) {
  std::vector<PartitionerNode> g = {N({0}, {1}, true), N({1}, {2}, false), N({1}, {3}, true),
                                    N({2, 3}, {4}, true)};
  EXPECT_EQ(Describe(PartitionGraph(g)), "S[0,2] U[1] S[3]");
}

TEST(PartitionerTest, UnsupportedFirstAndNegativeInputsIgnored) {
  std::vector<PartitionerNode> g = {N({0, -1}, {1}, false), N({0}, {2}, false),
                                    N({1, 2, -1}, {3}, true)};
  EXPECT_EQ(Describe(PartitionGraph(g)), "U[0,1] S[2]");
}

// Every node appears once, and every node's writers come before it in the
// concatenated order.
TEST(PartitionerTest, OrderRespectsDependencies) {
  std::vector<PartitionerNode> g;
  // node i reads tensors i and i/2 and writes i+1; supported when i % 3 != 1.
  for (int i = 0; i < 30; ++i) g.push_back(N({i, i / 2}, {i + 1}, i % 3 != 1));
  std::vector<NodeSubset> subsets = PartitionGraph(g);
  std::vector<int> position(g.size(), -1);
  int step = 0;
  for (size_t s = 0; s < subsets.size(); ++s) {
    if (s > 0) {
      EXPECT_NE(subsets[s].supported, subsets[s - 1].supported);
    }
    for (int n : subsets[s].nodes) {
      ASSERT_EQ(position[n], -1) << "node " << n << " placed twice";
      EXPECT_EQ(g[n].supported, subsets[s].supported);
      position[n] = step++;
    }
  }
  for (size_t n = 0; n < g.size(); ++n) {
    ASSERT_GE(position[n], 0) << "node " << n << " not placed";
    for (int t : g[n].inputs) {
      if (t >= 1) {
        EXPECT_LT(position[t - 1], position[n]) << "node " << n << " reads " << t;
      }
    }
  }
}

std::vector<NodeSubset> FourPartitions() {
  // Sizes 1, 3, 2, 3 for the supported subsets.
  return {{true, {0}},    {false, {1}}, {true, {2, 3, 4}},  {false, {5}},
          {true, {6, 7}}, {false, {8}}, {true, {9, 10, 11}}};
}

TEST(SelectPartitionsTest, NoLimitsTakesEverySupportedSubset) {
  std::vector<std::string> reasons;
  EXPECT_THAT(SelectPartitions(FourPartitions(), {}, {}, &reasons),
              ElementsAre(true, false, true, false, true, false, true));
  for (const std::string& r : reasons) EXPECT_EQ(r, "");
}

TEST(SelectPartitionsTest, MinNodesPerPartition) {
  std::vector<std::string> reasons;
  EXPECT_THAT(SelectPartitions(FourPartitions(), {0, 3}, {}, &reasons),
              ElementsAre(false, false, true, false, false, false, true));
  EXPECT_EQ(reasons[0], "its partition has 1 node, fewer than min_nodes_per_partition 3");
  EXPECT_EQ(reasons[4], "its partition has 2 nodes, fewer than min_nodes_per_partition 3");
  EXPECT_EQ(reasons[1], "");
}

TEST(SelectPartitionsTest, MaxDelegatedPartitionsKeepsTheLargestEarlierFirst) {
  std::vector<std::string> reasons;
  EXPECT_THAT(SelectPartitions(FourPartitions(), {1, 1}, {}, &reasons),
              ElementsAre(false, false, true, false, false, false, false));
  EXPECT_THAT(reasons[6], HasSubstr("not among the 1 largest (max_delegated_partitions 1)"));
  EXPECT_THAT(SelectPartitions(FourPartitions(), {3, 1}, {}, &reasons),
              ElementsAre(false, false, true, false, true, false, true));
}

TEST(SelectPartitionsTest, WeightsCountStackedPartitionsAsTheirNodes) {
  std::vector<std::string> reasons;
  std::vector<NodeSubset> subsets = {{true, {0}}, {false, {1}}, {true, {2, 3}}};
  EXPECT_THAT(SelectPartitions(subsets, {0, 3}, {5, 1, 1, 1}, &reasons),
              ElementsAre(true, false, false));
}

}  // namespace
}  // namespace dfarm::runtime
