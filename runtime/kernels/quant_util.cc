#include "runtime/kernels/quant_util.h"

#include <string>

namespace dfarm::runtime {

void QuantizeMultiplier(double double_multiplier, int32_t* quantized_multiplier, int* shift) {
  if (double_multiplier == 0.0) {
    *quantized_multiplier = 0;
    *shift = 0;
    return;
  }
  const double q = std::frexp(double_multiplier, shift);
  int64_t q_fixed = static_cast<int64_t>(std::round(q * static_cast<double>(1LL << 31)));
  if (q_fixed == (1LL << 31)) {
    q_fixed /= 2;
    ++*shift;
  }
  if (*shift < -31) {
    *shift = 0;
    q_fixed = 0;
  }
  *quantized_multiplier = static_cast<int32_t>(q_fixed);
}

bool QuantizeMultiplierSmallerThanOneExp(double double_multiplier, int32_t* quantized_multiplier,
                                         int* left_shift) {
  if (!(double_multiplier > 0.0 && double_multiplier < 1.0)) return false;
  int shift = 0;
  int32_t multiplier = 0;
  QuantizeMultiplier(double_multiplier, &multiplier, &shift);
  if (shift > 0) return false;
  *quantized_multiplier = multiplier;
  *left_shift = shift;
  return true;
}

bool QuantizedRange(DType dtype, int32_t* min_out, int32_t* max_out) {
  switch (dtype) {
    case DType::kInt8:
      *min_out = -128;
      *max_out = 127;
      return true;
    case DType::kUint8:
      *min_out = 0;
      *max_out = 255;
      return true;
    case DType::kInt16:
      *min_out = -32768;
      *max_out = 32767;
      return true;
    default:
      return false;
  }
}

Status CalculateActivationRangeQuantized(tflite::ActivationFunctionType activation,
                                         const Tensor& output, int32_t* min_out, int32_t* max_out) {
  int32_t qmin = 0;
  int32_t qmax = 0;
  if (!QuantizedRange(output.dtype, &qmin, &qmax)) {
    return Status::Unsupported(std::string("output dtype ") + DTypeName(output.dtype) +
                               " is not a quantized dtype");
  }
  const float scale = output.scale;
  const int32_t zero_point = ZeroPoint(output);
  auto quantize = [&](float f) { return zero_point + static_cast<int32_t>(std::round(f / scale)); };
  switch (activation) {
    case tflite::ActivationFunctionType::NONE:
      *min_out = qmin;
      *max_out = qmax;
      return Status::Ok();
    case tflite::ActivationFunctionType::RELU:
      *min_out = std::max(qmin, quantize(0.0f));
      *max_out = qmax;
      return Status::Ok();
    case tflite::ActivationFunctionType::RELU6:
      *min_out = std::max(qmin, quantize(0.0f));
      *max_out = std::min(qmax, quantize(6.0f));
      return Status::Ok();
    case tflite::ActivationFunctionType::RELU_N1_TO_1:
      *min_out = std::max(qmin, quantize(-1.0f));
      *max_out = std::min(qmax, quantize(1.0f));
      return Status::Ok();
    default:
      return Status::Unsupported(std::string("fused activation ") +
                                 tflite::EnumNameActivationFunctionType(activation) +
                                 " is not supported on quantized tensors");
  }
}

Status CheckQuantizedPerTensor(const Tensor& tensor, const char* role) {
  int32_t qmin = 0;
  int32_t qmax = 0;
  if (tensor.dtype != DType::kInt8 && tensor.dtype != DType::kUint8) {
    return Status::Unsupported(std::string(role) + " dtype " + DTypeName(tensor.dtype) +
                               " is not a quantized dtype (int8, uint8)");
  }
  QuantizedRange(tensor.dtype, &qmin, &qmax);
  if (!tensor.quantized) {
    return Status::Error(std::string(role) + " (" + DTypeName(tensor.dtype) +
                         ") has no quantization parameters");
  }
  if (tensor.per_channel_quantized) {
    return Status::Unsupported(std::string(role) + " is per-channel quantized, which is not " +
                               "supported here");
  }
  if (!(std::isfinite(tensor.scale) && tensor.scale > 0.0f)) {
    return Status::Error(std::string(role) + " has scale " + std::to_string(tensor.scale) +
                         ": scale must be finite and positive");
  }
  if (tensor.zero_point < qmin || tensor.zero_point > qmax) {
    return Status::Error(std::string(role) + " has zero point " +
                         std::to_string(tensor.zero_point) + ", outside the " +
                         DTypeName(tensor.dtype) + " range");
  }
  return Status::Ok();
}

}  // namespace dfarm::runtime
