// GATHER, any dtype (float32, int8, uint8, int32, ...: the bytes are copied):
// params (input 0), indices (input 1, int32/int64, may be computed at run
// time), GatherOptions axis (negative counts from the end) and batch_dims
// (negative: plus the indices' rank; 0 <= batch_dims <= axis, and the first
// batch_dims dims of params and indices must agree), as TFLite. The output is
// params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis+1:]:
// out[b, o, i, n] = params[b, o, indices[b, i], n]. An index outside
// [0, params.shape[axis]) is an error at Invoke().
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct GatherData : OpData {
  int64_t batch = 1, outer = 1, axis_size = 0, inner_bytes = 0, num_indices = 0;
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const auto* options = node.options<tflite::GatherOptions>();
  const Tensor* params = node.inputs[0];
  const Tensor* indices = node.inputs[1];
  DFARM_RETURN_IF_ERROR(CheckSameDType(params, "params", node.outputs[0], "output"));
  if (indices == nullptr) return Status::Error("indices are missing");
  if (indices->dtype != DType::kInt32 && indices->dtype != DType::kInt64) {
    return Status::Error(std::string("indices must be int32 or int64, got ") +
                         DTypeName(indices->dtype));
  }
  int axis = 0;
  DFARM_RETURN_IF_ERROR(
      NormalizeAxis(options != nullptr ? options->axis() : 0, params->rank(), "axis", &axis));
  const int declared_batch_dims = options != nullptr ? options->batch_dims() : 0;
  int batch_dims = declared_batch_dims;
  if (batch_dims < 0) batch_dims += indices->rank();
  if (batch_dims < 0 || batch_dims > axis || batch_dims > indices->rank()) {
    return Status::Error("batch_dims " + std::to_string(declared_batch_dims) +
                         " is out of range: it must be in [0, axis " + std::to_string(axis) +
                         "] and at most the indices' rank " + std::to_string(indices->rank()));
  }
  for (int d = 0; d < batch_dims; ++d) {
    if (params->shape[d] != indices->shape[d]) {
      return Status::Error("dimension " + std::to_string(d) + " of params " +
                           ShapeToString(params->shape) + " and indices " +
                           ShapeToString(indices->shape) + " must agree (batch_dims " +
                           std::to_string(batch_dims) + ")");
    }
  }
  std::vector<int32_t> computed(params->shape.begin(), params->shape.begin() + axis);
  computed.insert(computed.end(), indices->shape.begin() + batch_dims, indices->shape.end());
  computed.insert(computed.end(), params->shape.begin() + axis + 1, params->shape.end());
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], computed));
  auto data = std::make_unique<GatherData>();
  int64_t inner = 1;
  for (int d = 0; d < params->rank(); ++d) {
    if (d < batch_dims) data->batch *= params->shape[d];
    if (d >= batch_dims && d < axis) data->outer *= params->shape[d];
    if (d > axis) inner *= params->shape[d];
  }
  data->axis_size = params->shape[axis];
  data->inner_bytes = inner * static_cast<int64_t>(DTypeSize(params->dtype));
  data->num_indices = 1;
  for (int d = batch_dims; d < indices->rank(); ++d) data->num_indices *= indices->shape[d];
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node) {
  const GatherData& d = *node.data_as<GatherData>();
  const Tensor& params = *node.inputs[0];
  const Tensor& indices = *node.inputs[1];
  std::byte* out = node.outputs[0]->data;
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t o = 0; o < d.outer; ++o) {
      const std::byte* base = params.data + (b * d.outer + o) * d.axis_size * d.inner_bytes;
      for (int64_t i = 0; i < d.num_indices; ++i) {
        const int64_t k = b * d.num_indices + i;
        const int64_t index = indices.dtype == DType::kInt32 ? indices.data_as<int32_t>()[k]
                                                             : indices.data_as<int64_t>()[k];
        if (index < 0 || index >= d.axis_size) {
          return Status::Error("index " + std::to_string(index) + " is out of range [0, " +
                               std::to_string(d.axis_size) + ")");
        }
        std::memcpy(out, base + index * d.inner_bytes, d.inner_bytes);
        out += d.inner_bytes;
      }
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
