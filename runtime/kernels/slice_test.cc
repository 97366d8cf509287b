#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Masks {
  int begin = 0, end = 0, shrink = 0;
};

runtime::Status StridedSlice(std::vector<int32_t> in_shape, std::vector<int32_t> begin,
                             std::vector<int32_t> end, std::vector<int32_t> strides, Masks m,
                             std::vector<int32_t> out_shape, const std::vector<float>& input,
                             std::vector<float>* out) {
  ModelBuilder b;
  const int32_t rank = static_cast<int32_t>(in_shape.size());
  int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
  int bt = b.AddConstInt32({rank}, begin);
  int et = b.AddConstInt32({rank}, end);
  int st = b.AddConstInt32({rank}, strides);
  int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddOperator(
      tfl::BuiltinOperator::STRIDED_SLICE, {in, bt, et, st}, {o},
      tfl::BuiltinOptions::StridedSliceOptions, [m](flatbuffers::FlatBufferBuilder& fbb) {
        return tfl::CreateStridedSliceOptions(fbb, m.begin, m.end, 0, 0, m.shrink).Union();
      });
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  EXPECT_TRUE(runner.SetInput(0, input));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *out = runner.Output(0);
  return runtime::Status::Ok();
}

TEST(SliceTest, BeginAndSizeWithRest) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {3, 3});
  int begin = b.AddConstInt32({2}, {1, 1});
  int size = b.AddConstInt32({2}, {2, -1});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {2, 2});
  b.AddOperator(tfl::BuiltinOperator::SLICE, {in, begin, size}, {o});
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAreArray({5, 6, 8, 9}));
}

TEST(StridedSliceTest, NegativeStrideFromANegativeBegin) {
  // begin -1 -> 3, end 0 (exclusive), stride -1: elements 3, 2, 1.
  std::vector<float> out;
  ASSERT_TRUE(StridedSlice({4}, {-1}, {0}, {-1}, {}, {3}, {10, 11, 12, 13}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({13, 12, 11}));
}

TEST(StridedSliceTest, ShrinkAxisAndStride2) {
  // Row 1 of [2,3] (shrunk), every other column.
  std::vector<float> out;
  Masks m;
  m.shrink = 1;
  ASSERT_TRUE(StridedSlice({2, 3}, {1, 0}, {2, 3}, {1, 2}, m, {2}, {1, 2, 3, 4, 5, 6}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({4, 6}));
}

TEST(StridedSliceTest, MasksIgnoreBeginAndEnd) {
  // begin_mask on dim 0 starts at 0; end_mask on dim 1 runs to the end; end 9 clamps.
  std::vector<float> out;
  Masks m;
  m.begin = 1;
  m.end = 2;
  ASSERT_TRUE(
      StridedSlice({2, 3}, {1, 1}, {9, 0}, {1, 1}, m, {2, 2}, {1, 2, 3, 4, 5, 6}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({2, 3, 5, 6}));
}

TEST(StridedSliceTest, ZeroStrideIsAnError) {
  std::vector<float> out;
  runtime::Status status = StridedSlice({2}, {0}, {2}, {0}, {}, {2}, {1, 2}, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("stride of dimension 0 is 0"));
}

}  // namespace
}  // namespace dfarm::testing
