#include "tests/model_builder/model_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/model.h"
#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;

TEST(ModelBuilderTest, BuildsAModelTheRuntimeLoads) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2}, "in");
  int w = b.AddConstFloat16({1, 2}, {0.5f, -1.0f}, "w");
  int wf = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2}, "w_f32");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2}, "out");
  b.AddDequantize(w, wf);
  b.AddAdd(in, wf, out);
  b.SetInputs({in});
  b.SetOutputs({out});

  std::vector<uint8_t> bytes = b.Build();
  std::unique_ptr<runtime::Model> model;
  runtime::Status status = runtime::Model::FromBuffer("built.tflite", bytes, &model);
  ASSERT_TRUE(status.ok()) << status.message();
  const tflite::SubGraph* graph = model->subgraph();
  EXPECT_EQ(graph->tensors()->size(), 4u);
  EXPECT_EQ(graph->operators()->size(), 2u);
  EXPECT_EQ(model->BuiltinCode(graph->operators()->Get(0)->opcode_index()),
            tfl::BuiltinOperator::DEQUANTIZE);
  EXPECT_EQ(model->OperatorName(graph->operators()->Get(1)->opcode_index()), "ADD");
  EXPECT_EQ(graph->tensors()->Get(out)->name()->str(), "out");

  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1.0f, 2.0f}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(1.5f, 1.0f));
}

TEST(ModelBuilderTest, WritesAFile) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  b.AddUnary(tfl::BuiltinOperator::RELU, in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  std::string path = ::testing::TempDir() + "/model_builder_test.tflite";
  ASSERT_TRUE(b.WriteFile(path));
  std::unique_ptr<runtime::Model> model;
  runtime::Status status = runtime::Model::Load(path, &model);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(model->name(), "model_builder_test.tflite");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dfarm::testing
