// CONCATENATION along one axis: any dtype without a fused activation,
// float32 with one. int8/uint8 inputs whose scale or zero point differ from
// the output's are requantized as TFLite's ConcatenationWithScaling does:
// round(q * s + b) + output_zero_point with s = input_scale / output_scale and
// b = -input_zero_point * s, in float.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {
namespace {

struct ConcatData : OpData {
  int64_t outer = 1;                // product of the dims before the axis
  std::vector<size_t> chunk_bytes;  // per input: bytes copied per outer index
  bool clamp = false;
  ActivationRange activation{};
  // Per input: whether it is requantized, and its float scale and bias.
  std::vector<bool> rescale;
  std::vector<float> scale, bias;
};

Status Prepare(Node& node) {
  if (node.inputs.empty() || node.outputs.size() != 1) {
    return Status::Error("expected at least 1 input and 1 output");
  }
  const auto* options = node.options<tflite::ConcatenationOptions>();
  if (options == nullptr) return Status::Error("ConcatenationOptions are missing");
  Tensor* output = node.outputs[0];
  if (node.inputs[0] == nullptr) return Status::Error("input 0 is omitted");
  // Input 0's rank and dims: the output may be declared [] for Prepare to size.
  const int rank = node.inputs[0]->rank();
  int axis = options->axis();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    return Status::Error("axis " + std::to_string(options->axis()) + " is out of range for rank " +
                         std::to_string(rank));
  }
  auto data = std::make_unique<ConcatData>();
  data->clamp = options->fused_activation_function() != tflite::ActivationFunctionType::NONE;
  DFARM_RETURN_IF_ERROR(
      GetActivationRange(options->fused_activation_function(), &data->activation));
  if (data->clamp) DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));

  std::vector<int32_t> computed;
  int64_t inner = 1;
  for (int i = axis + 1; i < rank; ++i) inner *= node.inputs[0]->shape[i];
  for (int i = 0; i < axis; ++i) data->outer *= node.inputs[0]->shape[i];
  const size_t element = DTypeSize(output->dtype);
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const Tensor* input = node.inputs[k];
    std::string role = "input " + std::to_string(k);
    if (input == nullptr) return Status::Error(role + " is omitted");
    if (input->dtype != output->dtype) {
      return Status::Error(role + " has dtype " + DTypeName(input->dtype) + ", output has " +
                           DTypeName(output->dtype));
    }
    if (input->rank() != rank) {
      return Status::Error(role + " " + ShapeToString(input->shape) + " has rank " +
                           std::to_string(input->rank()) + ", input 0 has " + std::to_string(rank));
    }
    if (k == 0) {
      computed = input->shape;
    } else {
      for (int i = 0; i < rank; ++i) {
        if (i != axis && input->shape[i] != computed[i]) {
          return Status::Error(role + " " + ShapeToString(input->shape) +
                               " does not match input 0 " + ShapeToString(node.inputs[0]->shape) +
                               " outside axis " + std::to_string(axis));
        }
      }
      computed[axis] += input->shape[axis];
    }
    data->chunk_bytes.push_back(static_cast<size_t>(input->shape[axis] * inner) * element);
    bool rescale = false;
    float scale = 1.0f, bias = 0.0f;
    if (output->dtype == DType::kInt8 || output->dtype == DType::kUint8) {
      DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(*input, role.c_str()));
      if (k == 0) DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(*output, "output"));
      rescale = input->scale != output->scale || input->zero_point != output->zero_point;
      scale = input->scale * (1.f / output->scale);
      bias = -static_cast<float>(input->zero_point) * scale;
    }
    data->rescale.push_back(rescale);
    data->scale.push_back(scale);
    data->bias.push_back(bias);
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  node.data = std::move(data);
  return Status::Ok();
}

template <typename T>
void Requantize(const T* in, size_t n, float scale, float bias, int32_t zero_point, T* out) {
  for (size_t j = 0; j < n; ++j) {
    const int32_t value =
        static_cast<int32_t>(std::round(static_cast<float>(in[j]) * scale + bias)) + zero_point;
    out[j] = static_cast<T>(
        std::clamp<int32_t>(value, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  }
}

Status Eval(Node& node) {
  const ConcatData& d = *node.data_as<ConcatData>();
  Tensor& output = *node.outputs[0];
  std::byte* out = output.data;
  for (int64_t o = 0; o < d.outer; ++o) {
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const size_t n = d.chunk_bytes[k];
      const std::byte* in = node.inputs[k]->data + o * n;
      if (!d.rescale[k]) {
        std::memcpy(out, in, n);
      } else if (output.dtype == DType::kInt8) {
        Requantize(reinterpret_cast<const int8_t*>(in), n, d.scale[k], d.bias[k], ZeroPoint(output),
                   reinterpret_cast<int8_t*>(out));
      } else {
        Requantize(reinterpret_cast<const uint8_t*>(in), n, d.scale[k], d.bias[k],
                   ZeroPoint(output), reinterpret_cast<uint8_t*>(out));
      }
      out += n;
    }
  }
  if (d.clamp) {
    float* values = output.data_as<float>();
    const int64_t n = output.num_elements();
    for (int64_t i = 0; i < n; ++i) values[i] = Clamp(values[i], d.activation);
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterConcatenation() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
