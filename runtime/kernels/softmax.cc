// Normalizations along the last dim, float32:
//   SOFTMAX:          exp(beta * (x - max)) / sum exp(beta * (x - max))
//   LOG_SOFTMAX:      (x - max) - log(sum exp(x - max))
//   L2_NORMALIZATION: x / max(sqrt(sum x^2), 1e-6), then the fused activation
// SOFTMAX also takes int8 and uint8 (same dtype in and out), with the output
// quantized as TFLite requires (scale 1/256, zero point -128 for int8, 0 for
// uint8), computed as TFLite's optimized kernel does: a float table of
// exp(-input_scale * beta * k) for k in [0, 255], a float sum per row, and
// each probability rounded to the output scale.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {
namespace {

struct NormData : OpData {
  float beta = 1.0f;
  ActivationRange activation{};
  std::array<float, 256> table{};  // quantized SOFTMAX: table[255 - k] = exp(-scale * beta * k)
};

Status PrepareQuantizedSoftmax(const Node& node, NormData* d) {
  const Tensor& input = *node.inputs[0];
  const Tensor& output = *node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(&input, "input", &output, "output"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(output, "output"));
  const int32_t want_zp = output.dtype == DType::kInt8 ? -128 : 0;
  if (output.zero_point != want_zp || std::fabs(output.scale - 1.0f / 256) > 0.001f / 256) {
    return Status::Error(std::string("output must have scale 1/256 and zero point ") +
                         std::to_string(want_zp) + " (" + DTypeName(output.dtype) + "), got " +
                         std::to_string(output.scale) + " and " +
                         std::to_string(output.zero_point));
  }
  const float scale = -input.scale * d->beta;
  for (int32_t val = 0; val <= 255; ++val) d->table[255 - val] = std::exp(scale * val);
  return Status::Ok();
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor* input = node.inputs[0];
  const bool quantized = input->dtype == DType::kInt8 || input->dtype == DType::kUint8;
  if (!quantized || node.code != tflite::BuiltinOperator::SOFTMAX) {
    DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(node.outputs[0], "output"));
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], input->shape));
  if (input->rank() < 1) return Status::Error("input must have at least one dimension");
  auto data = std::make_unique<NormData>();
  data->activation = {-std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::infinity()};
  if (node.code == tflite::BuiltinOperator::SOFTMAX) {
    const auto* options = node.options<tflite::SoftmaxOptions>();
    if (options == nullptr) return Status::Error("SoftmaxOptions are missing");
    data->beta = options->beta();
    if (quantized) DFARM_RETURN_IF_ERROR(PrepareQuantizedSoftmax(node, data.get()));
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

template <typename T>
void SoftmaxQuantized(const NormData& d, const Tensor& input, Tensor& output) {
  const int64_t depth = input.shape.back();
  const int64_t rows = input.num_elements() / depth;
  const T* in = input.data_as<T>();
  T* out = output.data_as<T>();
  const float output_scale = output.scale;
  const int32_t zero_point = ZeroPoint(output);
  constexpr int32_t kMin = std::numeric_limits<T>::min();
  constexpr int32_t kMax = std::numeric_limits<T>::max();
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in + r * depth;
    T* y = out + r * depth;
    int32_t max_val = kMin;
    for (int64_t j = 0; j < depth; ++j) max_val = std::max(max_val, static_cast<int32_t>(x[j]));
    // Entry 255 - max + x[j] = exp(-scale * beta * (max - x[j])).
    const float* table = d.table.data() + (255 - max_val);
    float sum_exp = 0.0f;
    for (int64_t j = 0; j < depth; ++j) sum_exp += table[x[j]];
    const float inv_sum_exp = 1.0f / (sum_exp * output_scale);
    for (int64_t j = 0; j < depth; ++j) {
      const float prob_rescaled = table[x[j]] * inv_sum_exp;
      int32_t q;
      if constexpr (std::is_same_v<T, uint8_t>) {
        q = static_cast<int32_t>(prob_rescaled + 0.5f);  // TFLite's uint8 rounding (zero point 0)
      } else {
        q = static_cast<int32_t>(std::round(prob_rescaled)) + zero_point;
      }
      y[j] = static_cast<T>(std::clamp(q, kMin, kMax));
    }
  }
}

template <Kind kKind>
Status Eval(Node& node) {
  const NormData& d = *node.data_as<NormData>();
  const Tensor& input = *node.inputs[0];
  const int64_t depth = input.shape.back();
  if (depth == 0) return Status::Ok();
  if constexpr (kKind == Kind::kSoftmax) {
    if (input.dtype == DType::kInt8) {
      SoftmaxQuantized<int8_t>(d, input, *node.outputs[0]);
      return Status::Ok();
    }
    if (input.dtype == DType::kUint8) {
      SoftmaxQuantized<uint8_t>(d, input, *node.outputs[0]);
      return Status::Ok();
    }
  }
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
