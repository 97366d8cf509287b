// The TFLite-op -> XNNPACK-node mapping of the xnnpack delegate: one function
// both checks a node (CheckNode) and defines it in a subgraph (Prepare), so
// what is claimed and what is built cannot drift apart (as in TFLite's
// XNNPACK delegate, whose VisitNode runs with or without a subgraph).
#pragma once

#include <xnnpack.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
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
  // slopes, bias scales); must outlive the runtime.
  std::deque<std::vector<std::byte>>* owned = nullptr;
  // CONCATENATION (node index -> one value per input): external outputs that
  // point into the node's output tensor, each input's contiguous block.
  std::unordered_map<int, std::vector<uint32_t>> concat_slices;

  // A copy of `values` in `owned`.
  template <typename T>
  const T* Keep(const std::vector<T>& values) {
    std::vector<std::byte>& bytes = owned->emplace_back(values.size() * sizeof(T));
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return reinterpret_cast<const T*>(bytes.data());
  }
  // Defines a value of `shape` with `tensor`'s datatype: fp32 for float32,
  // qint8 / quint8 / qint32 with its scale and zero point for a per-tensor
  // quantized int8 / uint8 / int32 tensor. `data` is null for a run-time
  // value; `external_id` and `flags` as in xnn_define_tensor_value.
  runtime::Status DefineValue(const runtime::Tensor& tensor, const std::vector<int32_t>& shape,
                              const void* data, uint32_t external_id, uint32_t flags,
                              uint32_t* id_out);
  // The value id of `tensor`, defining it when new.
  runtime::Status Value(const runtime::Tensor& tensor, uint32_t* id_out);
  // A new internal value of `shape` with the datatype and quantization of `like`.
  runtime::Status Internal(const runtime::Tensor& like, const std::vector<int32_t>& shape,
                           uint32_t* id_out);
};

// Ok when the node can run on XNNPACK (and, when `build` is non-null, its
// XNNPACK nodes are defined); kUnsupported with the reason otherwise; kError
// when XNNPACK refuses a node that was checked.
runtime::Status VisitNode(const runtime::Node& node, SubgraphBuild* build);

// For a CONCATENATION that VisitNode() takes: the byte offset of each input's
// block in the output (the concatenation axis has only unit dimensions before
// it, so every input is one contiguous block; inputs and output share a dtype).
std::vector<size_t> ConcatOffsets(const runtime::Node& node);

// "invalid parameter" for an xnn_status.
const char* XnnStatusName(xnn_status status);

}  // namespace dfarm::delegates::xnnpack_internal
