// The int8 / uint8 paths of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
// TRANSPOSE_CONV and BATCH_MATMUL: small cases computed by hand, and random
// cases whose expected values come from double math on the dequantized
// values, quantized with the output's parameters (within 1 LSB).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/depthwise_conv_float.h"
#include "runtime/kernels/gemm.h"
#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using Act = tfl::ActivationFunctionType;

// A quantized tensor as the test sees it: values as int32, per-tensor (one
// scale) or per-channel along `dim`.
struct QTensor {
  std::vector<int32_t> shape;
  std::vector<int32_t> q;
  std::vector<float> scales{1.0f};
  std::vector<int64_t> zero_points{0};
  int dim = 0;

  size_t size() const {
    size_t n = 1;
    for (int32_t d : shape) n *= d;
    return n;
  }
  // The real value of element i (row-major).
  double Real(size_t i) const {
    size_t channel = 0;
    if (scales.size() > 1) {
      size_t inner = 1;
      for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
      channel = (i / inner) % shape[dim];
    }
    return static_cast<double>(scales[channel]) * (q[i] - zero_points[channel]);
  }
};

struct Range {
  int32_t min, max;
};
Range TypeRange(bool is_int8) { return is_int8 ? Range{-128, 127} : Range{0, 255}; }

QTensor Random(std::mt19937& rng, std::vector<int32_t> shape, bool is_int8, float scale,
               int64_t zero_point) {
  QTensor t;
  t.shape = std::move(shape);
  const Range r = TypeRange(is_int8);
  std::uniform_int_distribution<int32_t> dist(r.min, r.max);
  t.q.resize(t.size());
  for (int32_t& v : t.q) v = dist(rng);
  t.scales = {scale};
  t.zero_points = {zero_point};
  return t;
}

// Per-channel int8 weights (zero points 0, values in [-127, 127]).
QTensor RandomPerChannel(std::mt19937& rng, std::vector<int32_t> shape, int dim) {
  QTensor t;
  t.shape = std::move(shape);
  std::uniform_int_distribution<int32_t> dist(-127, 127);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  t.q.resize(t.size());
  for (int32_t& v : t.q) v = dist(rng);
  t.dim = dim;
  t.scales.resize(t.shape[dim]);
  for (float& s : t.scales) s = scale(rng);
  t.zero_points.assign(t.shape[dim], 0);
  return t;
}

// int32 bias [channels] at scale input_scale * filter_scale[c].
std::vector<int32_t> RandomBias(std::mt19937& rng, int channels) {
  std::uniform_int_distribution<int32_t> dist(-2000, 2000);
  std::vector<int32_t> bias(channels);
  for (int32_t& b : bias) b = dist(rng);
  return bias;
}

int AddQuantized(ModelBuilder& b, const QTensor& t, bool is_int8, bool constant,
                 const std::string& name) {
  int index;
  if (!constant) {
    index = b.AddTensor(is_int8 ? tfl::TensorType::INT8 : tfl::TensorType::UINT8, t.shape, name);
  } else if (is_int8) {
    index = b.AddConstInt8(t.shape, std::vector<int8_t>(t.q.begin(), t.q.end()), name);
  } else {
    index = b.AddConstUint8(t.shape, std::vector<uint8_t>(t.q.begin(), t.q.end()), name);
  }
  if (t.scales.size() > 1) {
    b.SetQuantization(index, t.scales, t.zero_points, t.dim);
  } else {
    b.SetQuantization(index, t.scales[0], t.zero_points[0]);
  }
  return index;
}

// Output quantization covering [min(real), max(real)] and 0.
struct OutputQuant {
  float scale;
  int64_t zero_point;
};
OutputQuant ChooseOutput(const std::vector<double>& real, bool is_int8) {
  double lo = 0.0, hi = 0.0;
  for (double v : real) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const Range r = TypeRange(is_int8);
  const float scale = static_cast<float>(std::max(hi - lo, 1e-3) / 255.0);
  return {scale, r.min - static_cast<int64_t>(std::round(lo / scale))};
}

// real -> quantized with the output's parameters and the activation's clamp.
std::vector<int32_t> Quantize(const std::vector<double>& real, OutputQuant out, bool is_int8,
                              Act act) {
  const Range r = TypeRange(is_int8);
  int32_t lo = r.min, hi = r.max;
  const int32_t zp = static_cast<int32_t>(out.zero_point);
  if (act == Act::RELU || act == Act::RELU6) lo = std::max(lo, zp);
  if (act == Act::RELU6) hi = std::min(hi, zp + static_cast<int32_t>(std::round(6.0 / out.scale)));
  std::vector<int32_t> q(real.size());
  for (size_t i = 0; i < real.size(); ++i) {
    const double v = std::round(real[i] / out.scale) + zp;
    q[i] = static_cast<int32_t>(std::clamp(v, static_cast<double>(lo), static_cast<double>(hi)));
  }
  return q;
}

// Runs a built model with its quantized inputs and returns output 0, on
// `threads` threads; with `plain_loops`, CONV_2D, DEPTHWISE_CONV_2D and
// FULLY_CONNECTED are the plain-loop kernels.
std::vector<int32_t> RunQuantized(ModelBuilder& b, const std::vector<const QTensor*>& inputs,
                                  bool is_int8, int threads = 1, bool plain_loops = false) {
  runtime::InterpreterOptions options;
  options.num_threads = threads;
  KernelOverrides overrides;
  if (plain_loops) {
    overrides = {
        {tfl::BuiltinOperator::CONV_2D, runtime::RegisterConv2DReference()},
        {tfl::BuiltinOperator::FULLY_CONNECTED, runtime::RegisterFullyConnectedReference()},
        {tfl::BuiltinOperator::DEPTHWISE_CONV_2D, runtime::RegisterDepthwiseConv2DReference()}};
  }
  GraphRunner runner;
  runtime::Status status = runner.Init(b, options, overrides);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t>& q = inputs[i]->q;
    const bool ok = is_int8 ? runner.SetInput(i, std::vector<int8_t>(q.begin(), q.end()))
                            : runner.SetInput(i, std::vector<uint8_t>(q.begin(), q.end()));
    EXPECT_TRUE(ok) << "input " << i;
  }
  status = runner.Invoke();
  EXPECT_TRUE(status.ok()) << status.message();
  if (is_int8) {
    std::vector<int8_t> out = runner.Output<int8_t>(0);
    return std::vector<int32_t>(out.begin(), out.end());
  }
  std::vector<uint8_t> out = runner.Output<uint8_t>(0);
  return std::vector<int32_t>(out.begin(), out.end());
}

void ExpectWithinOneLsb(const std::vector<int32_t>& actual, const std::vector<int32_t>& expected,
                        const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int off_by_one = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_LE(std::abs(actual[i] - expected[i]), 1) << what << " at " << i;
    off_by_one += actual[i] != expected[i];
  }
  // Rounding differences are rare, not systematic.
  EXPECT_LE(off_by_one, static_cast<int>(actual.size() / 10 + 1)) << what;
}

double BiasReal(const std::vector<int32_t>& bias, const QTensor& input, const QTensor& filter,
                int c) {
  const float fs = filter.scales.size() > 1 ? filter.scales[c] : filter.scales[0];
  return static_cast<double>(bias[c]) * input.scales[0] * fs;
}

int PadBefore(tfl::Padding padding, int in, int k, int stride, int dilation, int out) {
  if (padding != tfl::Padding::SAME) return 0;
  const int effective = (k - 1) * dilation + 1;
  return std::max((out - 1) * stride + effective - in, 0) / 2;
}

// ---- Hand-computed cases.

TEST(QuantizedConvTest, Int8ConvHandComputed) {
  // x = {10, 20} at scale 0.5 (zp 0) -> {5, 10}; w = {3, 4} at 0.25 -> {0.75, 1};
  // bias 8 at 0.125 -> 1. Real 3.75 + 10 + 1 = 14.75; output scale 1, zp 0 -> 15.
  // Integer: (10*3 + 20*4 + 8) * 0.125 = 14.75 -> 15.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::INT8, {1, 1, 1, 2}, "input");
  b.SetQuantization(in, 0.5f, 0);
  int filter = b.AddConstInt8({1, 1, 1, 2}, {3, 4}, "filter");
  b.SetQuantization(filter, std::vector<float>{0.25f}, std::vector<int64_t>{0}, 0);
  int bias = b.AddConstInt32({1}, {8}, "bias");
  int out = b.AddTensor(tfl::TensorType::INT8, {1, 1, 1, 1}, "output");
  b.SetQuantization(out, 1.0f, 0);
  b.AddConv2D(in, filter, bias, out, Conv2DParams{});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<int8_t>{10, 20}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_EQ(runner.Output<int8_t>(0), (std::vector<int8_t>{15}));
}

TEST(QuantizedConvTest, Uint8ConvHandComputedWithZeroPoints) {
  // x: zp 128, scale 0.5: {130, 120} -> {1, -4}; w: zp 128, scale 0.25:
  // {140, 124} -> {3, -1}; real 1*3 + (-4)(-1) = 7; output scale 1, zp 100 -> 107.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::UINT8, {1, 1, 1, 2}, "input");
  b.SetQuantization(in, 0.5f, 128);
  int filter = b.AddConstUint8({1, 1, 1, 2}, {140, 124}, "filter");
  b.SetQuantization(filter, 0.25f, 128);
  int out = b.AddTensor(tfl::TensorType::UINT8, {1, 1, 1, 1}, "output");
  b.SetQuantization(out, 1.0f, 100);
  b.AddConv2D(in, filter, -1, out, Conv2DParams{});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<uint8_t>{130, 120}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_EQ(runner.Output<uint8_t>(0), (std::vector<uint8_t>{107}));
}

TEST(QuantizedConvTest, Int8FullyConnectedHandComputedWithRelu) {
  // x: zp -1, scale 1: {1, 3} -> {2, 4}. Weights per-tensor, scale 0.5:
  // unit 0 {2, -2} -> {1, -1}, unit 1 {-6, 2} -> {-3, 1}. Both units give
  // 2 - 4 = -6 + 4 = -2; output scale 1, zp 5 -> 3, or 0 -> 5 after ReLU.
  for (bool relu : {false, true}) {
    ModelBuilder b;
    int in = b.AddTensor(tfl::TensorType::INT8, {1, 2}, "input");
    b.SetQuantization(in, 1.0f, -1);
    int w = b.AddConstInt8({2, 2}, {2, -2, -6, 2}, "weights");
    b.SetQuantization(w, 0.5f, 0);
    int out = b.AddTensor(tfl::TensorType::INT8, {1, 2}, "output");
    b.SetQuantization(out, 1.0f, 5);
    b.AddFullyConnected(in, w, -1, out, relu ? Act::RELU : Act::NONE);
    b.SetInputs({in});
    b.SetOutputs({out});
    GraphRunner runner;
    ASSERT_TRUE(runner.Init(b).ok());
    ASSERT_TRUE(runner.SetInput(0, std::vector<int8_t>{1, 3}));
    ASSERT_TRUE(runner.Invoke().ok());
    EXPECT_EQ(runner.Output<int8_t>(0),
              relu ? (std::vector<int8_t>{5, 5}) : (std::vector<int8_t>{3, 3}));
  }
}

// Multiplier 1/4 (Q31 2^30, shift -1) on x = {-6, 6, -10, -2}: x / 4 = {-1.5, 1.5, -2.5,
// -0.5}. CONV_2D and FULLY_CONNECTED round as TFLite 2.9's GEMM (ruy): halves upward,
// {-1, 2, -2, 0}; DEPTHWISE_CONV_2D as TFLite's depthwise loops: away from zero, {-2, 2, -3, -1}.
TEST(QuantizedConvTest, NegativeTiesRoundAsTensorFlowLite) {
  enum class Op { kConv, kDepthwise, kFullyConnected };
  for (Op op : {Op::kConv, Op::kDepthwise, Op::kFullyConnected}) {
    const bool fc = op == Op::kFullyConnected;
    const std::vector<int32_t> shape =
        fc ? std::vector<int32_t>{4, 1} : std::vector<int32_t>{1, 1, 4, 1};
    ModelBuilder b;
    const int in = b.AddTensor(tfl::TensorType::INT8, shape, "input");
    b.SetQuantization(in, 1.0f, 0);
    const int filter = b.AddConstInt8(
        fc ? std::vector<int32_t>{1, 1} : std::vector<int32_t>{1, 1, 1, 1}, {1}, "filter");
    b.SetQuantization(filter, 1.0f, 0);
    const int out = b.AddTensor(tfl::TensorType::INT8, shape, "output");
    b.SetQuantization(out, 4.0f, 0);
    if (op == Op::kConv) b.AddConv2D(in, filter, -1, out, Conv2DParams{});
    if (op == Op::kDepthwise) b.AddDepthwiseConv2D(in, filter, -1, out, DepthwiseConv2DParams{});
    if (fc) b.AddFullyConnected(in, filter, -1, out);
    b.SetInputs({in});
    b.SetOutputs({out});
    GraphRunner runner;
    ASSERT_TRUE(runner.Init(b).ok());
    ASSERT_TRUE(runner.SetInput(0, std::vector<int8_t>{-6, 6, -10, -2}));
    ASSERT_TRUE(runner.Invoke().ok());
    EXPECT_EQ(runner.Output<int8_t>(0), op == Op::kDepthwise ? (std::vector<int8_t>{-2, 2, -3, -1})
                                                             : (std::vector<int8_t>{-1, 2, -2, 0}))
        << static_cast<int>(op);
  }
}

TEST(QuantizedConvTest, RejectsFloatBiasWithQuantizedInput) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::INT8, {1, 2}, "input");
  b.SetQuantization(in, 1.0f, 0);
  int w = b.AddConstInt8({2, 2}, {1, 2, 3, 4}, "weights");
  b.SetQuantization(w, 1.0f, 0);
  int bias = b.AddConstFloat32({2}, {1, 2}, "bias");
  int out = b.AddTensor(tfl::TensorType::INT8, {1, 2}, "output");
  b.SetQuantization(out, 1.0f, 0);
  b.AddFullyConnected(in, w, bias, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("bias"), std::string::npos) << status.message();
}

// ---- Random cases against double math.

struct ConvCase {
  int n, h, w, cin, cout, kh, kw, stride, dilation;
  tfl::Padding padding;
  Act act;
  int groups = 1;  // CONV_2D only: filter input channels = cin / groups
};

TEST(QuantizedConvTest, Conv2DMatchesDequantizedMath) {
  std::mt19937 rng(21);
  const ConvCase cases[] = {{1, 5, 5, 3, 4, 3, 3, 1, 1, tfl::Padding::SAME, Act::NONE},
                            {2, 7, 6, 5, 3, 3, 2, 2, 1, tfl::Padding::VALID, Act::RELU},
                            {1, 9, 9, 4, 6, 3, 3, 1, 2, tfl::Padding::SAME, Act::RELU6},
                            {2, 4, 4, 8, 5, 1, 1, 1, 1, tfl::Padding::VALID, Act::NONE},
                            {2, 7, 7, 6, 4, 3, 3, 2, 1, tfl::Padding::SAME, Act::RELU, 2},
                            {1, 6, 6, 8, 8, 3, 3, 1, 1, tfl::Padding::VALID, Act::NONE, 4},
                            {2, 7, 7, 8, 12, 3, 3, 1, 2, tfl::Padding::SAME, Act::RELU6, 4}};
  for (bool is_int8 : {true, false}) {
    for (const ConvCase& c : cases) {
      const int fc = c.cin / c.groups;
      QTensor input = Random(rng, {c.n, c.h, c.w, c.cin}, is_int8, 0.05f, is_int8 ? 3 : 131);
      QTensor filter = is_int8 ? RandomPerChannel(rng, {c.cout, c.kh, c.kw, fc}, 0)
                               : Random(rng, {c.cout, c.kh, c.kw, fc}, false, 0.01f, 120);
      std::vector<int32_t> bias = RandomBias(rng, c.cout);
      const int oh = ConvOutDim(c.padding, c.h, c.kh, c.stride, c.dilation);
      const int ow = ConvOutDim(c.padding, c.w, c.kw, c.stride, c.dilation);
      const int pt = PadBefore(c.padding, c.h, c.kh, c.stride, c.dilation, oh);
      const int pl = PadBefore(c.padding, c.w, c.kw, c.stride, c.dilation, ow);
      std::vector<double> real;
      for (int n = 0; n < c.n; ++n)
        for (int oy = 0; oy < oh; ++oy)
          for (int ox = 0; ox < ow; ++ox)
            for (int oc = 0; oc < c.cout; ++oc) {
              double sum = BiasReal(bias, input, filter, oc);
              for (int ky = 0; ky < c.kh; ++ky)
                for (int kx = 0; kx < c.kw; ++kx) {
                  const int iy = oy * c.stride - pt + ky * c.dilation;
                  const int ix = ox * c.stride - pl + kx * c.dilation;
                  if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                  const int g = oc / (c.cout / c.groups);
                  for (int ic = 0; ic < fc; ++ic) {
                    sum += input.Real(((n * c.h + iy) * c.w + ix) * c.cin + g * fc + ic) *
                           filter.Real(((oc * c.kh + ky) * c.kw + kx) * fc + ic);
                  }
                }
              real.push_back(sum);
            }
      const OutputQuant oq = ChooseOutput(real, is_int8);
      ModelBuilder b;
      int in = AddQuantized(b, input, is_int8, false, "input");
      int f = AddQuantized(b, filter, is_int8, true, "filter");
      int bi = b.AddConstInt32({c.cout}, bias, "bias");
      int out = b.AddTensor(is_int8 ? tfl::TensorType::INT8 : tfl::TensorType::UINT8,
                            {c.n, oh, ow, c.cout}, "output");
      b.SetQuantization(out, oq.scale, oq.zero_point);
      Conv2DParams params;
      params.padding = c.padding;
      params.stride_h = params.stride_w = c.stride;
      params.dilation_h = params.dilation_w = c.dilation;
      params.activation = c.act;
      b.AddConv2D(in, f, bi, out, params);
      b.SetInputs({in});
      b.SetOutputs({out});
      ExpectWithinOneLsb(RunQuantized(b, {&input}, is_int8), Quantize(real, oq, is_int8, c.act),
                         std::string(is_int8 ? "int8" : "uint8") + " conv k" +
                             std::to_string(c.kh) + " s" + std::to_string(c.stride) + " groups " +
                             std::to_string(c.groups));
    }
  }
}

// Runs `b` on the plain loops (1 thread) and on the fast kernels (1 and 3
// threads): the same `outputs` codes, and enough distinct ones among them
// (10, or half the outputs) that saturation hides nothing. Returns the
// fast runs compared.
int ExpectFastMatchesPlain(ModelBuilder& b, const QTensor& input, bool is_int8, int outputs,
                           const std::string& what) {
  const std::vector<int32_t> want = RunQuantized(b, {&input}, is_int8, 1, true);
  EXPECT_EQ(want.size(), static_cast<size_t>(outputs)) << what;
  std::vector<bool> seen(256, false);
  for (int32_t v : want) seen[v & 255] = true;
  EXPECT_GE(std::count(seen.begin(), seen.end(), true), std::min(10, outputs / 2))
      << what << ": too few codes";
  int compared = 0;
  for (int threads : {1, 3}) {
    EXPECT_EQ(RunQuantized(b, {&input}, is_int8, threads), want)
        << what << ", " << threads << " threads";
    ++compared;
  }
  return compared;
}

// CONV_2D and FULLY_CONNECTED on the integer GEMM (quantized_gemm.h) give
// the plain loops' codes exactly, on 1 and 3 threads: depths that are and
// are not multiples of 16, channel counts odd and even, pixel counts not a
// multiple of the 4-pixel tile, padding, stride 2, dilation, a batch of 2,
// zero points across the range, a RELU6.
TEST(QuantizedConvTest, IntegerGemmMatchesPlainLoopsBitForBit) {
  std::mt19937 rng(33);
  const ConvCase cases[] = {{1, 7, 9, 5, 7, 3, 3, 1, 1, tfl::Padding::SAME, Act::NONE},
                            {2, 9, 8, 16, 9, 3, 3, 2, 1, tfl::Padding::SAME, Act::RELU6},
                            {1, 6, 5, 20, 33, 1, 1, 1, 1, tfl::Padding::VALID, Act::NONE},
                            {1, 11, 10, 3, 16, 3, 3, 1, 2, tfl::Padding::VALID, Act::RELU},
                            {1, 13, 13, 37, 24, 5, 5, 2, 1, tfl::Padding::SAME, Act::NONE},
                            {1, 1, 1, 300, 5, 1, 1, 1, 1, tfl::Padding::VALID, Act::NONE}};
  int compared = 0;
  for (bool is_int8 : {true, false}) {
    for (const ConvCase& c : cases) {
      // Zero points around the middle of the range (so that sums spread
      // around the output's), 20 codes either way.
      std::uniform_int_distribution<int> zp(is_int8 ? -20 : 108, is_int8 ? 20 : 148);
      QTensor input = Random(rng, {c.n, c.h, c.w, c.cin}, is_int8, 0.05f, zp(rng));
      QTensor filter = is_int8 ? RandomPerChannel(rng, {c.cout, c.kh, c.kw, c.cin}, 0)
                               : Random(rng, {c.cout, c.kh, c.kw, c.cin}, false, 0.01f, zp(rng));
      const int oh = ConvOutDim(c.padding, c.h, c.kh, c.stride, c.dilation);
      const int ow = ConvOutDim(c.padding, c.w, c.kw, c.stride, c.dilation);
      ModelBuilder b;
      int in = AddQuantized(b, input, is_int8, false, "input");
      int f = AddQuantized(b, filter, is_int8, true, "filter");
      int bi = b.AddConstInt32({c.cout}, RandomBias(rng, c.cout), "bias");
      int out = b.AddTensor(is_int8 ? tfl::TensorType::INT8 : tfl::TensorType::UINT8,
                            {c.n, oh, ow, c.cout}, "output");
      // An output scale that spreads the sums over the codes (+-2 RMS): about
      // 74 RMS codes of input and weights, scales 0.05 and about 0.01.
      const double sum_rms = 0.05 * 74 * 0.01 * 74 * std::sqrt(c.kh * c.kw * c.cin);
      b.SetQuantization(out, static_cast<float>(4 * sum_rms / 255), zp(rng));
      Conv2DParams params;
      params.padding = c.padding;
      params.stride_h = params.stride_w = c.stride;
      params.dilation_h = params.dilation_w = c.dilation;
      params.activation = c.act;
      b.AddConv2D(in, f, bi, out, params);
      b.SetInputs({in});
      b.SetOutputs({out});
      const std::string what = std::string(is_int8 ? "int8" : "uint8") + " conv " +
                               std::to_string(c.h) + "x" + std::to_string(c.w) + "x" +
                               std::to_string(c.cin) + " k" + std::to_string(c.kh) + " -> " +
                               std::to_string(c.cout);
      compared += ExpectFastMatchesPlain(b, input, is_int8, c.n * oh * ow * c.cout, what);
    }
  }
  EXPECT_EQ(compared, 24);
}

struct DepthwiseCase {
  int n, h, w, cin, multiplier, k, stride, dilation;
  tfl::Padding padding;
  Act act;
};

// DEPTHWISE_CONV_2D's channel-innermost quantized loops give the plain
// loops' codes exactly, on 1 and 3 threads: multipliers 1 and 2, 3x3 and
// 5x5, stride 2, dilation, padding, a batch of 2, odd channel counts.
TEST(QuantizedConvTest, DepthwiseFastLoopsMatchPlainLoopsBitForBit) {
  std::mt19937 rng(34);
  const DepthwiseCase cases[] = {{1, 20, 18, 24, 1, 3, 1, 1, tfl::Padding::SAME, Act::RELU6},
                                 {2, 17, 19, 13, 2, 3, 2, 1, tfl::Padding::SAME, Act::NONE},
                                 {1, 21, 21, 8, 1, 5, 2, 1, tfl::Padding::VALID, Act::RELU},
                                 {1, 16, 16, 7, 3, 3, 1, 2, tfl::Padding::SAME, Act::NONE}};
  int compared = 0;
  for (bool is_int8 : {true, false}) {
    for (const DepthwiseCase& c : cases) {
      const int cout = c.cin * c.multiplier;
      std::uniform_int_distribution<int> zp(is_int8 ? -20 : 108, is_int8 ? 20 : 148);
      QTensor input = Random(rng, {c.n, c.h, c.w, c.cin}, is_int8, 0.05f, zp(rng));
      QTensor filter = is_int8 ? RandomPerChannel(rng, {1, c.k, c.k, cout}, 3)
                               : Random(rng, {1, c.k, c.k, cout}, false, 0.01f, zp(rng));
      const int oh = ConvOutDim(c.padding, c.h, c.k, c.stride, c.dilation);
      const int ow = ConvOutDim(c.padding, c.w, c.k, c.stride, c.dilation);
      ModelBuilder b;
      int in = AddQuantized(b, input, is_int8, false, "input");
      int f = AddQuantized(b, filter, is_int8, true, "filter");
      int bi = b.AddConstInt32({cout}, RandomBias(rng, cout), "bias");
      int out = b.AddTensor(is_int8 ? tfl::TensorType::INT8 : tfl::TensorType::UINT8,
                            {c.n, oh, ow, cout}, "output");
      const double sum_rms = 0.05 * 74 * 0.01 * 74 * c.k;  // sqrt(k * k) taps
      b.SetQuantization(out, static_cast<float>(4 * sum_rms / 255), zp(rng));
      DepthwiseConv2DParams params;
      params.padding = c.padding;
      params.stride_h = params.stride_w = c.stride;
      params.dilation_h = params.dilation_w = c.dilation;
      params.depth_multiplier = c.multiplier;
      params.activation = c.act;
      b.AddDepthwiseConv2D(in, f, bi, out, params);
      b.SetInputs({in});
      b.SetOutputs({out});
      const std::string what = std::string(is_int8 ? "int8" : "uint8") + " depthwise " +
                               std::to_string(c.h) + "x" + std::to_string(c.w) + "x" +
                               std::to_string(c.cin) + " x" + std::to_string(c.multiplier) + " k" +
                               std::to_string(c.k);
      compared += ExpectFastMatchesPlain(b, input, is_int8, c.n * oh * ow * cout, what);
    }
  }
  EXPECT_EQ(compared, 16);
}

// FULLY_CONNECTED on the integer GEMM gives the plain loops' codes exactly,
// on 1 and 3 threads: 1 to 9 rows (partial 4-row tiles), depths around the
// 16-value alignment, unit counts odd and even.
TEST(QuantizedConvTest, FullyConnectedIntegerGemmMatchesPlainLoopsBitForBit) {
  std::mt19937 rng(35);
  const int shapes[][3] = {{1, 300, 10}, {3, 7, 33}, {9, 64, 1}, {6, 17, 16}};
  int compared = 0;
  for (bool is_int8 : {true, false}) {
    for (const auto& shape : shapes) {
      const int rows = shape[0], depth = shape[1], units = shape[2];
      std::uniform_int_distribution<int> zp(is_int8 ? -20 : 108, is_int8 ? 20 : 148);
      QTensor input = Random(rng, {rows, depth}, is_int8, 0.05f, zp(rng));
      QTensor weights = Random(rng, {units, depth}, is_int8, 0.01f, is_int8 ? 0 : zp(rng));
      ModelBuilder b;
      int in = AddQuantized(b, input, is_int8, false, "input");
      int w = AddQuantized(b, weights, is_int8, true, "weights");
      int bi = b.AddConstInt32({units}, RandomBias(rng, units), "bias");
      int out = b.AddTensor(is_int8 ? tfl::TensorType::INT8 : tfl::TensorType::UINT8, {rows, units},
                            "output");
      const double sum_rms = 0.05 * 74 * 0.01 * 74 * std::sqrt(depth);
      b.SetQuantization(out, static_cast<float>(4 * sum_rms / 255), zp(rng));
      b.AddFullyConnected(in, w, bi, out);
      b.SetInputs({in});
      b.SetOutputs({out});
      const std::string what = std::string(is_int8 ? "int8" : "uint8") + " fully connected " +
                               std::to_string(rows) + "x" + std::to_string(depth) + " -> " +
                               std::to_string(units);
      compared += ExpectFastMatchesPlain(b, input, is_int8, rows * units, what);
    }
  }
  EXPECT_EQ(compared, 16);
}

// Quantized ADD (its per-input tables), SUB and MUL across threads: same
// shapes, a per-channel broadcast and a scalar, large enough to split; the
// codes on 3 threads are those on 1.
TEST(QuantizedConvTest, BinaryOpsGiveTheSameCodesOnAnyThreadCount) {
  std::mt19937 rng(36);
  const std::vector<int32_t> shape = {1, 40, 40, 16};
  const std::vector<std::vector<int32_t>> rhs_shapes = {shape, {1, 1, 1, 16}, {1}};
  int compared = 0;
  for (bool is_int8 : {true, false}) {
    for (tfl::BuiltinOperator code :
         {tfl::BuiltinOperator::ADD, tfl::BuiltinOperator::SUB, tfl::BuiltinOperator::MUL}) {
      for (const std::vector<int32_t>& rhs_shape : rhs_shapes) {
        std::uniform_int_distribution<int> zp(is_int8 ? -20 : 108, is_int8 ? 20 : 148);
        QTensor lhs = Random(rng, shape, is_int8, 0.05f, zp(rng));
        QTensor rhs = Random(rng, rhs_shape, is_int8, 0.03f, zp(rng));
        ModelBuilder b;
        int l = AddQuantized(b, lhs, is_int8, false, "lhs");
        int r = AddQuantized(b, rhs, is_int8, true, "rhs");
        int out =
            b.AddTensor(is_int8 ? tfl::TensorType::INT8 : tfl::TensorType::UINT8, shape, "output");
        b.SetQuantization(out, code == tfl::BuiltinOperator::MUL ? 0.2f : 0.06f, zp(rng));
        b.AddBinary(code, l, r, out);
        b.SetInputs({l});
        b.SetOutputs({out});
        const std::vector<int32_t> one = RunQuantized(b, {&lhs}, is_int8);
        ASSERT_EQ(one.size(), lhs.q.size());
        std::vector<bool> seen(256, false);
        for (int32_t v : one) seen[v & 255] = true;
        EXPECT_GE(std::count(seen.begin(), seen.end(), true), 30);
        EXPECT_EQ(RunQuantized(b, {&lhs}, is_int8, 3), one)
            << (is_int8 ? "int8 " : "uint8 ") << static_cast<int>(code) << " rhs rank "
            << rhs_shape.size();
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 18);
}

TEST(QuantizedConvTest, DepthwiseConv2DMatchesDequantizedMath) {
  std::mt19937 rng(22);
  const DepthwiseCase cases[] = {{1, 6, 6, 4, 1, 3, 1, 1, tfl::Padding::SAME, Act::NONE},
                                 {2, 7, 5, 3, 2, 3, 2, 1, tfl::Padding::VALID, Act::RELU},
                                 {1, 8, 8, 2, 3, 3, 1, 2, tfl::Padding::SAME, Act::RELU6}};
  for (bool is_int8 : {true, false}) {
    for (const DepthwiseCase& c : cases) {
      const int cout = c.cin * c.multiplier;
      QTensor input = Random(rng, {c.n, c.h, c.w, c.cin}, is_int8, 0.04f, is_int8 ? -7 : 125);
      QTensor filter = is_int8 ? RandomPerChannel(rng, {1, c.k, c.k, cout}, 3)
                               : Random(rng, {1, c.k, c.k, cout}, false, 0.01f, 130);
      std::vector<int32_t> bias = RandomBias(rng, cout);
      const int oh = ConvOutDim(c.padding, c.h, c.k, c.stride, c.dilation);
      const int ow = ConvOutDim(c.padding, c.w, c.k, c.stride, c.dilation);
      const int pt = PadBefore(c.padding, c.h, c.k, c.stride, c.dilation, oh);
      const int pl = PadBefore(c.padding, c.w, c.k, c.stride, c.dilation, ow);
      std::vector<double> real;
      for (int n = 0; n < c.n; ++n)
        for (int oy = 0; oy < oh; ++oy)
          for (int ox = 0; ox < ow; ++ox)
            for (int oc = 0; oc < cout; ++oc) {
              const int ic = oc / c.multiplier;
              double sum = BiasReal(bias, input, filter, oc);
              for (int ky = 0; ky < c.k; ++ky)
                for (int kx = 0; kx < c.k; ++kx) {
                  const int iy = oy * c.stride - pt + ky * c.dilation;
                  const int ix = ox * c.stride - pl + kx * c.dilation;
                  if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                  sum += input.Real(((n * c.h + iy) * c.w + ix) * c.cin + ic) *
                         filter.Real((ky * c.k + kx) * cout + oc);
                }
              real.push_back(sum);
            }
      const OutputQuant oq = ChooseOutput(real, is_int8);
      ModelBuilder b;
      int in = AddQuantized(b, input, is_int8, false, "input");
      int f = AddQuantized(b, filter, is_int8, true, "filter");
      int bi = b.AddConstInt32({cout}, bias, "bias");
      int out = b.AddTensor(is_int8 ? tfl::TensorType::INT8 : tfl::TensorType::UINT8,
                            {c.n, oh, ow, cout}, "output");
      b.SetQuantization(out, oq.scale, oq.zero_point);
      DepthwiseConv2DParams params;
      params.padding = c.padding;
      params.stride_h = params.stride_w = c.stride;
      params.dilation_h = params.dilation_w = c.dilation;
      params.depth_multiplier = c.multiplier;
      params.activation = c.act;
      b.AddDepthwiseConv2D(in, f, bi, out, params);
      b.SetInputs({in});
      b.SetOutputs({out});
      ExpectWithinOneLsb(
          RunQuantized(b, {&input}, is_int8), Quantize(real, oq, is_int8, c.act),
          std::string(is_int8 ? "int8" : "uint8") + " depthwise x" + std::to_string(c.multiplier));
    }
  }
}

TEST(QuantizedConvTest, FullyConnectedMatchesDequantizedMath) {
  std::mt19937 rng(23);
  struct Case {
    std::vector<int32_t> input;
    int units;
    bool keep_num_dims, per_channel;
    Act act;
  };
  const Case cases[] = {{{1, 16}, 5, false, false, Act::NONE},
                        {{3, 20}, 7, false, true, Act::RELU},
                        {{2, 3, 12}, 4, true, true, Act::RELU6},
                        {{2, 2, 10}, 3, false, false, Act::NONE}};
  for (bool is_int8 : {true, false}) {
    for (const Case& c : cases) {
      if (c.per_channel && !is_int8) continue;
      const int depth = c.input.back();
      QTensor input = Random(rng, c.input, is_int8, 0.03f, is_int8 ? 10 : 100);
      const int batches = static_cast<int>(input.size()) / depth;
      QTensor weights = c.per_channel
                            ? RandomPerChannel(rng, {c.units, depth}, 0)
                            : Random(rng, {c.units, depth}, is_int8, 0.02f, is_int8 ? 0 : 128);
      std::vector<int32_t> bias = RandomBias(rng, c.units);
      std::vector<double> real;
      for (int bt = 0; bt < batches; ++bt)
        for (int u = 0; u < c.units; ++u) {
          double sum = BiasReal(bias, input, weights, u);
          for (int k = 0; k < depth; ++k)
            sum += input.Real(bt * depth + k) * weights.Real(u * depth + k);
          real.push_back(sum);
        }
      std::vector<int32_t> out_shape = c.input;
      if (c.keep_num_dims) {
        out_shape.back() = c.units;
      } else {
        out_shape = {batches, c.units};
      }
      const OutputQuant oq = ChooseOutput(real, is_int8);
      ModelBuilder b;
      int in = AddQuantized(b, input, is_int8, false, "input");
      int w = AddQuantized(b, weights, is_int8, true, "weights");
      int bi = b.AddConstInt32({c.units}, bias, "bias");
      int out = b.AddTensor(is_int8 ? tfl::TensorType::INT8 : tfl::TensorType::UINT8, out_shape,
                            "output");
      b.SetQuantization(out, oq.scale, oq.zero_point);
      b.AddFullyConnected(in, w, bi, out, c.act, c.keep_num_dims);
      b.SetInputs({in});
      b.SetOutputs({out});
      ExpectWithinOneLsb(RunQuantized(b, {&input}, is_int8), Quantize(real, oq, is_int8, c.act),
                         std::string(is_int8 ? "int8" : "uint8") + " fc " +
                             (c.per_channel ? "per-channel" : "per-tensor"));
    }
  }
}

TEST(QuantizedConvTest, TransposeConvMatchesDequantizedMath) {
  std::mt19937 rng(24);
  struct Case {
    int n, h, w, cin, cout, k, stride;
    tfl::Padding padding;
    Act act;
  };
  const Case cases[] = {{1, 4, 4, 3, 2, 3, 2, tfl::Padding::SAME, Act::NONE},
                        {2, 3, 5, 4, 3, 2, 2, tfl::Padding::VALID, Act::RELU},
                        {1, 5, 5, 2, 4, 3, 1, tfl::Padding::SAME, Act::NONE}};
  for (bool is_int8 : {true, false}) {
    for (const Case& c : cases) {
      QTensor input = Random(rng, {c.n, c.h, c.w, c.cin}, is_int8, 0.05f, is_int8 ? -3 : 127);
      QTensor filter = is_int8 ? RandomPerChannel(rng, {c.cout, c.k, c.k, c.cin}, 0)
                               : Random(rng, {c.cout, c.k, c.k, c.cin}, false, 0.01f, 126);
      std::vector<int32_t> bias = RandomBias(rng, c.cout);
      const int oh = c.padding == tfl::Padding::SAME ? c.h * c.stride : (c.h - 1) * c.stride + c.k;
      const int ow = c.padding == tfl::Padding::SAME ? c.w * c.stride : (c.w - 1) * c.stride + c.k;
      // TFLite's padding for the transposed op: that of a forward window over the output.
      const int pt = PadBefore(c.padding, oh, c.k, c.stride, 1, c.h);
      const int pl = PadBefore(c.padding, ow, c.k, c.stride, 1, c.w);
      std::vector<double> real(static_cast<size_t>(c.n) * oh * ow * c.cout, 0.0);
      for (int n = 0; n < c.n; ++n)
        for (int oy = 0; oy < oh; ++oy)
          for (int ox = 0; ox < ow; ++ox)
            for (int oc = 0; oc < c.cout; ++oc)
              real[((n * oh + oy) * ow + ox) * c.cout + oc] = BiasReal(bias, input, filter, oc);
      for (int n = 0; n < c.n; ++n)
        for (int iy = 0; iy < c.h; ++iy)
          for (int ix = 0; ix < c.w; ++ix)
            for (int ky = 0; ky < c.k; ++ky)
              for (int kx = 0; kx < c.k; ++kx) {
                const int oy = iy * c.stride - pt + ky, ox = ix * c.stride - pl + kx;
                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                for (int oc = 0; oc < c.cout; ++oc)
                  for (int ic = 0; ic < c.cin; ++ic)
                    real[((n * oh + oy) * ow + ox) * c.cout + oc] +=
                        input.Real(((n * c.h + iy) * c.w + ix) * c.cin + ic) *
                        filter.Real(((oc * c.k + ky) * c.k + kx) * c.cin + ic);
              }
      const OutputQuant oq = ChooseOutput(real, is_int8);
      ModelBuilder b;
      int shape = b.AddConstInt32({4}, {c.n, oh, ow, c.cout}, "output_shape");
      int f = AddQuantized(b, filter, is_int8, true, "filter");
      int in = AddQuantized(b, input, is_int8, false, "input");
      int bi = b.AddConstInt32({c.cout}, bias, "bias");
      int out = b.AddTensor(is_int8 ? tfl::TensorType::INT8 : tfl::TensorType::UINT8,
                            {c.n, oh, ow, c.cout}, "output");
      b.SetQuantization(out, oq.scale, oq.zero_point);
      TransposeConvParams params;
      params.padding = c.padding;
      params.stride_h = params.stride_w = c.stride;
      params.activation = c.act;
      b.AddTransposeConv(shape, f, in, bi, out, params);
      b.SetInputs({in});
      b.SetOutputs({out});
      ExpectWithinOneLsb(
          RunQuantized(b, {&input}, is_int8), Quantize(real, oq, is_int8, c.act),
          std::string(is_int8 ? "int8" : "uint8") + " transpose conv s" + std::to_string(c.stride));
    }
  }
}

TEST(QuantizedConvTest, Int8BatchMatMulMatchesDequantizedMath) {
  std::mt19937 rng(25);
  struct Case {
    std::vector<int32_t> lhs, rhs, out;
    bool adj_x, adj_y;
  };
  const Case cases[] = {{{3, 4}, {4, 5}, {3, 5}, false, false},
                        {{2, 3, 6}, {2, 5, 6}, {2, 3, 5}, false, true},
                        {{2, 4, 3}, {4, 2}, {2, 3, 2}, true, false}};
  for (const Case& c : cases) {
    QTensor lhs = Random(rng, c.lhs, true, 0.05f, 4);
    QTensor rhs = Random(rng, c.rhs, true, 0.03f, -2);
    const int lr = static_cast<int>(c.lhs.size()), rr = static_cast<int>(c.rhs.size());
    const int m = c.out[c.out.size() - 2], n = c.out.back();
    const int k = c.adj_x ? c.lhs[lr - 2] : c.lhs[lr - 1];
    const int lhs_batches = static_cast<int>(lhs.size()) / (m * k);
    const int rhs_batches = static_cast<int>(rhs.size()) / (k * n);
    const int batches = std::max(lhs_batches, rhs_batches);
    std::vector<double> real;
    for (int bt = 0; bt < batches; ++bt) {
      const int lb = lhs_batches == 1 ? 0 : bt, rb = rhs_batches == 1 ? 0 : bt;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double sum = 0.0;
          for (int p = 0; p < k; ++p) {
            const size_t li = lb * m * k + (c.adj_x ? p * m + i : i * k + p);
            const size_t ri = rb * k * n + (c.adj_y ? j * k + p : p * n + j);
            sum += lhs.Real(li) * rhs.Real(ri);
          }
          real.push_back(sum);
        }
    }
    (void)rr;
    const OutputQuant oq = ChooseOutput(real, true);
    ModelBuilder b;
    int l = AddQuantized(b, lhs, true, false, "lhs");
    int r = AddQuantized(b, rhs, true, false, "rhs");
    int out = b.AddTensor(tfl::TensorType::INT8, c.out, "output");
    b.SetQuantization(out, oq.scale, oq.zero_point);
    const bool adj_x = c.adj_x, adj_y = c.adj_y;
    b.AddOperator(tfl::BuiltinOperator::BATCH_MATMUL, {l, r}, {out},
                  tfl::BuiltinOptions::BatchMatMulOptions,
                  [=](flatbuffers::FlatBufferBuilder& fbb) {
                    return tfl::CreateBatchMatMulOptions(fbb, adj_x, adj_y).Union();
                  });
    b.SetInputs({l, r});
    b.SetOutputs({out});
    ExpectWithinOneLsb(RunQuantized(b, {&lhs, &rhs}, true), Quantize(real, oq, true, Act::NONE),
                       "int8 batch matmul");
  }
}

}  // namespace
}  // namespace dfarm::testing
