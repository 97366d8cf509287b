#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>

#include "runtime/kernels/gemm.h"
#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

using Act = tfl::ActivationFunctionType;

// A CONV_2D case: input, constant filter and bias, declared output shape.
struct ConvCase {
  std::vector<int32_t> input_shape;
  std::vector<float> input;
  std::vector<int32_t> filter_shape;
  std::vector<float> filter;
  std::vector<float> bias;  // empty: no bias input (-1)
  std::vector<int32_t> output_shape;
  Conv2DParams params;
};

// One CONV_2D with constant filter and bias.
ModelBuilder BuildConv(const ConvCase& c) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, c.input_shape, "input");
  int filter = b.AddConstFloat32(c.filter_shape, c.filter, "filter");
  int bias =
      c.bias.empty() ? -1 : b.AddConstFloat32({static_cast<int32_t>(c.bias.size())}, c.bias, "b");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, c.output_shape, "output");
  b.AddConv2D(in, filter, bias, out, c.params);
  b.SetInputs({in});
  b.SetOutputs({out});
  return b;
}

std::vector<float> RunConv(const ConvCase& c) {
  GraphRunner runner;
  runtime::Status status = runner.Init(BuildConv(c));
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  EXPECT_TRUE(runner.SetInput(0, c.input));
  EXPECT_TRUE(runner.Invoke().ok());
  return runner.Output(0);
}

// RunConv with RegisterConv2DReference() (the plain loops) for CONV_2D.
std::vector<float> RunConvReference(const ConvCase& c) {
  std::unique_ptr<runtime::Model> model;
  runtime::Status status = runtime::Model::FromBuffer("test.tflite", BuildConv(c).Build(), &model);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  resolver.AddBuiltin(tfl::BuiltinOperator::CONV_2D, runtime::RegisterConv2DReference());
  runtime::Interpreter interpreter(*model, resolver);
  status = interpreter.AllocateTensors();
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  runtime::Tensor* t = interpreter.inputs()[0];
  EXPECT_EQ(t->bytes, c.input.size() * sizeof(float));
  if (t->bytes != c.input.size() * sizeof(float)) return {};
  std::copy(c.input.begin(), c.input.end(), t->data_as<float>());
  status = interpreter.Invoke();
  EXPECT_TRUE(status.ok()) << status.message();
  const runtime::Tensor* o = interpreter.outputs()[0];
  return std::vector<float>(o->data_as<float>(), o->data_as<float>() + o->bytes / sizeof(float));
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

// A batch of 0 gives an empty output: nothing to compute, and no division by
// its 0 pixels (the model_options fuzzer's input
// runtime/fuzz/seeds/model_options/conv_empty_output_div_by_zero), on the
// GEMM path and on the plain loops, with extreme strides and dilations.
TEST(Conv2DTest, EmptyBatchComputesNothing) {
  for (int big : {1, 2147483647}) {
    Conv2DParams p;
    p.padding = tfl::Padding::SAME;
    p.stride_h = p.stride_w = p.dilation_h = p.dilation_w = big;
    ConvCase c{{0, 1, 1, 1}, {}, {1, 1, 1, 1}, {1}, {}, {0, 1, 1, 1}, p};
    EXPECT_TRUE(RunConv(c).empty()) << big;
    EXPECT_TRUE(RunConvReference(c).empty()) << big;
  }
}

TEST(Conv2DTest, SameStride2PadsAfterOnly) {
  // in 4x4 (1..16), 3x3 ones, stride 2: out = ceil(4/2) = 2, pad_total =
  // (2-1)*2 + 3 - 4 = 1, pad_before = 0: windows rows/cols {0..2} and {2,3}.
  Conv2DParams p;
  p.padding = tfl::Padding::SAME;
  p.stride_h = p.stride_w = 2;
  ConvCase c{
      {1, 4, 4, 1}, Iota(16, 1.0f), {1, 3, 3, 1}, std::vector<float>(9, 1.0f), {}, {1, 2, 2, 1}, p};
  EXPECT_THAT(RunConv(c), Pointwise(FloatNear(1e-5), {54.0f, 45.0f, 72.0f, 54.0f}));
}

TEST(Conv2DTest, SameStride1PadsBothSides) {
  // in 3x3 (1..9), 3x3 ones, stride 1: pad 1 each side; centre = 45, corner
  // (0,0) = 1+2+4+5 = 12.
  Conv2DParams p;
  p.padding = tfl::Padding::SAME;
  ConvCase c{
      {1, 3, 3, 1}, Iota(9, 1.0f), {1, 3, 3, 1}, std::vector<float>(9, 1.0f), {}, {1, 3, 3, 1}, p};
  EXPECT_THAT(RunConv(c), Pointwise(FloatNear(1e-5), {12.0f, 21.0f, 16.0f, 27.0f, 45.0f, 33.0f,
                                                      24.0f, 39.0f, 28.0f}));
}

TEST(Conv2DTest, Dilation) {
  // 2x2 ones dilated by 2 over 3x3 (1..9): corners 1+3+7+9 = 20.
  Conv2DParams p;
  p.dilation_h = p.dilation_w = 2;
  ConvCase c{{1, 3, 3, 1}, Iota(9, 1.0f), {1, 2, 2, 1}, {1, 1, 1, 1}, {}, {1, 1, 1, 1}, p};
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

// --- crafted geometry: int32 overflow is refused, not wrapped -------------

constexpr int kInt32Max = 2147483647;

// CONV_2D over [1,4,4,1] with a 3x3 filter; Init's status.
runtime::Status InitConv(const Conv2DParams& p, std::vector<int32_t> output_shape) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1});
  int filter = b.AddConstFloat32({1, 3, 3, 1}, std::vector<float>(9, 1.0f));
  int out = b.AddTensor(tfl::TensorType::FLOAT32, output_shape);
  b.AddConv2D(in, filter, -1, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  return runner.Init(b);
}

TEST(Conv2DTest, DilationThatOverflowsTheEffectiveFilterIsRefused) {
  // (3 - 1) * (2^31 - 1) + 1 wrapped to -1 in int: SAME then "fit" [1,4,4,1]
  // and Eval indexed rows with an overflowing ky * dilation.
  Conv2DParams p;
  p.padding = tfl::Padding::SAME;
  p.dilation_h = kInt32Max;
  runtime::Status status = InitConv(p, {1, 4, 4, 1});
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (CONV_2D): dilation_h_factor 2147483647 makes "
                                          "the effective filter height overflow"));
  p.dilation_h = 1;
  p.dilation_w = kInt32Max;
  p.padding = tfl::Padding::VALID;
  status = InitConv(p, {1, 2, 6, 1});
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("dilation_w_factor 2147483647 makes the effective "
                                          "filter width overflow"));
}

TEST(Conv2DTest, WindowsReachingPastInt32AreRefused) {
  // The effective height 2 * (2^30 - 1) + 1 = 2^31 - 1 fits, but the last
  // SAME window ends at (4 - 1) * 1 + 2^31 - 1, past int32.
  Conv2DParams p;
  p.padding = tfl::Padding::SAME;
  p.dilation_h = (1 << 30) - 1;
  runtime::Status status = InitConv(p, {1, 4, 4, 1});
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (CONV_2D): "));
  EXPECT_THAT(status.message(), HasSubstr("makes the padded input height overflow"));
}

TEST(Conv2DTest, StrideOfInt32MaxIsOneWindow) {
  // in + stride overflowed int: VALID computed 0 rows (or UB) instead of 1.
  Conv2DParams p;
  p.stride_h = kInt32Max;
  ConvCase c{
      {1, 4, 4, 1}, Iota(16, 1.0f), {1, 3, 3, 1}, std::vector<float>(9, 1.0f), {}, {1, 1, 2, 1}, p};
  EXPECT_THAT(RunConv(c), ElementsAre(54.0f, 63.0f));
  EXPECT_THAT(RunConvReference(c), ElementsAre(54.0f, 63.0f));
  c.params.padding = tfl::Padding::SAME;
  c.output_shape = {1, 1, 4, 1};
  // Row 0 is the window's centre (pad_before 0 of a total 0): rows 0..2.
  EXPECT_THAT(RunConv(c), ElementsAre(33.0f, 54.0f, 63.0f, 45.0f));
}

// --- grouped convolution -------------------------------------------------

// Grouped CONV_2D computed by plain double loops: group g of G reads input
// channels [g*Cin/G, ..) and writes output channels [g*Cout/G, ..).
std::vector<float> NaiveGroupedConv(const ConvCase& c, int out_h, int out_w) {
  const int n = c.input_shape[0], h = c.input_shape[1], w = c.input_shape[2];
  const int cin = c.input_shape[3], cout = c.filter_shape[0], kh = c.filter_shape[1];
  const int kw = c.filter_shape[2], fc = c.filter_shape[3], groups = cin / fc;
  const int per_group = cout / groups;
  const auto dim = [](tfl::Padding p, int in, int out, int k, int s, int d) {
    const int eff = (k - 1) * d + 1;
    return p == tfl::Padding::SAME ? std::max((out - 1) * s + eff - in, 0) / 2 : 0;
  };
  const int pt = dim(c.params.padding, h, out_h, kh, c.params.stride_h, c.params.dilation_h);
  const int pl = dim(c.params.padding, w, out_w, kw, c.params.stride_w, c.params.dilation_w);
  std::vector<float> out(static_cast<size_t>(n) * out_h * out_w * cout);
  for (int b = 0; b < n; ++b) {
    for (int oy = 0; oy < out_h; ++oy) {
      for (int ox = 0; ox < out_w; ++ox) {
        for (int oc = 0; oc < cout; ++oc) {
          double acc = c.bias.empty() ? 0.0 : c.bias[oc];
          const int g = oc / per_group;
          for (int ky = 0; ky < kh; ++ky) {
            for (int kx = 0; kx < kw; ++kx) {
              const int iy = oy * c.params.stride_h - pt + ky * c.params.dilation_h;
              const int ix = ox * c.params.stride_w - pl + kx * c.params.dilation_w;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              for (int ic = 0; ic < fc; ++ic) {
                acc += double(c.input[((b * h + iy) * w + ix) * cin + g * fc + ic]) *
                       c.filter[((oc * kh + ky) * kw + kx) * fc + ic];
              }
            }
          }
          if (c.params.activation == Act::RELU6) acc = std::min(6.0, std::max(0.0, acc));
          if (c.params.activation == Act::RELU) acc = std::max(0.0, acc);
          out[((static_cast<size_t>(b) * out_h + oy) * out_w + ox) * cout + oc] =
              static_cast<float>(acc);
        }
      }
    }
  }
  return out;
}

TEST(Conv2DTest, GroupedMatchesPlainLoops) {
  struct G {
    int n, h, w, cin, groups, cout, k, stride, dilation;
    tfl::Padding padding;
    Act act;
    bool bias;
  };
  const G cases[] = {
      {1, 5, 5, 4, 2, 6, 3, 1, 1, tfl::Padding::SAME, Act::NONE, true},
      {2, 8, 7, 8, 4, 8, 3, 2, 1, tfl::Padding::SAME, Act::RELU6, true},
      {1, 9, 9, 6, 3, 6, 3, 1, 2, tfl::Padding::VALID, Act::RELU, false},
      {2, 6, 6, 4, 2, 4, 1, 1, 1, tfl::Padding::VALID, Act::NONE, true},  // 1x1
      {2, 7, 7, 8, 4, 12, 3, 1, 2, tfl::Padding::SAME, Act::RELU, true},  // dilated SAME
      {2, 9, 9, 4, 2, 6, 3, 2, 2, tfl::Padding::SAME, Act::RELU6, false},
  };
  for (const G& g : cases) {
    ConvCase c;
    c.input_shape = {g.n, g.h, g.w, g.cin};
    c.filter_shape = {g.cout, g.k, g.k, g.cin / g.groups};
    c.input.resize(static_cast<size_t>(g.n) * g.h * g.w * g.cin);
    for (size_t i = 0; i < c.input.size(); ++i) c.input[i] = std::sin(0.37f * i);
    c.filter.resize(static_cast<size_t>(g.cout) * g.k * g.k * (g.cin / g.groups));
    for (size_t i = 0; i < c.filter.size(); ++i) c.filter[i] = std::cos(0.91f * i);
    if (g.bias) c.bias = Iota(g.cout, -1.0f);
    c.params.padding = g.padding;
    c.params.stride_h = c.params.stride_w = g.stride;
    c.params.dilation_h = c.params.dilation_w = g.dilation;
    c.params.activation = g.act;
    const int eff = (g.k - 1) * g.dilation + 1;
    const int oh = g.padding == tfl::Padding::SAME ? (g.h + g.stride - 1) / g.stride
                                                   : (g.h - eff + g.stride) / g.stride;
    const int ow = g.padding == tfl::Padding::SAME ? (g.w + g.stride - 1) / g.stride
                                                   : (g.w - eff + g.stride) / g.stride;
    c.output_shape = {g.n, oh, ow, g.cout};
    const std::vector<float> want = NaiveGroupedConv(c, oh, ow);
    EXPECT_THAT(RunConv(c), Pointwise(FloatNear(1e-4f), want))
        << "groups " << g.groups << " k" << g.k << " s" << g.stride << " d" << g.dilation;
    EXPECT_THAT(RunConvReference(c), Pointwise(FloatNear(1e-4f), want))
        << "reference, groups " << g.groups << " k" << g.k << " s" << g.stride << " d"
        << g.dilation;
  }
}

TEST(Conv2DTest, GroupedByHand) {
  // Input [1,1,2,2] pixels (1,2) and (3,4); 2 groups of one input channel;
  // filter [2 out][1][2 taps][1 in]: group 0 weights (1,10), group 1 (2,20).
  // out ch0 = 1*1 + 3*10 + 0.5 = 31.5; out ch1 = 2*2 + 4*20 - 1 = 83.
  ConvCase c{{1, 1, 2, 2},
             {1, 2, 3, 4},
             {2, 1, 2, 1},
             {1, 10, 2, 20},
             {0.5f, -1.0f},
             {1, 1, 1, 2},
             Conv2DParams{tfl::Padding::VALID, 1, 1, 1, 1, Act::NONE}};
  EXPECT_THAT(RunConv(c), ElementsAre(31.5f, 83.0f));
  EXPECT_THAT(RunConvReference(c), ElementsAre(31.5f, 83.0f));
}

// With as many groups as input channels (one filter channel each) CONV_2D is
// a depthwise convolution: the two kernels agree.
TEST(Conv2DTest, GroupedWithOneChannelPerGroupEqualsDepthwise) {
  const int c = 5;
  std::vector<float> input(1 * 6 * 6 * c), conv_filter(c * 3 * 3), dw_filter(3 * 3 * c);
  for (size_t i = 0; i < input.size(); ++i) input[i] = std::sin(0.3f * i);
  for (int o = 0; o < c; ++o) {
    for (int t = 0; t < 9; ++t) {
      const float v = std::cos(0.7f * (o * 9 + t));
      conv_filter[o * 9 + t] = v;  // [C,3,3,1]
      dw_filter[t * c + o] = v;    // [1,3,3,C]
    }
  }
  ConvCase grouped{{1, 6, 6, c},
                   input,
                   {c, 3, 3, 1},
                   conv_filter,
                   Iota(c, 0.5f),
                   {1, 3, 3, c},
                   Conv2DParams{tfl::Padding::SAME, 2, 2, 1, 1, Act::NONE}};
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, c});
  int f = b.AddConstFloat32({1, 3, 3, c}, dw_filter);
  int bias = b.AddConstFloat32({c}, Iota(c, 0.5f));
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 3, c});
  b.AddDepthwiseConv2D(in, f, bias, out, {tfl::Padding::SAME, 2, 2, 1, 1, 1, Act::NONE});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, input));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(RunConv(grouped), Pointwise(FloatNear(1e-5f), runner.Output(0)));
}

TEST(Conv2DTest, FilterChannelsThatDoNotGroupTheInputAreAnError) {
  for (const auto& [filter_c, cout] : {std::pair{4, 4}, std::pair{2, 4}}) {
    ModelBuilder b;
    int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 3, 6});
    int f = b.AddConstFloat32({cout, 1, 1, filter_c}, std::vector<float>(cout * filter_c, 1.0f));
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 3, cout});
    b.AddConv2D(in, f, -1, out, Conv2DParams{});
    b.SetInputs({in});
    b.SetOutputs({out});
    GraphRunner runner;
    runtime::Status status = runner.Init(b);
    EXPECT_EQ(status.code(), runtime::StatusCode::kError) << status.message();
    EXPECT_THAT(status.message(), HasSubstr("node 0 (CONV_2D)"));
    EXPECT_THAT(status.message(), HasSubstr("does not match input [1,3,3,6] channels"));
  }
}

}  // namespace
}  // namespace dfarm::testing
