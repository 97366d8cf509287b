// Helpers shared by the reference kernels.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/window.h"

namespace dfarm::runtime {

// Checks the number of inputs (omitted optional ones count) and outputs.
Status CheckArity(const Node& node, int min_inputs, int max_inputs, int num_outputs);

// `tensor` (input or output `role`, e.g. "input 0") is present and has `dtype`;
// Unsupported otherwise (the kernel lacks that dtype).
Status CheckFloat32(const Tensor* tensor, const char* role);

// Sets the output's shape to `computed` when its declared shape admits it
// (equal, declared [], or -1 dimensions in shape_signature: see
// DeclaredShapeAdmits), as TensorFlow Lite sizes outputs in Prepare; Error
// naming both shapes otherwise. Call it from Prepare only (the interpreter
// sizes storage afterwards).
Status CheckOutputShape(Tensor& output, std::span<const int32_t> computed);
// For a kernel holding a const output: the declared shape must equal
// `computed` (an output the model leaves to the op to size is an Error).
Status CheckOutputShape(const Tensor& output, std::span<const int32_t> computed);

// The values of `tensor` (`role`, e.g. "axis"), an int32 or int64 tensor that
// must hold its values before Invoke() (constant or folded); Unsupported when
// it is computed at run time.
Status ReadStaticInts(const Tensor* tensor, const char* role, std::vector<int64_t>* values_out);

// `axis` in [-rank, rank) made non-negative; Error naming `role` otherwise.
Status NormalizeAxis(int64_t axis, int rank, const char* role, int* axis_out);

// Both tensors are present and share a dtype.
Status CheckSameDType(const Tensor* a, const char* role_a, const Tensor* b, const char* role_b);

// A gather of input elements in the output's row-major order (transpose,
// slice, strided slice, tile, split): output element (i0, .., ir-1) is input
// element offset + sum i_d * strides[d]; a stride may be 0 or negative.
inline constexpr int kMaxStridedRank = 12;
struct StridedView {
  int rank = 0;
  std::array<int64_t, kMaxStridedRank> dims{};
  std::array<int64_t, kMaxStridedRank> strides{};
  int64_t offset = 0;
};

// Row-major element strides of `shape`.
std::vector<int64_t> RowMajorStrides(std::span<const int32_t> shape);

// Copies the view's elements (`element_size` bytes each) from `in` to `out`.
// Allocates nothing.
void StridedCopy(const StridedView& view, const std::byte* in, std::byte* out, size_t element_size);

// OpData and Eval of a kernel whose output 0 is a StridedView of input 0.
struct StridedData : OpData {
  StridedView view;
};
Status EvalStrided(Node& node);

// A float ADD the interpreter folded into the node (Node::folded_addend,
// when any): the addend is float, of the output's shape but for the channels
// it covers, and `quantized` (the node's own path) is false. Error naming
// both shapes otherwise. For the Prepare of a kernel that applies_folded_add.
Status CheckFoldedAddend(const Node& node, const Tensor& output, bool quantized);

// Clamp bounds for a fused activation; Unsupported for TANH and SIGN_BIT.
struct ActivationRange {
  float min;
  float max;
};
Status GetActivationRange(tflite::ActivationFunctionType activation, ActivationRange* range_out);

// The height (h) and width (w) windows of a CONV_2D or DEPTHWISE_CONV_2D
// node over its input: ComputeWindowDim() on the input padded by
// Node::folded_pad, whose zeros then count in pad_before and pad_after.
Status ComputeConvWindow(const Node& node, tflite::Padding padding, const Tensor& input,
                         int filter_h, int filter_w, int stride_h, int stride_w, int dilation_h,
                         int dilation_w, WindowDim* h, WindowDim* w);

// The fused activation of a node whose options carry one (ADD, SUB, MUL,
// DIV, CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED, pooling,
// CONCATENATION); NONE otherwise.
tflite::ActivationFunctionType FusedActivation(const Node& node);

// The activation a kernel applies: the fused one, or when that is NONE the
// one the interpreter folded into the node (Node::folded_activation).
inline tflite::ActivationFunctionType NodeActivation(const Node& node) {
  const tflite::ActivationFunctionType declared = FusedActivation(node);
  return declared != tflite::ActivationFunctionType::NONE ? declared : node.folded_activation;
}

inline float Clamp(float v, ActivationRange r) { return std::min(std::max(v, r.min), r.max); }

// Validates the padding mode and that strides and dilations are positive.
Status CheckWindowParams(tflite::Padding padding, int stride_h, int stride_w, int dilation_h,
                         int dilation_w);

}  // namespace dfarm::runtime
