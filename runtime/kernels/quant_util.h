// Fixed-point helpers of TensorFlow Lite's quantized arithmetic, bit for bit
// as TFLite computes them (tensorflow/lite/kernels/internal/common.h and
// quantization_util.cc, the default build without TFLITE_SINGLE_ROUNDING), so
// that quantized kernels agree with TFLite to the last bit.
//
// A real multiplier M > 0 is held as a Q31 `quantized_multiplier` in
// [2^30, 2^31) and a power-of-two `shift`: M = quantized_multiplier * 2^(shift - 31).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/kernels/kernel.h"

namespace dfarm::runtime {

// Splits `double_multiplier` (>= 0) into a Q31 multiplier and a shift. Zero
// gives (0, 0); a multiplier below 2^-32 rounds to (0, 0) as in TFLite.
// Callers that use the result with MultiplyByQuantizedMultiplier() must keep
// the multiplier below 2^31 (shift <= 31); kernels check that in Prepare().
void QuantizeMultiplier(double double_multiplier, int32_t* quantized_multiplier, int* shift);

// QuantizeMultiplier() for a multiplier in (0, 1): `left_shift` <= 0. False
// (and nothing written) when the multiplier is outside (0, 1).
bool QuantizeMultiplierSmallerThanOneExp(double double_multiplier, int32_t* quantized_multiplier,
                                         int* left_shift);

// gemmlowp's SaturatingRoundingDoublingHighMul: round(a * b / 2^31),
// saturating the one overflow case (INT32_MIN * INT32_MIN).
inline int32_t SaturatingRoundingDoublingHighMul(int32_t a, int32_t b) {
  const bool overflow = a == b && a == std::numeric_limits<int32_t>::min();
  const int64_t ab = static_cast<int64_t>(a) * static_cast<int64_t>(b);
  const int32_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
  const int32_t ab_x2_high32 = static_cast<int32_t>((ab + nudge) / (1LL << 31));
  return overflow ? std::numeric_limits<int32_t>::max() : ab_x2_high32;
}

// gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away
// from zero; exponent in [0, 31].
inline int32_t RoundingDivideByPOT(int32_t x, int exponent) {
  const int32_t mask = static_cast<int32_t>((1LL << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

// x * M, M given by QuantizeMultiplier(): a left shift by max(shift, 0), the
// doubling high multiply, then a rounding right shift by max(-shift, 0).
// The left shift wraps like TFLite's int32 arithmetic. Inline (with the two
// above): kernels requantize every output with it.
inline int32_t MultiplyByQuantizedMultiplier(int32_t x, int32_t quantized_multiplier, int shift) {
  const int left_shift = shift > 0 ? shift : 0;
  const int right_shift = shift > 0 ? 0 : -shift;
  const int32_t shifted = static_cast<int32_t>(static_cast<uint32_t>(x) << left_shift);
  return RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(shifted, quantized_multiplier),
                             right_shift);
}

// MultiplyByQuantizedMultiplier() as TFLite's optimized GEMM computes it
// (ruy's x86-64 AVX-or-above and arm64 kernels, which TFLite 2.9 runs for
// quantized CONV_2D, FULLY_CONNECTED and BATCH_MATMUL): the same left shift and doubling
// high multiply (whose halves already round upward), but the rounding right
// shift takes halves upward (toward +infinity) instead of away from zero.
// Differs by one only where that shift meets a negative exact half.
inline int32_t MultiplyByQuantizedMultiplierHalfUp(int32_t x, int32_t quantized_multiplier,
                                                   int shift) {
  const int left_shift = shift > 0 ? shift : 0;
  const int right_shift = shift > 0 ? 0 : -shift;
  const int32_t shifted = static_cast<int32_t>(static_cast<uint32_t>(x) << left_shift);
  const int32_t high = SaturatingRoundingDoublingHighMul(shifted, quantized_multiplier);
  if (right_shift == 0) return high;
  // In 64 bits, so that adding the half cannot overflow.
  return static_cast<int32_t>((static_cast<int64_t>(high) + (int64_t{1} << (right_shift - 1))) >>
                              right_shift);
}

// TFLite's variant for a multiplier below one (left_shift <= 0), used by
// ADD/SUB: RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, m), -left_shift).
inline int32_t MultiplyByQuantizedMultiplierSmallerThanOneExp(int32_t x,
                                                              int32_t quantized_multiplier,
                                                              int left_shift) {
  return RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, quantized_multiplier),
                             -left_shift);
}

// The representable range of a quantized dtype: int8 [-128, 127], uint8
// [0, 255], int16 [-32768, 32767]; false for other dtypes.
bool QuantizedRange(DType dtype, int32_t* min_out, int32_t* max_out);

// The clamp bounds, in `output`'s quantized values, of a fused activation
// (NONE, RELU, RELU6, RELU_N1_TO_1), as TFLite computes them:
// zero_point + round(bound / scale), intersected with the dtype's range.
// Unsupported for other activations or a non-quantized dtype.
Status CalculateActivationRangeQuantized(tflite::ActivationFunctionType activation,
                                         const Tensor& output, int32_t* min_out, int32_t* max_out);

// TFLite's affine quantization of one value: clamp(round(value / scale) +
// zero_point) to T's range (round: half away from zero, in float as TFLite).
template <typename T>
T QuantizeValue(float value, float scale, int32_t zero_point) {
  const float scaled = std::round(value / scale);
  // Out-of-range (and NaN) values saturate before the int conversion.
  constexpr float kLimit = 2147483520.0f;  // largest float below 2^31
  const int32_t rounded = scaled >= kLimit     ? std::numeric_limits<int32_t>::max()
                          : scaled <= -kLimit  ? std::numeric_limits<int32_t>::min()
                          : std::isnan(scaled) ? 0
                                               : static_cast<int32_t>(scaled);
  const int64_t q = static_cast<int64_t>(rounded) + zero_point;
  return static_cast<T>(
      std::clamp<int64_t>(q, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
}

// real = scale * (q - zero_point).
inline float DequantizeValue(int32_t q, float scale, int32_t zero_point) {
  return scale * static_cast<float>(q - zero_point);
}

// The tensor's per-tensor zero point as int32 (kernels check its range).
inline int32_t ZeroPoint(const Tensor& tensor) { return static_cast<int32_t>(tensor.zero_point); }

// `tensor` (`role`, e.g. "input 0") is int8 or uint8 with per-tensor
// quantization, a finite positive scale and a zero point in the dtype's
// range; Error naming the role otherwise (Unsupported for per-channel).
Status CheckQuantizedPerTensor(const Tensor& tensor, const char* role);

}  // namespace dfarm::runtime
