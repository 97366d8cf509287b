#include "delegates/gpu/gpu_nodes.h"

#include <bit>
#include <limits>
#include <string>

#include "delegates/gpu/gpu_quant.h"
#include "delegates/node_params.h"
#include "runtime/delegate.h"
#include "runtime/kernels/window.h"

namespace dfarm::delegates::gpu {
namespace {

using runtime::DType;
using runtime::Node;
using runtime::Status;
using runtime::Tensor;
namespace tfl = ::dfarm::tflite;
using Op = tfl::BuiltinOperator;

constexpr float kInf = std::numeric_limits<float>::infinity();
// Every index a kernel computes is an int: tensors stay well below 2^31 elements.
constexpr int64_t kMaxElements = int64_t{1} << 30;

int32_t Bits(float f) { return std::bit_cast<int32_t>(f); }

// Ok when `t` is a float32 tensor, or a quantized one computed in float
// (gpu_quant.h), of rank <= 4 (`what` names it).
Status CheckFloat(const Node& node, const Tensor* t, const char* what) {
  if (t == nullptr) return Unsupported(node, std::string("without its ") + what);
  if ((t->dtype != DType::kFloat32 || t->quantized) && !IsGpuQuantized(*t)) {
    return Unsupported(node, std::string("with ") + (t->quantized ? "quantized " : "") +
                                 runtime::DTypeName(t->dtype) + " " + what + " (tensor " +
                                 std::to_string(t->index) +
                                 "): the gpu delegate runs float32, and int8/uint8 quantized "
                                 "per tensor (constants also per channel)");
  }
  if (t->rank() > 4) {
    return Unsupported(node, std::string("with rank-") + std::to_string(t->rank()) + " " + what +
                                 " (the gpu delegate takes at most 4 dimensions)");
  }
  if (t->num_elements() > kMaxElements) {
    return Unsupported(node, std::string("with ") + what + " " + Dims(*t) + " over 2^30 elements");
  }
  return Status::Ok();
}

// The arity, and every input in [0, checked) (optional ones may be omitted)
// and the output float32.
Status CheckNodeTensors(const Node& node, size_t min_inputs, size_t max_inputs, size_t checked) {
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, min_inputs, max_inputs, 1));
  for (size_t i = 0; i < checked && i < node.inputs.size(); ++i) {
    if (node.inputs[i] == nullptr && i >= min_inputs) continue;  // an omitted optional input
    DFARM_RETURN_IF_ERROR(CheckFloat(node, node.inputs[i], "input"));
  }
  return CheckFloat(node, node.outputs[0], "output");
}

// `shape` as 4 dimensions, 1s prepended.
std::vector<int32_t> Pad4(const std::vector<int32_t>& shape) {
  std::vector<int32_t> dims(4 - shape.size(), 1);
  dims.insert(dims.end(), shape.begin(), shape.end());
  return dims;
}

int32_t Count(const Tensor& t) { return static_cast<int32_t>(t.num_elements()); }

void Add(GraphBuild* b, const char* kernel, const Tensor* a, const Tensor* w, const Tensor* c,
         const Tensor* out, std::vector<int32_t> params) {
  b->launches.push_back(Launch{kernel, a, w, c, out, std::move(params)});
}

// The strides of `in` read at each of the output's 4 dimensions (0 where it
// broadcasts); false when `in` does not broadcast to `out`.
bool BroadcastStrides(const Tensor& in, const std::vector<int32_t>& out4, int32_t* strides) {
  if (in.rank() > 4) return false;
  const std::vector<int32_t> in4 = Pad4(in.shape);
  int32_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    if (in4[d] != out4[d] && in4[d] != 1) return false;
    strides[d] = in4[d] == 1 ? 0 : stride;
    stride *= in4[d];
  }
  return true;
}

// ADD SUB MUL DIV MAXIMUM MINIMUM SQUARED_DIFFERENCE, and PRELU (alpha as b).
Status VisitBinary(const Node& node, GraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 2, 2, 2));
  const Tensor& x = *node.inputs[0];
  const Tensor& y = *node.inputs[1];
  const Tensor& out = *node.outputs[0];
  const std::vector<int32_t> out4 = Pad4(out.shape);
  int32_t sa[4], sb[4];
  if (!BroadcastStrides(x, out4, sa) || !BroadcastStrides(y, out4, sb)) {
    return Unsupported(node, "of " + Dims(x) + " and " + Dims(y) + " into " + Dims(out));
  }
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  int32_t op = 0;
  switch (node.code) {
    case Op::ADD:
      op = 0;
      break;
    case Op::SUB:
      op = 1;
      break;
    case Op::MUL:
      op = 2;
      break;
    case Op::DIV:
      op = 3;
      break;
    case Op::MAXIMUM:
      op = 4;
      break;
    case Op::MINIMUM:
      op = 5;
      break;
    case Op::SQUARED_DIFFERENCE:
      op = 6;
      break;
    default:
      op = 7;
      break;  // PRELU
  }
  std::vector<int32_t> p = {Count(out), op, Bits(lo), Bits(hi)};
  p.insert(p.end(), out4.begin(), out4.end());
  p.insert(p.end(), sa, sa + 4);
  p.insert(p.end(), sb, sb + 4);
  const bool flat = x.shape == out.shape && y.shape == out.shape;
  Add(b, flat ? "binary_flat" : "binary", &x, &y, nullptr, &out, std::move(p));
  return Status::Ok();
}

// The unary kernel's op number, with LEAKY_RELU's alpha; -1 for another op.
int UnaryOp(const Node& node, float* alpha) {
  switch (node.code) {
    case Op::RESHAPE:
      return 0;
    case Op::RELU:
      return 1;
    case Op::RELU6:
      return 2;
    case Op::RELU_N1_TO_1:
      return 3;
    case Op::LOGISTIC:
      return 4;
    case Op::TANH:
      return 5;
    case Op::HARD_SWISH:
      return 6;
    case Op::LEAKY_RELU: {
      const auto* o = node.options<tfl::LeakyReluOptions>();
      *alpha = o != nullptr ? o->alpha() : 0.0f;
      return 7;
    }
    case Op::ABS:
      return 8;
    case Op::NEG:
      return 9;
    case Op::SQRT:
      return 10;
    case Op::QUANTIZE:    // rounded to the output's grid by the fake_quant launch
    case Op::DEQUANTIZE:  // the input is on its grid already
      return 0;
    default:
      return -1;
  }
}

// Element-wise ops of one input, and RESHAPE (a copy: its shape input is not read).
Status VisitUnary(const Node& node, GraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 1, node.code == Op::RESHAPE ? 2 : 1, 1));
  const Tensor& in = *node.inputs[0];
  const Tensor& out = *node.outputs[0];
  if (in.num_elements() != out.num_elements()) {
    return Unsupported(node, "of " + Dims(in) + " into " + Dims(out));
  }
  float alpha = 0.0f;
  const int op = UnaryOp(node, &alpha);
  if (op < 0) return Unsupported(node, "is not supported by the gpu delegate");
  if (b == nullptr) return Status::Ok();
  Add(b, "unary", &in, nullptr, nullptr, &out,
      {Count(out), op, Bits(-kInf), Bits(kInf), Bits(alpha)});
  return Status::Ok();
}

Status VisitSoftmax(const Node& node, GraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 1, 1, 1));
  const Tensor& in = *node.inputs[0];
  const Tensor& out = *node.outputs[0];
  const auto* o = node.options<tfl::SoftmaxOptions>();
  if (in.rank() < 1 || in.shape != out.shape || in.shape.back() <= 0) {
    return Unsupported(node, "of " + Dims(in));
  }
  if (b == nullptr) return Status::Ok();
  const int32_t depth = in.shape.back();
  Add(b, "softmax", &in, nullptr, nullptr, &out,
      {Count(in) / depth, depth, Bits(o != nullptr ? o->beta() : 1.0f)});
  return Status::Ok();
}

// Explicit padding before one spatial dimension, as TFLite computes it;
// the output size must be the one the padding gives (and not empty).
Status PadBefore(const Node& node, tfl::Padding padding, runtime::WindowAxis axis, int in, int out,
                 int kernel, int stride, int dilation, int32_t* before) {
  Pads pads;
  DFARM_RETURN_IF_ERROR(SpatialPadding(node,
                                       {padding, axis, "filter", in, out, kernel, stride, dilation},
                                       /*empty_ok=*/false, &pads));
  *before = pads.before;
  return Status::Ok();
}

// CONV_2D (grouped, dilated) and DEPTHWISE_CONV_2D (any depth multiplier).
Status VisitConv(const Node& node, GraphBuild* b) {
  const bool depthwise = node.code == Op::DEPTHWISE_CONV_2D;
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 2, 3, 3));
  const Tensor& in = *node.inputs[0];
  const Tensor& filter = *node.inputs[1];
  const Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  const Tensor& out = *node.outputs[0];
  ConvParams c;
  DFARM_RETURN_IF_ERROR(ReadConvParams(node, &c));
  if (in.rank() != 4 || filter.rank() != 4 || out.rank() != 4 || in.shape[0] != out.shape[0]) {
    return Unsupported(node, "with input " + Dims(in) + ", filter " + Dims(filter));
  }
  const int kh = filter.shape[1], kw = filter.shape[2], cin = in.shape[3], cout = out.shape[3];
  int groups = 1, mult = 0;
  if (depthwise) {
    if (filter.shape[0] != 1 || filter.shape[3] != cout || cin <= 0 || cout % cin != 0) {
      return Unsupported(node, "with filter " + Dims(filter) + " for input " + Dims(in));
    }
    mult = cout / cin;
  } else {
    const int fcin = filter.shape[3];
    if (filter.shape[0] != cout || fcin <= 0 || cin % fcin != 0 || cout % (cin / fcin) != 0) {
      return Unsupported(node, "with filter " + Dims(filter) + " for input " + Dims(in));
    }
    groups = cin / fcin;
  }
  if (bias != nullptr && bias->num_elements() != cout) {
    return Unsupported(
        node, "with bias " + Dims(*bias) + " for " + std::to_string(cout) + " output channels");
  }
  int32_t pt = 0, pl = 0;
  DFARM_RETURN_IF_ERROR(PadBefore(node, c.padding, runtime::WindowAxis::kHeight, in.shape[1],
                                  out.shape[1], kh, c.sh, c.dh, &pt));
  DFARM_RETURN_IF_ERROR(PadBefore(node, c.padding, runtime::WindowAxis::kWidth, in.shape[2],
                                  out.shape[2], kw, c.sw, c.dw, &pl));
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  const bool hwio = !depthwise && groups == 1 && filter.has_static_value();
  const bool by4 = (hwio || (depthwise && mult == 1)) && cout % 4 == 0;
  const char* kernel = depthwise ? (by4 ? "depthwise4" : "conv")
                       : by4     ? "conv_hwio4"
                       : hwio    ? "conv_hwio"
                                 : "conv";
  Add(b, kernel, &in, &filter, bias, &out,
      {Count(out),
       Bits(lo),
       Bits(hi),
       in.shape[1],
       in.shape[2],
       cin,
       out.shape[1],
       out.shape[2],
       cout,
       kh,
       kw,
       c.sh,
       c.sw,
       c.dh,
       c.dw,
       pt,
       pl,
       groups,
       bias != nullptr ? 1 : 0,
       mult});
  b->launches.back().b_layout = hwio ? 1 : 0;
  if (by4) b->launches.back().params[0] /= 4;  // 4 outputs per work-item
  return Status::Ok();
}

struct TransposeParams {
  const Tensor *in = nullptr, *filter = nullptr, *bias = nullptr;
  tfl::Padding padding = tfl::Padding::VALID;
  int sh = 1, sw = 1;
  float lo = -kInf, hi = kInf;
};

// TRANSPOSE_CONV's or MediaPipe's Convolution2DTransposeBias's inputs and options.
Status ReadTransposeParams(const Node& node, TransposeParams* t) {
  if (node.code == Op::CUSTOM) {
    DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 3, 3, 3));
    t->in = node.inputs[0], t->filter = node.inputs[1], t->bias = node.inputs[2];
    ConvParams c;
    DFARM_RETURN_IF_ERROR(ReadTransposeBiasOptions(node, &c));
    t->padding = c.padding, t->sh = c.sh, t->sw = c.sw;
    return Status::Ok();
  }
  DFARM_RETURN_IF_ERROR(delegates::CheckArity(node, 3, 4, 1));
  t->filter = node.inputs[1], t->in = node.inputs[2];
  t->bias = node.inputs.size() > 3 ? node.inputs[3] : nullptr;
  for (const Tensor* x : std::initializer_list<const Tensor*>{t->filter, t->in, node.outputs[0]}) {
    DFARM_RETURN_IF_ERROR(CheckFloat(node, x, "tensor"));
  }
  if (t->bias != nullptr) DFARM_RETURN_IF_ERROR(CheckFloat(node, t->bias, "bias"));
  const auto* o = node.options<tfl::TransposeConvOptions>();
  if (o == nullptr) return Unsupported(node, "without TransposeConvOptions");
  t->padding = o->padding(), t->sh = o->stride_h(), t->sw = o->stride_w();
  return ActivationRange(node, &t->lo, &t->hi);
}

// Gathered per output: output y reads input (y + pad_before - ky) / stride.
Status VisitTransposeConv(const Node& node, GraphBuild* b) {
  TransposeParams t;
  DFARM_RETURN_IF_ERROR(ReadTransposeParams(node, &t));
  const Tensor& in = *t.in;
  const Tensor& filter = *t.filter;
  const Tensor& out = *node.outputs[0];
  if (in.rank() != 4 || filter.rank() != 4 || out.rank() != 4 || t.sh < 1 || t.sw < 1) {
    return Unsupported(node, "with input " + Dims(in) + ", filter " + Dims(filter));
  }
  const int cin = in.shape[3], cout = out.shape[3], kh = filter.shape[1], kw = filter.shape[2];
  if (filter.shape[0] != cout || filter.shape[3] != cin || in.shape[0] != out.shape[0] ||
      (t.bias != nullptr && t.bias->num_elements() != cout)) {
    return Unsupported(node, "with filter " + Dims(filter) + " for input " + Dims(in) +
                                 " and output " + Dims(out));
  }
  int32_t before[2];
  const int ins[2] = {in.shape[1], in.shape[2]}, outs[2] = {out.shape[1], out.shape[2]};
  const int ks[2] = {kh, kw}, ss[2] = {t.sh, t.sw};
  for (int d = 0; d < 2; ++d) {
    const int64_t full = static_cast<int64_t>(ss[d]) * (ins[d] - 1) + ks[d];
    if (full > kMaxElements || ins[d] <= 0) {
      return Unsupported(node, "whose stride scatters input " + Dims(in) + " too far");
    }
    const int64_t total = std::max<int64_t>(full - outs[d], 0);
    before[d] = t.padding == tfl::Padding::SAME ? static_cast<int32_t>(total / 2) : 0;
  }
  if (b == nullptr) return Status::Ok();
  const bool hwio = filter.has_static_value();
  Add(b, hwio ? "transpose_conv_hwio" : "transpose_conv", &in, &filter, t.bias, &out,
      {Count(out), Bits(t.lo), Bits(t.hi), in.shape[1], in.shape[2], cin, out.shape[1],
       out.shape[2], cout, kh, kw, t.sh, t.sw, before[0], before[1], t.bias != nullptr ? 1 : 0});
  b->launches.back().b_layout = hwio ? 1 : 0;
  return Status::Ok();
}

Status VisitFullyConnected(const Node& node, GraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 2, 3, 3));
  const Tensor& in = *node.inputs[0];
  const Tensor& w = *node.inputs[1];
  const Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  const Tensor& out = *node.outputs[0];
  const auto* o = node.options<tfl::FullyConnectedOptions>();
  if (o != nullptr && o->weights_format() != 0) {
    return Unsupported(node, "with shuffled weights");
  }
  if (w.rank() != 2) return Unsupported(node, "with weights " + Dims(w));
  const int units = w.shape[0], depth = w.shape[1];
  if (depth <= 0 || units <= 0 || in.num_elements() % depth != 0 ||
      out.num_elements() != in.num_elements() / depth * units ||
      (bias != nullptr && bias->num_elements() != units)) {
    return Unsupported(node,
                       "with input " + Dims(in) + ", weights " + Dims(w) + ", output " + Dims(out));
  }
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  const bool transposed = w.has_static_value();
  Add(b, "fully_connected", &in, &w, bias, &out,
      {Count(out), Bits(lo), Bits(hi), units, depth, bias != nullptr ? 1 : 0,
       transposed ? 1 : depth, transposed ? units : 1});
  b->launches.back().b_layout = transposed ? 1 : 0;
  return Status::Ok();
}

Status VisitPool(const Node& node, GraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 1, 1, 1));
  const Tensor& in = *node.inputs[0];
  const Tensor& out = *node.outputs[0];
  const auto* o = node.options<tfl::Pool2DOptions>();
  if (o == nullptr) return Unsupported(node, "without Pool2DOptions");
  if (in.rank() != 4 || out.rank() != 4 || in.shape[0] != out.shape[0] ||
      in.shape[3] != out.shape[3]) {
    return Unsupported(node, "of " + Dims(in) + " into " + Dims(out));
  }
  const int fh = o->filter_height(), fw = o->filter_width(), sh = o->stride_h(), sw = o->stride_w();
  if (fh < 1 || fw < 1 || sh < 1 || sw < 1) return Unsupported(node, "with a window < 1");
  int32_t pt = 0, pl = 0;
  DFARM_RETURN_IF_ERROR(PadBefore(node, o->padding(), runtime::WindowAxis::kHeight, in.shape[1],
                                  out.shape[1], fh, sh, 1, &pt));
  DFARM_RETURN_IF_ERROR(PadBefore(node, o->padding(), runtime::WindowAxis::kWidth, in.shape[2],
                                  out.shape[2], fw, sw, 1, &pl));
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  Add(b, "pool", &in, nullptr, nullptr, &out,
      {Count(out), Bits(lo), Bits(hi), in.shape[1], in.shape[2], in.shape[3], out.shape[1],
       out.shape[2], fh, fw, sh, sw, pt, pl, node.code == Op::AVERAGE_POOL_2D ? 1 : 0});
  return Status::Ok();
}

Status VisitMean(const Node& node, GraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 2, 2, 1));
  const Tensor& in = *node.inputs[0];
  const Tensor& out = *node.outputs[0];
  std::vector<int64_t> axes;
  DFARM_RETURN_IF_ERROR(ReadInts(node, node.inputs[1], "axes", &axes));
  const int shift = 4 - in.rank();
  int32_t reduce[4] = {0, 0, 0, 0};
  for (int64_t axis : axes) {
    if (axis < 0) axis += in.rank();
    if (axis < 0 || axis >= in.rank()) return Unsupported(node, "with an axis out of range");
    reduce[axis + shift] = 1;
  }
  const std::vector<int32_t> in4 = Pad4(in.shape);
  int64_t kept = 1, reduced = 1;
  for (int d = 0; d < 4; ++d) (reduce[d] ? reduced : kept) *= in4[d];
  if (kept != out.num_elements() || reduced <= 0) {
    return Unsupported(node, "of " + Dims(in) + " into " + Dims(out));
  }
  if (b == nullptr) return Status::Ok();
  std::vector<int32_t> p = {Count(out)};
  p.insert(p.end(), in4.begin(), in4.end());
  p.insert(p.end(), reduce, reduce + 4);
  Add(b, "mean", &in, nullptr, nullptr, &out, std::move(p));
  return Status::Ok();
}

Status VisitPad(const Node& node, GraphBuild* b) {
  const bool v2 = node.code == Op::PADV2;
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 2, v2 ? 3 : 2, 1));
  const Tensor& in = *node.inputs[0];
  const Tensor& out = *node.outputs[0];
  std::vector<int64_t> pads;
  DFARM_RETURN_IF_ERROR(ReadInts(node, node.inputs[1], "paddings", &pads));
  if (pads.size() != 2 * static_cast<size_t>(in.rank()) || in.rank() != out.rank()) {
    return Unsupported(node, "with " + std::to_string(pads.size()) + " paddings for " + Dims(in));
  }
  const int shift = 4 - in.rank();
  std::vector<int32_t> before(4, 0);
  for (int d = 0; d < in.rank(); ++d) {
    if (pads[2 * d] < 0 || pads[2 * d + 1] < 0 ||
        in.shape[d] + pads[2 * d] + pads[2 * d + 1] != out.shape[d]) {
      return Unsupported(node, "with paddings that do not give " + Dims(out));
    }
    before[d + shift] = static_cast<int32_t>(pads[2 * d]);
  }
  float value = 0.0f;
  if (v2 && node.inputs.size() == 3 && node.inputs[2] != nullptr) {
    const Tensor* c = node.inputs[2];
    if (c->dtype != DType::kFloat32 || !c->has_static_value() || c->num_elements() != 1) {
      return Unsupported(node, "with a value that is not a float32 constant scalar");
    }
    value = c->data_as<float>()[0];
  }
  if (b == nullptr) return Status::Ok();
  const std::vector<int32_t> out4 = Pad4(out.shape), in4 = Pad4(in.shape);
  std::vector<int32_t> p = {Count(out), Bits(value)};
  p.insert(p.end(), out4.begin(), out4.end());
  p.insert(p.end(), in4.begin(), in4.end());
  p.insert(p.end(), before.begin(), before.end());
  Add(b, "pad", &in, nullptr, nullptr, &out, std::move(p));
  return Status::Ok();
}

// TFLite's scale: (in - 1) / (out - 1) with align_corners, else in / out.
float ResizeScale(int in, int out, bool align) {
  return align && out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                          : static_cast<float>(in) / static_cast<float>(out);
}

Status VisitResizeBilinear(const Node& node, GraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 1, 2, 1));
  const Tensor& in = *node.inputs[0];
  const Tensor& out = *node.outputs[0];
  const auto* o = node.options<tfl::ResizeBilinearOptions>();
  const bool align = o != nullptr && o->align_corners();
  const bool half = o != nullptr && o->half_pixel_centers();
  if (align && half) return Unsupported(node, "with align_corners and half_pixel_centers");
  if (in.rank() != 4 || out.rank() != 4 || in.shape[0] != out.shape[0] ||
      in.shape[3] != out.shape[3] || out.shape[1] <= 0 || out.shape[2] <= 0) {
    return Unsupported(node, "of " + Dims(in) + " into " + Dims(out));
  }
  if (b == nullptr) return Status::Ok();
  Add(b, "resize_bilinear", &in, nullptr, nullptr, &out,
      {Count(out), in.shape[1], in.shape[2], in.shape[3], out.shape[1], out.shape[2], half ? 1 : 0,
       Bits(ResizeScale(in.shape[1], out.shape[1], align)),
       Bits(ResizeScale(in.shape[2], out.shape[2], align))});
  return Status::Ok();
}

Status VisitDepthToSpace(const Node& node, GraphBuild* b) {
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 1, 1, 1));
  const Tensor& in = *node.inputs[0];
  const Tensor& out = *node.outputs[0];
  const auto* o = node.options<tfl::DepthToSpaceOptions>();
  const int bs = o != nullptr ? o->block_size() : 0;
  if (bs < 1 || in.rank() != 4 || out.rank() != 4 || in.shape[3] % (bs * bs) != 0 ||
      out.shape[3] != in.shape[3] / (bs * bs) || out.shape[1] != in.shape[1] * bs ||
      out.shape[2] != in.shape[2] * bs) {
    return Unsupported(node, "of " + Dims(in) + " into " + Dims(out));
  }
  if (b == nullptr) return Status::Ok();
  Add(b, "depth_to_space", &in, nullptr, nullptr, &out,
      {Count(out), in.shape[1], in.shape[2], in.shape[3], bs, out.shape[3]});
  return Status::Ok();
}

// Any axis: each input is copied into its block of every outer slice.
Status VisitConcatenation(const Node& node, GraphBuild* b) {
  if (node.inputs.empty()) return delegates::CheckArity(node, 1, 1, 1);
  DFARM_RETURN_IF_ERROR(CheckNodeTensors(node, 1, node.inputs.size(), node.inputs.size()));
  const Tensor& out = *node.outputs[0];
  const auto* o = node.options<tfl::ConcatenationOptions>();
  int axis = o != nullptr ? o->axis() : 0;
  if (axis < 0) axis += out.rank();
  if (axis < 0 || axis >= out.rank()) return Unsupported(node, "with axis out of range");
  int64_t inner = 1, total = 0;
  for (int d = axis + 1; d < out.rank(); ++d) inner *= out.shape[d];
  for (const Tensor* in : node.inputs) {
    if (in->rank() != out.rank()) return Unsupported(node, "with inputs of another rank");
    for (int d = 0; d < out.rank(); ++d) {
      if (d != axis && in->shape[d] != out.shape[d]) {
        return Unsupported(node, "of " + Dims(*in) + " into " + Dims(out));
      }
    }
    total += in->shape[axis];
  }
  if (total != out.shape[axis]) return Unsupported(node, "whose inputs do not fill " + Dims(out));
  float lo = -kInf, hi = kInf;
  DFARM_RETURN_IF_ERROR(ActivationRange(node, &lo, &hi));
  if (b == nullptr) return Status::Ok();
  int64_t offset = 0;
  for (const Tensor* in : node.inputs) {
    const int64_t block = in->shape[axis] * inner;
    Add(b, "concat_slice", in, nullptr, nullptr, &out,
        {Count(*in), Bits(lo), Bits(hi), static_cast<int32_t>(block),
         static_cast<int32_t>(out.shape[axis] * inner), static_cast<int32_t>(offset)});
    offset += block;
  }
  return Status::Ok();
}

// Without quantized_models_allowed, the first quantized tensor of `node`.
Status CheckQuantizedAllowed(const Node& node) {
  for (const std::vector<Tensor*>* list : {&node.inputs, &node.outputs}) {
    for (const Tensor* t : *list) {
      if (t != nullptr && t->quantized) {
        return Unsupported(node, "with quantized " + std::string(runtime::DTypeName(t->dtype)) +
                                     " tensor " + std::to_string(t->index) +
                                     " (quantized_models_allowed is false)");
      }
    }
  }
  return Status::Ok();
}

// Rounds a quantized output to its grid in place: real values that its
// integer codes can hold, as the integer kernels write.
void AddFakeQuant(const Tensor& out, GraphBuild* b) {
  const bool s8 = out.dtype == DType::kInt8;
  Add(b, "fake_quant", &out, nullptr, nullptr, &out,
      {Count(out), Bits(out.scale), static_cast<int32_t>(out.zero_point), s8 ? -128 : 0,
       s8 ? 127 : 255});
}

Status VisitOp(const Node& node, GraphBuild* build);

}  // namespace

Status VisitNode(const Node& node, bool quantized_models_allowed, GraphBuild* build) {
  if (!quantized_models_allowed) DFARM_RETURN_IF_ERROR(CheckQuantizedAllowed(node));
  DFARM_RETURN_IF_ERROR(VisitOp(node, build));
  if (build != nullptr && node.outputs.size() == 1 && node.outputs[0] != nullptr &&
      node.outputs[0]->quantized) {
    AddFakeQuant(*node.outputs[0], build);
  }
  return Status::Ok();
}

namespace {

Status VisitOp(const Node& node, GraphBuild* build) {
  switch (node.code) {
    case Op::ADD:
    case Op::SUB:
    case Op::MUL:
    case Op::DIV:
    case Op::MAXIMUM:
    case Op::MINIMUM:
    case Op::SQUARED_DIFFERENCE:
    case Op::PRELU:
      return VisitBinary(node, build);
    case Op::RESHAPE:
    case Op::RELU:
    case Op::RELU6:
    case Op::RELU_N1_TO_1:
    case Op::LOGISTIC:
    case Op::TANH:
    case Op::HARD_SWISH:
    case Op::LEAKY_RELU:
    case Op::ABS:
    case Op::NEG:
    case Op::SQRT:
    case Op::QUANTIZE:
    case Op::DEQUANTIZE:
      return VisitUnary(node, build);
    case Op::SOFTMAX:
      return VisitSoftmax(node, build);
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
    case Op::RESIZE_BILINEAR:
      return VisitResizeBilinear(node, build);
    case Op::DEPTH_TO_SPACE:
      return VisitDepthToSpace(node, build);
    case Op::CONCATENATION:
      return VisitConcatenation(node, build);
    case Op::CUSTOM:
      if (node.op_name == "Convolution2DTransposeBias") return VisitTransposeConv(node, build);
      return Status::Unsupported("custom op " + node.op_name +
                                 " is not supported by the gpu delegate");
    default:
      return Status::Unsupported(node.op_name + " is not supported by the gpu delegate");
  }
}

}  // namespace
}  // namespace dfarm::delegates::gpu
