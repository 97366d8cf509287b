#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;

template <typename T>
std::vector<T> Arg(tfl::BuiltinOperator code, tfl::TensorType out_type, int axis) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3});
  int ax = b.AddConstInt32({1}, {axis});
  int o = b.AddTensor(out_type, {axis == 1 || axis == -1 ? 2 : 3});
  b.AddOperator(code, {in, ax}, {o});
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  EXPECT_TRUE(runner.SetInput(0, std::vector<float>{1, 5, 5, -1, -3, -2}));
  EXPECT_TRUE(runner.Invoke().ok());
  return runner.Output<T>(0);
}

TEST(ArgMaxTest, FirstOnTies) {
  EXPECT_THAT(Arg<int32_t>(tfl::BuiltinOperator::ARG_MAX, tfl::TensorType::INT32, 1),
              ElementsAreArray({1, 0}));
}

TEST(ArgMinTest, Int64AlongAxis0) {
  EXPECT_THAT(Arg<int64_t>(tfl::BuiltinOperator::ARG_MIN, tfl::TensorType::INT64, 0),
              ElementsAreArray({1, 1, 1}));
  EXPECT_THAT(Arg<int64_t>(tfl::BuiltinOperator::ARG_MIN, tfl::TensorType::INT64, -1),
              ElementsAreArray({0, 1}));
}

}  // namespace
}  // namespace dfarm::testing
