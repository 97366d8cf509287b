#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/fp16.h"
#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

SparseLevel Dense(int size) {
  SparseLevel l;
  l.dense_size = size;
  return l;
}

SparseLevel Csr(std::vector<int32_t> segments, std::vector<int32_t> indices,
                bool as_uint8 = false) {
  SparseLevel l;
  l.sparse = true;
  l.segments = std::move(segments);
  l.indices = std::move(indices);
  l.as_uint8 = as_uint8;
  return l;
}

// DENSIFY of a sparse constant, then ADD of the input so the graph has one
// (the densified constant is folded at allocation).
runtime::Status DensifyPlusZero(tfl::TensorType type, std::vector<int32_t> shape,
                                std::vector<uint8_t> values, SparsitySpec spec,
                                std::vector<float>* out) {
  ModelBuilder b;
  int sparse = b.AddSparseConst(type, shape, std::move(values), std::move(spec));
  int dense = b.AddTensor(type, shape);
  b.AddOperator(tfl::BuiltinOperator::DENSIFY, {sparse}, {dense});
  int dense_f32 = dense;
  if (type == tfl::TensorType::FLOAT16) {
    dense_f32 = b.AddTensor(tfl::TensorType::FLOAT32, shape);
    b.AddDequantize(dense, dense_f32);
  }
  int in = b.AddTensor(tfl::TensorType::FLOAT32, shape);
  int o = b.AddTensor(tfl::TensorType::FLOAT32, shape);
  b.AddAdd(in, dense_f32, o);
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  int64_t n = 1;
  for (int32_t d : shape) n *= d;
  EXPECT_TRUE(runner.SetInput(0, std::vector<float>(n, 0.0f)));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *out = runner.Output(0);
  return runtime::Status::Ok();
}

TEST(DensifyTest, CsrMatrix) {
  // [[0,1,0,2],[0,0,0,0],[3,0,4,0]]: rows dense, columns CSR.
  SparsitySpec spec;
  spec.traversal_order = {0, 1};
  spec.levels = {Dense(3), Csr({0, 2, 2, 4}, {1, 3, 0, 2})};
  std::vector<float> out;
  runtime::Status status = DensifyPlusZero(tfl::TensorType::FLOAT32, {3, 4},
                                           Bytes(std::vector<float>{1, 2, 3, 4}), spec, &out);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_THAT(out, ElementsAreArray({0, 1, 0, 2, 0, 0, 0, 0, 3, 0, 4, 0}));
}

TEST(DensifyTest, BlockSparseFloat16WithUint8Indices) {
  // 4x4 in 2x2 blocks; blocks (0,0) and (1,1) are stored, as block rows dense,
  // block columns CSR, then each block dense.
  SparsitySpec spec;
  spec.traversal_order = {0, 1, 2, 3};
  spec.block_map = {0, 1};
  spec.levels = {Dense(2), Csr({0, 1, 2}, {0, 1}, true), Dense(2), Dense(2)};
  std::vector<uint16_t> halves;
  for (float v : {1, 2, 3, 4, 5, 6, 7, 8}) halves.push_back(runtime::FloatToHalf(v));
  std::vector<float> out;
  runtime::Status status =
      DensifyPlusZero(tfl::TensorType::FLOAT16, {4, 4}, Bytes(halves), spec, &out);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_THAT(out, ElementsAreArray({1, 2, 0, 0,  //
                                     3, 4, 0, 0,  //
                                     0, 0, 5, 6,  //
                                     0, 0, 7, 8}));
}

TEST(DensifyTest, IndexOutsideTheShapeIsAnError) {
  SparsitySpec spec;
  spec.traversal_order = {0, 1};
  spec.levels = {Dense(1), Csr({0, 1}, {4})};
  std::vector<float> out;
  runtime::Status status =
      DensifyPlusZero(tfl::TensorType::FLOAT32, {1, 4}, Bytes(std::vector<float>{1}), spec, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("(DENSIFY): a sparse index lies outside the shape"));
}

TEST(DensifyTest, MoreIndicesThanValuesIsAnError) {
  SparsitySpec spec;
  spec.traversal_order = {0, 1};
  spec.levels = {Dense(1), Csr({0, 2}, {0, 1})};
  std::vector<float> out;
  runtime::Status status =
      DensifyPlusZero(tfl::TensorType::FLOAT32, {1, 4}, Bytes(std::vector<float>{1}), spec, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("names more values than the 1 stored"));
}

TEST(DensifyTest, OtherOpsRefuseSparseInputs) {
  SparsitySpec spec;
  spec.traversal_order = {0};
  spec.levels = {Dense(2)};
  ModelBuilder b;
  int sparse =
      b.AddSparseConst(tfl::TensorType::FLOAT32, {2}, Bytes(std::vector<float>{1, 2}), spec, "w");
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  b.AddAdd(in, sparse, o);
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(),
              HasSubstr("node 0 (ADD): input tensor 0 'w' is sparse; only DENSIFY reads"));
}

}  // namespace
}  // namespace dfarm::testing
