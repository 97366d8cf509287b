#include "runtime/partitioner.h"

#include <algorithm>
#include <unordered_set>

namespace dfarm::runtime {

std::vector<NodeSubset> PartitionGraph(const std::vector<PartitionerNode>& nodes) {
  // A tensor is ready when no node writes it, or once its writer is placed.
  std::unordered_set<int> pending;
  for (const PartitionerNode& node : nodes) {
    for (int t : node.outputs) {
      if (t >= 0) pending.insert(t);
    }
  }
  std::vector<bool> placed(nodes.size(), false);
  size_t num_placed = 0, first_unplaced = 0;
  std::vector<NodeSubset> subsets;
  while (num_placed < nodes.size()) {
    while (placed[first_unplaced]) ++first_unplaced;
    // The first unplaced node is always ready (every node before it is
    // placed), so each round makes progress and the kinds alternate.
    NodeSubset subset;
    subset.supported = nodes[first_unplaced].supported;
    // One pass in execution order reaches every node of this kind whose
    // inputs are ready, including those written earlier in the same pass.
    for (size_t i = first_unplaced; i < nodes.size(); ++i) {
      if (placed[i] || nodes[i].supported != subset.supported) continue;
      bool ready = std::none_of(nodes[i].inputs.begin(), nodes[i].inputs.end(),
                                [&](int t) { return t >= 0 && pending.count(t) > 0; });
      if (!ready) continue;
      placed[i] = true;
      ++num_placed;
      subset.nodes.push_back(static_cast<int>(i));
      for (int t : nodes[i].outputs) pending.erase(t);
    }
    subsets.push_back(std::move(subset));
  }
  return subsets;
}

std::vector<bool> SelectPartitions(const std::vector<NodeSubset>& subsets,
                                   const PartitionLimits& limits,
                                   const std::vector<int>& node_weight,
                                   std::vector<std::string>* reasons_out) {
  std::vector<bool> taken(subsets.size(), false);
  reasons_out->assign(subsets.size(), std::string());
  std::vector<int> weight(subsets.size(), 0);
  std::vector<size_t> candidates;
  for (size_t s = 0; s < subsets.size(); ++s) {
    if (!subsets[s].supported) continue;
    for (int n : subsets[s].nodes) weight[s] += node_weight.empty() ? 1 : node_weight[n];
    const int min_nodes = std::max(limits.min_nodes_per_partition, 1);
    if (weight[s] < min_nodes) {
      (*reasons_out)[s] = "its partition has " + std::to_string(weight[s]) + " node" +
                          (weight[s] == 1 ? "" : "s") + ", fewer than min_nodes_per_partition " +
                          std::to_string(min_nodes);
      continue;
    }
    candidates.push_back(s);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](size_t a, size_t b) { return weight[a] > weight[b]; });
  for (size_t rank = 0; rank < candidates.size(); ++rank) {
    const size_t s = candidates[rank];
    if (limits.max_delegated_partitions > 0 &&
        rank >= static_cast<size_t>(limits.max_delegated_partitions)) {
      (*reasons_out)[s] = "its partition (" + std::to_string(weight[s]) + " node" +
                          (weight[s] == 1 ? "" : "s") + ") is not among the " +
                          std::to_string(limits.max_delegated_partitions) +
                          " largest (max_delegated_partitions " +
                          std::to_string(limits.max_delegated_partitions) + ")";
      continue;
    }
    taken[s] = true;
  }
  return taken;
}

}  // namespace dfarm::runtime
