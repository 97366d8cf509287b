// RESHAPE: any dtype; the output's shape is the model's declared one (the
// shape input or new_shape option must agree on the element count).
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

}  // namespace dfarm::runtime
