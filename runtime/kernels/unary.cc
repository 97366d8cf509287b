// Elementwise unary ops, float32: HARD_SWISH (x * relu6(x + 3) / 6), LOGISTIC
// (1 / (1 + e^-x)), TANH, EXP, SQRT, RSQRT (1 / sqrt(x)), ABS, NEG and
// LEAKY_RELU (x >= 0 ? x : alpha * x, alpha from LeakyReluOptions).
#include <algorithm>
#include <cmath>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct UnaryData : OpData {
  float alpha = 0.0f;  // LEAKY_RELU
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  DFARM_RETURN_IF_ERROR(CheckFloat32(node.inputs[0], "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(node.outputs[0], "output"));
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], node.inputs[0]->shape));
  auto data = std::make_unique<UnaryData>();
  if (node.code == tflite::BuiltinOperator::LEAKY_RELU) {
    const auto* options = node.options<tflite::LeakyReluOptions>();
    if (options == nullptr) return Status::Error("LeakyReluOptions are missing");
    data->alpha = options->alpha();
  }
  node.data = std::move(data);
  return Status::Ok();
}

struct HardSwishOp {
  static float Apply(float x, float) { return x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
};
struct LogisticOp {
  static float Apply(float x, float) { return 1.0f / (1.0f + std::exp(-x)); }
};
struct TanhOp {
  static float Apply(float x, float) { return std::tanh(x); }
};
struct ExpOp {
  static float Apply(float x, float) { return std::exp(x); }
};
struct SqrtOp {
  static float Apply(float x, float) { return std::sqrt(x); }
};
struct RsqrtOp {
  static float Apply(float x, float) { return 1.0f / std::sqrt(x); }
};
struct AbsOp {
  static float Apply(float x, float) { return std::fabs(x); }
};
struct NegOp {
  static float Apply(float x, float) { return -x; }
};
struct LeakyReluOp {
  static float Apply(float x, float alpha) { return x >= 0.0f ? x : alpha * x; }
};

template <typename Op>
Status Eval(Node& node) {
  const float alpha = node.data_as<UnaryData>()->alpha;
  const float* __restrict in = node.inputs[0]->data_as<float>();
  float* __restrict out = node.outputs[0]->data_as<float>();
  const int64_t n = node.inputs[0]->num_elements();
  for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(in[i], alpha);
  return Status::Ok();
}

}  // namespace

#define DFARM_UNARY_REGISTRATION(Name)                                      \
  const OpRegistration* Register##Name() {                                  \
    static const OpRegistration registration = {&Prepare, &Eval<Name##Op>}; \
    return &registration;                                                   \
  }
DFARM_UNARY_REGISTRATION(HardSwish)
DFARM_UNARY_REGISTRATION(Logistic)
DFARM_UNARY_REGISTRATION(Tanh)
DFARM_UNARY_REGISTRATION(Exp)
DFARM_UNARY_REGISTRATION(Sqrt)
DFARM_UNARY_REGISTRATION(Rsqrt)
DFARM_UNARY_REGISTRATION(Abs)
DFARM_UNARY_REGISTRATION(Neg)
DFARM_UNARY_REGISTRATION(LeakyRelu)
#undef DFARM_UNARY_REGISTRATION

}  // namespace dfarm::runtime
