#include "agent/runner/runner_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace dfarm::runner_json {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Document FullDocument() {
  Document d;
  d.status = "ok";
  d.model = "m.tflite";
  d.delegate = "xnnpack";
  d.num_threads = 4;
  d.threads_used = 4;
  // Latency statistics (mean, std, min, max, p50, p90, p99), then init,
  // first, warmup mean, num_runs, peak RSS, arena.
  d.metrics = Metrics{{1.5, 0.25, 1, 2, 1.5, 1.75, 1.99}, 1234.5, 12, 0, 3, 1 << 20, 4096};
  d.samples_us = {1.0, 1.5, 2.0};
  d.inputs = {{0, "in", "int8", {1, 8, 8, 3}, std::nullopt}};
  d.outputs = {{0, "scores", "float32", {1, 10}, std::string(64, 'a')},
               {1, "q", "uint8", {1, 4}, std::nullopt}};
  d.placement = JobPlacement{2,
                             {{0, "CONV_2D", "cpu", std::nullopt, false, "xnnpack: no"},
                              {1, "ADD", "xnnpack", 0, false, ""},
                              {2, "DEQUANTIZE", "cpu", std::nullopt, true, ""}}};
  OutputAccuracy scores;
  scores.index = 0;
  scores.name = "scores";
  scores.compared = 10;
  scores.mean_abs_error = 0.5;
  scores.std_abs_error = 0.125;
  scores.max_abs_error = 1;
  scores.rmse = 0.75;
  scores.nan_count = 1;
  scores.top1_agree = true;
  scores.top5_agree = false;
  scores.snr_db = 21.5;
  scores.psnr_db = 30.25;
  OutputAccuracy q;
  q.index = 1;
  q.name = "q";
  q.mean_abs_error = std::nan("");  // nothing compared: null
  q.std_abs_error = std::nan("");
  q.max_abs_error = std::nan("");
  q.rmse = std::nan("");
  q.reference_inf_count = 2;
  q.max_abs_error_lsb = Number(int64_t{3});
  d.accuracy = Accuracy{"cpu", {scores, q}};
  d.profile =
      JobProfile{5,
                 {{0, "CONV_2D", "cpu", std::nullopt, {}, 10.5},
                  {1, "DELEGATE", "xnnpack", 0, {1, 2}, 3},
                  {1, "ADD", "xnnpack", 0, {}, 1.25},
                  {2, "MUL", "xnnpack", 0, {}, 1.5}},
                 {{"CONV_2D", 1, 10.5, 77.5}, {"MUL", 1, 1.5, 11.1}, {"ADD", 1, 1.25, 9.2}}};
  return d;
}

TEST(RunnerJsonTest, RoundTripKeepsEveryByte) {
  const std::string text = WriteRunnerJson(FullDocument());
  auto parsed = ParseRunnerJson(text);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(WriteRunnerJson(*parsed), text);

  const Document& d = *parsed;
  EXPECT_EQ(d.status, "ok");
  EXPECT_EQ(d.threads_used, 4);
  ASSERT_TRUE(d.metrics);
  EXPECT_DOUBLE_EQ(d.metrics->init_us, 1234.5);
  EXPECT_EQ(d.metrics->peak_rss_bytes, 1 << 20);
  EXPECT_EQ(d.samples_us.size(), 3u);
  ASSERT_EQ(d.outputs.size(), 2u);
  EXPECT_EQ(d.outputs[1].shape, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(d.outputs[0].sha256, std::string(64, 'a'));
  EXPECT_FALSE(d.outputs[1].sha256.has_value());  // absent: no key
  EXPECT_FALSE(d.inputs[0].sha256.has_value());
  ASSERT_TRUE(d.placement);
  EXPECT_EQ(d.placement->nodes[1].partition, 0);
  EXPECT_TRUE(d.placement->nodes[2].folded);
  ASSERT_TRUE(d.accuracy);
  ASSERT_EQ(d.accuracy->outputs.size(), 2u);
  EXPECT_TRUE(std::isnan(d.accuracy->outputs[1].rmse));
  EXPECT_EQ(d.accuracy->outputs[0].top5_agree, std::optional<bool>(false));
  EXPECT_EQ(d.accuracy->outputs[0].snr_db, std::optional<double>(21.5));
  EXPECT_EQ(d.accuracy->outputs[0].psnr_db, std::optional<double>(30.25));
  EXPECT_FALSE(d.accuracy->outputs[1].snr_db.has_value());  // unset: no key
  ASSERT_TRUE(d.profile);
  EXPECT_EQ(d.profile->nodes[1].nodes, (std::vector<int64_t>{1, 2}));
  // A node timed inside its partition: the partition, no "nodes" key.
  EXPECT_EQ(d.profile->nodes[2].op, "ADD");
  EXPECT_EQ(d.profile->nodes[2].partition, 0);
  EXPECT_TRUE(d.profile->nodes[2].nodes.empty());
  EXPECT_THAT(text, HasSubstr(R"({"delegate":"xnnpack","index":1,"mean_us":1.25,"op":"ADD",)"
                              R"("partition":0})"));
}

// delegate_stats and the cold/warm init round trip; absent ones
// write no key.
TEST(RunnerJsonTest, DelegateStatsAndColdWarmInitRoundTrip) {
  Document d = FullDocument();
  d.metrics->init_cold_us = 5000.5;
  d.metrics->init_warm_us = 800.25;
  d.delegate_stats = {{"programs_compiled", 3}, {"compile_us", 4200.5}};
  const std::string text = WriteRunnerJson(d);
  EXPECT_THAT(text, HasSubstr(R"("delegate_stats":{"compile_us":4200.5,"programs_compiled":3.0})"));
  EXPECT_THAT(text, HasSubstr(R"("init_cold_us":5000.5,"init_us":1234.5,"init_warm_us":800.25)"));
  auto parsed = ParseRunnerJson(text);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(WriteRunnerJson(*parsed), text);
  EXPECT_EQ(parsed->metrics->init_cold_us, std::optional<double>(5000.5));
  EXPECT_EQ(parsed->metrics->init_warm_us, std::optional<double>(800.25));
  ASSERT_EQ(parsed->delegate_stats.size(), 2u);
  const std::string plain = WriteRunnerJson(FullDocument());
  EXPECT_THAT(plain, Not(HasSubstr("delegate_stats")));
  EXPECT_THAT(plain, Not(HasSubstr("init_cold_us")));
  EXPECT_FALSE(ParseRunnerJson(plain)->metrics->init_warm_us.has_value());
  EXPECT_FALSE(ParseRunnerJson(R"({"status":"ok","metrics":{"init_cold_us":"x"}})").ok());
}

TEST(RunnerJsonTest, WritesTheContractsKeys) {
  const std::string text = WriteRunnerJson(FullDocument());
  // nlohmann orders keys; a figure over nothing compared is null.
  EXPECT_THAT(text,
              HasSubstr(R"("metrics":{"arena_bytes":4096,"first_us":12.0,"init_us":1234.5,)"));
  EXPECT_THAT(text, HasSubstr(R"({"delegate":"cpu","folded":true,"index":2,"op":"DEQUANTIZE"})"));
  EXPECT_THAT(text, HasSubstr(R"({"delegate":"xnnpack","index":1,"op":"ADD","partition":0})"));
  EXPECT_THAT(text, HasSubstr(R"("num_threads":4,)"));
  EXPECT_THAT(text, HasSubstr(R"("threads_used":4})"));
  EXPECT_THAT(text, HasSubstr(R"("psnr_db":30.25,)"));
  EXPECT_THAT(text, HasSubstr(R"("snr_db":21.5,)"));
  EXPECT_THAT(text, HasSubstr(R"("name":"scores","sha256":")" + std::string(64, 'a') +
                              R"(","shape":[1,10]})"));
  EXPECT_THAT(text, HasSubstr(R"("name":"q","shape":[1,4]})"));
  Accuracy one{"cpu", {FullDocument().accuracy->outputs[1]}};
  EXPECT_EQ(AccuracyJson(one).dump(),
            R"({"outputs":[{"compared":0,"index":1,"inf_count":0,"max_abs_error":null,)"
            R"("max_abs_error_lsb":3,"mean_abs_error":null,"name":"q","nan_count":0,)"
            R"("reference_inf_count":2,"reference_nan_count":0,"rmse":null,)"
            R"("std_abs_error":null}],"reference":"cpu"})");
}

TEST(RunnerJsonTest, FailureDocumentHasOnlyStatusAndError) {
  Document d = FullDocument();
  d.status = "model_error";
  d.error = "bad model";
  EXPECT_EQ(WriteRunnerJson(d), R"({"error":"bad model","status":"model_error"})");
  auto parsed = ParseRunnerJson(WriteRunnerJson(d));
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(IsOk(*parsed));
  EXPECT_EQ(parsed->error, "bad model");
  EXPECT_FALSE(parsed->metrics);
}

TEST(RunnerJsonTest, InputSetFiguresRoundTrip) {
  Accuracy a{"cpu", {OutputAccuracy{}}};
  a.sets = 3;
  a.outputs[0].top1_agree = false;
  a.outputs[0].top1_agreement = 2.0 / 3;
  a.outputs[0].top5_agreement = 1.0;
  const std::string text = AccuracyJson(a).dump();
  EXPECT_THAT(text, HasSubstr(R"("sets":3)"));
  auto parsed = ParseRunnerJson(R"({"status":"ok","accuracy":)" + text + "}");
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->accuracy->sets, 3);
  EXPECT_DOUBLE_EQ(*parsed->accuracy->outputs[0].top1_agreement, 2.0 / 3);
  EXPECT_DOUBLE_EQ(*parsed->accuracy->outputs[0].top5_agreement, 1.0);
  // Without sets, nothing new is written.
  EXPECT_THAT(AccuracyJson(Accuracy{"cpu", {OutputAccuracy{}}}).dump(),
              ::testing::Not(HasSubstr("sets")));
}

TEST(RunnerJsonTest, TaskOutputsRoundTripAndMalformedAreLeftOut) {
  runner::TaskOutputs t;
  t.k = 2;
  t.output = 1;
  t.sets = {{3, 0}, {1, 2}};
  const std::string text = TaskOutputsJson(t).dump();
  EXPECT_EQ(text, R"({"k":2,"kind":"topk","output":1,"sets":[[3,0],[1,2]]})");
  auto parsed = ParseRunnerJson(R"({"status":"ok","task_outputs":)" + text + "}");
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  ASSERT_TRUE(parsed->task_outputs.has_value());
  EXPECT_EQ(parsed->task_outputs->sets, t.sets);
  EXPECT_EQ(parsed->task_outputs->k, 2);
  EXPECT_EQ(parsed->task_outputs->output, 1);
  for (const char* bad : {R"({"kind":"argmax","sets":[]})", R"({"kind":"topk","sets":[[-1]]})",
                          R"({"kind":"topk","sets":[1]})", R"({"kind":"topk"})"}) {
    parsed = ParseRunnerJson(std::string(R"({"status":"ok","task_outputs":)") + bad + "}");
    ASSERT_TRUE(parsed.ok()) << bad;
    EXPECT_FALSE(parsed->task_outputs.has_value()) << bad;
  }
}

TEST(RunnerJsonTest, SteppedPairRoundTripsWithItsPartnerDocument) {
  const std::string partner =
      R"({"delegate":"cpu","inputs":[],"model":"m.tflite","outputs":[],"samples_us":[2.0],)"
      R"("status":"ok","steps":{"role":"partner","starts_us":[15.5]}})";
  const std::string text =
      R"({"delegate":"cpu","inputs":[],"model":"m.tflite","outputs":[],)"
      R"("partner":)" +
      partner +
      R"(,"samples_us":[1.0],"status":"ok","steps":{"order":"AB","partner_steps":1,)"
      R"("role":"driver","starts_us":[10.25]}})";
  auto parsed = ParseRunnerJson(text);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  ASSERT_TRUE(parsed->steps.has_value());
  EXPECT_EQ(parsed->steps->role, "driver");
  EXPECT_EQ(parsed->steps->order, "AB");
  EXPECT_EQ(parsed->steps->partner_steps, 1);
  EXPECT_EQ(parsed->steps->starts_us, std::vector<double>{10.25});
  EXPECT_TRUE(parsed->steps->partner_error.empty());
  ASSERT_TRUE(parsed->partner.has_value());
  auto inner = ParseRunnerJson(*parsed->partner);
  ASSERT_TRUE(inner.ok()) << inner.message();
  EXPECT_EQ(inner->steps->role, "partner");
  EXPECT_EQ(inner->samples_us, std::vector<double>{2.0});
  // Written again: the same keys, the partner's document inside.
  EXPECT_EQ(WriteRunnerJson(*parsed), text);
  // partner_error only when set; a partner's steps have no order.
  parsed->steps->partner_error = "partner runner ended before it was ready";
  EXPECT_THAT(WriteRunnerJson(*parsed),
              HasSubstr(R"("partner_error":"partner runner ended before it was ready")"));
  EXPECT_THAT(StepsJson(inner->steps.value()).dump(), Not(HasSubstr("order")));
}

TEST(RunnerJsonTest, BoxesAndClassMapsRoundTripAndMalformedAreLeftOut) {
  runner::TaskOutputs boxes;
  boxes.kind = "boxes";
  boxes.box_outputs = {0, 1, 2, 3};
  boxes.max_boxes = 10;
  boxes.detections = {{{2, 0.75, 0.1, 0.2, 0.5, 0.6}}, {}};
  std::string text = TaskOutputsJson(boxes).dump();
  EXPECT_EQ(
      text,
      R"({"kind":"boxes","max":10,"outputs":[0,1,2,3],"sets":[[[2,0.75,0.1,0.2,0.5,0.6]],[]]})");
  auto parsed = ParseRunnerJson(R"({"status":"ok","task_outputs":)" + text + "}");
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  ASSERT_TRUE(parsed->task_outputs.has_value());
  ASSERT_EQ(parsed->task_outputs->detections.size(), 2u);
  EXPECT_EQ(parsed->task_outputs->detections[0][0].class_index, 2);
  EXPECT_EQ(parsed->task_outputs->detections[0][0].xmax, 0.6);
  EXPECT_EQ(parsed->task_outputs->box_outputs, boxes.box_outputs);
  runner::TaskOutputs maps;
  maps.kind = "classmap";
  maps.activation = "logits";
  maps.maps = {{2, 3, {0, 4, 1, 2}}};
  text = TaskOutputsJson(maps).dump();
  parsed = ParseRunnerJson(R"({"status":"ok","task_outputs":)" + text + "}");
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  ASSERT_TRUE(parsed->task_outputs.has_value());
  ASSERT_EQ(parsed->task_outputs->maps.size(), 1u);
  EXPECT_EQ(parsed->task_outputs->maps[0].width, 3);
  EXPECT_EQ(parsed->task_outputs->maps[0].rle, maps.maps[0].rle);
  EXPECT_EQ(parsed->task_outputs->activation, "logits");
  for (
      const char* bad :
      {R"({"kind":"boxes","outputs":[0,1,2],"max":1,"sets":[]})",
       R"({"kind":"boxes","outputs":[0,1,2,3],"max":1,"sets":[[[0,1,2]]]})",
       R"({"kind":"classmap","output":0,"activation":"logits","sets":[{"height":1,"width":1,"rle":[1]}]})",
       R"({"kind":"classmap","output":0,"sets":[]})"}) {
    parsed = ParseRunnerJson(std::string(R"({"status":"ok","task_outputs":)") + bad + "}");
    ASSERT_TRUE(parsed.ok()) << bad;
    EXPECT_FALSE(parsed->task_outputs.has_value()) << bad;
  }
}

TEST(RunnerJsonTest, AnchorCandidatesRoundTripWithTheirAnchor) {
  runner::TaskOutputs rows;
  rows.kind = "anchors";
  rows.box_outputs = {1, 0};
  rows.max_boxes = 50;
  rows.activation = "softmax";
  rows.class_offset = 1;
  rows.threshold = 0.25;
  rows.anchors = 896;
  rows.detections = {{{2, 0.75, 0.1, -0.2, 3.5, 0.6, 895}}, {}};
  const std::string text = TaskOutputsJson(rows).dump();
  EXPECT_EQ(text,
            R"({"anchors":896,"kind":"anchors","max":50,"offset":1,"outputs":[1,0],)"
            R"("score":"softmax","sets":[[[2,0.75,0.1,-0.2,3.5,0.6,895]],[]],"threshold":0.25})");
  auto parsed = ParseRunnerJson(R"({"status":"ok","task_outputs":)" + text + "}");
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  ASSERT_TRUE(parsed->task_outputs.has_value());
  const runner::TaskOutputs& back = *parsed->task_outputs;
  EXPECT_EQ(back.box_outputs, rows.box_outputs);
  EXPECT_EQ(back.activation, "softmax");
  EXPECT_EQ(back.class_offset, 1);
  EXPECT_EQ(back.threshold, 0.25);
  EXPECT_EQ(back.anchors, 896);
  ASSERT_EQ(back.detections.size(), 2u);
  EXPECT_EQ(back.detections[0][0].anchor, 895);
  EXPECT_EQ(back.detections[0][0].ymax, 3.5);
  for (
      const char* bad :
      {R"({"kind":"anchors","outputs":[0,1],"max":1,"score":"raw","threshold":0,"sets":[[[0,1,2,3,4,5]]]})",
       R"({"kind":"anchors","outputs":[0,1],"max":1,"score":"raw","threshold":0,"sets":[[[0,1,2,3,4,5,-1]]]})",
       R"({"kind":"anchors","outputs":[0,1],"max":1,"threshold":0,"sets":[]})",
       R"({"kind":"anchors","outputs":[0,1,2,3],"max":1,"score":"raw","threshold":0,"sets":[]})"}) {
    parsed = ParseRunnerJson(std::string(R"({"status":"ok","task_outputs":)") + bad + "}");
    ASSERT_TRUE(parsed.ok()) << bad;
    EXPECT_FALSE(parsed->task_outputs.has_value()) << bad;
  }
}

TEST(RunnerJsonTest, LayerErrorsRoundTrip) {
  Accuracy a{"layers", {OutputAccuracy{}}};
  a.layers.push_back({0, "DELEGATE", "example", 0, 7, "t2", 0.25, 0.125});
  a.layers.push_back({3, "ADD", "cpu", -1, 8, "t3", 0.5, 0.5});
  const std::string text = AccuracyJson(a).dump();
  auto parsed = ParseRunnerJson(R"({"status":"ok","accuracy":)" + text + "}");
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  ASSERT_EQ(parsed->accuracy->layers.size(), 2u);
  EXPECT_EQ(parsed->accuracy->layers[0].partition, 0);
  EXPECT_EQ(parsed->accuracy->layers[1].partition, -1);
  EXPECT_EQ(parsed->accuracy->layers[1].op, "ADD");
  EXPECT_EQ(AccuracyJson(*parsed->accuracy).dump(), text);
  EXPECT_THAT(text, HasSubstr(R"({"delegate":"cpu","max_abs_error":0.5,"mean_abs_error":0.5,)"
                              R"("name":"t3","node":3,"op":"ADD","tensor":8})"));
}

TEST(RunnerJsonTest, MaxAbsErrorLsbKeepsItsKindOfNumber) {
  Accuracy a{"cpu", {OutputAccuracy{}}};
  a.outputs[0].max_abs_error_lsb = Number(int64_t{2});
  EXPECT_THAT(AccuracyJson(a).dump(), HasSubstr(R"("max_abs_error_lsb":2,)"));
  a.outputs[0].max_abs_error_lsb = Number(2.0);  // a store's REAL
  EXPECT_THAT(AccuracyJson(a).dump(), HasSubstr(R"("max_abs_error_lsb":2.0,)"));
  auto parsed = ParseRunnerJson(
      R"({"status":"ok","accuracy":{"reference":"cpu","outputs":[{"index":0,"max_abs_error_lsb":2.5}]}})");
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_DOUBLE_EQ(ToDouble(*parsed->accuracy->outputs[0].max_abs_error_lsb), 2.5);
}

TEST(RunnerJsonTest, MissingFieldsKeepTheirDefaults) {
  auto bare = ParseRunnerJson(R"({"status":"ok"})");
  ASSERT_TRUE(bare.ok()) << bare.message();
  EXPECT_TRUE(IsOk(*bare));
  EXPECT_FALSE(bare->metrics);
  EXPECT_FALSE(bare->threads_used);
  EXPECT_FALSE(bare->placement);
  EXPECT_FALSE(bare->accuracy);
  EXPECT_FALSE(bare->profile);
  EXPECT_TRUE(bare->samples_us.empty());

  auto partial = ParseRunnerJson(R"({"metrics":{"mean_us":7}})");
  ASSERT_TRUE(partial.ok()) << partial.message();
  EXPECT_EQ(partial->status, "");
  ASSERT_TRUE(partial->metrics);
  EXPECT_DOUBLE_EQ(partial->metrics->mean_us, 7);
  EXPECT_DOUBLE_EQ(partial->metrics->p99_us, 0);
  EXPECT_EQ(partial->metrics->num_runs, 0);

  // An accuracy output without figures: NaN (null), counts 0, no flags.
  auto acc = ParseRunnerJson(R"({"accuracy":{"outputs":[{"index":3}]}})");
  ASSERT_TRUE(acc.ok()) << acc.message();
  ASSERT_EQ(acc->accuracy->outputs.size(), 1u);
  EXPECT_EQ(acc->accuracy->reference, "");
  EXPECT_TRUE(std::isnan(acc->accuracy->outputs[0].mean_abs_error));
  EXPECT_EQ(acc->accuracy->outputs[0].compared, 0);
  EXPECT_FALSE(acc->accuracy->outputs[0].top1_agree);
}

// Found by harness/fuzz's runner-JSON fuzzer: a count written as a float
// beyond int64_t was converted with undefined behaviour (UBSan); it saturates.
TEST(RunnerJsonTest, CountsBeyondInt64Saturate) {
  auto doc = ParseRunnerJson(
      R"({"status":"ok","metrics":{"peak_rss_bytes":1.04e20,"arena_bytes":-1e300,"num_runs":3.9},)"
      R"("accuracy":{"outputs":[{"index":0,"compared":1e19}]}})");
  ASSERT_TRUE(doc.ok()) << doc.message();
  ASSERT_TRUE(doc->metrics);
  EXPECT_EQ(doc->metrics->peak_rss_bytes, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(doc->metrics->arena_bytes, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(doc->metrics->num_runs, 3);
  ASSERT_TRUE(doc->accuracy);
  EXPECT_EQ(doc->accuracy->outputs[0].compared, std::numeric_limits<int64_t>::max());
}

TEST(RunnerJsonTest, WrongTypes) {
  auto status = ParseRunnerJson(R"({"status":5})");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("runner JSON"));
  EXPECT_FALSE(ParseRunnerJson(R"({"status":"ok","metrics":{"mean_us":"fast"}})").ok());
  EXPECT_FALSE(ParseRunnerJson(R"({"status":"ok","error":[]})").ok());
  EXPECT_FALSE(ParseRunnerJson("").ok());
  EXPECT_FALSE(ParseRunnerJson("[1]").ok());
  EXPECT_THAT(ParseRunnerJson("[1]").message(), HasSubstr("not an object"));

  // Lenient where the harness always was: the rest of the document counts.
  auto lenient = ParseRunnerJson(
      R"({"status":"ok","metrics":{"mean_us":1,"num_runs":"x"},"samples_us":[1,"x",2],
          "threads_used":"many","placement":{"partitions":"one","nodes":[]},
          "accuracy":{"outputs":{}},"inputs":[5,{"index":0,"name":7}],"profile":[]})");
  ASSERT_TRUE(lenient.ok()) << lenient.message();
  EXPECT_EQ(lenient->metrics->num_runs, 0);
  EXPECT_EQ(lenient->samples_us, (std::vector<double>{1, 2}));
  EXPECT_FALSE(lenient->threads_used);
  EXPECT_FALSE(lenient->placement);
  EXPECT_FALSE(lenient->accuracy);
  ASSERT_EQ(lenient->inputs.size(), 1u);
  EXPECT_EQ(lenient->inputs[0].name, "");
  EXPECT_FALSE(lenient->profile);
}

// A runner is the user's program: a document nested past the bound is
// refused before it is parsed.
TEST(RunnerJsonTest, DeepDocumentsAreRefused) {
  const std::string deep =
      R"({"status":"ok","x":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto doc = ParseRunnerJson(deep);
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.message(), "runner JSON: nested deeper than 64 levels");
  auto accuracy = ParseRunnerAccuracy(deep);
  ASSERT_FALSE(accuracy.ok());
  EXPECT_EQ(accuracy.message(), "runner JSON: nested deeper than 64 levels");
}

TEST(RunnerJsonTest, ParseRunnerAccuracyNamesTheFault) {
  auto none = ParseRunnerAccuracy(R"({"status":"ok"})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto bad = ParseRunnerAccuracy(R"({"accuracy":{"outputs":[{"index":0},{"name":"x"}]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("accuracy.outputs[1]"));
  auto shape = ParseRunnerAccuracy(R"({"accuracy":[]})");
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(shape.message(), HasSubstr("\"outputs\" array"));
  auto twice = ParseRunnerAccuracy(R"({"accuracy":{"outputs":[{"index":1},{"index":1}]}})");
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.message(), HasSubstr("lists output 1 twice"));
  auto sorted = ParseRunnerAccuracy(R"({"accuracy":{"outputs":[{"index":2},{"index":0}]}})");
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ((**sorted).outputs[0].index, 0);
}

}  // namespace
}  // namespace dfarm::runner_json
