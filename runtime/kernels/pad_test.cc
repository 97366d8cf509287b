#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TEST(PadTest, PadsBeforeAndAfterWithZeros) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1});
  int paddings = b.AddConstInt32({4, 2}, {0, 0, 1, 0, 0, 2, 0, 0});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 4, 1});
  b.AddPad(in, paddings, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({0.0f, 0.0f, 0.0f, 0.0f,  //
                                                  1.0f, 2.0f, 0.0f, 0.0f,  //
                                                  3.0f, 4.0f, 0.0f, 0.0f}));
}

TEST(PadTest, ChannelPaddingLikeBlazeFace) {
  // [1,1,2,2] -> [1,1,2,4]: two zero channels after each pixel's two.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 2, 2});
  int paddings = b.AddConstInt32({4, 2}, {0, 0, 0, 0, 0, 0, 0, 2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 2, 4});
  b.AddPad(in, paddings, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(runner.Invoke().ok());
  // Run twice: the zeros must be rewritten, whatever shared the arena before.
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({1.0f, 2.0f, 0.0f, 0.0f, 3.0f, 4.0f, 0.0f, 0.0f}));
}

TEST(PadTest, NegativePaddingIsAnError) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int paddings = b.AddConstInt32({1, 2}, {-1, 0});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1});
  b.AddPad(in, paddings, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("padding of dimension 0 is -1,0"));
}

TEST(PadV2Test, LastDimensionBeforeAndAfterOnEveryRow) {
  // [1,3,1,2] -> [1,3,1,4]: one value before and one after each row.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 1, 2});
  int pads = b.AddConstInt32({4, 2}, {0, 0, 0, 0, 0, 0, 1, 1});
  int value = b.AddConstFloat32({}, {9.0f});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 1, 4});
  b.AddOperator(tfl::BuiltinOperator::PADV2, {in, pads, value}, {o});
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({9.0f, 1.0f, 2.0f, 9.0f, 9.0f, 3.0f, 4.0f, 9.0f,
                                                  9.0f, 5.0f, 6.0f, 9.0f}));
}

TEST(PadV2Test, PadsWithTheConstantValue) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int pads = b.AddConstInt32({1, 2}, {1, 2});
  int value = b.AddConstFloat32({}, {-7.5f});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {5});
  b.AddOperator(tfl::BuiltinOperator::PADV2, {in, pads, value}, {o});
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ::testing::ElementsAre(-7.5f, 1.0f, 2.0f, -7.5f, -7.5f));
}

}  // namespace
}  // namespace dfarm::testing
