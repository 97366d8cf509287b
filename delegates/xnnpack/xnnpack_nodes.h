// The TFLite-op -> XNNPACK-node mapping of the xnnpack delegate: one function
// both checks a node (CheckNode) and defines it in a subgraph (Prepare), so
// what is claimed and what is built cannot drift apart (as in TFLite's
// XNNPACK delegate, whose VisitNode runs with or without a subgraph).
#pragma once

#include <xnnpack.h>

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "runtime/kernels/kernel.h"
#include "runtime/status.h"

namespace dfarm::delegates::xnnpack_internal {

// The subgraph under construction and the XNNPACK value of each tensor.
struct SubgraphBuild {
  xnn_subgraph_t subgraph = nullptr;
  // tensor index -> value id; the partition's external tensors are entered
  // before any node is visited, constants and internal tensors on first use.
  std::unordered_map<int, uint32_t> ids;
  // Data the subgraph points at that the model lacks (zero biases, reshaped
  // slopes); must outlive the runtime.
  std::deque<std::vector<float>>* owned = nullptr;
  // CONCATENATION (node index -> one value per input): external outputs that
  // point into the node's output tensor, each input's contiguous block.
  std::unordered_map<int, std::vector<uint32_t>> concat_slices;

  // The value id of `tensor` (float32), defining it when new.
  runtime::Status Value(const runtime::Tensor& tensor, uint32_t* id_out);
  // A new internal float32 value of `shape`.
  runtime::Status Internal(const std::vector<size_t>& shape, uint32_t* id_out);
};

// Ok when the node can run on XNNPACK (and, when `build` is non-null, its
// XNNPACK nodes are defined); kUnsupported with the reason otherwise; kError
// when XNNPACK refuses a node that was checked.
runtime::Status VisitNode(const runtime::Node& node, SubgraphBuild* build);

// For a CONCATENATION that VisitNode() takes: the byte offset of each input's
// block in the output (the concatenation axis has only unit dimensions before
// it, so every input is one contiguous block).
std::vector<size_t> ConcatOffsets(const runtime::Node& node);

// "invalid parameter" for an xnn_status.
const char* XnnStatusName(xnn_status status);

}  // namespace dfarm::delegates::xnnpack_internal
