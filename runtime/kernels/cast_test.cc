#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

template <typename To, typename From>
std::vector<To> Cast(tfl::TensorType from, tfl::TensorType to, const std::vector<From>& input) {
  ModelBuilder b;
  int in = b.AddTensor(from, {static_cast<int32_t>(input.size())});
  int o = b.AddTensor(to, {static_cast<int32_t>(input.size())});
  b.AddOperator(tfl::BuiltinOperator::CAST, {in}, {o});
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  EXPECT_TRUE(runner.SetInput(0, input));
  EXPECT_TRUE(runner.Invoke().ok());
  return runner.Output<To>(0);
}

TEST(CastTest, FloatToInt32Truncates) {
  EXPECT_THAT(
      (Cast<int32_t, float>(tfl::TensorType::FLOAT32, tfl::TensorType::INT32, {-1.7f, 2.9f, 0.0f})),
      ElementsAreArray({-1, 2, 0}));
}

TEST(CastTest, Int32ToFloat) {
  EXPECT_THAT(
      (Cast<float, int32_t>(tfl::TensorType::INT32, tfl::TensorType::FLOAT32, {-3, 0, 16777216})),
      ElementsAreArray({-3.0f, 0.0f, 16777216.0f}));
}

TEST(CastTest, FloatToBool) {
  EXPECT_THAT(
      (Cast<uint8_t, float>(tfl::TensorType::FLOAT32, tfl::TensorType::BOOL, {-0.5f, 0.0f, 3.0f})),
      ElementsAreArray({1, 0, 1}));
}

TEST(CastTest, ToFloat16IsUnsupported) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1});
  int o = b.AddTensor(tfl::TensorType::FLOAT16, {1});
  b.AddOperator(tfl::BuiltinOperator::CAST, {in}, {o});
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("cast from float32 to float16 is not supported"));
}

}  // namespace
}  // namespace dfarm::testing
