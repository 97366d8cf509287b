#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// custom_options of Convolution2DTransposeBias: padding (1 SAME, 2 VALID),
// stride_width, stride_height as little-endian int32.
std::vector<uint8_t> MediaPipeOptions(int32_t padding, int32_t stride_w, int32_t stride_h) {
  const int32_t values[] = {padding, stride_w, stride_h};
  std::vector<uint8_t> bytes(sizeof(values));
  std::memcpy(bytes.data(), values, sizeof(values));
  return bytes;
}

// Input 2x2 [1,2,3,4], filter 2x2 [1,10,100,1000], stride 2: each input pixel
// writes its own 2x2 block of the 4x4 output.
const std::vector<float> kStride2Expected = {1,   10,   2,   20,    //
                                             100, 1000, 200, 2000,  //
                                             3,   30,   4,   40,    //
                                             300, 3000, 400, 4000};

TEST(TransposeConvTest, Stride2ValidScattersBlocks) {
  ModelBuilder b;
  int shape = b.AddConstInt32({4}, {1, 4, 4, 1});
  int filter = b.AddConstFloat32({1, 2, 2, 1}, {1, 10, 100, 1000});
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1});
  TransposeConvParams p;
  p.stride_h = p.stride_w = 2;
  b.AddTransposeConv(shape, filter, in, -1, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray(kStride2Expected));
}

TEST(TransposeConvTest, SameStride1WithBiasAndRelu) {
  // 3x3 filter f[ky][kx] = 1..9 over a 2x2 input, SAME (pad_before 1):
  // out(oy,ox) = sum in(iy,ix) * f[oy-iy+1][ox-ix+1] = 23, 33, 53, 63; bias -30, RELU.
  ModelBuilder b;
  int shape = b.AddConstInt32({4}, {1, 2, 2, 1});
  int filter = b.AddConstFloat32({1, 3, 3, 1}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1});
  int bias = b.AddConstFloat32({1}, {-30});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1});
  TransposeConvParams p;
  p.padding = tfl::Padding::SAME;
  p.activation = tfl::ActivationFunctionType::RELU;
  b.AddTransposeConv(shape, filter, in, bias, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({0.0f, 3.0f, 23.0f, 33.0f}));
}

TEST(Convolution2DTransposeBiasTest, Stride2SameWithBias) {
  // SAME: pad_total = max(0, 2 - (2 - 1) % 2 - 1) = 0, so out = 2 * 1 + 2 = 4.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1});
  int filter = b.AddConstFloat32({1, 2, 2, 1}, {1, 10, 100, 1000});
  int bias = b.AddConstFloat32({1}, {0.5f});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1});
  b.AddCustomOperator("Convolution2DTransposeBias", {in, filter, bias}, {out},
                      MediaPipeOptions(1, 2, 2));
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(runner.Invoke().ok());
  std::vector<float> expected = kStride2Expected;
  for (float& v : expected) v += 0.5f;
  EXPECT_THAT(runner.Output(0), ElementsAreArray(expected));
}

TEST(Convolution2DTransposeBiasTest, MixesChannels) {
  // One pixel [1,2]; filter OHWI [[1,1],[0,-1]]: [3,-2] + bias [1,1].
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 2});
  int filter = b.AddConstFloat32({2, 1, 1, 2}, {1, 1, 0, -1});
  int bias = b.AddConstFloat32({2}, {1, 1});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 2});
  b.AddCustomOperator("Convolution2DTransposeBias", {in, filter, bias}, {out},
                      MediaPipeOptions(2, 1, 1));
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({4.0f, -1.0f}));
}

TEST(Convolution2DTransposeBiasTest, SameOddSizeCropsTheBorder) {
  // in 3, K 3, stride 2, SAME: pad_total = 3 - 2 % 2 - 1 = 2, out = 2 * 2 + 3 - 2 = 5,
  // pad_before 1. All-ones filter and input: out(x) counts the inputs whose window
  // [2 i - 1, 2 i + 1] covers x: 1 at x = 0, 2, 4 and 2 at x = 1, 3... per axis.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 3, 1});
  int filter = b.AddConstFloat32({1, 1, 3, 1}, {1, 1, 1});
  int bias = b.AddConstFloat32({1}, {0});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 5, 1});
  b.AddCustomOperator("Convolution2DTransposeBias", {in, filter, bias}, {out},
                      MediaPipeOptions(1, 2, 1));
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 1, 1}));
  ASSERT_TRUE(runner.Invoke().ok());
  // Windows: i=0 -> [-1,1], i=1 -> [1,3], i=2 -> [3,5]; clipped to [0,4].
  EXPECT_THAT(runner.Output(0), ElementsAreArray({1.0f, 2.0f, 1.0f, 2.0f, 1.0f}));
}

TEST(Convolution2DTransposeBiasTest, ShortCustomOptionsAreAnError) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 1});
  int filter = b.AddConstFloat32({1, 1, 1, 1}, {1});
  int bias = b.AddConstFloat32({1}, {0});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 1});
  b.AddCustomOperator("Convolution2DTransposeBias", {in, filter, bias}, {out}, {1, 0, 0, 0});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(),
              HasSubstr("node 0 (Convolution2DTransposeBias): custom_options must hold 3 int32"));
}

TEST(TransposeConvTest, StrideThatOverflowsTheScatterIsRefused) {
  // Input row 1 scatters to 1 * (2^31 - 1) + ky: past int32.
  ModelBuilder b;
  int shape = b.AddConstInt32({4}, {1, 4, 4, 1});
  int filter = b.AddConstFloat32({1, 2, 2, 1}, {1, 10, 100, 1000});
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1});
  TransposeConvParams p;
  p.stride_h = 2147483647;
  b.AddTransposeConv(shape, filter, in, -1, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (TRANSPOSE_CONV): stride_h 2147483647 makes "
                                          "the scattered output height overflow"));
}

TEST(TransposeConvTest, MediaPipeStrideThatOverflowsTheOutputIsRefused) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1});
  int filter = b.AddConstFloat32({1, 2, 2, 1}, {1, 10, 100, 1000});
  int bias = b.AddConstFloat32({1}, {0});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1});
  b.AddCustomOperator("Convolution2DTransposeBias", {in, filter, bias}, {out},
                      MediaPipeOptions(2, 2147483647, 2));
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(),
              HasSubstr("node 0 (Convolution2DTransposeBias): stride_width 2147483647 makes the "
                        "scattered output width overflow"));
}

}  // namespace
}  // namespace dfarm::testing

namespace dfarm::testing {
namespace {

// Found by runtime/fuzz's options fuzzer: an input with no element but a
// height of 2^31-1 ([2, 2^31-1, 0, 1]) passed Prepare and Eval walked 2^32
// empty rows. Runs TRANSPOSE_CONV (float32, or int8 when `quantized`) over
// that input in a child that SIGALRM kills after 10 s; exits 0 when the
// output is the bias alone (zeros).
void RunEmptyInputWithin10s(bool quantized) {
  const tfl::TensorType type = quantized ? tfl::TensorType::INT8 : tfl::TensorType::FLOAT32;
  ModelBuilder b;
  int shape = b.AddConstInt32({4}, {2, 2, 2, 1});
  int filter = quantized ? b.AddConstInt8({1, 1, 1, 1}, {3}) : b.AddConstFloat32({1, 1, 1, 1}, {3});
  int in = b.AddTensor(type, {2, 0x7fffffff, 0, 1});
  int out = b.AddTensor(type, {2, 2, 2, 1});
  if (quantized) {
    b.SetQuantization(filter, 0.5f, 0);
    b.SetQuantization(in, 0.5f, 0);
    b.SetQuantization(out, 0.5f, 0);
  }
  b.AddTransposeConv(shape, filter, in, -1, out, TransposeConvParams{});
  b.SetInputs({in});
  b.SetOutputs({out});
  alarm(10);
  GraphRunner runner;
  if (!runner.Init(b).ok() || !runner.Invoke().ok()) std::_Exit(2);
  bool zeros = true;
  if (quantized) {
    for (int8_t v : runner.Output<int8_t>(0)) zeros = zeros && v == 0;
  } else {
    for (float v : runner.Output<float>(0)) zeros = zeros && v == 0.0f;
  }
  std::_Exit(zeros ? 0 : 1);
}

TEST(TransposeConvTest, EmptyInputWithAHugeHeightReturnsAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunEmptyInputWithin10s(false), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(RunEmptyInputWithin10s(true), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace dfarm::testing
