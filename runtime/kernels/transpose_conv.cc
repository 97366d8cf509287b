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
//
// With a constant filter both ops run as one GEMM per chunk of input pixels,
// columns[pixels, KH*KW*Cout] = input[pixels, Cin] x filter', then scatter
// the columns into the output (col2im); filter' is the filter repacked in
// Prepare() to [KH][KW][Cout][Cin]. RegisterTransposeConvReference() keeps
// the plain loops. TRANSPOSE_CONV also takes int8 (filter per-channel along
// dim 0) and uint8 (per-tensor) with int32 bias, in TFLite's integer
// arithmetic.
#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"

namespace dfarm::runtime {
namespace {

struct TransposeConvData : OpData {
  const Tensor* input = nullptr;
  const Tensor* filter = nullptr;
  const Tensor* bias = nullptr;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0;
  ActivationRange activation{};
  // GEMM path (empty packed_filter: the plain loops run instead).
  std::vector<float> packed_filter;  // [KH][KW][Cout][Cin]
  std::vector<float> zeros;          // [KH*KW*Cout]: the GEMM's bias (columns overwritten)
  int64_t chunk_rows = 0;            // input pixels per GEMM
  size_t columns_bytes = 0;          // scratch: [chunk_rows, KH*KW*Cout], then the GEMM's
  Gemm gemm;
  // int8 / uint8 TRANSPOSE_CONV: TFLite's integer arithmetic, int32 sums.
  bool quantized = false;
  QuantizedConvParams quant;
  std::vector<int32_t> accumulators;  // one per output element
};

// Column-matrix floats per chunk (about 512 KiB), at least 16 rows.
constexpr int64_t kChunkFloats = 128 * 1024;

// Sets up the GEMM path when the filter is constant (allocates) and the
// node's scratch: thread 0's part holds the columns, every thread's part
// (past columns_bytes) its GEMM workspace.
void PlanGemm(TransposeConvData& d, Node& node) {
  if (!d.filter->has_static_value()) return;
  const int out_c = d.filter->shape[0], k_h = d.filter->shape[1], k_w = d.filter->shape[2];
  const int in_c = d.filter->shape[3];
  const float* f = d.filter->data_as<float>();
  d.packed_filter.resize(static_cast<size_t>(d.filter->num_elements()));
  for (int oc = 0; oc < out_c; ++oc) {
    for (int ky = 0; ky < k_h; ++ky) {
      for (int kx = 0; kx < k_w; ++kx) {
        for (int ic = 0; ic < in_c; ++ic) {
          d.packed_filter[((static_cast<size_t>(ky) * k_w + kx) * out_c + oc) * in_c + ic] =
              f[((static_cast<size_t>(oc) * k_h + ky) * k_w + kx) * in_c + ic];
        }
      }
    }
  }
  const int64_t cols = static_cast<int64_t>(k_h) * k_w * out_c;
  const int64_t pixels =
      static_cast<int64_t>(d.input->shape[0]) * d.input->shape[1] * d.input->shape[2];
  d.chunk_rows =
      std::min<int64_t>(pixels, std::max<int64_t>(16, kChunkFloats / std::max<int64_t>(cols, 1)));
  d.columns_bytes = (static_cast<size_t>(d.chunk_rows * cols) * sizeof(float) + 63) & ~size_t{63};
  d.gemm.Plan(d.chunk_rows, cols, in_c);
  d.gemm.SetConstantB({d.packed_filter.data(), in_c, /*transposed=*/true});
  d.zeros.assign(static_cast<size_t>(cols), 0.0f);
  node.scratch_bytes = d.columns_bytes + d.gemm.workspace_bytes();
}

// The input pixel at `in - 1` scatters to output rows up to
// (in - 1) * stride + filter - 1, an index the kernels compute in int: Error
// naming `stride_field` when it does not fit.
Status CheckScatterExtent(int in, int filter, int stride, const char* stride_field,
                          const char* extent) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t reach = (static_cast<int64_t>(in) - 1) * stride + filter;
  if (reach > kMax) {
    return Status::Error(std::string(stride_field) + " " + std::to_string(stride) +
                         " makes the scattered output " + extent + " overflow: (input " + extent +
                         " " + std::to_string(in) + " - 1) * " + std::to_string(stride) +
                         " + filter " + extent + " " + std::to_string(filter) + " = " +
                         std::to_string(reach) + " > " + std::to_string(kMax));
  }
  return Status::Ok();
}

// Checks dtypes and ranks common to both ops; with `quantized` the dtypes are
// left to PrepareQuantizedConv().
Status CheckTensors(const Tensor* input, const Tensor* filter, const Tensor* bias,
                    const Tensor* output, bool quantized = false) {
  if (!quantized) {
    DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(filter, "filter"));
    if (bias != nullptr) DFARM_RETURN_IF_ERROR(CheckFloat32(bias, "bias"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  }
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
  const bool quantized = data->input != nullptr && IsQuantized8(*data->input);
  DFARM_RETURN_IF_ERROR(CheckTensors(data->input, data->filter, data->bias, output, quantized));
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
  DFARM_RETURN_IF_ERROR(CheckScatterExtent(data->input->shape[1], data->filter->shape[1],
                                           data->stride_h, "stride_h", "height"));
  DFARM_RETURN_IF_ERROR(CheckScatterExtent(data->input->shape[2], data->filter->shape[2],
                                           data->stride_w, "stride_w", "width"));
  WindowDim h, w;
  DFARM_RETURN_IF_ERROR(ComputeWindowDim(options->padding(), WindowAxis::kHeight, "filter height",
                                         output->shape[1], data->filter->shape[1], data->stride_h,
                                         1, &h));
  DFARM_RETURN_IF_ERROR(ComputeWindowDim(options->padding(), WindowAxis::kWidth, "filter width",
                                         output->shape[2], data->filter->shape[2], data->stride_w,
                                         1, &w));
  data->pad_top = h.pad_before;
  data->pad_left = w.pad_before;
  if (quantized) {
    data->quantized = true;
    DFARM_RETURN_IF_ERROR(PrepareQuantizedConv(*data->input, *data->filter, data->bias, *output,
                                               output->shape[3], 0,
                                               options->fused_activation_function(), &data->quant));
    data->accumulators.resize(static_cast<size_t>(output->num_elements()));
  } else {
    PlanGemm(*data, node);
  }
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
  DFARM_RETURN_IF_ERROR(CheckScatterExtent(in_h, k_h, data->stride_h, "stride_height", "height"));
  DFARM_RETURN_IF_ERROR(CheckScatterExtent(in_w, k_w, data->stride_w, "stride_width", "width"));
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
  PlanGemm(*data, node);
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node);

Status EvalReference(Node& node) {
  if (node.data_as<TransposeConvData>()->quantized) return Eval(node);
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
  // An input with no element scatters nothing (the output is the bias): its
  // other dimensions may still be 2^31-1 (found by the options fuzzer).
  const int scatter_batches = input.num_elements() == 0 ? 0 : batches;
  for (int n = 0; n < scatter_batches; ++n) {
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

// TFLite's reference_integer_ops::TransposeConv (int8) and
// reference_ops::TransposeConv (uint8): int32 sums scattered, then bias,
// requantization and clamp per output element.
template <typename T>
Status EvalQuantized(Node& node) {
  TransposeConvData& d = *node.data_as<TransposeConvData>();
  const QuantizedConvParams& q = d.quant;
  const Tensor& input = *d.input;
  const Tensor& filter = *d.filter;
  Tensor& output = *node.outputs[0];
  const int batches = input.shape[0], in_h = input.shape[1], in_w = input.shape[2];
  const int in_c = input.shape[3];
  const int k_h = filter.shape[1], k_w = filter.shape[2];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const T* in = input.data_as<T>();
  const T* w = filter.data_as<T>();
  T* out = output.data_as<T>();
  std::fill(d.accumulators.begin(), d.accumulators.end(), 0);
  const int scatter_batches = input.num_elements() == 0 ? 0 : batches;  // as the float path
  for (int n = 0; n < scatter_batches; ++n) {
    for (int iy = 0; iy < in_h; ++iy) {
      for (int ix = 0; ix < in_w; ++ix) {
        const T* px = in + ((static_cast<size_t>(n) * in_h + iy) * in_w + ix) * in_c;
        for (int ky = 0; ky < k_h; ++ky) {
          const int oy = iy * d.stride_h - d.pad_top + ky;
          if (oy < 0 || oy >= out_h) continue;
          for (int kx = 0; kx < k_w; ++kx) {
            const int ox = ix * d.stride_w - d.pad_left + kx;
            if (ox < 0 || ox >= out_w) continue;
            int32_t* acc = d.accumulators.data() +
                           ((static_cast<size_t>(n) * out_h + oy) * out_w + ox) * out_c;
            for (int oc = 0; oc < out_c; ++oc) {
              const T* tap = w + ((static_cast<size_t>(oc) * k_h + ky) * k_w + kx) * in_c;
              int32_t sum = 0;
              for (int ic = 0; ic < in_c; ++ic) {
                sum += (static_cast<int32_t>(px[ic]) + q.input_offset) *
                       (static_cast<int32_t>(tap[ic]) + q.filter_offsets[oc]);
              }
              acc[oc] += sum;
            }
          }
        }
      }
    }
  }
  const int64_t out_pixels = static_cast<int64_t>(batches) * out_h * out_w;
  for (int64_t p = 0; p < out_pixels; ++p) {
    for (int oc = 0; oc < out_c; ++oc) {
      const int32_t acc = d.accumulators[p * out_c + oc] + q.bias[oc];
      out[p * out_c + oc] = static_cast<T>(q.Requantize(acc, oc));
    }
  }
  return Status::Ok();
}

// Adds the chunk's columns (input pixels [first, first + rows)) into the
// output rows [row_begin, row_end) (rows counted over batches), input pixel
// by input pixel: each output element gets its terms in the same order
// whatever the split.
void ScatterRows(const TransposeConvData& d, Tensor& output, const float* columns, int64_t first,
                 int64_t rows, int64_t row_begin, int64_t row_end) {
  const int in_h = d.input->shape[1], in_w = d.input->shape[2];
  const int k_h = d.filter->shape[1], k_w = d.filter->shape[2];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const int64_t cols = static_cast<int64_t>(k_h) * k_w * out_c;
  float* out = output.data_as<float>();
  // Input row by input row: a row none of whose pixels reach [row_begin,
  // row_end) is skipped whole (each task sees every row of the chunk).
  for (int64_t p = first; p < first + rows;) {
    const int ix0 = static_cast<int>(p % in_w);
    const int iy = static_cast<int>((p / in_w) % in_h);
    const int64_t n = p / (static_cast<int64_t>(in_w) * in_h);
    const int64_t row_start = p - ix0;  // the pixel at ix 0
    const int64_t row_stop = std::min(first + rows, row_start + in_w);
    const int64_t top = n * out_h + static_cast<int64_t>(iy) * d.stride_h - d.pad_top;
    if (top + k_h <= row_begin || top >= row_end) {
      p = row_stop;
      continue;
    }
    for (; p < row_stop; ++p) {
      const int ix = static_cast<int>(p - row_start);
      // Pixel ix's k_w window positions are contiguous in the output row:
      // kx in [kx0, kx1) lands inside it.
      const int ox0 = ix * d.stride_w - d.pad_left;
      const int kx0 = std::max(0, -ox0), kx1 = std::min(k_w, out_w - ox0);
      if (kx0 >= kx1) continue;
      const int64_t span = static_cast<int64_t>(kx1 - kx0) * out_c;
      for (int ky = 0; ky < k_h; ++ky) {
        const int oy = iy * d.stride_h - d.pad_top + ky;
        const int64_t row = n * out_h + oy;
        if (oy < 0 || oy >= out_h || row < row_begin || row >= row_end) continue;
        const float* __restrict col =
            columns + (p - first) * cols + (static_cast<int64_t>(ky) * k_w + kx0) * out_c;
        float* __restrict acc = out + (row * out_w + ox0 + kx0) * out_c;
        for (int64_t i = 0; i < span; ++i) acc[i] += col[i];
      }
    }
  }
}

// The float GEMM path: per chunk of input pixels, the columns by a GEMM
// split across the threads, then the scatter split by output rows; bias
// first and the activation last, by output rows too.
Status EvalFloat(Node& node) {
  const TransposeConvData& d = *node.data_as<TransposeConvData>();
  DFARM_RETURN_IF_ERROR(CheckScratch(node));
  float* columns = reinterpret_cast<float*>(node.context->ThreadScratch(0));
  const Tensor& input = *d.input;
  Tensor& output = *node.outputs[0];
  const int in_c = input.shape[3];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const float* in = input.data_as<float>();
  const float* bias = d.bias != nullptr ? d.bias->data_as<float>() : nullptr;
  float* out = output.data_as<float>();
  const int64_t out_rows = static_cast<int64_t>(output.shape[0]) * out_h;
  const int64_t row_floats = static_cast<int64_t>(out_w) * out_c;
  const int tasks = static_cast<int>(
      TaskCount(out_rows * row_floats >= kMinParallelElements ? out_rows : 1, NumThreads(node)));
  auto by_rows = [&](auto&& f) {
    ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int) {
      const Range r = SplitRange(out_rows, tasks, static_cast<int>(t));
      if (r.size() > 0) f(r.begin, r.end);
    });
  };
  by_rows([&](int64_t begin, int64_t end) {
    float* __restrict px = out + begin * row_floats;
    if (bias == nullptr) {
      std::fill(px, px + (end - begin) * row_floats, 0.0f);
      return;
    }
    for (int64_t p = begin * out_w; p < end * out_w; ++p, px += out_c) {
      for (int oc = 0; oc < out_c; ++oc) px[oc] = bias[oc];
    }
  });
  const int64_t cols = static_cast<int64_t>(d.filter->shape[1]) * d.filter->shape[2] * out_c;
  const int64_t in_pixels = static_cast<int64_t>(input.shape[0]) * input.shape[1] * input.shape[2];
  const GemmEpilogue overwrite{d.zeros.data()};
  for (int64_t first = 0; first < in_pixels; first += d.chunk_rows) {
    const int64_t rows = std::min(d.chunk_rows, in_pixels - first);
    d.gemm.RunParallel(rows, cols, in_c, {in + first * in_c, in_c, false},
                       {d.packed_filter.data(), in_c, /*transposed=*/true}, columns, cols,
                       overwrite, node.context, d.columns_bytes);
    by_rows([&](int64_t begin, int64_t end) {
      ScatterRows(d, output, columns, first, rows, begin, end);
    });
  }
  const ActivationRange act = d.activation;
  if (act.min == -std::numeric_limits<float>::infinity() &&
      act.max == std::numeric_limits<float>::infinity()) {
    return Status::Ok();  // no activation: the clamp changes nothing
  }
  by_rows([&](int64_t begin, int64_t end) {
    for (int64_t i = begin * row_floats; i < end * row_floats; ++i) out[i] = Clamp(out[i], act);
  });
  return Status::Ok();
}

Status Eval(Node& node) {
  TransposeConvData& d = *node.data_as<TransposeConvData>();
  if (d.quantized) {
    return d.input->dtype == DType::kInt8 ? EvalQuantized<int8_t>(node)
                                          : EvalQuantized<uint8_t>(node);
  }
  if (d.packed_filter.empty()) return EvalReference(node);
  return EvalFloat(node);
}

}  // namespace

const OpRegistration* RegisterTransposeConvReference() {
  static const OpRegistration registration = {&PrepareBuiltin, &EvalReference};
  return &registration;
}

const OpRegistration* RegisterTransposeConv() {
  static const OpRegistration registration = {&PrepareBuiltin, &Eval};
  return &registration;
}

const OpRegistration* RegisterConvolution2DTransposeBias() {
  static const OpRegistration registration = {&PrepareMediaPipe, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
