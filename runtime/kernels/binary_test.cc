#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::Pointwise;

using Act = tfl::ActivationFunctionType;
using Op = tfl::BuiltinOperator;

std::vector<float> RunBinary(Op code, std::vector<int32_t> lhs_shape, std::vector<float> lhs,
                             std::vector<int32_t> rhs_shape, std::vector<float> rhs,
                             std::vector<int32_t> out_shape, Act act = Act::NONE) {
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::FLOAT32, lhs_shape);
  int c = b.AddTensor(tfl::TensorType::FLOAT32, rhs_shape);
  int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddBinary(code, a, c, o, act);
  b.SetInputs({a, c});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  EXPECT_TRUE(runner.SetInput(0, lhs));
  EXPECT_TRUE(runner.SetInput(1, rhs));
  EXPECT_TRUE(runner.Invoke().ok());
  return runner.Output(0);
}

TEST(BinaryTest, SubWithRelu) {
  EXPECT_THAT(RunBinary(Op::SUB, {3}, {5, 1, -2}, {3}, {2, 4, -3}, {3}, Act::RELU),
              ElementsAreArray({3.0f, 0.0f, 1.0f}));
}

TEST(BinaryTest, SubIsNotCommutativeUnderBroadcast) {
  // [1] - [3]: the scalar is the left operand.
  EXPECT_THAT(RunBinary(Op::SUB, {1}, {10}, {3}, {1, 2, 3}, {3}),
              ElementsAreArray({9.0f, 8.0f, 7.0f}));
}

TEST(BinaryTest, MulBroadcastsPerChannel) {
  // [1,2,2,2] * [1,1,1,2], as the selfie models scale channels.
  EXPECT_THAT(RunBinary(Op::MUL, {1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 1, 2}, {10, -1},
                        {1, 2, 2, 2}),
              ElementsAreArray({10.0f, -2.0f, 30.0f, -4.0f, 50.0f, -6.0f, 70.0f, -8.0f}));
}

TEST(BinaryTest, BroadcastSplitAcrossThreadsGivesEveryElement) {
  // [2,30,20,16] * [1,30,1,16] on 3 threads (rows of the last dimension as
  // tasks, each starting its odometer mid-tensor), element by element.
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::FLOAT32, {2, 30, 20, 16});
  int c = b.AddTensor(tfl::TensorType::FLOAT32, {1, 30, 1, 16});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {2, 30, 20, 16});
  b.AddBinary(Op::MUL, a, c, o, Act::NONE);
  b.SetInputs({a, c});
  b.SetOutputs({o});
  std::unique_ptr<runtime::Model> model;
  ASSERT_TRUE(runtime::Model::FromBuffer("mul.tflite", b.Build(), &model).ok());
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::InterpreterOptions options;
  options.num_threads = 3;
  runtime::Interpreter interpreter(*model, resolver, options);
  ASSERT_TRUE(interpreter.AllocateTensors().ok());
  float* lhs = interpreter.inputs()[0]->data_as<float>();
  float* rhs = interpreter.inputs()[1]->data_as<float>();
  for (int i = 0; i < 2 * 30 * 20 * 16; ++i) lhs[i] = static_cast<float>(i % 97);
  for (int i = 0; i < 30 * 16; ++i) rhs[i] = static_cast<float>(i) * 0.5f;
  ASSERT_TRUE(interpreter.Invoke().ok());
  const float* out = interpreter.outputs()[0]->data_as<float>();
  for (int n = 0; n < 2; ++n) {
    for (int y = 0; y < 30; ++y) {
      for (int x = 0; x < 20; ++x) {
        for (int ch = 0; ch < 16; ++ch) {
          const int i = ((n * 30 + y) * 20 + x) * 16 + ch;
          ASSERT_EQ(out[i], lhs[i] * rhs[y * 16 + ch]) << n << "," << y << "," << x << "," << ch;
        }
      }
    }
  }
}

TEST(BinaryTest, MulWithRelu6) {
  EXPECT_THAT(RunBinary(Op::MUL, {3}, {2, -2, 0.5f}, {3}, {4, 1, 3}, {3}, Act::RELU6),
              ElementsAreArray({6.0f, 0.0f, 1.5f}));
}

TEST(BinaryTest, Div) {
  EXPECT_THAT(RunBinary(Op::DIV, {2, 2}, {1, 9, -4, 3}, {2}, {2, 3}, {2, 2}),
              ElementsAreArray({0.5f, 3.0f, -2.0f, 1.0f}));
}

TEST(BinaryTest, MaximumAndMinimum) {
  EXPECT_THAT(RunBinary(Op::MAXIMUM, {4}, {1, -2, 3, 0}, {1}, {0.5f}, {4}),
              ElementsAreArray({1.0f, 0.5f, 3.0f, 0.5f}));
  EXPECT_THAT(RunBinary(Op::MINIMUM, {4}, {1, -2, 3, 0}, {1}, {0.5f}, {4}),
              ElementsAreArray({0.5f, -2.0f, 0.5f, 0.0f}));
}

TEST(BinaryTest, SquaredDifference) {
  EXPECT_THAT(RunBinary(Op::SQUARED_DIFFERENCE, {3}, {1, -2, 3}, {3}, {4, 2, 3}, {3}),
              ElementsAreArray({9.0f, 16.0f, 0.0f}));
}

TEST(BinaryTest, PreluHasPerChannelAlpha) {
  // x >= 0 ? x : alpha[c] * x, alpha [2] broadcast over [2,2].
  EXPECT_THAT(RunBinary(Op::PRELU, {2, 2}, {-1, -2, 3, 0}, {2}, {0.1f, 0.5f}, {2, 2}),
              Pointwise(FloatNear(1e-7f), {-0.1f, -1.0f, 3.0f, 0.0f}));
}

}  // namespace
}  // namespace dfarm::testing
