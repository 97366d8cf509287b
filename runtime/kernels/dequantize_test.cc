#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// Known float16 bit patterns and their exact values.
const std::vector<uint16_t> kHalves = {0x3c00, 0xc000, 0x3800, 0x7bff,
                                       0x0001, 0x8000, 0x7c00, 0x3555};
const std::vector<float> kValues = {1.0f,
                                    -2.0f,
                                    0.5f,
                                    65504.0f,
                                    5.9604644775390625e-8f,  // 2^-24, smallest subnormal
                                    -0.0f,
                                    std::numeric_limits<float>::infinity(),
                                    0.333251953125f};

std::vector<uint8_t> Bytes(const std::vector<uint16_t>& halves) {
  std::vector<uint8_t> bytes(halves.size() * 2);
  std::memcpy(bytes.data(), halves.data(), bytes.size());
  return bytes;
}

TEST(DequantizeTest, ConstantFloat16IsFoldedAtAllocation) {
  ModelBuilder b;
  int in = b.AddConstRaw(tfl::TensorType::FLOAT16, {8}, Bytes(kHalves));
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {8});
  b.AddDequantize(in, out);
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  EXPECT_EQ(runner.interpreter().invoked_nodes_size(), 0u);
  EXPECT_THAT(runner.Output(0), ElementsAreArray(kValues));
  EXPECT_TRUE(std::signbit(runner.Output(0)[5]));
}

TEST(DequantizeTest, Float16Input) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT16, {8});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {8});
  b.AddDequantize(in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  EXPECT_EQ(runner.interpreter().invoked_nodes_size(), 1u);
  ASSERT_TRUE(runner.SetInput(0, kHalves));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray(kValues));
}

TEST(DequantizeTest, Int8Affine) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::INT8, {5});
  b.SetQuantization(in, 0.5f, -1);
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {5});
  b.AddDequantize(in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<int8_t>{-1, 0, 5, 127, -128}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(0.0f, 0.5f, 3.0f, 64.0f, -63.5f));
}

TEST(DequantizeTest, Uint8Affine) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::UINT8, {3});
  b.SetQuantization(in, 0.25f, 128);
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {3});
  b.AddDequantize(in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  ASSERT_TRUE(runner.SetInput(0, std::vector<uint8_t>{0, 128, 255}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(-32.0f, 0.0f, 31.75f));
}

TEST(DequantizeTest, Int32IsUnsupported) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::INT32, {3});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {3});
  b.AddDequantize(in, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (DEQUANTIZE): input dtype int32"));
}

}  // namespace
}  // namespace dfarm::testing
