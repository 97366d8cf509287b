#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using Op = tfl::BuiltinOperator;

TEST(SplitTest, EqualPartsAlongAxis1) {
  ModelBuilder b;
  int axis = b.AddConstInt32({}, {1});
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 4});
  int o0 = b.AddTensor(tfl::TensorType::FLOAT32, {2, 2});
  int o1 = b.AddTensor(tfl::TensorType::FLOAT32, {2, 2});
  b.AddOperator(
      Op::SPLIT, {axis, in}, {o0, o1}, tfl::BuiltinOptions::SplitOptions,
      [](flatbuffers::FlatBufferBuilder& fbb) { return tfl::CreateSplitOptions(fbb, 2).Union(); });
  b.SetInputs({in});
  b.SetOutputs({o0, o1});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({1, 2, 5, 6}));
  EXPECT_THAT(runner.Output(1), ElementsAreArray({3, 4, 7, 8}));
}

TEST(SplitVTest, InferredSize) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {3});
  int sizes = b.AddConstInt32({2}, {1, -1});
  int axis = b.AddConstInt32({}, {0});
  int o0 = b.AddTensor(tfl::TensorType::FLOAT32, {1});
  int o1 = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  b.AddOperator(
      Op::SPLIT_V, {in, sizes, axis}, {o0, o1}, tfl::BuiltinOptions::SplitVOptions,
      [](flatbuffers::FlatBufferBuilder& fbb) { return tfl::CreateSplitVOptions(fbb, 2).Union(); });
  b.SetInputs({in});
  b.SetOutputs({o0, o1});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{7, 8, 9}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({7}));
  EXPECT_THAT(runner.Output(1), ElementsAreArray({8, 9}));
}

TEST(UnpackTest, ColumnsOfAMatrix) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 2});
  int o0 = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int o1 = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  b.AddOperator(Op::UNPACK, {in}, {o0, o1}, tfl::BuiltinOptions::UnpackOptions,
                [](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateUnpackOptions(fbb, 2, 1).Union();
                });
  b.SetInputs({in});
  b.SetOutputs({o0, o1});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({1, 3}));
  EXPECT_THAT(runner.Output(1), ElementsAreArray({2, 4}));
}

TEST(PackTest, StacksAlongTheLastAxis) {
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int c = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {2, 2});
  b.AddOperator(Op::PACK, {a, c}, {o}, tfl::BuiltinOptions::PackOptions,
                [](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreatePackOptions(fbb, 2, -1).Union();
                });
  b.SetInputs({a, c});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2}));
  ASSERT_TRUE(runner.SetInput(1, std::vector<float>{3, 4}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({1, 3, 2, 4}));
}

TEST(SplitTest, UnevenSplitIsAnError) {
  ModelBuilder b;
  int axis = b.AddConstInt32({}, {0});
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {3});
  int o0 = b.AddTensor(tfl::TensorType::FLOAT32, {1});
  int o1 = b.AddTensor(tfl::TensorType::FLOAT32, {1});
  b.AddOperator(
      Op::SPLIT, {axis, in}, {o0, o1}, tfl::BuiltinOptions::SplitOptions,
      [](flatbuffers::FlatBufferBuilder& fbb) { return tfl::CreateSplitOptions(fbb, 2).Union(); });
  b.SetInputs({in});
  b.SetOutputs({o0, o1});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("does not split into 2 equal parts"));
}

}  // namespace
}  // namespace dfarm::testing
