// GATHER, any dtype: params (input 0), indices (input 1, int32/int64, may be
// computed at run time), GatherOptions axis; batch_dims must be 0. The output
// is params.shape[:axis] + indices.shape + params.shape[axis+1:]. An index
// outside [0, params.shape[axis]) is an error at Invoke().
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct GatherData : OpData {
  int64_t outer = 1, axis_size = 0, inner_bytes = 0, num_indices = 0;
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const auto* options = node.options<tflite::GatherOptions>();
  const Tensor* params = node.inputs[0];
  const Tensor* indices = node.inputs[1];
  DFARM_RETURN_IF_ERROR(CheckSameDType(params, "params", node.outputs[0], "output"));
  if (indices->dtype != DType::kInt32 && indices->dtype != DType::kInt64) {
    return Status::Error(std::string("indices must be int32 or int64, got ") +
                         DTypeName(indices->dtype));
  }
  if (options != nullptr && options->batch_dims() != 0) {
    return Status::Unsupported("batch_dims " + std::to_string(options->batch_dims()) +
                               " is not supported (only 0)");
  }
  int axis = 0;
  DFARM_RETURN_IF_ERROR(
      NormalizeAxis(options != nullptr ? options->axis() : 0, params->rank(), "axis", &axis));
  std::vector<int32_t> computed(params->shape.begin(), params->shape.begin() + axis);
  computed.insert(computed.end(), indices->shape.begin(), indices->shape.end());
  computed.insert(computed.end(), params->shape.begin() + axis + 1, params->shape.end());
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], computed));
  auto data = std::make_unique<GatherData>();
  int64_t inner = 1;
  for (int d = 0; d < params->rank(); ++d) {
    if (d < axis) data->outer *= params->shape[d];
    if (d > axis) inner *= params->shape[d];
  }
  data->axis_size = params->shape[axis];
  data->inner_bytes = inner * static_cast<int64_t>(DTypeSize(params->dtype));
  data->num_indices = indices->num_elements();
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node) {
  const GatherData& d = *node.data_as<GatherData>();
  const Tensor& params = *node.inputs[0];
  const Tensor& indices = *node.inputs[1];
  std::byte* out = node.outputs[0]->data;
  for (int64_t o = 0; o < d.outer; ++o) {
    const std::byte* base = params.data + o * d.axis_size * d.inner_bytes;
    for (int64_t i = 0; i < d.num_indices; ++i) {
      const int64_t index = indices.dtype == DType::kInt32 ? indices.data_as<int32_t>()[i]
                                                           : indices.data_as<int64_t>()[i];
      if (index < 0 || index >= d.axis_size) {
        return Status::Error("index " + std::to_string(index) + " is out of range [0, " +
                             std::to_string(d.axis_size) + ")");
      }
      std::memcpy(out, base + index * d.inner_bytes, d.inner_bytes);
      out += d.inner_bytes;
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterGather() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
