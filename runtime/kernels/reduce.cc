// MEAN, SUM and REDUCE_MAX over the axes of input 1 (int32/int64, holding its
// values before Invoke(); negative axes count from the end, repeats are
// ignored), with ReducerOptions.keep_dims. float32: as in TFLite, the sums are
// accumulated in float32 and MEAN divides by the reduced element count.
// int8/uint8: an int32 sum of the quantized values; SUM as TFLite's
// QuantizedMeanOrSum (minus zero_point * count, times the multiplier
// input_scale / output_scale), MEAN as TensorFlow Lite 2.9's builtin kernel
// (MeanOfSums()); REDUCE_MAX takes the max of the quantized values (input
// and output must then share scale and zero point).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/kernels/kernel_clones.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/quant_util.h"
#include "runtime/kernels/vec8.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxRank = 6;

struct ReduceData : OpData {
  // Input dims and the output's element strides (0 on reduced dims),
  // right-aligned into kMaxRank dims.
  std::array<int64_t, kMaxRank> in_dims{};
  std::array<int64_t, kMaxRank> out_strides{};
  int64_t reduced_count = 1;
  // The input seen as [outer, rows, channels], the reduced dims being those
  // of `rows` (one contiguous run right before the last dim, which is
  // kept): float SUM and MEAN then run SumColumns(). columns false: another
  // layout.
  bool columns = false;
  int64_t outer = 1, rows = 1, channels = 1;
  // MEAN of a 4-D input over axes exactly {1, 2} with keep_dims: TFLite 2.9
  // runs it through its own kernel (MeanOfSums()).
  bool mean_hw_4d = false;
  int32_t mean_bias = 0;  // uint8 mean_hw_4d: zp_out - (int)(zp_in * s_in / s_out)
  // Quantized: the requantizing multiplier and the int32 accumulators.
  int32_t multiplier = 0;
  int shift = 0;
  std::vector<int32_t> accumulators;
};

// The quantized parameters of MEAN, SUM (TFLite's multiplier, reduce.h) and REDUCE_MAX.
Status PrepareQuantized(const Node& node, ReduceData* d) {
  const Tensor& input = *node.inputs[0];
  const Tensor& output = *node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(&input, "input", &output, "output"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(output, "output"));
  if (node.code == tflite::BuiltinOperator::REDUCE_MAX) {
    if (input.scale != output.scale || input.zero_point != output.zero_point) {
      return Status::Unsupported(
          "input and output with different scales or zero points are not supported");
    }
    return Status::Ok();
  }
  if (d->reduced_count > (int64_t{1} << 23)) {
    return Status::Unsupported("reducing " + std::to_string(d->reduced_count) +
                               " elements into one is not supported (int32 sum)");
  }
  d->accumulators.resize(static_cast<size_t>(output.num_elements()));
  if (node.code == tflite::BuiltinOperator::MEAN) {
    // MeanOfSums(): uint8 over H,W in fixed point, the rest in float.
    if (input.dtype == DType::kUint8 && d->mean_hw_4d) {
      const float count = static_cast<float>(d->reduced_count);
      QuantizeMultiplier(static_cast<double>(input.scale / (count * output.scale)), &d->multiplier,
                         &d->shift);
      if (d->shift < -31 || d->shift > 30) {
        return Status::Unsupported("MEAN's multiplier s_in / (count * s_out) is out of range");
      }
      d->mean_bias = ZeroPoint(output) - static_cast<int32_t>(static_cast<float>(ZeroPoint(input)) *
                                                              input.scale / output.scale);
    }
    return Status::Ok();
  }
  const double real_multiplier = static_cast<double>(input.scale) / output.scale;
  QuantizeMultiplier(real_multiplier, &d->multiplier, &d->shift);
  if (d->shift > 30) {
    return Status::Unsupported("input scale / output scale " + std::to_string(real_multiplier) +
                               " is too large");
  }
  return Status::Ok();
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  const bool quantized = input->dtype == DType::kInt8 || input->dtype == DType::kUint8;
  if (!quantized) {
    DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  }
  const int rank = input->rank();
  if (rank > kMaxRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) +
                               " are not supported (at most " + std::to_string(kMaxRank) + ")");
  }
  std::vector<int64_t> axes;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "axis", &axes));
  std::array<bool, kMaxRank> reduced{};
  for (int64_t a : axes) {
    int axis = 0;
    DFARM_RETURN_IF_ERROR(NormalizeAxis(a, rank, "axis", &axis));
    reduced[axis] = true;
  }
  const auto* options = node.options<tflite::ReducerOptions>();
  const bool keep_dims = options != nullptr && options->keep_dims();
  const bool axes_hw =
      axes.size() == 2 && ((axes[0] == 1 && axes[1] == 2) || (axes[0] == 2 && axes[1] == 1));

  auto data = std::make_unique<ReduceData>();
  data->mean_hw_4d = keep_dims && rank == 4 && axes_hw;
  data->in_dims.fill(1);
  std::vector<int32_t> computed;
  std::array<int64_t, kMaxRank> out_dims;
  out_dims.fill(1);
  for (int i = 0; i < rank; ++i) {
    const int d = kMaxRank - rank + i;
    data->in_dims[d] = input->shape[i];
    if (reduced[i]) {
      data->reduced_count *= input->shape[i];
      if (keep_dims) computed.push_back(1);
    } else {
      out_dims[d] = input->shape[i];
      computed.push_back(input->shape[i]);
    }
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  // [outer, rows, channels]: dims [0, first) kept, [first, rank - 1)
  // reduced, the last kept.
  int first = rank - 1;
  while (first > 0 && reduced[first - 1]) --first;
  data->columns = rank >= 2 && first < rank - 1 && !reduced[rank - 1] &&
                  std::none_of(reduced.begin(), reduced.begin() + first, [](bool r) { return r; });
  for (int i = 0; i < rank; ++i) {
    int64_t& part = i < first ? data->outer : i < rank - 1 ? data->rows : data->channels;
    part *= input->shape[i];
  }
  int64_t stride = 1;
  for (int d = kMaxRank - 1; d >= 0; --d) {
    const int i = d - (kMaxRank - rank);
    data->out_strides[d] = i >= 0 && reduced[i] ? 0 : stride;
    stride *= out_dims[d];
  }
  if (quantized) DFARM_RETURN_IF_ERROR(PrepareQuantized(node, data.get()));
  node.data = std::move(data);
  return Status::Ok();
}

enum class Kind { kSum, kMean, kMax };

// out[o * channels + c] = the sum over r of in[(o * rows + r) * channels + c],
// added in order of r from 0.0f, as Accumulate() adds them: eight channels
// a vector, four vectors (independent chains) at a time.
DFARM_KERNEL_CLONES void SumColumns(const float* in, int64_t outer, int64_t rows, int64_t channels,
                                    float* out) {
  for (int64_t o = 0; o < outer; ++o) {
    const float* base = in + o * rows * channels;
    float* dst = out + o * channels;
    int64_t c = 0;
    for (; c + 32 <= channels; c += 32) {
      Vec8 s0 = Splat8(0.0f), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t r = 0; r < rows; ++r) {
        const float* p = base + r * channels + c;
        s0 += Load8(p);
        s1 += Load8(p + 8);
        s2 += Load8(p + 16);
        s3 += Load8(p + 24);
      }
      Store8(dst + c, s0);
      Store8(dst + c + 8, s1);
      Store8(dst + c + 16, s2);
      Store8(dst + c + 24, s3);
    }
    for (; c + 8 <= channels; c += 8) {
      Vec8 s = Splat8(0.0f);
      for (int64_t r = 0; r < rows; ++r) s += Load8(base + r * channels + c);
      Store8(dst + c, s);
    }
    for (; c < channels; ++c) {
      float s = 0.0f;
      for (int64_t r = 0; r < rows; ++r) s += base[r * channels + c];
      dst[c] = s;
    }
  }
}

// acc[output index] = reduce(acc, in[i]) over the input; acc holds the init.
template <bool kMax, typename In, typename Acc>
void Accumulate(const ReduceData& d, const In* in, int64_t in_n, Acc* out) {
  // Odometer over the outer dims; the last dim is a tight loop.
  constexpr int kLast = kMaxRank - 1;
  const int64_t inner = d.in_dims[kLast];
  const int64_t inner_stride = d.out_strides[kLast];
  std::array<int64_t, kMaxRank> index{};
  int64_t out_offset = 0;
  for (int64_t o = 0; o < in_n; o += inner) {
    const In* px = in + o;
    Acc* acc = out + out_offset;
    for (int64_t i = 0; i < inner; ++i) {
      const Acc v = static_cast<Acc>(px[i]);
      if constexpr (kMax) {
        acc[i * inner_stride] = v > acc[i * inner_stride] ? v : acc[i * inner_stride];
      } else {
        acc[i * inner_stride] += v;
      }
    }
    for (int dim = kLast - 1; dim >= 0; --dim) {
      out_offset += d.out_strides[dim];
      if (++index[dim] < d.in_dims[dim]) break;
      out_offset -= d.out_strides[dim] * d.in_dims[dim];
      index[dim] = 0;
    }
  }
}

// A quantized MEAN from the int32 sums of the raw values, as TensorFlow Lite
// 2.9's builtin kernel (checked bit for bit in tests/tflite): a uint8 4-D
// mean over H and W kept as dims in fixed point, sum * (s_in / (count *
// s_out)) + mean_bias; otherwise, with the input's scale and zero point on
// the output, the integer mean (truncated; rounded for int8 over H,W);
// otherwise in float32, round(sum / count * scale + bias) + zp_out with
// scale = s_in / s_out and bias = -zp_in * scale; saturated.
template <typename T>
void MeanOfSums(const ReduceData& d, const int32_t* acc, int32_t count, const Tensor& input,
                const Tensor& output, T* out) {
  const int64_t out_n = output.num_elements();
  const int32_t in_zp = ZeroPoint(input), out_zp = ZeroPoint(output);
  const bool same = input.scale == output.scale && in_zp == out_zp;
  const float scale = input.scale / output.scale;
  const float bias = -static_cast<float>(in_zp) * scale;
  for (int64_t i = 0; i < out_n; ++i) {
    if (std::is_same_v<T, uint8_t> && d.mean_hw_4d) {
      const int32_t q = MultiplyByQuantizedMultiplier(acc[i], d.multiplier, d.shift) + d.mean_bias;
      out[i] = static_cast<T>(std::clamp<int32_t>(q, 0, 255));
      continue;
    }
    const float mean = static_cast<float>(acc[i]) / static_cast<float>(count);
    if (same && !d.mean_hw_4d) {
      out[i] = static_cast<T>(acc[i] / count);
      continue;
    }
    float r =
        same ? std::round(mean) : std::round(mean * scale + bias) + static_cast<float>(out_zp);
    r = std::min(r, static_cast<float>(std::numeric_limits<T>::max()));
    r = std::max(r, static_cast<float>(std::numeric_limits<T>::min()));
    out[i] = static_cast<T>(r);
  }
}

template <Kind kKind, typename T>
void EvalQuantized(ReduceData& d, const Tensor& input, Tensor& output) {
  const int64_t out_n = output.num_elements();
  T* out = output.data_as<T>();
  if (input.num_elements() == 0 && out_n > 0) {
    for (int64_t i = 0; i < out_n; ++i) out[i] = T();
    return;
  }
  if constexpr (kKind == Kind::kMax) {
    for (int64_t i = 0; i < out_n; ++i) out[i] = std::numeric_limits<T>::lowest();
    Accumulate<true>(d, input.data_as<T>(), input.num_elements(), out);
  } else {
    int32_t* acc = d.accumulators.data();
    for (int64_t i = 0; i < out_n; ++i) acc[i] = 0;
    Accumulate<false>(d, input.data_as<T>(), input.num_elements(), acc);
    const int32_t in_zp = ZeroPoint(input);
    const int32_t out_zp = ZeroPoint(output);
    const int32_t count = static_cast<int32_t>(d.reduced_count);
    if constexpr (kKind == Kind::kMean) {
      MeanOfSums(d, acc, count, input, output, out);
      return;
    }
    for (int64_t i = 0; i < out_n; ++i) {
      const int32_t shifted_sum = acc[i] - in_zp * count;
      const int32_t q = MultiplyByQuantizedMultiplier(shifted_sum, d.multiplier, d.shift) + out_zp;
      out[i] = static_cast<T>(
          std::clamp<int32_t>(q, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
    }
  }
}

template <Kind kKind>
Status Eval(Node& node) {
  ReduceData& d = *node.data_as<ReduceData>();
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  if (input.dtype == DType::kInt8) {
    EvalQuantized<kKind, int8_t>(d, input, output);
    return Status::Ok();
  }
  if (input.dtype == DType::kUint8) {
    EvalQuantized<kKind, uint8_t>(d, input, output);
    return Status::Ok();
  }
  float* out = output.data_as<float>();
  const int64_t out_n = output.num_elements();
  if (kKind != Kind::kMax && d.columns) {
    SumColumns(input.data_as<float>(), d.outer, d.rows, d.channels, out);
  } else {
    const float init = kKind == Kind::kMax ? std::numeric_limits<float>::lowest() : 0.0f;
    for (int64_t i = 0; i < out_n; ++i) out[i] = init;
    Accumulate<kKind == Kind::kMax>(d, input.data_as<float>(), input.num_elements(), out);
  }
  if constexpr (kKind == Kind::kMean) {
    const float count = static_cast<float>(d.reduced_count);
    for (int64_t i = 0; i < out_n; ++i) out[i] /= count;
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterMean() {
  static const OpRegistration registration = {&Prepare, &Eval<Kind::kMean>};
  return &registration;
}

const OpRegistration* RegisterSum() {
  static const OpRegistration registration = {&Prepare, &Eval<Kind::kSum>};
  return &registration;
}

const OpRegistration* RegisterReduceMax() {
  static const OpRegistration registration = {&Prepare, &Eval<Kind::kMax>};
  return &registration;
}

}  // namespace dfarm::runtime
