// Normalizations along the last dim, float32:
//   SOFTMAX:          exp(beta * (x - max)) / sum exp(beta * (x - max))
//   LOG_SOFTMAX:      (x - max) - log(sum exp(x - max))
//   L2_NORMALIZATION: x / max(sqrt(sum x^2), 1e-6), then the fused activation
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct NormData : OpData {
  float beta = 1.0f;
  ActivationRange activation{};
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor* input = node.inputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(node.outputs[0], "output"));
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], input->shape));
  if (input->rank() < 1) return Status::Error("input must have at least one dimension");
  auto data = std::make_unique<NormData>();
  data->activation = {-std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::infinity()};
  if (node.code == tflite::BuiltinOperator::SOFTMAX) {
    const auto* options = node.options<tflite::SoftmaxOptions>();
    if (options == nullptr) return Status::Error("SoftmaxOptions are missing");
    data->beta = options->beta();
  } else if (node.code == tflite::BuiltinOperator::L2_NORMALIZATION) {
    const auto* options = node.options<tflite::L2NormOptions>();
    DFARM_RETURN_IF_ERROR(GetActivationRange(options != nullptr
                                                 ? options->fused_activation_function()
                                                 : tflite::ActivationFunctionType::NONE,
                                             &data->activation));
  }
  node.data = std::move(data);
  return Status::Ok();
}

enum class Kind { kSoftmax, kLogSoftmax, kL2 };

template <Kind kKind>
Status Eval(Node& node) {
  const NormData& d = *node.data_as<NormData>();
  const Tensor& input = *node.inputs[0];
  const int64_t depth = input.shape.back();
  if (depth == 0) return Status::Ok();
  const int64_t rows = input.num_elements() / depth;
  const float* in = input.data_as<float>();
  float* out = node.outputs[0]->data_as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * depth;
    float* y = out + r * depth;
    if constexpr (kKind == Kind::kL2) {
      float sum = 0.0f;
      for (int64_t i = 0; i < depth; ++i) sum += x[i] * x[i];
      const float norm = std::max(std::sqrt(sum), 1e-6f);
      for (int64_t i = 0; i < depth; ++i) y[i] = Clamp(x[i] / norm, d.activation);
    } else {
      const float max = *std::max_element(x, x + depth);
      float sum = 0.0f;
      if constexpr (kKind == Kind::kSoftmax) {
        for (int64_t i = 0; i < depth; ++i) {
          y[i] = std::exp((x[i] - max) * d.beta);
          sum += y[i];
        }
        for (int64_t i = 0; i < depth; ++i) y[i] /= sum;
      } else {
        for (int64_t i = 0; i < depth; ++i) sum += std::exp(x[i] - max);
        const float log_sum = std::log(sum);
        for (int64_t i = 0; i < depth; ++i) y[i] = (x[i] - max) - log_sum;
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterSoftmax() {
  static const OpRegistration registration = {&Prepare, &Eval<Kind::kSoftmax>};
  return &registration;
}

const OpRegistration* RegisterLogSoftmax() {
  static const OpRegistration registration = {&Prepare, &Eval<Kind::kLogSoftmax>};
  return &registration;
}

const OpRegistration* RegisterL2Normalization() {
  static const OpRegistration registration = {&Prepare, &Eval<Kind::kL2>};
  return &registration;
}

}  // namespace dfarm::runtime
