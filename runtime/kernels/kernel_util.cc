#include "runtime/kernels/kernel_util.h"

#include <limits>
#include <string>

#include "runtime/model.h"

namespace dfarm::runtime {

Status CheckArity(const Node& node, int min_inputs, int max_inputs, int num_outputs) {
  int in = static_cast<int>(node.inputs.size());
  int out = static_cast<int>(node.outputs.size());
  if (in < min_inputs || in > max_inputs) {
    std::string want = min_inputs == max_inputs
                           ? std::to_string(min_inputs)
                           : std::to_string(min_inputs) + " to " + std::to_string(max_inputs);
    return Status::Error("expected " + want + " inputs, got " + std::to_string(in));
  }
  if (out != num_outputs) {
    return Status::Error("expected " + std::to_string(num_outputs) + " outputs, got " +
                         std::to_string(out));
  }
  for (int i = 0; i < min_inputs; ++i) {
    if (node.inputs[i] == nullptr) {
      return Status::Error("input " + std::to_string(i) + " is required but omitted");
    }
  }
  return Status::Ok();
}

Status CheckFloat32(const Tensor* tensor, const char* role) {
  if (tensor == nullptr) return Status::Error(std::string(role) + " is missing");
  if (tensor->dtype != DType::kFloat32) {
    return Status::Unsupported(std::string(role) + " has dtype " + DTypeName(tensor->dtype) +
                               " (only float32 is supported)");
  }
  return Status::Ok();
}

Status ReadStaticInts(const Tensor* tensor, const char* role, std::vector<int64_t>* values_out) {
  if (tensor == nullptr) return Status::Error(std::string(role) + " is missing");
  if (tensor->dtype != DType::kInt32 && tensor->dtype != DType::kInt64) {
    return Status::Error(std::string(role) + " must be int32 or int64, got " +
                         DTypeName(tensor->dtype));
  }
  if (!tensor->has_static_value()) {
    return Status::Unsupported(std::string(role) + " computed at run time is not supported");
  }
  const int64_t n = tensor->num_elements();
  values_out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    (*values_out)[i] = tensor->dtype == DType::kInt32 ? tensor->data_as<int32_t>()[i]
                                                      : tensor->data_as<int64_t>()[i];
  }
  return Status::Ok();
}

Status NormalizeAxis(int64_t axis, int rank, const char* role, int* axis_out) {
  if (axis < -rank || axis >= rank) {
    return Status::Error(std::string(role) + " " + std::to_string(axis) +
                         " is out of range for rank " + std::to_string(rank));
  }
  *axis_out = static_cast<int>(axis < 0 ? axis + rank : axis);
  return Status::Ok();
}

Status CheckSameDType(const Tensor* a, const char* role_a, const Tensor* b, const char* role_b) {
  if (a == nullptr) return Status::Error(std::string(role_a) + " is missing");
  if (b == nullptr) return Status::Error(std::string(role_b) + " is missing");
  if (a->dtype != b->dtype) {
    return Status::Error(std::string(role_b) + " dtype " + DTypeName(b->dtype) + " differs from " +
                         role_a + " dtype " + DTypeName(a->dtype));
  }
  return Status::Ok();
}

std::vector<int64_t> RowMajorStrides(std::span<const int32_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

namespace {

template <typename T>
void StridedCopyTyped(const StridedView& v, const T* in, T* out) {
  if (v.rank == 0) {
    out[0] = in[v.offset];
    return;
  }
  for (int d = 0; d < v.rank; ++d) {
    if (v.dims[d] <= 0) return;
  }
  const int last = v.rank - 1;
  const int64_t inner = v.dims[last], inner_stride = v.strides[last];
  std::array<int64_t, kMaxStridedRank> index{};
  int64_t offset = v.offset;
  while (true) {
    const T* src = in + offset;
    for (int64_t i = 0; i < inner; ++i) out[i] = src[i * inner_stride];
    out += inner;
    int d = last - 1;
    for (; d >= 0; --d) {
      offset += v.strides[d];
      if (++index[d] < v.dims[d]) break;
      offset -= v.strides[d] * v.dims[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace

void StridedCopy(const StridedView& view, const std::byte* in, std::byte* out,
                 size_t element_size) {
  switch (element_size) {
    case 1:
      StridedCopyTyped(view, reinterpret_cast<const uint8_t*>(in), reinterpret_cast<uint8_t*>(out));
      break;
    case 2:
      StridedCopyTyped(view, reinterpret_cast<const uint16_t*>(in),
                       reinterpret_cast<uint16_t*>(out));
      break;
    case 4:
      StridedCopyTyped(view, reinterpret_cast<const uint32_t*>(in),
                       reinterpret_cast<uint32_t*>(out));
      break;
    default:
      StridedCopyTyped(view, reinterpret_cast<const uint64_t*>(in),
                       reinterpret_cast<uint64_t*>(out));
      break;
  }
}

Status EvalStrided(Node& node) {
  StridedCopy(node.data_as<StridedData>()->view, node.inputs[0]->data, node.outputs[0]->data,
              DTypeSize(node.inputs[0]->dtype));
  return Status::Ok();
}

namespace {

Status OutputShapeMismatch(const Tensor& output, std::span<const int32_t> computed) {
  std::string declared = ShapeToString(output.shape);
  if (!output.shape_signature.empty()) {
    declared += " (shape_signature " + ShapeToString(output.shape_signature) + ")";
  }
  return Status::Error("output tensor " + std::to_string(output.index) + " '" + output.name +
                       "' is declared " + declared + ", but the op computes " +
                       ShapeToString(computed));
}

}  // namespace

Status CheckOutputShape(Tensor& output, std::span<const int32_t> computed) {
  if (std::equal(output.shape.begin(), output.shape.end(), computed.begin(), computed.end())) {
    return Status::Ok();
  }
  if (!DeclaredShapeAdmits(output, computed)) return OutputShapeMismatch(output, computed);
  if (ShapeElementCount(computed) < 0) {
    return Status::Error("output tensor " + std::to_string(output.index) + " '" + output.name +
                         "' would have shape " + ShapeToString(computed) +
                         ", a negative dimension or over " + std::to_string(kMaxTensorElements) +
                         " elements");
  }
  SetShape(computed, &output);
  output.shape_set_by_op = true;
  return Status::Ok();
}

Status CheckOutputShape(const Tensor& output, std::span<const int32_t> computed) {
  if (!std::equal(output.shape.begin(), output.shape.end(), computed.begin(), computed.end())) {
    return OutputShapeMismatch(output, computed);
  }
  return Status::Ok();
}

Status CheckFoldedAddend(const Node& node, const Tensor& output, bool quantized) {
  const Tensor* addend = node.folded_addend;
  if (addend == nullptr) return Status::Ok();
  if (quantized) return Status::Error("a folded ADD needs a float kernel");
  DFARM_RETURN_IF_ERROR(CheckFloat32(addend, "folded ADD's addend"));
  const int begin = node.folded_addend_channels[0], end = node.folded_addend_channels[1];
  const int out_c = output.shape[3];
  if (addend->rank() != 4 || begin < 0 || begin > end || end > out_c ||
      addend->shape[0] != output.shape[0] || addend->shape[1] != output.shape[1] ||
      addend->shape[2] != output.shape[2] || addend->shape[3] != end - begin) {
    return Status::Error("folded ADD's addend " + ShapeToString(addend->shape) +
                         " does not match output " + ShapeToString(output.shape) +
                         " at channels [" + std::to_string(begin) + ", " + std::to_string(end) +
                         ")");
  }
  return Status::Ok();
}

Status GetActivationRange(tflite::ActivationFunctionType activation, ActivationRange* range_out) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  switch (activation) {
    case tflite::ActivationFunctionType::NONE:
      *range_out = {-kInf, kInf};
      return Status::Ok();
    case tflite::ActivationFunctionType::RELU:
      *range_out = {0.0f, kInf};
      return Status::Ok();
    case tflite::ActivationFunctionType::RELU_N1_TO_1:
      *range_out = {-1.0f, 1.0f};
      return Status::Ok();
    case tflite::ActivationFunctionType::RELU6:
      *range_out = {0.0f, 6.0f};
      return Status::Ok();
    default: {
      const char* name = tflite::EnumNameActivationFunctionType(activation);
      return Status::Unsupported(std::string("fused activation ") +
                                 (name != nullptr && *name ? name : "(unknown)") +
                                 " is not supported");
    }
  }
}

tflite::ActivationFunctionType FusedActivation(const Node& node) {
  using tflite::ActivationFunctionType;
  if (node.op == nullptr) return ActivationFunctionType::NONE;
  auto of = [](const auto* options) {
    return options != nullptr ? options->fused_activation_function() : ActivationFunctionType::NONE;
  };
  switch (node.op->builtin_options_type()) {
    case tflite::BuiltinOptions::AddOptions:
      return of(node.options<tflite::AddOptions>());
    case tflite::BuiltinOptions::SubOptions:
      return of(node.options<tflite::SubOptions>());
    case tflite::BuiltinOptions::MulOptions:
      return of(node.options<tflite::MulOptions>());
    case tflite::BuiltinOptions::DivOptions:
      return of(node.options<tflite::DivOptions>());
    case tflite::BuiltinOptions::Conv2DOptions:
      return of(node.options<tflite::Conv2DOptions>());
    case tflite::BuiltinOptions::TransposeConvOptions:
      return of(node.options<tflite::TransposeConvOptions>());
    case tflite::BuiltinOptions::DepthwiseConv2DOptions:
      return of(node.options<tflite::DepthwiseConv2DOptions>());
    case tflite::BuiltinOptions::FullyConnectedOptions:
      return of(node.options<tflite::FullyConnectedOptions>());
    case tflite::BuiltinOptions::Pool2DOptions:
      return of(node.options<tflite::Pool2DOptions>());
    case tflite::BuiltinOptions::ConcatenationOptions:
      return of(node.options<tflite::ConcatenationOptions>());
    default:
      return ActivationFunctionType::NONE;
  }
}

Status ComputeWindowDim(tflite::Padding padding, WindowAxis axis, const char* filter_name, int in,
                        int filter, int stride, int dilation, WindowDim* dim_out) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const bool h = axis == WindowAxis::kHeight;
  const std::string extent = h ? "height" : "width";
  const std::string stride_field =
      std::string(h ? "stride_h " : "stride_w ") + std::to_string(stride);
  const std::string dilation_field =
      std::string(h ? "dilation_h_factor " : "dilation_w_factor ") + std::to_string(dilation);
  const std::string filter_field = std::string(filter_name) + " " + std::to_string(filter);
  const int64_t effective = (static_cast<int64_t>(filter) - 1) * dilation + 1;
  if (effective > kMax) {
    return Status::Error(dilation_field + " makes the effective filter " + extent + " overflow: (" +
                         filter_field + " - 1) * " + std::to_string(dilation) +
                         " + 1 = " + std::to_string(effective) + " > " + std::to_string(kMax));
  }
  int64_t out = padding == tflite::Padding::SAME ? (int64_t{in} + stride - 1) / stride
                                                 : (in - effective + stride) / stride;
  if (out < 0) out = 0;
  const int64_t padded = (out - 1) * stride + effective;
  if (out > 0 && padded > kMax) {
    return Status::Error(
        filter_field + (dilation > 1 ? " (" + dilation_field + ")" : std::string()) + " with " +
        stride_field + " makes the padded input " + extent + " overflow: (" + std::to_string(out) +
        " - 1) * " + std::to_string(stride) + " + " + std::to_string(effective) + " = " +
        std::to_string(padded) + " > " + std::to_string(kMax) + " (input " + extent + " " +
        std::to_string(in) + ")");
  }
  const int64_t pad_total = std::max<int64_t>(padded - in, 0);
  *dim_out = {static_cast<int>(out), static_cast<int>(pad_total / 2),
              static_cast<int>(pad_total - pad_total / 2)};
  return Status::Ok();
}

Status ComputeConvWindow(const Node& node, tflite::Padding padding, const Tensor& input,
                         int filter_h, int filter_w, int stride_h, int stride_w, int dilation_h,
                         int dilation_w, WindowDim* h, WindowDim* w) {
  const int* pad = node.folded_pad;
  const int64_t in_h = int64_t{input.shape[1]} + pad[0] + pad[1];
  const int64_t in_w = int64_t{input.shape[2]} + pad[2] + pad[3];
  if (in_h > std::numeric_limits<int32_t>::max() || in_w > std::numeric_limits<int32_t>::max()) {
    return Status::Error("the input padded by the folded PAD is " + std::to_string(in_h) + "x" +
                         std::to_string(in_w) + ", over 2^31 - 1");
  }
  DFARM_RETURN_IF_ERROR(ComputeWindowDim(padding, WindowAxis::kHeight, "filter height",
                                         static_cast<int>(in_h), filter_h, stride_h, dilation_h,
                                         h));
  DFARM_RETURN_IF_ERROR(ComputeWindowDim(padding, WindowAxis::kWidth, "filter width",
                                         static_cast<int>(in_w), filter_w, stride_w, dilation_w,
                                         w));
  h->pad_before += pad[0];
  h->pad_after += pad[1];
  w->pad_before += pad[2];
  w->pad_after += pad[3];
  return Status::Ok();
}

Status CheckWindowParams(tflite::Padding padding, int stride_h, int stride_w, int dilation_h,
                         int dilation_w) {
  if (padding != tflite::Padding::SAME && padding != tflite::Padding::VALID) {
    return Status::Error("unknown padding mode " + std::to_string(static_cast<int>(padding)));
  }
  if (stride_h <= 0 || stride_w <= 0) {
    return Status::Error("strides must be positive, got " + std::to_string(stride_h) + "x" +
                         std::to_string(stride_w));
  }
  if (dilation_h <= 0 || dilation_w <= 0) {
    return Status::Error("dilation factors must be positive, got " + std::to_string(dilation_h) +
                         "x" + std::to_string(dilation_w));
  }
  return Status::Ok();
}

}  // namespace dfarm::runtime
