// QUANTIZE: float32 -> int8/uint8 (round(x / scale) + zero_point, saturated),
// and int8/uint8 -> int8/uint8 requantization with TFLite's fixed-point
// multiplier (input_scale / output_scale). Per-tensor quantization only.
#include <cstdint>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {
namespace {

struct QuantizeData : OpData {
  int32_t multiplier = 0;  // requantization only
  int shift = 0;
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckOutputShape(output, input.shape));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(output, "output"));
  auto data = std::make_unique<QuantizeData>();
  if (input.dtype == DType::kInt8 || input.dtype == DType::kUint8) {
    DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(input, "input"));
    const double multiplier = static_cast<double>(input.scale) / static_cast<double>(output.scale);
    QuantizeMultiplier(multiplier, &data->multiplier, &data->shift);
    if (data->shift > 30) {
      return Status::Unsupported("requantization multiplier " + std::to_string(multiplier) +
                                 " (input scale / output scale) is too large");
    }
  } else if (input.dtype != DType::kFloat32) {
    return Status::Unsupported(std::string("QUANTIZE: ") + DTypeName(input.dtype) + " to " +
                               DTypeName(output.dtype) +
                               " is not supported (float32, int8 or uint8 to int8 or uint8)");
  }
  node.data = std::move(data);
  return Status::Ok();
}

template <typename Out>
void FromFloat(const Tensor& input, Tensor& output) {
  const float* in = input.data_as<float>();
  Out* out = output.data_as<Out>();
  const float scale = output.scale;
  const int32_t zero_point = ZeroPoint(output);
  const int64_t n = input.num_elements();
  for (int64_t i = 0; i < n; ++i) out[i] = QuantizeValue<Out>(in[i], scale, zero_point);
}

template <typename In, typename Out>
void Requantize(const QuantizeData& d, const Tensor& input, Tensor& output) {
  const In* in = input.data_as<In>();
  Out* out = output.data_as<Out>();
  const int32_t in_zp = ZeroPoint(input);
  const int32_t out_zp = ZeroPoint(output);
  const int64_t n = input.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t q =
        MultiplyByQuantizedMultiplier(static_cast<int32_t>(in[i]) - in_zp, d.multiplier, d.shift) +
        out_zp;
    out[i] = static_cast<Out>(
        std::clamp<int32_t>(q, std::numeric_limits<Out>::min(), std::numeric_limits<Out>::max()));
  }
}

template <typename Out>
void Dispatch(const QuantizeData& d, const Tensor& input, Tensor& output) {
  switch (input.dtype) {
    case DType::kFloat32:
      FromFloat<Out>(input, output);
      break;
    case DType::kInt8:
      Requantize<int8_t, Out>(d, input, output);
      break;
    default:
      Requantize<uint8_t, Out>(d, input, output);
      break;
  }
}

Status Eval(Node& node) {
  const QuantizeData& d = *node.data_as<QuantizeData>();
  if (node.outputs[0]->dtype == DType::kInt8) {
    Dispatch<int8_t>(d, *node.inputs[0], *node.outputs[0]);
  } else {
    Dispatch<uint8_t>(d, *node.inputs[0], *node.outputs[0]);
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterQuantize() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
