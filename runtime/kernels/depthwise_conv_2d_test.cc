#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <numeric>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

std::vector<float> RunDepthwise(std::vector<int32_t> in_shape, const std::vector<float>& input,
                                std::vector<int32_t> filter_shape, const std::vector<float>& filter,
                                const std::vector<float>& bias, std::vector<int32_t> out_shape,
                                const DepthwiseConv2DParams& p) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
  int f = b.AddConstFloat32(filter_shape, filter);
  int bi = bias.empty() ? -1 : b.AddConstFloat32({static_cast<int32_t>(bias.size())}, bias);
  int out = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddDepthwiseConv2D(in, f, bi, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  EXPECT_TRUE(runner.SetInput(0, input));
  EXPECT_TRUE(runner.Invoke().ok());
  return runner.Output(0);
}

TEST(DepthwiseConv2DTest, DepthMultiplier2) {
  // Output channel c*2+m reads input channel c.
  DepthwiseConv2DParams p;
  p.depth_multiplier = 2;
  EXPECT_THAT(RunDepthwise({1, 1, 1, 2}, {1, 2}, {1, 1, 1, 4}, {10, 20, 30, 40}, {1, 1, 1, 1},
                           {1, 1, 1, 4}, p),
              ElementsAre(11.0f, 21.0f, 61.0f, 81.0f));
}

TEST(DepthwiseConv2DTest, SameStride2PerChannel) {
  // Channel 0: 1..16, channel 1: 10x that; 3x3 ones, stride 2, pad_before 0.
  std::vector<float> input;
  for (int i = 1; i <= 16; ++i) {
    input.push_back(static_cast<float>(i));
    input.push_back(static_cast<float>(10 * i));
  }
  DepthwiseConv2DParams p;
  p.padding = tfl::Padding::SAME;
  p.stride_h = p.stride_w = 2;
  EXPECT_THAT(RunDepthwise({1, 4, 4, 2}, input, {1, 3, 3, 2}, std::vector<float>(18, 1.0f), {},
                           {1, 2, 2, 2}, p),
              Pointwise(FloatNear(1e-4), {54, 540, 45, 450, 72, 720, 54, 540}));
}

TEST(DepthwiseConv2DTest, DilationAndRelu) {
  std::vector<float> input(9);
  std::iota(input.begin(), input.end(), 1.0f);
  DepthwiseConv2DParams p;
  p.dilation_h = p.dilation_w = 2;
  // Taps at (0,0),(0,2),(2,0),(2,2): 1*1 + 3*(-1) + 7*(-1) + 9*0 = -9.
  EXPECT_THAT(RunDepthwise({1, 3, 3, 1}, input, {1, 2, 2, 1}, {1, -1, -1, 0}, {}, {1, 1, 1, 1}, p),
              ElementsAre(-9.0f));
  p.activation = tfl::ActivationFunctionType::RELU;
  EXPECT_THAT(RunDepthwise({1, 3, 3, 1}, input, {1, 2, 2, 1}, {1, -1, -1, 0}, {}, {1, 1, 1, 1}, p),
              ElementsAre(0.0f));
}

TEST(DepthwiseConv2DTest, DilationThatOverflowsTheEffectiveFilterIsRefused) {
  // (3 - 1) * (2^31 - 1) + 1 wrapped to -1 in int, and SAME "fit" [1,4,4,1].
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1});
  int f = b.AddConstFloat32({1, 3, 3, 1}, std::vector<float>(9, 1.0f));
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1});
  DepthwiseConv2DParams p;
  p.padding = tfl::Padding::SAME;
  p.dilation_w = 2147483647;
  b.AddDepthwiseConv2D(in, f, -1, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(),
              HasSubstr("node 0 (DEPTHWISE_CONV_2D): dilation_w_factor 2147483647 makes the "
                        "effective filter width overflow"));
}

TEST(DepthwiseConv2DTest, StrideOfInt32MaxIsOneWindow) {
  DepthwiseConv2DParams p;
  p.stride_w = 2147483647;
  EXPECT_THAT(RunDepthwise({1, 1, 4, 1}, {1, 2, 3, 4}, {1, 1, 2, 1}, {1, 10}, {}, {1, 1, 1, 1}, p),
              ElementsAre(21.0f));
}

// The same on the 3x3 float path with SAME padding (pad 1): its interior range
// added the pad to the stride in 32 bits (UBSan: signed overflow; the
// model_options fuzzer's seeds/model_options/depthwise_3x3_stride_overflow).
TEST(DepthwiseConv2DTest, Padded3x3WithAStrideOfInt32MaxIsTheCentreTap) {
  DepthwiseConv2DParams p;
  p.padding = tfl::Padding::SAME;
  p.stride_h = 2;
  p.stride_w = 2147483647;
  std::vector<float> filter(9, 1.0f);
  filter[4] = 10.0f;  // the centre tap: the only one inside a 1x1 input
  EXPECT_THAT(RunDepthwise({4, 1, 1, 1}, {1, 2, 3, 4}, {1, 3, 3, 1}, filter, {}, {4, 1, 1, 1}, p),
              ElementsAre(10.0f, 20.0f, 30.0f, 40.0f));
}

}  // namespace
}  // namespace dfarm::testing

namespace dfarm::testing {
namespace {

// Found by runtime/fuzz's options fuzzer (seeds/model_options/
// depthwise_empty_huge_batch_hang): an empty input and output with a batch of
// 2^31-1 ([2^31-1,3,0,1]) made Eval walk every batch (25 s under the
// sanitizers); with nothing to write it returns at once.
void RunEmptyHugeBatchDepthwiseWithin10s() {
  DepthwiseConv2DParams p;
  p.padding = tfl::Padding::SAME;
  alarm(10);
  std::vector<float> got =
      RunDepthwise({0x7fffffff, 3, 0, 1}, {}, {1, 1, 1, 1}, {1}, {}, {0x7fffffff, 3, 0, 1}, p);
  std::_Exit(got.empty() ? 0 : 1);
}

TEST(DepthwiseConv2DTest, EmptyOutputWithAHugeBatchReturnsAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunEmptyHugeBatchDepthwiseWithin10s(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace dfarm::testing
