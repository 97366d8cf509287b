// RELU, RELU6 and RELU_N1_TO_1, float32, elementwise.
#include <limits>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  DFARM_RETURN_IF_ERROR(CheckFloat32(node.inputs[0], "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(node.outputs[0], "output"));
  return CheckOutputShape(*node.outputs[0], node.inputs[0]->shape);
}

template <int kMin, int kMax>
Status Eval(Node& node) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr ActivationRange range = {static_cast<float>(kMin),
                                     kMax == 0 ? kInf : static_cast<float>(kMax)};
  const float* __restrict in = node.inputs[0]->data_as<float>();
  float* __restrict out = node.outputs[0]->data_as<float>();
  const int64_t n = node.inputs[0]->num_elements();
  for (int64_t i = 0; i < n; ++i) out[i] = Clamp(in[i], range);
  return Status::Ok();
}

}  // namespace

// kMax == 0 stands for no upper bound.
const OpRegistration* RegisterRelu() {
  static const OpRegistration registration = {&Prepare, &Eval<0, 0>};
  return &registration;
}

const OpRegistration* RegisterRelu6() {
  static const OpRegistration registration = {&Prepare, &Eval<0, 6>};
  return &registration;
}

const OpRegistration* RegisterReluN1To1() {
  static const OpRegistration registration = {&Prepare, &Eval<-1, 1>};
  return &registration;
}

}  // namespace dfarm::runtime
