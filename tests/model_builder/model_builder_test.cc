#include "tests/model_builder/model_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

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

TEST(ModelBuilderTest, WritesPerChannelQuantizationAndInt8Constants) {
  ModelBuilder b;
  int w = b.AddConstInt8({3, 1}, {-128, 0, 127}, "w");
  b.SetQuantization(w, {0.5f, 0.25f, 0.125f}, {0, 0, 0}, 0);
  int u = b.AddConstUint8({2}, {7, 255}, "u");
  b.SetQuantization(u, 0.1f, 128);
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2}, "out");
  b.AddDequantize(u, out);
  b.SetOutputs({out});

  std::vector<uint8_t> bytes = b.Build();
  std::unique_ptr<runtime::Model> model;
  runtime::Status status = runtime::Model::FromBuffer("q.tflite", bytes, &model);
  ASSERT_TRUE(status.ok()) << status.message();
  const tflite::Tensor* fw = model->subgraph()->tensors()->Get(w);
  EXPECT_EQ(fw->type(), tfl::TensorType::INT8);
  runtime::Tensor tw;
  tw.shape = {3, 1};
  ASSERT_TRUE(runtime::ReadQuantization(fw->quantization(), &tw).ok());
  EXPECT_TRUE(tw.quantized);
  EXPECT_TRUE(tw.per_channel_quantized);
  EXPECT_THAT(tw.scales, ElementsAre(0.5f, 0.25f, 0.125f));
  EXPECT_THAT(tw.zero_points, ElementsAre(0, 0, 0));
  EXPECT_EQ(tw.quantized_dimension, 0);
  EXPECT_EQ(tw.scale, 0.5f);

  runtime::Tensor tu;
  tu.shape = {2};
  ASSERT_TRUE(
      runtime::ReadQuantization(model->subgraph()->tensors()->Get(u)->quantization(), &tu).ok());
  EXPECT_FALSE(tu.per_channel_quantized);
  EXPECT_EQ(tu.scale, 0.1f);
  EXPECT_EQ(tu.zero_point, 128);

  // Biases of quantized weights: scale input * weight scale, per channel when several.
  ModelBuilder bb;
  const int per_channel = bb.AddQuantizedBias({5, -6}, 0.5f, {0.25f, 0.125f});
  const int per_tensor = bb.AddQuantizedBias({7}, 0.5f, {0.25f});
  std::vector<uint8_t> bias_bytes = bb.Build();
  std::unique_ptr<runtime::Model> biases;
  ASSERT_TRUE(runtime::Model::FromBuffer("b.tflite", bias_bytes, &biases).ok());
  runtime::Tensor pc, pt;
  pc.shape = {2};
  pt.shape = {1};
  ASSERT_TRUE(runtime::ReadQuantization(
                  biases->subgraph()->tensors()->Get(per_channel)->quantization(), &pc)
                  .ok());
  ASSERT_TRUE(
      runtime::ReadQuantization(biases->subgraph()->tensors()->Get(per_tensor)->quantization(), &pt)
          .ok());
  EXPECT_TRUE(pc.per_channel_quantized);
  EXPECT_THAT(pc.scales, ElementsAre(0.125f, 0.0625f));
  EXPECT_THAT(pc.zero_points, ElementsAre(0, 0));
  EXPECT_FALSE(pt.per_channel_quantized);
  EXPECT_EQ(pt.scale, 0.125f);
  EXPECT_EQ(biases->subgraph()->tensors()->Get(per_tensor)->type(), tfl::TensorType::INT32);

  // The constants' bytes, through DEQUANTIZE (folded at load): 0.1 * (7 - 128), 0.1 * 127.
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(0.1f * -121.0f, 0.1f * 127.0f));
}

TEST(ModelBuilderTest, LoaderRefusesMismatchedPerChannelParameters) {
  // One model per fault; the loader names the tensor and the mismatch.
  auto load = [](const std::function<void(ModelBuilder&, int)>& quantize) {
    ModelBuilder b;
    int w = b.AddConstInt8({2, 2}, {1, 2, 3, 4}, "w");
    quantize(b, w);
    std::vector<uint8_t> bytes = b.Build();
    std::unique_ptr<runtime::Model> model;
    return runtime::Model::FromBuffer("q.tflite", bytes, &model);
  };
  runtime::Status dim = load([](ModelBuilder& b, int w) {
    b.SetQuantization(w, {0.5f, 0.25f, 0.125f}, {0, 0, 0}, 1);  // dimension 1 has size 2
  });
  EXPECT_EQ(dim.code(), runtime::StatusCode::kError);
  EXPECT_THAT(dim.message(), ::testing::HasSubstr("tensor 0 'w': quantization has 3 per-channel "
                                                  "scales, but dimension 1 of shape [2,2] has "
                                                  "size 2"));
  runtime::Status zps = load([](ModelBuilder& b, int w) {
    b.SetQuantization(w, {0.5f, 0.25f}, {0}, 0);  // one zero point for two scales
  });
  EXPECT_THAT(zps.message(), ::testing::HasSubstr("2 scales but 1 zero points"));
  runtime::Status range = load([](ModelBuilder& b, int w) {
    b.SetQuantization(w, {0.5f, 0.25f}, {0, 0}, 3);  // no dimension 3
  });
  EXPECT_THAT(range.message(), ::testing::HasSubstr("quantized_dimension 3 is out of range"));
  EXPECT_TRUE(load([](ModelBuilder& b, int w) {
                b.SetQuantization(w, {0.5f, 0.25f}, {0, 0}, 1);
              }).ok());
}

}  // namespace
}  // namespace dfarm::testing
