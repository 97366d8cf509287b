#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ReshapeTest, KeepsRowMajorOrder) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 3});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {3, 2});
  b.AddReshape(in, out, {-1, 2});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.OutputShape(0), ElementsAre(3, 2));
  EXPECT_THAT(runner.Output(0), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(ReshapeTest, ElementCountMismatchIsAnError) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  b.AddReshape(in, out, {4});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("cannot reshape [2,3] (6 elements) to [4]"));
}

}  // namespace
}  // namespace dfarm::testing
