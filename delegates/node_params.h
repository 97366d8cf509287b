// What the delegates that map TFLite nodes one by one (gpu/, xnnpack/) check
// and read alike when they decide whether they take a node: its arity, its
// constant int parameter tensors (axes, paddings), its fused activation as a
// clamp range and TFLite's SAME/VALID padding of a window. Every refusal is
// kUnsupported with the reason "<op name> <why>", the same from each delegate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/window.h"
#include "runtime/status.h"

namespace dfarm::delegates {

// kUnsupported "<node's op name> <why>" ("ADD with 3 inputs and 1 outputs").
runtime::Status Unsupported(const runtime::Node& node, const std::string& why);

// `t`'s shape as runtime::ShapeToString writes it ("[1, 8, 8, 3]").
std::string Dims(const runtime::Tensor& t);

// Ok when `node` has min_inputs..max_inputs inputs and `outputs` outputs.
runtime::Status CheckArity(const runtime::Node& node, size_t min_inputs, size_t max_inputs,
                           size_t outputs);

// The values of the int32 or int64 parameter tensor `t` (`what` names it in
// the reason: "axes", "paddings"), which must hold its values before
// Invoke(): a constant of the model or one the interpreter folded at load
// (Tensor::has_static_value), alike.
runtime::Status ReadInts(const runtime::Node& node, const runtime::Tensor* t, const char* what,
                         std::vector<int64_t>* out);

// The node's fused activation as the range [*lo, *hi] its output is clamped
// to (-inf and inf for NONE); kUnsupported for TANH, SIGN_BIT and the like.
runtime::Status ActivationRange(const runtime::Node& node, float* lo, float* hi);

// A 2-D convolution's padding, strides (h, w) and dilations (h, w).
struct ConvParams {
  tflite::Padding padding = tflite::Padding::VALID;
  int sh = 1, sw = 1, dh = 1, dw = 1;
};

// The options of a CONV_2D or (by node.code) DEPTHWISE_CONV_2D; declines a
// node without them or with a stride or dilation < 1.
runtime::Status ReadConvParams(const runtime::Node& node, ConvParams* c);

// MediaPipe's Convolution2DTransposeBias custom options: 3 int32, the
// padding (1 SAME, 2 VALID), the stride along the width, then the height
// (not checked here); dilations stay 1.
runtime::Status ReadTransposeBiasOptions(const runtime::Node& node, ConvParams* c);

// One spatial dimension of a windowed node (convolution, pooling).
struct Window {
  tflite::Padding padding = tflite::Padding::VALID;
  runtime::WindowAxis axis = runtime::WindowAxis::kHeight;
  // The window's name in runtime::ComputeWindowDim's messages ("filter height").
  const char* kernel_name = "filter";
  int in = 0, out = 0, kernel = 1, stride = 1, dilation = 1;
};

// Explicit padding of a Window, as TFLite computes it.
struct Pads {
  int32_t before = 0, after = 0;
};

// The explicit padding of `w`, as TFLite (and the CPU kernels,
// runtime::ComputeWindowDim) compute it: SAME pads (out-1)*stride +
// effective_kernel - in in total, the extra one at the end (bottom/right);
// VALID pads nothing. Declined: geometry that does not fit int32 (the CPU
// kernel's Prepare refuses it with the same reason), an output size other
// than the one the padding gives and, unless `empty_ok`, one <= 0.
runtime::Status SpatialPadding(const runtime::Node& node, const Window& w, bool empty_ok,
                               Pads* pads);

}  // namespace dfarm::delegates
