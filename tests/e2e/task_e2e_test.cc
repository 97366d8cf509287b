// Detection and segmentation task accuracy end to end: the real `dfarm
// sweep` (agent, dfarm-runner --task-outputs boxes / classmap), the host's
// scoring, `dfarm show`, `dfarm history --metric`, the reports and `dfarm
// gate`'s task.max_miou_drop_vs_cpu.
//
// Segmentation: the real selfie_segmentation.tflite on drawn head-and-
// shoulders pictures (a face, hair and a shirt on a pale wall) whose masks
// are the drawn silhouette: labels by construction. The stored mIoU must be
// what the test computes from the runner's own class maps against those
// masks, and a plugin that adds 3 to every ADD (libdfarm_perturb_plugin.so)
// must fail the gate while the same plugin adding 0 passes.
//
// Faces: the real face_detection_short_range.tflite on drawn faces, its
// raw outputs decoded by "ssd_anchors" with MediaPipe's options; the stored
// detections must be a numpy decoder's on the same runner candidates.
//
// Raw anchors: a model ending in raw box regressors and class logits, the
// decoder "ssd_anchors" with generated anchors: the runner lists the
// candidates (--task-outputs anchors), the host decodes and NMSes them; the
// stored detections and mAP are checked as for the post-process model.
//
// Detection: a model built with tests/model_builder whose image pixels are
// the box encodings of four anchors, ending in TFLite_Detection_PostProcess,
// on a COCO JSON written here; the stored mAP must equal the numpy
// reference's (reports/eval/testing) on the boxes the test derives from the
// anchors and pixels, within 1e-6.
#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "flatbuffers/flexbuffers.h"
#include "reports/store/store.h"
#include "tests/e2e/e2e_util.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;
namespace tfl = ::dfarm::tflite;

void WritePng(const fs::path& path, uint32_t width, uint32_t height,
              const std::vector<uint8_t>& pixels, bool rgb) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = width;
  png.height = height;
  png.format = rgb ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  ASSERT_TRUE(png_image_write_to_file(&png, path.c_str(), 0, pixels.data(), 0, nullptr))
      << png.message;
}

constexpr int kSide = 256;  // selfie_segmentation's input and output
constexpr int kPeople = 4;

// Picture `i`: a head (skin, hair, eyes, mouth), a neck and shoulders (a
// shirt) on a pale wall, shifted and scaled per picture; and its mask (1 on
// the person).
void DrawPerson(int i, std::vector<uint8_t>& rgb, std::vector<uint8_t>& mask) {
  rgb.assign(kSide * kSide * 3, 0);
  mask.assign(kSide * kSide, 0);
  const double cx = 128 + (i - 1.5) * 12, r = 40 + 4 * i, cy = 100 + 3 * i;
  const double top = cy + r + 10;
  for (int y = 0; y < kSide; ++y) {
    for (int x = 0; x < kSide; ++x) {
      const double hx = (x - cx) / (r * 0.85), hy = (y - cy) / r;
      const bool head = hx * hx + hy * hy <= 1;
      const bool neck = std::abs(x - cx) < r * 0.4 && y > cy && y < cy + r + 15;
      const double sx = (x - cx) / 110.0, sy = (y - (top + 70)) / 80.0;
      const bool shoulders = sx * sx + sy * sy <= 1 && y >= top;
      uint8_t* px = &rgb[(y * kSide + x) * 3];
      auto paint = [px](int r0, int g, int b) {
        px[0] = static_cast<uint8_t>(r0);
        px[1] = static_cast<uint8_t>(g);
        px[2] = static_cast<uint8_t>(b);
      };
      paint(200 + 10 * (i % 2), 215, 230);
      if (shoulders) paint(40 + 20 * i, 60, 110);
      if (neck) paint(205, 160, 130);
      if (head) paint(215, 170, 140);
      if (head && y < cy - r * 0.4) paint(50, 35, 25);
      for (double ex : {-0.35, 0.35}) {
        const double dx = x - (cx + ex * r), dy = y - (cy - 5);
        if (dx * dx + dy * dy <= 16) paint(30, 30, 30);
      }
      if (std::abs(x - cx) < 12 && std::abs(y - (cy + r * 0.45)) < 3) paint(150, 60, 60);
      mask[y * kSide + x] = head || neck || shoulders ? 1 : 0;
    }
  }
}

// The detection model: a 4x4 gray image is four anchors' encodings (ty, tx,
// th, tw per row) for TFLite_Detection_PostProcess with unit scales; class
// scores are constant: anchor 0 class 0 at 0.9, anchor 1 class 1 at 0.8,
// anchor 2 class 0 at 0.7, anchor 3 below the threshold.
constexpr float kScores[4][3] = {{0, 0.9f, 0}, {0, 0, 0.8f}, {0, 0.7f, 0}, {0, 0.1f, 0.1f}};
// Anchors (y, x, h, w), normalized: the 2x2 grid of half-image cells.
constexpr double kAnchors[4][4] = {
    {0.25, 0.25, 0.5, 0.5}, {0.25, 0.75, 0.5, 0.5}, {0.75, 0.25, 0.5, 0.5}, {0.75, 0.75, 0.5, 0.5}};

std::string DetectionModel(const fs::path& path) {
  testing::ModelBuilder b;
  const int image = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1}, "image");
  const int enc = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4}, "box_encodings");
  b.AddReshape(image, enc, {1, 4, 4});
  std::vector<float> scores, anchors;
  for (int a = 0; a < 4; ++a) {
    scores.insert(scores.end(), std::begin(kScores[a]), std::end(kScores[a]));
    for (double v : kAnchors[a]) anchors.push_back(static_cast<float>(v));
  }
  const int cls = b.AddConstFloat32({1, 4, 3}, scores, "class_scores");
  const int anc = b.AddConstFloat32({4, 4}, anchors, "anchors");
  const int ob = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4}, "boxes");
  const int oc = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "classes");
  const int os = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "scores");
  const int on = b.AddTensor(tfl::TensorType::FLOAT32, {1}, "count");
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("max_detections", 4);
    fbb.Int("max_classes_per_detection", 1);
    fbb.Float("nms_score_threshold", 0.5f);
    fbb.Float("nms_iou_threshold", 0.5f);
    fbb.Int("num_classes", 2);
    for (const char* key : {"y_scale", "x_scale", "h_scale", "w_scale"}) fbb.Float(key, 1.0f);
  });
  fbb.Finish();
  b.AddCustomOperator("TFLite_Detection_PostProcess", {enc, cls, anc}, {ob, oc, os, on},
                      fbb.GetBuffer());
  b.SetInputs({image});
  b.SetOutputs({ob, oc, os, on});
  EXPECT_TRUE(b.WriteFile(path.string()));
  return path.string();
}

// The raw-anchors model: the same 4x4 image is four anchors' box
// regressors (ty, tx, th, tw per row; output 0, [1,4,4]) and output 1 is
// constant class logits [1,4,4] (background, cat, dog, unused), computed
// as image * 0 + kLogits so both outputs are computed.
constexpr float kLogits[4][4] = {
    {3, 2.0f, -5, -5}, {3, -5, 1.5f, -5}, {3, 1.0f, -5, -5}, {3, -1.0f, -2.0f, -5}};

std::string RawAnchorsModel(const fs::path& path) {
  testing::ModelBuilder b;
  const int image = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1}, "image");
  const int boxes = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4}, "regressors");
  b.AddReshape(image, boxes, {1, 4, 4});
  std::vector<float> logits;
  for (const auto& row : kLogits) logits.insert(logits.end(), std::begin(row), std::end(row));
  const int zero = b.AddConstFloat32({1, 4, 4}, std::vector<float>(16, 0.0f), "zero");
  const int none = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4}, "nothing");
  b.AddBinary(tfl::BuiltinOperator::MUL, boxes, zero, none);
  const int constant = b.AddConstFloat32({1, 4, 4}, logits, "logits");
  const int scores = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4}, "classificators");
  b.AddBinary(tfl::BuiltinOperator::ADD, none, constant, scores);
  b.SetInputs({image});
  b.SetOutputs({boxes, scores});
  EXPECT_TRUE(b.WriteFile(path.string()));
  return path.string();
}

class TaskE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << exe << " is not built";
    }
    work_ = fs::temp_directory_path() /
            ("dfarm_task_e2e_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(work_);
    fs::create_directories(work_);
    db_ = (work_ / "x.db").string();
  }
  void TearDown() override {
    if (!std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(work_);
  }

  // `dfarm sweep` of `spec`; its run id (0 after a failure).
  int64_t Sweep(const json& spec) {
    std::ofstream(work_ / "spec.json") << spec.dump(2);
    Outcome o = RunToEnd({(BinDir() / "dfarm").string(), "sweep", (work_ / "spec.json").string(),
                          "--db", db_, "--json", "--agent-store", (work_ / "store").string()},
                         work_ / "sweep.out", work_ / "sweep.err");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    const json summary = json::parse(o.out, nullptr, false);
    if (!summary.is_object() || !summary.contains("run_id")) return 0;
    return summary["run_id"].get<int64_t>();
  }
  // What reports/eval/testing/SCRIPT (numpy) prints for `req` on its stdin;
  // null, and a failure, when it does not run.
  json Reference(const std::string& script, const json& req) {
    const fs::path in = work_ / (script + ".in.json"), out = work_ / (script + ".out.json");
    std::ofstream(in) << req.dump();
    const std::string cmd = "/usr/bin/python3 " + std::string(DFARM_SOURCE_DIR) +
                            "/reports/eval/testing/" + script + " < " + in.string() + " > " +
                            out.string();
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << cmd;
      return nullptr;
    }
    return json::parse(std::ifstream(out));
  }
  Outcome Dfarm(std::vector<std::string> args) {
    args.insert(args.begin(), (BinDir() / "dfarm").string());
    args.insert(args.end(), {"--db", db_});
    return RunToEnd(args, work_ / "cmd.out", work_ / "cmd.err");
  }

  fs::path work_;
  std::string db_;
};

// mIoU of the runner's class maps (the job's stored runner JSON) against
// `masks`, computed here: per class, intersection over union summed over
// the images, averaged over the classes present.
double MiouOfRunnerMaps(const std::string& runner_json,
                        const std::vector<std::vector<uint8_t>>& masks) {
  const json doc = json::parse(runner_json);
  const json& sets = doc["task_outputs"]["sets"];
  EXPECT_EQ(sets.size(), masks.size());
  double inter[2] = {0, 0}, uni[2] = {0, 0};
  for (size_t i = 0; i < sets.size() && i < masks.size(); ++i) {
    std::vector<int> predicted;
    const json& rle = sets[i]["rle"];
    for (size_t r = 0; r + 1 < rle.size(); r += 2) {
      predicted.insert(predicted.end(), rle[r + 1].get<size_t>(), rle[r].get<int>());
    }
    EXPECT_EQ(predicted.size(), masks[i].size());
    for (size_t p = 0; p < predicted.size() && p < masks[i].size(); ++p) {
      for (int c = 0; c < 2; ++c) {
        const bool t = masks[i][p] == c, q = predicted[p] == c;
        inter[c] += t && q ? 1 : 0;
        uni[c] += t || q ? 1 : 0;
      }
    }
  }
  return (inter[0] / uni[0] + inter[1] / uni[1]) / 2;
}

TEST_F(TaskE2eTest, SegmentationMiouPerJobAndAPerturbedDelegateFailsTheGate) {
  const fs::path model = fs::path(DFARM_MODELS_DIR) / "selfie_segmentation.tflite";
  ASSERT_TRUE(fs::exists(model)) << model;
  fs::create_directories(work_ / "people" / "images");
  fs::create_directories(work_ / "people" / "masks");
  std::vector<std::vector<uint8_t>> masks;
  for (int i = 0; i < kPeople; ++i) {
    std::vector<uint8_t> rgb, mask;
    DrawPerson(i, rgb, mask);
    const std::string stem = "p" + std::to_string(i) + ".png";
    WritePng(work_ / "people" / "images" / stem, kSide, kSide, rgb, true);
    WritePng(work_ / "people" / "masks" / stem, kSide, kSide, mask, false);
    masks.push_back(mask);
  }
  std::ofstream(work_ / "people" / "classes.txt") << "background\nperson\n";
  fs::copy_file(DFARM_PERTURB_PLUGIN, work_ / "libdfarm_perturb_plugin.so");
  const json eval = {{"task", "segmentation"},
                     {"dataset", (work_ / "people").string()},
                     {"labels", (work_ / "people" / "classes.txt").string()},
                     {"preprocess", {{"size", {kSide, kSide}}, {"scale", {1.0 / 255, 0}}}},
                     {"decoder", {{"type", "probabilities"}, {"output", 0}}}};
  auto run_with = [&](const std::string& delta) {
    json plugin = {{"name", "external"},
                   {"options", {{"path", "libdfarm_perturb_plugin.so"}, {"delta", delta}}}};
    return Sweep({{"name", "selfie"},
                  {"models", {{{"path", model.string()}, {"eval", eval}}}},
                  {"delegates", {"cpu", "xnnpack", plugin}},
                  {"devices", {"local"}},
                  {"benchmark", {{"warmup_runs", 0}, {"num_runs", 1}, {"timeout_s", 300}}}});
  };
  const int64_t bad = run_with("3");
  ASSERT_GT(bad, 0);
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(bad);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 3u);
  auto tasks = (*store)->ListRunTaskAccuracy(bad);
  ASSERT_TRUE(tasks.ok()) << tasks.message();
  std::map<std::string, double> miou;
  for (const store::JobRow& j : *jobs) {
    SCOPED_TRACE(j.delegate + ": " + j.status + " " + j.error + " " + j.state_note);
    ASSERT_EQ(j.status, "ok");
    ASSERT_TRUE(tasks->count(j.id));
    const store::TaskAccuracy& t = tasks->at(j.id);
    EXPECT_EQ(t.task, "segmentation");
    EXPECT_EQ(t.images, kPeople);
    ASSERT_NE(t.Find("miou"), nullptr);
    ASSERT_NE(t.Find("pixel_accuracy"), nullptr);
    EXPECT_LE(t.Find("miou")->low, t.Find("miou")->value);
    EXPECT_GE(t.Find("miou")->high, t.Find("miou")->value);
    auto detail = (*store)->GetJobDetail(j.id);
    ASSERT_TRUE(detail.ok()) << detail.message();
    // The host's figure is the one computed here from the runner's maps.
    EXPECT_NEAR(t.Find("miou")->value, MiouOfRunnerMaps(detail->runner_json, masks), 1e-12);
    miou[j.delegate] = t.Find("miou")->value;
  }
  // The model finds the drawn people on our cpu path; xnnpack agrees with it.
  EXPECT_GT(miou["cpu"], 0.7);
  EXPECT_NEAR(miou["xnnpack"], miou["cpu"], 0.01);
  RecordProperty("cpu_miou", std::to_string(miou["cpu"]));
  RecordProperty("perturbed_miou", std::to_string(miou["external"]));

  Outcome text = Dfarm({"show", std::to_string(bad)});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("mIoU"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("segmentation"), std::string::npos) << text.out;
  Outcome shown =
      Dfarm({"show", std::to_string(bad), "--job", std::to_string(jobs->front().id), "--json"});
  ASSERT_EQ(shown.code, 0) << shown.err;
  const json task = json::parse(shown.out)["jobs"][0]["task"];
  EXPECT_EQ(task["task"], "segmentation");
  EXPECT_EQ(task["metrics"][0]["name"], "miou");
  Outcome md = Dfarm({"report", std::to_string(bad), "--format", "md", "-o", "-"});
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_NE(md.out.find("## Task accuracy"), std::string::npos);
  EXPECT_NE(md.out.find("mIoU "), std::string::npos) << md.out;

  // Only the task decides: xnnpack's probabilities may differ from cpu's by
  // a few 1e-3 (the default accuracy rule's 2e-3 would judge that), and a
  // probability never differs by more than 1.
  std::ofstream(work_ / "policy.json")
      << json{{"task", {{"max_miou_drop_vs_cpu", 2.0}}},
              {"accuracy", {{{"model", "*"}, {"output", "*"}, {"max_abs_error", 1.0}}}}}
             .dump();
  auto gate = [&](int64_t run) {
    return Dfarm({"gate", std::to_string(run), "--baseline", std::to_string(run), "--policy",
                  (work_ / "policy.json").string(), "--format", "json"});
  };
  auto miou_fails = [](const std::string& out) -> std::optional<bool> {
    const json doc = json::parse(out, nullptr, false);
    if (!doc.is_object()) return std::nullopt;
    for (const json& cell : doc["cells"]) {
      if (cell["delegate"] != "external") continue;
      for (const json& f : cell["findings"]) {
        if (f["metric"] == "task.miou_drop_vs_cpu") return f["fails"].get<bool>();
      }
    }
    return std::nullopt;
  };
  Outcome o = gate(bad);
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  EXPECT_EQ(miou_fails(o.out), std::optional<bool>(true)) << o.out;
  const int64_t same = run_with("0");
  ASSERT_GT(same, 0);
  o = gate(same);
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_EQ(miou_fails(o.out), std::optional<bool>(false)) << o.out;

  Outcome history = Dfarm({"history", "--model", "selfie_segmentation.tflite", "--delegate", "cpu",
                           "--metric", "miou", "--json"});
  ASSERT_EQ(history.code, 0) << history.err;
  const json h = json::parse(history.out);
  ASSERT_EQ(h["points"].size(), 2u) << history.out;
  EXPECT_NEAR(h["points"][0]["value"].get<double>(), 100 * miou["cpu"], 1e-9);
}

// Four anchors' boxes after encodings (ty, tx, th, tw): TFLite's center-size
// decoding with unit scales, in pixels of a 4x4 image, as [x0, y0, x1, y1].
std::vector<double> Decoded(int anchor, const double enc[4]) {
  const double* a = kAnchors[anchor];
  const double cy = enc[0] * a[2] + a[0], cx = enc[1] * a[3] + a[1];
  const double h = std::exp(enc[2]) * a[2], w = std::exp(enc[3]) * a[3];
  return {4 * (cx - w / 2), 4 * (cy - h / 2), 4 * (cx + w / 2), 4 * (cy + h / 2)};
}

TEST_F(TaskE2eTest, DetectionMapOfAPostProcessModelMatchesTheNumpyReference) {
  const std::string model = DetectionModel(work_ / "detect.tflite");
  fs::create_directories(work_ / "coco" / "images");
  // Pixel p is the encoding p * 0.01 - 1.28 (128: 0). Image 0: the anchors
  // themselves; image 1: anchor 0 moved 0.4 px right (tx 0.2: IoU 2/3 with
  // its truth); image 2: anchor 1 grown (th = tw = 0.2: IoU 0.67 with its truth).
  const uint8_t kZero = 128;
  std::vector<std::vector<uint8_t>> pixels(3, std::vector<uint8_t>(16, kZero));
  pixels[1][1] = 148;
  pixels[2][4 + 2] = 148;
  pixels[2][4 + 3] = 148;
  json images = json::array(), detections_expected = json::array();
  for (int i = 0; i < 3; ++i) {
    const std::string name = "i" + std::to_string(i) + ".png";
    WritePng(work_ / "coco" / "images" / name, 4, 4, pixels[i], false);
    images.push_back({{"id", 10 + i}, {"file_name", name}, {"width", 4}, {"height", 4}});
    for (int a = 0; a < 3; ++a) {  // anchor 3 scores below the threshold
      double enc[4];
      for (int k = 0; k < 4; ++k) enc[k] = pixels[i][a * 4 + k] * 0.01 - 1.28;
      const std::vector<double> box = Decoded(a, enc);
      const int category = a == 1 ? 7 : 3;  // class 0: cat (3), class 1: dog (7)
      const double score = kScores[a][a == 1 ? 2 : 1];
      detections_expected.push_back(
          {i, category, box[0], box[1], box[2], box[3], static_cast<float>(score)});
    }
  }
  // Truth: image 0 all three; image 1 the cat of anchor 0 only; image 2 the
  // dog of anchor 1 and a cat under anchor 3 that nothing detects.
  const json truth = {{0, 3, 0, 0, 2, 2}, {0, 7, 2, 0, 4, 2}, {0, 3, 0, 2, 2, 4},
                      {1, 3, 0, 0, 2, 2}, {2, 7, 2, 0, 4, 2}, {2, 3, 2, 2, 4, 4}};
  json annotations = json::array();
  for (const json& t : truth) {
    const double x = t[2], y = t[3];
    annotations.push_back({{"image_id", 10 + t[0].get<int>()},
                           {"category_id", t[1]},
                           {"bbox", {x, y, t[4].get<double>() - x, t[5].get<double>() - y}}});
  }
  std::ofstream(work_ / "coco" / "annotations.json")
      << json{{"images", images},
              {"annotations", annotations},
              {"categories", {{{"id", 3}, {"name", "cat"}}, {{"id", 7}, {"name", "dog"}}}}}
             .dump();
  std::ofstream(work_ / "coco" / "labels.txt") << "cat\ndog\n";
  const json eval = {
      {"task", "detection"},
      {"dataset", (work_ / "coco" / "annotations.json").string()},
      {"images", (work_ / "coco" / "images").string()},
      {"labels", (work_ / "coco" / "labels.txt").string()},
      {"preprocess", {{"size", {4, 4}}, {"channels", "GRAY"}, {"scale", {0.01, -1.28}}}},
      {"decoder",
       {{"type", "ssd_postprocess"}, {"boxes", 0}, {"classes", 1}, {"scores", 2}, {"count", 3}}}};
  const int64_t run = Sweep({{"name", "detect"},
                             {"models", {{{"path", model}, {"eval", eval}}}},
                             {"delegates", {"cpu", "xnnpack"}},
                             {"devices", {"local"}},
                             {"benchmark", {{"warmup_runs", 0}, {"num_runs", 1}}}});
  ASSERT_GT(run, 0);
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(run);
  ASSERT_TRUE(jobs.ok());
  auto tasks = (*store)->ListRunTaskAccuracy(run);
  ASSERT_TRUE(tasks.ok()) << tasks.message();

  // The numpy reference on the boxes derived here.
  const json ref =
      Reference("task_metrics_reference.py",
                {{"images", 3}, {"truth", truth}, {"detections", detections_expected}});
  ASSERT_TRUE(ref.is_object());
  // Hand-worked bounds: image 1's shifted cat matches 4 of the 10 IoU
  // thresholds; the dog of image 0 is a false alarm after image 2's hit.
  EXPECT_GT(ref["map"].get<double>(), 0.3);
  EXPECT_LT(ref["map"].get<double>(), 0.9);
  for (const store::JobRow& j : *jobs) {
    SCOPED_TRACE(j.delegate + ": " + j.status + " " + j.error + " " + j.state_note);
    ASSERT_EQ(j.status, "ok");
    ASSERT_TRUE(tasks->count(j.id));
    const store::TaskAccuracy& t = tasks->at(j.id);
    EXPECT_EQ(t.task, "detection");
    EXPECT_EQ(t.images, 3);
    EXPECT_EQ(t.dataset.rfind("annotations@", 0), 0u) << t.dataset;
    // The detections stored are the ones derived here (float arithmetic aside).
    const json stored = json::parse(t.per_image)["detections"];
    ASSERT_EQ(stored.size(), detections_expected.size()) << t.per_image;
    for (size_t d = 0; d < stored.size(); ++d) {
      for (size_t k = 0; k < 7; ++k) {
        EXPECT_NEAR(stored[d][k].get<double>(), detections_expected[d][k].get<double>(), 1e-5)
            << "detection " << d << " field " << k;
      }
    }
    for (const char* m : {"map", "map50", "map75", "recall"}) {
      ASSERT_NE(t.Find(m), nullptr) << m;
      EXPECT_NEAR(t.Find(m)->value, ref[m].get<double>(), 1e-6) << m;
    }
  }
  Outcome text = Dfarm({"show", std::to_string(run)});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("mAP@[.5:.95]"), std::string::npos) << text.out;
}

// Decoder "ssd_anchors": the raw-anchors model's regressors decoded on the
// host against generated anchors (a 2x2 grid of half-image cells, the same
// four as the post-process model's) with the TFLite box coder (exponential
// size, unit scales), sigmoid scores from class 1, NMS at IoU 0.5. The
// detections stored must be the ones derived here (image 0's anchor 2
// moved onto anchor 0's cat is NMS's duplicate), and mAP the numpy
// reference's on them.
TEST_F(TaskE2eTest, DetectionMapOfRawAnchorsDecodedOnTheHostMatchesTheNumpyReference) {
  const std::string model = RawAnchorsModel(work_ / "raw.tflite");
  fs::create_directories(work_ / "coco" / "images");
  // Pixel p is the offset p * 0.01 - 1.28 (128: 0). Image 0: anchor 2 moved
  // up one cell (ty = -1: pixel 28); image 1: anchor 0 moved 0.4 px right
  // (tx 0.2: IoU 2/3 with its truth); image 2: the anchors themselves.
  const uint8_t kZero = 128;
  std::vector<std::vector<uint8_t>> pixels(3, std::vector<uint8_t>(16, kZero));
  pixels[0][2 * 4 + 0] = 28;
  pixels[1][1] = 148;
  json images = json::array(), detections_expected = json::array();
  for (int i = 0; i < 3; ++i) {
    const std::string name = "i" + std::to_string(i) + ".png";
    WritePng(work_ / "coco" / "images" / name, 4, 4, pixels[i], false);
    images.push_back({{"id", 10 + i}, {"file_name", name}, {"width", 4}, {"height", 4}});
    for (int a = 0; a < 3; ++a) {      // anchor 3 scores below the threshold
      if (i == 0 && a == 2) continue;  // NMS: the duplicate of anchor 0's cat
      double enc[4];
      for (int k = 0; k < 4; ++k) enc[k] = pixels[i][a * 4 + k] * 0.01 - 1.28;
      const std::vector<double> box = Decoded(a, enc);
      const int category = a == 1 ? 7 : 3;  // class 1: cat (3), class 2: dog (7)
      const double logit = kLogits[a][a == 1 ? 2 : 1];
      detections_expected.push_back({i, category, box[0], box[1], box[2], box[3],
                                     static_cast<float>(1 / (1 + std::exp(-logit)))});
    }
  }
  // Truth: image 0 the cat and dog of anchors 0 and 1; image 1 the cat of
  // anchor 0 and of anchor 2; image 2 the dog of anchor 1 and a cat under
  // anchor 3 that nothing detects.
  const json truth = {{0, 3, 0, 0, 2, 2}, {0, 7, 2, 0, 4, 2}, {1, 3, 0, 0, 2, 2},
                      {1, 3, 0, 2, 2, 4}, {2, 7, 2, 0, 4, 2}, {2, 3, 2, 2, 4, 4}};
  json annotations = json::array();
  for (const json& t : truth) {
    const double x = t[2], y = t[3];
    annotations.push_back({{"image_id", 10 + t[0].get<int>()},
                           {"category_id", t[1]},
                           {"bbox", {x, y, t[4].get<double>() - x, t[5].get<double>() - y}}});
  }
  std::ofstream(work_ / "coco" / "annotations.json")
      << json{{"images", images},
              {"annotations", annotations},
              {"categories", {{{"id", 3}, {"name", "cat"}}, {{"id", 7}, {"name", "dog"}}}}}
             .dump();
  std::ofstream(work_ / "coco" / "labels.txt") << "cat\ndog\n";
  const json anchors = {{"num_layers", 1},        {"min_scale", 0.5},
                        {"max_scale", 0.5},       {"input_size_height", 4},
                        {"input_size_width", 4},  {"strides", {2}},
                        {"aspect_ratios", {1.0}}, {"interpolated_scale_aspect_ratio", 0.0}};
  const json eval = {
      {"task", "detection"},
      {"dataset", (work_ / "coco" / "annotations.json").string()},
      {"images", (work_ / "coco" / "images").string()},
      {"labels", (work_ / "coco" / "labels.txt").string()},
      {"preprocess", {{"size", {4, 4}}, {"channels", "GRAY"}, {"scale", {0.01, -1.28}}}},
      {"decoder",
       {{"type", "ssd_anchors"},
        {"boxes", 0},
        {"scores", 1},
        {"anchors", anchors},
        {"box_size", "exponential"},
        {"score", "sigmoid"},
        {"score_threshold", 0.5},
        {"iou_threshold", 0.5},
        {"class_offset", 1}}}};
  const int64_t run = Sweep({{"name", "raw-anchors"},
                             {"models", {{{"path", model}, {"eval", eval}}}},
                             {"delegates", {"cpu", "xnnpack"}},
                             {"devices", {"local"}},
                             {"benchmark", {{"warmup_runs", 0}, {"num_runs", 1}}}});
  ASSERT_GT(run, 0);
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(run);
  ASSERT_TRUE(jobs.ok());
  auto tasks = (*store)->ListRunTaskAccuracy(run);
  ASSERT_TRUE(tasks.ok()) << tasks.message();

  const json ref =
      Reference("task_metrics_reference.py",
                {{"images", 3}, {"truth", truth}, {"detections", detections_expected}});
  ASSERT_TRUE(ref.is_object());
  // Hand-worked bounds: image 1's shifted cat matches 4 of the 10 IoU
  // thresholds, its dog is a false alarm, image 2's cat is missed.
  EXPECT_GT(ref["map"].get<double>(), 0.3);
  EXPECT_LT(ref["map"].get<double>(), 0.95);
  ASSERT_EQ(jobs->size(), 2u);
  for (const store::JobRow& j : *jobs) {
    SCOPED_TRACE(j.delegate + ": " + j.status + " " + j.error + " " + j.state_note);
    ASSERT_EQ(j.status, "ok");
    ASSERT_TRUE(tasks->count(j.id));
    const store::TaskAccuracy& t = tasks->at(j.id);
    EXPECT_EQ(t.task, "detection");
    EXPECT_EQ(t.images, 3);
    const json stored = json::parse(t.per_image)["detections"];
    ASSERT_EQ(stored.size(), detections_expected.size()) << t.per_image;
    for (size_t d = 0; d < stored.size(); ++d) {
      for (size_t k = 0; k < 7; ++k) {
        EXPECT_NEAR(stored[d][k].get<double>(), detections_expected[d][k].get<double>(), 1e-5)
            << "detection " << d << " field " << k;
      }
    }
    for (const char* m : {"map", "map50", "map75", "recall"}) {
      ASSERT_NE(t.Find(m), nullptr) << m;
      EXPECT_NEAR(t.Find(m)->value, ref[m].get<double>(), 1e-6) << m;
    }
  }
}

// A face on a pale wall for face_detection_short_range (128x128): skin
// ellipse of half-height r about (cx, cy), hair on top, eyes, nose, mouth.
struct DrawnFace {
  double cx, cy, r;
};
constexpr DrawnFace kFaces[] = {{64, 60, 30}, {48, 72, 22}, {78, 56, 26}};

std::vector<uint8_t> DrawFace(const DrawnFace& f) {
  std::vector<uint8_t> rgb(128 * 128 * 3);
  for (int y = 0; y < 128; ++y) {
    for (int x = 0; x < 128; ++x) {
      const double hx = (x - f.cx) / (f.r * 0.85), hy = (y - f.cy) / f.r;
      const bool head = hx * hx + hy * hy <= 1;
      int c[3] = {200, 215, 230};
      const auto paint = [&c](int r, int g, int b) { c[0] = r, c[1] = g, c[2] = b; };
      if (head) paint(215, 170, 140);
      if (head && y < f.cy - f.r * 0.45) paint(50, 35, 25);
      for (double ex : {-0.35, 0.35}) {
        const double dx = x - (f.cx + ex * f.r), dy = y - (f.cy - f.r * 0.13);
        if (dx * dx + dy * dy <= f.r * f.r / 100) paint(30, 30, 30);
      }
      if (std::abs(x - f.cx) < f.r * 0.07 && y > f.cy && y < f.cy + f.r * 0.27) {
        paint(180, 130, 110);
      }
      if (std::abs(x - f.cx) < f.r * 0.27 && std::abs(y - (f.cy + f.r * 0.45)) < f.r * 0.07) {
        paint(150, 60, 60);
      }
      for (int k = 0; k < 3; ++k) rgb[(y * 128 + x) * 3 + k] = static_cast<uint8_t>(c[k]);
    }
  }
  return rgb;
}

// The real face_detection_short_range.tflite (raw regressors [1,896,16],
// classificators [1,896,1]) on drawn faces with MediaPipe's decoding
// (its anchor options, x first, scales 128): the detections the host
// stores must be those a second implementation (numpy,
// reports/eval/testing/ssd_anchors_reference.py) decodes from the same
// runner candidates, the mAP the numpy reference's on them, and the faces
// are found where they were drawn.
TEST_F(TaskE2eTest, FaceDetectorOnDrawnFacesDecodesLikeTheNumpyDecoder) {
  const fs::path model =
      fs::path(DFARM_SOURCE_DIR) / "models" / "face_detection_short_range.tflite";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is absent";
  fs::create_directories(work_ / "faces");
  json images = json::array(), annotations = json::array(), truth = json::array();
  for (size_t i = 0; i < std::size(kFaces); ++i) {
    const DrawnFace& f = kFaces[i];
    const std::string name = "f" + std::to_string(i) + ".png";
    WritePng(work_ / "faces" / name, 128, 128, DrawFace(f), true);
    images.push_back({{"id", i + 1}, {"file_name", name}, {"width", 128}, {"height", 128}});
    // The face box: brows to chin, cheek to cheek.
    const double x0 = f.cx - 0.78 * f.r, y0 = f.cy - 0.5 * f.r;
    const double x1 = f.cx + 0.78 * f.r, y1 = f.cy + 1.05 * f.r;
    annotations.push_back(
        {{"image_id", i + 1}, {"category_id", 1}, {"bbox", {x0, y0, x1 - x0, y1 - y0}}});
    truth.push_back({i, 1, x0, y0, x1, y1});
  }
  std::ofstream(work_ / "faces" / "annotations.json") << json{
      {"images", images},
      {"annotations", annotations},
      {"categories", {{{"id", 1}, {"name", "face"}}}}}.dump();
  const json anchors = {{"num_layers", 4},
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
  const json eval = {{"task", "detection"},
                     {"dataset", (work_ / "faces" / "annotations.json").string()},
                     {"preprocess", {{"size", {128, 128}}, {"mean", {127.5}}, {"std", {127.5}}}},
                     {"decoder",
                      {{"type", "ssd_anchors"},
                       {"boxes", 0},
                       {"scores", 1},
                       {"anchors", anchors},
                       {"scales", {{"x", 128}, {"y", 128}, {"w", 128}, {"h", 128}}},
                       {"box_format", "xywh"},
                       {"score", "sigmoid"},
                       {"score_threshold", 0.5},
                       {"iou_threshold", 0.3}}}};
  const int64_t run = Sweep({{"name", "faces"},
                             {"models", {{{"path", model.string()}, {"eval", eval}}}},
                             {"delegates", {"cpu", "xnnpack"}},
                             {"devices", {"local"}},
                             {"benchmark", {{"warmup_runs", 0}, {"num_runs", 1}}}});
  ASSERT_GT(run, 0);
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(run);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  auto tasks = (*store)->ListRunTaskAccuracy(run);
  ASSERT_TRUE(tasks.ok()) << tasks.message();
  for (const store::JobRow& j : *jobs) {
    SCOPED_TRACE(j.delegate + ": " + j.status + " " + j.error + " " + j.state_note);
    ASSERT_EQ(j.status, "ok");
    ASSERT_TRUE(tasks->count(j.id));
    const store::TaskAccuracy& t = tasks->at(j.id);
    auto detail = (*store)->GetJobDetail(j.id);
    ASSERT_TRUE(detail.ok()) << detail.message();
    const json listed = json::parse(detail->runner_json)["task_outputs"];
    ASSERT_EQ(listed["anchors"], 896);
    const json req = {
        {"anchors", anchors},     {"box_format", "xywh"},   {"scales", {128, 128, 128, 128}},
        {"box_size", "linear"},   {"score_threshold", 0.5}, {"iou_threshold", 0.3},
        {"max_detections", 100},  {"class_offset", 0},      {"category_ids", {1}},
        {"sizes", json::array()}, {"sets", listed["sets"]}};
    json with_sizes = req;
    for (size_t i = 0; i < std::size(kFaces); ++i) with_sizes["sizes"].push_back({128, 128});
    const json decoded = Reference("ssd_anchors_reference.py", with_sizes);
    ASSERT_TRUE(decoded.is_object());
    EXPECT_EQ(decoded["anchors"], 896);
    const json& expected = decoded["detections"];
    const json stored = json::parse(t.per_image)["detections"];
    ASSERT_EQ(stored.size(), expected.size()) << t.per_image << "\n" << expected.dump();
    for (size_t d = 0; d < stored.size(); ++d) {
      for (size_t k = 0; k < 7; ++k) {
        EXPECT_NEAR(stored[d][k].get<double>(), expected[d][k].get<double>(), 1e-4)
            << "detection " << d << " field " << k;
      }
    }
    const json ref =
        Reference("task_metrics_reference.py",
                  {{"images", std::size(kFaces)}, {"truth", truth}, {"detections", expected}});
    ASSERT_TRUE(ref.is_object());
    for (const char* m : {"map", "map50", "recall"}) {
      ASSERT_NE(t.Find(m), nullptr) << m;
      EXPECT_NEAR(t.Find(m)->value, ref[m].get<double>(), 1e-6) << m;
    }
    // The drawn faces are found where they were drawn.
    EXPECT_GT(t.Find("map50")->value, 0.6) << t.per_image;
    RecordProperty(j.delegate + "_face_map", std::to_string(t.Find("map")->value));
  }
}

}  // namespace
}  // namespace dfarm::e2e
