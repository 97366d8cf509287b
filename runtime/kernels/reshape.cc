// RESHAPE: any dtype; the output's shape is the model's declared one, or,
// when the model leaves it to the op (declared [] or -1 in shape_signature),
// the one TFLite computes: the shape input when it is a vector (static
// values), else new_shape ([0] meaning a scalar), one -1 taking the rest.
// Either way the requested shape, when the node has one with static values,
// must hold the input's element count, as TFLite requires ("Cannot
// reshape"): a new_shape of [2147483647,2147483647] is an error even where
// the declared output shape fits the input.
// SQUEEZE (drops the size-1 dims in squeeze_dims, or all of them) and
// EXPAND_DIMS (inserts a 1 at the axis of input 1) copy the same way, after
// checking the declared shape against the one they compute.
#include <cstring>
#include <limits>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model.h"

namespace dfarm::runtime {
namespace {

// The shape requested by the shape input or the new_shape option, -1 kept;
// false in found_out when the node has neither, or (unless `required`) only
// a shape input computed at run time.
Status RequestedShape(const Node& node, bool required, std::vector<int64_t>* shape_out,
                      bool* found_out) {
  *found_out = true;
  const Tensor* shape = node.inputs.size() == 2 ? node.inputs[1] : nullptr;
  if (shape != nullptr && shape->rank() == 1) {
    if (!required && !shape->has_static_value()) {
      *found_out = false;
      return Status::Ok();
    }
    return ReadStaticInts(shape, "shape", shape_out);
  }
  const auto* options = node.options<tflite::ReshapeOptions>();
  if (options == nullptr || options->new_shape() == nullptr) {
    *found_out = false;
    return Status::Ok();
  }
  shape_out->assign(options->new_shape()->begin(), options->new_shape()->end());
  if (shape_out->size() == 1 && (*shape_out)[0] == 0) shape_out->clear();  // legacy scalar
  return Status::Ok();
}

// The output shape TFLite computes; the declared one when nothing requests
// one (see RequestedShape; `required`: the output is open).
Status ComputeReshape(const Node& node, bool required, std::vector<int32_t>* computed_out) {
  std::vector<int64_t> requested;
  bool found = false;
  DFARM_RETURN_IF_ERROR(RequestedShape(node, required, &requested, &found));
  if (!found) {
    *computed_out = node.outputs[0]->shape;
    return Status::Ok();
  }
  int stretch = -1;
  int64_t known = 1;
  for (size_t i = 0; i < requested.size(); ++i) {
    const int64_t d = requested[i];
    if (d == -1 && stretch < 0) {
      stretch = static_cast<int>(i);
    } else if (d < 0 || d > std::numeric_limits<int32_t>::max()) {
      return Status::Error("requested shape has dimension " + std::to_string(i) + " = " +
                           std::to_string(d));
    } else {
      known = d == 0 || known <= kMaxTensorElements / d ? known * d : kMaxTensorElements + 1;
    }
  }
  const Tensor& input = *node.inputs[0];
  const int64_t elements = input.num_elements();
  if (stretch >= 0) {
    if (known == 0 || elements % known != 0) {
      return Status::Error("cannot fill the -1 of the requested shape: " +
                           std::to_string(elements) + " elements by " + std::to_string(known));
    }
    requested[stretch] = elements / known;
  } else if (known != elements) {
    std::vector<int32_t> shown(requested.begin(), requested.end());
    return Status::Error("cannot reshape " + ShapeToString(input.shape) + " (" +
                         std::to_string(elements) + " elements) to the requested shape " +
                         ShapeToString(shown) + " (" +
                         (known > kMaxTensorElements ? "over " + std::to_string(kMaxTensorElements)
                                                     : std::to_string(known)) +
                         " elements)");
  }
  computed_out->assign(requested.begin(), requested.end());
  return Status::Ok();
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 2, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  if (output->dtype != input->dtype) {
    return Status::Error(std::string("output dtype ") + DTypeName(output->dtype) +
                         " differs from input dtype " + DTypeName(input->dtype));
  }
  const bool open = DeclaredShapeIsOpen(*output);
  std::vector<int32_t> computed;
  if (open) {
    DFARM_RETURN_IF_ERROR(ComputeReshape(node, /*required=*/true, &computed));
    DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  }
  if (output->num_elements() != input->num_elements()) {
    return Status::Error("cannot reshape " + ShapeToString(input->shape) + " (" +
                         std::to_string(input->num_elements()) + " elements) to " +
                         ShapeToString(output->shape));
  }
  // The declared shape wins, but a request TFLite would refuse is refused.
  if (!open) return ComputeReshape(node, /*required=*/false, &computed);
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
