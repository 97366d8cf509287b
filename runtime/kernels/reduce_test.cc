#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

using Op = tfl::BuiltinOperator;

runtime::Status Reduce(Op code, std::vector<int32_t> in_shape, const std::vector<float>& input,
                       std::vector<int32_t> axes, bool keep_dims, std::vector<int32_t> out_shape,
                       std::vector<float>* out) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
  int ax = b.AddConstInt32({static_cast<int32_t>(axes.size())}, axes);
  int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddReducer(code, in, ax, o, keep_dims);
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  EXPECT_TRUE(runner.SetInput(0, input));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *out = runner.Output(0);
  return runtime::Status::Ok();
}

TEST(ReduceTest, MeanOverTheMiddleAxis) {
  // [2,3,2] of 0..11, mean over axis 1: (0+2+4)/3, (1+3+5)/3, (6+8+10)/3, (7+9+11)/3.
  std::vector<float> out;
  ASSERT_TRUE(Reduce(Op::MEAN, {2, 3, 2}, Iota(12), {1}, false, {2, 2}, &out).ok());
  EXPECT_THAT(out, Pointwise(FloatNear(1e-6f), {2.0f, 3.0f, 8.0f, 9.0f}));
}

TEST(ReduceTest, MeanKeepDimsWithNegativeAndRepeatedAxes) {
  // Axes 0 and -1 (given twice) of [2,3,2]: mean of {0,1,6,7}, {2,3,8,9}, {4,5,10,11}.
  std::vector<float> out;
  ASSERT_TRUE(Reduce(Op::MEAN, {2, 3, 2}, Iota(12), {0, -1, 2}, true, {1, 3, 1}, &out).ok());
  EXPECT_THAT(out, Pointwise(FloatNear(1e-6f), {3.5f, 5.5f, 7.5f}));
}

TEST(ReduceTest, SpatialMeanLikeTheHandModels) {
  // [1,2,2,3] over axes 1,2 -> [1,3]: channel c holds c, c+3, c+6, c+9.
  std::vector<float> out;
  ASSERT_TRUE(Reduce(Op::MEAN, {1, 2, 2, 3}, Iota(12), {1, 2}, false, {1, 3}, &out).ok());
  EXPECT_THAT(out, Pointwise(FloatNear(1e-6f), {4.5f, 5.5f, 6.5f}));
}

// Values whose float sums depend on the order they are added in.
std::vector<float> Uneven(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t state = 12345;
  for (float& x : v) {
    state = state * 1664525u + 1013904223u;
    x = static_cast<float>(state >> 8) / 16777216.0f * 3.0f - 1.0f + (state % 7 == 0 ? 1e4f : 0.0f);
  }
  return v;
}

TEST(ReduceTest, SumAndMeanOverMiddleAxesAddInOrderForAnyChannelCount) {
  // [outer, h, w, channels] over {1, 2}: each output is 0.0f + x_0 + x_1 +
  // ... in order of the reduced index, bit for bit, whatever the channel
  // count (vector blocks of 32 and 8 and the scalar rest), and the mean that
  // sum divided by h * w.
  for (int32_t channels : {1, 3, 8, 16, 37, 69}) {
    const int32_t outer = 2, h = 5, w = 7;
    const std::vector<float> in = Uneven(int64_t{outer} * h * w * channels);
    std::vector<float> want(static_cast<size_t>(outer * channels));
    for (int32_t o = 0; o < outer; ++o) {
      for (int32_t c = 0; c < channels; ++c) {
        float s = 0.0f;
        for (int32_t r = 0; r < h * w; ++r)
          s += in[static_cast<size_t>((o * h * w + r) * channels + c)];
        want[static_cast<size_t>(o * channels + c)] = s;
      }
    }
    std::vector<float> sum, mean;
    ASSERT_TRUE(
        Reduce(Op::SUM, {outer, h, w, channels}, in, {1, 2}, false, {outer, channels}, &sum).ok());
    EXPECT_THAT(sum, ElementsAreArray(want)) << channels << " channels";
    ASSERT_TRUE(
        Reduce(Op::MEAN, {outer, h, w, channels}, in, {2, 1}, true, {outer, 1, 1, channels}, &mean)
            .ok());
    for (float& v : want) v /= static_cast<float>(h * w);
    EXPECT_THAT(mean, ElementsAreArray(want)) << channels << " channels";
  }
}

TEST(ReduceTest, SumOverAxesThatAreNotOneRunBeforeTheLast) {
  // {0, 2} of [2,3,2] (reduced dims apart) and {2} (the last dim): the
  // general path.
  std::vector<float> out;
  ASSERT_TRUE(Reduce(Op::SUM, {2, 3, 2}, Iota(12), {0, 2}, false, {3}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({14.0f, 22.0f, 30.0f}));
  ASSERT_TRUE(Reduce(Op::SUM, {2, 3, 2}, Iota(12), {2}, false, {2, 3}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({1.0f, 5.0f, 9.0f, 13.0f, 17.0f, 21.0f}));
}

TEST(ReduceTest, Sum) {
  std::vector<float> out;
  ASSERT_TRUE(Reduce(Op::SUM, {2, 3, 2}, Iota(12), {1}, false, {2, 2}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({6.0f, 9.0f, 24.0f, 27.0f}));
}

TEST(ReduceTest, ReduceMaxOfNegatives) {
  std::vector<float> out;
  ASSERT_TRUE(Reduce(Op::REDUCE_MAX, {2, 2}, {-1, -5, -3, -2}, {1}, true, {2, 1}, &out).ok());
  EXPECT_THAT(out, ElementsAreArray({-1.0f, -2.0f}));
}

TEST(ReduceTest, AxisOutOfRangeIsAnError) {
  std::vector<float> out;
  runtime::Status status = Reduce(Op::MEAN, {2, 2}, Iota(4), {2}, false, {2}, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (MEAN): axis 2 is out of range for rank 2"));
}

TEST(ReduceTest, WrongDeclaredShapeIsAnError) {
  std::vector<float> out;
  runtime::Status status = Reduce(Op::MEAN, {2, 3}, Iota(6), {1}, false, {2, 1}, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("but the op computes [2]"));
}

}  // namespace
}  // namespace dfarm::testing
