// Helpers shared by the reference kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "runtime/kernels/kernel.h"

namespace dfarm::runtime {

// Checks the number of inputs (omitted optional ones count) and outputs.
Status CheckArity(const Node& node, int min_inputs, int max_inputs, int num_outputs);

// `tensor` (input or output `role`, e.g. "input 0") is present and has `dtype`;
// Unsupported otherwise (the kernel lacks that dtype).
Status CheckFloat32(const Tensor* tensor, const char* role);

// The output's declared shape equals `computed`.
Status CheckOutputShape(const Tensor& output, std::span<const int32_t> computed);

// Clamp bounds for a fused activation; Unsupported for TANH and SIGN_BIT.
struct ActivationRange {
  float min;
  float max;
};
Status GetActivationRange(tflite::ActivationFunctionType activation, ActivationRange* range_out);

inline float Clamp(float v, ActivationRange r) { return std::min(std::max(v, r.min), r.max); }

// One spatial dimension of a windowed op (conv, depthwise conv, pool), as
// TFLite computes it:
//   effective = (filter - 1) * dilation + 1
//   SAME:  out = ceil(in / stride)
//   VALID: out = ceil((in - effective + 1) / stride)
//   pad_total = max((out - 1) * stride + effective - in, 0), pad_before = pad_total / 2
struct WindowDim {
  int out;
  int pad_before;
};
WindowDim ComputeWindowDim(tflite::Padding padding, int in, int filter, int stride, int dilation);

// Validates the padding mode and that strides and dilations are positive.
Status CheckWindowParams(tflite::Padding padding, int stride_h, int stride_w, int dilation_h,
                         int dilation_w);

}  // namespace dfarm::runtime
