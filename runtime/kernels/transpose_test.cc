#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

runtime::Status Transpose(std::vector<int32_t> in_shape, std::vector<int32_t> perm,
                          std::vector<int32_t> out_shape, const std::vector<float>& input,
                          std::vector<float>* out) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
  int p = b.AddConstInt32({static_cast<int32_t>(perm.size())}, perm);
  int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddOperator(tfl::BuiltinOperator::TRANSPOSE, {in, p}, {o});
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  EXPECT_TRUE(runner.SetInput(0, input));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *out = runner.Output(0);
  return runtime::Status::Ok();
}

TEST(TransposeTest, Matrix) {
  std::vector<float> out;
  ASSERT_TRUE(Transpose({2, 3}, {1, 0}, {3, 2}, {1, 2, 3, 4, 5, 6}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({1, 4, 2, 5, 3, 6}));
}

TEST(TransposeTest, ThreeDims) {
  // out(c, a, b) = in(a, b, c) for in [2,1,3].
  std::vector<float> out;
  ASSERT_TRUE(Transpose({2, 1, 3}, {2, 0, -2}, {3, 2, 1}, {1, 2, 3, 4, 5, 6}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({1, 4, 2, 5, 3, 6}));
}

TEST(TransposeTest, RepeatedDimIsAnError) {
  std::vector<float> out;
  runtime::Status status = Transpose({2, 2}, {0, 0}, {2, 2}, {1, 2, 3, 4}, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("perm repeats dimension 0"));
}

TEST(TileTest, RepeatsEachDim) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 1});
  int m = b.AddConstInt32({2}, {2, 3});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {4, 3});
  b.AddOperator(tfl::BuiltinOperator::TILE, {in, m}, {o});
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}));
}

}  // namespace
}  // namespace dfarm::testing
