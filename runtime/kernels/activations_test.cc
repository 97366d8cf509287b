#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;

std::vector<float> RunUnary(tfl::BuiltinOperator code, const std::vector<float>& input) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {static_cast<int32_t>(input.size())});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {static_cast<int32_t>(input.size())});
  b.AddUnary(code, in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  EXPECT_TRUE(runner.Init(b).ok());
  EXPECT_TRUE(runner.SetInput(0, input));
  EXPECT_TRUE(runner.Invoke().ok());
  return runner.Output(0);
}

const std::vector<float> kInput = {-3.0f, -0.5f, 0.5f, 3.0f, 7.0f};

TEST(ActivationsTest, Relu) {
  EXPECT_THAT(RunUnary(tfl::BuiltinOperator::RELU, kInput),
              ElementsAreArray({0.0f, 0.0f, 0.5f, 3.0f, 7.0f}));
}

TEST(ActivationsTest, Relu6) {
  EXPECT_THAT(RunUnary(tfl::BuiltinOperator::RELU6, kInput),
              ElementsAreArray({0.0f, 0.0f, 0.5f, 3.0f, 6.0f}));
}

TEST(ActivationsTest, ReluN1To1) {
  EXPECT_THAT(RunUnary(tfl::BuiltinOperator::RELU_N1_TO_1, kInput),
              ElementsAreArray({-1.0f, -0.5f, 0.5f, 1.0f, 1.0f}));
}

}  // namespace
}  // namespace dfarm::testing
