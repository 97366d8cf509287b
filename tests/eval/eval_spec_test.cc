// The spec's "eval" (harness/eval/eval_spec.h) on the real digits set: both
// dataset forms, subsets, the set's identity, the spec round trip, bad input
// named by file and entry; and the scoring of a runner's task outputs
// (harness/eval/task_accuracy.h).
#include "harness/eval/eval_spec.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/eval/task_accuracy.h"
#include "harness/spec/spec.h"
#include "tests/eval/digits_fixture.h"

namespace dfarm::testing {
namespace {

namespace fs = std::filesystem;
using harness::EvalSpec;
using harness::ParseEvalSpec;
using nlohmann::json;

const json kPreprocess = {{"size", {8, 8}}, {"channels", "GRAY"}, {"scale", {1.0 / 255, 0}}};

class EvalSpecTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern = (fs::temp_directory_path() / "dfarm_eval_spec_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) return;
    dir_ = new std::string(pattern);
    auto f = MakeDigitsFixture(*dir_);
    if (f) fixture_ = new DigitsFixture(std::move(*f));
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (dir_ != nullptr) fs::remove_all(*dir_, ec);
    delete fixture_;
    delete dir_;
    fixture_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(fixture_, nullptr) << "the digits fixture failed"; }

  static Result<EvalSpec> Parse(json v) {
    if (!v.contains("preprocess")) v["preprocess"] = kPreprocess;
    return ParseEvalSpec(v, "models[0] 'digits.tflite'.eval", *dir_);
  }
  // Each held-out image's label, by path.
  static std::map<std::string, int> Labels() {
    std::map<std::string, int> out;
    for (const DigitsImage& i : fixture_->images) out[i.path] = i.label;
    return out;
  }
  static std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (fs::path(fixture_->dataset_dir) / name).string();
    std::ofstream(path) << text;
    return path;
  }

  static std::string* dir_;
  static DigitsFixture* fixture_;
};
std::string* EvalSpecTest::dir_ = nullptr;
DigitsFixture* EvalSpecTest::fixture_ = nullptr;

TEST_F(EvalSpecTest, FolderAndListGiveTheSameLabelledImages) {
  auto folder = Parse({{"dataset", fixture_->dataset_dir}, {"sample", 200}});
  ASSERT_TRUE(folder) << folder.message();
  auto list = Parse({{"dataset", fixture_->list_file},
                     {"labels", fixture_->labels_file},
                     {"sample", 200},
                     {"seed", 7}});
  ASSERT_TRUE(list) << list.message();
  const auto labels = Labels();
  for (const EvalSpec* e : {&*folder, &*list}) {
    ASSERT_EQ(e->images.size(), 200u);
    ASSERT_EQ(e->labels.size(), 200u);
    EXPECT_EQ(e->classes.size(), 10u);
    for (size_t i = 0; i < e->images.size(); ++i) {
      ASSERT_TRUE(labels.count(e->images[i])) << e->images[i];
      EXPECT_EQ(e->labels[i], labels.at(e->images[i])) << e->images[i];
    }
    EXPECT_EQ(e->TaskOutputsArg(), "topk:5:0");
    auto inputs = e->Inputs();
    ASSERT_TRUE(inputs) << inputs.message();
    ASSERT_EQ(inputs->images.size(), 1u);
    EXPECT_EQ(inputs->images[0].images, e->images);
    EXPECT_EQ(inputs->images[0].channels, "GRAY");
  }
  // Another draw is another set, named apart; the same draw, the same name.
  EXPECT_NE(folder->dataset_id, list->dataset_id);
  EXPECT_EQ(folder->dataset_id.rfind("digits@", 0), 0u) << folder->dataset_id;
  auto again = Parse({{"dataset", fixture_->dataset_dir}, {"sample", 200}});
  ASSERT_TRUE(again) << again.message();
  EXPECT_EQ(again->dataset_id, folder->dataset_id);
  EXPECT_EQ(again->images, folder->images);
}

TEST_F(EvalSpecTest, LimitTakesTheFirstImagesAndDecoderIsRead) {
  auto e = Parse({{"dataset", fixture_->list_file},
                  {"limit", 30},
                  {"decoder", {{"output", 0}, {"offset", 1}, {"top_k", 3}}}});
  ASSERT_TRUE(e) << e.message();
  ASSERT_EQ(e->images.size(), 30u);
  EXPECT_EQ(e->images.front(), fixture_->images.front().path);
  EXPECT_EQ(e->images.back(), fixture_->images[29].path);
  EXPECT_EQ(e->offset, 1);
  EXPECT_EQ(e->TaskOutputsArg(), "topk:3:0");
  // A list of indices without a labels file: classes 0..max.
  EXPECT_EQ(e->classes.size(), 10u);
}

TEST_F(EvalSpecTest, SpecRoundTripKeepsTheEval) {
  json spec = {
      {"name", "t"},
      {"models",
       {{{"path", fixture_->float_model},
         {"eval",
          {{"dataset", fixture_->dataset_dir}, {"sample", 50}, {"preprocess", kPreprocess}}}}}},
      {"delegates", {"cpu"}},
      {"devices", {"local"}}};
  auto parsed = harness::ParseSpec(spec.dump(), *dir_ + "/spec.json");
  ASSERT_TRUE(parsed) << parsed.message();
  ASSERT_TRUE(parsed->models[0].eval.has_value());
  EXPECT_EQ(parsed->models[0].inputs.images.at(0).images.size(), 50u);
  auto again = harness::ParseSpec(parsed->ToJson(), "/spec.json");
  ASSERT_TRUE(again) << again.message();
  ASSERT_TRUE(again->models[0].eval.has_value());
  EXPECT_EQ(again->models[0].eval->dataset_id, parsed->models[0].eval->dataset_id);
  EXPECT_EQ(again->models[0].eval->images, parsed->models[0].eval->images);
  // "inputs" and "eval" together: an error naming them.
  spec["models"][0]["inputs"] = fixture_->dataset_dir;
  auto both = harness::ParseSpec(spec.dump(), *dir_ + "/spec.json");
  ASSERT_FALSE(both);
  EXPECT_NE(both.message().find("both \"inputs\" and \"eval\""), std::string::npos)
      << both.message();
}

TEST_F(EvalSpecTest, BadInputNamesTheFileAndEntry) {
  struct Case {
    json eval;
    std::string says;
  };
  const std::string missing = Write("missing.csv", "image,label\n1/000.png,1\nnope/1.png,3\n");
  const std::string unknown = Write("unknown.csv", "1/000.png,zero\n");
  const std::string empty_labels = Write("empty_labels.txt", "\n\n");
  const std::string big = Write("big.csv", "1/000.png,12\n");
  const std::vector<Case> cases = {
      {{{"dataset", missing}}, "missing.csv line 3: image 'nope/1.png' is not a file"},
      {{{"dataset", unknown}, {"labels", fixture_->labels_file}},
       "unknown.csv line 1: label 'zero' is neither a class of the labels file nor a class index "
       "below 10"},
      {{{"dataset", big}, {"labels", fixture_->labels_file}},
       "big.csv line 1: label '12' is neither a class of the labels file nor a class index "
       "below 10"},
      {{{"dataset", unknown}}, "label 'zero' is not a class index, and no labels file"},
      {{{"dataset", fixture_->list_file}, {"labels", empty_labels}}, "lists no class"},
      {{{"dataset", fixture_->dataset_dir}}, "500 images; a job takes at most 256"},
      {{{"dataset", "no/such/place"}}, "is neither a folder nor a list file"},
      {{{"dataset", fixture_->list_file}, {"task", "keypoints"}}, "'keypoints' is not a task"},
      {{{"dataset", fixture_->list_file}, {"task", "detection"}}, "missing \"decoder\""},
      {{{"dataset", fixture_->list_file}, {"limit", 0}}, "limit: expected an integer from 1"},
      {{{"dataset", fixture_->list_file}, {"colour", 1}}, "unknown key 'colour'"},
      {{{"dataset", fixture_->list_file}, {"decoder", {{"top_k", 0}}}}, "top_k: expected"},
      {{{"dataset", fixture_->list_file}, {"preprocess", {{"size", {8, 8}}, {"images", "x"}}}},
       "\"images\" comes from the dataset"},
      {{{"dataset", fixture_->list_file}, {"limit", 5}, {"preprocess", {{"size", {8}}}}},
       ".eval.preprocess"},
  };
  for (const Case& c : cases) {
    auto e = Parse(c.eval);
    ASSERT_FALSE(e) << c.eval.dump();
    EXPECT_EQ(e.error().kind, ErrorKind::kInvalidInput) << c.eval.dump();
    EXPECT_NE(e.message().find(c.says), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("models[0] 'digits.tflite'.eval"), std::string::npos) << e.message();
  }
}

// In a sweep spec, bad labelled data is the model's data error (its jobs
// fail, the spec loads), kept through the stored spec; a malformed "eval"
// object still fails the spec.
TEST_F(EvalSpecTest, SpecKeepsBadDataAsTheModelsDataError) {
  const std::string bad = Write("bad_label.csv", "image,label\n1/000.png,1\n1/000.png,42\n");
  json spec = {{"name", "t"},
               {"models",
                {{{"path", fixture_->float_model},
                  {"eval", {{"dataset", fixture_->list_file}, {"limit", 5}}}},
                 {{"path", fixture_->int8_model},
                  {"eval", {{"dataset", bad}, {"labels", fixture_->labels_file}}}}}},
               {"delegates", {"cpu"}},
               {"devices", {"local"}}};
  for (json& m : spec["models"]) m["eval"]["preprocess"] = kPreprocess;
  auto parsed = harness::ParseSpec(spec.dump(), *dir_ + "/spec.json");
  ASSERT_TRUE(parsed) << parsed.message();
  ASSERT_EQ(parsed->models.size(), 2u);
  EXPECT_TRUE(parsed->models[0].eval.has_value());
  EXPECT_EQ(parsed->models[0].data_error, "");
  const harness::ModelSpec& m = parsed->models[1];
  EXPECT_FALSE(m.eval.has_value());
  EXPECT_TRUE(m.inputs.empty());
  EXPECT_EQ(m.data_error,
            "models[1] 'digits_int8.tflite'.eval.dataset: bad_label.csv line 3: label '42' is "
            "neither a class of the labels file nor a class index below 10");
  auto again = harness::ParseSpec(parsed->ToJson(), "/spec.json");
  ASSERT_TRUE(again) << again.message();
  EXPECT_EQ(again->models[1].data_error, m.data_error);
  EXPECT_EQ(again->models[0].eval->dataset_id, parsed->models[0].eval->dataset_id);
  // The object itself wrong: the spec fails, whatever the data.
  spec["models"][1]["eval"]["colour"] = 1;
  auto malformed = harness::ParseSpec(spec.dump(), *dir_ + "/spec.json");
  ASSERT_FALSE(malformed);
  EXPECT_NE(malformed.message().find("unknown key 'colour'"), std::string::npos)
      << malformed.message();
  spec["models"][1]["eval"].erase("colour");
  spec["models"][1]["eval"]["limit"] = "ten";
  EXPECT_FALSE(harness::ParseSpec(spec.dump(), *dir_ + "/spec.json"));
}

TEST(TaskAccuracyTest, ScoresTheRunnersTopClassesAgainstTheLabels) {
  EvalSpec e;
  e.labels = {3, 1, 4, 1};
  e.top_k = 3;
  e.offset = 1;  // output index = class + 1
  e.dataset_id = "set@000000000000";
  runner::TaskOutputs out;
  out.k = 3;
  out.output = 0;
  out.sets = {{4, 0, 1}, {5, 6, 2}, {9, 8, 7}, {2, 2, 2}};
  auto t = harness::ScoreTaskOutputs(e, out);
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(t->task, "classification");
  EXPECT_EQ(t->dataset, "set@000000000000");
  EXPECT_EQ(t->images, 4);
  EXPECT_EQ(t->per_image, R"({"ranks":[0,2,3,0]})");
  ASSERT_NE(t->Find("top1"), nullptr);
  EXPECT_DOUBLE_EQ(t->Find("top1")->value, 0.5);
  ASSERT_NE(t->Find("top3"), nullptr);
  EXPECT_DOUBLE_EQ(t->Find("top3")->value, 0.75);
  EXPECT_LE(t->Find("top1")->low, 0.5);
  EXPECT_GE(t->Find("top1")->high, 0.5);
  out.sets.pop_back();
  auto short_sets = harness::ScoreTaskOutputs(e, out);
  ASSERT_FALSE(short_sets);
  EXPECT_EQ(short_sets.message(), "the runner listed 3 input sets for 4 images");
  out.k = 5;
  EXPECT_FALSE(harness::ScoreTaskOutputs(e, out));
}

}  // namespace
}  // namespace dfarm::testing
