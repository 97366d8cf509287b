// Quantized (int8/uint8) paths of the reference kernels. Expected values are
// worked out by hand, or by doing the op in float on the dequantized inputs
// and quantizing the result (within 1 LSB, as TFLite's integer arithmetic
// rounds differently from float).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <type_traits>

#include "runtime/kernels/kernels.h"
#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using Act = tfl::ActivationFunctionType;
using Op = tfl::BuiltinOperator;

struct QParams {
  float scale;
  int32_t zero_point;
};

template <typename T>
constexpr tfl::TensorType TypeOf() {
  return std::is_same_v<T, int8_t> ? tfl::TensorType::INT8 : tfl::TensorType::UINT8;
}

template <typename T>
int AddQTensor(ModelBuilder& b, std::vector<int32_t> shape, QParams q) {
  int t = b.AddTensor(TypeOf<T>(), std::move(shape));
  b.SetQuantization(t, q.scale, q.zero_point);
  return t;
}

// Plain double math, independent of the runtime's helpers.
double Real(int32_t q, QParams p) { return p.scale * (static_cast<double>(q) - p.zero_point); }

template <typename T>
int32_t Quant(double real, QParams p) {
  const double q = std::round(real / p.scale) + p.zero_point;
  return static_cast<int32_t>(
      std::clamp<double>(q, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
}

template <typename T>
std::vector<T> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(std::numeric_limits<T>::min(),
                                          std::numeric_limits<T>::max());
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// Every element of `actual` is within `tolerance` LSB of `expected`.
template <typename T>
void ExpectNearLsb(const std::vector<T>& actual, const std::vector<int32_t>& expected,
                   int tolerance = 1) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_LE(std::abs(static_cast<int32_t>(actual[i]) - expected[i]), tolerance)
        << "element " << i << ": got " << int(actual[i]) << ", expected " << expected[i];
  }
}

// Builds, loads and runs a graph whose inputs are set by `set_inputs`;
// returns output 0 as T (empty, with a failure, when something fails).
template <typename T>
std::vector<T> RunGraph(const ModelBuilder& b,
                        const std::function<void(GraphRunner&)>& set_inputs) {
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  set_inputs(runner);
  status = runner.Invoke();
  EXPECT_TRUE(status.ok()) << status.message();
  return runner.Output<T>(0);
}

runtime::Status InitStatus(const ModelBuilder& b) {
  GraphRunner runner;
  return runner.Init(b);
}

// ---------------------------------------------------------------- QUANTIZE

TEST(QuantizeOpTest, Float32ToInt8ByHand) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {6});
  int out = AddQTensor<int8_t>(b, {6}, {0.5f, -3});
  b.AddOperator(Op::QUANTIZE, {in}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<int8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<float>{0.0f, 1.25f, -1.25f, 0.2f, 100.0f, -100.0f});
  });
  // round(x / 0.5) - 3, halves away from zero, saturated.
  EXPECT_THAT(got, ElementsAre(-3, 0, -6, -3, 127, -128));
}

TEST(QuantizeOpTest, Float32ToUint8ByHand) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = AddQTensor<uint8_t>(b, {4}, {0.25f, 128});
  b.AddOperator(Op::QUANTIZE, {in}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<uint8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<float>{0.0f, 1.0f, -32.0f, 40.0f});
  });
  EXPECT_THAT(got, ElementsAre(128, 132, 0, 255));
}

template <typename In, typename Out>
void CheckRequantize(QParams in_q, QParams out_q) {
  ModelBuilder b;
  int in = AddQTensor<In>(b, {256}, in_q);
  int out = AddQTensor<Out>(b, {256}, out_q);
  b.AddOperator(Op::QUANTIZE, {in}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  std::vector<In> values(256);
  std::vector<int32_t> expected;
  for (int i = 0; i < 256; ++i) {
    values[i] = static_cast<In>(std::numeric_limits<In>::min() + i);
    expected.push_back(Quant<Out>(Real(values[i], in_q), out_q));
  }
  auto got = RunGraph<Out>(b, [&](GraphRunner& r) { r.SetInput(0, values); });
  ExpectNearLsb(got, expected);
}

TEST(QuantizeOpTest, RequantizeInt8ToUint8AndBack) {
  CheckRequantize<int8_t, uint8_t>({0.1f, -5}, {0.1f, 123});   // zero point shift only
  CheckRequantize<int8_t, uint8_t>({0.1f, -5}, {0.07f, 100});  // scale change
  CheckRequantize<uint8_t, int8_t>({0.02f, 128}, {0.05f, 0});
  CheckRequantize<int8_t, int8_t>({0.5f, 0}, {0.125f, 10});  // multiplier > 1, saturates
}

TEST(QuantizeOpTest, RequantizeExactByHand) {
  // Same scale, zero points -128 -> 0: exactly q + 128.
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {3}, {0.3f, -128});
  int out = AddQTensor<uint8_t>(b, {3}, {0.3f, 0});
  b.AddOperator(Op::QUANTIZE, {in}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<uint8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<int8_t>{-128, 0, 127});
  });
  EXPECT_THAT(got, ElementsAre(0, 128, 255));
}

TEST(QuantizeOpTest, UnsupportedDTypesAreRefused) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::INT16, {2});
  b.SetQuantization(in, 0.1f, 0);
  int out = AddQTensor<int8_t>(b, {2}, {0.1f, 0});
  b.AddOperator(Op::QUANTIZE, {in}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  runtime::Status status = InitStatus(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("int16 to int8 is not supported"));

  ModelBuilder f;
  int fin = f.AddTensor(tfl::TensorType::FLOAT32, {2});
  int fout = f.AddTensor(tfl::TensorType::INT8, {2});  // no quantization parameters
  f.AddOperator(Op::QUANTIZE, {fin}, {fout});
  f.SetInputs({fin});
  f.SetOutputs({fout});
  status = InitStatus(f);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("output (int8) has no quantization parameters"));
}

TEST(DequantizeOpTest, Int8AndUint8ByHand) {
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {3}, {0.5f, -2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {3});
  b.AddDequantize(in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<float>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<int8_t>{-2, 0, 127});
  });
  EXPECT_THAT(got, ElementsAre(0.0f, 1.0f, 64.5f));

  ModelBuilder u;
  int uin = AddQTensor<uint8_t>(u, {2}, {0.25f, 128});
  int uout = u.AddTensor(tfl::TensorType::FLOAT32, {2});
  u.AddDequantize(uin, uout);
  u.SetInputs({uin});
  u.SetOutputs({uout});
  auto ugot = RunGraph<float>(u, [](GraphRunner& r) {
    r.SetInput(0, std::vector<uint8_t>{0, 255});
  });
  EXPECT_THAT(ugot, ElementsAre(-32.0f, 31.75f));
}

// ------------------------------------------------------------------ binary

template <typename T>
void CheckBinary(Op code, QParams qa, QParams qb, QParams qo, std::vector<int32_t> shape_a,
                 std::vector<int32_t> shape_b, std::vector<int32_t> shape_o,
                 const std::function<double(double, double)>& f, Act act = Act::NONE) {
  ModelBuilder b;
  int a = AddQTensor<T>(b, shape_a, qa);
  int c = AddQTensor<T>(b, shape_b, qb);
  int o = AddQTensor<T>(b, shape_o, qo);
  b.AddBinary(code, a, c, o, act);
  b.SetInputs({a, c});
  b.SetOutputs({o});
  auto count = [](const std::vector<int32_t>& s) {
    size_t n = 1;
    for (int32_t d : s) n *= d;
    return n;
  };
  std::vector<T> va = RandomValues<T>(count(shape_a), 1);
  std::vector<T> vb = RandomValues<T>(count(shape_b), 2);
  // Broadcast by hand (shapes are equal, or b is [C] with a [.., C], or b has one element).
  std::vector<int32_t> expected;
  const size_t n = count(shape_o);
  for (size_t i = 0; i < n; ++i) {
    const T x = va[i % va.size()];
    const T y = vb[i % vb.size()];
    double r = f(Real(x, qa), Real(y, qb));
    if (act == Act::RELU) r = std::max(r, 0.0);
    if (act == Act::RELU6) r = std::clamp(r, 0.0, 6.0);
    expected.push_back(Quant<T>(r, qo));
  }
  auto got = RunGraph<T>(b, [&](GraphRunner& r) {
    r.SetInput(0, va);
    r.SetInput(1, vb);
  });
  ExpectNearLsb(got, expected);
}

TEST(QuantizedBinaryTest, AddInt8MatchesFloat) {
  CheckBinary<int8_t>(Op::ADD, {0.05f, -10}, {0.02f, 5}, {0.06f, 3}, {2, 3, 8}, {2, 3, 8},
                      {2, 3, 8}, [](double x, double y) { return x + y; });
  CheckBinary<int8_t>(
      Op::ADD, {0.05f, -10}, {0.1f, 0}, {0.08f, -20}, {2, 3, 8}, {8}, {2, 3, 8},
      [](double x, double y) { return x + y; }, Act::RELU6);
}

TEST(QuantizedBinaryTest, AddUint8MatchesFloat) {
  CheckBinary<uint8_t>(
      Op::ADD, {0.03f, 128}, {0.04f, 100}, {0.07f, 120}, {4, 16}, {1}, {4, 16},
      [](double x, double y) { return x + y; }, Act::RELU);
}

TEST(QuantizedBinaryTest, AddByHand) {
  // 0.5 * (q - 0) + 0.5 * (q - 0) on scale 1: 3 + 4 -> 0.5 * 7 = 3.5, rounds to 4 (odd).
  ModelBuilder b;
  int a = AddQTensor<int8_t>(b, {3}, {0.5f, 0});
  int c = AddQTensor<int8_t>(b, {3}, {0.5f, 0});
  int o = AddQTensor<int8_t>(b, {3}, {1.0f, 0});
  b.AddAdd(a, c, o);
  b.SetInputs({a, c});
  b.SetOutputs({o});
  auto got = RunGraph<int8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<int8_t>{3, 100, -100});
    r.SetInput(1, std::vector<int8_t>{4, 100, -100});
  });
  EXPECT_THAT(got, ElementsAre(4, 100, -100));
}

TEST(QuantizedBinaryTest, SubMatchesFloat) {
  CheckBinary<int8_t>(Op::SUB, {0.05f, -10}, {0.02f, 5}, {0.06f, 3}, {3, 8}, {3, 8}, {3, 8},
                      [](double x, double y) { return x - y; });
  CheckBinary<uint8_t>(Op::SUB, {0.05f, 128}, {0.05f, 128}, {0.1f, 128}, {3, 8}, {8}, {3, 8},
                       [](double x, double y) { return x - y; });
}

TEST(QuantizedBinaryTest, MulMatchesFloat) {
  CheckBinary<int8_t>(Op::MUL, {0.05f, -10}, {0.02f, 5}, {0.03f, 3}, {3, 8}, {3, 8}, {3, 8},
                      [](double x, double y) { return x * y; });
  CheckBinary<uint8_t>(
      Op::MUL, {0.1f, 128}, {0.01f, 0}, {0.05f, 128}, {2, 8}, {8}, {2, 8},
      [](double x, double y) { return x * y; }, Act::RELU);
}

TEST(QuantizedBinaryTest, MaximumMinimumCompareQuantizedValues) {
  CheckBinary<int8_t>(Op::MAXIMUM, {0.1f, 3}, {0.1f, 3}, {0.1f, 3}, {16}, {16}, {16},
                      [](double x, double y) { return std::max(x, y); });
  CheckBinary<uint8_t>(Op::MINIMUM, {0.1f, 3}, {0.1f, 3}, {0.1f, 3}, {2, 8}, {8}, {2, 8},
                       [](double x, double y) { return std::min(x, y); });
  ModelBuilder b;
  int a = AddQTensor<int8_t>(b, {2}, {0.1f, 0});
  int c = AddQTensor<int8_t>(b, {2}, {0.2f, 0});
  int o = AddQTensor<int8_t>(b, {2}, {0.1f, 0});
  b.AddBinary(Op::MAXIMUM, a, c, o);
  b.SetInputs({a, c});
  b.SetOutputs({o});
  runtime::Status status = InitStatus(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("different scales or zero points"));
}

TEST(QuantizedBinaryTest, PreluMatchesFloat) {
  CheckBinary<int8_t>(Op::PRELU, {0.05f, -10}, {0.01f, 0}, {0.04f, -20}, {2, 8}, {8}, {2, 8},
                      [](double x, double alpha) { return x >= 0 ? x : alpha * x; });
  CheckBinary<uint8_t>(Op::PRELU, {0.05f, 128}, {0.004f, 128}, {0.04f, 120}, {2, 8}, {8}, {2, 8},
                       [](double x, double alpha) { return x >= 0 ? x : alpha * x; });
}

TEST(QuantizedBinaryTest, UnsupportedDTypesAreRefused) {
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::INT16, {2});
  int c = b.AddTensor(tfl::TensorType::INT16, {2});
  int o = b.AddTensor(tfl::TensorType::INT16, {2});
  b.AddBinary(Op::MUL, a, c, o);
  b.SetInputs({a, c});
  b.SetOutputs({o});
  runtime::Status status = InitStatus(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("MUL"));
  EXPECT_THAT(status.message(), HasSubstr("int16 inputs are not supported"));

  ModelBuilder d;
  int x = AddQTensor<int8_t>(d, {2}, {0.1f, 0});
  int y = AddQTensor<int8_t>(d, {2}, {0.1f, 0});
  int z = AddQTensor<int8_t>(d, {2}, {0.1f, 0});
  d.AddBinary(Op::DIV, x, y, z);
  d.SetInputs({x, y});
  d.SetOutputs({z});
  status = InitStatus(d);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("int8 inputs are not supported"));
}

// ------------------------------------------------------------------- unary

// Runs a one-input op over every value of T and checks it against `f` in
// double math within `tolerance` LSB.
template <typename T>
void CheckUnary(const std::function<void(ModelBuilder&, int, int)>& add_op, QParams qi, QParams qo,
                const std::function<double(double)>& f, int tolerance = 1) {
  ModelBuilder b;
  int in = AddQTensor<T>(b, {256}, qi);
  int out = AddQTensor<T>(b, {256}, qo);
  add_op(b, in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  std::vector<T> values(256);
  std::vector<int32_t> expected;
  for (int i = 0; i < 256; ++i) {
    values[i] = static_cast<T>(std::numeric_limits<T>::min() + i);
    expected.push_back(Quant<T>(f(Real(values[i], qi)), qo));
  }
  auto got = RunGraph<T>(b, [&](GraphRunner& r) { r.SetInput(0, values); });
  ExpectNearLsb(got, expected, tolerance);
}

std::function<void(ModelBuilder&, int, int)> UnaryOp(Op code) {
  return [code](ModelBuilder& b, int in, int out) { b.AddUnary(code, in, out); };
}

TEST(QuantizedActivationTest, ReluFamilyRequantizes) {
  auto relu = [](double x) { return std::max(x, 0.0); };
  auto relu6 = [](double x) { return std::clamp(x, 0.0, 6.0); };
  auto relu1 = [](double x) { return std::clamp(x, -1.0, 1.0); };
  CheckUnary<int8_t>(UnaryOp(Op::RELU), {0.05f, -10}, {0.05f, -10}, relu);
  CheckUnary<int8_t>(UnaryOp(Op::RELU), {0.05f, -10}, {0.03f, -128}, relu);
  CheckUnary<uint8_t>(UnaryOp(Op::RELU6), {0.1f, 128}, {0.025f, 0}, relu6);
  CheckUnary<int8_t>(UnaryOp(Op::RELU6), {0.1f, 0}, {0.1f, 0}, relu6);
  CheckUnary<int8_t>(UnaryOp(Op::RELU_N1_TO_1), {0.02f, 7}, {0.01f, 0}, relu1);
  CheckUnary<uint8_t>(UnaryOp(Op::RELU_N1_TO_1), {0.02f, 128}, {0.01f, 128}, relu1);
}

TEST(QuantizedActivationTest, ReluByHand) {
  // Same parameters: values below the zero point become the zero point.
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {4}, {0.5f, 3});
  int out = AddQTensor<int8_t>(b, {4}, {0.5f, 3});
  b.AddUnary(Op::RELU6, in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<int8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<int8_t>{-128, 2, 10, 127});
  });
  EXPECT_THAT(got, ElementsAre(3, 3, 10, 15));  // 6 / 0.5 + 3 = 15
}

TEST(QuantizedUnaryTest, LogisticAndTanh) {
  auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  auto tanh = [](double x) { return std::tanh(x); };
  CheckUnary<int8_t>(UnaryOp(Op::LOGISTIC), {0.1f, 5}, {1.0f / 256, -128}, sigmoid);
  CheckUnary<uint8_t>(UnaryOp(Op::LOGISTIC), {0.06f, 120}, {1.0f / 256, 0}, sigmoid);
  CheckUnary<int8_t>(UnaryOp(Op::TANH), {0.03f, -3}, {1.0f / 128, 0}, tanh);
  CheckUnary<uint8_t>(UnaryOp(Op::TANH), {0.03f, 128}, {1.0f / 128, 128}, tanh);
}

TEST(QuantizedUnaryTest, LogisticByHand) {
  // sigmoid(0) = 0.5 -> 128 - 128 = 0; large inputs saturate to 1 -> 256 - 128, clamped to 127.
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {3}, {0.5f, 0});
  int out = AddQTensor<int8_t>(b, {3}, {1.0f / 256, -128});
  b.AddUnary(Op::LOGISTIC, in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<int8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<int8_t>{0, 127, -128});
  });
  EXPECT_THAT(got, ElementsAre(0, 127, -128));
}

TEST(QuantizedUnaryTest, LeakyRelu) {
  auto add = [](ModelBuilder& b, int in, int out) { b.AddLeakyRelu(in, out, 0.2f); };
  auto f = [](double x) { return x >= 0 ? x : 0.2 * x; };
  CheckUnary<int8_t>(add, {0.05f, -10}, {0.04f, 20}, f);
  CheckUnary<uint8_t>(add, {0.05f, 128}, {0.05f, 100}, f);
}

TEST(QuantizedUnaryTest, HardSwish) {
  auto f = [](double x) { return x * std::clamp(x + 3.0, 0.0, 6.0) / 6.0; };
  CheckUnary<int8_t>(UnaryOp(Op::HARD_SWISH), {0.05f, -10}, {0.03f, -80}, f);
  CheckUnary<uint8_t>(UnaryOp(Op::HARD_SWISH), {0.1f, 128}, {0.08f, 20}, f);
  CheckUnary<int8_t>(UnaryOp(Op::HARD_SWISH), {0.01f, 0}, {0.01f, 0}, f);
}

TEST(QuantizedUnaryTest, UnsupportedOpIsRefused) {
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {2}, {0.1f, 0});
  int out = AddQTensor<int8_t>(b, {2}, {0.1f, 0});
  b.AddUnary(Op::EXP, in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  runtime::Status status = InitStatus(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("int8 input is not supported"));
}

// ----------------------------------------------------------------- pooling

template <typename T>
void CheckPool(Op code, QParams q, Act act) {
  // 1x5x5x2 input, 3x3 window, stride 2, SAME padding: out 3x3; edge windows are clipped.
  ModelBuilder b;
  int in = AddQTensor<T>(b, {1, 5, 5, 2}, q);
  int out = AddQTensor<T>(b, {1, 3, 3, 2}, q);
  Pool2DParams p;
  p.padding = tfl::Padding::SAME;
  p.stride_h = p.stride_w = 2;
  p.filter_h = p.filter_w = 3;
  p.activation = act;
  b.AddPool2D(code, in, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  std::vector<T> values = RandomValues<T>(50, 7);
  std::vector<int32_t> expected;
  for (int oy = 0; oy < 3; ++oy) {
    for (int ox = 0; ox < 3; ++ox) {
      for (int c = 0; c < 2; ++c) {
        // SAME: pad_total = (3 - 1) * 2 + 3 - 5 = 2, pad_before = 1.
        double acc = code == Op::MAX_POOL_2D ? -1e300 : 0.0;
        int count = 0;
        for (int y = oy * 2 - 1; y < oy * 2 + 2; ++y) {
          for (int x = ox * 2 - 1; x < ox * 2 + 2; ++x) {
            if (y < 0 || y >= 5 || x < 0 || x >= 5) continue;
            double v = Real(values[(y * 5 + x) * 2 + c], q);
            acc = code == Op::MAX_POOL_2D ? std::max(acc, v) : acc + v;
            ++count;
          }
        }
        if (code == Op::AVERAGE_POOL_2D) acc /= count;
        if (act == Act::RELU) acc = std::max(acc, 0.0);
        if (act == Act::RELU6) acc = std::clamp(acc, 0.0, 6.0);
        expected.push_back(Quant<T>(acc, q));
      }
    }
  }
  auto got = RunGraph<T>(b, [&](GraphRunner& r) { r.SetInput(0, values); });
  // Max pooling picks an input value, so it is exact.
  ExpectNearLsb(got, expected, code == Op::MAX_POOL_2D ? 0 : 1);
}

TEST(QuantizedPoolTest, AverageAndMax) {
  CheckPool<int8_t>(Op::AVERAGE_POOL_2D, {0.05f, -7}, Act::NONE);
  CheckPool<int8_t>(Op::AVERAGE_POOL_2D, {0.05f, -7}, Act::RELU6);
  CheckPool<uint8_t>(Op::AVERAGE_POOL_2D, {0.1f, 128}, Act::RELU);
  CheckPool<int8_t>(Op::MAX_POOL_2D, {0.05f, 9}, Act::NONE);
  CheckPool<uint8_t>(Op::MAX_POOL_2D, {0.05f, 130}, Act::RELU);
}

TEST(QuantizedPoolTest, AverageRoundsHalfAwayFromZero) {
  // Windows {1,2} -> 1.5 -> 2 and {-1,-2} -> -1.5 -> -2.
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {1, 1, 4, 1}, {1.0f, 0});
  int out = AddQTensor<int8_t>(b, {1, 1, 2, 1}, {1.0f, 0});
  Pool2DParams p;
  p.stride_w = 2;
  p.filter_w = 2;
  b.AddPool2D(Op::AVERAGE_POOL_2D, in, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<int8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<int8_t>{1, 2, -1, -2});
  });
  EXPECT_THAT(got, ElementsAre(2, -2));
}

// ------------------------------------------------------------------ reduce

template <typename T>
void CheckReduce(Op code, QParams qi, QParams qo) {
  // [2,3,4] reduced over axes {0, 2} with keep_dims: [1,3,1].
  ModelBuilder b;
  int in = AddQTensor<T>(b, {2, 3, 4}, qi);
  int axes = b.AddConstInt32({2}, {0, -1});
  int out = AddQTensor<T>(b, {1, 3, 1}, qo);
  b.AddReducer(code, in, axes, out, true);
  b.SetInputs({in});
  b.SetOutputs({out});
  std::vector<T> values = RandomValues<T>(24, 11);
  std::vector<int32_t> expected;
  for (int j = 0; j < 3; ++j) {
    double acc = code == Op::REDUCE_MAX ? -1e300 : 0.0;
    for (int i = 0; i < 2; ++i) {
      for (int k = 0; k < 4; ++k) {
        double v = Real(values[(i * 3 + j) * 4 + k], qi);
        acc = code == Op::REDUCE_MAX ? std::max(acc, v) : acc + v;
      }
    }
    if (code == Op::MEAN) acc /= 8;
    expected.push_back(Quant<T>(acc, qo));
  }
  auto got = RunGraph<T>(b, [&](GraphRunner& r) { r.SetInput(0, values); });
  ExpectNearLsb(got, expected);
}

TEST(QuantizedReduceTest, MeanSumMax) {
  CheckReduce<int8_t>(Op::MEAN, {0.05f, -7}, {0.05f, -7});
  CheckReduce<int8_t>(Op::MEAN, {0.05f, -7}, {0.02f, 10});
  CheckReduce<uint8_t>(Op::MEAN, {0.1f, 128}, {0.03f, 120});
  CheckReduce<int8_t>(Op::SUM, {0.01f, 3}, {0.08f, 0});
  CheckReduce<uint8_t>(Op::SUM, {0.01f, 128}, {0.1f, 128});
  CheckReduce<int8_t>(Op::REDUCE_MAX, {0.05f, 2}, {0.05f, 2});
  CheckReduce<uint8_t>(Op::REDUCE_MAX, {0.05f, 2}, {0.05f, 2});
}

TEST(QuantizedReduceTest, MeanByHand) {
  // On the input's scale and zero point, TFLite 2.9 takes the integer mean,
  // truncated: mean(1, 2, 1, 2) = 1.5 -> 1, mean(-4, -5, -6, -7) = -5.5 -> -5
  // (tests/tflite checks every MEAN path against TFLite itself).
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {2, 4}, {1.0f, 0});
  int axes = b.AddConstInt32({1}, {1});
  int out = AddQTensor<int8_t>(b, {2}, {1.0f, 0});
  b.AddReducer(Op::MEAN, in, axes, out, false);
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<int8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<int8_t>{1, 2, 1, 2, -4, -5, -6, -7});
  });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], -5);
}

// ----------------------------------------------------------------- softmax

template <typename T>
void CheckSoftmax(QParams qi, float beta) {
  const QParams qo = {1.0f / 256, std::is_same_v<T, int8_t> ? -128 : 0};
  ModelBuilder b;
  int in = AddQTensor<T>(b, {3, 10}, qi);
  int out = AddQTensor<T>(b, {3, 10}, qo);
  b.AddOperator(Op::SOFTMAX, {in}, {out}, tfl::BuiltinOptions::SoftmaxOptions,
                [beta](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateSoftmaxOptions(fbb, beta).Union();
                });
  b.SetInputs({in});
  b.SetOutputs({out});
  std::vector<T> values = RandomValues<T>(30, 5);
  std::vector<int32_t> expected;
  for (int r = 0; r < 3; ++r) {
    double max = -1e300, sum = 0;
    for (int j = 0; j < 10; ++j) max = std::max(max, Real(values[r * 10 + j], qi));
    for (int j = 0; j < 10; ++j) sum += std::exp(beta * (Real(values[r * 10 + j], qi) - max));
    for (int j = 0; j < 10; ++j) {
      expected.push_back(Quant<T>(std::exp(beta * (Real(values[r * 10 + j], qi) - max)) / sum, qo));
    }
  }
  auto got = RunGraph<T>(b, [&](GraphRunner& r) { r.SetInput(0, values); });
  ExpectNearLsb(got, expected);
}

TEST(QuantizedSoftmaxTest, MatchesFloat) {
  CheckSoftmax<int8_t>({0.05f, -3}, 1.0f);
  CheckSoftmax<int8_t>({0.1f, 0}, 0.5f);
  CheckSoftmax<uint8_t>({0.03f, 128}, 1.0f);
}

TEST(QuantizedSoftmaxTest, OutputParametersAreChecked) {
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {4}, {0.1f, 0});
  int out = AddQTensor<int8_t>(b, {4}, {1.0f / 256, 0});
  b.AddOperator(Op::SOFTMAX, {in}, {out}, tfl::BuiltinOptions::SoftmaxOptions,
                [](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateSoftmaxOptions(fbb, 1.0f).Union();
                });
  b.SetInputs({in});
  b.SetOutputs({out});
  runtime::Status status = InitStatus(b);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("scale 1/256 and zero point -128"));
}

// ----------------------------------------------------------- data movement

template <typename T>
void CheckResizeBilinear(int in_size, int out_size, bool align_corners, bool half_pixel) {
  const QParams q = {0.05f, std::is_same_v<T, int8_t> ? -3 : 120};
  ModelBuilder b;
  int in = AddQTensor<T>(b, {1, in_size, in_size, 2}, q);
  int size = b.AddConstInt32({2}, {out_size, out_size});
  int out = AddQTensor<T>(b, {1, out_size, out_size, 2}, q);
  b.AddResize(Op::RESIZE_BILINEAR, in, size, out, align_corners, half_pixel);
  b.SetInputs({in});
  b.SetOutputs({out});
  std::vector<T> values = RandomValues<T>(in_size * in_size * 2, 3);
  // TFLite's float formulas, in double.
  const double scale = align_corners && out_size > 1 ? double(in_size - 1) / (out_size - 1)
                                                     : double(in_size) / out_size;
  auto source = [&](int o, int* lo, int* hi) {
    double x = half_pixel ? (o + 0.5) * scale - 0.5 : o * scale;
    *lo = std::max(static_cast<int>(std::floor(x)), 0);
    *hi = std::min(static_cast<int>(std::ceil(x)), in_size - 1);
    return x - *lo;
  };
  std::vector<int32_t> expected;
  for (int y = 0; y < out_size; ++y) {
    for (int x = 0; x < out_size; ++x) {
      int y0, y1, x0, x1;
      double fy = source(y, &y0, &y1), fx = source(x, &x0, &x1);
      for (int c = 0; c < 2; ++c) {
        auto v = [&](int yy, int xx) { return Real(values[(yy * in_size + xx) * 2 + c], q); };
        double r = v(y0, x0) * (1 - fy) * (1 - fx) + v(y1, x0) * fy * (1 - fx) +
                   v(y0, x1) * (1 - fy) * fx + v(y1, x1) * fy * fx;
        expected.push_back(Quant<T>(r, q));
      }
    }
  }
  auto got = RunGraph<T>(b, [&](GraphRunner& r) { r.SetInput(0, values); });
  ExpectNearLsb(got, expected);
}

TEST(QuantizedDataMovementTest, ResizeBilinear) {
  CheckResizeBilinear<int8_t>(4, 8, false, false);
  CheckResizeBilinear<int8_t>(4, 8, false, true);
  CheckResizeBilinear<uint8_t>(3, 5, true, false);
  CheckResizeBilinear<uint8_t>(8, 4, false, true);
}

TEST(QuantizedDataMovementTest, ResizeBilinearRoundsByHand) {
  // 1x1x2x1 -> 1x1x4x1, half-pixel: positions -0.25, 0.25, 0.75, 1.25 -> clamped taps.
  // Row {0, 3}: 0, 0.75 -> 1, 2.25 -> 2, 3.
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {1, 1, 2, 1}, {1.0f, 0});
  int size = b.AddConstInt32({2}, {1, 4});
  int out = AddQTensor<int8_t>(b, {1, 1, 4, 1}, {1.0f, 0});
  b.AddResize(Op::RESIZE_BILINEAR, in, size, out, false, true);
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<int8_t>(b, [](GraphRunner& r) { r.SetInput(0, std::vector<int8_t>{0, 3}); });
  EXPECT_THAT(got, ElementsAre(0, 1, 2, 3));
}

TEST(QuantizedDataMovementTest, ResizeNearestCopiesValues) {
  ModelBuilder b;
  int in = AddQTensor<uint8_t>(b, {1, 2, 2, 1}, {0.1f, 7});
  int size = b.AddConstInt32({2}, {4, 4});
  int out = AddQTensor<uint8_t>(b, {1, 4, 4, 1}, {0.1f, 7});
  b.AddResize(Op::RESIZE_NEAREST_NEIGHBOR, in, size, out, false, false);
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<uint8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<uint8_t>{1, 2, 3, 4});
  });
  EXPECT_THAT(got, ElementsAreArray({1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(QuantizedDataMovementTest, ConcatenationRequantizesInputs) {
  const QParams qa = {0.1f, 0}, qb = {0.05f, -20}, qo = {0.1f, 0};
  ModelBuilder b;
  int a = AddQTensor<int8_t>(b, {2, 2}, qa);
  int c = AddQTensor<int8_t>(b, {2, 3}, qb);
  int o = AddQTensor<int8_t>(b, {2, 5}, qo);
  b.AddConcatenation({a, c}, o, 1);
  b.SetInputs({a, c});
  b.SetOutputs({o});
  std::vector<int8_t> va = {1, -2, 3, 127};
  std::vector<int8_t> vb = {-20, 0, 127, -128, 21, 22};
  std::vector<int32_t> expected;
  for (int row = 0; row < 2; ++row) {
    for (int j = 0; j < 2; ++j) expected.push_back(va[row * 2 + j]);  // same params: copied
    for (int j = 0; j < 3; ++j) expected.push_back(Quant<int8_t>(Real(vb[row * 3 + j], qb), qo));
  }
  auto got = RunGraph<int8_t>(b, [&](GraphRunner& r) {
    r.SetInput(0, va);
    r.SetInput(1, vb);
  });
  ExpectNearLsb(got, expected, 0);  // 0.5 * (q + 20): exact halves round away from zero
}

TEST(QuantizedDataMovementTest, PadUsesTheZeroPoint) {
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {1, 2}, {0.5f, -5});
  int paddings = b.AddConstInt32({2, 2}, {0, 0, 1, 2});
  int out = AddQTensor<int8_t>(b, {1, 5}, {0.5f, -5});
  b.AddPad(in, paddings, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<int8_t>(b, [](GraphRunner& r) { r.SetInput(0, std::vector<int8_t>{7, 9}); });
  EXPECT_THAT(got, ElementsAre(-5, 7, 9, -5, -5));

  ModelBuilder u;
  int uin = AddQTensor<uint8_t>(u, {3}, {0.5f, 128});
  int up = u.AddConstInt32({1, 2}, {2, 0});
  int uout = AddQTensor<uint8_t>(u, {5}, {0.5f, 128});
  u.AddPad(uin, up, uout);
  u.SetInputs({uin});
  u.SetOutputs({uout});
  auto ugot = RunGraph<uint8_t>(u, [](GraphRunner& r) {
    r.SetInput(0, std::vector<uint8_t>{1, 2, 3});
  });
  EXPECT_THAT(ugot, ElementsAre(128, 128, 1, 2, 3));
}

TEST(QuantizedDataMovementTest, ArgMaxAndArgMinOnQuantizedValues) {
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {2, 4}, {0.1f, 0});
  int axis = b.AddConstInt32({1}, {1});
  int out = b.AddTensor(tfl::TensorType::INT32, {2});
  b.AddOperator(Op::ARG_MAX, {in, axis}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<int32_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<int8_t>{-5, 100, -128, 100, -1, -2, -3, -128});
  });
  EXPECT_THAT(got, ElementsAre(1, 0));

  ModelBuilder u;
  int uin = AddQTensor<uint8_t>(u, {4}, {0.1f, 128});
  int uaxis = u.AddConstInt32({1}, {0});
  int uout = u.AddTensor(tfl::TensorType::INT32, {});
  u.AddOperator(Op::ARG_MIN, {uin, uaxis}, {uout});
  u.SetInputs({uin});
  u.SetOutputs({uout});
  auto ugot = RunGraph<int32_t>(u, [](GraphRunner& r) {
    r.SetInput(0, std::vector<uint8_t>{200, 3, 255, 3});
  });
  EXPECT_THAT(ugot, ElementsAre(1));
}

TEST(QuantizedDataMovementTest, ReshapeAndTransposeKeepValues) {
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {2, 3}, {0.1f, 4});
  int mid = AddQTensor<int8_t>(b, {3, 2}, {0.1f, 4});
  int perm = b.AddConstInt32({2}, {1, 0});
  int out = AddQTensor<int8_t>(b, {2, 3}, {0.1f, 4});
  b.AddReshape(in, mid, {3, 2});
  b.AddOperator(Op::TRANSPOSE, {mid, perm}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  auto got = RunGraph<int8_t>(b, [](GraphRunner& r) {
    r.SetInput(0, std::vector<int8_t>{1, 2, 3, 4, 5, 6});
  });
  // [[1,2],[3,4],[5,6]] transposed.
  EXPECT_THAT(got, ElementsAre(1, 3, 5, 2, 4, 6));
}

TEST(QuantizedDataMovementTest, MirrorPadTileDepthToSpaceSplitCopyInt8) {
  const QParams q = {0.1f, -3};
  ModelBuilder b;
  int in = AddQTensor<int8_t>(b, {1, 1, 1, 4}, q);
  // DEPTH_TO_SPACE block 2: [1,1,1,4] -> [1,2,2,1] = [[1,2],[3,4]].
  int d2s = AddQTensor<int8_t>(b, {1, 2, 2, 1}, q);
  b.AddBlockOp(Op::DEPTH_TO_SPACE, in, d2s, 2);
  // TILE [1,1,2,1] along W: [[1,2,1,2],[3,4,3,4]].
  int multiples = b.AddConstInt32({4}, {1, 1, 2, 1});
  int tiled = AddQTensor<int8_t>(b, {1, 2, 4, 1}, q);
  b.AddOperator(Op::TILE, {d2s, multiples}, {tiled});
  // MIRROR_PAD REFLECT one row on top: [[3,4,3,4],[1,2,1,2],[3,4,3,4]].
  int paddings = b.AddConstInt32({4, 2}, {0, 0, 1, 0, 0, 0, 0, 0});
  int padded = AddQTensor<int8_t>(b, {1, 3, 4, 1}, q);
  b.AddOperator(Op::MIRROR_PAD, {tiled, paddings}, {padded}, tfl::BuiltinOptions::MirrorPadOptions,
                [](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateMirrorPadOptions(fbb, tfl::MirrorPadMode::REFLECT).Union();
                });
  // SPLIT along W into two [1,3,2,1]; the graph outputs the second half.
  int axis = b.AddConstInt32({}, {2});
  int left = AddQTensor<int8_t>(b, {1, 3, 2, 1}, q);
  int right = AddQTensor<int8_t>(b, {1, 3, 2, 1}, q);
  b.AddOperator(
      Op::SPLIT, {axis, padded}, {left, right}, tfl::BuiltinOptions::SplitOptions,
      [](flatbuffers::FlatBufferBuilder& fbb) { return tfl::CreateSplitOptions(fbb, 2).Union(); });
  b.SetInputs({in});
  b.SetOutputs({right, padded});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<int8_t>{1, 2, 3, -128}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output<int8_t>(1),
              ElementsAreArray({3, -128, 3, -128, 1, 2, 1, 2, 3, -128, 3, -128}));
  EXPECT_THAT(runner.Output<int8_t>(0), ElementsAreArray({3, -128, 1, 2, 3, -128}));
}

TEST(QuantizedDataMovementTest, CastBetweenIntTypes) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::INT8, {3});
  int mid = b.AddTensor(tfl::TensorType::INT32, {3});
  int out = b.AddTensor(tfl::TensorType::UINT8, {3});
  b.AddOperator(Op::CAST, {in}, {mid});
  b.AddOperator(Op::CAST, {mid}, {out});
  b.SetInputs({in});
  b.SetOutputs({mid, out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<int8_t>{-1, 0, 127}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output<int32_t>(0), ElementsAre(-1, 0, 127));
  EXPECT_THAT(runner.Output<uint8_t>(1), ElementsAre(255, 0, 127));  // C++ conversion, as TFLite
}

// Per-channel parameters reach kernels through Tensor::scales/zero_points
// (runtime::ReadQuantization); this drives the kernel directly.
TEST(DequantizeOpTest, PerChannelAlongEachDimension) {
  std::vector<int8_t> q = {-2, 0, 4, 6, 8, 10};  // shape [2,3]
  std::vector<float> out(6, -1.0f);
  runtime::Tensor in;
  in.dtype = runtime::DType::kInt8;
  in.shape = {2, 3};
  in.bytes = 6;
  in.data = reinterpret_cast<std::byte*>(q.data());
  in.quantized = in.per_channel_quantized = true;
  runtime::Tensor o;
  o.dtype = runtime::DType::kFloat32;
  o.shape = {2, 3};
  o.bytes = 24;
  o.data = reinterpret_cast<std::byte*>(out.data());
  runtime::Node node;
  node.inputs = {&in};
  node.outputs = {&o};
  const runtime::OpRegistration* reg = runtime::RegisterDequantize();

  // Along dimension 1: scales per column.
  in.quantized_dimension = 1;
  in.scales = {0.5f, 1.0f, 2.0f};
  in.zero_points = {0, 1, -2};
  ASSERT_TRUE(reg->prepare(node).ok());
  ASSERT_TRUE(reg->eval(node).ok());
  EXPECT_THAT(out, ElementsAre(-1.0f, -1.0f, 12.0f, 3.0f, 7.0f, 24.0f));

  // Along dimension 0: scales per row.
  in.quantized_dimension = 0;
  in.scales = {0.25f, 2.0f};
  in.zero_points = {0, 6};
  ASSERT_TRUE(reg->prepare(node).ok());
  ASSERT_TRUE(reg->eval(node).ok());
  EXPECT_THAT(out, ElementsAre(-0.5f, 0.0f, 1.0f, 0.0f, 4.0f, 8.0f));

  in.scales = {0.25f, 2.0f, 1.0f};  // three scales for a dimension of 2
  in.zero_points = {0, 0, 0};
  runtime::Status status = reg->prepare(node);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("does not match its 3 scales"));
}

// A small all-int8 graph between QUANTIZE and DEQUANTIZE against the same
// graph in double: the errors of the layers stay within a few output steps.
TEST(QuantizedGraphTest, QuantizeReluPoolSoftmaxDequantize) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 3});
  int q = AddQTensor<int8_t>(b, {1, 4, 4, 3}, {0.05f, -5});
  int relu = AddQTensor<int8_t>(b, {1, 4, 4, 3}, {6.0f / 255, -128});
  int pool = AddQTensor<int8_t>(b, {1, 2, 2, 3}, {6.0f / 255, -128});
  int flat = AddQTensor<int8_t>(b, {1, 12}, {6.0f / 255, -128});
  int probs = AddQTensor<int8_t>(b, {1, 12}, {1.0f / 256, -128});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 12});
  b.AddOperator(Op::QUANTIZE, {in}, {q});
  b.AddUnary(Op::RELU6, q, relu);
  Pool2DParams p;
  p.stride_h = p.stride_w = 2;
  p.filter_h = p.filter_w = 2;
  b.AddPool2D(Op::AVERAGE_POOL_2D, relu, pool, p);
  b.AddReshape(pool, flat, {1, 12});
  b.AddOperator(Op::SOFTMAX, {flat}, {probs}, tfl::BuiltinOptions::SoftmaxOptions,
                [](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateSoftmaxOptions(fbb, 1.0f).Union();
                });
  b.AddDequantize(probs, out);
  b.SetInputs({in});
  b.SetOutputs({out});

  std::mt19937 rng(3);
  std::normal_distribution<float> dist(2.0f, 3.0f);
  std::vector<float> x(48);
  for (float& v : x) v = dist(rng);
  // The graph in double.
  std::vector<double> pooled(12, 0.0);
  for (int oy = 0; oy < 2; ++oy) {
    for (int ox = 0; ox < 2; ++ox) {
      for (int c = 0; c < 3; ++c) {
        double sum = 0;
        for (int y = 2 * oy; y < 2 * oy + 2; ++y) {
          for (int xx = 2 * ox; xx < 2 * ox + 2; ++xx) {
            sum += std::clamp<double>(x[(y * 4 + xx) * 3 + c], 0.0, 6.0);
          }
        }
        pooled[(oy * 2 + ox) * 3 + c] = sum / 4;
      }
    }
  }
  const double max = *std::max_element(pooled.begin(), pooled.end());
  double total = 0;
  for (double v : pooled) total += std::exp(v - max);

  auto got = RunGraph<float>(b, [&](GraphRunner& r) { r.SetInput(0, x); });
  ASSERT_EQ(got.size(), 12u);
  double sum = 0;
  for (int i = 0; i < 12; ++i) {
    EXPECT_NEAR(got[i], std::exp(pooled[i] - max) / total, 4.0 / 256) << i;
    sum += got[i];
  }
  EXPECT_NEAR(sum, 1.0, 12.0 / 256);
}

}  // namespace
}  // namespace dfarm::testing
