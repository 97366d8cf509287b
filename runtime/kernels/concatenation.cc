// CONCATENATION along one axis: any dtype without a fused activation,
// float32 with one.
#include <cstring>
#include <vector>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct ConcatData : OpData {
  int64_t outer = 1;                // product of the dims before the axis
  std::vector<size_t> chunk_bytes;  // per input: bytes copied per outer index
  bool clamp = false;
  ActivationRange activation{};
};

Status Prepare(Node& node) {
  if (node.inputs.empty() || node.outputs.size() != 1) {
    return Status::Error("expected at least 1 input and 1 output");
  }
  const auto* options = node.options<tflite::ConcatenationOptions>();
  if (options == nullptr) return Status::Error("ConcatenationOptions are missing");
  const Tensor* output = node.outputs[0];
  const int rank = output->rank();
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
  for (int i = axis + 1; i < rank; ++i) inner *= output->shape[i];
  for (int i = 0; i < axis; ++i) data->outer *= output->shape[i];
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
                           std::to_string(input->rank()) + ", output has " + std::to_string(rank));
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
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node) {
  const ConcatData& d = *node.data_as<ConcatData>();
  Tensor& output = *node.outputs[0];
  std::byte* out = output.data;
  for (int64_t o = 0; o < d.outer; ++o) {
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const size_t n = d.chunk_bytes[k];
      std::memcpy(out, node.inputs[k]->data + o * n, n);
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
