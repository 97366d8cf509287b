#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ConcatenationTest, MiddleAxis) {
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2});
  int c = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 2});
  b.AddConcatenation({a, c}, out, 1);
  b.SetInputs({a, c});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(runner.SetInput(1, std::vector<float>{5, 6}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(ConcatenationTest, OutputDeclaredEmptyIsSizedByTheInputs) {
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2});
  int c = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {});
  b.AddConcatenation({a, c}, out, -2);
  b.SetInputs({a, c});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status s = runner.Init(b);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(runner.OutputShape(0), ElementsAre(1, 3, 2));
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(runner.SetInput(1, std::vector<float>{5, 6}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(ConcatenationTest, NegativeAxisInterleavesRowsAndClamps) {
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::FLOAT32, {2, 1});
  int c = b.AddConstFloat32({2, 2}, {3, -4, 5, 6});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3});
  b.AddConcatenation({a, c}, out, -1, tfl::ActivationFunctionType::RELU);
  b.SetInputs({a});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(1, 3, 0, 2, 5, 6));
}

TEST(ConcatenationTest, MismatchedShapesAreAnError) {
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2});
  int c = b.AddTensor(tfl::TensorType::FLOAT32, {2, 2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
  b.AddConcatenation({a, c}, out, 1);
  b.SetInputs({a, c});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("input 1 [2,2] does not match input 0 [1,2]"));
}

}  // namespace
}  // namespace dfarm::testing
