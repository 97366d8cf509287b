#include "delegates/xnnpack/xnnpack_nodes.h"

#include <cmath>
#include <limits>
#include <string>

#include "delegates/node_params.h"
#include "runtime/delegate.h"
#include "runtime/kernels/window.h"

namespace dfarm::delegates::xnnpack_internal {
namespace {

using runtime::DType;
using runtime::Node;
using runtime::Status;
using runtime::Tensor;
namespace tfl = ::dfarm::tflite;
using Op = tfl::BuiltinOperator;

constexpr float kInf = std::numeric_limits<float>::infinity();

Status Define(xnn_status s, const Node& node, const char* what) {
  if (s == xnn_status_success) return Status::Ok();
  return Status::Error(std::string("xnnpack refused ") + what + " for node " +
                       std::to_string(node.index) + " (" + node.op_name + "): " + XnnStatusName(s));
}

// The numbers a node computes with: float32, or XNNPACK's per-tensor
// quantized signed (qs8) or unsigned (qu8) 8-bit integers.
enum class Kind { kFloat, kQs8, kQu8 };

bool IsQuantized(Kind k) { return k != Kind::kFloat; }

// The kind of an activation tensor (input or output, not weights): float32,
// or int8 / uint8 quantized per tensor with a zero point in range.
Status TensorKind(const Node& node, const Tensor* t, const char* what, Kind* kind) {
  if (t == nullptr) return Unsupported(node, std::string("without its ") + what);
  if (t->dtype == DType::kFloat32 && !t->quantized) {
    *kind = Kind::kFloat;
  } else if ((t->dtype == DType::kInt8 || t->dtype == DType::kUint8) && t->quantized &&
             !t->per_channel_quantized) {
    const bool s8 = t->dtype == DType::kInt8;
    if (!(t->scale > 0.0f) || !std::isfinite(t->scale) || t->zero_point < (s8 ? -128 : 0) ||
        t->zero_point > (s8 ? 127 : 255)) {
      return Unsupported(node, std::string("with ") + what + " (tensor " +
                                   std::to_string(t->index) + ") of scale " +
                                   std::to_string(t->scale) + " and zero point " +
                                   std::to_string(t->zero_point));
    }
    *kind = s8 ? Kind::kQs8 : Kind::kQu8;
  } else {
    return Unsupported(node, std::string("with ") +
                                 (t->per_channel_quantized ? "per-channel quantized "
                                  : t->quantized           ? "quantized "
                                                           : "") +
                                 runtime::DTypeName(t->dtype) + " " + what + " (tensor " +
                                 std::to_string(t->index) + ") is not supported by xnnpack");
  }
  if (t->rank() > XNN_MAX_TENSOR_DIMS) {
    return Unsupported(node, std::string("with rank-") + std::to_string(t->rank()) + " " + what +
                                 " (xnnpack takes at most " + std::to_string(XNN_MAX_TENSOR_DIMS) +
                                 " dimensions)");
  }
  return Status::Ok();
}

// Ok when `t` is a plain (not quantized) float32 tensor.
Status CheckFloat(const Node& node, const Tensor* t, const char* what) {
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(TensorKind(node, t, what, &kind));
  if (kind == Kind::kFloat) return Status::Ok();
  return Unsupported(node, std::string("with quantized ") + runtime::DTypeName(t->dtype) + " " +
                               what + " (tensor " + std::to_string(t->index) +
                               ") is not supported by xnnpack");
}

// The common kind of `tensors` (all float32, or all qs8, or all qu8).
Status CommonKind(const Node& node, std::initializer_list<const Tensor*> tensors, Kind* kind) {
  bool first = true;
  for (const Tensor* t : tensors) {
    Kind k = Kind::kFloat;
    DFARM_RETURN_IF_ERROR(TensorKind(node, t, "tensor", &k));
    if (!first && k != *kind) return Unsupported(node, "mixing float32 and quantized tensors");
    *kind = k, first = false;
  }
  return Status::Ok();
}

// XNNPACK's quantized kinds accept `node` only for the ops it names.
Status QuantizedOnlyFor(const Node& node, Kind kind, bool supported) {
  if (!IsQuantized(kind) || supported) return Status::Ok();
  return Unsupported(node, std::string("on quantized ") + (kind == Kind::kQs8 ? "int8" : "uint8") +
                               " tensors is not supported by xnnpack");
}

// For quantized nodes XNNPACK only copies or compares values (reshape, pad,
// max pooling, clamp): input and output must share scale and zero point.
Status CheckSameQuantization(const Node& node, Kind kind, const Tensor& in, const Tensor& out) {
  if (!IsQuantized(kind) || (in.scale == out.scale && in.zero_point == out.zero_point)) {
    return Status::Ok();
  }
  return Unsupported(node,
                     "with quantized input and output of different scales or zero points "
                     "(xnnpack needs them equal here)");
}

// A quantized scale ratio inside [lo, hi), the range XNNPACK accepts for the
// requantization of this node (outside it creating the runtime fails).
Status CheckScaleRatio(const Node& node, const char* what, double ratio, double lo, double hi) {
  if (ratio >= lo && ratio < hi) return Status::Ok();
  return Unsupported(node, std::string("with ") + what + " " + std::to_string(ratio) +
                               " outside xnnpack's [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + ")");
}

// The checks of a weighted node (convolution, deconvolution, fully
// connected), whose kind (float32, qs8 or qu8) is its input's and output's.
// Float32: weights and the optional bias are float32. Quantized: weights of
// the same signedness, int8 ones with zero point 0 and either per tensor or,
// when `channel_dim` >= 0, per channel along it; an int32 bias with zero
// point 0; every channel's requantization scale input * weights / output
// under 256 (XNNPACK's limit). Weights and bias are constant. `weights_name`
// names the weights in dtype messages ("filter"), `weights_phrase` in the
// not-constant one ("a filter").
Status CheckWeighted(const Node& node, const Tensor* in, const Tensor* weights,
                     const char* weights_name, const char* weights_phrase, const Tensor* bias,
                     const Tensor* out, int channel_dim, Kind* kind) {
  DFARM_RETURN_IF_ERROR(TensorKind(node, in, "input", kind));
  Kind out_kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(TensorKind(node, out, "output", &out_kind));
  if (out_kind != *kind) return Unsupported(node, "mixing float32 and quantized tensors");
  if (*kind == Kind::kFloat) {
    DFARM_RETURN_IF_ERROR(CheckFloat(node, weights, weights_name));
    if (bias != nullptr) DFARM_RETURN_IF_ERROR(CheckFloat(node, bias, "bias"));
  } else {
    const DType want = *kind == Kind::kQs8 ? DType::kInt8 : DType::kUint8;
    if (weights == nullptr) return Unsupported(node, std::string("without its ") + weights_name);
    if (weights->dtype != want || !weights->quantized) {
      return Unsupported(node, std::string("with ") + (weights->quantized ? "quantized " : "") +
                                   runtime::DTypeName(weights->dtype) + " " + weights_name +
                                   " for " + runtime::DTypeName(want) +
                                   " activations is not supported by xnnpack");
    }
    if (weights->per_channel_quantized &&
        (channel_dim < 0 || weights->quantized_dimension != channel_dim)) {
      return Unsupported(
          node, std::string("with a ") + weights_name + " quantized per channel along dimension " +
                    std::to_string(weights->quantized_dimension) + " (xnnpack takes " +
                    (channel_dim < 0 ? std::string("per-tensor ones only here")
                                     : "dimension " + std::to_string(channel_dim)) +
                    ")");
    }
    if (*kind == Kind::kQs8) {
      for (int64_t zp : weights->zero_points) {
        if (zp != 0)
          return Unsupported(node, std::string("with an int8 ") + weights_name + " zero point " +
                                       std::to_string(zp) + " (not 0)");
      }
    }
    if (bias != nullptr && (bias->dtype != DType::kInt32 || bias->zero_point != 0)) {
      return Unsupported(node, std::string("with a ") + runtime::DTypeName(bias->dtype) +
                                   " bias (xnnpack takes int32 with zero point 0)");
    }
    for (float ws : weights->scales) {
      DFARM_RETURN_IF_ERROR(CheckScaleRatio(node, "requantization scale input*weights/output",
                                            static_cast<double>(in->scale) * ws / out->scale,
                                            0x1.0p-32, 256.0));
    }
  }
  if (!weights->has_static_value() || (bias != nullptr && !bias->has_static_value())) {
    return Unsupported(node,
                       std::string("with ") + weights_phrase + " or bias computed at run time");
  }
  return Status::Ok();
}

// Defines the weights of a weighted node: as its own kind, or as qcint8
// along `channel_dim` when quantized per channel.
Status DefineWeights(const Node& node, const Tensor& w, int channel_dim, SubgraphBuild* b,
                     uint32_t* id) {
  if (!w.per_channel_quantized) return b->Value(w, id);
  const std::vector<size_t> dims(w.shape.begin(), w.shape.end());
  return Define(
      xnn_define_channelwise_quantized_tensor_value(
          b->subgraph, xnn_datatype_qcint8, w.scales.data(), dims.size(),
          static_cast<size_t>(channel_dim), dims.data(), w.data, XNN_INVALID_VALUE_ID, 0, id),
      node, "per-channel weights");
}

// Defines the bias of a weighted node with `channels` outputs: the model's
// one, zeros when it has none and `required` (this XNNPACK's convolutions
// need one), else XNN_INVALID_VALUE_ID. Quantized biases are qint32 (qcint32
// with per-channel weights) of scale input * weights, zero point 0.
Status DefineBias(const Node& node, Kind kind, const Tensor* bias, const Tensor& in,
                  const Tensor& w, int channels, bool required, SubgraphBuild* b, uint32_t* id) {
  *id = XNN_INVALID_VALUE_ID;
  if (bias == nullptr && !required) return Status::Ok();
  const size_t dims[1] = {static_cast<size_t>(channels)};
  if (kind == Kind::kFloat) {
    if (bias != nullptr) return b->Value(*bias, id);
    const float* zeros = b->Keep(std::vector<float>(static_cast<size_t>(channels), 0.0f));
    return Define(xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 1, dims, zeros,
                                          XNN_INVALID_VALUE_ID, 0, id),
                  node, "a zero bias");
  }
  const void* data = bias != nullptr
                         ? static_cast<const void*>(bias->data)
                         : b->Keep(std::vector<int32_t>(static_cast<size_t>(channels), 0));
  if (w.per_channel_quantized) {
    std::vector<float> scales(w.scales.size());
    for (size_t c = 0; c < scales.size(); ++c) scales[c] = in.scale * w.scales[c];
    return Define(xnn_define_channelwise_quantized_tensor_value(b->subgraph, xnn_datatype_qcint32,
                                                                b->Keep(scales), 1, 0, dims, data,
                                                                XNN_INVALID_VALUE_ID, 0, id),
                  node, "a per-channel bias");
  }
  return Define(
      xnn_define_quantized_tensor_value(b->subgraph, xnn_datatype_qint32, 0, in.scale * w.scale, 1,
                                        dims, data, XNN_INVALID_VALUE_ID, 0, id),
      node, "a bias");
}

std::vector<size_t> SizeDims(const std::vector<int32_t>& shape) {
  return std::vector<size_t>(shape.begin(), shape.end());
}

Status VisitBinary(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 2, 2, 1));
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(CommonKind(node, {node.inputs[0], node.inputs[1], node.outputs[0]}, &kind));
  DFARM_RETURN_IF_ERROR(QuantizedOnlyFor(
      node, kind, node.code == Op::ADD || node.code == Op::SUB || node.code == Op::MUL));
  if (IsQuantized(kind)) {
    const double a = node.inputs[0]->scale, c = node.inputs[1]->scale, o = node.outputs[0]->scale;
    if (node.code == Op::MUL) {
      DFARM_RETURN_IF_ERROR(
          CheckScaleRatio(node, "scale ratio input0*input1/output", a * c / o, 0x1.0p-16, 256.0));
    } else {
      DFARM_RETURN_IF_ERROR(
          CheckScaleRatio(node, "scale ratio input0/output", a / o, 0x1.0p-10, 256.0));
      DFARM_RETURN_IF_ERROR(
          CheckScaleRatio(node, "scale ratio input1/output", c / o, 0x1.0p-10, 256.0));
    }
  }
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  uint32_t a = 0, c = 0, o = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*node.inputs[0], &a));
  DFARM_RETURN_IF_ERROR(b->Value(*node.inputs[1], &c));
  DFARM_RETURN_IF_ERROR(b->Value(*node.outputs[0], &o));
  xnn_status s = xnn_status_success;
  switch (node.code) {
    case Op::ADD:
      s = xnn_define_add2(b->subgraph, lo, hi, a, c, o, 0);
      break;
    case Op::SUB:
      s = xnn_define_subtract(b->subgraph, lo, hi, a, c, o, 0);
      break;
    case Op::MUL:
      s = xnn_define_multiply2(b->subgraph, lo, hi, a, c, o, 0);
      break;
    case Op::DIV:
      s = xnn_define_divide(b->subgraph, lo, hi, a, c, o, 0);
      break;
    case Op::MAXIMUM:
      s = xnn_define_maximum2(b->subgraph, a, c, o, 0);
      break;
    case Op::MINIMUM:
      s = xnn_define_minimum2(b->subgraph, a, c, o, 0);
      break;
    default:
      s = xnn_define_squared_difference(b->subgraph, a, c, o, 0);
      break;
  }
  return Define(s, node, "a binary node");
}

Status VisitUnary(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 1, 1, 1));
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(CommonKind(node, {node.inputs[0], node.outputs[0]}, &kind));
  const bool clamp =
      node.code == Op::RELU || node.code == Op::RELU6 || node.code == Op::RELU_N1_TO_1;
  DFARM_RETURN_IF_ERROR(QuantizedOnlyFor(node, kind, clamp || node.code == Op::LOGISTIC));
  if (clamp)
    DFARM_RETURN_IF_ERROR(CheckSameQuantization(node, kind, *node.inputs[0], *node.outputs[0]));
  if (node.code == Op::LOGISTIC && IsQuantized(kind)) {
    // XNNPACK's quantized sigmoid has TFLite's fixed output: 1/256, -128 (int8) or 0 (uint8).
    const Tensor& o = *node.outputs[0];
    if (o.scale != 1.0f / 256 || o.zero_point != (kind == Kind::kQs8 ? -128 : 0)) {
      return Unsupported(node, "with quantized output of scale " + std::to_string(o.scale) +
                                   " and zero point " + std::to_string(o.zero_point) +
                                   " (xnnpack takes 1/256 and " +
                                   (kind == Kind::kQs8 ? "-128)" : "0)"));
    }
  }
  float alpha = 0.0f;
  if (node.code == Op::LEAKY_RELU) {
    const auto* o = node.options<tfl::LeakyReluOptions>();
    alpha = o != nullptr ? o->alpha() : 0.0f;
  }
  if (node.code == Op::SOFTMAX) {
    const auto* o = node.options<tfl::SoftmaxOptions>();
    const float beta = o != nullptr ? o->beta() : 1.0f;
    if (beta != 1.0f) return Unsupported(node, "with beta " + std::to_string(beta) + " (only 1)");
    if (node.inputs[0]->rank() < 1) return Unsupported(node, "of a scalar");
  }
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, o = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*node.inputs[0], &i));
  DFARM_RETURN_IF_ERROR(b->Value(*node.outputs[0], &o));
  xnn_subgraph_t g = b->subgraph;
  xnn_status s = xnn_status_success;
  switch (node.code) {
    case Op::RELU:
      s = xnn_define_clamp(g, 0.0f, kInf, i, o, 0);
      break;
    case Op::RELU6:
      s = xnn_define_clamp(g, 0.0f, 6.0f, i, o, 0);
      break;
    case Op::RELU_N1_TO_1:
      s = xnn_define_clamp(g, -1.0f, 1.0f, i, o, 0);
      break;
    case Op::LOGISTIC:
      s = xnn_define_sigmoid(g, i, o, 0);
      break;
    case Op::HARD_SWISH:
      s = xnn_define_hardswish(g, i, o, 0);
      break;
    case Op::SOFTMAX:
      s = xnn_define_softmax(g, i, o, 0);
      break;
    case Op::LEAKY_RELU:
      s = xnn_define_leaky_relu(g, alpha, i, o, 0);
      break;
    case Op::ABS:
      s = xnn_define_abs(g, i, o, 0);
      break;
    case Op::NEG:
      s = xnn_define_negate(g, i, o, 0);
      break;
    default:
      s = xnn_define_square_root(g, i, o, 0);
      break;
  }
  return Define(s, node, "a unary node");
}

Status VisitConv(const Node& node, SubgraphBuild* b) {
  const bool depthwise = node.code == Op::DEPTHWISE_CONV_2D;
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 2, 3, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* filter = node.inputs[1];
  const Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  const Tensor* out = node.outputs[0];
  // Per-channel filters are quantized along the output channels: dimension 0
  // of [out, h, w, in], 3 of a depthwise [1, h, w, out].
  const int channel_dim = depthwise ? 3 : 0;
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(
      CheckWeighted(node, in, filter, "filter", "a filter", bias, out, channel_dim, &kind));
  if (in->rank() != 4 || filter->rank() != 4 || out->rank() != 4) {
    return Unsupported(node, "with input " + Dims(*in) + ", filter " + Dims(*filter));
  }
  ConvParams c;
  DFARM_RETURN_IF_ERROR(ReadConvParams(node, &c));
  const tfl::Padding padding = c.padding;
  const int sh = c.sh, sw = c.sw, dh = c.dh, dw = c.dw;
  const int kh = filter->shape[1], kw = filter->shape[2];
  const int cin = in->shape[3], cout = out->shape[3];
  if (in->shape[0] != out->shape[0]) return Unsupported(node, "whose output batch differs");
  int groups = 1;
  if (depthwise) {
    if (filter->shape[0] != 1 || filter->shape[3] != cout || cin == 0 || cout % cin != 0) {
      return Unsupported(node, "with filter " + Dims(*filter) + " for input " + Dims(*in));
    }
  } else {
    const int fcin = filter->shape[3];
    if (filter->shape[0] != cout || fcin <= 0 || cin % fcin != 0 || cout % (cin / fcin) != 0) {
      return Unsupported(node, "with filter " + Dims(*filter) + " for input " + Dims(*in));
    }
    groups = cin / fcin;
  }
  if (bias != nullptr && bias->num_elements() != cout) {
    return Unsupported(
        node, "with bias " + Dims(*bias) + " for " + std::to_string(cout) + " output channels");
  }
  Pads ph, pw;
  DFARM_RETURN_IF_ERROR(SpatialPadding(node,
                                       {padding, runtime::WindowAxis::kHeight, "filter height",
                                        in->shape[1], out->shape[1], kh, sh, dh},
                                       /*empty_ok=*/true, &ph));
  DFARM_RETURN_IF_ERROR(SpatialPadding(node,
                                       {padding, runtime::WindowAxis::kWidth, "filter width",
                                        in->shape[2], out->shape[2], kw, sw, dw},
                                       /*empty_ok=*/true, &pw));
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, f = 0, bi = 0, o = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(DefineWeights(node, *filter, channel_dim, b, &f));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &o));
  DFARM_RETURN_IF_ERROR(
      DefineBias(node, kind, bias, *in, *filter, cout, /*required=*/true, b, &bi));
  xnn_status s;
  if (depthwise) {
    s = xnn_define_depthwise_convolution_2d(b->subgraph, ph.before, pw.after, ph.after, pw.before,
                                            kh, kw, sh, sw, dh, dw, cout / cin, cin, lo, hi, i, f,
                                            bi, o, 0);
  } else {
    s = xnn_define_convolution_2d(b->subgraph, ph.before, pw.after, ph.after, pw.before, kh, kw, sh,
                                  sw, dh, dw, groups, cin / groups, cout / groups, lo, hi, i, f, bi,
                                  o, 0);
  }
  return Define(s, node, depthwise ? "a depthwise convolution" : "a convolution");
}

// TRANSPOSE_CONV and MediaPipe's Convolution2DTransposeBias as a
// deconvolution: output = stride*(in-1) + K - pad_before - pad_after + adjustment.
Status VisitTransposeConv(const Node& node, SubgraphBuild* b) {
  const bool mediapipe = node.code == Op::CUSTOM;
  const Tensor *in = nullptr, *filter = nullptr, *bias = nullptr;
  tfl::Padding padding = tfl::Padding::VALID;
  int sh = 1, sw = 1;
  float lo = -kInf, hi = kInf;
  if (mediapipe) {
    DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 3, 3, 1));
    in = node.inputs[0], filter = node.inputs[1], bias = node.inputs[2];
    ConvParams c;
    DFARM_RETURN_IF_ERROR(ReadTransposeBiasOptions(node, &c));
    padding = c.padding, sh = c.sh, sw = c.sw;
  } else {
    DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 3, 4, 1));
    filter = node.inputs[1], in = node.inputs[2];
    bias = node.inputs.size() > 3 ? node.inputs[3] : nullptr;
    const auto* o = node.options<tfl::TransposeConvOptions>();
    if (o == nullptr) return Unsupported(node, "without TransposeConvOptions");
    padding = o->padding(), sh = o->stride_h(), sw = o->stride_w();
    DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  }
  const Tensor* out = node.outputs[0];
  // This XNNPACK's quantized deconvolution has no per-channel filters.
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(
      CheckWeighted(node, in, filter, "filter", "a filter", bias, out, /*channel_dim=*/-1, &kind));
  if (mediapipe && IsQuantized(kind)) return QuantizedOnlyFor(node, kind, false);
  if (in->rank() != 4 || filter->rank() != 4 || out->rank() != 4 || sh < 1 || sw < 1) {
    return Unsupported(node, "with input " + Dims(*in) + ", filter " + Dims(*filter));
  }
  const int cin = in->shape[3], cout = out->shape[3];
  const int kh = filter->shape[1], kw = filter->shape[2];
  if (filter->shape[0] != cout || filter->shape[3] != cin || in->shape[0] != out->shape[0] ||
      (bias != nullptr && bias->num_elements() != cout)) {
    return Unsupported(node, "with filter " + Dims(*filter) + " for input " + Dims(*in) +
                                 " and output " + Dims(*out));
  }
  Pads p[2];
  uint32_t adjust[2] = {0, 0};
  const int ins[2] = {in->shape[1], in->shape[2]}, outs[2] = {out->shape[1], out->shape[2]};
  const int ks[2] = {kh, kw}, ss[2] = {sh, sw};
  for (int d = 0; d < 2; ++d) {
    // In int64: a crafted stride overflowed int here (the CPU kernel's
    // Prepare refuses such a node).
    const int64_t full = static_cast<int64_t>(ss[d]) * (ins[d] - 1) + ks[d];
    if (full > std::numeric_limits<int32_t>::max()) {
      return Unsupported(node, "whose stride " + std::to_string(ss[d]) + " scatters input " +
                                   Dims(*in) + " past int32");
    }
    int64_t total = full - outs[d];
    if (mediapipe) {
      const int expected =
          padding == tfl::Padding::SAME ? std::max(0, ks[d] - (ins[d] - 1) % ss[d] - 1) : 0;
      if (total != expected)
        return Unsupported(node, "with output " + Dims(*out) + " not of its padding");
    }
    if (total < 0) {
      if (-total >= ss[d])
        return Unsupported(node, "with output " + Dims(*out) + " larger than stride allows");
      adjust[d] = static_cast<uint32_t>(-total);
      total = 0;
    }
    const int64_t before = padding == tfl::Padding::SAME ? total / 2 : 0;
    p[d].before = static_cast<int32_t>(before);
    p[d].after = static_cast<int32_t>(total - before);
  }
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, f = 0, bi = XNN_INVALID_VALUE_ID, o = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(b->Value(*filter, &f));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &o));
  DFARM_RETURN_IF_ERROR(
      DefineBias(node, kind, bias, *in, *filter, cout, /*required=*/false, b, &bi));
  return Define(xnn_define_deconvolution_2d(b->subgraph, p[0].before, p[1].after, p[0].after,
                                            p[1].before, adjust[0], adjust[1], kh, kw, sh, sw, 1, 1,
                                            1, cin, cout, lo, hi, i, f, bi, o, 0),
                node, "a deconvolution");
}

Status VisitFullyConnected(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 2, 3, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* w = node.inputs[1];
  const Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  const Tensor* out = node.outputs[0];
  // This XNNPACK's quantized fully connected has no per-channel weights.
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(
      CheckWeighted(node, in, w, "weights", "weights", bias, out, /*channel_dim=*/-1, &kind));
  const auto* o = node.options<tfl::FullyConnectedOptions>();
  if (o != nullptr && o->weights_format() != 0) {
    return Unsupported(node, "with shuffled weights");
  }
  const bool keep = o != nullptr && o->keep_num_dims();
  if (w->rank() != 2 || in->rank() < 1) return Unsupported(node, "with weights " + Dims(*w));
  const int units = w->shape[0], depth = w->shape[1];
  if (depth <= 0 || in->num_elements() % depth != 0 || out->shape.back() != units ||
      (bias != nullptr && bias->num_elements() != units)) {
    return Unsupported(
        node, "with input " + Dims(*in) + ", weights " + Dims(*w) + ", output " + Dims(*out));
  }
  if (keep && in->shape.back() != depth) return Unsupported(node, "keeping dims of " + Dims(*in));
  if (!keep && out->rank() != 2) return Unsupported(node, "with output " + Dims(*out));
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, f = 0, bi = XNN_INVALID_VALUE_ID, out_id = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(b->Value(*w, &f));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &out_id));
  DFARM_RETURN_IF_ERROR(DefineBias(node, kind, bias, *in, *w, units, /*required=*/false, b, &bi));
  return Define(xnn_define_fully_connected(b->subgraph, lo, hi, i, f, bi, out_id,
                                           keep ? 0 : XNN_FLAG_TENSORFLOW_RESHAPE_2D),
                node, "a fully connected node");
}

Status VisitPool(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 1, 1, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(CommonKind(node, {in, out}, &kind));
  DFARM_RETURN_IF_ERROR(QuantizedOnlyFor(node, kind, node.code == Op::MAX_POOL_2D));
  DFARM_RETURN_IF_ERROR(CheckSameQuantization(node, kind, *in, *out));
  const auto* o = node.options<tfl::Pool2DOptions>();
  if (o == nullptr) return Unsupported(node, "without Pool2DOptions");
  if (in->rank() != 4 || out->rank() != 4) return Unsupported(node, "with input " + Dims(*in));
  const int fh = o->filter_height(), fw = o->filter_width();
  const int sh = o->stride_h(), sw = o->stride_w();
  if (fh < 1 || fw < 1 || sh < 1 || sw < 1) return Unsupported(node, "with a filter or stride < 1");
  if (fh == 1 && fw == 1)
    return Unsupported(node, "with a 1x1 window (xnnpack pools need more than one)");
  // XNNPACK walks every cell of a window, padding included (a pointer per
  // cell per output pixel); the CPU kernel clamps the window to the input.
  if (fh > in->shape[1] || fw > in->shape[2]) {
    return Unsupported(node, "with a " + std::to_string(fh) + "x" + std::to_string(fw) +
                                 " window over a " + std::to_string(in->shape[1]) + "x" +
                                 std::to_string(in->shape[2]) +
                                 " input (larger than the input; the CPU kernel clamps it)");
  }
  Pads ph, pw;
  DFARM_RETURN_IF_ERROR(SpatialPadding(node,
                                       {o->padding(), runtime::WindowAxis::kHeight, "filter_height",
                                        in->shape[1], out->shape[1], fh, sh, 1},
                                       /*empty_ok=*/true, &ph));
  DFARM_RETURN_IF_ERROR(SpatialPadding(node,
                                       {o->padding(), runtime::WindowAxis::kWidth, "filter_width",
                                        in->shape[2], out->shape[2], fw, sw, 1},
                                       /*empty_ok=*/true, &pw));
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, out_id = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &out_id));
  if (node.code == Op::MAX_POOL_2D) {
    return Define(xnn_define_max_pooling_2d(b->subgraph, ph.before, pw.after, ph.after, pw.before,
                                            fh, fw, sh, sw, 1, 1, lo, hi, i, out_id, 0),
                  node, "a max pooling");
  }
  // TFLite's average leaves the padding out of the count; so does XNNPACK's
  // with TENSORFLOW_SAME_PADDING, which pads exactly as SpatialPadding().
  const bool same = o->padding() == tfl::Padding::SAME;
  return Define(xnn_define_average_pooling_2d(b->subgraph, 0, 0, 0, 0, fh, fw, sh, sw, lo, hi, i,
                                              out_id, same ? XNN_FLAG_TENSORFLOW_SAME_PADDING : 0),
                node, "an average pooling");
}

Status VisitMean(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 2, 2, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(CommonKind(node, {in, out}, &kind));
  if (IsQuantized(kind)) {
    DFARM_RETURN_IF_ERROR(CheckScaleRatio(node, "scale ratio input/output",
                                          static_cast<double>(in->scale) / out->scale, 0x1.0p-8,
                                          256.0));
  }
  std::vector<int64_t> axes;
  DFARM_RETURN_IF_ERROR(ReadInts(node, node.inputs[1], "axes", &axes));
  const bool hw =
      axes.size() == 2 && ((axes[0] == 1 && axes[1] == 2) || (axes[0] == 2 && axes[1] == 1));
  if (in->rank() != 4 || !hw) {
    return Unsupported(
        node,
        "other than over H and W of a rank-4 input (xnnpack has global average pooling only)");
  }
  const auto* o = node.options<tfl::ReducerOptions>();
  const bool keep = o != nullptr && o->keep_dims();
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, out_id = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &out_id));
  if (keep) {
    return Define(xnn_define_global_average_pooling_2d(b->subgraph, -kInf, kInf, i, out_id, 0),
                  node, "a global average pooling");
  }
  uint32_t pooled = 0;
  DFARM_RETURN_IF_ERROR(b->Internal(*out, {in->shape[0], 1, 1, in->shape[3]}, &pooled));
  DFARM_RETURN_IF_ERROR(
      Define(xnn_define_global_average_pooling_2d(b->subgraph, -kInf, kInf, i, pooled, 0), node,
             "a global average pooling"));
  const std::vector<size_t> dims = SizeDims(out->shape);
  return Define(xnn_define_static_reshape(b->subgraph, dims.size(), dims.data(), pooled, out_id, 0),
                node, "a reshape");
}

Status VisitPad(const Node& node, SubgraphBuild* b) {
  const bool v2 = node.code == Op::PADV2;
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 2, v2 ? 3 : 2, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(CommonKind(node, {in, out}, &kind));
  DFARM_RETURN_IF_ERROR(CheckSameQuantization(node, kind, *in, *out));
  std::vector<int64_t> pads;
  DFARM_RETURN_IF_ERROR(ReadInts(node, node.inputs[1], "paddings", &pads));
  if (pads.size() != 2 * static_cast<size_t>(in->rank())) {
    return Unsupported(node, "with " + std::to_string(pads.size()) + " paddings for " + Dims(*in));
  }
  for (int64_t p : pads) {
    if (p < 0) return Unsupported(node, "with a negative padding");
  }
  // The padding value is given as a real number; XNNPACK quantizes it with
  // the output's parameters (PAD pads with real 0, the zero point).
  float value = 0.0f;
  if (v2 && node.inputs.size() == 3 && node.inputs[2] != nullptr) {
    const Tensor* c = node.inputs[2];
    if (c->dtype != in->dtype || !c->has_static_value() || c->num_elements() != 1) {
      return Unsupported(node, std::string("with a constant value that is not a ") +
                                   runtime::DTypeName(in->dtype) + " constant scalar");
    }
    if (kind == Kind::kFloat) {
      value = c->data_as<float>()[0];
    } else {
      // TFLite pads with the constant's stored integer, read in the output's quantization.
      const int64_t q =
          kind == Kind::kQs8 ? int64_t{c->data_as<int8_t>()[0]} : int64_t{c->data_as<uint8_t>()[0]};
      value = out->scale * static_cast<float>(q - out->zero_point);
    }
  }
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, out_id = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &out_id));
  size_t pre[XNN_MAX_TENSOR_DIMS] = {}, post[XNN_MAX_TENSOR_DIMS] = {};
  for (int d = 0; d < in->rank(); ++d) {
    pre[d] = static_cast<size_t>(pads[2 * d]);
    post[d] = static_cast<size_t>(pads[2 * d + 1]);
  }
  return Define(xnn_define_static_constant_pad(b->subgraph, pre, post, value, i, out_id, 0), node,
                "a constant pad");
}

// What RESHAPE, RESIZE_BILINEAR, DEPTH_TO_SPACE and PRELU check alike: one or
// two inputs, one output of the input's kind and quantization (quantized only
// where `quantized_ok`).
Status CheckOneToOne(const Node& node, bool quantized_ok) {
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 1, 2, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(CommonKind(node, {in, out}, &kind));
  DFARM_RETURN_IF_ERROR(QuantizedOnlyFor(node, kind, quantized_ok));
  return CheckSameQuantization(node, kind, *in, *out);
}

// The XNNPACK ids of the node's first input and its output.
Status InOutIds(const Node& node, SubgraphBuild* b, uint32_t* in_id, uint32_t* out_id) {
  DFARM_RETURN_IF_ERROR(b->Value(*node.inputs[0], in_id));
  return b->Value(*node.outputs[0], out_id);
}

Status VisitReshape(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckOneToOne(node, /*quantized_ok=*/true));
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, out_id = 0;
  DFARM_RETURN_IF_ERROR(InOutIds(node, b, &i, &out_id));
  const std::vector<size_t> dims = SizeDims(node.outputs[0]->shape);
  return Define(xnn_define_static_reshape(b->subgraph, dims.size(), dims.data(), i, out_id, 0),
                node, "a reshape");
}

Status VisitResizeBilinear(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckOneToOne(node, /*quantized_ok=*/true));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  const auto* o = node.options<tfl::ResizeBilinearOptions>();
  const bool align = o != nullptr && o->align_corners();
  const bool half = o != nullptr && o->half_pixel_centers();
  if (align && half) return Unsupported(node, "with align_corners and half_pixel_centers");
  if (in->rank() != 4 || out->rank() != 4) return Unsupported(node, "of " + Dims(*in));
  const uint32_t flags = align  ? XNN_FLAG_ALIGN_CORNERS
                         : half ? 0
                                : XNN_FLAG_TENSORFLOW_LEGACY_MODE;
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, out_id = 0;
  DFARM_RETURN_IF_ERROR(InOutIds(node, b, &i, &out_id));
  return Define(xnn_define_static_resize_bilinear_2d(b->subgraph, out->shape[1], out->shape[2], i,
                                                     out_id, flags),
                node, "a bilinear resize");
}

Status VisitDepthToSpace(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckOneToOne(node, /*quantized_ok=*/false));
  const auto* o = node.options<tfl::DepthToSpaceOptions>();
  if (o == nullptr || o->block_size() < 2) return Unsupported(node, "with block size < 2");
  if (node.inputs[0]->rank() != 4) return Unsupported(node, "of " + Dims(*node.inputs[0]));
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, out_id = 0;
  DFARM_RETURN_IF_ERROR(InOutIds(node, b, &i, &out_id));
  return Define(
      xnn_define_depth_to_space(b->subgraph, i, out_id, static_cast<uint32_t>(o->block_size()), 0),
      node, "a depth to space");
}

Status VisitPrelu(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckOneToOne(node, /*quantized_ok=*/false));
  const Tensor* in = node.inputs[0];
  const Tensor* slope = node.inputs.size() > 1 ? node.inputs[1] : nullptr;
  DFARM_RETURN_IF_ERROR(CheckFloat(node, slope, "alpha"));
  // A slope folded at load (e.g. a DEQUANTIZE of float16) is a constant too.
  if (!slope->has_static_value()) {
    return Unsupported(node, "with an alpha computed at run time (xnnpack takes constant slopes)");
  }
  if (in->rank() < 1 || slope->num_elements() != in->shape.back() ||
      (slope->rank() > 0 && slope->shape.back() != in->shape.back())) {
    return Unsupported(node, "with alpha " + Dims(*slope) + " for input " + Dims(*in) +
                                 " (xnnpack takes one slope per channel)");
  }
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, out_id = 0;
  DFARM_RETURN_IF_ERROR(InOutIds(node, b, &i, &out_id));
  // The slope's constant data seen as one dimension of channels.
  const size_t dims[1] = {static_cast<size_t>(slope->num_elements())};
  uint32_t s = 0;
  DFARM_RETURN_IF_ERROR(Define(xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 1, dims,
                                                       slope->data, XNN_INVALID_VALUE_ID, 0, &s),
                               node, "a slope"));
  return Define(xnn_define_prelu(b->subgraph, i, s, out_id, 0), node, "a prelu");
}

// This XNNPACK has no concatenate node. When the inputs are contiguous blocks
// of the output (only unit dimensions before the axis), each input is copied
// (a clamp, which also applies the fused activation) into an external value
// that points at its block; see SubgraphBuild::concat_slices.
Status VisitConcatenation(const Node& node, SubgraphBuild* b) {
  if (node.inputs.empty() || node.outputs.size() != 1) return delegates::CheckArity(node, 1, 1, 1);
  const Tensor* out = node.outputs[0];
  Kind kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(TensorKind(node, out, "output", &kind));
  const auto* o = node.options<tfl::ConcatenationOptions>();
  int axis = o != nullptr ? o->axis() : 0;
  if (axis < 0) axis += out->rank();
  if (axis < 0 || axis >= out->rank()) return Unsupported(node, "with axis out of range");
  for (int d = 0; d < axis; ++d) {
    if (out->shape[d] != 1) {
      return Unsupported(node, "along axis " + std::to_string(axis) + " of " + Dims(*out) +
                                   " (this xnnpack has no concatenate node; only a concatenation "
                                   "with unit dimensions before the axis is taken, as copies)");
    }
  }
  for (const Tensor* in : node.inputs) {
    Kind in_kind = Kind::kFloat;
    DFARM_RETURN_IF_ERROR(TensorKind(node, in, "input", &in_kind));
    if (in_kind != kind) return Unsupported(node, "mixing float32 and quantized tensors");
    DFARM_RETURN_IF_ERROR(CheckSameQuantization(node, kind, *in, *out));
    if (in->has_static_value()) return Unsupported(node, "of a constant input");
    if (in->rank() != out->rank()) return Unsupported(node, "with inputs of another rank");
  }
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  auto it = b->concat_slices.find(node.index);
  if (it == b->concat_slices.end() || it->second.size() != node.inputs.size()) {
    return Status::Error("no output blocks were set up for node " + std::to_string(node.index));
  }
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    uint32_t in = 0;
    DFARM_RETURN_IF_ERROR(b->Value(*node.inputs[i], &in));
    DFARM_RETURN_IF_ERROR(
        Define(xnn_define_clamp(b->subgraph, lo, hi, in, it->second[i], 0), node, "a copy"));
  }
  return Status::Ok();
}

// QUANTIZE from float32 and DEQUANTIZE to float32 of a run-time int8 / uint8
// tensor quantized per tensor: XNNPACK's convert.
Status VisitConvert(const Node& node, SubgraphBuild* b) {
  const bool quantize = node.code == Op::QUANTIZE;
  if (!quantize && !node.inputs.empty() && node.inputs[0] != nullptr &&
      node.inputs[0]->dtype == DType::kFloat16) {
    return Status::Unsupported(
        "DEQUANTIZE from float16 is not supported by xnnpack (constant ones are folded at load)");
  }
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 1, 1, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  Kind in_kind = Kind::kFloat, out_kind = Kind::kFloat;
  DFARM_RETURN_IF_ERROR(TensorKind(node, in, "input", &in_kind));
  DFARM_RETURN_IF_ERROR(TensorKind(node, out, "output", &out_kind));
  if (quantize && (in_kind != Kind::kFloat || out_kind == Kind::kFloat)) {
    return Unsupported(node,
                       "other than from float32 to int8 or uint8 (xnnpack does not requantize)");
  }
  if (!quantize && (in_kind == Kind::kFloat || out_kind != Kind::kFloat)) {
    return Unsupported(node, "other than from int8 or uint8 to float32");
  }
  if (in->has_static_value()) return Unsupported(node, "of a constant");
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, o = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &o));
  return Define(xnn_define_convert(b->subgraph, i, o, 0), node, "a convert");
}

}  // namespace

std::vector<size_t> ConcatOffsets(const Node& node) {
  std::vector<size_t> offsets;
  size_t at = 0;
  for (const Tensor* in : node.inputs) {
    offsets.push_back(at);
    at += static_cast<size_t>(in->num_elements()) * runtime::DTypeSize(in->dtype);
  }
  return offsets;
}

const char* XnnStatusName(xnn_status status) {
  switch (status) {
    case xnn_status_success:
      return "success";
    case xnn_status_uninitialized:
      return "uninitialized";
    case xnn_status_invalid_parameter:
      return "invalid parameter";
    case xnn_status_invalid_state:
      return "invalid state";
    case xnn_status_unsupported_parameter:
      return "unsupported parameter";
    case xnn_status_unsupported_hardware:
      return "unsupported hardware";
    case xnn_status_out_of_memory:
      return "out of memory";
  }
  return "unknown status";
}

Status SubgraphBuild::DefineValue(const Tensor& tensor, const std::vector<int32_t>& shape,
                                  const void* data, uint32_t external_id, uint32_t flags,
                                  uint32_t* id_out) {
  const std::vector<size_t> dims(shape.begin(), shape.end());
  const size_t* d = dims.empty() ? nullptr : dims.data();
  xnn_status s = xnn_status_invalid_parameter;
  if (tensor.dtype == DType::kFloat32 && !tensor.quantized) {
    s = xnn_define_tensor_value(subgraph, xnn_datatype_fp32, dims.size(), d, data, external_id,
                                flags, id_out);
  } else if (tensor.quantized && !tensor.per_channel_quantized &&
             (tensor.dtype == DType::kInt8 || tensor.dtype == DType::kUint8 ||
              tensor.dtype == DType::kInt32)) {
    const xnn_datatype type = tensor.dtype == DType::kInt8    ? xnn_datatype_qint8
                              : tensor.dtype == DType::kUint8 ? xnn_datatype_quint8
                                                              : xnn_datatype_qint32;
    s = xnn_define_quantized_tensor_value(subgraph, type, static_cast<int32_t>(tensor.zero_point),
                                          tensor.scale, dims.size(), d, data, external_id, flags,
                                          id_out);
  } else {
    return Status::Error("tensor " + std::to_string(tensor.index) + " '" + tensor.name + "' is " +
                         runtime::DescribeTensor(tensor) +
                         ", which has no xnnpack datatype (float32, or int8/uint8/int32 "
                         "quantized per tensor)");
  }
  if (s != xnn_status_success) {
    return Status::Error("xnnpack refused tensor " + std::to_string(tensor.index) + " '" +
                         tensor.name + "' " + runtime::DescribeTensor(tensor) + ": " +
                         XnnStatusName(s));
  }
  return Status::Ok();
}

Status SubgraphBuild::Internal(const Tensor& like, const std::vector<int32_t>& shape,
                               uint32_t* id_out) {
  return DefineValue(like, shape, nullptr, XNN_INVALID_VALUE_ID, 0, id_out);
}

Status SubgraphBuild::Value(const Tensor& tensor, uint32_t* id_out) {
  if (auto it = ids.find(tensor.index); it != ids.end()) {
    *id_out = it->second;
    return Status::Ok();
  }
  const void* data = tensor.has_static_value() ? tensor.data : nullptr;
  if (tensor.has_static_value() && data == nullptr) {
    return Status::Error("tensor " + std::to_string(tensor.index) + " '" + tensor.name +
                         "' has no data at Prepare()");
  }
  DFARM_RETURN_IF_ERROR(DefineValue(tensor, tensor.shape, data, XNN_INVALID_VALUE_ID, 0, id_out));
  ids.emplace(tensor.index, *id_out);
  return Status::Ok();
}

Status VisitNode(const Node& node, SubgraphBuild* build) {
  switch (node.code) {
    case Op::ADD:
    case Op::SUB:
    case Op::MUL:
    case Op::DIV:
    case Op::MAXIMUM:
    case Op::MINIMUM:
    case Op::SQUARED_DIFFERENCE:
      return VisitBinary(node, build);
    case Op::RELU:
    case Op::RELU6:
    case Op::RELU_N1_TO_1:
    case Op::LOGISTIC:
    case Op::HARD_SWISH:
    case Op::SOFTMAX:
    case Op::LEAKY_RELU:
    case Op::ABS:
    case Op::NEG:
    case Op::SQRT:
      return VisitUnary(node, build);
    case Op::CONV_2D:
    case Op::DEPTHWISE_CONV_2D:
      return VisitConv(node, build);
    case Op::TRANSPOSE_CONV:
      return VisitTransposeConv(node, build);
    case Op::FULLY_CONNECTED:
      return VisitFullyConnected(node, build);
    case Op::MAX_POOL_2D:
    case Op::AVERAGE_POOL_2D:
      return VisitPool(node, build);
    case Op::MEAN:
      return VisitMean(node, build);
    case Op::PAD:
    case Op::PADV2:
      return VisitPad(node, build);
    case Op::RESHAPE:
      return VisitReshape(node, build);
    case Op::RESIZE_BILINEAR:
      return VisitResizeBilinear(node, build);
    case Op::DEPTH_TO_SPACE:
      return VisitDepthToSpace(node, build);
    case Op::PRELU:
      return VisitPrelu(node, build);
    case Op::QUANTIZE:
    case Op::DEQUANTIZE:
      return VisitConvert(node, build);
    case Op::CONCATENATION:
      return VisitConcatenation(node, build);
    case Op::CUSTOM:
      if (node.op_name == "Convolution2DTransposeBias") return VisitTransposeConv(node, build);
      return Status::Unsupported("custom op " + node.op_name + " is not supported by xnnpack");
    default:
      return Status::Unsupported(node.op_name + " is not supported by xnnpack");
  }
}

}  // namespace dfarm::delegates::xnnpack_internal
