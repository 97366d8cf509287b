#include "agent/runner/runner_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace dfarm::runner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using Action = ParsedCommandLine::Action;

ParsedCommandLine Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "dfarm-runner");
  return ParseCommandLine(static_cast<int>(args.size()), args.data());
}

TEST(RunnerOptionsTest, Defaults) {
  ParsedCommandLine p = Parse({"--model", "m.tflite"});
  ASSERT_EQ(p.action, Action::kRun);
  EXPECT_EQ(p.options.model, "m.tflite");
  EXPECT_EQ(p.options.delegate, "cpu");
  EXPECT_EQ(p.options.num_threads, 1u);
  EXPECT_EQ(p.options.warmup_runs, 1u);
  EXPECT_EQ(p.options.num_runs, 50u);
  EXPECT_EQ(p.options.seed, 1u);
  EXPECT_FALSE(p.options.json);
  EXPECT_EQ(p.options.min_secs, 0);
  EXPECT_TRUE(p.options.accuracy_reference.empty());
  EXPECT_FALSE(p.options.profile);
}

TEST(RunnerOptionsTest, MetricsFlags) {
  ParsedCommandLine p = Parse(
      {"--model", "m.tflite", "--min-secs", "1.5", "--accuracy-reference", "cpu", "--profile"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.min_secs, 1.5);
  EXPECT_EQ(p.options.accuracy_reference, "cpu");
  EXPECT_TRUE(p.options.profile);
  EXPECT_EQ(Parse({"--model", "m", "--min-secs", "-1"}).action, Action::kUsageError);
  EXPECT_EQ(Parse({"--model", "m", "--accuracy-reference", "gpu"}).action, Action::kUsageError);
}

TEST(RunnerOptionsTest, AllFlags) {
  ParsedCommandLine p =
      Parse({"--model", "m.tflite", "--delegate", "xnnpack", "--delegate-options", "a:1;b:x:y;",
             "--num-threads", "4", "--warmup-runs", "0", "--num-runs", "3", "--seed", "9",
             "--inputs", "in", "--dump-outputs", "out", "--json"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.delegate, "xnnpack");
  EXPECT_THAT(p.options.delegate_options, ElementsAre(Pair("a", "1"), Pair("b", "x:y")));
  EXPECT_EQ(p.options.num_threads, 4u);
  EXPECT_EQ(p.options.warmup_runs, 0u);
  EXPECT_EQ(p.options.num_runs, 3u);
  EXPECT_EQ(p.options.seed, 9u);
  EXPECT_EQ(p.options.inputs_dirs, std::vector<std::string>{"in"});
  EXPECT_EQ(p.options.dump_outputs_dir, "out");
  EXPECT_TRUE(p.options.json);
  EXPECT_TRUE(p.json);
}

TEST(RunnerOptionsTest, InputsRepeatsOncePerSet) {
  ParsedCommandLine p = Parse({"--model", "m", "--inputs", "a", "--inputs", "b", "--json"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.inputs_dirs, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(p.options.json);
  EXPECT_TRUE(Parse({"--model", "m"}).options.inputs_dirs.empty());
}

TEST(RunnerOptionsTest, UsageErrors) {
  EXPECT_EQ(Parse({}).action, Action::kUsageError);
  EXPECT_EQ(Parse({"--model", "m", "--num-runs", "0"}).action, Action::kUsageError);
  EXPECT_EQ(Parse({"--model", "m", "--num-threads", "x"}).action, Action::kUsageError);
  ParsedCommandLine p = Parse({"--model", "m", "--bogus", "--json"});
  EXPECT_EQ(p.action, Action::kUsageError);
  EXPECT_TRUE(p.json);
  p = Parse({"--model", "m", "--delegate-options", "novalue"});
  EXPECT_EQ(p.action, Action::kUsageError);
  EXPECT_THAT(p.error, HasSubstr("bad --delegate-options entry 'novalue'"));
}

TEST(RunnerOptionsTest, TaskOutputs) {
  ParsedCommandLine p = Parse({"--model", "m", "--inputs", "a", "--task-outputs", "topk:5"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.task_top_k, 5u);
  EXPECT_EQ(p.options.task_output, 0u);
  p = Parse({"--model", "m", "--inputs", "a", "--task-outputs", "topk:1:2"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.task_top_k, 1u);
  EXPECT_EQ(p.options.task_output, 2u);
  EXPECT_EQ(Parse({"--model", "m"}).options.task_top_k, 0u);
  for (const char* bad : {"top5", "topk:0", "topk:x", "topk:5:1:2", "argmax:1", "topk:1001"}) {
    p = Parse({"--model", "m", "--inputs", "a", "--task-outputs", bad});
    EXPECT_EQ(p.action, Action::kUsageError) << bad;
    EXPECT_THAT(p.error, HasSubstr("expected topk:K[:OUTPUT]")) << bad;
  }
  p = Parse({"--model", "m", "--task-outputs", "topk:5"});
  EXPECT_EQ(p.action, Action::kUsageError);
  EXPECT_THAT(p.error, HasSubstr("needs --inputs"));
}

TEST(RunnerOptionsTest, TaskOutputsBoxesAndClassMap) {
  ParsedCommandLine p =
      Parse({"--model", "m", "--inputs", "a", "--task-outputs", "boxes:0,1,2,3:20"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.task_kind, "boxes");
  EXPECT_EQ(p.options.task_boxes, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(p.options.task_max_boxes, 20u);
  p = Parse({"--model", "m", "--inputs", "a", "--task-outputs", "boxes:3,2,1,0"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.task_max_boxes, 100u);
  p = Parse({"--model", "m", "--inputs", "a", "--task-outputs", "classmap:1:probabilities"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.task_kind, "classmap");
  EXPECT_EQ(p.options.task_output, 1u);
  EXPECT_EQ(p.options.task_activation, "probabilities");
  p = Parse({"--model", "m", "--inputs", "a", "--task-outputs", "classmap:0"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.task_activation, "logits");
  for (const char* bad : {"boxes:0,1,2", "boxes:0,1,2,3:0", "boxes:0,1,2,x",
                          "classmap:", "classmap:0:softmax", "classmap:a"}) {
    p = Parse({"--model", "m", "--inputs", "a", "--task-outputs", bad});
    EXPECT_EQ(p.action, Action::kUsageError) << bad;
    EXPECT_THAT(p.error, HasSubstr("boxes:B,C,S,N[:MAX]")) << bad;
  }
}

TEST(RunnerOptionsTest, TaskOutputsAnchors) {
  ParsedCommandLine p =
      Parse({"--model", "m", "--inputs", "a", "--task-outputs", "anchors:0,1:sigmoid:1:0.25:50"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.task_kind, "anchors");
  EXPECT_EQ(p.options.task_boxes, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(p.options.task_activation, "sigmoid");
  EXPECT_EQ(p.options.task_class_offset, 1u);
  EXPECT_EQ(p.options.task_threshold, 0.25);
  EXPECT_EQ(p.options.task_max_boxes, 50u);
  p = Parse({"--model", "m", "--inputs", "a", "--task-outputs", "anchors:1,0:raw:0:-2.5"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.task_threshold, -2.5);
  EXPECT_EQ(p.options.task_max_boxes, 100u);
  for (const char* bad :
       {"anchors:0,1", "anchors:0:sigmoid:0:0.5", "anchors:0,1:tanh:0:0.5", "anchors:0,1:raw:x:0.5",
        "anchors:0,1:raw:0:", "anchors:0,1:raw:0:0.5x", "anchors:0,1:raw:0:nan",
        "anchors:0,1:raw:0:0.5:0", "anchors:0,1:raw:0:0.5:100001", "anchors:0,1:raw:0:0.5:1:2"}) {
    p = Parse({"--model", "m", "--inputs", "a", "--task-outputs", bad});
    EXPECT_EQ(p.action, Action::kUsageError) << bad;
    EXPECT_THAT(p.error, HasSubstr("anchors:B,S:sigmoid|softmax|raw:OFFSET:THRESHOLD[:MAX]"))
        << bad;
  }
}

TEST(RunnerOptionsTest, RangeErrorsNameTheBound) {
  ParsedCommandLine p = Parse({"--model", "m", "--num-runs", "0"});
  ASSERT_EQ(p.action, Action::kUsageError);
  EXPECT_EQ(p.error, "--num-runs: must be at least 1 (got 0)");
  p = Parse({"--model", "m", "--num-threads", "0"});
  ASSERT_EQ(p.action, Action::kUsageError);
  EXPECT_EQ(p.error, "--num-threads: must be at least 1 (got 0)");
  p = Parse({"--model", "m", "--min-secs", "-1"});
  ASSERT_EQ(p.action, Action::kUsageError);
  EXPECT_EQ(p.error, "--min-secs: must be at least 0 (got -1)");
  p = Parse({"--model", "m", "--num-threads", "x"});
  ASSERT_EQ(p.action, Action::kUsageError);
  EXPECT_EQ(p.error, "--num-threads: must be a number (got 'x')");
  EXPECT_EQ(Parse({"--model", "m", "--num-runs", "1"}).action, Action::kRun);
}

TEST(RunnerOptionsTest, Version) {
  ParsedCommandLine p = Parse({"--version"});
  ASSERT_EQ(p.action, Action::kVersion);
  EXPECT_EQ(p.help, std::string("dfarm-runner ") + DFARM_VERSION + "\n");
}

TEST(RunnerOptionsTest, HelpListsTheExitCodes) {
  ParsedCommandLine p = Parse({"--help"});
  ASSERT_EQ(p.action, Action::kHelp);
  EXPECT_THAT(p.help, HasSubstr("Exit codes"));
  EXPECT_THAT(p.help, HasSubstr("  0  ok\n"));
  EXPECT_THAT(p.help, HasSubstr("  2  usage_error\n"));
  EXPECT_THAT(p.help, HasSubstr("  5  internal_error\n"));
}

TEST(RunnerOptionsTest, Help) {
  ParsedCommandLine p = Parse({"--help"});
  EXPECT_EQ(p.action, Action::kHelp);
  EXPECT_THAT(p.help, HasSubstr("--dump-outputs"));
}

TEST(RunnerOptionsTest, BenchmarkModelSpellings) {
  ParsedCommandLine p =
      Parse({"--graph=m.tflite", "--num_runs=7", "--warmup_runs=2", "--num_threads=3",
             "--use_xnnpack=true", "--enable_op_profiling=true"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.model, "m.tflite");
  EXPECT_EQ(p.options.num_runs, 7u);
  EXPECT_EQ(p.options.warmup_runs, 2u);
  EXPECT_EQ(p.options.num_threads, 3u);
  EXPECT_EQ(p.options.delegate, "xnnpack");
  EXPECT_TRUE(p.options.profile);

  p = Parse({"--graph", "m.tflite", "--use_xnnpack=false", "--enable_op_profiling=false"});
  ASSERT_EQ(p.action, Action::kRun) << p.error;
  EXPECT_EQ(p.options.delegate, "cpu");
  EXPECT_FALSE(p.options.profile);
  EXPECT_EQ(Parse({"--graph=m", "--use_xnnpack=1"}).options.delegate, "xnnpack");
  EXPECT_EQ(Parse({"--graph=m", "--delegate", "xnnpack", "--use_xnnpack=true"}).options.delegate,
            "xnnpack");
}

TEST(RunnerOptionsTest, BenchmarkModelSpellingsRefused) {
  ParsedCommandLine p = Parse({"--graph=m", "--delegate", "external", "--use_xnnpack=true"});
  EXPECT_EQ(p.action, Action::kUsageError);
  EXPECT_THAT(p.error, HasSubstr("--use_xnnpack=true contradicts --delegate external"));
  EXPECT_EQ(Parse({"--graph=m", "--use_xnnpack=maybe"}).action, Action::kUsageError);
  EXPECT_EQ(Parse({"--graph=m", "--num_runs=0"}).action, Action::kUsageError);
  ParsedCommandLine help = Parse({"--help"});
  EXPECT_THAT(help.help, HasSubstr("--graph"));
  EXPECT_THAT(help.help, HasSubstr("--use_xnnpack"));
}

}  // namespace
}  // namespace dfarm::runner
