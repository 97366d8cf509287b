#include "runtime/kernels/kernel_util.h"

#include <limits>
#include <string>

namespace dfarm::runtime {

Status CheckArity(const Node& node, int min_inputs, int max_inputs, int num_outputs) {
  int in = static_cast<int>(node.inputs.size());
  int out = static_cast<int>(node.outputs.size());
  if (in < min_inputs || in > max_inputs) {
    std::string want = min_inputs == max_inputs
                           ? std::to_string(min_inputs)
                           : std::to_string(min_inputs) + " to " + std::to_string(max_inputs);
    return Status::Error("expected " + want + " inputs, got " + std::to_string(in));
  }
  if (out != num_outputs) {
    return Status::Error("expected " + std::to_string(num_outputs) + " outputs, got " +
                         std::to_string(out));
  }
  for (int i = 0; i < min_inputs; ++i) {
    if (node.inputs[i] == nullptr) {
      return Status::Error("input " + std::to_string(i) + " is required but omitted");
    }
  }
  return Status::Ok();
}

Status CheckFloat32(const Tensor* tensor, const char* role) {
  if (tensor == nullptr) return Status::Error(std::string(role) + " is missing");
  if (tensor->dtype != DType::kFloat32) {
    return Status::Unsupported(std::string(role) + " has dtype " + DTypeName(tensor->dtype) +
                               " (only float32 is supported)");
  }
  return Status::Ok();
}

Status CheckOutputShape(const Tensor& output, std::span<const int32_t> computed) {
  if (!std::equal(output.shape.begin(), output.shape.end(), computed.begin(), computed.end())) {
    return Status::Error("output tensor " + std::to_string(output.index) + " '" + output.name +
                         "' is declared " + ShapeToString(output.shape) + ", but the op computes " +
                         ShapeToString(computed));
  }
  return Status::Ok();
}

Status GetActivationRange(tflite::ActivationFunctionType activation, ActivationRange* range_out) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  switch (activation) {
    case tflite::ActivationFunctionType::NONE:
      *range_out = {-kInf, kInf};
      return Status::Ok();
    case tflite::ActivationFunctionType::RELU:
      *range_out = {0.0f, kInf};
      return Status::Ok();
    case tflite::ActivationFunctionType::RELU_N1_TO_1:
      *range_out = {-1.0f, 1.0f};
      return Status::Ok();
    case tflite::ActivationFunctionType::RELU6:
      *range_out = {0.0f, 6.0f};
      return Status::Ok();
    default: {
      const char* name = tflite::EnumNameActivationFunctionType(activation);
      return Status::Unsupported(std::string("fused activation ") +
                                 (name != nullptr && *name ? name : "(unknown)") +
                                 " is not supported");
    }
  }
}

WindowDim ComputeWindowDim(tflite::Padding padding, int in, int filter, int stride, int dilation) {
  int effective = (filter - 1) * dilation + 1;
  int out = padding == tflite::Padding::SAME ? (in + stride - 1) / stride
                                             : (in - effective + stride) / stride;
  if (out < 0) out = 0;
  int pad_total = std::max((out - 1) * stride + effective - in, 0);
  return {out, pad_total / 2};
}

Status CheckWindowParams(tflite::Padding padding, int stride_h, int stride_w, int dilation_h,
                         int dilation_w) {
  if (padding != tflite::Padding::SAME && padding != tflite::Padding::VALID) {
    return Status::Error("unknown padding mode " + std::to_string(static_cast<int>(padding)));
  }
  if (stride_h <= 0 || stride_w <= 0) {
    return Status::Error("strides must be positive, got " + std::to_string(stride_h) + "x" +
                         std::to_string(stride_w));
  }
  if (dilation_h <= 0 || dilation_w <= 0) {
    return Status::Error("dilation factors must be positive, got " + std::to_string(dilation_h) +
                         "x" + std::to_string(dilation_w));
  }
  return Status::Ok();
}

}  // namespace dfarm::runtime
