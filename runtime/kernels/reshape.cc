// RESHAPE: any dtype; the output's shape is the model's declared one (the
// shape input or new_shape option must agree on the element count).
// SQUEEZE (drops the size-1 dims in squeeze_dims, or all of them) and
// EXPAND_DIMS (inserts a 1 at the axis of input 1) copy the same way, after
// checking the declared shape against the one they compute.
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 2, 1));
  const Tensor* input = node.inputs[0];
  const Tensor* output = node.outputs[0];
  if (output->dtype != input->dtype) {
    return Status::Error(std::string("output dtype ") + DTypeName(output->dtype) +
                         " differs from input dtype " + DTypeName(input->dtype));
  }
  if (output->num_elements() != input->num_elements()) {
    return Status::Error("cannot reshape " + ShapeToString(input->shape) + " (" +
                         std::to_string(input->num_elements()) + " elements) to " +
                         ShapeToString(output->shape));
  }
  return Status::Ok();
}

Status PrepareSqueeze(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor* input = node.inputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", node.outputs[0], "output"));
  const int rank = input->rank();
  std::vector<bool> drop(rank, false);
  const auto* options = node.options<tflite::SqueezeOptions>();
  if (options == nullptr || options->squeeze_dims() == nullptr ||
      options->squeeze_dims()->size() == 0) {
    for (int i = 0; i < rank; ++i) drop[i] = input->shape[i] == 1;
  } else {
    for (int32_t a : *options->squeeze_dims()) {
      int axis = 0;
      DFARM_RETURN_IF_ERROR(NormalizeAxis(a, rank, "squeeze dim", &axis));
      if (input->shape[axis] != 1) {
        return Status::Error("cannot squeeze dimension " + std::to_string(axis) + " of " +
                             ShapeToString(input->shape) + ": its size is not 1");
      }
      drop[axis] = true;
    }
  }
  std::vector<int32_t> computed;
  for (int i = 0; i < rank; ++i) {
    if (!drop[i]) computed.push_back(input->shape[i]);
  }
  return CheckOutputShape(*node.outputs[0], computed);
}

Status PrepareExpandDims(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* input = node.inputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", node.outputs[0], "output"));
  std::vector<int64_t> axis_value;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "axis", &axis_value));
  if (axis_value.size() != 1) return Status::Error("axis must hold one value");
  int axis = 0;
  DFARM_RETURN_IF_ERROR(NormalizeAxis(axis_value[0], input->rank() + 1, "axis", &axis));
  std::vector<int32_t> computed = input->shape;
  computed.insert(computed.begin() + axis, 1);
  return CheckOutputShape(*node.outputs[0], computed);
}

Status Eval(Node& node) {
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  if (output.data != input.data) std::memcpy(output.data, input.data, output.bytes);
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterReshape() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

const OpRegistration* RegisterSqueeze() {
  static const OpRegistration registration = {&PrepareSqueeze, &Eval};
  return &registration;
}

const OpRegistration* RegisterExpandDims() {
  static const OpRegistration registration = {&PrepareExpandDims, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
