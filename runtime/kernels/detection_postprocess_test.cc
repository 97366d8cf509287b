#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "flatbuffers/flexbuffers.h"
#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

struct DetectionOptions {
  int max_detections = 3;
  int max_classes_per_detection = 1;
  std::optional<int> detections_per_class;
  std::optional<bool> use_regular_nms;
  float score_threshold = 0.35f;
  float iou_threshold = 0.5f;
  int num_classes = 2;
  float y_scale = 1, x_scale = 1, h_scale = 1, w_scale = 1;
  const char* omit = nullptr;  // a key left out on purpose
};

std::vector<uint8_t> Flex(const DetectionOptions& o) {
  flexbuffers::Builder fbb;
  auto keep = [&](const char* key) { return o.omit == nullptr || std::string(o.omit) != key; };
  fbb.Map([&] {
    if (keep("max_detections")) fbb.Int("max_detections", o.max_detections);
    if (keep("max_classes_per_detection")) {
      fbb.Int("max_classes_per_detection", o.max_classes_per_detection);
    }
    if (o.detections_per_class) fbb.Int("detections_per_class", *o.detections_per_class);
    if (o.use_regular_nms) fbb.Bool("use_regular_nms", *o.use_regular_nms);
    if (keep("nms_score_threshold")) fbb.Float("nms_score_threshold", o.score_threshold);
    if (keep("nms_iou_threshold")) fbb.Float("nms_iou_threshold", o.iou_threshold);
    if (keep("num_classes")) fbb.Int("num_classes", o.num_classes);
    if (keep("y_scale")) fbb.Float("y_scale", o.y_scale);
    if (keep("x_scale")) fbb.Float("x_scale", o.x_scale);
    if (keep("h_scale")) fbb.Float("h_scale", o.h_scale);
    if (keep("w_scale")) fbb.Float("w_scale", o.w_scale);
  });
  fbb.Finish();
  return fbb.GetBuffer();
}

struct Result {
  std::vector<float> boxes, classes, scores;
  float num_detections = -1;
};

// Runs the op with float box_encodings/class_predictions as graph inputs and
// constant anchors; `rows` is max_detections * max_classes_per_detection.
runtime::Status RunDetection(const DetectionOptions& o, int num_boxes, int classes_per_box,
                             const std::vector<float>& encodings, const std::vector<float>& scores,
                             const std::vector<float>& anchors, int rows, Result* result) {
  ModelBuilder b;
  int enc = b.AddTensor(tfl::TensorType::FLOAT32, {1, num_boxes, 4}, "box_encodings");
  int cls = b.AddTensor(tfl::TensorType::FLOAT32, {1, num_boxes, classes_per_box}, "scores");
  int anc = b.AddConstFloat32({num_boxes, 4}, anchors, "anchors");
  int ob = b.AddTensor(tfl::TensorType::FLOAT32, {1, rows, 4}, "boxes");
  int oc = b.AddTensor(tfl::TensorType::FLOAT32, {1, rows}, "classes");
  int os = b.AddTensor(tfl::TensorType::FLOAT32, {1, rows}, "scores_out");
  int on = b.AddTensor(tfl::TensorType::FLOAT32, {1}, "num");
  b.AddCustomOperator("TFLite_Detection_PostProcess", {enc, cls, anc}, {ob, oc, os, on}, Flex(o));
  b.SetInputs({enc, cls});
  b.SetOutputs({ob, oc, os, on});
  GraphRunner runner;
  DFARM_RETURN_IF_ERROR(runner.Init(b));
  EXPECT_TRUE(runner.SetInput(0, encodings));
  EXPECT_TRUE(runner.SetInput(1, scores));
  DFARM_RETURN_IF_ERROR(runner.Invoke());
  result->boxes = runner.Output(0);
  result->classes = runner.Output(1);
  result->scores = runner.Output(2);
  result->num_detections = runner.Output(3)[0];
  return runtime::Status::Ok();
}

// Six unit boxes at y [0, 1]; x ranges [0,1], [0.1,1.1], [-0.1,0.9], [10,11],
// [10.1,11.1], [100,101]. IoU(0,1) = IoU(0,2) = 0.9 / 1.1 = 0.818,
// IoU(1,2) = 0.8 / 1.2 = 0.667, IoU(3,4) = 0.818, all others 0.
// Zero encodings with unit scales decode to the anchors themselves.
const std::vector<float> kXmin = {0.0f, 0.1f, -0.1f, 10.0f, 10.1f, 100.0f};
std::vector<float> Anchors() {
  std::vector<float> a;
  for (float x : kXmin) a.insert(a.end(), {0.5f, x + 0.5f, 1.0f, 1.0f});  // y, x, h, w
  return a;
}
std::vector<float> Box(int i) { return {0.0f, kXmin[i], 1.0f, kXmin[i] + 1.0f}; }
const std::vector<float> kZeroBox = {0, 0, 0, 0};
// Per box: background, class 0, class 1. Box 5 is under the 0.35 threshold.
const std::vector<float> kScores = {0, 0.9f, 0.8f, 0, 0.75f, 0.7f, 0, 0.6f, 0.95f,
                                    0, 0.5f, 0.4f, 0, 0.93f, 0.3f, 0, 0.3f, 0.2f};

std::vector<float> Concat(std::initializer_list<std::vector<float>> parts) {
  std::vector<float> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

TEST(DetectionPostProcessTest, FastNmsSuppressesOverlapsAndPadsTheRest) {
  // Best class per box: .9, .75, .95 (class 1), .5, .93, .3 (dropped). Order
  // 2, 4, 0, 1, 3: box 2 suppresses 0 and 1, box 4 suppresses 3.
  Result r;
  runtime::Status s =
      RunDetection({}, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 3, &r);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(r.num_detections, 2.0f);
  EXPECT_THAT(r.boxes, Pointwise(FloatNear(1e-6f), Concat({Box(2), Box(4), kZeroBox})));
  EXPECT_THAT(r.classes, ElementsAreArray({1.0f, 0.0f, 0.0f}));
  EXPECT_THAT(r.scores, Pointwise(FloatNear(1e-7f), std::vector<float>{0.95f, 0.93f, 0.0f}));
}

TEST(DetectionPostProcessTest, MaxDetectionsLimitsTheSelection) {
  DetectionOptions o;
  o.max_detections = 1;
  Result r;
  ASSERT_TRUE(RunDetection(o, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 1, &r).ok());
  EXPECT_EQ(r.num_detections, 1.0f);
  EXPECT_THAT(r.boxes, Pointwise(FloatNear(1e-6f), Box(2)));
  EXPECT_THAT(r.classes, ElementsAreArray({1.0f}));
}

TEST(DetectionPostProcessTest, FastNmsEmitsTopClassesPerBox) {
  // Two classes per detection: box 2 gives (1, .95), (0, .6); box 4 (0, .93), (1, .3).
  DetectionOptions o;
  o.max_classes_per_detection = 2;
  Result r;
  ASSERT_TRUE(RunDetection(o, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 6, &r).ok());
  EXPECT_EQ(r.num_detections, 2.0f);
  EXPECT_THAT(r.boxes, Pointwise(FloatNear(1e-6f),
                                 Concat({Box(2), Box(2), Box(4), Box(4), kZeroBox, kZeroBox})));
  EXPECT_THAT(r.classes, ElementsAreArray({1.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f}));
  EXPECT_THAT(r.scores,
              Pointwise(FloatNear(1e-7f), std::vector<float>{0.95f, 0.6f, 0.93f, 0.3f, 0, 0}));
}

TEST(DetectionPostProcessTest, RegularNmsRunsPerClass) {
  // Class 0 keeps boxes 4 (.93) and 0 (.9); class 1 keeps 2 (.95) and 3 (.4).
  // Best three overall: (2, c1, .95), (4, c0, .93), (0, c0, .9).
  DetectionOptions o;
  o.use_regular_nms = true;
  Result r;
  ASSERT_TRUE(RunDetection(o, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 3, &r).ok());
  EXPECT_EQ(r.num_detections, 3.0f);
  EXPECT_THAT(r.boxes, Pointwise(FloatNear(1e-6f), Concat({Box(2), Box(4), Box(0)})));
  EXPECT_THAT(r.classes, ElementsAreArray({1.0f, 0.0f, 0.0f}));
  EXPECT_THAT(r.scores, Pointwise(FloatNear(1e-7f), std::vector<float>{0.95f, 0.93f, 0.9f}));
}

TEST(DetectionPostProcessTest, RegularNmsDetectionsPerClass) {
  DetectionOptions o;
  o.use_regular_nms = true;
  o.detections_per_class = 1;
  Result r;
  ASSERT_TRUE(RunDetection(o, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 3, &r).ok());
  EXPECT_EQ(r.num_detections, 2.0f);
  EXPECT_THAT(r.boxes, Pointwise(FloatNear(1e-6f), Concat({Box(2), Box(4), kZeroBox})));
  EXPECT_THAT(r.classes, ElementsAreArray({1.0f, 0.0f, 0.0f}));
  EXPECT_THAT(r.scores, Pointwise(FloatNear(1e-7f), std::vector<float>{0.95f, 0.93f, 0.0f}));
}

TEST(DetectionPostProcessTest, RegularNmsTieWithoutBackgroundPutsTheLaterClassFirst) {
  // No background column (num_classes 2 == columns); equal scores in two classes.
  DetectionOptions o;
  o.use_regular_nms = true;
  o.max_detections = 2;
  o.score_threshold = 0.5f;
  const std::vector<float> anchors = {0.5f, 0.5f, 1, 1, 0.5f, 5.5f, 1, 1};
  Result r;
  ASSERT_TRUE(
      RunDetection(o, 2, 2, std::vector<float>(8, 0.0f), {0.6f, 0.0f, 0.0f, 0.6f}, anchors, 2, &r)
          .ok());
  EXPECT_EQ(r.num_detections, 2.0f);
  EXPECT_THAT(r.boxes, Pointwise(FloatNear(1e-6f), std::vector<float>{0, 5, 1, 6, 0, 0, 1, 1}));
  EXPECT_THAT(r.classes, ElementsAreArray({1.0f, 0.0f}));
}

TEST(DetectionPostProcessTest, NothingAboveTheThreshold) {
  DetectionOptions o;
  o.score_threshold = 0.99f;
  Result r;
  ASSERT_TRUE(RunDetection(o, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 3, &r).ok());
  EXPECT_EQ(r.num_detections, 0.0f);
  EXPECT_THAT(r.boxes, ElementsAreArray(std::vector<float>(12, 0.0f)));
  EXPECT_THAT(r.scores, ElementsAreArray({0.0f, 0.0f, 0.0f}));
}

TEST(DetectionPostProcessTest, DecodesCenterSizeWithScales) {
  // Anchor (y .5, x .5, h 1, w 2), encoding (1, -2, 5, 0), scales (10, 10, 5, 5):
  // ycenter = 1/10*1 + .5 = .6, xcenter = -2/10*2 + .5 = .1,
  // half_h = .5*exp(5/5)*1 = e/2, half_w = .5*exp(0)*2 = 1.
  DetectionOptions o;
  o.max_detections = 1;
  o.num_classes = 1;
  o.y_scale = o.x_scale = 10;
  o.h_scale = o.w_scale = 5;
  Result r;
  ASSERT_TRUE(RunDetection(o, 1, 1, {1, -2, 5, 0}, {0.7f}, {0.5f, 0.5f, 1, 2}, 1, &r).ok());
  const double half_h = 0.5 * std::exp(1.0);
  EXPECT_THAT(r.boxes, Pointwise(FloatNear(1e-6f),
                                 std::vector<float>{static_cast<float>(0.6 - half_h), -0.9f,
                                                    static_cast<float>(0.6 + half_h), 1.1f}));
  EXPECT_EQ(r.num_detections, 1.0f);
  EXPECT_THAT(r.scores, ElementsAreArray({0.7f}));
}

TEST(DetectionPostProcessTest, QuantizedInputs) {
  // Encodings uint8 (scale .5, zero 128): 128 -> 0. Anchors uint8 (scale .01):
  // (50, 50, 100, 100) -> (.5, .5, 1, 1) and (50, 250, 100, 100) -> x 2.5.
  // Scores uint8 (scale 1/256): 200 -> .78125, 128 -> .5, 10 -> .0390625.
  ModelBuilder b;
  int enc = b.AddTensor(tfl::TensorType::UINT8, {1, 2, 4});
  b.SetQuantization(enc, 0.5f, 128);
  int cls = b.AddTensor(tfl::TensorType::UINT8, {1, 2, 2});
  b.SetQuantization(cls, 1.0f / 256, 0);
  int anc = b.AddConstRaw(tfl::TensorType::UINT8, {2, 4}, {50, 50, 100, 100, 50, 250, 100, 100});
  b.SetQuantization(anc, 0.01f, 0);
  int ob = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 4});
  int oc = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2});
  int os = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2});
  int on = b.AddTensor(tfl::TensorType::FLOAT32, {1});
  DetectionOptions o;
  o.max_detections = 2;
  o.num_classes = 1;  // column 0 is the background
  b.AddCustomOperator("TFLite_Detection_PostProcess", {enc, cls, anc}, {ob, oc, os, on}, Flex(o));
  b.SetInputs({enc, cls});
  b.SetOutputs({ob, oc, os, on});
  GraphRunner runner;
  runtime::Status s = runner.Init(b);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(runner.SetInput(0, std::vector<uint8_t>(8, 128)));
  ASSERT_TRUE(runner.SetInput(1, std::vector<uint8_t>{10, 128, 10, 200}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), Pointwise(FloatNear(1e-5f), std::vector<float>{0, 2, 1, 3,  //
                                                                               0, 0, 1, 1}));
  EXPECT_THAT(runner.Output(2), ElementsAreArray({0.78125f, 0.5f}));
  EXPECT_THAT(runner.Output(1), ElementsAreArray({0.0f, 0.0f}));
  EXPECT_EQ(runner.Output(3)[0], 2.0f);
}

// How a detection model declares its four outputs.
enum class Declared { kEmpty, kMinusOneRows };

// The uint8 graph of QuantizedInputs with 3 detection rows, its outputs
// declared [] (as TFLite's converter writes them: the op sizes them in
// Prepare) or [1,1,4], [1,1], [1,1], [1] with shape_signature -1 rows.
runtime::Status InitDeclared(Declared declared, GraphRunner* runner) {
  ModelBuilder b;
  int enc = b.AddTensor(tfl::TensorType::UINT8, {1, 2, 4});
  b.SetQuantization(enc, 0.5f, 128);
  int cls = b.AddTensor(tfl::TensorType::UINT8, {1, 2, 2});
  b.SetQuantization(cls, 1.0f / 256, 0);
  int anc = b.AddConstRaw(tfl::TensorType::UINT8, {2, 4}, {50, 50, 100, 100, 50, 250, 100, 100});
  b.SetQuantization(anc, 0.01f, 0);
  const bool empty = declared == Declared::kEmpty;
  using Shape = std::vector<int32_t>;
  int ob = b.AddTensor(tfl::TensorType::FLOAT32, empty ? Shape{} : Shape{1, 1, 4}, "boxes");
  int oc = b.AddTensor(tfl::TensorType::FLOAT32, empty ? Shape{} : Shape{1, 1}, "classes");
  int os = b.AddTensor(tfl::TensorType::FLOAT32, empty ? Shape{} : Shape{1, 1}, "scores");
  int on = b.AddTensor(tfl::TensorType::FLOAT32, empty ? Shape{} : Shape{1}, "num");
  if (!empty) {
    b.SetShapeSignature(ob, {1, -1, 4});
    b.SetShapeSignature(oc, {1, -1});
    b.SetShapeSignature(os, {1, -1});
  }
  DetectionOptions o;
  o.max_detections = 3;
  o.num_classes = 1;
  b.AddCustomOperator("TFLite_Detection_PostProcess", {enc, cls, anc}, {ob, oc, os, on}, Flex(o));
  b.SetInputs({enc, cls});
  b.SetOutputs({ob, oc, os, on});
  return runner->Init(b);
}

TEST(DetectionPostProcessTest, OutputsDeclaredEmptyOrMinusOneAreSizedByTheOp) {
  for (Declared declared : {Declared::kEmpty, Declared::kMinusOneRows}) {
    SCOPED_TRACE(declared == Declared::kEmpty ? "declared []" : "shape_signature -1");
    GraphRunner runner;
    runtime::Status s = InitDeclared(declared, &runner);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_THAT(runner.OutputShape(0), ElementsAreArray({1, 3, 4}));
    EXPECT_THAT(runner.OutputShape(1), ElementsAreArray({1, 3}));
    EXPECT_THAT(runner.OutputShape(2), ElementsAreArray({1, 3}));
    EXPECT_THAT(runner.OutputShape(3), ElementsAreArray({1}));
    ASSERT_TRUE(runner.SetInput(0, std::vector<uint8_t>(8, 128)));
    ASSERT_TRUE(runner.SetInput(1, std::vector<uint8_t>{10, 128, 10, 200}));
    ASSERT_TRUE(runner.Invoke().ok());
    EXPECT_THAT(runner.Output(0), Pointwise(FloatNear(1e-5f), std::vector<float>{0, 2, 1, 3,  //
                                                                                 0, 0, 1, 1,  //
                                                                                 0, 0, 0, 0}));
    EXPECT_THAT(runner.Output(2), ElementsAreArray({0.78125f, 0.5f, 0.0f}));
    EXPECT_EQ(runner.Output(3), std::vector<float>{2.0f});
  }
}

TEST(DetectionPostProcessTest, MissingOptionIsAnError) {
  DetectionOptions o;
  o.omit = "nms_iou_threshold";
  Result r;
  runtime::Status s =
      RunDetection(o, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 3, &r);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("TFLite_Detection_PostProcess): custom_options lack "
                                     "'nms_iou_threshold'"));
}

TEST(DetectionPostProcessTest, BadIouThresholdIsAnError) {
  DetectionOptions o;
  o.iou_threshold = 1.5f;
  Result r;
  runtime::Status s =
      RunDetection(o, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 3, &r);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("nms_iou_threshold 1.5"));
}

TEST(DetectionPostProcessTest, WrongOutputShapeIsAnError) {
  // max_detections 3 * 2 classes per detection = 6 rows, declared 3.
  DetectionOptions o;
  o.max_classes_per_detection = 2;
  Result r;
  runtime::Status s =
      RunDetection(o, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 3, &r);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("but the op computes [1,6,4]"));
}

TEST(DetectionPostProcessTest, TooManyClassColumnsIsAnError) {
  DetectionOptions o;
  o.num_classes = 1;  // 3 columns would need 2 background columns
  Result r;
  runtime::Status s =
      RunDetection(o, 6, 3, std::vector<float>(24, 0.0f), kScores, Anchors(), 3, &r);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("num_classes is 1"));
}

TEST(DetectionPostProcessTest, GarbageCustomOptionsAreAnError) {
  ModelBuilder b;
  int enc = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 4});
  int cls = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1});
  int anc = b.AddConstFloat32({1, 4}, {0.5f, 0.5f, 1, 1});
  int ob = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 4});
  int oc = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1});
  int os = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1});
  int on = b.AddTensor(tfl::TensorType::FLOAT32, {1});
  b.AddCustomOperator("TFLite_Detection_PostProcess", {enc, cls, anc}, {ob, oc, os, on},
                      {0xff, 0xff, 0xff, 0x7f, 0x01});
  b.SetInputs({enc, cls});
  b.SetOutputs({ob, oc, os, on});
  GraphRunner runner;
  runtime::Status s = runner.Init(b);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("custom_options are not a"));
}

}  // namespace
}  // namespace dfarm::testing
