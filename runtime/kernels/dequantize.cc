// DEQUANTIZE to float32: from float16, and from int8/uint8 with affine
// quantization (real = scale * (q - zero_point)), per tensor or per channel
// (slice c of quantized_dimension uses scales[c] and zero_points[c]).
#include <cstdint>

#include "runtime/fp16.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor* input = node.inputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat32(node.outputs[0], "output"));
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], input->shape));
  switch (input->dtype) {
    case DType::kFloat16:
      return Status::Ok();
    case DType::kInt8:
    case DType::kUint8:
      if (!input->quantized) return Status::Error("input has no quantization parameters");
      if (input->per_channel_quantized) {
        const int dim = input->quantized_dimension;
        if (dim < 0 || dim >= input->rank() || input->scales.size() != input->zero_points.size() ||
            static_cast<int64_t>(input->scales.size()) != input->shape[dim]) {
          return Status::Error("per-channel quantization of input " + ShapeToString(input->shape) +
                               " along dimension " + std::to_string(dim) + " does not match its " +
                               std::to_string(input->scales.size()) + " scales");
        }
      }
      return Status::Ok();
    default:
      return Status::Unsupported(std::string("input dtype ") + DTypeName(input->dtype) +
                                 " is not supported (float16, int8, uint8)");
  }
}

template <typename T>
void Affine(const Tensor& input, float* out) {
  const T* in = input.data_as<T>();
  const int64_t n = input.num_elements();
  if (input.per_channel_quantized) {
    int64_t inner = 1;
    for (int d = input.quantized_dimension + 1; d < input.rank(); ++d) inner *= input.shape[d];
    const int64_t channels = input.shape[input.quantized_dimension];
    for (int64_t i = 0; i < n; ++i) {
      const size_t c = static_cast<size_t>((i / inner) % channels);
      out[i] = input.scales[c] * static_cast<float>(static_cast<int32_t>(in[i]) -
                                                    static_cast<int32_t>(input.zero_points[c]));
    }
    return;
  }
  const float scale = input.scale;
  const int32_t zero_point = static_cast<int32_t>(input.zero_point);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = scale * static_cast<float>(static_cast<int32_t>(in[i]) - zero_point);
  }
}

Status Eval(Node& node) {
  const Tensor& input = *node.inputs[0];
  float* out = node.outputs[0]->data_as<float>();
  switch (input.dtype) {
    case DType::kFloat16: {
      const uint16_t* in = input.data_as<uint16_t>();
      const int64_t n = input.num_elements();
      for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
      break;
    }
    case DType::kInt8:
      Affine<int8_t>(input, out);
      break;
    case DType::kUint8:
      Affine<uint8_t>(input, out);
      break;
    default:
      return Status::Unsupported("unexpected input dtype");
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterDequantize() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
