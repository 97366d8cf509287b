#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

runtime::Status MatMul(std::vector<int32_t> lhs_shape, const std::vector<float>& lhs,
                       std::vector<int32_t> rhs_shape, const std::vector<float>& rhs,
                       std::vector<int32_t> out_shape, bool adj_x, bool adj_y,
                       std::vector<float>* out) {
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::FLOAT32, lhs_shape);
  int c = b.AddTensor(tfl::TensorType::FLOAT32, rhs_shape);
  int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddOperator(tfl::BuiltinOperator::BATCH_MATMUL, {a, c}, {o},
                tfl::BuiltinOptions::BatchMatMulOptions, [=](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateBatchMatMulOptions(fbb, adj_x, adj_y).Union();
                });
  b.SetInputs({a, c});
  b.SetOutputs({o});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  EXPECT_TRUE(runner.SetInput(0, lhs));
  EXPECT_TRUE(runner.SetInput(1, rhs));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *out = runner.Output(0);
  return runtime::Status::Ok();
}

TEST(BatchMatMulTest, Matrices) {
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]].
  std::vector<float> out;
  ASSERT_TRUE(MatMul({2, 2}, {1, 2, 3, 4}, {2, 2}, {5, 6, 7, 8}, {2, 2}, false, false, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({19, 22, 43, 50}));
}

TEST(BatchMatMulTest, AdjointsTransposeTheOperands) {
  // A^T B^T with A = [[1,2],[3,4]], B = [[5,6],[7,8]]: [[1,3],[2,4]] x [[5,7],[6,8]].
  std::vector<float> out;
  ASSERT_TRUE(MatMul({2, 2}, {1, 2, 3, 4}, {2, 2}, {5, 6, 7, 8}, {2, 2}, true, true, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({23, 31, 34, 46}));
}

TEST(BatchMatMulTest, BroadcastsTheRhsBatch) {
  // Two [1,2] rows times one [2,1] column.
  std::vector<float> out;
  ASSERT_TRUE(MatMul({2, 1, 2}, {1, 2, 3, 4}, {2, 1}, {10, 1}, {2, 1, 1}, false, false, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({12, 34}));
}

TEST(BatchMatMulTest, InnerMismatchIsAnError) {
  std::vector<float> out;
  runtime::Status status = MatMul({2, 3}, std::vector<float>(6), {2, 2}, std::vector<float>(4),
                                  {2, 2}, false, false, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("inner dims 3 and 2"));
}

}  // namespace
}  // namespace dfarm::testing
