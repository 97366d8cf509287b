// FULLY_CONNECTED, float32: input [..., K] (read as [B, K], B = elements / K),
// weights [N, K] (default format only), optional bias [N], fused activation.
// The output is [B, N], or with keep_num_dims the input's shape with its last
// dim replaced by N. int8 (weights per-tensor or per-channel along dim 0)
// and uint8 (per-tensor) with int32 bias use TFLite's integer arithmetic.
// The output is one GEMM, input [B, K] x weights^T (weights [N, K] already is
// the transposed right operand), split across the interpreter's threads;
// quantized with constant weights, the integer GEMM (quantized_gemm.h);
// RegisterFullyConnectedReference() keeps the plain loops.
#include <algorithm>
#include <cstring>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quantized_gemm.h"

namespace dfarm::runtime {
namespace {

struct FullyConnectedData : OpData {
  int64_t batches = 0;
  int units = 0, depth = 0;
  ActivationRange activation{};
  Gemm gemm;
  bool quantized = false;  // int8 / uint8: TFLite's integer arithmetic
  QuantizedConvParams quant;
  // Quantized, constant weights: packed for the integer GEMM (rows > 0).
  QuantizedWeights qweights;
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 3, 1));
  const auto* options = node.options<tflite::FullyConnectedOptions>();
  const Tensor* input = node.inputs[0];
  const Tensor* weights = node.inputs[1];
  const Tensor* bias = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  Tensor* output = node.outputs[0];
  const bool quantized = input != nullptr && IsQuantized8(*input);
  if (!quantized) {
    DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(weights, "weights"));
    if (bias != nullptr) DFARM_RETURN_IF_ERROR(CheckFloat32(bias, "bias"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  }
  if (options != nullptr && options->weights_format() != 0) {
    return Status::Unsupported("weights format " + std::to_string(options->weights_format()) +
                               " is not supported (only the default one)");
  }
  if (weights->rank() != 2 || input->rank() < 1) {
    return Status::Error("weights must be 2-D and input at least 1-D, got " +
                         ShapeToString(weights->shape) + " and " + ShapeToString(input->shape));
  }
  auto data = std::make_unique<FullyConnectedData>();
  data->units = weights->shape[0];
  data->depth = weights->shape[1];
  if (data->depth <= 0 || input->num_elements() % data->depth != 0) {
    return Status::Error("input " + ShapeToString(input->shape) + " does not split into rows of " +
                         std::to_string(data->depth) + " (weights " +
                         ShapeToString(weights->shape) + ")");
  }
  data->batches = input->num_elements() / data->depth;
  if (bias != nullptr && bias->num_elements() != data->units) {
    return Status::Error("bias must hold " + std::to_string(data->units) + " values, got " +
                         ShapeToString(bias->shape));
  }
  std::vector<int32_t> computed;
  if (options != nullptr && options->keep_num_dims()) {
    if (input->shape.back() != data->depth) {
      return Status::Error("with keep_num_dims the input's last dim must be " +
                           std::to_string(data->depth) + ", got " + ShapeToString(input->shape));
    }
    computed = input->shape;
    computed.back() = data->units;
  } else {
    computed = {static_cast<int32_t>(data->batches), data->units};
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  DFARM_RETURN_IF_ERROR(GetActivationRange(options != nullptr
                                               ? options->fused_activation_function()
                                               : tflite::ActivationFunctionType::NONE,
                                           &data->activation));
  if (quantized) {
    data->quantized = true;
    DFARM_RETURN_IF_ERROR(PrepareQuantizedConv(*input, *weights, bias, *output, data->units, 0,
                                               options != nullptr
                                                   ? options->fused_activation_function()
                                                   : tflite::ActivationFunctionType::NONE,
                                               &data->quant));
    // TFLite 2.9 computes quantized FULLY_CONNECTED with its optimized GEMM (ruy).
    data->quant.round_half_up = true;
    if (weights->has_static_value()) {
      data->qweights =
          PackQuantizedWeights(*weights, data->units, data->depth, data->quant.filter_offsets);
      node.scratch_bytes = QuantizedScratchBytes(data->qweights);
    }
    node.data = std::move(data);
    return Status::Ok();
  }
  data->gemm.Plan(data->batches, data->units, data->depth);
  node.scratch_bytes = data->gemm.workspace_bytes();
  node.data = std::move(data);
  return Status::Ok();
}

// TFLite's reference_integer_ops::FullyConnected (per-tensor) and
// FullyConnectedPerChannel; uint8 as reference_ops::FullyConnected.
template <typename T>
Status EvalQuantized(Node& node) {
  const FullyConnectedData& d = *node.data_as<FullyConnectedData>();
  const QuantizedConvParams& q = d.quant;
  const T* in = node.inputs[0]->data_as<T>();
  const T* w = node.inputs[1]->data_as<T>();
  T* out = node.outputs[0]->data_as<T>();
  for (int64_t b = 0; b < d.batches; ++b) {
    const T* x = in + b * d.depth;
    for (int u = 0; u < d.units; ++u) {
      const T* row = w + static_cast<size_t>(u) * d.depth;
      const int32_t filter_offset = q.filter_offsets[u];
      int32_t acc = 0;
      for (int k = 0; k < d.depth; ++k) {
        acc += (static_cast<int32_t>(row[k]) + filter_offset) *
               (static_cast<int32_t>(x[k]) + q.input_offset);
      }
      acc += q.bias[u];
      out[b * d.units + u] = static_cast<T>(q.Requantize(acc, u));
    }
  }
  return Status::Ok();
}

// The quantized product on the integer GEMM: tiles of kQuantizedTileRows
// input rows, widened into the running thread's scratch.
template <typename T>
Status EvalQuantizedGemm(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckScratch(node));
  const FullyConnectedData& d = *node.data_as<FullyConnectedData>();
  const T* in = node.inputs[0]->data_as<T>();
  T* out = node.outputs[0]->data_as<T>();
  const int64_t tiles = (d.batches + kQuantizedTileRows - 1) / kQuantizedTileRows;
  const int tasks = static_cast<int>(TaskCount(tiles, NumThreads(node)));
  ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int slot) {
    const Range r = SplitRange(tiles, tasks, static_cast<int>(t));
    const QuantizedScratchParts scratch = QuantizedScratch(NodeScratch(node, slot), d.qweights);
    for (int64_t tile = r.begin; tile < r.end; ++tile) {
      const int64_t first = tile * kQuantizedTileRows;
      const int64_t count = std::min(kQuantizedTileRows, d.batches - first);
      for (int64_t b = 0; b < count; ++b) {
        int16_t* row = scratch.rows + b * d.qweights.stride;
        WidenWithOffset(in + (first + b) * d.depth, d.depth, d.quant.input_offset, row);
        std::fill(row + d.depth, row + d.qweights.stride, int16_t{0});
      }
      QuantizedGemmTile(scratch.rows, count, d.qweights, d.quant, scratch.sums,
                        out + first * d.units, d.units);
    }
  });
  return Status::Ok();
}

template <typename T>
Status EvalQuantizedAny(Node& node) {
  return node.data_as<FullyConnectedData>()->qweights.rows > 0 ? EvalQuantizedGemm<T>(node)
                                                               : EvalQuantized<T>(node);
}

Status Eval(Node& node) {
  const FullyConnectedData& d = *node.data_as<FullyConnectedData>();
  if (d.quantized) {
    return node.inputs[0]->dtype == DType::kInt8 ? EvalQuantizedAny<int8_t>(node)
                                                 : EvalQuantizedAny<uint8_t>(node);
  }
  DFARM_RETURN_IF_ERROR(CheckScratch(node));
  const float* in = node.inputs[0]->data_as<float>();
  const float* w = node.inputs[1]->data_as<float>();
  const Tensor* bias_t = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  float* out = node.outputs[0]->data_as<float>();
  const int64_t total = d.batches * d.units;
  if (bias_t != nullptr) {
    for (int64_t b = 0; b < d.batches; ++b) {
      std::memcpy(out + b * d.units, bias_t->data, d.units * sizeof(float));
    }
  } else {
    std::fill(out, out + total, 0.0f);
  }
  d.gemm.RunParallel(d.batches, d.units, d.depth, {in, d.depth, false}, {w, d.depth, true}, out,
                     d.units, node.context, 0);
  const ActivationRange act = d.activation;
  for (int64_t i = 0; i < total; ++i) out[i] = Clamp(out[i], act);
  return Status::Ok();
}

Status EvalReference(Node& node) {
  if (node.data_as<FullyConnectedData>()->quantized) {
    return node.inputs[0]->dtype == DType::kInt8 ? EvalQuantized<int8_t>(node)
                                                 : EvalQuantized<uint8_t>(node);
  }
  const FullyConnectedData& d = *node.data_as<FullyConnectedData>();
  const float* in = node.inputs[0]->data_as<float>();
  const float* w = node.inputs[1]->data_as<float>();
  const Tensor* bias_t = node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  const float* bias = bias_t != nullptr ? bias_t->data_as<float>() : nullptr;
  float* out = node.outputs[0]->data_as<float>();
  for (int64_t b = 0; b < d.batches; ++b) {
    const float* x = in + b * d.depth;
    for (int u = 0; u < d.units; ++u) {
      const float* row = w + static_cast<size_t>(u) * d.depth;
      float acc = 0.0f;
      for (int k = 0; k < d.depth; ++k) acc += x[k] * row[k];
      if (bias != nullptr) acc += bias[u];
      out[b * d.units + u] = Clamp(acc, d.activation);
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterFullyConnected() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

const OpRegistration* RegisterFullyConnectedReference() {
  static const OpRegistration registration = {&Prepare, &EvalReference};
  return &registration;
}

}  // namespace dfarm::runtime
