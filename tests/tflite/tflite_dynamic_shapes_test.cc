// Outputs the model leaves to the op to size: a small SSD-like
// detector, float and uint8 layers ending in TFLite_Detection_PostProcess,
// whose four outputs are declared [] (as TFLite's converter writes them) or
// with -1 rows in shape_signature. It must load in ours and in TensorFlow
// Lite 2.9 (agent/runner/tflite_c.h), give the same shapes and the same
// detections (boxes and scores within 1e-5, classes and counts exact), and
// dfarm-runner must report the computed shapes (--json, --dump-outputs).
// The TFLite comparisons skip, naming the path, when the library is absent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "agent/runner/tflite_c.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/model_builder.h"
#include "tests/tflite/quantized_ssd.h"
#include "tests/tflite/tflite_test_util.h"

namespace dfarm::testing {
namespace {

namespace fs = std::filesystem;
using runner::tflite::CType;
using runner::tflite::DefaultLibraryPath;
using runner::tflite::Library;
using ::testing::ElementsAre;

using ::dfarm::tflite_test::DetectionOptions;
using ::dfarm::tflite_test::Tflite;

constexpr int kBoxes = 12;
constexpr int kFeatures = 6;
constexpr int kClasses = 2;  // plus the background column
constexpr int kMaxDetections = 5;

// How the detector declares its four outputs.
enum class Declared { kEmpty, kMinusOneRows };

struct DetectorSpec {
  Declared declared = Declared::kEmpty;
  bool uint8_boxes = false;  // QUANTIZE the float box encodings to uint8
  bool regular_nms = false;
  std::string Name() const {
    return std::string(declared == Declared::kEmpty ? "declared_empty" : "signature_minus_one") +
           (uint8_boxes ? "_uint8_boxes" : "_float_boxes") + (regular_nms ? "_regular" : "_fast");
  }
};

std::vector<float> Uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Anchors (y, x, h, w) on a 3x4 grid of overlapping 0.4-wide boxes; all are
// multiples of kAnchorScale, the scale of their uint8 form.
constexpr float kAnchorScale = 0.005f;
std::vector<float> Anchors() {
  std::vector<float> a;
  for (int i = 0; i < kBoxes; ++i) {
    a.insert(a.end(), {0.2f + 0.3f * static_cast<float>(i / 4),
                       0.15f + 0.25f * static_cast<float>(i % 4), 0.4f, 0.4f});
  }
  return a;
}

// Box branch, float: in -> CONV_2D 1x1 (4 channels) -> RESHAPE [1,N,4]
// (-> QUANTIZE uint8). Returns the box encodings tensor.
int AddBoxBranch(ModelBuilder& b, int in, bool uint8_boxes) {
  int w = b.AddConstFloat32({4, 1, 1, kFeatures}, Uniform(4 * kFeatures, -0.3f, 0.3f, 11), "box_w");
  int bias = b.AddConstFloat32({4}, {0.05f, -0.05f, 0.1f, -0.1f}, "box_b");
  int conv = b.AddTensor(tfl::TensorType::FLOAT32, {1, kBoxes, 1, 4}, "box_conv");
  b.AddConv2D(in, w, bias, conv, Conv2DParams{});
  int enc = b.AddTensor(tfl::TensorType::FLOAT32, {1, kBoxes, 4}, "box_encodings_f");
  b.AddReshape(conv, enc, {1, kBoxes, 4});
  if (!uint8_boxes) return enc;
  int q = b.AddTensor(tfl::TensorType::UINT8, {1, kBoxes, 4}, "box_encodings");
  b.SetQuantization(q, 0.01f, 128);
  b.AddOperator(tfl::BuiltinOperator::QUANTIZE, {enc}, {q});
  return q;
}

// Class branch, uint8: in -> QUANTIZE -> CONV_2D 1x1 (uint8 weights, 3
// channels) -> RESHAPE [1,N,3] -> LOGISTIC (scale 1/256). Returns the scores.
int AddClassBranch(ModelBuilder& b, int in) {
  constexpr int kColumns = kClasses + 1;
  const float in_scale = 2.0f / 255, w_scale = 0.01f;
  int xq = b.AddTensor(tfl::TensorType::UINT8, {1, kBoxes, 1, kFeatures}, "features_q");
  b.SetQuantization(xq, in_scale, 128);
  b.AddOperator(tfl::BuiltinOperator::QUANTIZE, {in}, {xq});
  std::vector<uint8_t> weights;
  for (float v : Uniform(kColumns * kFeatures, 0, 255, 12)) weights.push_back(uint8_t(v));
  int w = b.AddConstUint8({kColumns, 1, 1, kFeatures}, weights, "cls_w");
  b.SetQuantization(w, w_scale, 128);
  int bias = b.AddQuantizedBias({-300, 0, 500}, in_scale, {w_scale}, "cls_b");
  int conv = b.AddTensor(tfl::TensorType::UINT8, {1, kBoxes, 1, kColumns}, "cls_conv");
  b.SetQuantization(conv, 0.04f, 128);
  b.AddConv2D(xq, w, bias, conv, Conv2DParams{});
  int logits = b.AddTensor(tfl::TensorType::UINT8, {1, kBoxes, kColumns}, "cls_logits");
  b.SetQuantization(logits, 0.04f, 128);
  b.AddReshape(conv, logits, {1, kBoxes, kColumns});
  int scores = b.AddTensor(tfl::TensorType::UINT8, {1, kBoxes, kColumns}, "class_predictions");
  b.SetQuantization(scores, 1.0f / 256, 0);
  b.AddUnary(tfl::BuiltinOperator::LOGISTIC, logits, scores);
  return scores;
}

// features [1,N,1,6] float32 -> the two branches -> TFLite_Detection_PostProcess
// with constant float anchors -> boxes, classes, scores, num_detections.
std::vector<uint8_t> Detector(const DetectorSpec& spec) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, kBoxes, 1, kFeatures}, "features");
  int enc = AddBoxBranch(b, in, spec.uint8_boxes);
  int scores = AddClassBranch(b, in);
  // Anchors share the box encodings' dtype, as TFLite's kernel assumes.
  int anchors = -1;
  if (spec.uint8_boxes) {
    std::vector<uint8_t> q;
    for (float v : Anchors()) q.push_back(static_cast<uint8_t>(std::lround(v / kAnchorScale)));
    anchors = b.AddConstUint8({kBoxes, 4}, q, "anchors");
    b.SetQuantization(anchors, kAnchorScale, 0);
  } else {
    anchors = b.AddConstFloat32({kBoxes, 4}, Anchors(), "anchors");
  }
  using Shape = std::vector<int32_t>;
  const bool empty = spec.declared == Declared::kEmpty;
  const std::vector<std::pair<Shape, Shape>> outputs = {
      {{1, 1, 4}, {1, -1, 4}}, {{1, 1}, {1, -1}}, {{1, 1}, {1, -1}}, {{1}, {}}};
  const char* names[] = {"detection_boxes", "detection_classes", "detection_scores",
                         "num_detections"};
  std::vector<int32_t> out;
  for (size_t i = 0; i < outputs.size(); ++i) {
    out.push_back(
        b.AddTensor(tfl::TensorType::FLOAT32, empty ? Shape{} : outputs[i].first, names[i]));
    if (!empty && !outputs[i].second.empty()) b.SetShapeSignature(out.back(), outputs[i].second);
  }
  b.AddCustomOperator("TFLite_Detection_PostProcess", {enc, scores, anchors}, out,
                      DetectionOptions({.max_detections = kMaxDetections,
                                        .detections_per_class = 3,
                                        .num_classes = kClasses,
                                        .score_threshold = 0.3f,
                                        .iou_threshold = 0.5f,
                                        .regular_nms = spec.regular_nms}));
  b.SetInputs({in});
  b.SetOutputs(out);
  return b.Build();
}

struct Detections {
  std::vector<std::vector<int32_t>> shapes;
  std::vector<std::vector<float>> values;
};

runtime::Status RunOurs(const std::vector<uint8_t>& model_bytes, const std::vector<float>& input,
                        Detections* out) {
  std::unique_ptr<runtime::Model> model;
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer("detector.tflite", model_bytes, &model));
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(*model, resolver);
  DFARM_RETURN_IF_ERROR(interpreter.AllocateTensors());
  runtime::Tensor* in = interpreter.inputs()[0];
  if (in->bytes != input.size() * sizeof(float)) return runtime::Status::Error("input size");
  std::memcpy(in->data, input.data(), in->bytes);
  DFARM_RETURN_IF_ERROR(interpreter.Invoke());
  for (const runtime::Tensor* t : interpreter.outputs()) {
    out->shapes.push_back(t->shape);
    std::vector<float> v(static_cast<size_t>(t->num_elements()));
    std::memcpy(v.data(), t->data, v.size() * sizeof(float));
    out->values.push_back(std::move(v));
  }
  return runtime::Status::Ok();
}

bool RunTflite(const std::vector<uint8_t>& model_bytes, const std::vector<float>& input,
               Detections* out, std::string* error) {
  std::unique_ptr<runner::tflite::Interpreter> in = Tflite()->Create(model_bytes, 1, 0, error);
  if (in == nullptr) return false;
  std::vector<uint8_t> bytes(input.size() * sizeof(float));
  std::memcpy(bytes.data(), input.data(), bytes.size());
  if (!in->SetInput(0, bytes) || !in->Invoke()) {
    *error = in->last_error();
    return false;
  }
  for (size_t o = 0; o < in->num_outputs(); ++o) {
    runner::tflite::TensorData t = in->Output(o);
    if (t.type != CType::kFloat32) {
      *error = "output " + std::to_string(o) + " is not float32";
      return false;
    }
    out->shapes.push_back(t.shape);
    std::vector<float> v(t.bytes.size() / sizeof(float));
    std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
    out->values.push_back(std::move(v));
  }
  return true;
}

class DynamicShapesTest : public ::testing::TestWithParam<DetectorSpec> {};

TEST_P(DynamicShapesTest, DetectorLoadsAndMatchesTflite) {
  REQUIRE_TFLITE();
  const std::vector<uint8_t> model = Detector(GetParam());
  int detections_seen = 0;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<float> input = Uniform(kBoxes * kFeatures, -1, 1, seed);
    Detections ours, theirs;
    runtime::Status s = RunOurs(model, input, &ours);
    ASSERT_TRUE(s.ok()) << s.message();
    std::string error;
    ASSERT_TRUE(RunTflite(model, input, &theirs, &error)) << error;
    ASSERT_EQ(ours.shapes, theirs.shapes);
    EXPECT_THAT(ours.shapes,
                ElementsAre(ElementsAre(1, kMaxDetections, 4), ElementsAre(1, kMaxDetections),
                            ElementsAre(1, kMaxDetections), ElementsAre(1)));
    const float count = theirs.values[3][0];
    EXPECT_EQ(ours.values[3][0], count);
    detections_seen += static_cast<int>(count);
    // Rows past num_detections are padding TFLite leaves unspecified.
    const size_t rows = static_cast<size_t>(count);
    for (size_t i = 0; i < rows * 4; ++i) {
      EXPECT_NEAR(ours.values[0][i], theirs.values[0][i], 1e-5) << "box value " << i;
    }
    for (size_t i = 0; i < rows; ++i) {
      EXPECT_EQ(ours.values[1][i], theirs.values[1][i]) << "class of row " << i;
      EXPECT_NEAR(ours.values[2][i], theirs.values[2][i], 1e-5) << "score of row " << i;
    }
  }
  EXPECT_GT(detections_seen, 8) << "the inputs should give detections to compare";
}

INSTANTIATE_TEST_SUITE_P(Detectors, DynamicShapesTest,
                         ::testing::Values(DetectorSpec{Declared::kEmpty, false, false},
                                           DetectorSpec{Declared::kEmpty, true, false},
                                           DetectorSpec{Declared::kEmpty, true, true},
                                           DetectorSpec{Declared::kMinusOneRows, false, true},
                                           DetectorSpec{Declared::kMinusOneRows, true, false}),
                         [](const ::testing::TestParamInfo<DetectorSpec>& info) {
                           return info.param.Name();
                         });

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// dfarm-runner reports the shapes the op computed, not the declared [].
TEST(DynamicShapesRunnerTest, RunnerReportsComputedShapes) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("dfarm_dynamic_shapes_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path model = dir / "detector.tflite";
  {
    const std::vector<uint8_t> bytes = Detector({});
    std::ofstream(model, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  const std::string cmd = std::string("'") + DFARM_BINARY_DIR + "/bin/dfarm-runner' --model '" +
                          model.string() + "' --json --num-runs 2 --dump-outputs '" +
                          (dir / "out").string() + "' >'" + (dir / "doc.json").string() + "' 2>'" +
                          (dir / "err.txt").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(dir / "err.txt");
  const nlohmann::json doc = nlohmann::json::parse(ReadFile(dir / "doc.json"));
  EXPECT_EQ(doc["status"], "ok");
  const nlohmann::json expected_shapes = nlohmann::json::parse("[[1,5,4],[1,5],[1,5],[1]]");
  ASSERT_EQ(doc["outputs"].size(), 4u);
  nlohmann::json index = nlohmann::json::parse(ReadFile(dir / "out" / "outputs.json"));
  ASSERT_EQ(index.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(doc["outputs"][i]["shape"], expected_shapes[i]) << "output " << i;
    EXPECT_EQ(index[i]["shape"], expected_shapes[i]) << "output " << i;
  }
  EXPECT_EQ(fs::file_size(dir / "out" / "output_0.bin"), 5u * 4u * sizeof(float));
  EXPECT_EQ(fs::file_size(dir / "out" / "output_3.bin"), sizeof(float));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dfarm::testing
