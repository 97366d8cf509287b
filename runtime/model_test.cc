#include "runtime/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "tests/model_builder/model_builder.h"

namespace dfarm::runtime {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;
using ::testing::Not;
namespace tfl = ::dfarm::tflite;

// input -> RELU -> ADD(const) -> output.
ModelBuilder SmallModel() {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "in");
  int mid = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "mid");
  int c = b.AddConstFloat32({1, 4}, {1, 2, 3, 4}, "c");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
  b.AddUnary(tfl::BuiltinOperator::RELU, in, mid);
  b.AddAdd(mid, c, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  return b;
}

Status LoadBytes(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<Model> model;
  return Model::FromBuffer("face.tflite", bytes, &model);
}

TEST(ModelTest, LoadsAValidModel) {
  std::unique_ptr<Model> model;
  std::vector<uint8_t> bytes = SmallModel().Build();
  Status status = Model::FromBuffer("small.tflite", bytes, &model);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(model->name(), "small.tflite");
  EXPECT_EQ(model->size_bytes(), bytes.size());
  EXPECT_EQ(model->subgraph()->operators()->size(), 2u);
}

TEST(ModelTest, MissingFile) {
  std::unique_ptr<Model> model;
  Status status = Model::Load("/nonexistent/face.tflite", &model);
  EXPECT_EQ(status.code(), StatusCode::kError);
  EXPECT_EQ(status.message(),
            "failed to load model 'face.tflite': cannot open '/nonexistent/face.tflite': No such "
            "file or directory");
}

TEST(ModelTest, EmptyAndTinyFiles) {
  EXPECT_EQ(LoadBytes({}).message(),
            "failed to load model 'face.tflite': file is too small (0 bytes) to be a .tflite "
            "model");
  EXPECT_THAT(LoadBytes({1, 2, 3}).message(), HasSubstr("file is too small (3 bytes)"));
}

TEST(ModelTest, WrongIdentifier) {
  std::vector<uint8_t> bytes = SmallModel().Build();
  bytes[4] = 'X';
  EXPECT_EQ(LoadBytes(bytes).message(),
            "failed to load model 'face.tflite': not a .tflite model (file identifier 'XFL3', "
            "expected 'TFL3')");
}

TEST(ModelTest, TruncatedFileIsAOneLineError) {
  std::vector<uint8_t> bytes = SmallModel().Build();
  // Every truncation must fail cleanly, never crash.
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    Status status = LoadBytes(cut);
    ASSERT_FALSE(status.ok()) << "truncated to " << n << " bytes";
    EXPECT_THAT(status.message(), Not(HasSubstr("\n")));
  }
  std::vector<uint8_t> half(bytes.begin(), bytes.begin() + bytes.size() / 2);
  EXPECT_EQ(LoadBytes(half).message(),
            "failed to load model 'face.tflite': the file is truncated or corrupt (FlatBuffers "
            "verification failed)");
}

TEST(ModelTest, TruncatedFileOnDisk) {
  std::vector<uint8_t> bytes = SmallModel().Build();
  std::string path = ::testing::TempDir() + "/truncated.tflite";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size() - 40);
  }
  std::unique_ptr<Model> model;
  Status status = Model::Load(path, &model);
  EXPECT_EQ(status.code(), StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("failed to load model 'truncated.tflite': "));
  std::filesystem::remove(path);
}

TEST(ModelTest, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  std::vector<uint8_t> valid = SmallModel().Build();
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes;
    if (trial % 2 == 0) {
      // Pure noise with the right identifier, so the verifier gets to see it.
      bytes.resize(8 + rng() % 512);
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
      std::copy_n("TFL3", 4, bytes.begin() + 4);
    } else {
      // A valid model with a few bytes flipped.
      bytes = valid;
      for (int k = 0; k < 4; ++k) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    }
    std::unique_ptr<Model> model;
    Status status = Model::FromBuffer("random.tflite", bytes, &model);
    if (!status.ok()) {
      EXPECT_THAT(status.message(), HasSubstr("failed to load model"));
    }
  }
}

TEST(ModelTest, BadBufferIndex) {
  ModelBuilder b = SmallModel();
  b.SetTensorBuffer(2, 90);
  EXPECT_EQ(LoadBytes(b.Build()).message(),
            "failed to load model 'face.tflite': tensor 2 refers to buffer 90, but the model has "
            "2 buffers");
}

TEST(ModelTest, ConstantOfTheWrongSize) {
  ModelBuilder b;
  int c = b.AddConstRaw(tfl::TensorType::FLOAT16, {2, 3}, std::vector<uint8_t>(10), "w");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3});
  b.AddDequantize(c, out);
  b.SetOutputs({out});
  EXPECT_EQ(LoadBytes(b.Build()).message(),
            "failed to load model 'face.tflite': tensor 0 'w' holds 10 bytes in buffer 1, but its "
            "shape [2,3] of FLOAT16 needs 12 bytes");
}

TEST(ModelTest, ShapeSignatureMustFitTheShape) {
  ModelBuilder ok = SmallModel();
  ok.SetShapeSignature(1, {-1, 4});  // [1,4] with an unknown batch
  EXPECT_TRUE(LoadBytes(ok.Build()).ok());
  ModelBuilder empty_shape;
  int in = empty_shape.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "in");
  int out = empty_shape.AddTensor(tfl::TensorType::FLOAT32, {}, "out");
  empty_shape.SetShapeSignature(out, {-1, 4});  // shape [] leaves the rank to the signature
  empty_shape.AddUnary(tfl::BuiltinOperator::RELU, in, out);
  empty_shape.SetInputs({in});
  empty_shape.SetOutputs({out});
  EXPECT_TRUE(LoadBytes(empty_shape.Build()).ok());

  ModelBuilder known_differs = SmallModel();
  known_differs.SetShapeSignature(1, {-1, 5});
  EXPECT_EQ(LoadBytes(known_differs.Build()).message(),
            "failed to load model 'face.tflite': tensor 1 'mid' has shape_signature [-1,5], which "
            "does not fit its shape [1,4]");
  ModelBuilder rank_differs = SmallModel();
  rank_differs.SetShapeSignature(1, {-1});
  EXPECT_THAT(LoadBytes(rank_differs.Build()).message(), HasSubstr("shape_signature [-1]"));
  ModelBuilder below_minus_one = SmallModel();
  below_minus_one.SetShapeSignature(1, {-2, 4});
  EXPECT_THAT(LoadBytes(below_minus_one.Build()).message(), HasSubstr("shape_signature [-2,4]"));
}

TEST(ModelTest, OperatorInputOutOfRange) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  b.AddAdd(in, 7, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  EXPECT_EQ(LoadBytes(b.Build()).message(),
            "failed to load model 'face.tflite': operator 0 (ADD) input 1 refers to tensor 7, but "
            "the subgraph has 2 tensors");
}

TEST(ModelTest, OpcodeOutOfRange) {
  ModelBuilder b = SmallModel();
  b.SetOpcodeIndex(1, 5);
  EXPECT_EQ(LoadBytes(b.Build()).message(),
            "failed to load model 'face.tflite': operator 1 uses opcode 5, but the model has 2 "
            "operator codes");
}

TEST(ModelTest, TensorWrittenTwice) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  b.AddUnary(tfl::BuiltinOperator::RELU, in, out);
  b.AddUnary(tfl::BuiltinOperator::RELU6, in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  EXPECT_EQ(LoadBytes(b.Build()).message(),
            "failed to load model 'face.tflite': operator 1 (RELU6) writes tensor 1, which "
            "operator 0 (RELU) already writes");
}

TEST(ModelTest, CycleOrOutOfOrder) {
  // op0 reads t1, which op1 writes later.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  b.AddAdd(in, t1, t2);
  b.AddUnary(tfl::BuiltinOperator::RELU, t2, t1);
  b.SetInputs({in});
  b.SetOutputs({t2});
  EXPECT_EQ(LoadBytes(b.Build()).message(),
            "failed to load model 'face.tflite': operator 0 (ADD) reads tensor 1 before operator 1 "
            "(RELU) writes it (the graph has a cycle or is out of order)");
}

TEST(ModelTest, ReadOfAnUnwrittenTensor) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int dangling = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  b.AddAdd(in, dangling, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  EXPECT_THAT(LoadBytes(b.Build()).message(),
              HasSubstr("operator 0 (ADD) reads tensor 1, which is neither constant, a model "
                        "input, nor written by an operator"));
}

TEST(ModelTest, WritingAModelInputOrConstant) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int c = b.AddConstFloat32({4}, {1, 2, 3, 4});
  b.AddUnary(tfl::BuiltinOperator::RELU, in, c);
  b.SetInputs({in});
  b.SetOutputs({c});
  EXPECT_THAT(LoadBytes(b.Build()).message(), HasSubstr("operator 0 (RELU) writes constant "
                                                        "tensor 1"));
}

TEST(ModelTest, WrongSchemaVersion) {
  ModelBuilder b = SmallModel();
  b.SetVersion(2);
  EXPECT_EQ(LoadBytes(b.Build()).message(),
            "failed to load model 'face.tflite': schema version 2, expected 3");
}

TEST(ModelTest, RealModelLoads) {
  std::string path = std::string(DFARM_MODELS_DIR) + "/face_detection_short_range.tflite";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  std::unique_ptr<Model> model;
  Status status = Model::Load(path, &model);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(model->name(), "face_detection_short_range.tflite");
  EXPECT_EQ(model->subgraph()->inputs()->size(), 1u);
  EXPECT_EQ(model->subgraph()->outputs()->size(), 2u);
}

}  // namespace
}  // namespace dfarm::runtime
