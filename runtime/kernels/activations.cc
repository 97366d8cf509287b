// RELU, RELU6 and RELU_N1_TO_1, elementwise. float32; int8 and uint8 as
// TFLite: the input is requantized to the output's parameters
// (multiplier input_scale / output_scale) and clamped to the activation's
// bounds quantized on the output scale.
#include <algorithm>
#include <limits>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {
namespace {

struct ReluData : OpData {
  int32_t multiplier = 0;
  int shift = 0;
  int32_t act_min = 0, act_max = 0;
};

tflite::ActivationFunctionType ActivationOf(tflite::BuiltinOperator code) {
  switch (code) {
    case tflite::BuiltinOperator::RELU6:
      return tflite::ActivationFunctionType::RELU6;
    case tflite::BuiltinOperator::RELU_N1_TO_1:
      return tflite::ActivationFunctionType::RELU_N1_TO_1;
    default:
      return tflite::ActivationFunctionType::RELU;
  }
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckOutputShape(output, input.shape));
  if (input.dtype == DType::kFloat32) return CheckFloat32(&output, "output");
  if (input.dtype != DType::kInt8 && input.dtype != DType::kUint8) {
    return Status::Unsupported(std::string(DTypeName(input.dtype)) +
                               " input is not supported (float32, int8, uint8)");
  }
  DFARM_RETURN_IF_ERROR(CheckSameDType(&input, "input", &output, "output"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(output, "output"));
  auto data = std::make_unique<ReluData>();
  const double multiplier = static_cast<double>(input.scale) / output.scale;
  QuantizeMultiplier(multiplier, &data->multiplier, &data->shift);
  if (data->shift > 30) {
    return Status::Unsupported("input scale / output scale " + std::to_string(multiplier) +
                               " is too large");
  }
  DFARM_RETURN_IF_ERROR(CalculateActivationRangeQuantized(ActivationOf(node.code), output,
                                                          &data->act_min, &data->act_max));
  node.data = std::move(data);
  return Status::Ok();
}

template <typename T>
void EvalQuantized(const ReluData& d, const Tensor& input, Tensor& output) {
  const T* in = input.data_as<T>();
  T* out = output.data_as<T>();
  const int32_t in_zp = ZeroPoint(input);
  const int32_t out_zp = ZeroPoint(output);
  const int64_t n = input.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = out_zp + MultiplyByQuantizedMultiplier(static_cast<int32_t>(in[i]) - in_zp,
                                                             d.multiplier, d.shift);
    out[i] = static_cast<T>(std::clamp(v, d.act_min, d.act_max));
  }
}

template <int kMin, int kMax>
Status Eval(Node& node) {
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  if (input.dtype == DType::kInt8) {
    EvalQuantized<int8_t>(*node.data_as<ReluData>(), input, output);
    return Status::Ok();
  }
  if (input.dtype == DType::kUint8) {
    EvalQuantized<uint8_t>(*node.data_as<ReluData>(), input, output);
    return Status::Ok();
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr ActivationRange range = {static_cast<float>(kMin),
                                     kMax == 0 ? kInf : static_cast<float>(kMax)};
  const float* in = input.data_as<float>();
  float* out = output.data_as<float>();
  ParallelRanges(node, input.num_elements(), kMinParallelElements,
                 [in, out, range](int64_t begin, int64_t end) {
                   const float* __restrict x = in;
                   float* __restrict y = out;
                   for (int64_t i = begin; i < end; ++i) y[i] = Clamp(x[i], range);
                 });
  return Status::Ok();
}

}  // namespace

// kMax == 0 stands for no upper bound.
const OpRegistration* RegisterRelu() {
  static const OpRegistration registration = {&Prepare, &Eval<0, 0>};
  return &registration;
}

const OpRegistration* RegisterRelu6() {
  static const OpRegistration registration = {&Prepare, &Eval<0, 6>};
  return &registration;
}

const OpRegistration* RegisterReluN1To1() {
  static const OpRegistration registration = {&Prepare, &Eval<-1, 1>};
  return &registration;
}

}  // namespace dfarm::runtime
