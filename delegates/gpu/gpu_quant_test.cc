#include "delegates/gpu/gpu_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace dfarm::delegates::gpu {
namespace {

using runtime::Allocation;
using runtime::DType;
using runtime::Tensor;

Tensor Quantized(DType dtype, std::vector<int32_t> shape, float scale, int64_t zero_point,
                 void* data, Allocation allocation = Allocation::kArena) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.quantized = true;
  t.scale = scale;
  t.zero_point = zero_point;
  t.data = static_cast<std::byte*>(data);
  t.allocation = allocation;
  return t;
}

TEST(GpuQuantTest, TakesPerTensorActivationsAndPerChannelConstantsOnly) {
  int8_t codes[4] = {};
  Tensor act = Quantized(DType::kInt8, {4}, 0.5f, 1, codes);
  EXPECT_TRUE(IsGpuQuantized(act));
  act.per_channel_quantized = true;  // a run-time tensor per channel
  EXPECT_FALSE(IsGpuQuantized(act));
  Tensor wide = Quantized(DType::kInt16, {4}, 0.5f, 0, codes);
  EXPECT_FALSE(IsGpuQuantized(wide));
  Tensor no_scale = Quantized(DType::kUint8, {4}, 0.0f, 0, codes);
  EXPECT_FALSE(IsGpuQuantized(no_scale));
  Tensor bias = Quantized(DType::kInt32, {1}, 0.01f, 0, codes, Allocation::kConstant);
  EXPECT_TRUE(IsGpuQuantized(bias));
  bias.allocation = Allocation::kArena;  // int32 only as a constant
  EXPECT_FALSE(IsGpuQuantized(bias));
  Tensor filter = Quantized(DType::kInt8, {2, 2}, 0.1f, 0, codes, Allocation::kConstant);
  filter.per_channel_quantized = true;
  filter.quantized_dimension = 1;
  filter.scales = {0.1f, 0.2f};
  filter.zero_points = {0, 0};
  EXPECT_TRUE(IsGpuQuantized(filter));
  filter.scales = {0.1f};  // one scale for two channels
  filter.zero_points = {0};
  EXPECT_FALSE(IsGpuQuantized(filter));
}

TEST(GpuQuantTest, RealValuesDequantizeEachChannelWithItsScale) {
  int8_t codes[6] = {1, 2, 3, -1, -2, -3};
  Tensor filter = Quantized(DType::kInt8, {2, 3}, 0.5f, 0, codes, Allocation::kConstant);
  filter.per_channel_quantized = true;
  filter.quantized_dimension = 1;  // channels along the last dimension
  filter.scales = {0.5f, 0.25f, 2.0f};
  filter.zero_points = {0, 1, 0};
  EXPECT_EQ(RealValues(filter), (std::vector<float>{0.5f, 0.25f, 6.0f, -0.5f, -0.75f, -6.0f}));
  uint8_t u[2] = {130, 120};
  Tensor t = Quantized(DType::kUint8, {2}, 0.1f, 128, u, Allocation::kConstant);
  std::vector<float> real = RealValues(t);
  EXPECT_FLOAT_EQ(real[0], 0.2f);
  EXPECT_FLOAT_EQ(real[1], -0.8f);
}

TEST(GpuQuantTest, QuantizeRoundsHalfAwayFromZeroAndSaturates) {
  int8_t codes[6] = {};
  Tensor t = Quantized(DType::kInt8, {6}, 0.5f, -1, codes);
  const float real[6] = {0.25f,   -0.25f,   0.74f,
                         1000.0f, -1000.0f, std::numeric_limits<float>::quiet_NaN()};
  Quantize(real, &t);
  // 0.25 / 0.5 = 0.5 -> 1; -0.5 -> -1; 1.48 -> 1; saturated; NaN -> the zero point.
  EXPECT_EQ(std::vector<int>(codes, codes + 6), (std::vector<int>{0, -2, 0, 127, -128, -1}));
  float back[6];
  Dequantize(t, back);
  EXPECT_FLOAT_EQ(back[0], 0.5f);
  EXPECT_FLOAT_EQ(back[3], 64.0f);
  EXPECT_FLOAT_EQ(back[5], 0.0f);
}

}  // namespace
}  // namespace dfarm::delegates::gpu
