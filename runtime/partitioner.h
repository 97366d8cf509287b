// Partitioner: cuts a graph into subsets of nodes that a delegate claims or
// not, following TensorFlow Lite's rules (tensorflow/lite/graph_info.cc,
// PartitionGraphIntoIndependentNodeSubsets): each subset is a maximal set of
// nodes of one kind (supported or not) that can run as one step without a
// cycle, and the subsets in the returned order form a valid execution order.
//
// The partitioner sees only tensor ids and a supported flag per node, so it
// knows nothing of kernels or delegates (see runtime/delegate.h for those).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dfarm::runtime {

// One node as the partitioner sees it: the tensors it reads and writes. A
// tensor that no node writes (model input, constant, folded) is ready from
// the start. Negative ids (omitted optional inputs) are ignored.
struct PartitionerNode {
  std::vector<int> inputs;
  std::vector<int> outputs;
  bool supported = false;
};

struct NodeSubset {
  bool supported = false;
  std::vector<int> nodes;  // indices into the partitioner's input, in a valid execution order
};

// Partitions `nodes`, which must be given in a valid execution order (every
// node after the writers of its inputs). Every node is in exactly one subset;
// adjacent subsets alternate between supported and unsupported, and running
// the subsets in order, each as one step, respects every dependency. A
// supported subset is as large as it can be without depending on an
// unsupported node that itself depends on the subset.
std::vector<NodeSubset> PartitionGraph(const std::vector<PartitionerNode>& nodes);

struct PartitionLimits {
  int max_delegated_partitions = 0;  // 0: no limit; otherwise keep the largest N
  int min_nodes_per_partition = 1;   // smaller partitions stay on the fallback
};

// Which supported subsets a delegate takes under `limits`: true per subset
// (false for unsupported ones). `node_weight[i]` counts node i (a stacked
// delegate's earlier partition counts as its nodes); empty means 1 each.
// `reasons_out[s]` is set, for a supported subset left out, to why, e.g.
// "its partition has 1 node, fewer than min_nodes_per_partition 2". The
// largest subsets win under max_delegated_partitions, earlier ones on ties
// (as in TFLite's GraphPartitionHelper::GetFirstNLargestPartitions).
std::vector<bool> SelectPartitions(const std::vector<NodeSubset>& subsets,
                                   const PartitionLimits& limits,
                                   const std::vector<int>& node_weight,
                                   std::vector<std::string>* reasons_out);

}  // namespace dfarm::runtime
