#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using Op = tfl::BuiltinOperator;

runtime::Status RunBlockOp(Op code, std::vector<int32_t> in_shape, std::vector<int32_t> out_shape,
                           const std::vector<float>& input, std::vector<float>* out) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
  int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddBlockOp(code, in, o, 2);
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  EXPECT_TRUE(runner.SetInput(0, input));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *out = runner.Output(0);
  return runtime::Status::Ok();
}

// Two pixels of 4 channels <-> a 2x4 image: out(y, x) = in(x / 2, (y % 2) * 2 + x % 2).
const std::vector<float> kDepth = {1, 2, 3, 4, 5, 6, 7, 8};
const std::vector<float> kSpace = {1, 2, 5, 6, 3, 4, 7, 8};

TEST(DepthToSpaceTest, MovesChannelBlocksToPixels) {
  std::vector<float> out;
  ASSERT_TRUE(RunBlockOp(Op::DEPTH_TO_SPACE, {1, 1, 2, 4}, {1, 2, 4, 1}, kDepth, &out).ok());
  EXPECT_THAT(out, ElementsAreArray(kSpace));
}

TEST(SpaceToDepthTest, IsTheInverse) {
  std::vector<float> out;
  ASSERT_TRUE(RunBlockOp(Op::SPACE_TO_DEPTH, {1, 2, 4, 1}, {1, 1, 2, 4}, kSpace, &out).ok());
  EXPECT_THAT(out, ElementsAreArray(kDepth));
}

TEST(DepthToSpaceTest, DepthNotDivisibleIsAnError) {
  std::vector<float> out;
  runtime::Status status =
      RunBlockOp(Op::DEPTH_TO_SPACE, {1, 1, 1, 6}, {1, 2, 2, 1}, std::vector<float>(6), &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("input depth 6 is not a multiple of 4"));
}

}  // namespace
}  // namespace dfarm::testing
