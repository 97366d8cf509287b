#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

using Op = tfl::BuiltinOperator;

std::vector<float> RunGraph(ModelBuilder& b, int in, int out, const std::vector<float>& input) {
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

std::vector<float> RunUnary(Op code, const std::vector<float>& input) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {static_cast<int32_t>(input.size())});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {static_cast<int32_t>(input.size())});
  b.AddUnary(code, in, out);
  return RunGraph(b, in, out, input);
}

// The expectation in double precision, rounded to float.
std::vector<float> Apply(const std::vector<float>& input, const std::function<double(double)>& f) {
  std::vector<float> out;
  for (float x : input) out.push_back(static_cast<float>(f(x)));
  return out;
}

const std::vector<float> kInput = {-4.0f, -3.0f, -1.5f, -0.25f, 0.0f, 0.75f, 2.0f, 3.0f, 5.0f};
const std::vector<float> kPositive = {0.01f, 0.25f, 1.0f, 2.0f, 9.0f, 100.0f};

TEST(UnaryTest, HardSwishByHand) {
  // x * relu6(x + 3) / 6: 0 up to -3, x from 3 on.
  EXPECT_THAT(RunUnary(Op::HARD_SWISH, {-4, -3, -1.5f, 0, 1.5f, 3, 5}),
              Pointwise(FloatNear(1e-6f), {0.0f, 0.0f, -0.375f, 0.0f, 1.125f, 3.0f, 5.0f}));
}

TEST(UnaryTest, Logistic) {
  EXPECT_THAT(RunUnary(Op::LOGISTIC, kInput),
              Pointwise(FloatNear(1e-6f),
                        Apply(kInput, [](double x) { return 1.0 / (1.0 + std::exp(-x)); })));
  EXPECT_THAT(RunUnary(Op::LOGISTIC, {0.0f}), ElementsAreArray({0.5f}));
}

// Distance in units in the last place between two finite floats.
int64_t UlpDistance(float a, float b) {
  auto key = [](float v) {
    const int32_t bits = std::bit_cast<int32_t>(v);
    return bits < 0 ? int64_t{std::numeric_limits<int32_t>::min()} - bits : int64_t{bits};
  };
  return std::abs(key(a) - key(b));
}

TEST(UnaryTest, LogisticIsWithinTwoUlpsOverTheWholeRange) {
  // Every 1021st float of either sign up to 88 (about 2.2 million), then the
  // far tails, an odd count so that the last elements take the loop's tail.
  std::vector<float> x;
  for (uint32_t bits = 0; bits <= std::bit_cast<uint32_t>(88.0f); bits += 1021) {
    x.push_back(std::bit_cast<float>(bits));
    x.push_back(-std::bit_cast<float>(bits));
  }
  for (float v : {-88.0f, 87.5f, 87.0f, 88.0f, 100.0f, 1e30f}) x.push_back(v);
  if (x.size() % 8 == 0) x.push_back(0.5f);
  const std::vector<float> got = RunUnary(Op::LOGISTIC, x);
  ASSERT_EQ(got.size(), x.size());
  int64_t worst = 0;
  float worst_x = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    const auto want = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x[i]))));
    const int64_t ulps = UlpDistance(got[i], want);
    if (ulps > worst) worst = ulps, worst_x = x[i];
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
}

TEST(UnaryTest, LogisticOfTheFarTailsInfinitiesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Below -88 the true value is under 7e-39; 0 is within 1e-37 of it.
  const std::vector<float> got = RunUnary(Op::LOGISTIC, {-89.0f, -1e30f, -inf, inf, nan, 1e30f});
  ASSERT_EQ(got.size(), 6u);
  EXPECT_NEAR(got[0], 0.0f, 1e-37f);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_EQ(got[2], 0.0f);
  EXPECT_EQ(got[3], 1.0f);
  EXPECT_TRUE(std::isnan(got[4]));
  EXPECT_EQ(got[5], 1.0f);
}

TEST(UnaryTest, Tanh) {
  EXPECT_THAT(RunUnary(Op::TANH, kInput),
              Pointwise(FloatNear(1e-6f), Apply(kInput, [](double x) { return std::tanh(x); })));
}

TEST(UnaryTest, Exp) {
  std::vector<float> got = RunUnary(Op::EXP, kInput);
  std::vector<float> want = Apply(kInput, [](double x) { return std::exp(x); });
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]);
}

TEST(UnaryTest, SqrtAndRsqrt) {
  EXPECT_THAT(RunUnary(Op::SQRT, {0.0f, 0.25f, 4.0f, 9.0f}),
              ElementsAreArray({0.0f, 0.5f, 2.0f, 3.0f}));
  EXPECT_THAT(
      RunUnary(Op::RSQRT, kPositive),
      Pointwise(FloatNear(1e-5f), Apply(kPositive, [](double x) { return 1.0 / std::sqrt(x); })));
}

TEST(UnaryTest, AbsAndNeg) {
  EXPECT_THAT(RunUnary(Op::ABS, {-2.5f, 0.0f, 3.0f}), ElementsAreArray({2.5f, 0.0f, 3.0f}));
  EXPECT_THAT(RunUnary(Op::NEG, {-2.5f, 0.0f, 3.0f}), ElementsAreArray({2.5f, -0.0f, -3.0f}));
}

TEST(UnaryTest, LeakyRelu) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  b.AddLeakyRelu(in, out, 0.2f);
  EXPECT_THAT(RunGraph(b, in, out, {-5.0f, -1.0f, 0.0f, 2.0f}),
              Pointwise(FloatNear(1e-6f), {-1.0f, -0.2f, 0.0f, 2.0f}));
}

TEST(UnaryTest, ShapeMismatchIsAnError) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2, 2});
  b.AddUnary(Op::HARD_SWISH, in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (HARD_SWISH): output tensor 1"));
}

}  // namespace
}  // namespace dfarm::testing
