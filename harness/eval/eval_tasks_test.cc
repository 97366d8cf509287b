// The spec's "eval" for detection (COCO annotations) and segmentation (image
// + mask pairs): parsing, the class -> category map, subsets, errors named
// by file and field; and the scoring of a runner's boxes and class maps.
#include "harness/eval/eval_tasks.h"

#include <gtest/gtest.h>
#include <png.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/eval/eval_spec.h"
#include "harness/eval/task_accuracy.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const json kPreprocess = {{"size", {4, 4}}, {"channels", "GRAY"}, {"scale", {1.0 / 255, 0}}};

class EvalTasksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "dfarm_eval_tasks_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A gray PNG of `values` (row-major), written with libpng.
  std::string Png(const std::string& name, uint32_t width, uint32_t height,
                  std::vector<uint8_t> values, bool rgb = false) {
    fs::create_directories((dir_ / name).parent_path());
    png_image png;
    std::memset(&png, 0, sizeof png);
    png.version = PNG_IMAGE_VERSION;
    png.width = width;
    png.height = height;
    png.format = rgb ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    if (values.empty()) values.assign(width * height * (rgb ? 3 : 1), 100);
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(png_image_write_to_file(&png, path.c_str(), 0, values.data(), 0, nullptr))
        << png.message;
    return path;
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  Result<EvalSpec> Parse(json v) {
    if (!v.contains("preprocess")) v["preprocess"] = kPreprocess;
    return ParseEvalSpec(v, "models[0] 'm.tflite'.eval", dir_.string());
  }

  // Two images (8x6 and 10x10) with three boxes of categories 3 ("cat") and
  // 7 ("dog").
  json Coco() {
    Png("img/a.png", 8, 6, {});
    Png("img/b.png", 10, 10, {});
    return {{"images",
             {{{"id", 5}, {"file_name", "a.png"}, {"width", 8}, {"height", 6}},
              {{"id", 9}, {"file_name", "b.png"}, {"width", 10}, {"height", 10}}}},
            {"annotations",
             {{{"image_id", 5}, {"category_id", 3}, {"bbox", {0, 0, 4, 3}}},
              {{"image_id", 9}, {"category_id", 7}, {"bbox", {5, 5, 5, 5}}},
              {{"image_id", 9}, {"category_id", 3}, {"bbox", {0, 0, 2, 2}}}}},
            {"categories", {{{"id", 3}, {"name", "cat"}}, {{"id", 7}, {"name", "dog"}}}}};
  }
  json Detection(const json& coco) {
    Write("ann.json", coco.dump());
    return {
        {"task", "detection"},
        {"dataset", "ann.json"},
        {"images", "img"},
        {"decoder",
         {{"type", "ssd_postprocess"}, {"boxes", 0}, {"classes", 1}, {"scores", 2}, {"count", 3}}}};
  }

  fs::path dir_;
};

TEST_F(EvalTasksTest, DetectionReadsCocoAndMapsClassesToCategories) {
  auto e = Parse(Detection(Coco()));
  ASSERT_TRUE(e) << e.message();
  ASSERT_EQ(e->images.size(), 2u);
  EXPECT_EQ(fs::path(e->images[1]).filename(), "b.png");
  EXPECT_EQ(e->widths, (std::vector<uint32_t>{8, 10}));
  EXPECT_EQ(e->heights, (std::vector<uint32_t>{6, 10}));
  ASSERT_EQ(e->truth.size(), 3u);
  EXPECT_EQ(e->truth[1].image, 1u);
  EXPECT_EQ(e->truth[1].category, 7);
  EXPECT_EQ(e->category_ids, (std::vector<int64_t>{3, 7}));  // the categories' order
  EXPECT_EQ(e->TaskOutputsArg(), "boxes:0,1,2,3:100");
  EXPECT_EQ(e->dataset_id.rfind("ann@", 0), 0u) << e->dataset_id;
  auto again = ParseEvalSpec(e->ToJson(), "again", "/");
  ASSERT_TRUE(again) << again.message();
  EXPECT_EQ(again->dataset_id, e->dataset_id);
  // Labels matched to category names; an unknown name maps to no category.
  json v = Detection(Coco());
  v["labels"] = Write("labels.txt", "???\ndog\ncat\n");
  e = Parse(v);
  ASSERT_TRUE(e) << e.message();
  EXPECT_EQ(e->category_ids, (std::vector<int64_t>{-1, 7, 3}));
  v.erase("labels");
  v["category_ids"] = {7, -1};
  e = Parse(v);
  ASSERT_TRUE(e) << e.message();
  EXPECT_EQ(e->category_ids, (std::vector<int64_t>{7, -1}));
  // A subset keeps the truth of its images, renumbered.
  v["limit"] = 1;
  v["sample"] = 1;
  v["seed"] = 3;
  e = Parse(v);
  ASSERT_TRUE(e) << e.message();
  ASSERT_EQ(e->images.size(), 1u);
  for (const EvalTruthBox& t : e->truth) EXPECT_EQ(t.image, 0u);
  EXPECT_EQ(e->truth.size(), fs::path(e->images[0]).filename() == "a.png" ? 1u : 2u);
}

TEST_F(EvalTasksTest, CocoErrorsNameTheFileAndTheField) {
  const auto fails = [&](json coco, const std::string& want) {
    auto e = Parse(Detection(coco));
    ASSERT_FALSE(e) << want;
    EXPECT_NE(e.message().find("ann.json"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(want), std::string::npos) << e.message();
  };
  json c = Coco();
  c["annotations"][1]["bbox"] = {5, 5, -1, 5};
  fails(c, "annotations[1].bbox: [5,5,-1,5] has a negative coordinate or size");
  c = Coco();
  c["images"][0].erase("width");
  fails(c, "images[0].width: expected an integer from 1 to 65536, missing");
  c = Coco();
  c["annotations"][0]["category_id"] = 4;
  fails(c, "annotations[0].category_id: 4 is not a category's id");
  c = Coco();
  c["annotations"][2]["image_id"] = 6;
  fails(c, "annotations[2].image_id: 6 is not an image's id");
  c = Coco();
  c["images"][1]["file_name"] = "missing.png";
  fails(c, "images[1].file_name");
  c = Coco();
  c["annotations"][0]["iscrowd"] = 1;
  fails(c, "annotations[0].iscrowd");
  c = Coco();
  c["annotations"][0]["bbox"] = {1, 2, 3};
  fails(c, "annotations[0].bbox: expected [x, y, width, height]");
  c = Coco();
  c.erase("categories");
  fails(c, "categories");
  json v = Detection(Coco());
  Write("ann.json", "{not json");
  auto e = Parse(v);
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find("ann.json': is not a JSON object"), std::string::npos) << e.message();
  v = Detection(Coco());
  v["decoder"]["type"] = "yolo";
  e = Parse(v);
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find(".decoder.type"), std::string::npos) << e.message();
  v = Detection(Coco());
  v["decoder"].erase("count");
  e = Parse(v);
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find(".decoder.count"), std::string::npos) << e.message();
  v = Detection(Coco());
  v["category_ids"] = {3, 8};
  e = Parse(v);
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find("category_ids[1]: 8 is not a category id"), std::string::npos)
      << e.message();
}

// Detections at the truth boxes score 1; a class without a category is left
// out; normalized yxyx boxes are scaled by each image's own size.
TEST_F(EvalTasksTest, ScoresTheRunnersBoxesInEachImagesPixels) {
  json v = Detection(Coco());
  v["decoder"]["class_offset"] = 1;
  v["category_ids"] = {3, 7, -1};
  auto e = Parse(v);
  ASSERT_TRUE(e) << e.message();
  runner::TaskOutputs out;
  out.kind = "boxes";
  out.box_outputs = {0, 1, 2, 3};
  out.max_boxes = 100;
  // Image a (8x6): cat [0,0,4,3] = y 0..0.5, x 0..0.5; class 3 (no category).
  out.detections.push_back({{1, 0.9, 0, 0, 0.5, 0.5}, {3, 0.95, 0, 0, 1, 1}});
  // Image b (10x10): dog [5,5,5,5], cat [0,0,2,2].
  out.detections.push_back({{2, 0.8, 0.5, 0.5, 1, 1}, {1, 0.7, 0, 0, 0.2, 0.2}});
  auto scored = ScoreTaskOutputs(*e, out);
  ASSERT_TRUE(scored) << scored.message();
  EXPECT_EQ(scored->task, "detection");
  EXPECT_EQ(scored->images, 2);
  ASSERT_NE(scored->Find("map"), nullptr);
  EXPECT_DOUBLE_EQ(scored->Find("map")->value, 1);
  EXPECT_DOUBLE_EQ(scored->Find("recall")->value, 1);
  // The dog box shifted by a tenth of image b: IoU 4*5/(2*25-20) = 2/3, a
  // match at .50:.05:.65 only (4 of 10 thresholds) of one of two categories.
  out.detections[1][0] = {2, 0.8, 0.5, 0.6, 1, 1.1};
  scored = ScoreTaskOutputs(*e, out);
  ASSERT_TRUE(scored) << scored.message();
  EXPECT_DOUBLE_EQ(scored->Find("map")->value, (1 + 0.4) / 2);
  EXPECT_DOUBLE_EQ(scored->Find("map50")->value, 1);
  EXPECT_DOUBLE_EQ(scored->Find("map75")->value, 0.5);
  out.detections.pop_back();
  EXPECT_FALSE(ScoreTaskOutputs(*e, out));
  out.kind = "topk";
  EXPECT_FALSE(ScoreTaskOutputs(*e, out));
}

// Decoder "ssd_anchors": a 2x2 grid of anchors (one layer, stride 2 on a
// 4x4 input, scale 0.5) or the same four from a file.
json AnchorsDecoder() {
  return {{"type", "ssd_anchors"},
          {"boxes", 1},
          {"scores", 0},
          {"anchors",
           {{"num_layers", 1},
            {"min_scale", 0.5},
            {"max_scale", 0.5},
            {"input_size_height", 4},
            {"input_size_width", 4},
            {"strides", {2}},
            {"aspect_ratios", {1.0}},
            {"interpolated_scale_aspect_ratio", 0.0}}}};
}

TEST_F(EvalTasksTest, SsdAnchorsDecoderParsesAndRoundTrips) {
  json v = Detection(Coco());
  v["decoder"] = AnchorsDecoder();
  auto e = Parse(v);
  ASSERT_TRUE(e) << e.message();
  ASSERT_TRUE(e->anchor_decoder.has_value());
  ASSERT_EQ(e->anchor_decoder->anchors->size(), 4u);
  EXPECT_EQ((*e->anchor_decoder->anchors)[3].y, 0.75);
  EXPECT_EQ((*e->anchor_decoder->anchors)[3].w, 0.5);
  EXPECT_EQ(e->TaskOutputsArg(), "anchors:1,0:sigmoid:0:0.5:100");
  auto again = ParseEvalSpec(e->ToJson(), "again", "/");
  ASSERT_TRUE(again) << again.message();
  EXPECT_EQ(again->TaskOutputsArg(), e->TaskOutputsArg());
  EXPECT_EQ(again->anchor_decoder->anchors->size(), 4u);
  // Every key set, the anchors from a file relative to the spec's folder.
  v["decoder"].erase("anchors");
  v["decoder"].update({{"anchors_file", "anchors.txt"},
                       {"scales", {{"y", 10}, {"x", 10}, {"h", 5}, {"w", 5}}},
                       {"box_format", "xywh"},
                       {"box_size", "exponential"},
                       {"score", "softmax"},
                       {"score_threshold", 0.05},
                       {"iou_threshold", 0.6},
                       {"max_detections", 10},
                       {"max_candidates", 300},
                       {"class_offset", 1}});
  Write("anchors.txt", "0.5,0.5,1,1\n0.25,0.25,0.5,0.5\n");
  e = Parse(v);
  ASSERT_TRUE(e) << e.message();
  EXPECT_EQ(e->TaskOutputsArg(), "anchors:1,0:softmax:1:0.05:300");
  EXPECT_EQ(e->anchor_decoder->anchors_file, (dir_ / "anchors.txt").string());
  EXPECT_EQ(e->anchor_decoder->scale_h, 5);
  EXPECT_TRUE(e->anchor_decoder->exponential_size);
  EXPECT_EQ(e->max_detections, 10u);
  again = ParseEvalSpec(e->ToJson(), "again", "/");
  ASSERT_TRUE(again) << again.message();
  EXPECT_EQ(again->TaskOutputsArg(), e->TaskOutputsArg());
  EXPECT_EQ(again->anchor_decoder->box_format, "xywh");
  EXPECT_EQ(again->anchor_decoder->anchors->size(), 2u);
}

TEST_F(EvalTasksTest, SsdAnchorsDecoderErrorsNameTheField) {
  const auto fails = [&](const json& decoder, const std::string& want) {
    json v = Detection(Coco());
    v["decoder"] = decoder;
    auto e = Parse(v);
    ASSERT_FALSE(e) << want;
    EXPECT_NE(e.message().find(want), std::string::npos) << e.message();
  };
  json d = AnchorsDecoder();
  d.erase("scores");
  fails(d, ".decoder.scores: expected an integer from 0 to 1023, missing");
  d = AnchorsDecoder();
  d["anchors_file"] = "a.txt";
  fails(d, "give \"anchors\" (SsdAnchorsCalculator options");
  d = AnchorsDecoder();
  d.erase("anchors");
  fails(d, "or \"anchors_file\" (one y_center,x_center,h,w per line)");
  d = AnchorsDecoder();
  d["anchors"]["strides"] = {2, 4};
  fails(d, ".decoder.anchors.strides: expected a list of 1 integers");
  d = AnchorsDecoder();
  d.erase("anchors");
  d["anchors_file"] = "missing.txt";
  fails(d, ".decoder.anchors_file: anchors file '");
  d = AnchorsDecoder();
  d["box_format"] = "yxyx";
  fails(d, ".decoder.box_format: expected \"yxhw\", \"xywh\"");
  d = AnchorsDecoder();
  d["score"] = "tanh";
  fails(d, ".decoder.score: expected \"sigmoid\", \"softmax\", \"raw\"");
  d = AnchorsDecoder();
  d["score_threshold"] = 2;
  fails(d, ".decoder.score_threshold: expected a number from 0 to 1, got 2");
  d["score"] = "raw";  // raw scores take any threshold
  json v = Detection(Coco());
  v["decoder"] = d;
  EXPECT_TRUE(Parse(v));
  d = AnchorsDecoder();
  d["scales"] = {{"y", 10}, {"z", 1}};
  fails(d, ".decoder.scales: unknown key 'z' (expected y, x, h, w)");
  d = AnchorsDecoder();
  d["scales"] = {{"h", 0}};
  fails(d, ".decoder.scales.h: expected a number from");
  d = AnchorsDecoder();
  d["classes"] = 2;
  fails(d, ".decoder: unknown key 'classes'");
  d = AnchorsDecoder();
  d["max_candidates"] = 1.5;
  fails(d, ".decoder.max_candidates: expected an integer from 1 to 100000");
  d = AnchorsDecoder();
  d["box_size"] = "log";
  fails(d, ".decoder.box_size: expected \"linear\", \"exponential\"");
}

// The runner's candidates decoded against the anchors: image a (8x6) gets
// the cat at anchor 0's cell (y 0..0.5, x 0..0.5) and a duplicate NMS
// removes; image b (10x10) the dog at anchor 3's cell and the cat at
// [0,0,2,2] (anchor 0, 0.5 x 0.5 about (0.25, 0.25), made 0.2 x 0.2 about
// (0.1, 0.1): th = tw = 0.4, ty = tx = -0.3).
TEST_F(EvalTasksTest, ScoresTheRunnersAnchorCandidatesDecodedOnTheHost) {
  json v = Detection(Coco());
  v["decoder"] = AnchorsDecoder();
  auto e = Parse(v);
  ASSERT_TRUE(e) << e.message();
  runner::TaskOutputs out;
  out.kind = "anchors";
  out.box_outputs = {1, 0};
  out.max_boxes = 1000;
  out.activation = "sigmoid";
  out.threshold = 0.5;
  out.anchors = 4;
  out.detections.push_back({{0, 0.9, 0, 0, 1, 1, 0}, {0, 0.8, 0.01, 0, 1, 1, 0}});
  out.detections.push_back({{1, 0.8, 0, 0, 1, 1, 3}, {0, 0.7, -0.3, -0.3, 0.4, 0.4, 0}});
  auto scored = ScoreTaskOutputs(*e, out);
  ASSERT_TRUE(scored) << scored.message();
  ASSERT_NE(scored->Find("map"), nullptr);
  EXPECT_NEAR(scored->Find("map")->value, 1, 1e-12);
  EXPECT_NEAR(scored->Find("recall")->value, 1, 1e-12);
  EXPECT_EQ(json::parse(scored->per_image)["detections"].size(), 3u) << scored->per_image;
  // A model whose box output has other anchors than the decoder's.
  out.anchors = 896;
  auto wrong = ScoreTaskOutputs(*e, out);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.message().find("896 anchors but the decoder's anchors are 4"), std::string::npos)
      << wrong.message();
  out.anchors = 4;
  out.activation = "raw";
  EXPECT_FALSE(ScoreTaskOutputs(*e, out));
  out.activation = "sigmoid";
  out.kind = "boxes";
  EXPECT_FALSE(ScoreTaskOutputs(*e, out));
}

TEST_F(EvalTasksTest, SegmentationPairsFromAFolderOrAList) {
  Png("seg/images/a.png", 4, 2, {});
  Png("seg/images/b.png", 4, 2, {});
  Png("seg/masks/a.png", 4, 2, {0, 0, 1, 1, 0, 0, 1, 1});
  Png("seg/masks/b.png", 4, 2, {2, 2, 2, 2, 0, 0, 0, 255});
  auto e = Parse({{"task", "segmentation"},
                  {"dataset", "seg"},
                  {"ignore_label", 255},
                  {"decoder", {{"type", "probabilities"}, {"output", 1}}}});
  ASSERT_TRUE(e) << e.message();
  EXPECT_EQ(e->images.size(), 2u);
  EXPECT_EQ(e->classes, (std::vector<std::string>{"0", "1", "2"}));  // 255 is ignored
  ASSERT_NE(e->masks, nullptr);
  EXPECT_EQ((*e->masks)[1].values[3], 2);
  EXPECT_EQ(e->TaskOutputsArg(), "classmap:1:probabilities");
  auto again = ParseEvalSpec(e->ToJson(), "again", "/");
  ASSERT_TRUE(again) << again.message();
  EXPECT_EQ(again->dataset_id, e->dataset_id);
  Write("seg/pairs.txt", "image,mask\nimages/b.png,masks/b.png\n");
  Write("seg/classes.txt", "background\nperson\nsky\n");
  auto list = Parse({{"task", "segmentation"},
                     {"dataset", "seg/pairs.txt"},
                     {"labels", "seg/classes.txt"},
                     {"ignore_label", 255}});
  ASSERT_TRUE(list) << list.message();
  EXPECT_EQ(list->images.size(), 1u);
  EXPECT_EQ(list->classes.size(), 3u);
  EXPECT_EQ(list->TaskOutputsArg(), "classmap:0:logits");
}

TEST_F(EvalTasksTest, AMaskOfTheWrongSizeOrValuesIsAnError) {
  Png("seg/images/a.png", 4, 2, {});
  Png("seg/masks/a.png", 4, 3, {});
  json v = {{"task", "segmentation"}, {"dataset", "seg"}};
  auto e = Parse(v);
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find("masks/a.png' is 4x3 but its image"), std::string::npos)
      << e.message();
  Png("seg/masks/a.png", 4, 2, {0, 1, 7, 0, 0, 0, 0, 0});
  Write("seg/classes.txt", "background\nperson\n");
  v["labels"] = "seg/classes.txt";
  e = Parse(v);
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find("masks/a.png' has value 7, not a class of the labels file (0..1)"),
            std::string::npos)
      << e.message();
  Png("seg/masks/a.png", 4, 2, std::vector<uint8_t>(24, 0), /*rgb=*/true);
  e = Parse(v);
  ASSERT_TRUE(e) << e.message();  // gray in RGB is still one value per pixel
  std::vector<uint8_t> colour(24, 0);
  colour[5] = 9;
  Png("seg/masks/a.png", 4, 2, colour, /*rgb=*/true);
  e = Parse(v);
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find("pixel (1,0) is a colour"), std::string::npos) << e.message();
  fs::remove(dir_ / "seg" / "masks" / "a.png");
  e = Parse(v);
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find("has no mask"), std::string::npos) << e.message();
}

// The class map against the mask resized (nearest) to the output's size.
TEST_F(EvalTasksTest, ScoresTheRunnersClassMapAgainstTheResizedMask) {
  Png("seg/images/a.png", 4, 4, {});
  // 4x4 mask: left half 0, right half 1.
  Png("seg/masks/a.png", 4, 4, {0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1});
  auto e = Parse({{"task", "segmentation"}, {"dataset", "seg"}});
  ASSERT_TRUE(e) << e.message();
  runner::TaskOutputs out;
  out.kind = "classmap";
  out.activation = "logits";
  // A 2x2 output: the mask resized is [0 1; 0 1]; predicted [0 1; 1 1].
  out.maps.push_back({2, 2, {0, 1, 1, 3}});
  auto scored = ScoreTaskOutputs(*e, out);
  ASSERT_TRUE(scored) << scored.message();
  EXPECT_EQ(scored->task, "segmentation");
  ASSERT_NE(scored->Find("miou"), nullptr);
  // class 0: 1 / 2, class 1: 2 / 3.
  EXPECT_DOUBLE_EQ(scored->Find("miou")->value, (0.5 + 2.0 / 3) / 2);
  EXPECT_DOUBLE_EQ(scored->Find("pixel_accuracy")->value, 0.75);
  out.maps[0].rle = {0, 1, 1, 2};  // 3 of 4 pixels
  auto short_map = ScoreTaskOutputs(*e, out);
  ASSERT_FALSE(short_map);
  EXPECT_NE(short_map.message().find("does not cover its 2x2 pixels"), std::string::npos);
  out.activation = "probabilities";
  EXPECT_FALSE(ScoreTaskOutputs(*e, out));
}

}  // namespace
}  // namespace dfarm::harness
