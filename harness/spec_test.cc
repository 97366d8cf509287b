#include "harness/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness/test_util.h"

namespace dfarm::harness {
namespace {

using ::testing::HasSubstr;

class SpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("models/a.tflite", "model a");
    dir_.Write("models/b.tflite", "model b");
  }
  // Writes the spec as specs/q.json and parses it.
  Result<SweepSpec> Parse(const std::string& text) {
    return LoadSpec(dir_.Write("specs/q.json", text));
  }
  std::string Error(const std::string& text) {
    auto r = Parse(text);
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : r.message();
  }
  TempDir dir_;
};

TEST_F(SpecTest, DefaultsAndRelativePaths) {
  auto spec = Parse(R"({"models":["../models/a.tflite"]})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->name, "q");
  ASSERT_EQ(spec->models.size(), 1u);
  EXPECT_EQ(spec->models[0].path, (dir_.path() / "models/a.tflite").string());
  EXPECT_EQ(spec->models[0].file, "a.tflite");
  ASSERT_EQ(spec->delegates.size(), 1u);
  EXPECT_EQ(spec->delegates[0].name, "cpu");
  EXPECT_EQ(spec->devices, std::vector<std::string>{"local"});
  EXPECT_EQ(spec->benchmark.warmup_runs, 1u);
  EXPECT_EQ(spec->benchmark.num_runs, 50u);
  EXPECT_EQ(spec->benchmark.num_threads, 1u);
  EXPECT_EQ(spec->benchmark.timeout_s, 120u);
}

TEST_F(SpecTest, FullSpec) {
  std::string abs_b = (dir_.path() / "models/b.tflite").string();
  auto spec = Parse(R"({"name":"quickstart","models":["../models/a.tflite",")" + abs_b +
                    R"("],
      "delegates":[{"name":"cpu"},{"name":"xnnpack","options":{"threads":4,"fp16":true,"b":"x"}}],
      "devices":["local","tcp://127.0.0.1:7000"],
      "benchmark":{"warmup_runs":2,"num_runs":20,"num_threads":2,"timeout_s":30}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->name, "quickstart");
  EXPECT_EQ(spec->models[1].path, abs_b);
  ASSERT_EQ(spec->delegates.size(), 2u);
  EXPECT_EQ(spec->delegates[1].name, "xnnpack");  // unknown delegates pass parsing
  EXPECT_EQ(spec->delegates[1].OptionsString(), "b:x;fp16:true;threads:4");
  EXPECT_EQ(spec->devices.size(), 2u);
  EXPECT_EQ(spec->benchmark.warmup_runs, 2u);
  EXPECT_EQ(spec->benchmark.num_runs, 20u);
  EXPECT_EQ(spec->benchmark.num_threads, 2u);
  EXPECT_EQ(spec->benchmark.timeout_s, 30u);

  auto doc = nlohmann::json::parse(spec->ToJson());
  EXPECT_EQ(doc["models"][0], spec->models[0].path);
  EXPECT_EQ(doc["benchmark"]["num_runs"], 20);
  EXPECT_EQ(doc["delegates"][1]["options"]["threads"], "4");
}

TEST_F(SpecTest, UnknownKeys) {
  EXPECT_EQ(Error(R"({"modles":["../models/a.tflite"]})"),
            "spec '" + (dir_.path() / "specs/q.json").string() +
                "': unknown key 'modles' at top level (expected name, models, delegates, "
                "devices, benchmark)");
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"runs":3}})"),
              HasSubstr("unknown key 'runs' in benchmark"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","opts":{}}]})"),
              HasSubstr("unknown key 'opts' in delegates[0]"));
}

TEST_F(SpecTest, MissingModels) {
  EXPECT_THAT(Error(R"({"name":"x"})"), HasSubstr("missing key 'models'"));
  EXPECT_THAT(Error(R"({"models":[]})"), HasSubstr("models: is empty"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite","../x.tflite"]})"),
              HasSubstr("models[1]: file '../x.tflite' does not exist"));
  EXPECT_THAT(Error(R"({"models":["../models"]})"), HasSubstr("is not a regular file"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite","../models/./a.tflite"]})"),
              HasSubstr("models[1]: '../models/./a.tflite' is the same file as models[0]"));
}

TEST_F(SpecTest, BadTypes) {
  EXPECT_THAT(Error(R"([1,2])"), HasSubstr("expected a JSON object, got array"));
  EXPECT_THAT(Error(R"({"models":"a.tflite"})"),
              HasSubstr("models: expected an array of paths, got string"));
  EXPECT_THAT(Error(R"({"models":[3]})"),
              HasSubstr("models[0]: expected a path string, got an integer"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"name":5})"),
              HasSubstr("name: expected a string"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"num_runs":"5"}})"),
              HasSubstr("benchmark.num_runs: expected an integer, got string"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"num_runs":2.5}})"),
              HasSubstr("benchmark.num_runs: expected an integer, got a number"));
  EXPECT_THAT(
      Error(
          R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k":[1]}}]})"),
      HasSubstr("delegates[0].options.k: expected a string, number or boolean, got array"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"devices":[1]})"),
              HasSubstr("devices[0]: expected a string"));
  EXPECT_THAT(Error(R"({"models":[)"), HasSubstr("invalid JSON"));
}

TEST_F(SpecTest, Ranges) {
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"num_runs":0}})"),
              HasSubstr("benchmark.num_runs: 0 is out of range [1, 100000]"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"warmup_runs":-1}})"),
              HasSubstr("benchmark.warmup_runs: -1 is out of range"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"num_threads":1000}})"),
              HasSubstr("benchmark.num_threads: 1000 is out of range [1, 256]"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"timeout_s":99999999999}})"),
              HasSubstr("benchmark.timeout_s"));
}

TEST_F(SpecTest, DevicesAndDelegates) {
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"devices":["phone"]})"),
              HasSubstr("devices[0]: unknown device 'phone'"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"devices":["tcp://h:99999"]})"),
              HasSubstr("bad port"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"devices":["local","local"]})"),
              HasSubstr("devices[1]: duplicate device 'local'"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"delegates":[{"options":{}}]})"),
              HasSubstr("delegates[0]: missing key 'name'"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"delegates":["cpu","cpu"]})"),
              HasSubstr("delegates[1]: duplicate delegate configuration"));
  EXPECT_THAT(
      Error(
          R"({"models":["../models/a.tflite"],"delegates":[{"name":"x","options":{"a;b":"1"}}]})"),
      HasSubstr("option names must be non-empty"));
}

TEST_F(SpecTest, UnreadableFile) {
  auto r = LoadSpec((dir_.path() / "nope.json").string());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("nope.json': cannot read the file"));
}

}  // namespace
}  // namespace dfarm::harness
