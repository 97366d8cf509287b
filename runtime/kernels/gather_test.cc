#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct GatherGraph {
  ModelBuilder b;
  GraphRunner runner;
  runtime::Status Init(int axis, std::vector<int32_t> indices_shape,
                       std::vector<int32_t> out_shape) {
    int params = b.AddTensor(tfl::TensorType::FLOAT32, {3, 2});
    int indices = b.AddTensor(tfl::TensorType::INT32, indices_shape);
    int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
    b.AddOperator(tfl::BuiltinOperator::GATHER, {params, indices}, {o},
                  tfl::BuiltinOptions::GatherOptions, [axis](flatbuffers::FlatBufferBuilder& fbb) {
                    return tfl::CreateGatherOptions(fbb, axis).Union();
                  });
    b.SetInputs({params, indices});
    b.SetOutputs({o});
    return runner.Init(b);
  }
  runtime::Status Run(const std::vector<int32_t>& indices) {
    EXPECT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_TRUE(runner.SetInput(1, indices));
    return runner.Invoke();
  }
};

TEST(GatherTest, Rows) {
  GatherGraph g;
  ASSERT_TRUE(g.Init(0, {2}, {2, 2}).ok());
  ASSERT_TRUE(g.Run({2, 0}).ok());
  EXPECT_THAT(g.runner.Output(0), ElementsAreArray({5, 6, 1, 2}));
}

TEST(GatherTest, ColumnsWithIndexMatrix) {
  // axis 1, indices [1,2] -> [3,1,2].
  GatherGraph g;
  ASSERT_TRUE(g.Init(1, {1, 2}, {3, 1, 2}).ok());
  ASSERT_TRUE(g.Run({1, 0}).ok());
  EXPECT_THAT(g.runner.Output(0), ElementsAreArray({2, 1, 4, 3, 6, 5}));
}

TEST(GatherTest, IndexOutOfRangeIsAnError) {
  GatherGraph g;
  ASSERT_TRUE(g.Init(0, {1}, {1, 2}).ok());
  runtime::Status status = g.Run({3});
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (GATHER): index 3 is out of range [0, 3)"));
}

// GATHER of `values` (params, `type`) at `indices`, both graph inputs.
template <typename T>
runtime::Status Gather(tfl::TensorType type, std::vector<int32_t> params_shape,
                       const std::vector<T>& values, std::vector<int32_t> indices_shape,
                       const std::vector<int32_t>& indices, int axis, int batch_dims,
                       std::vector<int32_t> out_shape, std::vector<T>* out) {
  ModelBuilder b;
  int params = b.AddTensor(type, params_shape);
  int idx = b.AddTensor(tfl::TensorType::INT32, indices_shape);
  int o = b.AddTensor(type, out_shape);
  b.AddOperator(tfl::BuiltinOperator::GATHER, {params, idx}, {o},
                tfl::BuiltinOptions::GatherOptions,
                [axis, batch_dims](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateGatherOptions(fbb, axis, batch_dims).Union();
                });
  b.SetInputs({params, idx});
  b.SetOutputs({o});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  EXPECT_TRUE(runner.SetInput(0, values));
  EXPECT_TRUE(runner.SetInput(1, indices));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *out = runner.Output<T>(0);
  return runtime::Status::Ok();
}

TEST(GatherTest, NegativeAxis) {
  // axis -1 of [3,2] is axis 1: columns 1, 0 of each row.
  std::vector<float> out;
  ASSERT_TRUE(Gather<float>(tfl::TensorType::FLOAT32, {3, 2}, {1, 2, 3, 4, 5, 6}, {2}, {1, 0}, -1,
                            0, {3, 2}, &out)
                  .ok());
  EXPECT_THAT(out, ElementsAreArray({2, 1, 4, 3, 6, 5}));
}

TEST(GatherTest, BatchDimsOneGathersPerRow) {
  // params [[1,2,3],[4,5,6]], indices [[2,0],[1,1]]: row b takes params[b][indices[b][i]].
  std::vector<float> out;
  runtime::Status s = Gather<float>(tfl::TensorType::FLOAT32, {2, 3}, {1, 2, 3, 4, 5, 6}, {2, 2},
                                    {2, 0, 1, 1}, 1, 1, {2, 2}, &out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(out, ElementsAreArray({3, 1, 5, 5}));
}

TEST(GatherTest, NegativeBatchDimsAndAxisCountFromTheEnd) {
  // batch_dims -1 with rank-2 indices is 1; axis -1 of rank-2 params is 1.
  std::vector<float> out;
  ASSERT_TRUE(Gather<float>(tfl::TensorType::FLOAT32, {2, 3}, {1, 2, 3, 4, 5, 6}, {2, 2},
                            {2, 0, 1, 1}, -1, -1, {2, 2}, &out)
                  .ok());
  EXPECT_THAT(out, ElementsAreArray({3, 1, 5, 5}));
}

TEST(GatherTest, BatchDimsWithOuterDims) {
  // params [2,2,3] = 0..11, axis 2, batch_dims 1, indices [[2],[0]]:
  // out[b][o][0] = params[b][o][indices[b][0]] -> 2, 5, 6, 9.
  std::vector<int32_t> out;
  std::vector<int32_t> params(12);
  for (int i = 0; i < 12; ++i) params[i] = i;
  runtime::Status s = Gather<int32_t>(tfl::TensorType::INT32, {2, 2, 3}, params, {2, 1}, {2, 0}, 2,
                                      1, {2, 2, 1}, &out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(out, ElementsAreArray({2, 5, 6, 9}));
}

TEST(GatherTest, Int8AndUint8Params) {
  std::vector<int8_t> out8;
  ASSERT_TRUE(Gather<int8_t>(tfl::TensorType::INT8, {4}, {-128, -1, 0, 127}, {3}, {3, 0, 1}, 0, 0,
                             {3}, &out8)
                  .ok());
  EXPECT_THAT(out8, ElementsAreArray({127, -128, -1}));
  std::vector<uint8_t> outu8;
  ASSERT_TRUE(Gather<uint8_t>(tfl::TensorType::UINT8, {2, 2}, {0, 255, 7, 9}, {1}, {1}, 0, 0,
                              {1, 2}, &outu8)
                  .ok());
  EXPECT_THAT(outu8, ElementsAreArray({7, 9}));
}

TEST(GatherTest, BatchDimsAboveAxisIsAnError) {
  std::vector<float> out;
  runtime::Status s = Gather<float>(tfl::TensorType::FLOAT32, {2, 3}, {1, 2, 3, 4, 5, 6}, {2, 2},
                                    {0, 0, 0, 0}, 0, 1, {2, 2}, &out);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("batch_dims 1 is out of range"));
}

TEST(GatherTest, BatchDimsMismatchIsAnError) {
  std::vector<float> out;
  runtime::Status s = Gather<float>(tfl::TensorType::FLOAT32, {2, 3}, {1, 2, 3, 4, 5, 6}, {3, 1},
                                    {0, 0, 0}, 1, 1, {2, 1}, &out);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("dimension 0 of params [2,3] and indices [3,1] must agree"));
}

}  // namespace
}  // namespace dfarm::testing
