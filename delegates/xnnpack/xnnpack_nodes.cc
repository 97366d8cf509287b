#include "delegates/xnnpack/xnnpack_nodes.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "runtime/delegate.h"

namespace dfarm::delegates::xnnpack_internal {
namespace {

using runtime::DType;
using runtime::Node;
using runtime::Status;
using runtime::Tensor;
namespace tfl = ::dfarm::tflite;
using Op = tfl::BuiltinOperator;

constexpr float kInf = std::numeric_limits<float>::infinity();

Status Unsupported(const Node& node, const std::string& why) {
  return Status::Unsupported(node.op_name + " " + why);
}

std::string Dims(const Tensor& t) { return runtime::ShapeToString(t.shape); }

// Ok when `t` is a plain (not quantized) float32 tensor.
Status CheckFloat(const Node& node, const Tensor* t, const char* what) {
  if (t == nullptr) return Unsupported(node, std::string("without its ") + what);
  if (t->dtype != DType::kFloat32 || t->quantized) {
    return Unsupported(node, std::string("with ") + (t->quantized ? "quantized " : "") +
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

// The float32 checks of a weighted node (conv, deconvolution, fully
// connected): input, weights, output and the optional bias are float32, and
// weights and bias are constant. `weights_name` names the weights in dtype
// messages ("filter"), `weights_phrase` in the not-constant one ("a filter").
Status CheckWeighted(const Node& node, const Tensor* in, const Tensor* weights,
                     const char* weights_name, const char* weights_phrase, const Tensor* bias,
                     const Tensor* out) {
  DFARM_RETURN_IF_ERROR(CheckFloat(node, in, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat(node, weights, weights_name));
  DFARM_RETURN_IF_ERROR(CheckFloat(node, out, "output"));
  if (bias != nullptr) DFARM_RETURN_IF_ERROR(CheckFloat(node, bias, "bias"));
  if (!weights->has_static_value() || (bias != nullptr && !bias->has_static_value())) {
    return Unsupported(node, std::string("with ") + weights_phrase + " or bias computed at run time");
  }
  return Status::Ok();
}

Status CheckArity(const Node& node, size_t min_inputs, size_t max_inputs, size_t outputs) {
  if (node.inputs.size() < min_inputs || node.inputs.size() > max_inputs ||
      node.outputs.size() != outputs) {
    return Unsupported(node, "with " + std::to_string(node.inputs.size()) + " inputs and " +
                                 std::to_string(node.outputs.size()) + " outputs");
  }
  return Status::Ok();
}

// A parameter tensor's int32/int64 values, which must be in the model.
Status ReadInts(const Node& node, const Tensor* t, const char* what, std::vector<int64_t>* out) {
  if (t == nullptr || t->allocation != runtime::Allocation::kConstant || t->data == nullptr) {
    return Unsupported(node, std::string("with a non-constant ") + what);
  }
  out->clear();
  const int64_t n = t->num_elements();
  if (t->dtype == DType::kInt32) {
    for (int64_t i = 0; i < n; ++i) out->push_back(t->data_as<int32_t>()[i]);
  } else if (t->dtype == DType::kInt64) {
    for (int64_t i = 0; i < n; ++i) out->push_back(t->data_as<int64_t>()[i]);
  } else {
    return Unsupported(node, std::string("with a ") + runtime::DTypeName(t->dtype) + " " + what);
  }
  return Status::Ok();
}

Status ActivationRange(const Node& node, float* lo, float* hi) {
  switch (runtime::FusedActivation(node)) {
    case tfl::ActivationFunctionType::NONE:
      *lo = -kInf, *hi = kInf;
      return Status::Ok();
    case tfl::ActivationFunctionType::RELU:
      *lo = 0.0f, *hi = kInf;
      return Status::Ok();
    case tfl::ActivationFunctionType::RELU_N1_TO_1:
      *lo = -1.0f, *hi = 1.0f;
      return Status::Ok();
    case tfl::ActivationFunctionType::RELU6:
      *lo = 0.0f, *hi = 6.0f;
      return Status::Ok();
    default:
      return Unsupported(node,
                         std::string("with fused activation ") +
                             tfl::EnumNameActivationFunctionType(runtime::FusedActivation(node)));
  }
}

std::vector<size_t> SizeDims(const std::vector<int32_t>& shape) {
  return std::vector<size_t>(shape.begin(), shape.end());
}

Status Define(xnn_status s, const Node& node, const char* what) {
  if (s == xnn_status_success) return Status::Ok();
  return Status::Error(std::string("xnnpack refused ") + what + " for node " +
                       std::to_string(node.index) + " (" + node.op_name + "): " + XnnStatusName(s));
}

// Explicit padding of one spatial dimension, as TFLite computes it: SAME
// pads (out-1)*stride + effective_kernel - in in total, the extra one at the
// end (bottom/right); VALID pads nothing.
struct Pads {
  uint32_t before = 0, after = 0;
};
Status SpatialPadding(const Node& node, tfl::Padding padding, int in, int out, int kernel,
                      int stride, int dilation, Pads* pads) {
  const int effective = (kernel - 1) * dilation + 1;
  const int expected = padding == tfl::Padding::SAME ? (in + stride - 1) / stride
                                                     : (in - effective + stride) / stride;
  if (out != expected) {
    return Unsupported(node, "whose output size " + std::to_string(out) + " is not the " +
                                 (padding == tfl::Padding::SAME ? "SAME" : "VALID") + " size " +
                                 std::to_string(expected));
  }
  if (padding == tfl::Padding::SAME) {
    const int total = std::max((out - 1) * stride + effective - in, 0);
    pads->before = static_cast<uint32_t>(total / 2);
    pads->after = static_cast<uint32_t>(total - total / 2);
  }
  return Status::Ok();
}

Status VisitBinary(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  for (const Tensor* t : {node.inputs[0], node.inputs[1], node.outputs[0]}) {
    DFARM_RETURN_IF_ERROR(CheckFloat(node, t, "tensor"));
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
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  DFARM_RETURN_IF_ERROR(CheckFloat(node, node.inputs[0], "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat(node, node.outputs[0], "output"));
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
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 3, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* filter = node.inputs[1];
  const Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  const Tensor* out = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckWeighted(node, in, filter, "filter", "a filter", bias, out));
  if (in->rank() != 4 || filter->rank() != 4 || out->rank() != 4) {
    return Unsupported(node, "with input " + Dims(*in) + ", filter " + Dims(*filter));
  }
  tfl::Padding padding = tfl::Padding::VALID;
  int sh = 1, sw = 1, dh = 1, dw = 1;
  if (depthwise) {
    const auto* o = node.options<tfl::DepthwiseConv2DOptions>();
    if (o == nullptr) return Unsupported(node, "without DepthwiseConv2DOptions");
    padding = o->padding(), sh = o->stride_h(), sw = o->stride_w();
    dh = o->dilation_h_factor(), dw = o->dilation_w_factor();
  } else {
    const auto* o = node.options<tfl::Conv2DOptions>();
    if (o == nullptr) return Unsupported(node, "without Conv2DOptions");
    padding = o->padding(), sh = o->stride_h(), sw = o->stride_w();
    dh = o->dilation_h_factor(), dw = o->dilation_w_factor();
  }
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1)
    return Unsupported(node, "with a stride or dilation < 1");
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
  DFARM_RETURN_IF_ERROR(
      SpatialPadding(node, padding, in->shape[1], out->shape[1], kh, sh, dh, &ph));
  DFARM_RETURN_IF_ERROR(
      SpatialPadding(node, padding, in->shape[2], out->shape[2], kw, sw, dw, &pw));
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, f = 0, bi = 0, o = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(b->Value(*filter, &f));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &o));
  if (bias != nullptr) {
    DFARM_RETURN_IF_ERROR(b->Value(*bias, &bi));
  } else {
    // This XNNPACK's convolutions need a bias: a zero one.
    const std::vector<float>& zeros = b->owned->emplace_back(cout, 0.0f);
    const size_t dims[1] = {static_cast<size_t>(cout)};
    DFARM_RETURN_IF_ERROR(
        Define(xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 1, dims, zeros.data(),
                                       XNN_INVALID_VALUE_ID, 0, &bi),
               node, "a zero bias"));
  }
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
    DFARM_RETURN_IF_ERROR(CheckArity(node, 3, 3, 1));
    in = node.inputs[0], filter = node.inputs[1], bias = node.inputs[2];
    const auto* opts = node.op->custom_options();
    if (opts == nullptr || opts->size() < 12)
      return Unsupported(node, "without its 3 int32 options");
    int32_t v[3];
    std::memcpy(v, opts->data(), sizeof(v));
    if (v[0] != 1 && v[0] != 2) return Unsupported(node, "with padding " + std::to_string(v[0]));
    padding = v[0] == 1 ? tfl::Padding::SAME : tfl::Padding::VALID;
    sw = v[1], sh = v[2];
  } else {
    DFARM_RETURN_IF_ERROR(CheckArity(node, 3, 4, 1));
    filter = node.inputs[1], in = node.inputs[2];
    bias = node.inputs.size() > 3 ? node.inputs[3] : nullptr;
    const auto* o = node.options<tfl::TransposeConvOptions>();
    if (o == nullptr) return Unsupported(node, "without TransposeConvOptions");
    padding = o->padding(), sh = o->stride_h(), sw = o->stride_w();
    DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
    if (o->fused_activation_function() != tfl::ActivationFunctionType::NONE) {
      const auto act = o->fused_activation_function();
      lo = act == tfl::ActivationFunctionType::RELU_N1_TO_1 ? -1.0f : 0.0f;
      hi = act == tfl::ActivationFunctionType::RELU6          ? 6.0f
           : act == tfl::ActivationFunctionType::RELU_N1_TO_1 ? 1.0f
                                                              : kInf;
      if (act != tfl::ActivationFunctionType::RELU && act != tfl::ActivationFunctionType::RELU6 &&
          act != tfl::ActivationFunctionType::RELU_N1_TO_1) {
        return Unsupported(
            node, "with fused activation " + std::string(tfl::EnumNameActivationFunctionType(act)));
      }
    }
  }
  const Tensor* out = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckWeighted(node, in, filter, "filter", "a filter", bias, out));
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
    const int full = ss[d] * (ins[d] - 1) + ks[d];
    int total = full - outs[d];
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
    const int before = padding == tfl::Padding::SAME ? total / 2 : 0;
    p[d].before = static_cast<uint32_t>(before);
    p[d].after = static_cast<uint32_t>(total - before);
  }
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, f = 0, bi = XNN_INVALID_VALUE_ID, o = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(b->Value(*filter, &f));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &o));
  if (bias != nullptr) DFARM_RETURN_IF_ERROR(b->Value(*bias, &bi));
  return Define(xnn_define_deconvolution_2d(b->subgraph, p[0].before, p[1].after, p[0].after,
                                            p[1].before, adjust[0], adjust[1], kh, kw, sh, sw, 1, 1,
                                            1, cin, cout, lo, hi, i, f, bi, o, 0),
                node, "a deconvolution");
}

Status VisitFullyConnected(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 3, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* w = node.inputs[1];
  const Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  const Tensor* out = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckWeighted(node, in, w, "weights", "weights", bias, out));
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
  if (bias != nullptr) DFARM_RETURN_IF_ERROR(b->Value(*bias, &bi));
  return Define(xnn_define_fully_connected(b->subgraph, lo, hi, i, f, bi, out_id,
                                           keep ? 0 : XNN_FLAG_TENSORFLOW_RESHAPE_2D),
                node, "a fully connected node");
}

Status VisitPool(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat(node, in, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat(node, out, "output"));
  const auto* o = node.options<tfl::Pool2DOptions>();
  if (o == nullptr) return Unsupported(node, "without Pool2DOptions");
  if (in->rank() != 4 || out->rank() != 4) return Unsupported(node, "with input " + Dims(*in));
  const int fh = o->filter_height(), fw = o->filter_width();
  const int sh = o->stride_h(), sw = o->stride_w();
  if (fh < 1 || fw < 1 || sh < 1 || sw < 1) return Unsupported(node, "with a filter or stride < 1");
  if (fh * fw == 1)
    return Unsupported(node, "with a 1x1 window (xnnpack pools need more than one)");
  Pads ph, pw;
  DFARM_RETURN_IF_ERROR(
      SpatialPadding(node, o->padding(), in->shape[1], out->shape[1], fh, sh, 1, &ph));
  DFARM_RETURN_IF_ERROR(
      SpatialPadding(node, o->padding(), in->shape[2], out->shape[2], fw, sw, 1, &pw));
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
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat(node, in, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat(node, out, "output"));
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
  const std::vector<size_t> shape = {static_cast<size_t>(in->shape[0]), 1, 1,
                                     static_cast<size_t>(in->shape[3])};
  DFARM_RETURN_IF_ERROR(b->Internal(shape, &pooled));
  DFARM_RETURN_IF_ERROR(
      Define(xnn_define_global_average_pooling_2d(b->subgraph, -kInf, kInf, i, pooled, 0), node,
             "a global average pooling"));
  const std::vector<size_t> dims = SizeDims(out->shape);
  return Define(xnn_define_static_reshape(b->subgraph, dims.size(), dims.data(), pooled, out_id, 0),
                node, "a reshape");
}

Status VisitPad(const Node& node, SubgraphBuild* b) {
  const bool v2 = node.code == Op::PADV2;
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, v2 ? 3 : 2, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat(node, in, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat(node, out, "output"));
  std::vector<int64_t> pads;
  DFARM_RETURN_IF_ERROR(ReadInts(node, node.inputs[1], "paddings", &pads));
  if (pads.size() != 2 * static_cast<size_t>(in->rank())) {
    return Unsupported(node, "with " + std::to_string(pads.size()) + " paddings for " + Dims(*in));
  }
  for (int64_t p : pads) {
    if (p < 0) return Unsupported(node, "with a negative padding");
  }
  float value = 0.0f;
  if (v2 && node.inputs.size() == 3 && node.inputs[2] != nullptr) {
    const Tensor* c = node.inputs[2];
    if (c->dtype != DType::kFloat32 || c->allocation != runtime::Allocation::kConstant ||
        c->num_elements() != 1) {
      return Unsupported(node, "with a constant value that is not a float32 constant scalar");
    }
    value = c->data_as<float>()[0];
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

Status VisitOther(const Node& node, SubgraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 2, 1));
  const Tensor* in = node.inputs[0];
  const Tensor* out = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat(node, in, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat(node, out, "output"));
  uint32_t flags = 0, block = 0;
  if (node.code == Op::RESIZE_BILINEAR) {
    const auto* o = node.options<tfl::ResizeBilinearOptions>();
    const bool align = o != nullptr && o->align_corners();
    const bool half = o != nullptr && o->half_pixel_centers();
    if (align && half) return Unsupported(node, "with align_corners and half_pixel_centers");
    if (in->rank() != 4 || out->rank() != 4) return Unsupported(node, "of " + Dims(*in));
    flags = align ? XNN_FLAG_ALIGN_CORNERS : half ? 0 : XNN_FLAG_TENSORFLOW_LEGACY_MODE;
  } else if (node.code == Op::DEPTH_TO_SPACE) {
    const auto* o = node.options<tfl::DepthToSpaceOptions>();
    if (o == nullptr || o->block_size() < 2) return Unsupported(node, "with block size < 2");
    if (in->rank() != 4) return Unsupported(node, "of " + Dims(*in));
    block = static_cast<uint32_t>(o->block_size());
  } else if (node.code == Op::PRELU) {
    const Tensor* slope = node.inputs.size() > 1 ? node.inputs[1] : nullptr;
    DFARM_RETURN_IF_ERROR(CheckFloat(node, slope, "alpha"));
    if (slope->allocation != runtime::Allocation::kConstant || in->rank() < 1 ||
        slope->num_elements() != in->shape.back() ||
        (slope->rank() > 0 && slope->shape.back() != in->shape.back())) {
      return Unsupported(
          node, "with alpha " + Dims(*slope) + " (xnnpack takes one constant slope per channel)");
    }
  }
  if (b == nullptr) return Status::Ok();
  uint32_t i = 0, out_id = 0;
  DFARM_RETURN_IF_ERROR(b->Value(*in, &i));
  DFARM_RETURN_IF_ERROR(b->Value(*out, &out_id));
  if (node.code == Op::RESHAPE) {
    const std::vector<size_t> dims = SizeDims(out->shape);
    return Define(xnn_define_static_reshape(b->subgraph, dims.size(), dims.data(), i, out_id, 0),
                  node, "a reshape");
  }
  if (node.code == Op::RESIZE_BILINEAR) {
    return Define(xnn_define_static_resize_bilinear_2d(b->subgraph, out->shape[1], out->shape[2], i,
                                                       out_id, flags),
                  node, "a bilinear resize");
  }
  if (node.code == Op::DEPTH_TO_SPACE) {
    return Define(xnn_define_depth_to_space(b->subgraph, i, out_id, block, 0), node,
                  "a depth to space");
  }
  const Tensor* slope = node.inputs[1];
  const std::vector<float>& values = b->owned->emplace_back(
      slope->data_as<float>(), slope->data_as<float>() + slope->num_elements());
  const size_t dims[1] = {values.size()};
  uint32_t s = 0;
  DFARM_RETURN_IF_ERROR(Define(xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 1, dims,
                                                       values.data(), XNN_INVALID_VALUE_ID, 0, &s),
                               node, "a slope"));
  return Define(xnn_define_prelu(b->subgraph, i, s, out_id, 0), node, "a prelu");
}

// This XNNPACK has no concatenate node. When the inputs are contiguous blocks
// of the output (only unit dimensions before the axis), each input is copied
// (a clamp, which also applies the fused activation) into an external value
// that points at its block; see SubgraphBuild::concat_slices.
Status VisitConcatenation(const Node& node, SubgraphBuild* b) {
  if (node.inputs.empty() || node.outputs.size() != 1) return CheckArity(node, 1, 1, 1);
  const Tensor* out = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat(node, out, "output"));
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
    DFARM_RETURN_IF_ERROR(CheckFloat(node, in, "input"));
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

}  // namespace

std::vector<size_t> ConcatOffsets(const Node& node) {
  std::vector<size_t> offsets;
  size_t at = 0;
  for (const Tensor* in : node.inputs) {
    offsets.push_back(at);
    at += static_cast<size_t>(in->num_elements()) * sizeof(float);
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

Status SubgraphBuild::Internal(const std::vector<size_t>& shape, uint32_t* id_out) {
  const xnn_status s =
      xnn_define_tensor_value(subgraph, xnn_datatype_fp32, shape.size(), shape.data(), nullptr,
                              XNN_INVALID_VALUE_ID, 0, id_out);
  if (s != xnn_status_success) {
    return Status::Error(std::string("xnnpack refused an internal value: ") + XnnStatusName(s));
  }
  return Status::Ok();
}

Status SubgraphBuild::Value(const Tensor& tensor, uint32_t* id_out) {
  if (auto it = ids.find(tensor.index); it != ids.end()) {
    *id_out = it->second;
    return Status::Ok();
  }
  const std::vector<size_t> dims = SizeDims(tensor.shape);
  const void* data = tensor.has_static_value() ? tensor.data : nullptr;
  if (tensor.has_static_value() && data == nullptr) {
    return Status::Error("tensor " + std::to_string(tensor.index) + " '" + tensor.name +
                         "' has no data at Prepare()");
  }
  const xnn_status s = xnn_define_tensor_value(subgraph, xnn_datatype_fp32, dims.size(),
                                               dims.empty() ? nullptr : dims.data(), data,
                                               XNN_INVALID_VALUE_ID, 0, id_out);
  if (s != xnn_status_success) {
    return Status::Error("xnnpack refused tensor " + std::to_string(tensor.index) + " '" +
                         tensor.name + "' " + runtime::DescribeTensor(tensor) + ": " +
                         XnnStatusName(s));
  }
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
    case Op::RESIZE_BILINEAR:
    case Op::DEPTH_TO_SPACE:
    case Op::PRELU:
      return VisitOther(node, build);
    case Op::DEQUANTIZE:
      if (!node.inputs.empty() && node.inputs[0] != nullptr &&
          node.inputs[0]->dtype == DType::kFloat16) {
        return Status::Unsupported(
            "DEQUANTIZE from float16 is not supported by xnnpack (constant ones are folded at "
            "load)");
      }
      return Status::Unsupported("DEQUANTIZE is not supported by xnnpack");
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
