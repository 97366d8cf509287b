// The queue payload's keys are those docs/CONTRACTS.md lists ("Queue
// payload"), as a set (a JSON object has no order); a key marked `?` is
// written only when set.
#include "harness/farm/queue_job.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/house/contracts_doc.h"

namespace dfarm::harness {
namespace {

using json = nlohmann::json;

// Dotted paths of `doc`'s keys, depth first in the document's order; the
// contents of the two maps (delegate.options, runner_builds) are values.
void Paths(const json& doc, const std::string& prefix, std::vector<std::string>* out) {
  for (const auto& [key, value] : doc.items()) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object() && path != "delegate.options" && path != "runner_builds") {
      Paths(value, path, out);
    } else {
      out->push_back(path);
    }
  }
}

std::vector<std::string> PayloadPaths(const SweepJob& job) {
  std::vector<std::string> paths;
  Paths(json::parse(EncodePayload(job, {{"linux_amd64", std::string(64, 'b')}})), "", &paths);
  return paths;
}

SweepJob PlainJob() {
  SweepJob job;
  job.model.file = "m.tflite";
  job.model_sha256 = std::string(64, 'a');
  job.delegate.name = "xnnpack";
  job.delegate.options = {{"fp16", "true"}};
  job.input_set_sha256s = {std::string(64, 'c')};
  job.runner = "main";
  return job;
}

TEST(QueuePayloadTest, KeysAreTheDocumentedOnes) {
  const std::vector<std::string> documented = testing::DocumentedList(
      std::string(DFARM_SOURCE_DIR) + "/docs/CONTRACTS.md", "are maps:", "`v` is 1");
  ASSERT_FALSE(documented.empty()) << "docs/CONTRACTS.md lost its queue payload key list";
  std::vector<std::string> always, all;
  for (const std::string& d : documented) {
    const bool optional = !d.empty() && d.back() == '?';
    all.push_back(optional ? d.substr(0, d.size() - 1) : d);
    if (!optional) always.push_back(d);
  }

  SweepJob full = PlainJob();
  full.benchmark.profile = true;
  full.benchmark.cpu_affinity = "big";
  full.benchmark.sustained_s = 30;
  full.delegate.name = "external";
  full.delegate.options = {{kPluginPathOption, "/opt/plugins/libp.so"}};
  full.plugin_sha256 = std::string(64, 'd');
  EvalSpec eval;
  eval.labels = {3};
  eval.dataset_id = "set@000000000000";
  // Every key at once: detection's and segmentation's are written when set.
  eval.box_outputs = {0, 1, 2, 3};
  eval.masks = std::make_shared<std::vector<EvalMask>>();
  eval.anchor_decoder.emplace();
  eval.anchor_decoder->anchors = std::make_shared<std::vector<SsdAnchor>>();
  full.model.eval = eval;

  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(PayloadPaths(PlainJob())), sorted(always));
  EXPECT_EQ(sorted(PayloadPaths(full)), sorted(all));
}

TEST(QueuePayloadTest, EvalRoundTripsForTheNode) {
  SweepJob job = PlainJob();
  EvalSpec eval;
  eval.labels = {3, 1, 4};
  eval.dataset_id = "set@0123456789ab";
  eval.offset = 1;
  eval.top_k = 3;
  eval.output = 2;
  job.model.eval = eval;
  store::JobRow row;
  row.payload = EncodePayload(job, {{"x86_64", std::string(64, 'e')}});
  auto back = DecodePayload(row, "x86_64", [](const std::string& sha, const std::string&) {
    return Result<std::string>("/cache/" + sha);
  });
  ASSERT_TRUE(back) << back.message();
  ASSERT_TRUE(back->model.eval.has_value());
  EXPECT_EQ(back->model.eval->labels, eval.labels);
  EXPECT_EQ(back->model.eval->dataset_id, eval.dataset_id);
  EXPECT_EQ(back->model.eval->TaskOutputsArg(), "topk:3:2");
  EXPECT_EQ(back->model.eval->offset, 1);
  row.payload = EncodePayload(PlainJob(), {{"x86_64", std::string(64, 'e')}});
  back = DecodePayload(row, "x86_64", [](const std::string& sha, const std::string&) {
    return Result<std::string>("/cache/" + sha);
  });
  ASSERT_TRUE(back) << back.message();
  EXPECT_FALSE(back->model.eval.has_value());
}

// A detection eval's truth and decoder, a segmentation eval's masks: what
// the node scores boxes and class maps with.
TEST(QueuePayloadTest, DetectionAndSegmentationEvalsRoundTripForTheNode) {
  const auto fetch = [](const std::string& sha, const std::string&) {
    return Result<std::string>("/cache/" + sha);
  };
  SweepJob job = PlainJob();
  EvalSpec det;
  det.task = "detection";
  det.dataset_id = "coco@0123456789ab";
  det.images = {"/a.png", "/b.png"};
  det.box_outputs = {3, 2, 1, 0};
  det.max_detections = 20;
  det.category_ids = {5, -1};
  det.widths = {640, 320};
  det.heights = {480, 240};
  det.truth = {{1, 5, 10.5, 20, 30, 40}};
  job.model.eval = det;
  store::JobRow row;
  row.payload = EncodePayload(job, {{"x86_64", std::string(64, 'e')}});
  auto back = DecodePayload(row, "x86_64", fetch);
  ASSERT_TRUE(back) << back.message();
  const EvalSpec& d = *back->model.eval;
  EXPECT_EQ(d.TaskOutputsArg(), "boxes:3,2,1,0:20");
  EXPECT_EQ(d.category_ids, det.category_ids);
  EXPECT_EQ(d.heights, det.heights);
  EXPECT_EQ(d.images.size(), 2u);
  ASSERT_EQ(d.truth.size(), 1u);
  EXPECT_EQ(d.truth[0].image, 1u);
  EXPECT_EQ(d.truth[0].x, 10.5);
  EXPECT_FALSE(d.anchor_decoder.has_value());
  EXPECT_EQ(json::parse(row.payload)["v"], 1);

  // Decoder "ssd_anchors": the anchors and decode settings travel too.
  det.box_outputs = {1, 0};
  det.offset = 1;
  det.anchor_decoder.emplace();
  det.anchor_decoder->anchors = std::make_shared<std::vector<SsdAnchor>>(
      std::vector<SsdAnchor>{{0.25, 0.75, 0.5, 0.125}, {0.5, 0.5, 1, 1}});
  det.anchor_decoder->box_format = "xywh";
  det.anchor_decoder->scale_w = 128;
  det.anchor_decoder->exponential_size = true;
  det.anchor_decoder->score = "softmax";
  det.anchor_decoder->score_threshold = 0.05;
  det.anchor_decoder->iou_threshold = 0.3;
  det.anchor_decoder->max_candidates = 200;
  job.model.eval = det;
  row.payload = EncodePayload(job, {{"x86_64", std::string(64, 'e')}});
  back = DecodePayload(row, "x86_64", fetch);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(json::parse(row.payload)["v"], 2);  // older nodes refuse it, naming the version
  const EvalSpec& a = *back->model.eval;
  EXPECT_EQ(a.TaskOutputsArg(), "anchors:1,0:softmax:1:0.05:200");
  ASSERT_TRUE(a.anchor_decoder.has_value());
  ASSERT_EQ(a.anchor_decoder->anchors->size(), 2u);
  EXPECT_EQ((*a.anchor_decoder->anchors)[0].w, 0.125);
  EXPECT_EQ(a.anchor_decoder->box_format, "xywh");
  EXPECT_EQ(a.anchor_decoder->scale_w, 128);
  EXPECT_EQ(a.anchor_decoder->scale_h, 1);
  EXPECT_TRUE(a.anchor_decoder->exponential_size);
  EXPECT_EQ(a.anchor_decoder->iou_threshold, 0.3);
  json v3 = json::parse(row.payload);
  v3["v"] = 3;
  row.payload = v3.dump();
  back = DecodePayload(row, "x86_64", fetch);
  ASSERT_FALSE(back);
  EXPECT_NE(back.message().find("payload has version 3"), std::string::npos) << back.message();

  EvalSpec seg;
  seg.task = "segmentation";
  seg.dataset_id = "people@0123456789ab";
  seg.activation = "probabilities";
  seg.classes = {"background", "person"};
  seg.ignore_label = 255;
  seg.masks =
      std::make_shared<std::vector<EvalMask>>(std::vector<EvalMask>{{3, 2, {0, 0, 1, 1, 255, 0}}});
  job.model.eval = seg;
  row.payload = EncodePayload(job, {{"x86_64", std::string(64, 'e')}});
  back = DecodePayload(row, "x86_64", fetch);
  ASSERT_TRUE(back) << back.message();
  const EvalSpec& s = *back->model.eval;
  EXPECT_EQ(s.TaskOutputsArg(), "classmap:0:probabilities");
  EXPECT_EQ(s.classes, seg.classes);
  EXPECT_EQ(s.ignore_label, 255);
  ASSERT_NE(s.masks, nullptr);
  ASSERT_EQ(s.masks->size(), 1u);
  EXPECT_EQ((*s.masks)[0].values, (*seg.masks)[0].values);
  EXPECT_EQ((*s.masks)[0].width, 3u);
}

}  // namespace
}  // namespace dfarm::harness
