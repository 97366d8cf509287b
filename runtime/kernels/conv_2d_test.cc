#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

using Act = tfl::ActivationFunctionType;

std::vector<float> Iota(int n, float start = 1.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// One CONV_2D with constant filter and bias; returns the output.
struct ConvCase {
  std::vector<int32_t> input_shape;
  std::vector<float> input;
  std::vector<int32_t> filter_shape;
  std::vector<float> filter;
  std::vector<float> bias;  // empty: no bias input (-1)
  std::vector<int32_t> output_shape;
  Conv2DParams params;
};

std::vector<float> RunConv(const ConvCase& c) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, c.input_shape, "input");
  int filter = b.AddConstFloat32(c.filter_shape, c.filter, "filter");
  int bias =
      c.bias.empty() ? -1 : b.AddConstFloat32({static_cast<int32_t>(c.bias.size())}, c.bias, "b");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, c.output_shape, "output");
  b.AddConv2D(in, filter, bias, out, c.params);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  EXPECT_TRUE(runner.SetInput(0, c.input));
  EXPECT_TRUE(runner.Invoke().ok());
  return runner.Output(0);
}

TEST(Conv2DTest, ValidOhwiLayoutWithBias) {
  // Two pixels (1,2) and (3,4); filter [2 out][1][2 taps][2 in].
  ConvCase c{{1, 1, 2, 2},
             {1, 2, 3, 4},
             {2, 1, 2, 2},
             {1, 0, 0, 1,    // oc0: tap0 (1,0), tap1 (0,1)
              1, 1, -1, 0},  // oc1: tap0 (1,1), tap1 (-1,0)
             {0.5f, -1.0f},
             {1, 1, 1, 2},
             {}};
  // oc0 = 1*1 + 4*1 + 0.5 = 5.5; oc1 = (1+2) - 3 - 1 = -1.
  EXPECT_THAT(RunConv(c), Pointwise(FloatNear(1e-6), {5.5f, -1.0f}));
}

TEST(Conv2DTest, SameStride2PadsAfterOnly) {
  // in 4x4 (1..16), 3x3 ones, stride 2: out = ceil(4/2) = 2, pad_total =
  // (2-1)*2 + 3 - 4 = 1, pad_before = 0: windows rows/cols {0..2} and {2,3}.
  Conv2DParams p;
  p.padding = tfl::Padding::SAME;
  p.stride_h = p.stride_w = 2;
  ConvCase c{{1, 4, 4, 1}, Iota(16), {1, 3, 3, 1}, std::vector<float>(9, 1.0f), {},
             {1, 2, 2, 1}, p};
  EXPECT_THAT(RunConv(c), Pointwise(FloatNear(1e-5), {54.0f, 45.0f, 72.0f, 54.0f}));
}

TEST(Conv2DTest, SameStride1PadsBothSides) {
  // in 3x3 (1..9), 3x3 ones, stride 1: pad 1 each side; centre = 45, corner
  // (0,0) = 1+2+4+5 = 12.
  Conv2DParams p;
  p.padding = tfl::Padding::SAME;
  ConvCase c{{1, 3, 3, 1}, Iota(9), {1, 3, 3, 1}, std::vector<float>(9, 1.0f), {}, {1, 3, 3, 1}, p};
  EXPECT_THAT(RunConv(c), Pointwise(FloatNear(1e-5), {12.0f, 21.0f, 16.0f, 27.0f, 45.0f, 33.0f,
                                                      24.0f, 39.0f, 28.0f}));
}

TEST(Conv2DTest, Dilation) {
  // 2x2 ones dilated by 2 over 3x3 (1..9): corners 1+3+7+9 = 20.
  Conv2DParams p;
  p.dilation_h = p.dilation_w = 2;
  ConvCase c{{1, 3, 3, 1}, Iota(9), {1, 2, 2, 1}, {1, 1, 1, 1}, {}, {1, 1, 1, 1}, p};
  EXPECT_THAT(RunConv(c), ElementsAre(20.0f));
}

TEST(Conv2DTest, FusedActivations) {
  // 1x1 conv of the value 2 with weights (-1, 1, 5): (-2, 2, 10) before clamping.
  const std::pair<Act, std::vector<float>> cases[] = {
      {Act::NONE, {-2, 2, 10}},
      {Act::RELU, {0, 2, 10}},
      {Act::RELU6, {0, 2, 6}},
      {Act::RELU_N1_TO_1, {-1, 1, 1}},
  };
  for (const auto& [act, expected] : cases) {
    Conv2DParams p;
    p.activation = act;
    ConvCase c{{1, 1, 1, 1}, {2}, {3, 1, 1, 1}, {-1, 1, 5}, {0, 0, 0}, {1, 1, 1, 3}, p};
    EXPECT_THAT(RunConv(c), Pointwise(FloatNear(1e-6), expected))
        << tfl::EnumNameActivationFunctionType(act);
  }
}

TEST(Conv2DTest, WrongDeclaredOutputShapeIsAnError) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1});
  int filter = b.AddConstFloat32({1, 3, 3, 1}, std::vector<float>(9, 1.0f));
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1});
  Conv2DParams p;  // VALID: the op computes 2x2
  b.AddConv2D(in, filter, -1, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (CONV_2D)"));
  EXPECT_THAT(status.message(), HasSubstr("declared [1,4,4,1], but the op computes [1,2,2,1]"));
}

TEST(Conv2DTest, TanhActivationIsUnsupported) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 1});
  int filter = b.AddConstFloat32({1, 1, 1, 1}, {1});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 1});
  Conv2DParams p;
  p.activation = Act::TANH;
  b.AddConv2D(in, filter, -1, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("fused activation TANH is not supported"));
}

}  // namespace
}  // namespace dfarm::testing
