// The "ssd_anchors" decoder: MediaPipe SsdAnchorsCalculator's anchors for
// face_detection_short_range's configuration, worked by hand; the anchors
// file; box decoding, per-class NMS and the thresholds on hand-worked rows.
#include "harness/eval/ssd_anchors.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// face_detection_short_range.tflite's SsdAnchorsCalculator options (its
// MediaPipe graph): 128x128 input, strides 8 and 3 x 16.
json FaceShortRange() {
  return {{"num_layers", 4},
          {"min_scale", 0.1484375},
          {"max_scale", 0.75},
          {"input_size_height", 128},
          {"input_size_width", 128},
          {"anchor_offset_x", 0.5},
          {"anchor_offset_y", 0.5},
          {"strides", {8, 16, 16, 16}},
          {"aspect_ratios", {1.0}},
          {"fixed_anchor_size", true},
          {"interpolated_scale_aspect_ratio", 1.0}};
}

void ExpectAnchor(const std::vector<SsdAnchor>& anchors, size_t i, double y, double x, double h,
                  double w) {
  ASSERT_LT(i, anchors.size());
  EXPECT_NEAR(anchors[i].y, y, 1e-6) << "anchor " << i;
  EXPECT_NEAR(anchors[i].x, x, 1e-6) << "anchor " << i;
  EXPECT_NEAR(anchors[i].h, h, 1e-6) << "anchor " << i;
  EXPECT_NEAR(anchors[i].w, w, 1e-6) << "anchor " << i;
}

// Layer 0 (stride 8): a 16x16 grid, 2 anchors per cell (aspect ratio 1 and
// the interpolated one) = 512; layers 1-3 share stride 16: an 8x8 grid of
// 3 x 2 = 6 per cell = 384. Centres are (cell + 0.5) / grid; fixed size 1.
TEST(SsdAnchorsTest, FaceShortRangeGives896AnchorsWorkedByHand) {
  auto anchors = GenerateSsdAnchors(FaceShortRange(), "decoder.anchors");
  ASSERT_TRUE(anchors) << anchors.message();
  ASSERT_EQ(anchors->size(), 896u);
  ExpectAnchor(*anchors, 0, 0.03125, 0.03125, 1, 1);
  ExpectAnchor(*anchors, 1, 0.03125, 0.03125, 1, 1);
  ExpectAnchor(*anchors, 2, 0.03125, 0.09375, 1, 1);   // x cell 1: 1.5 / 16
  ExpectAnchor(*anchors, 32, 0.09375, 0.03125, 1, 1);  // y row 1
  ExpectAnchor(*anchors, 511, 0.96875, 0.96875, 1, 1);
  ExpectAnchor(*anchors, 512, 0.0625, 0.0625, 1, 1);  // stride 16: 0.5 / 8
  ExpectAnchor(*anchors, 517, 0.0625, 0.0625, 1, 1);
  ExpectAnchor(*anchors, 518, 0.0625, 0.1875, 1, 1);
  ExpectAnchor(*anchors, 895, 0.9375, 0.9375, 1, 1);
}

// Without fixed_anchor_size: layer l's scale is min + (max - min) * l / 3,
// each followed by the interpolated sqrt(scale_l * scale_l+1) (1 after the
// last); aspect ratio 2 makes h = s / sqrt 2, w = s * sqrt 2.
TEST(SsdAnchorsTest, ScalesAndAspectRatiosWorkedByHand) {
  json o = FaceShortRange();
  o["fixed_anchor_size"] = false;
  auto anchors = GenerateSsdAnchors(o, "a");
  ASSERT_TRUE(anchors) << anchors.message();
  const double s0 = 0.1484375, s1 = s0 + 0.6015625 / 3, s2 = s0 + 0.6015625 * 2 / 3, s3 = 0.75;
  ExpectAnchor(*anchors, 0, 0.03125, 0.03125, s0, s0);
  ExpectAnchor(*anchors, 1, 0.03125, 0.03125, std::sqrt(s0 * s1), std::sqrt(s0 * s1));
  const double cell[6] = {s1, std::sqrt(s1 * s2), s2, std::sqrt(s2 * s3), s3, std::sqrt(s3)};
  for (size_t k = 0; k < 6; ++k) ExpectAnchor(*anchors, 512 + k, 0.0625, 0.0625, cell[k], cell[k]);

  o = {{"num_layers", 1},        {"min_scale", 0.2},
       {"max_scale", 0.4},       {"input_size_height", 8},
       {"input_size_width", 16}, {"strides", {8}},
       {"aspect_ratios", {2.0}}, {"interpolated_scale_aspect_ratio", 0.0}};
  anchors = GenerateSsdAnchors(o, "a");
  ASSERT_TRUE(anchors) << anchors.message();
  ASSERT_EQ(anchors->size(), 2u);  // a 1x2 grid, one anchor each; one layer: scale 0.3
  ExpectAnchor(*anchors, 1, 0.5, 0.75, 0.3 / std::sqrt(2.0), 0.3 * std::sqrt(2.0));
  // The lowest layer reduced: scales 0.1, s, s at aspect ratios 1, 2, 0.5.
  o["reduce_boxes_in_lowest_layer"] = true;
  anchors = GenerateSsdAnchors(o, "a");
  ASSERT_TRUE(anchors) << anchors.message();
  ASSERT_EQ(anchors->size(), 6u);
  ExpectAnchor(*anchors, 0, 0.5, 0.25, 0.1, 0.1);
  ExpectAnchor(*anchors, 2, 0.5, 0.25, 0.3 * std::sqrt(2.0), 0.3 / std::sqrt(2.0));
  // Feature map sizes given: they set the grid, not the strides.
  o["feature_map_height"] = {2};
  o["feature_map_width"] = {1};
  anchors = GenerateSsdAnchors(o, "a");
  ASSERT_TRUE(anchors) << anchors.message();
  ASSERT_EQ(anchors->size(), 6u);
  ExpectAnchor(*anchors, 3, 0.75, 0.5, 0.1, 0.1);
}

TEST(SsdAnchorsTest, GeneratorErrorsNameTheField) {
  const auto fails = [](json o, const std::string& want) {
    auto a = GenerateSsdAnchors(o, "eval.decoder.anchors");
    ASSERT_FALSE(a) << want;
    EXPECT_NE(a.message().find(want), std::string::npos) << a.message();
  };
  json o = FaceShortRange();
  o.erase("num_layers");
  fails(o, "eval.decoder.anchors.num_layers: expected an integer from 1 to 64, missing");
  o = FaceShortRange();
  o["strides"] = {8, 16};
  fails(o, "eval.decoder.anchors.strides: expected a list of 4 integers");
  o = FaceShortRange();
  o["min_scales"] = 0.1;
  fails(o, "eval.decoder.anchors: unknown key 'min_scales'");
  o = FaceShortRange();
  o.erase("aspect_ratios");
  fails(o, "missing \"aspect_ratios\"");
  o = FaceShortRange();
  o["max_scale"] = "big";
  fails(o, "eval.decoder.anchors.max_scale: expected a number");
  o = FaceShortRange();
  o["feature_map_height"] = {1, 2, 3, 4};
  fails(o, "give both \"feature_map_height\" and \"feature_map_width\"");
  o = FaceShortRange();
  o["fixed_anchor_size"] = 1;
  fails(o, "fixed_anchor_size: expected true or false");
  fails(json::array(), "expected an object of SsdAnchorsCalculator options");
}

TEST(SsdAnchorsTest, AnchorsFileOneAnchorPerLine) {
  std::string pattern = (fs::temp_directory_path() / "dfarm_anchors_XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const fs::path dir = pattern;
  std::ofstream(dir / "a.txt") << "y_center,x_center,h,w\n# two anchors\n0.25, 0.75,0.5,1\n\n"
                                  "0.5,0.5,1e-1,2\n";
  auto anchors = ReadAnchorsFile((dir / "a.txt").string(), "decoder.anchors_file");
  ASSERT_TRUE(anchors) << anchors.message();
  ASSERT_EQ(anchors->size(), 2u);
  ExpectAnchor(*anchors, 0, 0.25, 0.75, 0.5, 1);
  ExpectAnchor(*anchors, 1, 0.5, 0.5, 0.1, 2);
  for (const char* bad :
       {"0.1,0.2,0.3\n", "0.1,0.2,0.3,0.4,0.5\n", "0.1,0.2,0,0.4\n", "a,b,c,d\n"}) {
    std::ofstream(dir / "b.txt") << "0.5,0.5,1,1\n" << bad;
    anchors = ReadAnchorsFile((dir / "b.txt").string(), "decoder.anchors_file");
    ASSERT_FALSE(anchors) << bad;
    EXPECT_NE(anchors.message().find("b.txt' line 2:"), std::string::npos) << anchors.message();
  }
  std::ofstream(dir / "c.txt") << "# nothing\n";
  EXPECT_FALSE(ReadAnchorsFile((dir / "c.txt").string(), "x"));
  EXPECT_FALSE(ReadAnchorsFile((dir / "none.txt").string(), "x"));
  fs::remove_all(dir);
}

SsdAnchorDecoder Decoder(std::vector<SsdAnchor> anchors) {
  SsdAnchorDecoder d;
  d.anchors = std::make_shared<const std::vector<SsdAnchor>>(std::move(anchors));
  return d;
}

void ExpectBox(const runner::TaskDetection& d, double ymin, double xmin, double ymax, double xmax) {
  EXPECT_NEAR(d.ymin, ymin, 1e-12);
  EXPECT_NEAR(d.xmin, xmin, 1e-12);
  EXPECT_NEAR(d.ymax, ymax, 1e-12);
  EXPECT_NEAR(d.xmax, xmax, 1e-12);
}

// TensorFlow's SSD box coder (scales 10, 10, 5, 5; exponential size) and
// MediaPipe's (x first, scales 128, linear size), one anchor each.
TEST(SsdAnchorsTest, DecodesOneAnchorsOffsetsToTheBoxWorkedByHand) {
  SsdAnchorDecoder d = Decoder({{0.5, 0.5, 0.2, 0.4}});
  d.scale_y = d.scale_x = 10;
  d.scale_h = d.scale_w = 5;
  d.exponential_size = true;
  // cy = 1/10 * 0.2 + 0.5 = 0.52; cx = -2/10 * 0.4 + 0.5 = 0.42; h = e^0 *
  // 0.2; w = e^(ln 2) * 0.4 = 0.8.
  auto out = DecodeAnchorRows(d, {{0, 0.9, 1, -2, 0, 5 * std::log(2.0), 0}}, 100);
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), 1u);
  ExpectBox((*out)[0], 0.42, 0.02, 0.62, 0.82);
  EXPECT_EQ((*out)[0].class_index, 0);
  EXPECT_EQ((*out)[0].score, 0.9);

  d = Decoder({{0.25, 0.75, 1, 1}});
  d.box_format = "xywh";
  d.scale_y = d.scale_x = d.scale_h = d.scale_w = 128;
  // cx = 12.8/128 + 0.75 = 0.85, cy = -25.6/128 + 0.25 = 0.05, w = 0.5, h = 0.25.
  out = DecodeAnchorRows(d, {{1, 0.6, 12.8, -25.6, 64, 32, 0}}, 100);
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), 1u);
  ExpectBox((*out)[0], -0.075, 0.6, 0.175, 1.1);
}

// Anchors: two at the same place, one beside them (IoU 1/3 with them).
TEST(SsdAnchorsTest, NmsPerClassThresholdsAndTheBest) {
  SsdAnchorDecoder d = Decoder({{0.5, 0.5, 0.2, 0.2}, {0.5, 0.5, 0.2, 0.2}, {0.5, 0.6, 0.2, 0.2}});
  d.score_threshold = 0.5;
  d.iou_threshold = 0.5;
  const std::vector<runner::TaskDetection> rows = {
      {1, 0.8, 0, 0, 1, 1, 1},  // a duplicate of anchor 0's class 1: suppressed
      {1, 0.9, 0, 0, 1, 1, 0},  //
      {2, 0.7, 0, 0, 1, 1, 1},  // another class at the same place: kept
      {1, 0.6, 0, 0, 1, 1, 2},  // IoU 1/3 <= 0.5: kept
      {1, 0.4, 0, 0, 1, 1, 2},  // below the score threshold
  };
  auto out = DecodeAnchorRows(d, rows, 100);
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[0].anchor, 0);  // best first
  EXPECT_EQ((*out)[0].score, 0.9);
  ExpectBox((*out)[0], 0.4, 0.4, 0.6, 0.6);
  EXPECT_EQ((*out)[1].class_index, 2);
  EXPECT_EQ((*out)[2].anchor, 2);
  ExpectBox((*out)[2], 0.4, 0.5, 0.6, 0.7);
  // An IoU threshold below 1/3 suppresses the neighbour too.
  d.iou_threshold = 0.3;
  out = DecodeAnchorRows(d, rows, 100);
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(out->size(), 2u);
  // max_detections keeps the best.
  d.iou_threshold = 0.5;
  out = DecodeAnchorRows(d, rows, 1);
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].score, 0.9);
  // Equal scores: the lower anchor wins.
  out = DecodeAnchorRows(d, {{1, 0.9, 0, 0, 1, 1, 1}, {1, 0.9, 0, 0, 1, 1, 0}}, 100);
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].anchor, 0);
  // A row of an anchor the decoder lacks.
  out = DecodeAnchorRows(d, {{1, 0.9, 0, 0, 1, 1, 3}}, 100);
  ASSERT_FALSE(out);
  EXPECT_NE(out.message().find("anchor 3 but the decoder has 3 anchors"), std::string::npos)
      << out.message();
}

}  // namespace
}  // namespace dfarm::harness
