#include "harness/spec/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
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
  EXPECT_EQ(spec->benchmark.accuracy_reference, "cpu");
}

TEST_F(SpecTest, FullSpec) {
  std::string abs_b = (dir_.path() / "models/b.tflite").string();
  auto spec = Parse(R"({"name":"quickstart","models":["../models/a.tflite",")" + abs_b +
                    R"("],
      "delegates":[{"name":"cpu"},{"name":"xnnpack","options":{"threads":4,"fp16":true,"b":"x"}}],
      "devices":["local","tcp://127.0.0.1:7000"],
      "benchmark":{"warmup_runs":2,"num_runs":20,"num_threads":2,"timeout_s":30,
                   "accuracy_reference":"none"}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->name, "quickstart");
  EXPECT_EQ(spec->models[1].path, abs_b);
  ASSERT_EQ(spec->delegates.size(), 2u);
  EXPECT_EQ(spec->delegates[1].name, "xnnpack");  // built-in, whether or not this build has it
  EXPECT_EQ(spec->delegates[1].OptionsString(), "b:x;fp16:true;threads:4");
  EXPECT_EQ(spec->devices.size(), 2u);
  EXPECT_EQ(spec->benchmark.warmup_runs, 2u);
  EXPECT_EQ(spec->benchmark.num_runs, 20u);
  EXPECT_EQ(spec->benchmark.num_threads, 2u);
  EXPECT_EQ(spec->benchmark.timeout_s, 30u);
  EXPECT_EQ(spec->benchmark.accuracy_reference, "none");

  auto doc = nlohmann::json::parse(spec->ToJson());
  EXPECT_EQ(doc["models"][0], spec->models[0].path);
  EXPECT_EQ(doc["benchmark"]["num_runs"], 20);
  EXPECT_EQ(doc["delegates"][1]["options"]["threads"], "4");
}

TEST_F(SpecTest, UnknownKeys) {
  EXPECT_EQ(Error(R"({"modles":["../models/a.tflite"]})"),
            "spec '" + (dir_.path() / "specs/q.json").string() +
                "': unknown key 'modles' at top level (expected name, models, delegates, "
                "devices, device_tags, device_classes, runners, pairing, benchmark, scheduler, "
                "cooldown, farm)");
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"runs":3}})"),
              HasSubstr("unknown key 'runs' in benchmark"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","opts":{}}]})"),
              HasSubstr("unknown key 'opts' in delegates[0]"));
}

// "farm": a farm run's priority and unserved timeout, defaults 5 and 900, kept by ToJson;
// out of range names the key.
TEST_F(SpecTest, FarmPriorityAndUnservedTimeout) {
  auto plain = Parse(R"({"models":["../models/a.tflite"]})");
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_EQ(plain->farm.priority, 5u);
  EXPECT_EQ(plain->farm.unserved_timeout_s, 900u);
  auto spec =
      Parse(R"({"models":["../models/a.tflite"],"farm":{"priority":9,"unserved_timeout_s":0}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->farm.priority, 9u);
  EXPECT_EQ(spec->farm.unserved_timeout_s, 0u);
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->farm.priority, 9u);
  EXPECT_EQ(again->farm.unserved_timeout_s, 0u);
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"farm":{"priority":10}})"),
              HasSubstr("farm.priority: 10 is out of range [0, 9]"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"farm":{"priority":-1}})"),
              HasSubstr("farm.priority: -1 is out of range [0, 9]"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"farm":{"unserved_timeout_s":604801}})"),
              HasSubstr("farm.unserved_timeout_s: 604801 is out of range [0, 604800]"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"farm":{"prio":1}})"),
              HasSubstr("unknown key 'prio' in farm"));
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
  EXPECT_THAT(
      Error(R"({"models":["../models/a.tflite"],"benchmark":{"accuracy_reference":"gpu"}})"),
      HasSubstr("benchmark.accuracy_reference: expected \"cpu\" or \"none\", got \"gpu\""));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"num_runs":2.5}})"),
              HasSubstr("benchmark.num_runs: expected an integer, got a number"));
  EXPECT_THAT(
      Error(R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k":{}}}]})"),
      HasSubstr("delegates[0].options.k: expected a string, number, boolean or a list of them, "
                "got object"));
  EXPECT_THAT(
      Error(
          R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k":[[1]]}}]})"),
      HasSubstr("delegates[0].options.k[0]: expected a string, number, boolean"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"devices":[1]})"),
              HasSubstr("devices[0]: expected a device URI string, a device object "
                        "{\"uri\":...,\"token_file\":...} or a selector object"));
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

// A number is refused as written, also one that does not fit int64
// (it was read as -1).
TEST_F(SpecTest, OutOfRangeNumbersAreNamedAsWritten) {
  EXPECT_THAT(
      Error(R"({"models":["../models/a.tflite"],"benchmark":{"num_runs":18446744073709551615}})"),
      HasSubstr("benchmark.num_runs: 18446744073709551615 is out of range [1, 100000]"));
  EXPECT_THAT(
      Error(R"({"models":["../models/a.tflite"],"scheduler":{"retries":9223372036854775808}})"),
      HasSubstr("scheduler.retries: 9223372036854775808 is out of range [0, 100]"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"num_threads":[1,
                       18446744073709551615]}})"),
              HasSubstr("benchmark.num_threads[1]: 18446744073709551615 is out of range [1, 256]"));
}

// What an agent would refuse (agent/protocol/job_limits.h) is a spec error
// naming the field, never a job that ends infra and quarantines the device.
TEST_F(SpecTest, RefusesWhatTheAgentWouldRefuse) {
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"delegates":["bad/1"]})"),
              HasSubstr("delegates[0]: unknown delegate 'bad/1'"));
  EXPECT_THAT(
      Error(
          R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k":"a\u001b[2Jb"}}]})"),
      HasSubstr("delegates[0].options.k: option values must not contain control characters "
                "(byte 0x1b at offset 1)"));
  EXPECT_THAT(
      Error(
          R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k":["1","2\n"]}}]})"),
      HasSubstr("delegates[0].options.k[1]: option values must not contain control characters "
                "(byte 0x0a at offset 1)"));
  EXPECT_THAT(
      Error(
          R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k\t":"1"}}]})"),
      HasSubstr("delegates[0].options.k\\x09: option names must not contain control characters"));
  const std::string big(5000, 'v');
  EXPECT_THAT(
      Error(R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k":")" +
            big + R"("}}]})"),
      HasSubstr("delegates[0].options: 'k:vvvv"));
  EXPECT_THAT(
      Error(R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k":")" +
            big + R"("}}]})"),
      HasSubstr("is 5002 bytes, more than the agent takes (4096)"));
  // At the limit it parses.
  auto spec =
      Parse(R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k":")" +
            std::string(4094, 'v') + R"("}}]})");
  EXPECT_TRUE(spec.ok()) << spec.message();
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

TEST_F(SpecTest, UnknownDelegateNamesAreErrors) {
  EXPECT_EQ(Error(R"({"models":["../models/a.tflite"],"delegates":["cpu",{"name":"xnnpak"}]})"),
            "spec '" + (dir_.path() / "specs/q.json").string() +
                "': delegates[1].name: unknown delegate 'xnnpak'; known: cpu, xnnpack, gpu, "
                "external (and nnapi, hexagon for a benchmark_model or inference_diff runner)");
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"delegates":["nnapi"]})"),
              HasSubstr("delegates[0]: unknown delegate 'nnapi'; known: cpu, xnnpack, gpu"));
  // gpu is ours (delegates/gpu), with or without a tool runner.
  EXPECT_TRUE(Parse(R"({"models":["../models/a.tflite"],"delegates":["gpu"]})").ok());
  // The first unknown name is reported, after the entries' own errors.
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"delegates":["a","b"]})"),
              HasSubstr("delegates[0]: unknown delegate 'a'"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],
                       "delegates":["gpu",{"name":"cpu","options":{"t":[]}}]})"),
              HasSubstr("delegates[1].options.t: is an empty list"));

  // Every built-in name parses; a plugin is "external" with a path.
  dir_.Write("libplugin.so", "elf");
  auto spec = Parse(R"({"models":["../models/a.tflite"],"delegates":["cpu","xnnpack",
      {"name":"external","options":{"path":"../libplugin.so"}}]})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  ASSERT_EQ(spec->delegates.size(), 3u);
  EXPECT_EQ(spec->delegates[2].name, "external");
  EXPECT_EQ(spec->delegates[2].PluginPath(), (dir_.path() / "libplugin.so").string());
}

TEST_F(SpecTest, UnreadableFile) {
  auto r = LoadSpec((dir_.path() / "nope.json").string());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("nope.json': cannot read the file"));
}

TEST_F(SpecTest, OptionListsExpand) {
  auto spec = Parse(R"({"models":["../models/a.tflite"],
      "delegates":["cpu",{"name":"xnnpack",
                          "options":{"threads":[1,2],"fp16":[true,false],"c":"y"}}],
      "benchmark":{"num_threads":[1,4]}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  ASSERT_EQ(spec->delegates.size(), 5u);
  EXPECT_EQ(spec->delegates[0].name, "cpu");
  // The last listed key varies fastest; keys are sorted (c, fp16, threads).
  EXPECT_EQ(spec->delegates[1].OptionsString(), "c:y;fp16:true;threads:1");
  EXPECT_EQ(spec->delegates[2].OptionsString(), "c:y;fp16:true;threads:2");
  EXPECT_EQ(spec->delegates[3].OptionsString(), "c:y;fp16:false;threads:1");
  EXPECT_EQ(spec->delegates[4].OptionsString(), "c:y;fp16:false;threads:2");
  EXPECT_EQ(spec->num_threads, (std::vector<uint32_t>{1, 4}));

  // The stored spec parses back to the same configurations.
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  ASSERT_EQ(again->delegates.size(), 5u);
  EXPECT_EQ(again->delegates[4].OptionsString(), "c:y;fp16:false;threads:2");
  EXPECT_EQ(again->num_threads, spec->num_threads);

  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],
                       "delegates":[{"name":"x","options":{"t":[]}}]})"),
              HasSubstr("delegates[0].options.t: is an empty list"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],
                       "delegates":[{"name":"x","options":{"t":[1,1]}}]})"),
              HasSubstr("delegates[0].options.t[1]: duplicate value '1'"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],
                       "delegates":[{"name":"x","options":{"t":[1,2]}},
                                    {"name":"x","options":{"t":2}}]})"),
              HasSubstr("delegates[1]: duplicate delegate configuration 'x(t:2)'"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"num_threads":[1,0]}})"),
              HasSubstr("benchmark.num_threads[1]: 0 is out of range [1, 256]"));
}

TEST_F(SpecTest, SchedulerAndDevices) {
  auto spec = Parse(R"({"models":["../models/a.tflite"],"devices":["local","local:b"],
      "scheduler":{"retries":0,"backoff_ms":10,"quarantine_after":1,"failover":"same_abi"}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->scheduler.retries, 0u);
  EXPECT_EQ(spec->scheduler.backoff_ms, 10u);
  EXPECT_EQ(spec->scheduler.quarantine_after, 1u);
  EXPECT_EQ(spec->scheduler.failover, "same_abi");
  EXPECT_EQ(spec->devices[1], "local:b");
  auto defaults = Parse(R"({"models":["../models/a.tflite"]})");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->scheduler.retries, 2u);
  EXPECT_EQ(defaults->scheduler.quarantine_after, 3u);
  EXPECT_EQ(defaults->scheduler.failover, "none");
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"scheduler":{"failover":"any"}})"),
              HasSubstr("scheduler.failover: expected \"none\" or \"same_abi\", got 'any'"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"scheduler":{"quarantine_after":0}})"),
              HasSubstr("scheduler.quarantine_after: 0 is out of range"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"scheduler":{"retry":1}})"),
              HasSubstr("unknown key 'retry' in scheduler"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"devices":["local:a b"]})"),
              HasSubstr("a local device's name must be"));
}

TEST_F(SpecTest, PluginPathsResolveAgainstTheSpecFolder) {
  dir_.Write("libmy_delegate.so", "elf");
  dir_.Write("plugins/libb.so", "elf");
  auto spec = Parse(R"({"models":["../models/a.tflite"],
      "delegates":[{"name":"external","options":{"path":"../libmy_delegate.so","k":"v"}},
                   {"name":"external","options":{"path":["../plugins/libb.so",
                                                         "../libmy_delegate.so"]}}]})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  ASSERT_EQ(spec->delegates.size(), 3u);
  const std::string a = (dir_.path() / "libmy_delegate.so").string();
  const std::string b = (dir_.path() / "plugins/libb.so").string();
  EXPECT_EQ(spec->delegates[0].options.at("path"), a);
  EXPECT_EQ(spec->delegates[0].OptionsString(), "k:v;path:" + a);
  EXPECT_EQ(spec->delegates[1].options.at("path"), b);
  EXPECT_EQ(PluginPaths(*spec), (std::vector<std::string>{a, b}));
  EXPECT_EQ(spec->delegates[0].PluginPath(), a);
  // Users see the file name; the agent gets no path at all.
  EXPECT_EQ(spec->delegates[0].ShownOptionsString(), "k:v;path:libmy_delegate.so");
  EXPECT_EQ(spec->delegates[0].AgentOptionsString(), "k:v");
  EXPECT_EQ(spec->delegates[1].AgentOptionsString(), "");
  EXPECT_EQ(spec->delegates[1].ShownOptionsString(), "path:libb.so");

  // The stored spec (absolute paths) parses to the same.
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->delegates[0].options.at("path"), a);

  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],
      "delegates":[{"name":"external","options":{"path":"../nope.so"}}]})"),
              HasSubstr("delegates[0].options.path: delegate plugin '" +
                        (dir_.path() / "nope.so").string() + "' is not a file"));
  auto plain =
      Parse(R"({"models":["../models/a.tflite"],"delegates":[{"name":"cpu","options":{"k":1}}]})");
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_TRUE(PluginPaths(*plain).empty());
  EXPECT_EQ(plain->delegates[0].PluginPath(), "");
  EXPECT_EQ(plain->delegates[0].ShownOptionsString(), "k:1");
  EXPECT_EQ(plain->delegates[0].AgentOptionsString(), "k:1");
}

TEST_F(SpecTest, RunnersResolveAgainstTheSpecFolder) {
  dir_.Write("builds/x86/dfarm-runner", "x86 runner");
  dir_.Write("builds/arm/dfarm-runner", "arm runner");
  auto spec = Parse(R"({"models":["../models/a.tflite"],
      "runners":[{"name":"main","builds":{"x86_64":"../builds/x86/dfarm-runner",
                                         "arm64-v8a":"../builds/arm/dfarm-runner"}},
                 {"name":"rc-2","builds":{"x86_64":"../builds/x86/dfarm-runner"}}]})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  ASSERT_EQ(spec->runners.size(), 2u);
  EXPECT_EQ(spec->runners[0].name, "main");
  EXPECT_EQ(spec->runners[0].builds.at("x86_64"),
            (dir_.path() / "builds/x86/dfarm-runner").string());
  EXPECT_EQ(spec->runners[0].builds.at("arm64-v8a"),
            (dir_.path() / "builds/arm/dfarm-runner").string());
  EXPECT_EQ(spec->runners[1].name, "rc-2");
  EXPECT_EQ(spec->runners[1].builds.size(), 1u);
  // The stored spec parses back to the same runners (absolute paths).
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  ASSERT_EQ(again->runners.size(), 2u);
  EXPECT_EQ(again->runners[0].builds, spec->runners[0].builds);
  EXPECT_EQ(again->runners[1].name, "rc-2");
}

TEST_F(SpecTest, PairingNamesTheBaselineOfTwoRunners) {
  dir_.Write("builds/a", "runner a");
  dir_.Write("builds/b", "runner b");
  const std::string runners =
      R"("runners":[{"name":"release","builds":{"x86_64":"../builds/a"}},
                   {"name":"rc","builds":{"x86_64":"../builds/b"}}])";
  auto spec = Parse(R"({"models":["../models/a.tflite"],)" + runners +
                    R"(,"pairing":{"baseline_runner":"release"}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_TRUE(spec->pairing.enabled());
  EXPECT_EQ(spec->pairing.baseline_runner, "release");
  // The stored spec keeps it.
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->pairing.baseline_runner, "release");
  EXPECT_TRUE(again->pairing.stepped);
  EXPECT_EQ(spec->ToJson().find("stepped"), std::string::npos);
  // "stepped": false, kept by the stored spec.
  auto jobs = Parse(R"({"models":["../models/a.tflite"],)" + runners +
                    R"(,"pairing":{"baseline_runner":"release","stepped":false}})");
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  EXPECT_FALSE(jobs->pairing.stepped);
  auto stored = ParseSpec(jobs->ToJson(), "stored");
  ASSERT_TRUE(stored.ok()) << stored.message();
  EXPECT_FALSE(stored->pairing.stepped);
  // Without "pairing": not paired, and the stored spec has no key.
  auto plain = Parse(R"({"models":["../models/a.tflite"],)" + runners + "}");
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_FALSE(plain->pairing.enabled());
  EXPECT_EQ(plain->ToJson().find("pairing"), std::string::npos);
}

TEST_F(SpecTest, PairingErrorsNameTheField) {
  dir_.Write("builds/a", "runner a");
  const std::string two = R"("runners":[{"name":"release","builds":{"x86_64":"../builds/a"}},
                                        {"name":"rc","builds":{"x86_64":"../builds/a"}}])";
  const std::string m = R"({"models":["../models/a.tflite"],)";
  EXPECT_THAT(Error(m + two + R"(,"pairing":"release"})"),
              HasSubstr("pairing: expected an object {\"baseline_runner\": NAME}, got string"));
  EXPECT_THAT(Error(m + two + R"(,"pairing":{}})"),
              HasSubstr("pairing: missing key 'baseline_runner'"));
  EXPECT_THAT(Error(m + two + R"(,"pairing":{"baseline_runner":3}})"),
              HasSubstr("pairing.baseline_runner: expected a runner name, got an integer"));
  EXPECT_THAT(Error(m + two + R"(,"pairing":{"baseline_runner":"main"}})"),
              HasSubstr("pairing.baseline_runner: 'main' is not one of the spec's runners "
                        "('release', 'rc')"));
  EXPECT_THAT(Error(m + two + R"(,"pairing":{"baseline_runner":"rc","order":"abba"}})"),
              HasSubstr("unknown key 'order' in pairing (expected baseline_runner, stepped)"));
  EXPECT_THAT(Error(m + two + R"(,"pairing":{"baseline_runner":"rc","stepped":"no"}})"),
              HasSubstr("pairing.stepped: expected true or false, got string"));
  EXPECT_THAT(Error(m + R"("pairing":{"baseline_runner":"rc"}})"),
              HasSubstr("pairing: pairs exactly two runners (a baseline and a candidate); the "
                        "spec has 0 in 'runners'"));
  const std::string three = R"("runners":[{"name":"a","builds":{"x86_64":"../builds/a"}},
      {"name":"b","builds":{"x86_64":"../builds/a"}},{"name":"c","builds":{"x86_64":"../builds/a"}}])";
  EXPECT_THAT(Error(m + three + R"(,"pairing":{"baseline_runner":"a"}})"),
              HasSubstr("the spec has 3 in 'runners'"));
}

TEST_F(SpecTest, RunnerKindsAndDefaultBuilds) {
  dir_.Write("builds/benchmark_model", "a tool");
  auto spec = Parse(R"({"models":["../models/a.tflite"],"delegates":["cpu","gpu","nnapi"],
      "runners":[{"name":"ours"},{"name":"tflite","kind":"tflite"},
                 {"name":"bm","kind":"benchmark_model",
                  "builds":{"x86_64":"../builds/benchmark_model"}}]})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  ASSERT_EQ(spec->runners.size(), 3u);
  EXPECT_EQ(spec->runners[0].kind, "dfarm");
  EXPECT_TRUE(spec->runners[0].builds.empty());  // the kind's defaults, filled in by the sweep
  EXPECT_EQ(spec->runners[1].kind, "tflite");
  EXPECT_TRUE(spec->runners[1].builds.empty());
  EXPECT_EQ(spec->runners[2].kind, "benchmark_model");
  EXPECT_EQ(spec->runners[2].builds.size(), 1u);
  ASSERT_EQ(spec->delegates.size(), 3u);  // gpu and nnapi: a tool runner has flags for them
  // The stored spec keeps the kinds and leaves default builds out.
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->runners[1].kind, "tflite");
  EXPECT_TRUE(again->runners[1].builds.empty());
  EXPECT_EQ(again->runners[2].builds, spec->runners[2].builds);
  // Without a tool runner, nnapi is not a delegate of ours.
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"delegates":["nnapi"],
      "runners":[{"name":"tflite","kind":"tflite"}]})"),
              HasSubstr("unknown delegate 'nnapi'"));
}

TEST_F(SpecTest, RunnerErrorsNameTheField) {
  dir_.Write("builds/dfarm-runner", "runner");
  const std::string m = R"({"models":["../models/a.tflite"],"runners":)";
  EXPECT_THAT(Error(m + R"([]})"), HasSubstr("runners: is empty"));
  EXPECT_THAT(Error(m + R"({}})"), HasSubstr("runners: expected an array, got object"));
  EXPECT_THAT(Error(m + R"([{"builds":{"x86_64":"../builds/dfarm-runner"}}]})"),
              HasSubstr("runners[0]: missing key 'name'"));
  EXPECT_THAT(Error(m + R"([{"name":"a b","builds":{"x86_64":"../builds/dfarm-runner"}}]})"),
              HasSubstr("runners[0].name: runner name 'a b' must be [A-Za-z0-9_.-]{1,64}"));
  // Kinds dfarm and tflite have default builds; a tool kind must name its binary.
  EXPECT_THAT(Error(m + R"([{"name":"a","kind":"benchmark_model"}]})"),
              HasSubstr("runners[0]: missing key 'builds': a benchmark_model runner is a binary "
                        "you bring"));
  EXPECT_THAT(Error(m + R"([{"name":"a","kind":"tf"}]})"),
              HasSubstr("runners[0].kind: unknown runner kind 'tf' (known: dfarm, tflite, "
                        "benchmark_model, inference_diff)"));
  EXPECT_THAT(Error(m + R"([{"name":"a","kind":1}]})"),
              HasSubstr("runners[0].kind: expected a string, got an integer"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"delegates":["hexagon"]})"),
              HasSubstr("unknown delegate 'hexagon'"));
  EXPECT_THAT(Error(m + R"([{"name":"a","builds":{}}]})"),
              HasSubstr("runners[0].builds: is empty"));
  EXPECT_THAT(Error(m + R"([{"name":"a","builds":{"x86_64":"../builds/nope"}}]})"),
              HasSubstr("runners[0].builds.x86_64: runner build '" +
                        (dir_.path() / "builds/nope").string() + "' is not a file"));
  EXPECT_THAT(Error(m + R"([{"name":"a","builds":{"x86_64":3}}]})"),
              HasSubstr("runners[0].builds.x86_64: expected a path string, got an integer"));
  EXPECT_THAT(Error(m + R"([{"name":"a","builds":{"x86_64":"../builds/dfarm-runner"}},
                             {"name":"a","builds":{"x86_64":"../builds/dfarm-runner"}}]})"),
              HasSubstr("runners[1].name: duplicate runner name 'a'"));
  EXPECT_THAT(
      Error(m + R"([{"name":"a","path":"x","builds":{"x86_64":"../builds/dfarm-runner"}}]})"),
      HasSubstr("unknown key 'path' in runners[0]"));
}

TEST_F(SpecTest, DeviceSelectorsAndTags) {
  auto spec = Parse(R"({"models":["../models/a.tflite"],
      "devices":["local",{"abi":"arm64-v8a"},{"tags":["fast","big"]},"qemu-arm64"],
      "device_tags":{"tcp://127.0.0.1:7000":["fast","big"],"local":["slow"]}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->devices, (std::vector<std::string>{"local", "qemu-arm64"}));
  ASSERT_EQ(spec->device_selectors.size(), 2u);
  EXPECT_EQ(spec->device_selectors[0].abi, "arm64-v8a");
  EXPECT_TRUE(spec->device_selectors[0].tags.empty());
  EXPECT_EQ(spec->device_selectors[1].abi, "");
  EXPECT_EQ(spec->device_selectors[1].tags, (std::vector<std::string>{"fast", "big"}));
  EXPECT_EQ(spec->device_tags.at("tcp://127.0.0.1:7000"),
            (std::vector<std::string>{"fast", "big"}));
  EXPECT_EQ(spec->device_tags.at("local"), std::vector<std::string>{"slow"});
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->devices, spec->devices);
  ASSERT_EQ(again->device_selectors.size(), 2u);
  EXPECT_EQ(again->device_selectors[1].tags, spec->device_selectors[1].tags);
  EXPECT_EQ(again->device_tags, spec->device_tags);

  // Selectors may also ask for an OS, a SoC and memory; they survive ToJson.
  auto more =
      Parse(R"({"models":["../models/a.tflite"],"devices":["any",{"os":"android","soc":"sm8550",)"
            R"("min_memory_mb":4096}]})");
  ASSERT_TRUE(more.ok()) << more.message();
  EXPECT_EQ(more->devices, std::vector<std::string>{"any"});
  ASSERT_EQ(more->device_selectors.size(), 1u);
  EXPECT_EQ(more->device_selectors[0].os, "android");
  EXPECT_EQ(more->device_selectors[0].soc, "sm8550");
  EXPECT_EQ(more->device_selectors[0].min_memory_mb, 4096);
  auto more_again = ParseSpec(more->ToJson(), "stored");
  ASSERT_TRUE(more_again.ok()) << more_again.message();
  EXPECT_EQ(more_again->devices, more->devices);
  EXPECT_EQ(more_again->device_selectors[0].soc, "sm8550");
  EXPECT_EQ(more_again->device_selectors[0].min_memory_mb, 4096);

  // Only selectors: no implicit "local".
  auto only = Parse(R"({"models":["../models/a.tflite"],"devices":[{"abi":"x86_64"}]})");
  ASSERT_TRUE(only.ok()) << only.message();
  EXPECT_TRUE(only->devices.empty());

  const std::string m = R"({"models":["../models/a.tflite"],)";
  EXPECT_THAT(Error(m + R"("devices":[{}]})"),
              HasSubstr("devices[0]: a device selector needs one of \"abi\", \"tags\""));
  EXPECT_THAT(Error(m + R"("devices":[{"cpu":"x"}]})"),
              HasSubstr("unknown key 'cpu' in devices[0] (expected abi, tags, os, soc, "
                        "min_memory_mb)"));
  EXPECT_THAT(Error(m + R"("devices":[{"os":""}]})"),
              HasSubstr("devices[0].os: '' must be a non-empty text without ';' or '='"));
  EXPECT_THAT(Error(m + R"("devices":[{"soc":"a;b"}]})"),
              HasSubstr("devices[0].soc: 'a;b' must be a non-empty text"));
  EXPECT_THAT(Error(m + R"("devices":[{"min_memory_mb":0}]})"),
              HasSubstr("devices[0].min_memory_mb: expected a whole number of MiB > 0"));
  EXPECT_THAT(Error(m + R"("devices":[{"abi":7}]})"),
              HasSubstr("devices[0].abi: expected a string, got an integer"));
  EXPECT_THAT(Error(m + R"("devices":["local",{"tags":[]}]})"),
              HasSubstr("devices[1].tags: is an empty list of tags"));
  EXPECT_THAT(Error(m + R"("devices":[{"tags":["a","a"]}]})"),
              HasSubstr("devices[0].tags[1]: duplicate tag 'a'"));
  EXPECT_THAT(Error(m + R"("device_tags":{"phone":["a"]}})"),
              HasSubstr("device_tags.phone: unknown device 'phone'"));
  EXPECT_THAT(Error(m + R"("device_tags":{"local":"fast"}})"),
              HasSubstr("device_tags.local: expected an array of tag strings, got string"));
  EXPECT_THAT(Error(m + R"("device_tags":{"local":["no spaces"]}})"),
              HasSubstr("device_tags.local[0]: tag 'no spaces' must be [A-Za-z0-9_.-]{1,64}"));
}

// "device_classes": class names to device-name globs; they survive ToJson.
TEST_F(SpecTest, DeviceClasses) {
  auto spec = Parse(R"({"models":["../models/a.tflite"],"devices":["any"],
      "device_classes":{"pixel7":["adb:ABC*","tcp://lab-p7-*"],"lab":["tcp://*"]}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->device_classes.at("pixel7"),
            (std::vector<std::string>{"adb:ABC*", "tcp://lab-p7-*"}));
  EXPECT_EQ(spec->device_classes.at("lab"), std::vector<std::string>{"tcp://*"});
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->device_classes, spec->device_classes);
  auto none = Parse(R"({"models":["../models/a.tflite"]})");
  ASSERT_TRUE(none.ok()) << none.message();
  EXPECT_TRUE(none->device_classes.empty());
  EXPECT_EQ(none->ToJson().find("device_classes"), std::string::npos);

  const std::string m = R"({"models":["../models/a.tflite"],)";
  EXPECT_THAT(Error(m + R"("device_classes":["adb:*"]})"),
              HasSubstr("device_classes: expected an object {\"CLASS\":[\"device-name glob\","));
  EXPECT_THAT(Error(m + R"("device_classes":{"pixel 7":["adb:*"]}})"),
              HasSubstr("device_classes.pixel 7: a class name must be [A-Za-z0-9_.-]{1,64}"));
  EXPECT_THAT(Error(m + R"("device_classes":{"p7":[]}})"),
              HasSubstr("device_classes.p7: is an empty list of globs"));
  EXPECT_THAT(Error(m + R"("device_classes":{"p7":"adb:*"}})"),
              HasSubstr("device_classes.p7: expected an array of device-name globs, got string"));
  EXPECT_THAT(Error(m + R"("device_classes":{"p7":["adb:*",""]}})"),
              HasSubstr("device_classes.p7[1]: expected a non-empty glob string"));
  EXPECT_THAT(Error(m + R"("device_classes":{"p7":[7]}})"),
              HasSubstr("device_classes.p7[0]: expected a non-empty glob string ('*', '?' over "
                        "the device name), got 7"));
}

// {"uri":..., "token_file":...}: the file resolves against the spec's folder
// and is checked with the agent's rules (ReadTokenFile) when the spec is read.
TEST_F(SpecTest, DeviceObjectsWithTokenFiles) {
  namespace fs = std::filesystem;
  const std::string token(64, 'a');
  const std::string lab = dir_.Write("specs/lab.token", token + "\n");
  fs::permissions(lab, fs::perms::owner_read | fs::perms::owner_write);
  auto spec = Parse(R"({"models":["../models/a.tflite"],
      "devices":[{"uri":"tcp://10.0.0.7:7000","token_file":"lab.token"},
                 {"uri":"tcp://10.0.0.8:7000"},"local"]})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->devices,
            (std::vector<std::string>{"tcp://10.0.0.7:7000", "tcp://10.0.0.8:7000", "local"}));
  ASSERT_EQ(spec->device_token_files.size(), 1u);
  EXPECT_EQ(spec->device_token_files.at("tcp://10.0.0.7:7000"), lab);
  // Stored with the run as an absolute path, so --resume finds it again.
  auto doc = nlohmann::json::parse(spec->ToJson());
  EXPECT_EQ(doc["devices"][0]["uri"], "tcp://10.0.0.7:7000");
  EXPECT_EQ(doc["devices"][0]["token_file"], lab);
  EXPECT_EQ(doc["devices"][1], "tcp://10.0.0.8:7000");
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->devices, spec->devices);
  EXPECT_EQ(again->device_token_files, spec->device_token_files);

  const std::string m = R"({"models":["../models/a.tflite"],)";
  EXPECT_THAT(Error(m + R"("devices":[{"uri":"tcp://h:1","token":"x"}]})"),
              HasSubstr("unknown key 'token' in devices[0] (expected uri, token_file)"));
  EXPECT_THAT(Error(m + R"("devices":[{"uri":"tcp://h:1","abi":"x86_64"}]})"),
              HasSubstr("unknown key 'abi' in devices[0] (expected uri, token_file)"));
  EXPECT_THAT(Error(m + R"("devices":[{"uri":7}]})"),
              HasSubstr("devices[0].uri: expected a device URI string, got an integer"));
  EXPECT_THAT(Error(m + R"("devices":[{"uri":"phone"}]})"),
              HasSubstr("devices[0].uri: unknown device 'phone'"));
  EXPECT_THAT(Error(m + R"("devices":["tcp://h:1",{"uri":"tcp://h:1"}]})"),
              HasSubstr("devices[1]: duplicate device 'tcp://h:1'"));
  EXPECT_THAT(Error(m + R"("devices":[{"uri":"tcp://h:1","token_file":""}]})"),
              HasSubstr("devices[0].token_file: expected a file name"));
  EXPECT_THAT(Error(m + R"("devices":[{"uri":"local","token_file":"lab.token"}]})"),
              HasSubstr("devices[0].token_file: a token file applies to tcp:// devices only"));
  // A missing file, a loosely protected one (named, with the fix), a short one.
  EXPECT_THAT(Error(m + R"("devices":[{"uri":"tcp://h:1","token_file":"none.token"}]})"),
              HasSubstr("devices[0].token_file: cannot read token file '" +
                        (dir_.path() / "specs/none.token").string() + "'"));
  const std::string loose = dir_.Write("specs/loose.token", token);
  fs::permissions(loose, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                             fs::perms::others_read);
  EXPECT_THAT(Error(m + R"("devices":[{"uri":"tcp://h:1","token_file":"loose.token"}]})"),
              HasSubstr("devices[0].token_file: token file '" + loose +
                        "' is readable by others (mode 0644); chmod 600 " + loose));
  const std::string short_token = dir_.Write("specs/short.token", "abc");
  fs::permissions(short_token, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_THAT(Error(m + R"("devices":[{"uri":"tcp://h:1","token_file":"short.token"}]})"),
              HasSubstr("a token needs at least 32"));
}

TEST_F(SpecTest, Cooldown) {
  auto plain = Parse(R"({"models":["../models/a.tflite"]})");
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_EQ(plain->scheduler.cooldown.pause_ms, 0u);
  EXPECT_EQ(plain->scheduler.cooldown.max_temp_c, 0.0);
  EXPECT_EQ(plain->scheduler.cooldown.max_wait_s, 300u);

  auto spec = Parse(R"({"models":["../models/a.tflite"],
      "cooldown":{"pause_ms":250,"max_temp_c":42.5,"max_wait_s":60}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->scheduler.cooldown.pause_ms, 250u);
  EXPECT_EQ(spec->scheduler.cooldown.max_temp_c, 42.5);
  EXPECT_EQ(spec->scheduler.cooldown.max_wait_s, 60u);
  auto doc = nlohmann::json::parse(spec->ToJson());
  EXPECT_EQ(doc["cooldown"]["pause_ms"], 250);
  EXPECT_EQ(doc["cooldown"]["max_temp_c"], 42.5);
  EXPECT_EQ(doc["cooldown"]["max_wait_s"], 60);
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->scheduler.cooldown.max_temp_c, 42.5);

  const std::string m = R"({"models":["../models/a.tflite"],"cooldown":)";
  EXPECT_THAT(Error(m + R"(5})"), HasSubstr("cooldown: expected an object, got an integer"));
  EXPECT_THAT(Error(m + R"({"pause":1}})"),
              HasSubstr("unknown key 'pause' in cooldown (expected pause_ms, max_temp_c, "
                        "max_wait_s, max_cpu_busy_pct)"));
  EXPECT_THAT(Error(m + R"({"pause_ms":-1}})"),
              HasSubstr("cooldown.pause_ms: -1 is out of range [0, 3600000]"));
  EXPECT_THAT(Error(m + R"({"max_wait_s":100000}})"),
              HasSubstr("cooldown.max_wait_s: 100000 is out of range [0, 86400]"));
  EXPECT_THAT(Error(m + R"({"max_temp_c":"hot"}})"),
              HasSubstr("cooldown.max_temp_c: expected a number, got string"));
  EXPECT_THAT(Error(m + R"({"max_temp_c":151}})"),
              HasSubstr("cooldown.max_temp_c: 151 is out of range [0, 150]"));
  EXPECT_THAT(
      Error(m + R"({"max_cpu_busy_pct":101}})"),
      HasSubstr("cooldown.max_cpu_busy_pct: 101 is out of range [0, 100] (0: no load rule)"));
  auto busy = Parse(m + R"({"max_cpu_busy_pct":30,"max_wait_s":5}})");
  ASSERT_TRUE(busy.ok()) << busy.message();
  EXPECT_EQ(busy->scheduler.cooldown.max_cpu_busy_pct, 30.0);
  auto busy_again = ParseSpec(busy->ToJson(), "stored-busy");
  ASSERT_TRUE(busy_again.ok()) << busy_again.message();
  EXPECT_EQ(busy_again->scheduler.cooldown.max_cpu_busy_pct, 30.0);
}

TEST_F(SpecTest, CpuAffinity) {
  const std::string m = R"({"models":["../models/a.tflite"],"benchmark":{"cpu_affinity":)";
  for (const char* ok : {R"("big")", R"("little")", R"("0-3,6")", R"("2")"}) {
    auto spec = Parse(m + ok + "}}");
    ASSERT_TRUE(spec.ok()) << ok << ": " << spec.message();
    auto again = ParseSpec(spec->ToJson(), "stored-affinity");
    ASSERT_TRUE(again.ok()) << again.message();
    EXPECT_EQ(again->benchmark.cpu_affinity, spec->benchmark.cpu_affinity);
  }
  EXPECT_THAT(Error(m + R"("fast"}})"),
              HasSubstr("benchmark.cpu_affinity: expected \"big\", \"little\" or a CPU list such "
                        "as \"0-3,6\", got \"fast\""));
  EXPECT_THAT(Error(m + R"(3}})"), HasSubstr("benchmark.cpu_affinity"));
  EXPECT_THAT(Error(m + R"("0-"}})"), HasSubstr("benchmark.cpu_affinity"));
}

TEST_F(SpecTest, SustainedSeconds) {
  const std::string m = R"({"models":["../models/a.tflite"],"benchmark":{"sustained_s":)";
  auto spec = Parse(m + "90.5}}");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_DOUBLE_EQ(spec->benchmark.sustained_s, 90.5);
  auto again = ParseSpec(spec->ToJson(), "stored-sustained");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_DOUBLE_EQ(again->benchmark.sustained_s, 90.5);
  EXPECT_DOUBLE_EQ(Parse(R"({"models":["../models/a.tflite"]})")->benchmark.sustained_s, 0);
  EXPECT_THAT(Error(m + "0}}"),
              HasSubstr("benchmark.sustained_s: expected seconds from 0.1 to 43200, got 0"));
  EXPECT_THAT(Error(m + R"("1m"}})"), HasSubstr("benchmark.sustained_s"));
  EXPECT_THAT(Error(m + R"(43200,"timeout_s":86400}})"),
              HasSubstr("a job may take longer than the agent's limit"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"runners":[{"name":"bm",)"
                    R"("kind":"benchmark_model","builds":{"x86_64":"/bin/true"}}],)"
                    R"("benchmark":{"sustained_s":5}})"),
              HasSubstr("which has no sustained mode"));
}

TEST_F(SpecTest, QemuDeviceName) {
  EXPECT_TRUE(CheckDeviceName("qemu-arm64").ok());
  EXPECT_THAT(CheckDeviceName("qemu-arm").message(), HasSubstr("unknown device 'qemu-arm'"));
  EXPECT_EQ(Arm64BuildOf("/x/build/bin/dfarm-runner"), "/x/build/arm64/bin/dfarm-runner");
}

// benchmark.repeats: independent trials of each cell, 1..1000 (default 1);
// benchmark.order_seed seeds their order. Both are stored with the run.
TEST_F(SpecTest, RepeatsAndOrderSeed) {
  auto plain = Parse(R"({"models":["../models/a.tflite"]})");
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_EQ(plain->benchmark.repeats, 1u);
  EXPECT_EQ(plain->benchmark.order_seed, 1u);
  auto spec =
      Parse(R"({"models":["../models/a.tflite"],"benchmark":{"repeats":5,"order_seed":42}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->benchmark.repeats, 5u);
  EXPECT_EQ(spec->benchmark.order_seed, 42u);
  auto doc = nlohmann::json::parse(spec->ToJson());
  EXPECT_EQ(doc["benchmark"]["repeats"], 5);
  EXPECT_EQ(doc["benchmark"]["order_seed"], 42);
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->benchmark.repeats, 5u);
  EXPECT_EQ(again->benchmark.order_seed, 42u);

  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"repeats":0}})"),
              HasSubstr("benchmark.repeats: 0 is out of range [1, 1000]"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"repeats":1001}})"),
              HasSubstr("benchmark.repeats: 1001 is out of range [1, 1000]"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"repeats":2.5}})"),
              HasSubstr("benchmark.repeats: expected an integer"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"repeats":"3"}})"),
              HasSubstr("benchmark.repeats: expected an integer"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"repeats":-2}})"),
              HasSubstr("benchmark.repeats: -2 is out of range"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"order_seed":-1}})"),
              HasSubstr("benchmark.order_seed: -1 is out of range"));
}

// The matrix's size is known from the spec: past kMaxSweepJobs it is refused
// at once, naming the count and the axes that multiply to it.
TEST_F(SpecTest, MatrixPastTheJobLimitIsRefused) {
  std::string message = Error(R"({"models":["../models/a.tflite","../models/b.tflite"],
      "delegates":[{"name":"xnnpack","options":{"threads":[1,2,3,4,5,6,7,8,9,10]}}],
      "benchmark":{"num_threads":[1,2,3,4,5,6,7,8],"repeats":1000}})");
  EXPECT_THAT(message, HasSubstr("spec '"));
  EXPECT_THAT(message, HasSubstr("160000 jobs"));
  EXPECT_THAT(message, HasSubstr("devices 1 x runners 1 x models 2 x delegates 10 x "
                                 "num_threads 8 x repeats 1000"));
  EXPECT_THAT(message, HasSubstr("more than 100000"));
  // Each device selector counts as one device here (the sweep counts again
  // once it has matched them).
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],
      "devices":["local","local:b",{"abi":"x86_64"}],
      "delegates":[{"name":"xnnpack","options":{"threads":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34]}}],
      "benchmark":{"repeats":1000}})"),
              HasSubstr("102000 jobs (devices 3 x runners 1 x models 1 x delegates 34"));
  // At the limit: accepted.
  auto at = Parse(R"({"models":["../models/a.tflite","../models/b.tflite"],
      "delegates":[{"name":"xnnpack","options":{"threads":[1,2,3,4,5]}}],
      "benchmark":{"num_threads":[1,2,3,4,5,6,7,8,9,10],"repeats":1000}})");
  EXPECT_TRUE(at.ok()) << at.message();
}

// Nesting is bounded before parsing; quoted values are cut short.
TEST_F(SpecTest, DeepOrLongDocumentsGiveShortErrors) {
  for (size_t depth : {100000u, 5000u}) {
    std::string deep = R"({"models":)" + std::string(depth, '[') + std::string(depth, ']') + "}";
    std::string message = Error(deep);
    EXPECT_THAT(message, HasSubstr("q.json': nested deeper than 64 levels"));
    EXPECT_LT(message.size(), 300u) << message.substr(0, 300);
  }
  const std::string huge(60000, 'x');
  for (const std::string& text :
       {R"({"models":["../models/a.tflite"],")" + huge + R"(":1})",
        R"({"models":["../models/a.tflite"],"benchmark":{"accuracy_reference":")" + huge + R"("}})",
        R"({"models":["../models/a.tflite"],"benchmark":{"cpu_affinity":")" + huge + R"("}})",
        R"({"models":[")" + huge}) {
    std::string message = Error(text);
    EXPECT_THAT(message, HasSubstr("q.json'"));
    EXPECT_LT(message.size(), 400u) << message.substr(0, 400);
  }
}

// benchmark.profile: a bool (default false), kept in the stored spec only
// when true; refused, naming the field and the runner, with a runner of a
// kind that has no --profile.
TEST_F(SpecTest, Profile) {
  auto plain = Parse(R"({"models":["../models/a.tflite"]})");
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_FALSE(plain->benchmark.profile);
  EXPECT_FALSE(nlohmann::json::parse(plain->ToJson())["benchmark"].contains("profile"));
  auto spec = Parse(
      R"({"models":["../models/a.tflite"],"runners":[{"name":"ours"}],"benchmark":{"profile":true}})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_TRUE(spec->benchmark.profile);
  EXPECT_EQ(nlohmann::json::parse(spec->ToJson())["benchmark"]["profile"], true);
  auto again = ParseSpec(spec->ToJson(), "stored");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_TRUE(again->benchmark.profile);

  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"profile":"yes"}})"),
              HasSubstr("benchmark.profile: expected true or false, got string"));
  EXPECT_THAT(Error(R"({"models":["../models/a.tflite"],"benchmark":{"profile":1}})"),
              HasSubstr("benchmark.profile: expected true or false"));
  EXPECT_THAT(
      Error(R"({"models":["../models/a.tflite"],"benchmark":{"profile":true},
                "runners":[{"name":"ours"},{"name":"tf","kind":"tflite"}]})"),
      HasSubstr("benchmark.profile: runner 'tf' is of kind 'tflite', which cannot profile"));
  auto off = Parse(R"({"models":["../models/a.tflite"],"benchmark":{"profile":false},
                       "runners":[{"name":"tf","kind":"tflite"}]})");
  EXPECT_TRUE(off.ok()) << off.message();
}

TEST_F(SpecTest, ModelsWithInputSets) {
  dir_.Write("specs/sets/one/input_0.bin", "aaaa");
  dir_.Write("specs/sets/two/input_0.bin", "bbbb");
  dir_.Write("specs/img/cat.png", "not decoded at parse time");
  auto spec = Parse(R"({"models":[
      {"path":"../models/a.tflite","inputs":"sets"},
      {"path":"../models/b.tflite","inputs":{"images":"img","size":[224,224],
        "layout":"NCHW","channels":"BGR","mean":[1,2,3],"std":2,"dtype":"float32"}},
      "../models/a2.tflite"]})");
  ASSERT_FALSE(spec.ok());  // a2 does not exist
  dir_.Write("models/a2.tflite", "model a2");
  spec = Parse(R"({"models":[
      {"path":"../models/a.tflite","inputs":"sets"},
      {"path":"../models/b.tflite","inputs":{"images":"img","size":[224,224],
        "layout":"NCHW","channels":"BGR","mean":[1,2,3],"std":2,"dtype":"float32"}},
      "../models/a2.tflite"]})");
  ASSERT_TRUE(spec.ok()) << spec.message();
  ASSERT_EQ(spec->models.size(), 3u);
  EXPECT_EQ(spec->models[0].file, "a.tflite");
  ASSERT_EQ(spec->models[0].inputs.set_dirs.size(), 2u);
  EXPECT_EQ(spec->models[0].inputs.set_dirs[0], (dir_.path() / "specs/sets/one").string());
  ASSERT_EQ(spec->models[1].inputs.images.size(), 1u);
  const ImageInputsSpec& img = spec->models[1].inputs.images[0];
  EXPECT_EQ(img.images, std::vector<std::string>{(dir_.path() / "specs/img/cat.png").string()});
  EXPECT_EQ(img.layout, "NCHW");
  EXPECT_EQ(img.channels, "BGR");
  EXPECT_EQ(img.std, (std::vector<double>{2, 2, 2}));
  EXPECT_TRUE(spec->models[2].inputs.empty());
  // The stored spec keeps the inputs, with absolute paths, and parses back.
  auto doc = nlohmann::json::parse(spec->ToJson());
  EXPECT_EQ(doc["models"][0]["inputs"], (dir_.path() / "specs/sets").string());
  EXPECT_EQ(doc["models"][2], spec->models[2].path);
  auto again = ParseSpec(spec->ToJson(), "/elsewhere/stored.json");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->models[0].inputs.set_dirs, spec->models[0].inputs.set_dirs);
  EXPECT_EQ(again->models[1].inputs.images[0].mean, img.mean);
}

TEST_F(SpecTest, InputSetErrorsNameTheSpecTheModelAndTheField) {
  const std::string where = "spec '" + (dir_.path() / "specs/q.json").string() + "': ";
  EXPECT_EQ(Error(R"({"models":[{"path":"../models/a.tflite","inputs":"nope"}]})"),
            where +
                "models[0] 'a.tflite'.inputs: 'nope' is not a folder (expected a folder of "
                "input_<i>.bin files, or of one sub-folder per input set)");
  EXPECT_THAT(Error(R"({"models":[{"path":"../models/a.tflite","inputs":{"images":[]}}]})"),
              HasSubstr("models[0] 'a.tflite'.inputs.images: is empty"));
  EXPECT_THAT(Error(R"({"models":[{"inputs":"x"}]})"), HasSubstr("models[0]: missing key 'path'"));
  EXPECT_THAT(Error(R"({"models":[{"path":"../models/a.tflite","input":"x"}]})"),
              HasSubstr("unknown key 'input' in models[0] (expected path, inputs, eval)"));
  dir_.Write("specs/i.png", "x");
  EXPECT_THAT(
      Error(
          R"({"models":[{"path":"../models/a.tflite","inputs":{"images":["i.png"],"size":[1]}}]})"),
      HasSubstr("models[0] 'a.tflite'.inputs.size: expected [height, width]"));
}

}  // namespace
}  // namespace dfarm::harness
