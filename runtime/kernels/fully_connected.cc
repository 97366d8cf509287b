// FULLY_CONNECTED, float32: input [..., K] (read as [B, K], B = elements / K),
// weights [N, K] (default format only), optional bias [N], fused activation.
// The output is [B, N], or with keep_num_dims the input's shape with its last
// dim replaced by N.
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct FullyConnectedData : OpData {
  int64_t batches = 0;
  int units = 0, depth = 0;
  ActivationRange activation{};
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 3, 1));
  const auto* options = node.options<tflite::FullyConnectedOptions>();
  const Tensor* input = node.inputs[0];
  const Tensor* weights = node.inputs[1];
  const Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(weights, "weights"));
  if (bias != nullptr) DFARM_RETURN_IF_ERROR(CheckFloat32(bias, "bias"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  if (options != nullptr && options->weights_format() != 0) {
    return Status::Unsupported("weights format " + std::to_string(options->weights_format()) +
                               " is not supported (only the default one)");
  }
  if (weights->rank() != 2 || input->rank() < 1) {
    return Status::Error("weights must be 2-D and input at least 1-D, got " +
                         ShapeToString(weights->shape) + " and " + ShapeToString(input->shape));
  }
  auto data = std::make_unique<FullyConnectedData>();
  data->units = weights->shape[0];
  data->depth = weights->shape[1];
  if (data->depth <= 0 || input->num_elements() % data->depth != 0) {
    return Status::Error("input " + ShapeToString(input->shape) + " does not split into rows of " +
                         std::to_string(data->depth) + " (weights " +
                         ShapeToString(weights->shape) + ")");
  }
  data->batches = input->num_elements() / data->depth;
  if (bias != nullptr && bias->num_elements() != data->units) {
    return Status::Error("bias must hold " + std::to_string(data->units) + " values, got " +
                         ShapeToString(bias->shape));
  }
  std::vector<int32_t> computed;
  if (options != nullptr && options->keep_num_dims()) {
    if (input->shape.back() != data->depth) {
      return Status::Error("with keep_num_dims the input's last dim must be " +
                           std::to_string(data->depth) + ", got " + ShapeToString(input->shape));
    }
    computed = input->shape;
    computed.back() = data->units;
  } else {
    computed = {static_cast<int32_t>(data->batches), data->units};
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  DFARM_RETURN_IF_ERROR(GetActivationRange(options != nullptr
                                               ? options->fused_activation_function()
                                               : tflite::ActivationFunctionType::NONE,
                                           &data->activation));
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node) {
  const FullyConnectedData& d = *node.data_as<FullyConnectedData>();
  const float* in = node.inputs[0]->data_as<float>();
  const float* w = node.inputs[1]->data_as<float>();
  const Tensor* bias_t = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  const float* bias = bias_t != nullptr ? bias_t->data_as<float>() : nullptr;
  float* out = node.outputs[0]->data_as<float>();
  for (int64_t b = 0; b < d.batches; ++b) {
    const float* x = in + b * d.depth;
    for (int u = 0; u < d.units; ++u) {
      const float* row = w + static_cast<size_t>(u) * d.depth;
      float acc = 0.0f;
      for (int k = 0; k < d.depth; ++k) acc += x[k] * row[k];
      if (bias != nullptr) acc += bias[u];
      out[b * d.units + u] = Clamp(acc, d.activation);
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterFullyConnected() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
