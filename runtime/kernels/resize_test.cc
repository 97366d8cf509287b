#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

using Op = tfl::BuiltinOperator;

struct ResizeCase {
  std::vector<int32_t> in_shape;
  std::vector<float> input;
  int32_t out_h, out_w;
  bool align_corners = false;
  bool half_pixel_centers = false;
};

runtime::Status Resize(Op code, const ResizeCase& c, std::vector<float>* out) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, c.in_shape);
  int size = b.AddConstInt32({2}, {c.out_h, c.out_w});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {c.in_shape[0], c.out_h, c.out_w, c.in_shape[3]});
  b.AddResize(code, in, size, o, c.align_corners, c.half_pixel_centers);
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  EXPECT_TRUE(runner.SetInput(0, c.input));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  *out = runner.Output(0);
  return runtime::Status::Ok();
}

std::vector<float> Bilinear(const ResizeCase& c) {
  std::vector<float> out;
  runtime::Status status = Resize(Op::RESIZE_BILINEAR, c, &out);
  EXPECT_TRUE(status.ok()) << status.message();
  return out;
}

std::vector<float> Nearest(const ResizeCase& c) {
  std::vector<float> out;
  runtime::Status status = Resize(Op::RESIZE_NEAREST_NEIGHBOR, c, &out);
  EXPECT_TRUE(status.ok()) << status.message();
  return out;
}

const std::vector<float> k2x2 = {1, 2, 3, 4};

TEST(ResizeBilinearTest, HalfPixelCenters) {
  // x = (o + 0.5) * 0.5 - 0.5 = -0.25, 0.25, 0.75, 1.25: the border rows and
  // columns clamp, the inner ones interpolate at 1/4 and 3/4.
  EXPECT_THAT(Bilinear({{1, 2, 2, 1}, k2x2, 4, 4, false, true}),
              Pointwise(FloatNear(1e-6f), {1.0f, 1.25f, 1.75f, 2.0f,  //
                                           1.5f, 1.75f, 2.25f, 2.5f,  //
                                           2.5f, 2.75f, 3.25f, 3.5f,  //
                                           3.0f, 3.25f, 3.75f, 4.0f}));
}

TEST(ResizeBilinearTest, LegacyCorners) {
  // x = o * 0.5 = 0, 0.5, 1, 1.5 (the last clamps to the last input).
  EXPECT_THAT(Bilinear({{1, 2, 2, 1}, k2x2, 4, 4}),
              Pointwise(FloatNear(1e-6f), {1.0f, 1.5f, 2.0f, 2.0f,  //
                                           2.0f, 2.5f, 3.0f, 3.0f,  //
                                           3.0f, 3.5f, 4.0f, 4.0f,  //
                                           3.0f, 3.5f, 4.0f, 4.0f}));
}

TEST(ResizeBilinearTest, AlignCorners) {
  // scale = (2 - 1) / (3 - 1): x = 0, 0.5, 1.
  EXPECT_THAT(Bilinear({{1, 2, 2, 1}, k2x2, 3, 3, true, false}),
              Pointwise(FloatNear(1e-6f), {1.0f, 1.5f, 2.0f,  //
                                           2.0f, 2.5f, 3.0f,  //
                                           3.0f, 3.5f, 4.0f}));
}

TEST(ResizeBilinearTest, HalfPixelDownscaleWithChannels) {
  // 3 -> 2 columns, scale 1.5: x = 0.25 and 1.75; two channels.
  EXPECT_THAT(Bilinear({{1, 1, 3, 2}, {10, -10, 20, -20, 30, -30}, 1, 2, false, true}),
              Pointwise(FloatNear(1e-5f), {12.5f, -12.5f, 27.5f, -27.5f}));
}

TEST(ResizeBilinearTest, AlignCornersWithHalfPixelCentersIsAnError) {
  std::vector<float> out;
  runtime::Status status =
      Resize(Op::RESIZE_BILINEAR, {{1, 2, 2, 1}, k2x2, 4, 4, true, true}, &out);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("align_corners and half_pixel_centers"));
}

TEST(ResizeBilinearTest, SizeMustMatchTheDeclaredOutput) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1});
  int size = b.AddConstInt32({2}, {4, 4});
  int o = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 3, 1});
  b.AddResize(Op::RESIZE_BILINEAR, in, size, o, false, false);
  b.SetInputs({in});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("declared [1,3,3,1], but the op computes [1,4,4,1]"));
}

TEST(ResizeNearestNeighborTest, Upscale) {
  EXPECT_THAT(Nearest({{1, 2, 2, 1}, k2x2, 4, 4}),
              Pointwise(FloatNear(0), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(ResizeNearestNeighborTest, DownscaleHonoursEachMode) {
  // 3 -> 2, scale 1.5: floor(0), floor(1.5) = 0, 1; half pixel: floor(0.75),
  // floor(2.25) = 0, 2; align corners: scale 2, round(0), round(2) = 0, 2.
  const std::vector<float> in = {10, 20, 30};
  EXPECT_THAT(Nearest({{1, 1, 3, 1}, in, 1, 2}), Pointwise(FloatNear(0), {10, 20}));
  EXPECT_THAT(Nearest({{1, 1, 3, 1}, in, 1, 2, false, true}), Pointwise(FloatNear(0), {10, 30}));
  EXPECT_THAT(Nearest({{1, 1, 3, 1}, in, 1, 2, true, false}), Pointwise(FloatNear(0), {10, 30}));
}

TEST(ResizeNearestNeighborTest, AlignCornersRoundsHalfAwayFromZero) {
  // 2 -> 3, align corners: scale 0.5, x = 0, 0.5, 1 -> round: 0, 1, 1.
  EXPECT_THAT(Nearest({{1, 1, 2, 1}, {7, 8}, 1, 3, true, false}),
              Pointwise(FloatNear(0), {7, 8, 8}));
}

}  // namespace
}  // namespace dfarm::testing
