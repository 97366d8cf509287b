// CONV_2D, float32: input [N,H,W,Cin] (NHWC), filter [Cout,KH,KW,Cin] (OHWI),
// optional bias [Cout], output [N,OH,OW,Cout]; SAME/VALID padding, dilation
// and a fused activation.
#include <cstring>
#include <vector>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct Conv2DData : OpData {
  int stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int pad_top = 0, pad_left = 0;
  int kernel_h = 0, kernel_w = 0;
  ActivationRange activation{};
  // The filter repacked to [KH][KW][Cin][Cout], so the innermost loop runs
  // over contiguous output channels (it vectorizes without reassociation).
  std::vector<float> packed_filter;
  std::vector<float> bias;  // [Cout]; zeros when the op has no bias
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 3, 1));
  const tflite::Conv2DOptions* options = node.options<tflite::Conv2DOptions>();
  if (options == nullptr) return Status::Error("Conv2DOptions are missing");
  Tensor* input = node.inputs[0];
  Tensor* filter = node.inputs[1];
  Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(filter, "filter"));
  if (bias != nullptr) DFARM_RETURN_IF_ERROR(CheckFloat32(bias, "bias"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  if (input->rank() != 4 || filter->rank() != 4) {
    return Status::Error("input and filter must be 4-D, got " + ShapeToString(input->shape) +
                         " and " + ShapeToString(filter->shape));
  }
  const int batches = input->shape[0], in_h = input->shape[1], in_w = input->shape[2];
  const int in_c = input->shape[3];
  const int out_c = filter->shape[0], k_h = filter->shape[1], k_w = filter->shape[2];
  if (filter->shape[3] != in_c) {
    if (filter->shape[3] > 0 && in_c % filter->shape[3] == 0) {
      return Status::Unsupported("grouped convolution (input has " + std::to_string(in_c) +
                                 " channels, filter " + std::to_string(filter->shape[3]) +
                                 ") is not supported");
    }
    return Status::Error("filter " + ShapeToString(filter->shape) + " does not match input " +
                         ShapeToString(input->shape) + " channels");
  }
  if (bias != nullptr && (bias->rank() != 1 || bias->shape[0] != out_c)) {
    return Status::Error("bias must be [" + std::to_string(out_c) + "], got " +
                         ShapeToString(bias->shape));
  }
  auto data = std::make_unique<Conv2DData>();
  data->stride_h = options->stride_h();
  data->stride_w = options->stride_w();
  data->dilation_h = options->dilation_h_factor();
  data->dilation_w = options->dilation_w_factor();
  DFARM_RETURN_IF_ERROR(CheckWindowParams(options->padding(), data->stride_h, data->stride_w,
                                          data->dilation_h, data->dilation_w));
  DFARM_RETURN_IF_ERROR(
      GetActivationRange(options->fused_activation_function(), &data->activation));
  WindowDim h = ComputeWindowDim(options->padding(), in_h, k_h, data->stride_h, data->dilation_h);
  WindowDim w = ComputeWindowDim(options->padding(), in_w, k_w, data->stride_w, data->dilation_w);
  const int32_t computed[] = {batches, h.out, w.out, out_c};
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  data->pad_top = h.pad_before;
  data->pad_left = w.pad_before;
  data->kernel_h = k_h;
  data->kernel_w = k_w;

  if (!filter->has_static_value() || (bias != nullptr && !bias->has_static_value())) {
    return Status::Unsupported("a filter or bias computed at run time is not supported");
  }
  const float* f = filter->data_as<float>();
  data->packed_filter.resize(static_cast<size_t>(filter->num_elements()));
  for (int o = 0; o < out_c; ++o) {
    for (int ky = 0; ky < k_h; ++ky) {
      for (int kx = 0; kx < k_w; ++kx) {
        for (int i = 0; i < in_c; ++i) {
          data->packed_filter[((static_cast<size_t>(ky) * k_w + kx) * in_c + i) * out_c + o] =
              f[((static_cast<size_t>(o) * k_h + ky) * k_w + kx) * in_c + i];
        }
      }
    }
  }
  data->bias.assign(out_c, 0.0f);
  if (bias != nullptr) std::memcpy(data->bias.data(), bias->data, out_c * sizeof(float));
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node) {
  const Conv2DData& d = *node.data_as<Conv2DData>();
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  const int batches = input.shape[0], in_h = input.shape[1], in_w = input.shape[2];
  const int in_c = input.shape[3];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const float* in = input.data_as<float>();
  float* out = output.data_as<float>();
  const float* filter = d.packed_filter.data();
  const size_t tap_stride = static_cast<size_t>(in_c) * out_c;

  for (int n = 0; n < batches; ++n) {
    for (int oy = 0; oy < out_h; ++oy) {
      const int iy0 = oy * d.stride_h - d.pad_top;
      for (int ox = 0; ox < out_w; ++ox) {
        const int ix0 = ox * d.stride_w - d.pad_left;
        float* __restrict acc = out + ((static_cast<size_t>(n) * out_h + oy) * out_w + ox) * out_c;
        std::memcpy(acc, d.bias.data(), out_c * sizeof(float));
        for (int ky = 0; ky < d.kernel_h; ++ky) {
          const int iy = iy0 + ky * d.dilation_h;
          if (iy < 0 || iy >= in_h) continue;
          for (int kx = 0; kx < d.kernel_w; ++kx) {
            const int ix = ix0 + kx * d.dilation_w;
            if (ix < 0 || ix >= in_w) continue;
            const float* px = in + ((static_cast<size_t>(n) * in_h + iy) * in_w + ix) * in_c;
            const float* tap = filter + (static_cast<size_t>(ky) * d.kernel_w + kx) * tap_stride;
            for (int ic = 0; ic < in_c; ++ic) {
              const float v = px[ic];
              const float* __restrict w = tap + static_cast<size_t>(ic) * out_c;
              for (int oc = 0; oc < out_c; ++oc) acc[oc] += v * w[oc];
            }
          }
        }
        for (int oc = 0; oc < out_c; ++oc) acc[oc] = Clamp(acc[oc], d.activation);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterConv2D() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
