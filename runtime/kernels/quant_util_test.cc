#include "runtime/kernels/quant_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace dfarm::runtime {
namespace {

constexpr int32_t kHalfQ31 = 1 << 30;  // 0.5 in Q31

TEST(QuantizeMultiplierTest, SplitsIntoQ31AndShift) {
  int32_t m = -1;
  int shift = -1;
  QuantizeMultiplier(0.5, &m, &shift);
  EXPECT_EQ(m, kHalfQ31);
  EXPECT_EQ(shift, 0);
  QuantizeMultiplier(1.0, &m, &shift);  // 0.5 * 2^1
  EXPECT_EQ(m, kHalfQ31);
  EXPECT_EQ(shift, 1);
  QuantizeMultiplier(0.75, &m, &shift);  // 0.75 * 2^31
  EXPECT_EQ(m, 1610612736);
  EXPECT_EQ(shift, 0);
  QuantizeMultiplier(0.1, &m, &shift);  // 0.8 * 2^-3; round(0.8 * 2^31) = round(1717986918.4)
  EXPECT_EQ(m, 1717986918);
  EXPECT_EQ(shift, -3);
  QuantizeMultiplier(3.0, &m, &shift);  // 0.75 * 2^2
  EXPECT_EQ(m, 1610612736);
  EXPECT_EQ(shift, 2);
}

TEST(QuantizeMultiplierTest, RoundingUpToTwoToThe31Renormalizes) {
  int32_t m = 0;
  int shift = 0;
  // 1 - 2^-33: fraction * 2^31 = 2^31 - 0.25 rounds to 2^31, kept as 2^30 with shift + 1.
  QuantizeMultiplier(1.0 - std::ldexp(1.0, -33), &m, &shift);
  EXPECT_EQ(m, kHalfQ31);
  EXPECT_EQ(shift, 1);
}

TEST(QuantizeMultiplierTest, ZeroAndTinyMultipliersAreZero) {
  int32_t m = 7;
  int shift = 7;
  QuantizeMultiplier(0.0, &m, &shift);
  EXPECT_EQ(m, 0);
  EXPECT_EQ(shift, 0);
  m = 7;
  shift = 7;
  QuantizeMultiplier(1e-10, &m, &shift);  // 0.86 * 2^-33: shift below -31
  EXPECT_EQ(m, 0);
  EXPECT_EQ(shift, 0);
}

TEST(QuantizeMultiplierTest, SmallerThanOneExpRefusesOutOfRange) {
  int32_t m = 0;
  int left_shift = 5;
  ASSERT_TRUE(QuantizeMultiplierSmallerThanOneExp(0.25, &m, &left_shift));
  EXPECT_EQ(m, kHalfQ31);
  EXPECT_EQ(left_shift, -1);
  EXPECT_FALSE(QuantizeMultiplierSmallerThanOneExp(1.0, &m, &left_shift));
  EXPECT_FALSE(QuantizeMultiplierSmallerThanOneExp(0.0, &m, &left_shift));
  EXPECT_FALSE(QuantizeMultiplierSmallerThanOneExp(-0.5, &m, &left_shift));
}

TEST(FixedPointTest, SaturatingRoundingDoublingHighMul) {
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(kHalfQ31, kHalfQ31), 1 << 29);  // 2^60 / 2^31
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(3, kHalfQ31), 2);               // 1.5 rounds up
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(-3, kHalfQ31), -1);             // -1.5 rounds up too
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(-5, kHalfQ31), -2);             // -2.5 -> -2
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(100, 0), 0);
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(kMin, kMin), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(SaturatingRoundingDoublingHighMul(kMin, kHalfQ31), -(1 << 30));
}

TEST(FixedPointTest, RoundingDivideByPOTRoundsHalfAwayFromZero) {
  EXPECT_EQ(RoundingDivideByPOT(5, 1), 3);    // 2.5
  EXPECT_EQ(RoundingDivideByPOT(-5, 1), -3);  // -2.5
  EXPECT_EQ(RoundingDivideByPOT(4, 1), 2);
  EXPECT_EQ(RoundingDivideByPOT(7, 2), 2);    // 1.75
  EXPECT_EQ(RoundingDivideByPOT(-6, 2), -2);  // -1.5
  EXPECT_EQ(RoundingDivideByPOT(-5, 2), -1);  // -1.25
  EXPECT_EQ(RoundingDivideByPOT(123, 0), 123);
}

TEST(FixedPointTest, MultiplyByQuantizedMultiplier) {
  EXPECT_EQ(MultiplyByQuantizedMultiplier(100, kHalfQ31, 0), 50);
  EXPECT_EQ(MultiplyByQuantizedMultiplier(100, 1610612736, 0), 75);
  EXPECT_EQ(MultiplyByQuantizedMultiplier(-100, 1610612736, 0), -75);
  EXPECT_EQ(MultiplyByQuantizedMultiplier(10, kHalfQ31, 2), 20);  // M = 2
  // M = 0.25: 5 * 0.5 = 2.5 -> 3, then 3 / 2 = 1.5 -> 2 (TFLite's double rounding, not
  // round(1.25)).
  EXPECT_EQ(MultiplyByQuantizedMultiplier(5, kHalfQ31, -1), 2);
  EXPECT_EQ(MultiplyByQuantizedMultiplierSmallerThanOneExp(5, kHalfQ31, -1), 2);
  EXPECT_EQ(MultiplyByQuantizedMultiplier(3, kHalfQ31, -1), 1);  // 1.5 -> 2, 2 / 2 = 1
}

// TFLite's optimized GEMM (ruy) takes the last step's halves upward: negative
// ties of the rounding shift differ from MultiplyByQuantizedMultiplier() by one,
// nothing else does.
TEST(FixedPointTest, MultiplyByQuantizedMultiplierHalfUp) {
  EXPECT_EQ(MultiplyByQuantizedMultiplierHalfUp(100, 1610612736, 0), 75);
  EXPECT_EQ(MultiplyByQuantizedMultiplierHalfUp(10, kHalfQ31, 2), 20);
  EXPECT_EQ(MultiplyByQuantizedMultiplierHalfUp(5, kHalfQ31, -1), 2);    // 2.5 -> 3, 1.5 -> 2
  EXPECT_EQ(MultiplyByQuantizedMultiplierHalfUp(-3, kHalfQ31, 0), -1);   // -1.5 -> -1 in both
  EXPECT_EQ(MultiplyByQuantizedMultiplierHalfUp(-6, kHalfQ31, -1), -1);  // -3, -1.5 -> -1
  EXPECT_EQ(MultiplyByQuantizedMultiplier(-6, kHalfQ31, -1), -2);        // -3, -1.5 -> -2
  EXPECT_EQ(MultiplyByQuantizedMultiplierHalfUp(-12, kHalfQ31, -2), -1);
  EXPECT_EQ(MultiplyByQuantizedMultiplier(-12, kHalfQ31, -2), -2);
  int32_t m = 0;
  int shift = 0;
  QuantizeMultiplier(0.75 / 256, &m, &shift);  // shift -8: a tie every 256 products
  ASSERT_EQ(shift, -8);
  int ties = 0;
  for (int32_t x = -5000; x <= 5000; ++x) {
    const int32_t high = SaturatingRoundingDoublingHighMul(x, m);
    const bool tie = high < 0 && (high & 255) == 128;
    ties += tie;
    EXPECT_EQ(MultiplyByQuantizedMultiplierHalfUp(x, m, shift),
              MultiplyByQuantizedMultiplier(x, m, shift) + (tie ? 1 : 0))
        << x;
  }
  EXPECT_GT(ties, 10);
}

TEST(FixedPointTest, QuantizedMultiplierMatchesRealMultiplication) {
  int32_t m = 0;
  int shift = 0;
  QuantizeMultiplier(0.0123, &m, &shift);
  for (int32_t x : {-100000, -777, -1, 0, 1, 999, 123456}) {
    const double expected = x * 0.0123;
    EXPECT_NEAR(MultiplyByQuantizedMultiplier(x, m, shift), expected, 0.5 + 1e-6) << x;
  }
}

Tensor QuantTensor(DType dtype, float scale, int64_t zero_point) {
  Tensor t;
  t.dtype = dtype;
  t.quantized = true;
  t.scale = scale;
  t.zero_point = zero_point;
  return t;
}

TEST(ActivationRangeTest, QuantizedBounds) {
  int32_t lo = 0;
  int32_t hi = 0;
  using A = tflite::ActivationFunctionType;
  const Tensor s8 = QuantTensor(DType::kInt8, 0.05f, -10);
  ASSERT_TRUE(CalculateActivationRangeQuantized(A::NONE, s8, &lo, &hi).ok());
  EXPECT_EQ(lo, -128);
  EXPECT_EQ(hi, 127);
  ASSERT_TRUE(CalculateActivationRangeQuantized(A::RELU, s8, &lo, &hi).ok());
  EXPECT_EQ(lo, -10);
  EXPECT_EQ(hi, 127);
  ASSERT_TRUE(CalculateActivationRangeQuantized(A::RELU6, s8, &lo, &hi).ok());
  EXPECT_EQ(lo, -10);
  EXPECT_EQ(hi, 110);  // -10 + 6 / 0.05
  ASSERT_TRUE(CalculateActivationRangeQuantized(A::RELU_N1_TO_1, s8, &lo, &hi).ok());
  EXPECT_EQ(lo, -30);
  EXPECT_EQ(hi, 10);
  const Tensor u8 = QuantTensor(DType::kUint8, 0.01f, 0);
  ASSERT_TRUE(CalculateActivationRangeQuantized(A::RELU6, u8, &lo, &hi).ok());
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 255);  // 6 / 0.01 = 600, clamped to the dtype
  Status tanh = CalculateActivationRangeQuantized(A::TANH, s8, &lo, &hi);
  EXPECT_EQ(tanh.code(), StatusCode::kUnsupported);
  EXPECT_NE(tanh.message().find("TANH"), std::string::npos);
  Tensor f = QuantTensor(DType::kFloat32, 1.0f, 0);
  EXPECT_EQ(CalculateActivationRangeQuantized(A::NONE, f, &lo, &hi).code(),
            StatusCode::kUnsupported);
}

TEST(QuantizeValueTest, RoundsHalfAwayFromZeroAndSaturates) {
  EXPECT_EQ(QuantizeValue<int8_t>(1.25f, 0.5f, 3), 6);    // 2.5 -> 3, + 3
  EXPECT_EQ(QuantizeValue<int8_t>(-1.25f, 0.5f, 0), -3);  // -2.5 -> -3
  EXPECT_EQ(QuantizeValue<int8_t>(100.0f, 0.5f, 0), 127);
  EXPECT_EQ(QuantizeValue<int8_t>(-100.0f, 0.5f, 0), -128);
  EXPECT_EQ(QuantizeValue<uint8_t>(-1.0f, 0.5f, 10), 8);
  EXPECT_EQ(QuantizeValue<uint8_t>(-10.0f, 0.5f, 10), 0);
  EXPECT_EQ(QuantizeValue<uint8_t>(1e30f, 1e-3f, 10), 255);
  EXPECT_EQ(QuantizeValue<uint8_t>(std::nanf(""), 1.0f, 10), 10);
  EXPECT_FLOAT_EQ(DequantizeValue(6, 0.5f, 3), 1.5f);
  EXPECT_FLOAT_EQ(DequantizeValue(0, 0.25f, 128), -32.0f);
}

TEST(CheckQuantizedPerTensorTest, NamesTheFault) {
  EXPECT_TRUE(CheckQuantizedPerTensor(QuantTensor(DType::kInt8, 0.1f, 5), "input 0").ok());
  Status zp = CheckQuantizedPerTensor(QuantTensor(DType::kInt8, 0.1f, 200), "input 1");
  EXPECT_EQ(zp.code(), StatusCode::kError);
  EXPECT_NE(zp.message().find("input 1 has zero point 200"), std::string::npos);
  Status scale = CheckQuantizedPerTensor(QuantTensor(DType::kUint8, 0.0f, 0), "output");
  EXPECT_NE(scale.message().find("output has scale"), std::string::npos);
  Tensor none = QuantTensor(DType::kInt8, 0.1f, 0);
  none.quantized = false;
  EXPECT_NE(CheckQuantizedPerTensor(none, "output").message().find("no quantization"),
            std::string::npos);
}

}  // namespace
}  // namespace dfarm::runtime
