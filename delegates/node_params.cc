#include "delegates/node_params.h"

#include <cstring>

#include "runtime/delegate.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/tensor.h"

namespace dfarm::delegates {

using runtime::DType;
using runtime::Node;
using runtime::Status;
using runtime::Tensor;

Status Unsupported(const Node& node, const std::string& why) {
  return Status::Unsupported(node.op_name + " " + why);
}

std::string Dims(const Tensor& t) { return runtime::ShapeToString(t.shape); }

Status CheckArity(const Node& node, size_t min_inputs, size_t max_inputs, size_t outputs) {
  if (node.inputs.size() < min_inputs || node.inputs.size() > max_inputs ||
      node.outputs.size() != outputs) {
    return Unsupported(node, "with " + std::to_string(node.inputs.size()) + " inputs and " +
                                 std::to_string(node.outputs.size()) + " outputs");
  }
  return Status::Ok();
}

Status ReadInts(const Node& node, const Tensor* t, const char* what, std::vector<int64_t>* out) {
  if (t == nullptr || !t->has_static_value() || t->data == nullptr) {
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
  // The CPU kernels' ranges; the reason names the node.
  runtime::ActivationRange range{};
  if (!runtime::GetActivationRange(runtime::FusedActivation(node), &range).ok()) {
    return Unsupported(node,
                       std::string("with fused activation ") +
                           tflite::EnumNameActivationFunctionType(runtime::FusedActivation(node)));
  }
  *lo = range.min, *hi = range.max;
  return Status::Ok();
}

Status ReadConvParams(const Node& node, ConvParams* c) {
  if (node.code == tflite::BuiltinOperator::DEPTHWISE_CONV_2D) {
    const auto* o = node.options<tflite::DepthwiseConv2DOptions>();
    if (o == nullptr) return Unsupported(node, "without DepthwiseConv2DOptions");
    *c = {o->padding(), o->stride_h(), o->stride_w(), o->dilation_h_factor(),
          o->dilation_w_factor()};
  } else {
    const auto* o = node.options<tflite::Conv2DOptions>();
    if (o == nullptr) return Unsupported(node, "without Conv2DOptions");
    *c = {o->padding(), o->stride_h(), o->stride_w(), o->dilation_h_factor(),
          o->dilation_w_factor()};
  }
  if (c->sh < 1 || c->sw < 1 || c->dh < 1 || c->dw < 1) {
    return Unsupported(node, "with a stride or dilation < 1");
  }
  return Status::Ok();
}

Status ReadTransposeBiasOptions(const Node& node, ConvParams* c) {
  const auto* opts = node.op->custom_options();
  if (opts == nullptr || opts->size() < 12) return Unsupported(node, "without its 3 int32 options");
  int32_t v[3];
  std::memcpy(v, opts->data(), sizeof(v));
  if (v[0] != 1 && v[0] != 2) return Unsupported(node, "with padding " + std::to_string(v[0]));
  *c = {v[0] == 1 ? tflite::Padding::SAME : tflite::Padding::VALID, v[2], v[1], 1, 1};
  return Status::Ok();
}

Status SpatialPadding(const Node& node, const Window& w, bool empty_ok, Pads* pads) {
  runtime::WindowDim dim{};
  if (Status s = runtime::ComputeWindowDim(w.padding, w.axis, w.kernel_name, w.in, w.kernel,
                                           w.stride, w.dilation, &dim);
      !s.ok()) {
    return Unsupported(node, "whose window does not fit int32: " + s.message());
  }
  // VALID's size before ComputeWindowDim clamps it at 0 (an input smaller
  // than the window is declined, as it always was).
  const bool same = w.padding == tflite::Padding::SAME;
  const int64_t effective = (static_cast<int64_t>(w.kernel) - 1) * w.dilation + 1;
  const int64_t expected = same ? dim.out : (w.in - effective + w.stride) / w.stride;
  if (w.out != expected || (!empty_ok && w.out <= 0)) {
    return Unsupported(node, "whose output size " + std::to_string(w.out) + " is not the " +
                                 (same ? "SAME" : "VALID") + " size " + std::to_string(expected));
  }
  *pads = same ? Pads{dim.pad_before, dim.pad_after} : Pads{};
  return Status::Ok();
}

}  // namespace dfarm::delegates
