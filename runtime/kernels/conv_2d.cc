// CONV_2D, float32: input [N,H,W,Cin] (NHWC), filter [Cout,KH,KW,Cin] (OHWI),
// optional bias [Cout], output [N,OH,OW,Cout]; SAME/VALID padding, dilation
// and a fused activation. int8 (per-channel filter along dim 0) and uint8
// (per-tensor) with int32 bias use TFLite's integer arithmetic. Grouped, as in
// TFLite: a filter of Cin / G input channels makes G groups; group g reads
// input channels [g*Cin/G, (g+1)*Cin/G) and writes output channels
// [g*Cout/G, (g+1)*Cout/G).
//
// The kernel is one GEMM: output[N*OH*OW, Cout] = patches[.., KH*KW*Cin] x
// filter^T, where the filter (OHWI) already is that [Cout, KH*KW*Cin] matrix.
// A 1x1 stride-1 convolution multiplies the input itself; otherwise the
// patches are gathered (im2col) a chunk of output pixels at a time into the
// interpreter's shared scratch, sized in Prepare() (grouped: one GEMM per
// group over the group's channels). With several threads the chunks are
// tasks (a few per thread), each on its thread's chunk buffer and GEMM
// workspace (the float path; results as on one thread). An ADD the
// interpreter folded into the conv (Node::folded_addend) is added in the
// GEMM's epilogue, before the activation. A 3-channel input (a model's first
// layer on an image) runs the direct kernel of conv_hwc3_float.h instead (no
// im2col; the GEMM's sums), its output rows split across threads. RegisterConv2DReference() keeps
// the plain loops.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "runtime/kernels/conv_hwc3_float.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quantized_gemm.h"

namespace dfarm::runtime {
namespace {

struct Conv2DData : OpData {
  int stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int pad_top = 0, pad_left = 0;
  int kernel_h = 0, kernel_w = 0;
  int groups = 1;  // input channels / filter input channels
  ActivationRange activation{};
  // Reference path only: the filter repacked to [KH][KW][Cin/G][Cout], so the
  // innermost loop runs over contiguous output channels.
  std::vector<float> packed_filter;
  std::vector<float> bias;  // [Cout]; zeros when the op has no bias
  // GEMM path: whether the input is the patch matrix itself (1x1, stride 1),
  // else the output pixels per im2col chunk; per thread, the scratch holds
  // the chunk's patches (patch_bytes) and then the GEMM's workspace.
  bool direct = false;
  int64_t chunk_rows = 0;
  size_t patch_bytes = 0;
  Gemm gemm;
  // int8 / uint8 path (TFLite's integer arithmetic): ungrouped convs on the
  // integer GEMM (quantized_gemm.h) with the filter packed at Prepare
  // (qweights.rows > 0), others and the reference kernel in plain loops.
  bool quantized = false;
  QuantizedConvParams quant;
  QuantizedWeights qweights;
  // The direct 3-channel kernel's plan when it runs (hwc3.covered()).
  ConvHwc3Plan hwc3;
};

// Patch-matrix floats per im2col chunk (about 512 KiB), at least 16 rows.
constexpr int64_t kChunkFloats = 128 * 1024;
// Output pixels below which a chunk is not cut smaller for more tasks.
constexpr int64_t kMinTaskRows = 96;

// Dtypes (float32 unless the input is 8-bit quantized), ranks, the grouped
// filter's channels against the input's, and the bias shape.
Status CheckConvTensors(const Tensor* input, const Tensor* filter, const Tensor* bias,
                        const Tensor* output, bool quantized) {
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
  const int in_c = input->shape[3], out_c = filter->shape[0], filter_c = filter->shape[3];
  if (filter_c <= 0 || in_c % filter_c != 0 || out_c % (in_c / filter_c) != 0) {
    return Status::Error("filter " + ShapeToString(filter->shape) + " does not match input " +
                         ShapeToString(input->shape) + " channels (a grouped filter's " +
                         "input channels divide the input's, and its groups the outputs)");
  }
  if (bias != nullptr && (bias->rank() != 1 || bias->shape[0] != out_c)) {
    return Status::Error("bias must be [" + std::to_string(out_c) + "], got " +
                         ShapeToString(bias->shape));
  }
  return Status::Ok();
}

// The GEMM path: multiply the input itself (1x1, stride 1, no padding) or
// im2col chunks of output pixels (no more than one thread's share of them);
// plans the GEMM and sets the node's per-thread scratch. An ungrouped
// filter is packed once (taken from the node's previous Prepare when it
// packed it), and then kept: Eval reads the packed copy only.
Status PlanGemmPath(const Tensor& input, const Tensor& filter, const WindowDim& h,
                    const WindowDim& w, int threads, Conv2DData* data, Node& node) {
  const int k_h = filter.shape[1], k_w = filter.shape[2], filter_c = filter.shape[3];
  const int64_t depth = static_cast<int64_t>(k_h) * k_w * filter_c;
  const int64_t pixels = static_cast<int64_t>(input.shape[0]) * h.out * w.out;
  data->direct = data->groups == 1 && k_h == 1 && k_w == 1 && data->stride_h == 1 &&
                 data->stride_w == 1 && h.pad_before == 0 && w.pad_before == 0 &&
                 h.out == input.shape[1] && w.out == input.shape[2];
  // im2col with several threads: up to kTasksPerThread chunks per thread
  // (of about kMinTaskRows pixels or more), one task each. The direct product is one
  // Gemm::RunParallel().
  int64_t share = pixels;
  if (threads > 1) {
    const int64_t tasks = TaskCount((pixels + kMinTaskRows - 1) / kMinTaskRows, threads);
    share = (pixels + tasks - 1) / tasks;  // balanced, even for a few chunks
  }
  if (data->direct) {
    data->chunk_rows = pixels;
  } else {
    data->chunk_rows =
        std::min<int64_t>(share, std::max<int64_t>(16, kChunkFloats / std::max<int64_t>(depth, 1)));
    data->patch_bytes =
        (static_cast<size_t>(data->chunk_rows * depth) * sizeof(float) + 63) & ~size_t{63};
  }
  data->gemm.Plan(data->chunk_rows, filter.shape[0] / data->groups, depth);
  node.scratch_bytes = data->patch_bytes + data->gemm.workspace_bytes();
  if (data->groups != 1) return Status::Ok();
  auto* before = static_cast<Conv2DData*>(node.prepared_before.get());
  if (before == nullptr || !data->gemm.TakeConstantB(before->gemm)) {
    if (filter.data == nullptr) {
      return Status::Error("the filter's values were freed before it was packed");
    }
    data->gemm.SetConstantB({filter.data_as<float>(), depth, true});
  }
  if (data->gemm.has_constant_b()) node.kept_inputs |= 1u << 1;
  return Status::Ok();
}

// The direct kernel of a 3-channel input (ungrouped, dilation 1): true when
// it runs, its filter packed once (taken from the node's previous Prepare
// when the filter's values were freed since) and then kept.
bool PlanHwc3Path(const Tensor& input, const Tensor& filter, const WindowDim& h, const WindowDim& w,
                  Conv2DData* data, Node& node) {
  if (input.shape[3] != 3 || filter.shape[3] != 3 || data->dilation_h != 1 ||
      data->dilation_w != 1) {
    return false;
  }
  const ConvHwc3Params params{.batches = input.shape[0],
                              .in_h = input.shape[1],
                              .in_w = input.shape[2],
                              .out_h = h.out,
                              .out_w = w.out,
                              .out_c = filter.shape[0],
                              .kernel_h = filter.shape[1],
                              .kernel_w = filter.shape[2],
                              .stride_h = data->stride_h,
                              .stride_w = data->stride_w,
                              .pad_top = h.pad_before,
                              .pad_left = w.pad_before,
                              .act_min = data->activation.min,
                              .act_max = data->activation.max};
  if (!ConvHwc3Supported(params)) return false;
  auto* before = static_cast<Conv2DData*>(node.prepared_before.get());
  if (filter.data != nullptr) {
    data->hwc3 = PlanConvHwc3(params, filter.data_as<float>(), data->bias.data());
  } else if (before != nullptr && before->hwc3.covered()) {
    data->hwc3 = ReplanConvHwc3(std::move(before->hwc3), params, data->bias.data());
  } else {
    return false;  // the GEMM path reports the freed filter
  }
  node.kept_inputs |= 1u << 1;
  return true;
}

// The quantized filter [Cout][KH][KW][Cin] packed for the integer GEMM,
// and the thread scratch its tiles need.
void PackQuantizedFilter(const Tensor& filter, Conv2DData* data, Node& node) {
  const int64_t depth = static_cast<int64_t>(filter.shape[1]) * filter.shape[2] * filter.shape[3];
  data->qweights = PackQuantizedWeights(filter, filter.shape[0], depth, data->quant.filter_offsets);
  node.scratch_bytes = QuantizedScratchBytes(data->qweights);
}

// The reference path: the OHWI filter repacked to [KH][KW][Cin/G][Cout].
void PackReferenceFilter(const Tensor& filter, Conv2DData* data) {
  const int out_c = filter.shape[0], k_h = filter.shape[1], k_w = filter.shape[2];
  const int filter_c = filter.shape[3];
  const float* f = filter.data_as<float>();
  data->packed_filter.resize(static_cast<size_t>(filter.num_elements()));
  for (int o = 0; o < out_c; ++o) {
    for (int ky = 0; ky < k_h; ++ky) {
      for (int kx = 0; kx < k_w; ++kx) {
        for (int i = 0; i < filter_c; ++i) {
          data->packed_filter[((static_cast<size_t>(ky) * k_w + kx) * filter_c + i) * out_c + o] =
              f[((static_cast<size_t>(o) * k_h + ky) * k_w + kx) * filter_c + i];
        }
      }
    }
  }
}

// The GEMM epilogue over the whole output: bias, the folded ADD's addend
// (when any), the activation.
GemmEpilogue OutputEpilogue(const Conv2DData& d, const Node& node) {
  GemmEpilogue e{d.bias.data(), d.activation.min, d.activation.max};
  if (node.folded_addend != nullptr) {
    e.addend = node.folded_addend->data_as<float>();
    e.addend_begin = node.folded_addend_channels[0];
    e.addend_end = node.folded_addend_channels[1];
    e.addend_stride = e.addend_end - e.addend_begin;
  }
  return e;
}

Status PrepareImpl(Node& node, bool reference) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 3, 1));
  const tflite::Conv2DOptions* options = node.options<tflite::Conv2DOptions>();
  if (options == nullptr) return Status::Error("Conv2DOptions are missing");
  Tensor* input = node.inputs[0];
  Tensor* filter = node.inputs[1];
  Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  Tensor* output = node.outputs[0];
  const bool quantized = input != nullptr && IsQuantized8(*input);
  DFARM_RETURN_IF_ERROR(CheckConvTensors(input, filter, bias, output, quantized));
  const int out_c = filter->shape[0], k_h = filter->shape[1], k_w = filter->shape[2];
  auto data = std::make_unique<Conv2DData>();
  data->stride_h = options->stride_h();
  data->stride_w = options->stride_w();
  data->dilation_h = options->dilation_h_factor();
  data->dilation_w = options->dilation_w_factor();
  DFARM_RETURN_IF_ERROR(CheckWindowParams(options->padding(), data->stride_h, data->stride_w,
                                          data->dilation_h, data->dilation_w));
  DFARM_RETURN_IF_ERROR(GetActivationRange(NodeActivation(node), &data->activation));
  WindowDim h, w;
  DFARM_RETURN_IF_ERROR(ComputeConvWindow(node, options->padding(), *input, k_h, k_w,
                                          data->stride_h, data->stride_w, data->dilation_h,
                                          data->dilation_w, &h, &w));
  const int32_t computed[] = {input->shape[0], h.out, w.out, out_c};
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  data->pad_top = h.pad_before;
  data->pad_left = w.pad_before;
  data->kernel_h = k_h;
  data->kernel_w = k_w;
  data->groups = input->shape[3] / filter->shape[3];

  if (!filter->has_static_value() || (bias != nullptr && !bias->has_static_value())) {
    return Status::Unsupported("a filter or bias computed at run time is not supported");
  }
  DFARM_RETURN_IF_ERROR(CheckFoldedAddend(node, *output, quantized));
  if (quantized) {
    data->quantized = true;
    DFARM_RETURN_IF_ERROR(PrepareQuantizedConv(*input, *filter, bias, *output, out_c, 0,
                                               NodeActivation(node), &data->quant));
    // TFLite 2.9 computes quantized CONV_2D with its optimized GEMM (ruy).
    data->quant.round_half_up = true;
    if (!reference && data->groups == 1) PackQuantizedFilter(*filter, data.get(), node);
  } else {
    data->bias.assign(out_c, 0.0f);
    if (bias != nullptr) std::memcpy(data->bias.data(), bias->data, out_c * sizeof(float));
    if (reference) {
      PackReferenceFilter(*filter, data.get());
    } else if (!PlanHwc3Path(*input, *filter, h, w, data.get(), node)) {
      DFARM_RETURN_IF_ERROR(
          PlanGemmPath(*input, *filter, h, w, NumThreads(node), data.get(), node));
    }
  }
  node.data = std::move(data);
  return Status::Ok();
}

Status Prepare(Node& node) { return PrepareImpl(node, /*reference=*/false); }
Status PrepareReference(Node& node) { return PrepareImpl(node, /*reference=*/true); }

// Writes the im2col rows of output pixels [first, first + rows): row r holds
// the KH x KW x `channels` window (input channels from `first_channel`) of
// pixel first + r, zeros where it leaves the input. Without groups or
// dilation a window row inside the input is one contiguous copy.
void Im2Col(const Conv2DData& d, const Tensor& input, int out_h, int out_w, int64_t first,
            int64_t rows, int first_channel, int channels, float* patches) {
  const int in_h = input.shape[1], in_w = input.shape[2], in_c = input.shape[3];
  const float* in = input.data_as<float>() + first_channel;
  const int64_t pixel_floats = channels;
  const bool contiguous = channels == in_c && d.dilation_w == 1;
  const int64_t row_floats = pixel_floats * d.kernel_w;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t p = first + r;
    const int ox = static_cast<int>(p % out_w);
    const int oy = static_cast<int>((p / out_w) % out_h);
    const int64_t n = p / (static_cast<int64_t>(out_w) * out_h);
    const int iy0 = oy * d.stride_h - d.pad_top, ix0 = ox * d.stride_w - d.pad_left;
    const bool x_inside = ix0 >= 0 && ix0 + (d.kernel_w - 1) * d.dilation_w < in_w;
    for (int ky = 0; ky < d.kernel_h; ++ky) {
      const int iy = iy0 + ky * d.dilation_h;
      if (iy < 0 || iy >= in_h) {
        std::fill_n(patches, row_floats, 0.0f);
        patches += row_floats;
        continue;
      }
      const float* in_row = in + (n * in_h + iy) * in_w * in_c;
      if (contiguous && x_inside) {
        std::copy_n(in_row + static_cast<int64_t>(ix0) * in_c, row_floats, patches);
        patches += row_floats;
        continue;
      }
      for (int kx = 0; kx < d.kernel_w; ++kx) {
        const int ix = ix0 + kx * d.dilation_w;
        if (ix < 0 || ix >= in_w) {
          std::fill_n(patches, pixel_floats, 0.0f);
        } else {
          std::copy_n(in_row + static_cast<int64_t>(ix) * in_c, pixel_floats, patches);
        }
        patches += pixel_floats;
      }
    }
  }
}

// TFLite's reference_integer_ops::ConvPerChannel (int8) and
// reference_ops::Conv (uint8): taps outside the input contribute nothing.
template <typename T>
Status EvalQuantized(Node& node) {
  const Conv2DData& d = *node.data_as<Conv2DData>();
  const QuantizedConvParams& q = d.quant;
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  const int batches = input.shape[0], in_h = input.shape[1], in_w = input.shape[2];
  const int in_c = input.shape[3];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const int filter_c = in_c / d.groups, group_out = out_c / d.groups;
  const T* in = input.data_as<T>();
  const T* filter = node.inputs[1]->data_as<T>();
  T* out = output.data_as<T>();
  for (int n = 0; n < batches; ++n) {
    for (int oy = 0; oy < out_h; ++oy) {
      for (int ox = 0; ox < out_w; ++ox) {
        const int iy0 = oy * d.stride_h - d.pad_top, ix0 = ox * d.stride_w - d.pad_left;
        for (int oc = 0; oc < out_c; ++oc) {
          const int32_t filter_offset = q.filter_offsets[oc];
          int32_t acc = 0;
          for (int ky = 0; ky < d.kernel_h; ++ky) {
            const int iy = iy0 + ky * d.dilation_h;
            if (iy < 0 || iy >= in_h) continue;
            for (int kx = 0; kx < d.kernel_w; ++kx) {
              const int ix = ix0 + kx * d.dilation_w;
              if (ix < 0 || ix >= in_w) continue;
              const T* px = in + ((static_cast<size_t>(n) * in_h + iy) * in_w + ix) * in_c +
                            static_cast<size_t>(oc / group_out) * filter_c;
              const T* w =
                  filter +
                  ((static_cast<size_t>(oc) * d.kernel_h + ky) * d.kernel_w + kx) * filter_c;
              for (int ic = 0; ic < filter_c; ++ic) {
                acc += (static_cast<int32_t>(w[ic]) + filter_offset) *
                       (static_cast<int32_t>(px[ic]) + q.input_offset);
              }
            }
          }
          acc += q.bias[oc];
          out[((static_cast<size_t>(n) * out_h + oy) * out_w + ox) * out_c + oc] =
              static_cast<T>(q.Requantize(acc, oc));
        }
      }
    }
  }
  return Status::Ok();
}

// The im2col rows of output pixels [first, first + rows) for the integer
// GEMM: each window's values plus the input offset as int16, 0 (a tap that
// contributes nothing, as the plain loops skip it) where it leaves the input,
// rows `stride` apart and zero past the depth.
template <typename T>
void QuantizedIm2Col(const Conv2DData& d, const Tensor& input, int out_h, int out_w, int64_t first,
                     int64_t rows, int64_t stride, int16_t* patches) {
  const int in_h = input.shape[1], in_w = input.shape[2], in_c = input.shape[3];
  const T* in = input.data_as<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t p = first + r;
    const int ox = static_cast<int>(p % out_w);
    const int oy = static_cast<int>((p / out_w) % out_h);
    const int64_t n = p / (static_cast<int64_t>(out_w) * out_h);
    const int iy0 = oy * d.stride_h - d.pad_top, ix0 = ox * d.stride_w - d.pad_left;
    int16_t* row = patches + r * stride;
    int16_t* dst = row;
    for (int ky = 0; ky < d.kernel_h; ++ky) {
      const int iy = iy0 + ky * d.dilation_h;
      for (int kx = 0; kx < d.kernel_w; ++kx, dst += in_c) {
        const int ix = ix0 + kx * d.dilation_w;
        if (iy < 0 || iy >= in_h || ix < 0 || ix >= in_w) {
          std::fill_n(dst, in_c, int16_t{0});
        } else {
          WidenWithOffset(in + ((n * in_h + iy) * in_w + ix) * in_c, in_c, d.quant.input_offset,
                          dst);
        }
      }
    }
    std::fill(dst, row + stride, int16_t{0});
  }
}

// Products below this many multiply-adds stay on one thread.
constexpr int64_t kMinParallelQuantizedMacs = int64_t{1} << 16;

// The quantized conv on the integer GEMM: tiles of kQuantizedTileRows
// output pixels, im2col'd into the running thread's scratch, each pixel's
// channels computed by one task (integer sums: the bits of the plain loops).
template <typename T>
Status EvalQuantizedGemm(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckScratch(node));
  const Conv2DData& d = *node.data_as<Conv2DData>();
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const int64_t pixels = static_cast<int64_t>(output.shape[0]) * out_h * out_w;
  const int64_t tiles = (pixels + kQuantizedTileRows - 1) / kQuantizedTileRows;
  const bool split = pixels * out_c * d.qweights.depth >= kMinParallelQuantizedMacs;
  const int tasks = static_cast<int>(split ? TaskCount(tiles, NumThreads(node)) : 1);
  T* out = output.data_as<T>();
  ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int slot) {
    const Range r = SplitRange(tiles, tasks, static_cast<int>(t));
    const QuantizedScratchParts scratch = QuantizedScratch(NodeScratch(node, slot), d.qweights);
    for (int64_t tile = r.begin; tile < r.end; ++tile) {
      const int64_t first = tile * kQuantizedTileRows;
      const int64_t rows = std::min(kQuantizedTileRows, pixels - first);
      QuantizedIm2Col<T>(d, input, out_h, out_w, first, rows, d.qweights.stride, scratch.rows);
      QuantizedGemmTile<T>(scratch.rows, rows, d.qweights, d.quant, scratch.sums,
                           out + first * out_c, out_c);
    }
  });
  return Status::Ok();
}

// The im2col output pixels [first, end) of the float GEMM path with
// `scratch` (the node's scratch_bytes); the GEMM adds the bias and clamps.
// The products run on this thread, or, given `split` (a single chunk on
// several threads), split across the context's threads by the GEMM, each on
// its thread's scratch part past the patches.
void EvalPixels(const Conv2DData& d, const Node& node, int64_t first, int64_t end,
                std::byte* scratch, const ExecutionContext* split) {
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  const int in_c = input.shape[3];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const int filter_c = in_c / d.groups, group_out = out_c / d.groups;
  const int64_t depth = static_cast<int64_t>(d.kernel_h) * d.kernel_w * filter_c;
  float* out = output.data_as<float>();
  const float* filter_data = node.inputs[1]->data_as<float>();
  float* patches = reinterpret_cast<float*>(scratch);
  const GemmEpilogue whole = OutputEpilogue(d, node);
  for (int64_t chunk = first; chunk < end; chunk += d.chunk_rows) {
    const int64_t rows = std::min(d.chunk_rows, end - chunk);
    for (int g = 0; g < d.groups; ++g) {
      Im2Col(d, input, out_h, out_w, chunk, rows, g * filter_c, filter_c, patches);
      const GemmOperand filter{filter_data + static_cast<int64_t>(g) * group_out * depth, depth,
                               /*transposed=*/true};
      // This group's columns: the bias and addend channels shifted by it.
      GemmEpilogue epilogue = whole.FromRow(chunk);
      epilogue.bias += static_cast<int64_t>(g) * group_out;
      epilogue.addend_begin -= static_cast<int64_t>(g) * group_out;
      epilogue.addend_end -= static_cast<int64_t>(g) * group_out;
      float* c = out + chunk * out_c + static_cast<int64_t>(g) * group_out;
      if (split != nullptr) {
        d.gemm.RunParallel(rows, group_out, depth, {patches, depth, false}, filter, c, out_c,
                           epilogue, split, d.patch_bytes);
      } else {
        d.gemm.Run(rows, group_out, depth, {patches, depth, false}, filter, c, out_c, epilogue,
                   scratch + d.patch_bytes);
      }
    }
  }
}

// Output rows [begin, end) of a 1x1 stride-1 float product on the input
// itself, on the calling thread: one task of EvalDirect(), and Node::then's
// eval_rows (RowsFromInput() accepts the node).
void EvalRows(const Node& node, int64_t begin, int64_t end, int slot) {
  const Conv2DData& d = *node.data_as<Conv2DData>();
  const int64_t depth = node.inputs[0]->shape[3];
  const int out_c = node.outputs[0]->shape[3];
  const GemmOperand filter{node.inputs[1]->data_as<float>(), depth, /*transposed=*/true};
  d.gemm.Run(end - begin, out_c, depth,
             {node.inputs[0]->data_as<float>() + begin * depth, depth, false}, filter,
             node.outputs[0]->data_as<float>() + begin * out_c, out_c,
             OutputEpilogue(d, node).FromRow(begin), NodeScratch(node, slot));
}

// The 1x1 stride-1 product on the input itself (bias and activation in the
// GEMM). Many pixels: tasks of whole pixel ranges; few (fewer than the
// channels): the GEMM splits the channels.
void EvalDirect(const Conv2DData& d, const Node& node, int64_t pixels) {
  const int64_t depth = node.inputs[0]->shape[3];
  const int out_c = node.outputs[0]->shape[3];
  const int threads = NumThreads(node);
  const bool by_pixels = pixels >= out_c && pixels >= 2 * kMinTaskRows;
  if (threads <= 1 || by_pixels) {
    const int tasks = static_cast<int>(TaskCount(pixels / kMinTaskRows, threads));
    ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int slot) {
      const Range r = SplitRange(pixels, tasks, static_cast<int>(t), Gemm::kRowAlign);
      if (r.size() > 0) EvalRows(node, r.begin, r.end, slot);
    });
    return;
  }
  const GemmOperand filter{node.inputs[1]->data_as<float>(), depth, /*transposed=*/true};
  d.gemm.RunParallel(pixels, out_c, depth, {node.inputs[0]->data_as<float>(), depth, false}, filter,
                     node.outputs[0]->data_as<float>(), out_c, OutputEpilogue(d, node),
                     node.context, 0);
}

// Node::then's contract (OpRegistration::rows_from_input): a float 1x1
// stride-1 product on the input itself, whose output row i is input row i
// times the filter. On several threads, only where the GEMM would split it
// by rows too: with few pixels and many channels it splits the column
// panels, so that each core reads half the filter (7x7 pixels of
// hand_landmark_lite went 2% slower on 2 threads split by rows).
bool RowsFromInput(const Node& node) {
  const Conv2DData* d = node.data_as<Conv2DData>();
  if (d == nullptr || !d->direct || d->quantized || d->hwc3.covered() ||
      node.inputs[0]->dtype != DType::kFloat32 || node.outputs[0]->num_elements() <= 0) {
    return false;
  }
  const Tensor& out = *node.outputs[0];
  const int64_t out_c = out.shape.back();
  const int threads = NumThreads(node);
  return threads <= 1 || d->gemm.SplitsRows(out.num_elements() / out_c, out_c, threads);
}

Status Eval(Node& node) {
  const Conv2DData& d = *node.data_as<Conv2DData>();
  // An empty output (a batch or an output side of 0) has nothing to compute
  // (and its chunks of 0 pixels would divide by zero).
  if (node.outputs[0]->num_elements() == 0) return Status::Ok();
  if (d.quantized) {
    const bool int8 = node.inputs[0]->dtype == DType::kInt8;
    if (d.qweights.rows > 0) {
      return int8 ? EvalQuantizedGemm<int8_t>(node) : EvalQuantizedGemm<uint8_t>(node);
    }
    return int8 ? EvalQuantized<int8_t>(node) : EvalQuantized<uint8_t>(node);
  }
  if (d.hwc3.covered()) {
    ConvHwc3Addend addend;
    if (node.folded_addend != nullptr) {
      addend = {node.folded_addend->data_as<float>(), node.folded_addend_channels[0],
                node.folded_addend_channels[1]};
    }
    RunConvHwc3(d.hwc3, node.inputs[0]->data_as<float>(), node.outputs[0]->data_as<float>(),
                NumThreads(node) > 1 ? node.context : nullptr, addend);
    return Status::Ok();
  }
  DFARM_RETURN_IF_ERROR(CheckScratch(node));
  const Tensor& output = *node.outputs[0];
  const int64_t pixels = static_cast<int64_t>(output.shape[0]) * output.shape[1] * output.shape[2];
  if (d.direct) {
    EvalDirect(d, node, pixels);
    return Status::Ok();
  }
  // One task per chunk, on the scratch part of the thread that runs it; a
  // single chunk splits its products instead.
  const int64_t chunks = (pixels + d.chunk_rows - 1) / d.chunk_rows;
  if (chunks == 1) {
    EvalPixels(d, node, 0, pixels, NodeScratch(node, 0),
               NumThreads(node) > 1 ? node.context : nullptr);
    return Status::Ok();
  }
  ParallelFor(node.context, static_cast<size_t>(chunks), [&](size_t t, int slot) {
    const int64_t first = static_cast<int64_t>(t) * d.chunk_rows;
    EvalPixels(d, node, first, std::min(pixels, first + d.chunk_rows), NodeScratch(node, slot),
               nullptr);
  });
  return Status::Ok();
}

Status EvalReference(Node& node) {
  if (node.data_as<Conv2DData>()->quantized) return Eval(node);
  const Conv2DData& d = *node.data_as<Conv2DData>();
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  const int batches = input.shape[0], in_h = input.shape[1], in_w = input.shape[2];
  const int in_c = input.shape[3];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const float* in = input.data_as<float>();
  float* out = output.data_as<float>();
  const float* filter = d.packed_filter.data();
  const int filter_c = in_c / d.groups, group_out = out_c / d.groups;
  const size_t tap_stride = static_cast<size_t>(filter_c) * out_c;
  const float* addend =
      node.folded_addend != nullptr ? node.folded_addend->data_as<float>() : nullptr;
  const int addend_begin = node.folded_addend_channels[0];
  const int addend_end = node.folded_addend_channels[1];

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
            for (int g = 0; g < d.groups; ++g) {
              const int oc0 = g * group_out, oc1 = oc0 + group_out;
              for (int ic = 0; ic < filter_c; ++ic) {
                const float v = px[g * filter_c + ic];
                const float* __restrict w = tap + static_cast<size_t>(ic) * out_c;
                for (int oc = oc0; oc < oc1; ++oc) acc[oc] += v * w[oc];
              }
            }
          }
        }
        if (addend != nullptr) {
          const float* add = addend + ((static_cast<size_t>(n) * out_h + oy) * out_w + ox) *
                                          (addend_end - addend_begin);
          for (int oc = 0; oc < out_c; ++oc) {
            acc[oc] += oc >= addend_begin && oc < addend_end ? add[oc - addend_begin] : 0.0f;
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
  static const OpRegistration registration = {&Prepare,
                                              &Eval,
                                              /*applies_folded_activation=*/true,
                                              /*applies_folded_pad=*/true,
                                              /*applies_folded_channel_pad=*/false,
                                              /*applies_folded_add=*/true,
                                              /*runs_then=*/nullptr,
                                              &RowsFromInput,
                                              &EvalRows};
  return &registration;
}

const OpRegistration* RegisterConv2DReference() {
  static const OpRegistration registration = {&PrepareReference,
                                              &EvalReference,
                                              /*applies_folded_activation=*/true,
                                              /*applies_folded_pad=*/true,
                                              /*applies_folded_channel_pad=*/false,
                                              /*applies_folded_add=*/true};
  return &registration;
}

}  // namespace dfarm::runtime
