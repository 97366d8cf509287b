// Transposed convolution, float32, NHWC with filter [Cout,KH,KW,Cin] (OHWI):
// each input pixel scatters input x filter into a KHxKW window of the output
// at (in_y * stride - pad_top, in_x * stride - pad_left); cells outside the
// output are dropped.
//
// TRANSPOSE_CONV: inputs output_shape ([4] int32, before Invoke()), filter,
// input and an optional bias [Cout]; TransposeConvOptions padding, strides and
// fused activation. Padding as TFLite computes it from the output's size:
// pad_before of a forward window over the output (see ComputeWindowDim).
//
// Convolution2DTransposeBias (MediaPipe's custom op): inputs input, filter,
// bias [Cout]. custom_options hold three little-endian int32: padding
// (1 SAME, 2 VALID, as TfLitePadding), stride_width, stride_height. The output
// is stride * (in - 1) + K - pad_total per spatial dim, where pad_total is
// max(0, K - (in - 1) % stride - 1) for SAME and 0 for VALID, and pad_before
// is pad_total / 2.
#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct TransposeConvData : OpData {
  const Tensor* input = nullptr;
  const Tensor* filter = nullptr;
  const Tensor* bias = nullptr;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0;
  ActivationRange activation{};
};

// Checks dtypes and ranks common to both ops.
Status CheckTensors(const Tensor* input, const Tensor* filter, const Tensor* bias,
                    const Tensor* output) {
  DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(filter, "filter"));
  if (bias != nullptr) DFARM_RETURN_IF_ERROR(CheckFloat32(bias, "bias"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  if (input->rank() != 4 || filter->rank() != 4) {
    return Status::Error("input and filter must be 4-D, got " + ShapeToString(input->shape) +
                         " and " + ShapeToString(filter->shape));
  }
  if (filter->shape[3] != input->shape[3]) {
    return Status::Error("filter " + ShapeToString(filter->shape) + " does not match input " +
                         ShapeToString(input->shape) + " channels");
  }
  if (bias != nullptr && bias->num_elements() != filter->shape[0]) {
    return Status::Error("bias must hold " + std::to_string(filter->shape[0]) + " values, got " +
                         ShapeToString(bias->shape));
  }
  return Status::Ok();
}

Status PrepareBuiltin(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 3, 4, 1));
  const auto* options = node.options<tflite::TransposeConvOptions>();
  if (options == nullptr) return Status::Error("TransposeConvOptions are missing");
  auto data = std::make_unique<TransposeConvData>();
  data->filter = node.inputs[1];
  data->input = node.inputs[2];
  data->bias = node.inputs.size() > 3 ? node.inputs[3] : nullptr;
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckTensors(data->input, data->filter, data->bias, output));
  std::vector<int64_t> shape;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[0], "output_shape", &shape));
  if (shape.size() != 4) return Status::Error("output_shape must hold 4 values");
  const int32_t computed[] = {static_cast<int32_t>(shape[0]), static_cast<int32_t>(shape[1]),
                              static_cast<int32_t>(shape[2]), static_cast<int32_t>(shape[3])};
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  if (output->shape[0] != data->input->shape[0] || output->shape[3] != data->filter->shape[0]) {
    return Status::Error("output " + ShapeToString(output->shape) + " does not match input " +
                         ShapeToString(data->input->shape) + " and filter " +
                         ShapeToString(data->filter->shape));
  }
  data->stride_h = options->stride_h();
  data->stride_w = options->stride_w();
  DFARM_RETURN_IF_ERROR(
      CheckWindowParams(options->padding(), data->stride_h, data->stride_w, 1, 1));
  DFARM_RETURN_IF_ERROR(
      GetActivationRange(options->fused_activation_function(), &data->activation));
  data->pad_top = ComputeWindowDim(options->padding(), output->shape[1], data->filter->shape[1],
                                   data->stride_h, 1)
                      .pad_before;
  data->pad_left = ComputeWindowDim(options->padding(), output->shape[2], data->filter->shape[2],
                                    data->stride_w, 1)
                       .pad_before;
  node.data = std::move(data);
  return Status::Ok();
}

Status PrepareMediaPipe(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 3, 3, 1));
  auto data = std::make_unique<TransposeConvData>();
  data->input = node.inputs[0];
  data->filter = node.inputs[1];
  data->bias = node.inputs[2];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckTensors(data->input, data->filter, data->bias, output));
  const flatbuffers::Vector<uint8_t>* custom = node.op->custom_options();
  int32_t params[3];  // padding, stride_width, stride_height
  if (custom == nullptr || custom->size() < sizeof(params)) {
    return Status::Error(
        "custom_options must hold 3 int32 (padding, stride_width, "
        "stride_height), got " +
        std::to_string(custom == nullptr ? 0 : custom->size()) + " bytes");
  }
  std::memcpy(params, custom->data(), sizeof(params));
  constexpr int32_t kSame = 1, kValid = 2;
  if (params[0] != kSame && params[0] != kValid) {
    return Status::Error("unknown padding " + std::to_string(params[0]) +
                         " in custom_options (1 SAME, 2 VALID)");
  }
  data->stride_w = params[1];
  data->stride_h = params[2];
  if (data->stride_h <= 0 || data->stride_w <= 0) {
    return Status::Error("strides must be positive, got " + std::to_string(data->stride_h) + "x" +
                         std::to_string(data->stride_w));
  }
  const int in_h = data->input->shape[1], in_w = data->input->shape[2];
  const int k_h = data->filter->shape[1], k_w = data->filter->shape[2];
  int pad_h = 0, pad_w = 0;
  if (params[0] == kSame && in_h > 0 && in_w > 0) {
    pad_h = std::max(0, k_h - (in_h - 1) % data->stride_h - 1);
    pad_w = std::max(0, k_w - (in_w - 1) % data->stride_w - 1);
  }
  const int32_t computed[] = {data->input->shape[0], data->stride_h * (in_h - 1) + k_h - pad_h,
                              data->stride_w * (in_w - 1) + k_w - pad_w, data->filter->shape[0]};
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  data->pad_top = pad_h / 2;
  data->pad_left = pad_w / 2;
  data->activation = {-std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::infinity()};
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node) {
  const TransposeConvData& d = *node.data_as<TransposeConvData>();
  const Tensor& input = *d.input;
  const Tensor& filter = *d.filter;
  Tensor& output = *node.outputs[0];
  const int batches = input.shape[0], in_h = input.shape[1], in_w = input.shape[2];
  const int in_c = input.shape[3];
  const int k_h = filter.shape[1], k_w = filter.shape[2];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const float* in = input.data_as<float>();
  const float* w = filter.data_as<float>();
  const float* bias = d.bias != nullptr ? d.bias->data_as<float>() : nullptr;
  float* out = output.data_as<float>();
  const int64_t out_pixels = static_cast<int64_t>(batches) * out_h * out_w;
  for (int64_t p = 0; p < out_pixels; ++p) {
    for (int oc = 0; oc < out_c; ++oc) out[p * out_c + oc] = bias != nullptr ? bias[oc] : 0.0f;
  }
  for (int n = 0; n < batches; ++n) {
    for (int iy = 0; iy < in_h; ++iy) {
      for (int ix = 0; ix < in_w; ++ix) {
        const float* px = in + ((static_cast<size_t>(n) * in_h + iy) * in_w + ix) * in_c;
        for (int ky = 0; ky < k_h; ++ky) {
          const int oy = iy * d.stride_h - d.pad_top + ky;
          if (oy < 0 || oy >= out_h) continue;
          for (int kx = 0; kx < k_w; ++kx) {
            const int ox = ix * d.stride_w - d.pad_left + kx;
            if (ox < 0 || ox >= out_w) continue;
            float* acc = out + ((static_cast<size_t>(n) * out_h + oy) * out_w + ox) * out_c;
            for (int oc = 0; oc < out_c; ++oc) {
              const float* tap = w + ((static_cast<size_t>(oc) * k_h + ky) * k_w + kx) * in_c;
              float sum = 0.0f;
              for (int ic = 0; ic < in_c; ++ic) sum += px[ic] * tap[ic];
              acc[oc] += sum;
            }
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < out_pixels * out_c; ++i) out[i] = Clamp(out[i], d.activation);
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterTransposeConv() {
  static const OpRegistration registration = {&PrepareBuiltin, &Eval};
  return &registration;
}

const OpRegistration* RegisterConvolution2DTransposeBias() {
  static const OpRegistration registration = {&PrepareMediaPipe, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
