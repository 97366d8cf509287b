// DEPTHWISE_CONV_2D, float32: input [N,H,W,Cin], filter [1,KH,KW,Cout] with
// Cout = Cin * multiplier (output channel c*multiplier+m reads input channel
// c), optional bias [Cout]; SAME/VALID padding, dilation, fused activation.
// Like TFLite (version 2 and later), the multiplier comes from the shapes; the
// depth_multiplier option is redundant and not read. int8 (filter per-channel
// along dim 3) and uint8 (per-tensor) with int32 bias use TFLite's integer
// arithmetic (reference_integer_ops::DepthwiseConvPerChannel).
// Float 3x3/5x5 nodes with multiplier 1 and no dilation run the fast kernel
// of depthwise_conv_float.h, quantized nodes with a constant filter
// EvalQuantizedFast() (channels innermost, threads by output rows);
// RegisterDepthwiseConv2DReference() keeps the plain loops for every node.
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/aligned_vector.h"
#include "runtime/kernels/depthwise_conv_float.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_clones.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quantized_gemm.h"

namespace dfarm::runtime {
namespace {

// Multiply-adds below which a quantized node stays on one thread.
constexpr int64_t kMinParallelQuantizedTaps = int64_t{1} << 15;

struct DepthwiseData : OpData {
  int stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int pad_top = 0, pad_left = 0;
  int multiplier = 1;
  ActivationRange activation{};
  bool quantized = false;
  QuantizedConvParams quant;
  // Quantized, constant filter: [KH*KW][Cout] with each channel's filter
  // offset added (EvalQuantizedRows); empty when the plain loops run.
  std::vector<int16_t> qfilter;
  DepthwiseFloatPlan fast;  // covered() when the fast float kernel runs the node
  // The fast path's filter when it lies in the model's buffer (a float32
  // model): a copy on a cache line. TFLite's flatbuffers align buffers to
  // 16 bytes only, and the kernel loads 32 and 64 bytes at a time
  // (BM_Depthwise, 3x3, the filter 16 bytes into a line: 5-37% slower).
  AlignedFloats filter;
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 3, 1));
  const auto* options = node.options<tflite::DepthwiseConv2DOptions>();
  if (options == nullptr) return Status::Error("DepthwiseConv2DOptions are missing");
  Tensor* input = node.inputs[0];
  Tensor* filter = node.inputs[1];
  Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  Tensor* output = node.outputs[0];
  const bool quantized = input != nullptr && IsQuantized8(*input);
  if (!quantized) {
    DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(filter, "filter"));
    if (bias != nullptr) DFARM_RETURN_IF_ERROR(CheckFloat32(bias, "bias"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  }
  if (input->rank() != 4 || filter->rank() != 4 || filter->shape[0] != 1) {
    return Status::Error("input must be 4-D and filter [1,KH,KW,C], got " +
                         ShapeToString(input->shape) + " and " + ShapeToString(filter->shape));
  }
  const int in_c = input->shape[3];
  const int out_c = filter->shape[3];
  if (in_c <= 0 || out_c % in_c != 0) {
    return Status::Error("filter channels " + std::to_string(out_c) +
                         " are not a multiple of input channels " + std::to_string(in_c));
  }
  if (bias != nullptr && (bias->rank() != 1 || bias->shape[0] != out_c)) {
    return Status::Error("bias must be [" + std::to_string(out_c) + "], got " +
                         ShapeToString(bias->shape));
  }
  auto data = std::make_unique<DepthwiseData>();
  data->stride_h = options->stride_h();
  data->stride_w = options->stride_w();
  data->dilation_h = options->dilation_h_factor();
  data->dilation_w = options->dilation_w_factor();
  data->multiplier = out_c / in_c;
  DFARM_RETURN_IF_ERROR(CheckWindowParams(options->padding(), data->stride_h, data->stride_w,
                                          data->dilation_h, data->dilation_w));
  DFARM_RETURN_IF_ERROR(GetActivationRange(NodeActivation(node), &data->activation));
  WindowDim h, w;
  DFARM_RETURN_IF_ERROR(ComputeConvWindow(node, options->padding(), *input, filter->shape[1],
                                          filter->shape[2], data->stride_h, data->stride_w,
                                          data->dilation_h, data->dilation_w, &h, &w));
  const int32_t computed[] = {input->shape[0], h.out, w.out, out_c};
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  data->pad_top = h.pad_before;
  data->pad_left = w.pad_before;
  if (quantized) {
    data->quantized = true;
    DFARM_RETURN_IF_ERROR(PrepareQuantizedConv(*input, *filter, bias, *output, out_c, 3,
                                               NodeActivation(node), &data->quant));
    if (filter->has_static_value()) {
      const int64_t taps = static_cast<int64_t>(filter->shape[1]) * filter->shape[2];
      data->qfilter.resize(static_cast<size_t>(taps * out_c));
      for (int64_t i = 0; i < taps * out_c; ++i) {
        const int32_t w = filter->dtype == DType::kInt8 ? filter->data_as<int8_t>()[i]
                                                        : filter->data_as<uint8_t>()[i];
        data->qfilter[i] = static_cast<int16_t>(w + data->quant.filter_offsets[i % out_c]);
      }
      // Per thread: one output pixel's int32 sums.
      node.scratch_bytes = static_cast<size_t>(out_c) * sizeof(int32_t);
    }
  } else {
    data->fast = PlanDepthwiseFloat(*input, *filter, *output, data->stride_h, data->stride_w,
                                    data->dilation_h, data->dilation_w, data->pad_top,
                                    data->pad_left, data->activation);
    if (data->fast.covered() && filter->allocation == Allocation::kConstant &&
        filter->sparsity == nullptr && filter->data != nullptr &&
        filter->bytes >= static_cast<size_t>(filter->num_elements()) * sizeof(float)) {
      const float* values = filter->data_as<float>();
      data->filter.assign(values, values + filter->num_elements());
    }
  }
  node.data = std::move(data);
  return Status::Ok();
}

template <typename T>
Status EvalQuantized(Node& node) {
  const DepthwiseData& d = *node.data_as<DepthwiseData>();
  const QuantizedConvParams& q = d.quant;
  const Tensor& input = *node.inputs[0];
  const Tensor& filter_t = *node.inputs[1];
  Tensor& output = *node.outputs[0];
  const int batches = input.shape[0], in_h = input.shape[1], in_w = input.shape[2];
  const int in_c = input.shape[3];
  const int k_h = filter_t.shape[1], k_w = filter_t.shape[2];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const T* in = input.data_as<T>();
  const T* filter = filter_t.data_as<T>();
  T* out = output.data_as<T>();
  for (int n = 0; n < batches; ++n) {
    for (int oy = 0; oy < out_h; ++oy) {
      for (int ox = 0; ox < out_w; ++ox) {
        const int iy0 = oy * d.stride_h - d.pad_top, ix0 = ox * d.stride_w - d.pad_left;
        for (int ic = 0; ic < in_c; ++ic) {
          for (int m = 0; m < d.multiplier; ++m) {
            const int oc = ic * d.multiplier + m;
            int32_t acc = 0;
            for (int ky = 0; ky < k_h; ++ky) {
              const int iy = iy0 + ky * d.dilation_h;
              if (iy < 0 || iy >= in_h) continue;
              for (int kx = 0; kx < k_w; ++kx) {
                const int ix = ix0 + kx * d.dilation_w;
                if (ix < 0 || ix >= in_w) continue;
                const int32_t x =
                    in[((static_cast<size_t>(n) * in_h + iy) * in_w + ix) * in_c + ic];
                const int32_t w = filter[(static_cast<size_t>(ky) * k_w + kx) * out_c + oc];
                acc += (w + q.filter_offsets[oc]) * (x + q.input_offset);
              }
            }
            acc += q.bias[oc];
            out[((static_cast<size_t>(n) * out_h + oy) * out_w + ox) * out_c + oc] =
                static_cast<T>(q.Requantize(acc, oc));
          }
        }
      }
    }
  }
  return Status::Ok();
}

// Output rows [row_begin, row_end) (batch * out_h + oy) of a quantized node
// with a packed filter (DepthwiseData::qfilter): per pixel, every channel's
// int32 sum in `acc`, tap by tap with the channels innermost (so the loop
// vectorizes), then the bias and the requantization (RequantizeRow()).
// Integer sums: the bits of EvalQuantized()'s loops.
template <typename T>
DFARM_KERNEL_CLONES_NO_FMA void EvalQuantizedRows(const DepthwiseData& d, const Node& node,
                                                  int64_t row_begin, int64_t row_end,
                                                  int32_t* __restrict acc) {
  const bool simd = QuantizedGemmHasSimd();
  const QuantizedConvParams& q = d.quant;
  const Tensor& input = *node.inputs[0];
  const Tensor& output = *node.outputs[0];
  const int in_h = input.shape[1], in_w = input.shape[2], in_c = input.shape[3];
  const int k_h = node.inputs[1]->shape[1], k_w = node.inputs[1]->shape[2];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const int multiplier = d.multiplier;
  const int32_t input_offset = q.input_offset;
  const T* in = input.data_as<T>();
  T* out = node.outputs[0]->data_as<T>();
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t n = row / out_h;
    const int oy = static_cast<int>(row % out_h);
    const int iy0 = oy * d.stride_h - d.pad_top;
    for (int ox = 0; ox < out_w; ++ox) {
      const int ix0 = ox * d.stride_w - d.pad_left;
      std::fill_n(acc, out_c, 0);
      for (int ky = 0; ky < k_h; ++ky) {
        const int iy = iy0 + ky * d.dilation_h;
        if (iy < 0 || iy >= in_h) continue;
        for (int kx = 0; kx < k_w; ++kx) {
          const int ix = ix0 + kx * d.dilation_w;
          if (ix < 0 || ix >= in_w) continue;
          const T* __restrict px = in + ((n * in_h + iy) * in_w + ix) * in_c;
          const int16_t* __restrict w =
              d.qfilter.data() + (static_cast<size_t>(ky) * k_w + kx) * out_c;
          if (multiplier == 1) {
            for (int c = 0; c < out_c; ++c) {
              acc[c] += static_cast<int32_t>(w[c]) * (static_cast<int32_t>(px[c]) + input_offset);
            }
          } else {
            for (int c = 0; c < in_c; ++c) {
              const int32_t x = static_cast<int32_t>(px[c]) + input_offset;
              for (int m = 0; m < multiplier; ++m) {
                acc[c * multiplier + m] += static_cast<int32_t>(w[c * multiplier + m]) * x;
              }
            }
          }
        }
      }
      T* o = out + ((n * out_h + oy) * out_w + ox) * out_c;
      RequantizeRow(acc, out_c, q, simd, o);
    }
  }
}

// The quantized node on EvalQuantizedRows(), whole output rows a task.
template <typename T>
Status EvalQuantizedFast(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckScratch(node));
  const DepthwiseData& d = *node.data_as<DepthwiseData>();
  const Tensor& output = *node.outputs[0];
  const int64_t rows = static_cast<int64_t>(output.shape[0]) * output.shape[1];
  const int64_t work = static_cast<int64_t>(output.num_elements()) * node.inputs[1]->shape[1] *
                       node.inputs[1]->shape[2];
  const int tasks =
      static_cast<int>(work >= kMinParallelQuantizedTaps ? TaskCount(rows, NumThreads(node)) : 1);
  ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int slot) {
    const Range r = SplitRange(rows, tasks, static_cast<int>(t));
    auto* acc = reinterpret_cast<int32_t*>(NodeScratch(node, slot));
    if (r.size() > 0) EvalQuantizedRows<T>(d, node, r.begin, r.end, acc);
  });
  return Status::Ok();
}

// The float loops, channel-innermost so they vectorize; built for AVX2 too
// where GCC can pick the variant at load time (ifunc).
DFARM_KERNEL_CLONES_NO_FMA
void EvalFloat(const DepthwiseData& d, Node& node) {
  const Tensor& input = *node.inputs[0];
  const Tensor& filter_t = *node.inputs[1];
  const Tensor* bias_t = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  Tensor& output = *node.outputs[0];
  const int batches = input.shape[0], in_h = input.shape[1], in_w = input.shape[2];
  const int in_c = input.shape[3];
  const int k_h = filter_t.shape[1], k_w = filter_t.shape[2];
  const int out_h = output.shape[1], out_w = output.shape[2], out_c = output.shape[3];
  const int multiplier = d.multiplier;
  const float* in = input.data_as<float>();
  const float* filter = filter_t.data_as<float>();
  const float* bias = bias_t != nullptr ? bias_t->data_as<float>() : nullptr;
  float* out = output.data_as<float>();

  for (int n = 0; n < batches; ++n) {
    for (int oy = 0; oy < out_h; ++oy) {
      const int iy0 = oy * d.stride_h - d.pad_top;
      for (int ox = 0; ox < out_w; ++ox) {
        const int ix0 = ox * d.stride_w - d.pad_left;
        float* __restrict acc = out + ((static_cast<size_t>(n) * out_h + oy) * out_w + ox) * out_c;
        if (bias != nullptr) {
          std::memcpy(acc, bias, out_c * sizeof(float));
        } else {
          std::memset(acc, 0, out_c * sizeof(float));
        }
        for (int ky = 0; ky < k_h; ++ky) {
          const int iy = iy0 + ky * d.dilation_h;
          if (iy < 0 || iy >= in_h) continue;
          for (int kx = 0; kx < k_w; ++kx) {
            const int ix = ix0 + kx * d.dilation_w;
            if (ix < 0 || ix >= in_w) continue;
            const float* __restrict px =
                in + ((static_cast<size_t>(n) * in_h + iy) * in_w + ix) * in_c;
            const float* __restrict w = filter + (static_cast<size_t>(ky) * k_w + kx) * out_c;
            if (multiplier == 1) {
              for (int c = 0; c < out_c; ++c) acc[c] += px[c] * w[c];
            } else {
              for (int c = 0; c < in_c; ++c) {
                for (int m = 0; m < multiplier; ++m) {
                  acc[c * multiplier + m] += px[c] * w[c * multiplier + m];
                }
              }
            }
          }
        }
        for (int c = 0; c < out_c; ++c) acc[c] = Clamp(acc[c], d.activation);
      }
    }
  }
}

Status EvalReference(Node& node) {
  const DepthwiseData& d = *node.data_as<DepthwiseData>();
  // An empty output (a side of 0) has nothing to compute: never walk its
  // batches, however many (a batch of 2^31-1 over a width of 0).
  if (node.outputs[0]->num_elements() == 0) return Status::Ok();
  if (d.quantized) {
    return node.inputs[0]->dtype == DType::kInt8 ? EvalQuantized<int8_t>(node)
                                                 : EvalQuantized<uint8_t>(node);
  }
  EvalFloat(d, node);
  return Status::Ok();
}

Status Eval(Node& node) {
  const DepthwiseData& d = *node.data_as<DepthwiseData>();
  if (node.outputs[0]->num_elements() == 0) return Status::Ok();  // as EvalReference
  if (d.quantized && !d.qfilter.empty()) {
    return node.inputs[0]->dtype == DType::kInt8 ? EvalQuantizedFast<int8_t>(node)
                                                 : EvalQuantizedFast<uint8_t>(node);
  }
  if (!d.fast.covered()) return EvalReference(node);
  const Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  // Node::then (the interpreter fuses it only after the fast float path):
  // its rows as each task writes them.
  DepthwiseThen then;
  if (node.then != nullptr) {
    DFARM_RETURN_IF_ERROR(CheckScratch(*node.then));
    then.arg = node.then;
    const Tensor& out = *node.then->outputs[0];
    then.macs = out.num_elements() * node.then->inputs[0]->shape.back();
    then.run = [](const void* arg, int64_t begin, int64_t end, int slot) {
      const Node& next = *static_cast<const Node*>(arg);
      next.registration->eval_rows(next, begin, end, slot);
    };
  }
  const float* filter = d.filter.empty() ? node.inputs[1]->data_as<float>() : d.filter.data();
  RunDepthwiseFloat(d.fast, node.inputs[0]->data_as<float>(), filter,
                    bias != nullptr ? bias->data_as<float>() : nullptr,
                    node.outputs[0]->data_as<float>(), node.context, then);
  return Status::Ok();
}

// Node::then's host: the fast float path only (RunsThen()).
bool RunsThen(const Node& node) {
  const DepthwiseData* d = node.data_as<DepthwiseData>();
  return d != nullptr && !d->quantized && d->fast.covered();
}

}  // namespace

const OpRegistration* RegisterDepthwiseConv2D() {
  static const OpRegistration registration = {&Prepare,
                                              &Eval,
                                              /*applies_folded_activation=*/true,
                                              /*applies_folded_pad=*/true,
                                              /*applies_folded_channel_pad=*/false,
                                              /*applies_folded_add=*/false,
                                              &RunsThen};
  return &registration;
}

const OpRegistration* RegisterDepthwiseConv2DReference() {
  static const OpRegistration registration = {&Prepare, &EvalReference,
                                              /*applies_folded_activation=*/true,
                                              /*applies_folded_pad=*/true};
  return &registration;
}

}  // namespace dfarm::runtime
