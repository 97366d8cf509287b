#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Masks {
  int begin = 0, end = 0, shrink = 0, ellipsis = 0, new_axis = 0;
  bool offset = false;
};

runtime::Status StridedSlice(std::vector<int32_t> in_shape, std::vector<int32_t> begin,
                             std::vector<int32_t> end, std::vector<int32_t> strides, Masks m,
                             std::vector<int32_t> out_shape, const std::vector<float>& input,
                             std::vector<float>* out) {
  ModelBuilder b;
  const int32_t count = static_cast<int32_t>(begin.size());
  int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
  int bt = b.AddConstInt32({count}, begin);
  int et = b.AddConstInt32({count}, end);
  int st = b.AddConstInt32({count}, strides);
  int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddOperator(tfl::BuiltinOperator::STRIDED_SLICE, {in, bt, et, st}, {o},
                tfl::BuiltinOptions::StridedSliceOptions, [m](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateStridedSliceOptions(fbb, m.begin, m.end, m.ellipsis, m.new_axis,
                                                        m.shrink, m.offset)
                      .Union();
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

TEST(StridedSliceTest, EllipsisFirstThenShrink) {
  // x[..., 1] on [2,3,4] = 0..23: x[i][j][1] = 12i + 4j + 1.
  std::vector<float> out;
  Masks m;
  m.ellipsis = 1;
  m.shrink = 2;
  runtime::Status s = StridedSlice({2, 3, 4}, {0, 1}, {0, 2}, {1, 1}, m, {2, 3}, Iota(24), &out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(out, ElementsAreArray({1, 5, 9, 13, 17, 21}));
}

TEST(StridedSliceTest, EllipsisInTheMiddle) {
  // x[0:1, ..., 2:4] on [2,3,4]: 12*0 + 4j + k for j 0..2, k 2..3.
  std::vector<float> out;
  Masks m;
  m.ellipsis = 2;
  ASSERT_TRUE(
      StridedSlice({2, 3, 4}, {0, 0, 2}, {1, 0, 4}, {1, 1, 1}, m, {1, 3, 2}, Iota(24), &out).ok());
  EXPECT_THAT(out, ElementsAreArray({2, 3, 6, 7, 10, 11}));
}

TEST(StridedSliceTest, NewAxisFirst) {
  // x[newaxis, :, 1] on [2,3] = 0..5 -> [1,2] holding x[0][1], x[1][1].
  std::vector<float> out;
  Masks m;
  m.new_axis = 1;
  m.begin = m.end = 2;
  m.shrink = 4;
  ASSERT_TRUE(StridedSlice({2, 3}, {0, 0, 1}, {0, 0, 2}, {1, 1, 1}, m, {1, 2}, Iota(6), &out).ok());
  EXPECT_THAT(out, ElementsAreArray({1, 4}));
}

TEST(StridedSliceTest, EllipsisThenNewAxis) {
  // x[..., newaxis] on [2,2] -> [2,2,1].
  std::vector<float> out;
  Masks m;
  m.ellipsis = 1;
  m.new_axis = 2;
  ASSERT_TRUE(StridedSlice({2, 2}, {0, 0}, {0, 0}, {1, 1}, m, {2, 2, 1}, Iota(4), &out).ok());
  EXPECT_THAT(out, ElementsAreArray({0, 1, 2, 3}));
}

TEST(StridedSliceTest, EllipsisBitWinsOverNewAxisBit) {
  std::vector<float> out;
  Masks m;
  m.ellipsis = 1;
  m.new_axis = 1;
  ASSERT_TRUE(StridedSlice({2, 2}, {0}, {0}, {1}, m, {2, 2}, Iota(4), &out).ok());
  EXPECT_THAT(out, ElementsAreArray({0, 1, 2, 3}));
}

TEST(StridedSliceTest, ShortSpecTakesTrailingDimsWhole) {
  // x[1:2] on [2,3] -> [1,3].
  std::vector<float> out;
  ASSERT_TRUE(StridedSlice({2, 3}, {1}, {2}, {1}, {}, {1, 3}, Iota(6), &out).ok());
  EXPECT_THAT(out, ElementsAreArray({3, 4, 5}));
}

TEST(StridedSliceTest, OffsetMakesEndRelative) {
  // offset: stop = begin 1 + end 3 = 4.
  std::vector<float> out;
  Masks m;
  m.offset = true;
  ASSERT_TRUE(StridedSlice({5}, {1}, {3}, {1}, m, {3}, Iota(5), &out).ok());
  EXPECT_THAT(out, ElementsAreArray({1, 2, 3}));
}

TEST(StridedSliceTest, TwoEllipsesAreAnError) {
  std::vector<float> out;
  Masks m;
  m.ellipsis = 3;
  runtime::Status s = StridedSlice({2, 2}, {0, 0}, {0, 0}, {1, 1}, m, {2, 2}, Iota(4), &out);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("ellipsis_mask has more than one bit set"));
}

TEST(StridedSliceTest, SpecLongerThanRankIsAnError) {
  std::vector<float> out;
  runtime::Status s = StridedSlice({2}, {0, 0}, {1, 1}, {1, 1}, {}, {1, 1}, Iota(2), &out);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("more than the input's rank 1 allows"));
}

TEST(StridedSliceTest, Int8ReversedWithStride2) {
  // [-128, -1, 0, 5, 127] from the end, every other: 127, 0, -128.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::INT8, {5});
  int bt = b.AddConstInt32({1}, {-1});
  int et = b.AddConstInt32({1}, {0});
  int st = b.AddConstInt32({1}, {-2});
  int o = b.AddTensor(tfl::TensorType::INT8, {3});
  b.AddOperator(tfl::BuiltinOperator::STRIDED_SLICE, {in, bt, et, st}, {o},
                tfl::BuiltinOptions::StridedSliceOptions, [](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateStridedSliceOptions(fbb, 0, 1).Union();  // end_mask
                });
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status s = runner.Init(b);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<int8_t>{-128, -1, 0, 5, 127}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output<int8_t>(0), ElementsAreArray({127, 0, -128}));
}

TEST(SliceTest, Uint8AndInt32) {
  for (tfl::TensorType type : {tfl::TensorType::UINT8, tfl::TensorType::INT32}) {
    ModelBuilder b;
    int in = b.AddTensor(type, {2, 3});
    int begin = b.AddConstInt32({2}, {0, 1});
    int size = b.AddConstInt32({2}, {-1, 2});
    int o = b.AddTensor(type, {2, 2});
    b.AddOperator(tfl::BuiltinOperator::SLICE, {in, begin, size}, {o});
    b.SetInputs({in});
    b.SetOutputs({o});
    GraphRunner runner;
    ASSERT_TRUE(runner.Init(b).ok());
    if (type == tfl::TensorType::UINT8) {
      ASSERT_TRUE(runner.SetInput(0, std::vector<uint8_t>{10, 20, 30, 40, 50, 255}));
      ASSERT_TRUE(runner.Invoke().ok());
      EXPECT_THAT(runner.Output<uint8_t>(0), ElementsAreArray({20, 30, 50, 255}));
    } else {
      ASSERT_TRUE(runner.SetInput(0, std::vector<int32_t>{-7, 1 << 30, 3, 4, -5, 6}));
      ASSERT_TRUE(runner.Invoke().ok());
      EXPECT_THAT(runner.Output<int32_t>(0), ElementsAreArray({1 << 30, 3, -5, 6}));
    }
  }
}

}  // namespace
}  // namespace dfarm::testing
