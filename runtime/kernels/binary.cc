// Elementwise binary ops with NumPy-style broadcasting (up to kMaxRank
// dimensions): ADD, SUB, MUL, DIV (with a fused activation, as their options
// allow), MAXIMUM, MINIMUM, SQUARED_DIFFERENCE and PRELU (input 1 is alpha:
// x >= 0 ? x : alpha * x), which have none.
// float32 for all; int8 and uint8 (per-tensor quantization) for ADD, SUB, MUL,
// MAXIMUM, MINIMUM and PRELU with TFLite's integer arithmetic: ADD/SUB rescale
// both inputs to a common scale after a left shift of 20 bits, MUL and PRELU
// requantize the product, MAXIMUM/MINIMUM compare the quantized values (all
// tensors must then share scale and zero point).
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "runtime/kernels/kernel_clones.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxRank = 6;

struct BinaryData : OpData {
  enum class Kind {
    kSameShape,
    kScalarLhs,
    kScalarRhs,
    kBroadcast,
    kChannelPadded,  // Node::folded_channel_pad: float only
  } kind = Kind::kSameShape;
  ActivationRange activation{};
  // Quantized: offsets are -zero_point for inputs, +zero_point for the output.
  int32_t lhs_offset = 0, rhs_offset = 0, output_offset = 0;
  int left_shift = 0;
  int32_t lhs_multiplier = 0, rhs_multiplier = 0, output_multiplier = 0;
  int lhs_shift = 0, rhs_shift = 0, output_shift = 0;
  int32_t act_min = 0, act_max = 0;
  // ADD/SUB: each input byte's value on the common scale (Rescaled()), by
  // the byte (an int8 value's two's complement), computed once at Prepare.
  std::array<int32_t, 256> lhs_rescaled{}, rhs_rescaled{};
  // A multiplier left shift that MultiplyByQuantizedMultiplier() handles.
  static bool ShiftOk(int shift) { return shift <= 30; }
  // kBroadcast: output dims and element strides of each input (0 where the
  // input is broadcast), right-aligned into kMaxRank dimensions.
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank> lhs_strides{};
  std::array<int64_t, kMaxRank> rhs_strides{};
  // kChannelPadded: the padded input (0 or 1), its channels and where they
  // start among the output's `channels`.
  int padded_input = -1;
  int64_t padded_channels = 0, pad_before = 0, channels = 0;
};

// Right-aligned element strides of `shape` within `rank` dims, 0 where size 1.
std::array<int64_t, kMaxRank> BroadcastStrides(const std::vector<int32_t>& shape) {
  std::array<int64_t, kMaxRank> strides{};
  int64_t stride = 1;
  for (int i = static_cast<int>(shape.size()) - 1, d = kMaxRank - 1; i >= 0; --i, --d) {
    strides[d] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

bool SameQuantization(const Tensor& a, const Tensor& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point;
}

// TFLite's ADD/SUB input rescaling, (offset + q) << 20 times the input's
// multiplier below one, for every 8-bit value q (by its byte).
int32_t RescaleInput(int32_t q, int32_t offset, int left_shift, int32_t multiplier, int shift) {
  return MultiplyByQuantizedMultiplierSmallerThanOneExp((offset + q) * (1 << left_shift),
                                                        multiplier, shift);
}
void FillRescaledTables(bool int8, BinaryData* d) {
  for (int byte = 0; byte < 256; ++byte) {
    const int32_t q = int8 ? static_cast<int8_t>(byte) : byte;
    d->lhs_rescaled[byte] =
        RescaleInput(q, d->lhs_offset, d->left_shift, d->lhs_multiplier, d->lhs_shift);
    d->rhs_rescaled[byte] =
        RescaleInput(q, d->rhs_offset, d->left_shift, d->rhs_multiplier, d->rhs_shift);
  }
}

// TFLite's quantized parameters of the op (add.cc, sub.cc, mul.cc, prelu.cc,
// maximum_minimum.cc).
Status PrepareQuantized(const Node& node, BinaryData* d) {
  using Op = tflite::BuiltinOperator;
  const Tensor& lhs = *node.inputs[0];
  const Tensor& rhs = *node.inputs[1];
  const Tensor& output = *node.outputs[0];
  const char* dtype = DTypeName(lhs.dtype);
  switch (node.code) {
    case Op::ADD:
    case Op::SUB:
    case Op::MUL:
    case Op::MAXIMUM:
    case Op::MINIMUM:
    case Op::PRELU:
      break;
    default:
      return Status::Unsupported(std::string(dtype) + " inputs are not supported (float32 only)");
  }
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(lhs, "input 0"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(rhs, "input 1"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(output, "output"));
  DFARM_RETURN_IF_ERROR(
      CalculateActivationRangeQuantized(NodeActivation(node), output, &d->act_min, &d->act_max));
  d->lhs_offset = -ZeroPoint(lhs);
  d->rhs_offset = -ZeroPoint(rhs);
  d->output_offset = ZeroPoint(output);
  auto too_large = [&](const char* what, double m) {
    return Status::Unsupported(std::string(what) + " multiplier " + std::to_string(m) +
                               " is out of the supported range");
  };
  switch (node.code) {
    case Op::ADD:
    case Op::SUB: {
      d->left_shift = 20;
      const double twice_max_input_scale = 2 * std::max(lhs.scale, rhs.scale);
      const double lhs_m = lhs.scale / twice_max_input_scale;
      const double rhs_m = rhs.scale / twice_max_input_scale;
      const double out_m = twice_max_input_scale / ((1 << d->left_shift) * output.scale);
      if (!QuantizeMultiplierSmallerThanOneExp(lhs_m, &d->lhs_multiplier, &d->lhs_shift)) {
        return too_large("input 0", lhs_m);
      }
      if (!QuantizeMultiplierSmallerThanOneExp(rhs_m, &d->rhs_multiplier, &d->rhs_shift)) {
        return too_large("input 1", rhs_m);
      }
      if (!QuantizeMultiplierSmallerThanOneExp(out_m, &d->output_multiplier, &d->output_shift)) {
        return too_large("output", out_m);
      }
      FillRescaledTables(lhs.dtype == DType::kInt8, d);
      return Status::Ok();
    }
    case Op::MUL: {
      const double m = lhs.scale * rhs.scale / output.scale;
      QuantizeMultiplier(m, &d->output_multiplier, &d->output_shift);
      if (d->ShiftOk(d->output_shift)) return Status::Ok();
      return too_large("output", m);
    }
    case Op::PRELU: {
      const double identity = lhs.scale / output.scale;
      const double alpha = lhs.scale * rhs.scale / output.scale;
      QuantizeMultiplier(identity, &d->lhs_multiplier, &d->lhs_shift);
      QuantizeMultiplier(alpha, &d->rhs_multiplier, &d->rhs_shift);
      if (!d->ShiftOk(d->lhs_shift)) return too_large("identity", identity);
      if (!d->ShiftOk(d->rhs_shift)) return too_large("alpha", alpha);
      return Status::Ok();
    }
    default:  // MAXIMUM, MINIMUM
      if (!SameQuantization(lhs, output) || !SameQuantization(rhs, output)) {
        return Status::Unsupported(
            "inputs and output with different scales or zero points are not supported");
      }
      return Status::Ok();
  }
}

// Node::folded_channel_pad: the other input has the output's shape, the
// padded one the same but for the last dimension.
Status PrepareChannelPadded(Node& node, BinaryData* d) {
  const int k = node.folded_channel_pad[0];
  const Tensor& padded = *node.inputs[k];
  const Tensor& other = *node.inputs[1 - k];
  const int64_t before = node.folded_channel_pad[1], after = node.folded_channel_pad[2];
  if (padded.shape.empty() || other.dtype != DType::kFloat32 ||
      other.shape.size() != padded.shape.size()) {
    return Status::Error("a PAD folded into the op needs float32 inputs of one rank, 1 or more");
  }
  for (size_t i = 0; i < padded.shape.size(); ++i) {
    const int64_t want =
        int64_t{padded.shape[i]} + (i + 1 == padded.shape.size() ? before + after : 0);
    if (other.shape[i] != want) {
      return Status::Error("input " + std::to_string(k) + " " + ShapeToString(padded.shape) +
                           " padded by the folded PAD does not match input " +
                           std::to_string(1 - k) + " " + ShapeToString(other.shape));
    }
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], other.shape));
  d->kind = BinaryData::Kind::kChannelPadded;
  d->padded_input = k;
  d->padded_channels = padded.shape.back();
  d->pad_before = before;
  d->channels = other.shape.back();
  return Status::Ok();
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* lhs = node.inputs[0];
  const Tensor* rhs = node.inputs[1];
  Tensor* output = node.outputs[0];
  if (lhs->dtype != rhs->dtype || lhs->dtype != output->dtype) {
    return Status::Error(std::string("input 0 (") + DTypeName(lhs->dtype) + "), input 1 (" +
                         DTypeName(rhs->dtype) + ") and output (" + DTypeName(output->dtype) +
                         ") must share a dtype");
  }
  auto data = std::make_unique<BinaryData>();
  if (lhs->dtype == DType::kFloat32) {
    DFARM_RETURN_IF_ERROR(GetActivationRange(NodeActivation(node), &data->activation));
  } else if (lhs->dtype == DType::kInt8 || lhs->dtype == DType::kUint8) {
    DFARM_RETURN_IF_ERROR(PrepareQuantized(node, data.get()));
  } else {
    return Status::Unsupported(std::string(DTypeName(lhs->dtype)) +
                               " inputs are not supported (float32, int8, uint8)");
  }

  if (node.folded_channel_pad[0] >= 0) {
    DFARM_RETURN_IF_ERROR(PrepareChannelPadded(node, data.get()));
    node.data = std::move(data);
    return Status::Ok();
  }
  const int rank = std::max(lhs->rank(), rhs->rank());
  if (rank > kMaxRank) {
    return Status::Unsupported("broadcasting over " + std::to_string(rank) +
                               " dimensions is not supported (at most " + std::to_string(kMaxRank) +
                               ")");
  }
  std::vector<int32_t> shape(rank);
  for (int i = 0; i < rank; ++i) {
    int li = lhs->rank() - rank + i, ri = rhs->rank() - rank + i;
    int32_t l = li >= 0 ? lhs->shape[li] : 1;
    int32_t r = ri >= 0 ? rhs->shape[ri] : 1;
    if (l != r && l != 1 && r != 1) {
      return Status::Error("cannot broadcast " + ShapeToString(lhs->shape) + " with " +
                           ShapeToString(rhs->shape));
    }
    shape[i] = l == 1 ? r : l;
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, shape));

  if (lhs->shape == rhs->shape) {
    data->kind = BinaryData::Kind::kSameShape;
  } else if (lhs->num_elements() == 1) {
    data->kind = BinaryData::Kind::kScalarLhs;
  } else if (rhs->num_elements() == 1) {
    data->kind = BinaryData::Kind::kScalarRhs;
  } else {
    data->kind = BinaryData::Kind::kBroadcast;
    data->dims.fill(1);
    for (int i = 0; i < rank; ++i) data->dims[kMaxRank - rank + i] = shape[i];
    data->lhs_strides = BroadcastStrides(lhs->shape);
    data->rhs_strides = BroadcastStrides(rhs->shape);
  }
  node.data = std::move(data);
  return Status::Ok();
}

int32_t Clamp32(int32_t v, const BinaryData& d) {
  return std::min(d.act_max, std::max(d.act_min, v));
}

// Each op: Apply() on floats; kQuantized ops also Quantized() on the raw
// quantized values (as int32), returning the clamped output value.
struct AddOp {
  static constexpr bool kQuantized = true;
  static float Apply(float a, float b) { return a + b; }
  // Both inputs on the common scale, shifted left by 20 bits: the tables
  // RescaleInput() filled at Prepare.
  static void Rescaled(const BinaryData& d, int32_t a, int32_t b, int32_t* sa, int32_t* sb) {
    *sa = d.lhs_rescaled[static_cast<uint8_t>(a)];
    *sb = d.rhs_rescaled[static_cast<uint8_t>(b)];
  }
  static int32_t Quantized(const BinaryData& d, int32_t a, int32_t b) {
    int32_t sa = 0, sb = 0;
    Rescaled(d, a, b, &sa, &sb);
    return Clamp32(MultiplyByQuantizedMultiplierSmallerThanOneExp(sa + sb, d.output_multiplier,
                                                                  d.output_shift) +
                       d.output_offset,
                   d);
  }
};
struct SubOp {
  static constexpr bool kQuantized = true;
  static float Apply(float a, float b) { return a - b; }
  static int32_t Quantized(const BinaryData& d, int32_t a, int32_t b) {
    int32_t sa = 0, sb = 0;
    AddOp::Rescaled(d, a, b, &sa, &sb);
    return Clamp32(MultiplyByQuantizedMultiplierSmallerThanOneExp(sa - sb, d.output_multiplier,
                                                                  d.output_shift) +
                       d.output_offset,
                   d);
  }
};
struct MulOp {
  static constexpr bool kQuantized = true;
  static float Apply(float a, float b) { return a * b; }
  static int32_t Quantized(const BinaryData& d, int32_t a, int32_t b) {
    const int32_t product = (d.lhs_offset + a) * (d.rhs_offset + b);
    return Clamp32(d.output_offset +
                       MultiplyByQuantizedMultiplier(product, d.output_multiplier, d.output_shift),
                   d);
  }
};
struct DivOp {
  static constexpr bool kQuantized = false;
  static float Apply(float a, float b) { return a / b; }
  static int32_t Quantized(const BinaryData&, int32_t, int32_t) { return 0; }
};
struct MaximumOp {
  static constexpr bool kQuantized = true;
  static float Apply(float a, float b) { return a > b ? a : b; }
  static int32_t Quantized(const BinaryData&, int32_t a, int32_t b) { return a > b ? a : b; }
};
struct MinimumOp {
  static constexpr bool kQuantized = true;
  static float Apply(float a, float b) { return a < b ? a : b; }
  static int32_t Quantized(const BinaryData&, int32_t a, int32_t b) { return a < b ? a : b; }
};
struct SquaredDifferenceOp {
  static constexpr bool kQuantized = false;
  static float Apply(float a, float b) { return (a - b) * (a - b); }
  static int32_t Quantized(const BinaryData&, int32_t, int32_t) { return 0; }
};

struct PreluOp {
  static constexpr bool kQuantized = true;
  static float Apply(float x, float alpha) { return x >= 0.0f ? x : x * alpha; }
  static int32_t Quantized(const BinaryData& d, int32_t x, int32_t alpha) {
    const int32_t input = d.lhs_offset + x;
    const int32_t out = input >= 0
                            ? MultiplyByQuantizedMultiplier(input, d.lhs_multiplier, d.lhs_shift)
                            : MultiplyByQuantizedMultiplier(input * (d.rhs_offset + alpha),
                                                            d.rhs_multiplier, d.rhs_shift);
    return Clamp32(out + d.output_offset, d);
  }
};

// out[i] = f(a[i * sa], b[i * sb]) for i in [0, n): a loop of its own for
// each of the strides 0 and 1 that broadcasting gives, so that each
// vectorizes.
template <typename T, typename F>
DFARM_KERNEL_INLINE void ForEachPair(const T* __restrict a, int64_t sa, const T* __restrict b,
                                     int64_t sb, T* __restrict out, int64_t n, F f) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const T s = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], s);
  } else if (sa == 0 && sb == 1) {
    const T s = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(s, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i * sa], b[i * sb]);
  }
}

// Rows [row_begin, row_end) of a kBroadcast (a row: the last dimension),
// an odometer over the outer kMaxRank-1 dims started at row_begin. `rows`
// does one row: rows(a, sa, b, sb, out, n) as ForEachPair().
template <typename T, typename Rows>
DFARM_KERNEL_INLINE void BroadcastRows(const BinaryData& d, const T* __restrict a,
                                       const T* __restrict b, T* __restrict out, int64_t row_begin,
                                       int64_t row_end, Rows rows) {
  if (row_begin >= row_end) return;
  constexpr int kLast = kMaxRank - 1;
  std::array<int64_t, kMaxRank> index{};
  const int64_t inner = d.dims[kLast];
  const int64_t ls = d.lhs_strides[kLast], rs = d.rhs_strides[kLast];
  int64_t lhs_offset = 0, rhs_offset = 0;
  for (int64_t rest = row_begin, dim = kLast - 1; dim >= 0; --dim) {
    index[dim] = rest % d.dims[dim];
    rest /= d.dims[dim];
    lhs_offset += index[dim] * d.lhs_strides[dim];
    rhs_offset += index[dim] * d.rhs_strides[dim];
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    const T* pa = a + lhs_offset;
    const T* pb = b + rhs_offset;
    T* po = out + row * inner;
    rows(pa, ls, pb, rs, po, inner);
    for (int dim = kLast - 1; dim >= 0; --dim) {
      lhs_offset += d.lhs_strides[dim];
      rhs_offset += d.rhs_strides[dim];
      if (++index[dim] < d.dims[dim]) break;
      lhs_offset -= d.lhs_strides[dim] * d.dims[dim];
      rhs_offset -= d.rhs_strides[dim] * d.dims[dim];
      index[dim] = 0;
    }
  }
}

// Rows [row_begin, row_end) (of d.channels) of f(lhs, rhs) where input
// d.padded_input reads zeros outside its channels: f(x, 0.0f) there, the
// value TFLite computes on the PAD's zeros. `rows` as BroadcastRows()'.
template <typename Rows>
DFARM_KERNEL_INLINE void ChannelPaddedRows(const BinaryData& d, const float* a, const float* b,
                                           float* out, int64_t row_begin, int64_t row_end,
                                           Rows rows) {
  static const float kZero = 0.0f;
  const bool lhs_padded = d.padded_input == 0;
  const float* full = lhs_padded ? b : a;
  const float* part = lhs_padded ? a : b;
  const int64_t c = d.channels, pc = d.padded_channels, lo = d.pad_before, hi = lo + pc;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const float* __restrict x = full + row * c;
    const float* __restrict y = part + row * pc;
    float* __restrict o = out + row * c;
    if (lhs_padded) {
      rows(&kZero, 0, x, 1, o, lo);
      rows(y, 1, x + lo, 1, o + lo, hi - lo);
      rows(&kZero, 0, x + hi, 1, o + hi, c - hi);
    } else {
      rows(x, 1, &kZero, 0, o, lo);
      rows(x + lo, 1, y, 1, o + lo, hi - lo);
      rows(x + hi, 1, &kZero, 0, o + hi, c - hi);
    }
  }
}

// True when RunElementwise() splits the op by rows (the last dimension, or
// d.channels), else by elements.
bool SplitsRows(const BinaryData& d) {
  return d.kind == BinaryData::Kind::kBroadcast || d.kind == BinaryData::Kind::kChannelPadded;
}

// One part of out = f(lhs, rhs): rows [begin, end) when SplitsRows(d), else
// elements [begin, end).
template <typename T, typename F>
DFARM_KERNEL_INLINE void RunPart(const BinaryData& d, const T* a, const T* b, T* out, int64_t begin,
                                 int64_t end, F f) {
  auto rows = [f](const T* x, int64_t sx, const T* y, int64_t sy, T* o, int64_t n)
                  DFARM_KERNEL_LAMBDA_INLINE { ForEachPair(x, sx, y, sy, o, n, f); };
  switch (d.kind) {
    case BinaryData::Kind::kSameShape:
      ForEachPair(a + begin, 1, b + begin, 1, out + begin, end - begin, f);
      break;
    case BinaryData::Kind::kScalarLhs:
      ForEachPair(a, 0, b + begin, 1, out + begin, end - begin, f);
      break;
    case BinaryData::Kind::kScalarRhs:
      ForEachPair(a + begin, 1, b, 0, out + begin, end - begin, f);
      break;
    case BinaryData::Kind::kBroadcast:
      BroadcastRows(d, a, b, out, begin, end, rows);
      break;
    case BinaryData::Kind::kChannelPadded:  // float only (Prepare)
      if constexpr (std::is_same_v<T, float>) ChannelPaddedRows(d, a, b, out, begin, end, rows);
      break;
  }
}

// Runs part(begin, end) over the node's elements, across its threads:
// whole rows (SplitsRows()), contiguous ranges of elements otherwise; each
// element as on one thread.
template <typename Part>
void RunElementwise(const BinaryData& d, const Node& node, int64_t n, Part part) {
  if (SplitsRows(d)) {
    const bool padded = d.kind == BinaryData::Kind::kChannelPadded;
    const int64_t inner = std::max<int64_t>(padded ? d.channels : d.dims[kMaxRank - 1], 1);
    const int64_t row_count = n / inner;
    const int tasks =
        static_cast<int>(TaskCount(n >= kMinParallelElements ? row_count : 1, NumThreads(node)));
    ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int) {
      const Range r = SplitRange(row_count, tasks, static_cast<int>(t));
      if (r.size() > 0) part(r.begin, r.end);
    });
    return;
  }
  ParallelRanges(node, n, kMinParallelElements, part);
}

template <typename Op, typename T>
void EvalQuantized(const BinaryData& d, Node& node) {
  auto f = [&d](T a, T b) { return static_cast<T>(Op::Quantized(d, a, b)); };
  const T* a = node.inputs[0]->data_as<T>();
  const T* b = node.inputs[1]->data_as<T>();
  T* out = node.outputs[0]->data_as<T>();
  RunElementwise(d, node, node.outputs[0]->num_elements(),
                 [&](int64_t begin, int64_t end) { RunPart<T>(d, a, b, out, begin, end, f); });
}

// The float part of each op (RunPart() with its fused activation), compiled
// once per target clone (kernel_clones.h): the build targets baseline
// x86-64, whose loops GCC vectorizes 4 floats wide; a clone for AVX2 where
// the CPU has it. The same operations on each element.
#define DFARM_BINARY_FLOAT(Name)                                                                  \
  DFARM_KERNEL_CLONES void Name##Float(const BinaryData& d, const float* a, const float* b,       \
                                       float* out, int64_t begin, int64_t end) {                  \
    const ActivationRange act = d.activation;                                                     \
    RunPart<float>(d, a, b, out, begin, end, [act](float x, float y) DFARM_KERNEL_LAMBDA_INLINE { \
      return Clamp(Name##Op::Apply(x, y), act);                                                   \
    });                                                                                           \
  }
DFARM_BINARY_FLOAT(Add)
DFARM_BINARY_FLOAT(Sub)
DFARM_BINARY_FLOAT(Mul)
DFARM_BINARY_FLOAT(Div)
DFARM_BINARY_FLOAT(Maximum)
DFARM_BINARY_FLOAT(Minimum)
DFARM_BINARY_FLOAT(SquaredDifference)
DFARM_BINARY_FLOAT(Prelu)
#undef DFARM_BINARY_FLOAT

using FloatPart = void (*)(const BinaryData&, const float*, const float*, float*, int64_t, int64_t);

template <typename Op, FloatPart kFloat>
Status Eval(Node& node) {
  const BinaryData& d = *node.data_as<BinaryData>();
  const int64_t n = node.outputs[0]->num_elements();
  switch (node.outputs[0]->dtype) {
    case DType::kFloat32: {
      const float* a = node.inputs[0]->data_as<float>();
      const float* b = node.inputs[1]->data_as<float>();
      float* out = node.outputs[0]->data_as<float>();
      RunElementwise(d, node, n,
                     [&](int64_t begin, int64_t end) { kFloat(d, a, b, out, begin, end); });
      return Status::Ok();
    }
    case DType::kInt8:
      if constexpr (Op::kQuantized) {
        EvalQuantized<Op, int8_t>(d, node);
        return Status::Ok();
      }
      break;
    case DType::kUint8:
      if constexpr (Op::kQuantized) {
        EvalQuantized<Op, uint8_t>(d, node);
        return Status::Ok();
      }
      break;
    default:
      break;
  }
  return Status::Unsupported("unexpected dtype");  // refused in Prepare()
}

}  // namespace

const OpRegistration* RegisterAdd() {
  static const OpRegistration registration = {&Prepare, &Eval<AddOp, &AddFloat>,
                                              /*applies_folded_activation=*/true,
                                              /*applies_folded_pad=*/false,
                                              /*applies_folded_channel_pad=*/true};
  return &registration;
}

const OpRegistration* RegisterSub() {
  static const OpRegistration registration = {&Prepare, &Eval<SubOp, &SubFloat>,
                                              /*applies_folded_activation=*/true};
  return &registration;
}

const OpRegistration* RegisterMul() {
  static const OpRegistration registration = {&Prepare, &Eval<MulOp, &MulFloat>,
                                              /*applies_folded_activation=*/true};
  return &registration;
}

const OpRegistration* RegisterDiv() {
  static const OpRegistration registration = {&Prepare, &Eval<DivOp, &DivFloat>,
                                              /*applies_folded_activation=*/true};
  return &registration;
}

const OpRegistration* RegisterMaximum() {
  static const OpRegistration registration = {&Prepare, &Eval<MaximumOp, &MaximumFloat>};
  return &registration;
}

const OpRegistration* RegisterMinimum() {
  static const OpRegistration registration = {&Prepare, &Eval<MinimumOp, &MinimumFloat>};
  return &registration;
}

const OpRegistration* RegisterSquaredDifference() {
  static const OpRegistration registration = {&Prepare,
                                              &Eval<SquaredDifferenceOp, &SquaredDifferenceFloat>};
  return &registration;
}

const OpRegistration* RegisterPrelu() {
  static const OpRegistration registration = {&Prepare, &Eval<PreluOp, &PreluFloat>};
  return &registration;
}

}  // namespace dfarm::runtime
