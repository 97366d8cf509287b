#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

runtime::Status MirrorPad(tfl::MirrorPadMode mode, std::vector<int32_t> in_shape,
                          std::vector<int32_t> pads, std::vector<int32_t> out_shape,
                          const std::vector<float>& input, std::vector<float>* out) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
  int p = b.AddConstInt32({static_cast<int32_t>(in_shape.size()), 2}, pads);
  int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddOperator(tfl::BuiltinOperator::MIRROR_PAD, {in, p}, {o},
                tfl::BuiltinOptions::MirrorPadOptions, [mode](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateMirrorPadOptions(fbb, mode).Union();
                });
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  EXPECT_TRUE(runner.SetInput(0, input));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *out = runner.Output(0);
  return runtime::Status::Ok();
}

TEST(MirrorPadTest, Reflect) {
  std::vector<float> out;
  ASSERT_TRUE(MirrorPad(tfl::MirrorPadMode::REFLECT, {3}, {2, 2}, {7}, {1, 2, 3}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({3, 2, 1, 2, 3, 2, 1}));
}

TEST(MirrorPadTest, SymmetricIn2D) {
  // Rows [1,2],[3,4], one symmetric row above and one column to the right.
  std::vector<float> out;
  ASSERT_TRUE(
      MirrorPad(tfl::MirrorPadMode::SYMMETRIC, {2, 2}, {1, 0, 0, 1}, {3, 3}, {1, 2, 3, 4}, &out)
          .ok());
  EXPECT_THAT(out, ElementsAreArray({1, 2, 2, 1, 2, 2, 3, 4, 4}));
}

TEST(MirrorPadTest, ReflectBeyondTheBorderIsAnError) {
  std::vector<float> out;
  runtime::Status status = MirrorPad(tfl::MirrorPadMode::REFLECT, {2}, {2, 0}, {4}, {1, 2}, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("exceed 1 for mode REFLECT"));
}

}  // namespace
}  // namespace dfarm::testing
