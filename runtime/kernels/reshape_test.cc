#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

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

TEST(ReshapeTest, RequestedShapeMustHoldTheInputEvenWhenTheDeclaredOneDoes) {
  // The output is declared [6], which fits the input; TFLite reshapes by
  // new_shape and refuses both requests.
  for (const auto& [new_shape, message] : std::vector<std::pair<std::vector<int32_t>, std::string>>{
           {{2147483647, 2147483647},
            "cannot reshape [2,3] (6 elements) to the requested shape "
            "[2147483647,2147483647] (over 1099511627776 elements)"},
           {{3, 3}, "cannot reshape [2,3] (6 elements) to the requested shape [3,3] (9 elements)"},
           {{-1, 4}, "cannot fill the -1 of the requested shape: 6 elements by 4"}}) {
    ModelBuilder b;
    int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3});
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {6});
    b.AddReshape(in, out, new_shape);
    b.SetInputs({in});
    b.SetOutputs({out});
    GraphRunner runner;
    runtime::Status status = runner.Init(b);
    EXPECT_EQ(status.code(), runtime::StatusCode::kError);
    EXPECT_THAT(status.message(), HasSubstr(message));
  }
}

// in [2,3] -> RESHAPE by a constant shape input `shape` -> out, declared
// `declared` with shape_signature `signature` (none when empty).
runtime::Status ReshapeByInput(std::vector<int32_t> shape, std::vector<int32_t> declared,
                               std::vector<int32_t> signature, GraphRunner* runner) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3});
  int target = b.AddConstInt32({static_cast<int32_t>(shape.size())}, shape, "target");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, std::move(declared), "out");
  if (!signature.empty()) b.SetShapeSignature(out, std::move(signature));
  b.AddOperator(tfl::BuiltinOperator::RESHAPE, {in, target}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  return runner->Init(b);
}

TEST(ReshapeTest, OutputDeclaredEmptyTakesTheShapeInput) {
  GraphRunner runner;
  runtime::Status s = ReshapeByInput({3, -1}, {}, {}, &runner);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(runner.OutputShape(0), ElementsAre(3, 2));
  EXPECT_EQ(runner.interpreter().outputs()[0]->bytes, 24u);
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(ReshapeTest, MinusOneInShapeSignatureTakesTheComputedDim) {
  GraphRunner runner;
  runtime::Status s = ReshapeByInput({-1, 2}, {1, 2}, {-1, 2}, &runner);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(runner.OutputShape(0), ElementsAre(3, 2));
}

TEST(ReshapeTest, KnownDimOfTheSignatureMustMatch) {
  GraphRunner runner;
  runtime::Status s = ReshapeByInput({-1, 2}, {1, 3}, {-1, 3}, &runner);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("is declared [1,3] (shape_signature [-1,3]), but the op "
                                     "computes [3,2]"));
}

TEST(ReshapeTest, ShapeThatCannotBeFilledIsAnError) {
  GraphRunner runner;
  runtime::Status s = ReshapeByInput({4, -1}, {}, {}, &runner);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("cannot fill the -1 of the requested shape: 6 elements by 4"));
}

TEST(ReshapeTest, NewShapeOptionSizesAnEmptyDeclaredOutput) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 3});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {});
  b.AddReshape(in, out, {-1});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  EXPECT_THAT(runner.OutputShape(0), ElementsAre(6));
}

runtime::Status RunShapeOp(ModelBuilder& b, int in, int out, std::vector<float>* values) {
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  std::vector<float> input(runner.interpreter().inputs()[0]->num_elements());
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i + 1);
  EXPECT_TRUE(runner.SetInput(0, input));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *values = runner.Output(0);
  return runtime::Status::Ok();
}

int AddSqueeze(ModelBuilder& b, int in, int out, std::vector<int32_t> dims) {
  return b.AddOperator(tfl::BuiltinOperator::SQUEEZE, {in}, {out},
                       tfl::BuiltinOptions::SqueezeOptions,
                       [dims](flatbuffers::FlatBufferBuilder& fbb) {
                         return tfl::CreateSqueezeOptionsDirect(fbb, &dims).Union();
                       });
}

TEST(SqueezeTest, AllUnitDimsOrTheNamedOnes) {
  std::vector<float> out;
  ModelBuilder all;
  int in = all.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 1});
  int o = all.AddTensor(tfl::TensorType::FLOAT32, {3});
  AddSqueeze(all, in, o, {});
  ASSERT_TRUE(RunShapeOp(all, in, o, &out).ok());
  EXPECT_THAT(out, ElementsAre(1, 2, 3));

  ModelBuilder named;
  in = named.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 1});
  o = named.AddTensor(tfl::TensorType::FLOAT32, {1, 3});
  AddSqueeze(named, in, o, {-1});
  ASSERT_TRUE(RunShapeOp(named, in, o, &out).ok());
}

TEST(SqueezeTest, NonUnitDimIsAnError) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {1});
  AddSqueeze(b, in, o, {1});
  std::vector<float> out;
  runtime::Status status = RunShapeOp(b, in, o, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("cannot squeeze dimension 1 of [1,3]"));
}

TEST(ExpandDimsTest, NegativeAxisAppends) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int axis = b.AddConstInt32({}, {-1});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {2, 1});
  b.AddOperator(tfl::BuiltinOperator::EXPAND_DIMS, {in, axis}, {o});
  std::vector<float> out;
  ASSERT_TRUE(RunShapeOp(b, in, o, &out).ok());
  EXPECT_THAT(out, ElementsAre(1, 2));
}

TEST(ExpandDimsTest, WrongDeclaredShapeIsAnError) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int axis = b.AddConstInt32({}, {0});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {2, 1});
  b.AddOperator(tfl::BuiltinOperator::EXPAND_DIMS, {in, axis}, {o});
  std::vector<float> out;
  runtime::Status status = RunShapeOp(b, in, o, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("but the op computes [1,2]"));
}

}  // namespace
}  // namespace dfarm::testing
