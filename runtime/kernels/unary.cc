// Elementwise unary ops, float32: HARD_SWISH (x * relu6(x + 3) / 6), LOGISTIC
// (1 / (1 + e^-x)), TANH, EXP, SQRT, RSQRT (1 / sqrt(x)), ABS, NEG and
// LEAKY_RELU (x >= 0 ? x : alpha * x, alpha from LeakyReluOptions).
// int8 and uint8 (per-tensor) for LOGISTIC and TANH (TFLite's 256-entry
// lookup table computed in float), LEAKY_RELU (two fixed-point multipliers)
// and HARD_SWISH (TFLite's int16 fixed-point arithmetic).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "runtime/kernels/kernel_clones.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quant_util.h"
#include "runtime/kernels/vec8.h"

namespace dfarm::runtime {
namespace {

struct UnaryData : OpData {
  float alpha = 0.0f;  // LEAKY_RELU
  // Quantized LOGISTIC, TANH: output value for each input byte.
  std::array<uint8_t, 256> table{};
  // Quantized LEAKY_RELU: identity (input >= 0) and alpha multipliers.
  int32_t identity_multiplier = 0, alpha_multiplier = 0;
  int identity_shift = 0, alpha_shift = 0;
  // Quantized HARD_SWISH (TFLite's HardSwishParams).
  int16_t output_multiplier_fixedpoint_int16 = 0, reluish_multiplier_fixedpoint_int16 = 0;
  int output_multiplier_exponent = 0, reluish_multiplier_exponent = 0;
};

// TFLite's lookup table: dequantize, transform in float, requantize.
template <typename T, typename F>
void PopulateLookupTable(const Tensor& input, const Tensor& output, F transform,
                         std::array<uint8_t, 256>* table) {
  const float inverse_scale = 1 / output.scale;
  const int32_t minval = std::numeric_limits<T>::min();
  const int32_t maxval = std::numeric_limits<T>::max();
  for (int32_t val = minval; val <= maxval; ++val) {
    const float dequantized = input.scale * static_cast<float>(val - ZeroPoint(input));
    const float transformed = transform(dequantized);
    const float rescaled = std::round(transformed * inverse_scale);
    const int32_t quantized =
        static_cast<int32_t>(rescaled + static_cast<float>(ZeroPoint(output)));
    (*table)[static_cast<uint8_t>(static_cast<T>(val))] =
        static_cast<uint8_t>(static_cast<T>(std::clamp(quantized, minval, maxval)));
  }
}

// TFLite's DownScaleInt32ToInt16Multiplier.
int16_t DownScaleInt32ToInt16Multiplier(int32_t multiplier) {
  constexpr int32_t kRoundingOffset = 1 << 15;
  if (multiplier >= std::numeric_limits<int32_t>::max() - kRoundingOffset) {
    return std::numeric_limits<int16_t>::max();
  }
  return static_cast<int16_t>((multiplier + kRoundingOffset) >> 16);
}

Status PrepareQuantized(Node& node, UnaryData* d) {
  using Op = tflite::BuiltinOperator;
  const Tensor& input = *node.inputs[0];
  const Tensor& output = *node.outputs[0];
  switch (node.code) {
    case Op::LOGISTIC:
    case Op::TANH:
    case Op::LEAKY_RELU:
    case Op::HARD_SWISH:
      break;
    default:
      return Status::Unsupported(std::string(DTypeName(input.dtype)) +
                                 " input is not supported (float32 only)");
  }
  DFARM_RETURN_IF_ERROR(CheckSameDType(&input, "input", &output, "output"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(output, "output"));
  const bool s8 = input.dtype == DType::kInt8;
  switch (node.code) {
    case Op::LOGISTIC: {
      auto f = [](float v) { return 1.0f / (1.0f + std::exp(-v)); };
      s8 ? PopulateLookupTable<int8_t>(input, output, f, &d->table)
         : PopulateLookupTable<uint8_t>(input, output, f, &d->table);
      return Status::Ok();
    }
    case Op::TANH: {
      auto f = [](float v) { return std::tanh(v); };
      s8 ? PopulateLookupTable<int8_t>(input, output, f, &d->table)
         : PopulateLookupTable<uint8_t>(input, output, f, &d->table);
      return Status::Ok();
    }
    case Op::LEAKY_RELU: {
      const double alpha = input.scale * d->alpha / output.scale;
      const double identity = input.scale / output.scale;
      QuantizeMultiplier(alpha, &d->alpha_multiplier, &d->alpha_shift);
      QuantizeMultiplier(identity, &d->identity_multiplier, &d->identity_shift);
      if (d->alpha_shift > 30 || d->identity_shift > 30) {
        return Status::Unsupported("requantization multiplier is too large");
      }
      return Status::Ok();
    }
    default: {  // HARD_SWISH
      const float hires_input_scale = (1.0f / 128.0f) * input.scale;
      const float reluish_scale = 3.0f / 32768.0f;
      const float output_multiplier = hires_input_scale / output.scale;
      int32_t m32 = 0;
      QuantizeMultiplier(output_multiplier, &m32, &d->output_multiplier_exponent);
      d->output_multiplier_fixedpoint_int16 = DownScaleInt32ToInt16Multiplier(m32);
      if (d->output_multiplier_exponent > 0 || d->output_multiplier_exponent < -15) {
        return Status::Unsupported("input scale / output scale " +
                                   std::to_string(input.scale / output.scale) +
                                   " is out of the supported range [2^-8, 128]");
      }
      const float reluish_multiplier = hires_input_scale / reluish_scale;
      QuantizeMultiplier(reluish_multiplier, &m32, &d->reluish_multiplier_exponent);
      d->reluish_multiplier_fixedpoint_int16 = DownScaleInt32ToInt16Multiplier(m32);
      if (d->reluish_multiplier_exponent > 15 || d->reluish_multiplier_exponent < -15) {
        return Status::Unsupported("input scale " + std::to_string(input.scale) +
                                   " is out of the supported range");
      }
      return Status::Ok();
    }
  }
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor* input = node.inputs[0];
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], input->shape));
  auto data = std::make_unique<UnaryData>();
  if (node.code == tflite::BuiltinOperator::LEAKY_RELU) {
    const auto* options = node.options<tflite::LeakyReluOptions>();
    if (options == nullptr) return Status::Error("LeakyReluOptions are missing");
    data->alpha = options->alpha();
  }
  if (input->dtype == DType::kInt8 || input->dtype == DType::kUint8) {
    DFARM_RETURN_IF_ERROR(PrepareQuantized(node, data.get()));
  } else {
    DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(node.outputs[0], "output"));
  }
  node.data = std::move(data);
  return Status::Ok();
}

// gemmlowp's int16 fixed-point primitives, as TFLite's HardSwish uses them.
int16_t SaturatingRoundingDoublingHighMul16(int16_t a, int16_t b) {
  const bool overflow = a == b && a == std::numeric_limits<int16_t>::min();
  const int32_t ab = static_cast<int32_t>(a) * static_cast<int32_t>(b);
  const int32_t nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
  const int16_t high = static_cast<int16_t>((ab + nudge) / (1 << 15));
  return overflow ? std::numeric_limits<int16_t>::max() : high;
}

int16_t SaturatingDoublingHighMul16(int16_t a, int16_t b) {
  const bool overflow = a == b && a == std::numeric_limits<int16_t>::min();
  const int32_t ab = static_cast<int32_t>(a) * static_cast<int32_t>(b);
  const int16_t high = static_cast<int16_t>(ab / (1 << 15));
  return overflow ? std::numeric_limits<int16_t>::max() : high;
}

int16_t SaturatingLeftShift16(int16_t value, int amount) {
  const int64_t result = static_cast<int64_t>(value) * (int64_t{1} << amount);
  return static_cast<int16_t>(std::clamp<int64_t>(result, std::numeric_limits<int16_t>::min(),
                                                  std::numeric_limits<int16_t>::max()));
}

int16_t RoundingDivideByPOT16(int16_t x, int exponent) {
  const int16_t mask = static_cast<int16_t>((1 << exponent) - 1);
  const int16_t remainder = static_cast<int16_t>(x & mask);
  const int16_t threshold = static_cast<int16_t>((mask >> 1) + (x < 0 ? 1 : 0));
  return static_cast<int16_t>((x >> exponent) + (remainder > threshold ? 1 : 0));
}

template <typename T>
T HardSwishQuantized(const UnaryData& d, int32_t in_zp, int32_t out_zp, T x) {
  const int16_t input_value = static_cast<int16_t>(x - in_zp);
  const int16_t input_value_on_hires_input_scale = static_cast<int16_t>(input_value * (1 << 7));
  const int16_t input_value_on_preshift_output_scale = SaturatingRoundingDoublingHighMul16(
      input_value_on_hires_input_scale, d.output_multiplier_fixedpoint_int16);
  int16_t reluish_value = input_value_on_hires_input_scale;
  if (d.reluish_multiplier_exponent > 0) {
    reluish_value = SaturatingLeftShift16(reluish_value, d.reluish_multiplier_exponent - 1);
  }
  reluish_value =
      SaturatingRoundingDoublingHighMul16(reluish_value, d.reluish_multiplier_fixedpoint_int16);
  if (d.reluish_multiplier_exponent > 0) {
    reluish_value = SaturatingLeftShift16(reluish_value, 1);
  }
  if (d.reluish_multiplier_exponent < 0) {
    reluish_value = RoundingDivideByPOT16(reluish_value, -d.reluish_multiplier_exponent);
  }
  reluish_value = static_cast<int16_t>((reluish_value + (1 << 15)) >> 1);
  const int16_t preshift_output_value =
      SaturatingDoublingHighMul16(reluish_value, input_value_on_preshift_output_scale);
  int32_t output_value =
      RoundingDivideByPOT16(preshift_output_value, -d.output_multiplier_exponent) + out_zp;
  return static_cast<T>(std::clamp<int32_t>(output_value, std::numeric_limits<T>::min(),
                                            std::numeric_limits<T>::max()));
}

template <typename T>
void EvalQuantized(tflite::BuiltinOperator code, const UnaryData& d, const Tensor& input,
                   Tensor& output) {
  const T* in = input.data_as<T>();
  T* out = output.data_as<T>();
  const int64_t n = input.num_elements();
  const int32_t in_zp = ZeroPoint(input);
  const int32_t out_zp = ZeroPoint(output);
  switch (code) {
    case tflite::BuiltinOperator::LEAKY_RELU:
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = static_cast<int32_t>(in[i]) - in_zp;
        const int32_t q =
            out_zp +
            (v >= 0 ? MultiplyByQuantizedMultiplier(v, d.identity_multiplier, d.identity_shift)
                    : MultiplyByQuantizedMultiplier(v, d.alpha_multiplier, d.alpha_shift));
        out[i] = static_cast<T>(
            std::clamp<int32_t>(q, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
      }
      break;
    case tflite::BuiltinOperator::HARD_SWISH:
      for (int64_t i = 0; i < n; ++i) out[i] = HardSwishQuantized<T>(d, in_zp, out_zp, in[i]);
      break;
    default:  // table lookup
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<T>(d.table[static_cast<uint8_t>(in[i])]);
      }
      break;
  }
}

struct HardSwishOp {
  static float Apply(float x, float) { return x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
};
struct TanhOp {
  static float Apply(float x, float) { return std::tanh(x); }
};
struct ExpOp {
  static float Apply(float x, float) { return std::exp(x); }
};
struct SqrtOp {
  static float Apply(float x, float) { return std::sqrt(x); }
};
struct RsqrtOp {
  static float Apply(float x, float) { return 1.0f / std::sqrt(x); }
};
struct AbsOp {
  static float Apply(float x, float) { return std::fabs(x); }
};
struct NegOp {
  static float Apply(float x, float) { return -x; }
};
struct LeakyReluOp {
  static float Apply(float x, float alpha) { return x >= 0.0f ? x : alpha * x; }
};

// The float loop of each op, compiled once per target clone
// (kernel_clones.h): the build targets baseline x86-64, whose loops GCC
// vectorizes 4 floats wide; a clone for AVX2 and FMA where the CPU has them
// (HARD_SWISH's division 8 wide, LOGISTIC's polynomial in FMAs).
#define DFARM_UNARY_LOOP(Name)                                                        \
  DFARM_KERNEL_CLONES void Name##Loop(const float* __restrict x, float* __restrict y, \
                                      int64_t begin, int64_t end, float alpha) {      \
    for (int64_t i = begin; i < end; ++i) y[i] = Name##Op::Apply(x[i], alpha);        \
  }
DFARM_UNARY_LOOP(HardSwish)
DFARM_UNARY_LOOP(Tanh)
DFARM_UNARY_LOOP(Exp)
DFARM_UNARY_LOOP(Sqrt)
DFARM_UNARY_LOOP(Rsqrt)
DFARM_UNARY_LOOP(Abs)
DFARM_UNARY_LOOP(Neg)
DFARM_UNARY_LOOP(LeakyRelu)
#undef DFARM_UNARY_LOOP

// 1 / (1 + e^-x) per lane without a call: e^t by Cody and Waite's reduction
// t = n ln 2 + r (|r| <= ln 2 / 2), Cephes' polynomial of e^r and 2^n from
// its exponent bits. Within 2 units in the last place over the whole float
// range (unary_test checks it against double precision). t is held in
// [-87, 88], where 2^n is a normal float; past 88 (x below -88, where
// e^x < 7e-39) the result is 0, and NaN stays NaN.
DFARM_KERNEL_INLINE Vec8 Logistic8(Vec8 x) {
  const Vec8i nan = x != x;
  Vec8 t = nan ? Splat8(0.0f) : -x;
  const Vec8i tiny = t > Splat8(88.0f);
  t = tiny ? Splat8(88.0f) : t;
  t = t < Splat8(-87.0f) ? Splat8(-87.0f) : t;
  // n = round(t / ln 2): adding 1.5 * 2^23 rounds to an integer.
  const Vec8 round = Splat8(12582912.0f);
  const Vec8 n = (t * Splat8(1.44269504088896341f) + round) - round;
  const Vec8 r = (t - n * Splat8(0.693359375f)) - n * Splat8(-2.12194440e-4f);
  Vec8 p = Splat8(1.9875691500e-4f);
  p = p * r + Splat8(1.3981999507e-3f);
  p = p * r + Splat8(8.3334519073e-3f);
  p = p * r + Splat8(4.1665795894e-2f);
  p = p * r + Splat8(1.6666665459e-1f);
  p = p * r + Splat8(5.0000001201e-1f);
  const Vec8i exponent = (__builtin_convertvector(n, Vec8i) + 127) << 23;
  const Vec8 e = (p * (r * r) + r + Splat8(1.0f)) * std::bit_cast<Vec8>(exponent);
  const Vec8 y = Splat8(1.0f) / (Splat8(1.0f) + e);
  return nan ? x : tiny ? Splat8(0.0f) : y;
}

// LOGISTIC's loop: eight floats at a time, the last few through a zeroed
// vector (the same lanes' arithmetic).
DFARM_KERNEL_CLONES void LogisticLoop(const float* __restrict x, float* __restrict y, int64_t begin,
                                      int64_t end, float) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    Store8(y + i, Logistic8(Load8(x + i)));
  }
  if (i < end) {
    Vec8 v = Splat8(0.0f);
    const size_t bytes = static_cast<size_t>(end - i) * sizeof(float);
    std::memcpy(&v, x + i, bytes);
    v = Logistic8(v);
    std::memcpy(y + i, &v, bytes);
  }
}

using UnaryLoop = void (*)(const float*, float*, int64_t, int64_t, float);

template <UnaryLoop kLoop>
Status Eval(Node& node) {
  const UnaryData& d = *node.data_as<UnaryData>();
  if (node.inputs[0]->dtype == DType::kInt8) {
    EvalQuantized<int8_t>(node.code, d, *node.inputs[0], *node.outputs[0]);
    return Status::Ok();
  }
  if (node.inputs[0]->dtype == DType::kUint8) {
    EvalQuantized<uint8_t>(node.code, d, *node.inputs[0], *node.outputs[0]);
    return Status::Ok();
  }
  const float alpha = d.alpha;
  const float* in = node.inputs[0]->data_as<float>();
  float* out = node.outputs[0]->data_as<float>();
  // Elements are independent: contiguous ranges across the threads.
  ParallelRanges(
      node, node.inputs[0]->num_elements(), kMinParallelElements,
      [in, out, alpha](int64_t begin, int64_t end) { kLoop(in, out, begin, end, alpha); });
  return Status::Ok();
}

}  // namespace

#define DFARM_UNARY_REGISTRATION(Name)                                         \
  const OpRegistration* Register##Name() {                                     \
    static const OpRegistration registration = {&Prepare, &Eval<&Name##Loop>}; \
    return &registration;                                                      \
  }
DFARM_UNARY_REGISTRATION(HardSwish)
DFARM_UNARY_REGISTRATION(Logistic)
DFARM_UNARY_REGISTRATION(Tanh)
DFARM_UNARY_REGISTRATION(Exp)
DFARM_UNARY_REGISTRATION(Sqrt)
DFARM_UNARY_REGISTRATION(Rsqrt)
DFARM_UNARY_REGISTRATION(Abs)
DFARM_UNARY_REGISTRATION(Neg)
DFARM_UNARY_REGISTRATION(LeakyRelu)
#undef DFARM_UNARY_REGISTRATION

}  // namespace dfarm::runtime
