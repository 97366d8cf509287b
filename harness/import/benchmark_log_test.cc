// The parsers of benchmark_model / inference_diff output over real samples
// (harness/testdata/benchmark_logs/, each with its origin on its first line).
#include "harness/import/benchmark_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/runner/metrics.h"

namespace dfarm::harness {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;

std::string Sample(const std::string& name) {
  std::ifstream in(std::string(DFARM_SOURCE_DIR) + "/harness/testdata/benchmark_logs/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

BenchmarkLog Parse(const std::string& name) {
  auto log = ParseBenchmarkModelLog(Sample(name));
  EXPECT_TRUE(log.ok()) << name << ": " << log.message();
  return log.ok() ? *log : BenchmarkLog{};
}

TEST(BenchmarkLogTest, TfLite2GpuAndroid) {
  BenchmarkLog log = Parse("tflite_gpu_android_issue43541.txt");
  EXPECT_EQ(log.format, "tflite");
  EXPECT_EQ(log.graph, "/data/local/tmp/tflite/denoising_32bit.tflite");
  const runner::Metrics& m = log.metrics;
  EXPECT_EQ(m.init_us, 870557);
  EXPECT_EQ(m.first_us, 130565);
  EXPECT_EQ(m.warmup_mean_us, 122373);
  EXPECT_EQ(m.mean_us, 119375);
  EXPECT_EQ(m.std_us, 1948);
  EXPECT_EQ(m.min_us, 113737);
  EXPECT_EQ(m.max_us, 124776);
  EXPECT_EQ(m.num_runs, 50);
  EXPECT_EQ(m.p50_us, 0);  // the tool prints no percentiles
  ASSERT_TRUE(log.warmup.has_value());
  EXPECT_EQ(log.warmup->count, 4);
  EXPECT_EQ(log.warmup->curr_us, 120829);
  EXPECT_EQ(log.delegate, "gpu");
  EXPECT_EQ(log.delegate_execution, "completely");
  EXPECT_EQ(m.peak_rss_bytes, 0);
  EXPECT_FALSE(log.peak_memory_mb.has_value());
  EXPECT_THAT(log.flags, ::testing::Contains(Pair("Num threads", "4")));
  EXPECT_THAT(log.flags, ::testing::Contains(Pair("#threads used for CPU inference", "4")));
  EXPECT_THAT(log.flags, ::testing::Contains(Pair("Use gpu", "1")));
  EXPECT_EQ(log.flags.size(), 8u);
  EXPECT_TRUE(log.failure.empty());
  EXPECT_EQ(BenchmarkLogStatus(log), "ok");
}

TEST(BenchmarkLogTest, TfLite1OpProfilingReadme) {
  BenchmarkLog log = Parse("tflite1x_op_profiling_readme.txt");
  EXPECT_EQ(log.format, "tflite-1.x");
  const runner::Metrics& m = log.metrics;
  EXPECT_EQ(m.init_us, 38467);
  EXPECT_EQ(m.warmup_mean_us, 83235);
  EXPECT_DOUBLE_EQ(m.mean_us, 79760.9);
  // No stat line of its own: the profiled runs' "Timings (microseconds)".
  EXPECT_EQ(m.num_runs, 50);
  EXPECT_EQ(m.min_us, 77385);
  EXPECT_EQ(m.max_us, 88213);
  EXPECT_EQ(m.std_us, 1929);
  EXPECT_EQ(log.nodes_executed, 31);
  ASSERT_EQ(log.op_profile.size(), 5u);
  EXPECT_EQ(log.op_profile[0].node_type, "CONV_2D");
  EXPECT_EQ(log.op_profile[0].count, 15);
  EXPECT_DOUBLE_EQ(log.op_profile[0].avg_ms, 1.406);
  EXPECT_DOUBLE_EQ(log.op_profile[0].avg_pct, 89.270);
  EXPECT_DOUBLE_EQ(log.op_profile[1].cdf_pct, 100.0);
  EXPECT_EQ(log.op_profile[1].node_type, "DEPTHWISE_CONV_2D");
  EXPECT_EQ(log.op_profile[4].node_type, "AVERAGE_POOL_2D");
  EXPECT_EQ(log.delegate, "");
}

TEST(BenchmarkLogTest, XnnpackOpProfilingInitAndRegularSections) {
  BenchmarkLog log = Parse("tflite_x86_op_profiling_xnnpack.txt");
  EXPECT_EQ(log.graph, "../tflite/efficientdet-tflite-lite0-detection-default-v1/1.tflite");
  EXPECT_EQ(log.metrics.init_us, 32163);
  EXPECT_EQ(log.metrics.first_us, 19834);
  EXPECT_DOUBLE_EQ(log.metrics.warmup_mean_us, 15997.4);
  EXPECT_DOUBLE_EQ(log.metrics.mean_us, 15517.6);
  EXPECT_EQ(log.metrics.num_runs, 64);  // the measured runs' line, not the profiler's
  EXPECT_EQ(log.metrics.std_us, 551);
  EXPECT_DOUBLE_EQ(*log.init_footprint_mb, 22.0273);
  EXPECT_DOUBLE_EQ(*log.overall_footprint_mb, 34.8281);
  // The regular runs' table, not the initialization one.
  EXPECT_EQ(log.nodes_executed, 171);
  ASSERT_EQ(log.op_profile.size(), 11u);
  EXPECT_EQ(log.op_profile[0].node_type, "Convolution (NHWC, QC8) GEMM");
  EXPECT_EQ(log.op_profile[0].count, 62);
  EXPECT_DOUBLE_EQ(log.op_profile[0].avg_ms, 5.236);
  EXPECT_EQ(log.op_profile[0].times_called, 101);
  EXPECT_EQ(log.op_profile[2].node_type, "TFLite_Detection_PostProcess");
  EXPECT_EQ(log.op_profile[10].node_type, "Max Pooling (NHWC, S8)");
  EXPECT_EQ(log.op_profile[10].times_called, 14);
}

TEST(BenchmarkLogTest, XnnpackRaspberryPiMemoryDelta) {
  BenchmarkLog log = Parse("tflite_xnnpack_rpi_xnnpack_issue999.txt");
  EXPECT_EQ(log.metrics.init_us, 18777);
  EXPECT_DOUBLE_EQ(log.metrics.mean_us, 55043.2);
  EXPECT_EQ(log.metrics.num_runs, 50);
  EXPECT_EQ(log.warmup->count, 9);
  EXPECT_DOUBLE_EQ(*log.init_footprint_mb, 8.97656);
  EXPECT_DOUBLE_EQ(*log.overall_footprint_mb, 18.7227);
  EXPECT_EQ(log.metrics.peak_rss_bytes, 0);  // a delta is not a peak
  EXPECT_EQ(log.graph, "yolo_best_recall_int8_static.tflite");
}

TEST(BenchmarkLogTest, PrefixedLinesDelegationAndPeakMemory) {
  BenchmarkLog log = Parse("tflite_xnnpack_cros_peak_memory.txt");
  EXPECT_EQ(log.metrics.init_us, 3337);
  EXPECT_EQ(log.metrics.first_us, 81913);
  EXPECT_DOUBLE_EQ(log.metrics.mean_us, 56265.8);
  EXPECT_EQ(log.metrics.num_runs, 1061);
  EXPECT_EQ(log.metrics.min_us, 54669);
  EXPECT_EQ(log.metrics.std_us, 982);
  EXPECT_DOUBLE_EQ(*log.peak_memory_mb, 93.2383);
  EXPECT_EQ(log.metrics.peak_rss_bytes, 97767444);  // 93.2383 MiB
  ASSERT_EQ(log.delegations.size(), 1u);
  EXPECT_EQ(log.delegations[0].kernel, "TfLiteXNNPackDelegate");
  EXPECT_EQ(log.delegations[0].delegated_nodes, 58);
  EXPECT_EQ(log.delegations[0].total_nodes, 58);
  EXPECT_EQ(log.delegations[0].partitions, 1);
  EXPECT_EQ(log.delegate, "xnnpack");
}

TEST(BenchmarkLogTest, LiteRtResults) {
  BenchmarkLog log = Parse("litert_gpu_mlcommons_issue1134.txt");
  EXPECT_EQ(log.format, "litert");
  const runner::Metrics& m = log.metrics;
  EXPECT_DOUBLE_EQ(m.init_us, 23744730);
  EXPECT_DOUBLE_EQ(m.first_us, 7441040);
  EXPECT_DOUBLE_EQ(m.warmup_mean_us, 7441040);
  EXPECT_DOUBLE_EQ(m.mean_us, 7430200);
  EXPECT_EQ(m.num_runs, 10);
  EXPECT_DOUBLE_EQ(m.min_us, 7416400);
  EXPECT_DOUBLE_EQ(m.max_us, 7448860);
  EXPECT_DOUBLE_EQ(m.std_us, 9920);
  EXPECT_DOUBLE_EQ(*log.init_footprint_mb, 6391.74);
  EXPECT_DOUBLE_EQ(*log.overall_footprint_mb, 6391.74);
  EXPECT_FALSE(log.peak_memory_mb.has_value());  // "Peak memory usage not available"
}

TEST(BenchmarkLogTest, FailureLog) {
  BenchmarkLog log = Parse("tflite_failure_xnnpack_issue56166.txt");
  EXPECT_EQ(log.failure, "Failed to apply XNNPACK delegate.");
  EXPECT_EQ(BenchmarkLogStatus(log), "delegate_error");
  EXPECT_EQ(log.delegate, "xnnpack");
  EXPECT_EQ(log.graph, "pruning_model.tflite");
  EXPECT_EQ(log.metrics.mean_us, 0);
  BenchmarkLog model;
  model.failure = "Failed to allocate tensors!";
  EXPECT_EQ(BenchmarkLogStatus(model), "model_error");
  model.failure = "Benchmarking failed.";
  EXPECT_EQ(BenchmarkLogStatus(model), "crashed");
}

TEST(BenchmarkLogTest, NotBenchmarkOutputNamesWhatIsMissing) {
  auto log = ParseBenchmarkModelLog("STARTING!\nGraph: [m.tflite]\nLoaded model m.tflite\n");
  ASSERT_FALSE(log.ok());
  EXPECT_THAT(log.message(), HasSubstr("no inference timing"));
  EXPECT_THAT(log.message(), HasSubstr("Inference timings in us"));
  EXPECT_FALSE(ParseBenchmarkModelLog(Sample("inference_diff_readme.txt")).ok());
  EXPECT_FALSE(ParseBenchmarkModelLog("").ok());
}

TEST(BenchmarkLogTest, HashLinesOnlyAtTheStartAreSkipped) {
  auto log =
      ParseBenchmarkModelLog("# origin: x\ncount=3 first=1 curr=2 min=1 max=3 avg=2 std=1\n");
  ASSERT_TRUE(log.ok()) << log.message();
  EXPECT_EQ(log->metrics.num_runs, 3);
  // A "#" line later is a line like any other: "#threads used ...: [4]" is a flag.
  log = ParseBenchmarkModelLog("count=3 avg=2\n#threads used for CPU inference: [4]\n");
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(log->flags, ::testing::Contains(Pair("#threads used for CPU inference", "4")));
}

TEST(BenchmarkLogTest, AndroidLogcatPrefixes) {
  // The first lines are from https://github.com/tensorflow/tensorflow/issues/56301 (the
  // benchmark app's logcat, TF 2.9); the stat line is made up in the same form.
  auto log = ParseBenchmarkModelLog(
      "05-31 10:31:13.023 21767 21767 I tflite  : Graph: [/data/local/tmp/model.tflite]\n"
      "05-31 10:31:13.023 21767 21767 I tflite  : Use NNAPI: [1]\n"
      "05-31 10:31:13.036 21767 21767 I tflite  : Use xnnpack: [0]\n"
      "05-31 10:31:13.157 21767 21767 I tflite  : Though NNAPI delegate is explicitly applied, "
      "the model graph will not be executed by the delegate.\n"
      "05-31 10:31:14.000 21767 21767 I tflite  : count=50 first=9 curr=8 min=7 max=9 avg=8 "
      "std=1\n");
  ASSERT_TRUE(log.ok()) << log.message();
  EXPECT_EQ(log->graph, "/data/local/tmp/model.tflite");
  EXPECT_EQ(log->delegate, "nnapi");  // the tool runners' name for it
  EXPECT_TRUE(log->delegate_options.empty());
  EXPECT_EQ(log->delegate_execution, "not");
  EXPECT_EQ(log->metrics.num_runs, 50);
  EXPECT_EQ(log->metrics.mean_us, 8);
}

// TensorFlow Lite 2.x creates XNNPACK and benchmark_model applies it by
// default: its creation line alone names the delegate.
TEST(BenchmarkLogTest, DefaultXnnpackIsNamedByItsCreationLine) {
  EXPECT_EQ(Parse("tflite_xnnpack_rpi_xnnpack_issue999.txt").delegate, "xnnpack");
  EXPECT_EQ(Parse("tflite_x86_op_profiling_xnnpack.txt").delegate, "xnnpack");
  EXPECT_EQ(Parse("tflite_xnnpack_cros_peak_memory.txt").delegate, "xnnpack");
  EXPECT_EQ(Parse("tflite_xnnpack_rpi_xnnpack_issue999.txt").delegate_execution, "");
  EXPECT_TRUE(Parse("tflite_xnnpack_rpi_xnnpack_issue999.txt").delegate_options.empty());
  EXPECT_EQ(Parse("tflite1x_op_profiling_readme.txt").delegate, "");  // TFLite's CPU kernels
}

BenchmarkLog ParseLines(const std::string& lines) {
  auto log = ParseBenchmarkModelLog(lines + "count=5 first=9 curr=8 min=7 max=9 avg=8 std=1\n");
  EXPECT_TRUE(log.ok()) << log.message();
  return log.ok() ? *log : BenchmarkLog{};
}

// The lines TensorFlow Lite (interpreter, delegates) and the tools' delegate
// providers print, each to its delegate in our names.
TEST(BenchmarkLogTest, DelegateFromEachKindOfLine) {
  struct Case {
    const char* lines;
    const char* delegate;
    const char* kind;  // option "kind", "" for none
  } cases[] = {
      {"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n", "xnnpack", ""},
      {"XNNPACK delegate created.\n", "xnnpack", ""},
      {"Explicitly applied XNNPACK delegate, and the model graph will be completely executed by "
       "the delegate.\n",
       "xnnpack", ""},
      {"Replacing 3 out of 4 node(s) with delegate (TfLiteXNNPackDelegate) node, yielding 1 "
       "partitions.\n",
       "xnnpack", ""},
      {"INFO: Created TensorFlow Lite delegate for GPU.\n", "gpu", ""},
      {"GPU delegate created.\n", "gpu", ""},
      {"Replacing 3 node(s) with delegate (TfLiteGpuDelegateV2) node, yielding 1 partitions.\n",
       "gpu", ""},
      {"INFO: Created TensorFlow Lite delegate for NNAPI.\nNNAPI delegate created.\n", "nnapi", ""},
      {"Created TensorFlow Lite delegate for Hexagon.\n", "hexagon", ""},
      {"CoreML delegate created.\n", "external", "coreml"},
      {"EXTERNAL delegate created.\n", "external", ""},
      {"Replacing 2 node(s) with delegate (TfLiteArmNnDelegate) node, yielding 1 partitions.\n",
       "external", "TfLiteArmNnDelegate"},
      // XNNPACK is created by default: another delegate's creation names the run.
      {"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
       "INFO: Created TensorFlow Lite delegate for NNAPI.\n",
       "nnapi", ""},
      // A flag the tool echoes wins; "Use caching" is no delegate.
      {"Use caching: [1]\nUse gpu: [1]\nINFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n",
       "gpu", ""},
      {"No delegate created.\n", "", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.lines);
    const BenchmarkLog log = ParseLines(c.lines);
    EXPECT_EQ(log.delegate, c.delegate);
    if (*c.kind) {
      EXPECT_THAT(log.delegate_options, ::testing::ElementsAre(Pair("kind", c.kind)));
    } else {
      EXPECT_TRUE(log.delegate_options.empty());
    }
  }
}

// A delegate created that took no node keeps its name; the placement puts
// every node on the CPU where the log counts them.
TEST(BenchmarkLogTest, DelegateThatTookNoNode) {
  BenchmarkLog log = ParseLines(
      "INFO: Created TensorFlow Lite delegate for Hexagon.\n"
      "INFO: Hexagon delegate: 0 nodes delegated out of 64 nodes.\n");
  EXPECT_EQ(log.delegate, "hexagon");
  EXPECT_EQ(log.delegate_execution, "not");
  std::optional<store::JobPlacement> p = BenchmarkRunnerOutput(log).placement;
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->partitions, 0);
  ASSERT_EQ(p->nodes.size(), 64u);
  for (const store::PlacementNode& n : p->nodes) EXPECT_EQ(n.delegate, "cpu");

  // The default XNNPACK delegate's application failed: TFLite ran its own kernels.
  log = ParseLines(
      "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
      "ERROR: Ignoring failed application of the default TensorFlow Lite delegate indexed at "
      "0.\n");
  EXPECT_EQ(log.delegate, "xnnpack");
  EXPECT_EQ(log.delegate_execution, "not");
  p = BenchmarkRunnerOutput(log).placement;
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->partitions, 0);
  EXPECT_TRUE(p->nodes.empty());  // the log does not count them

  // benchmark_model's own line (issue 56301's NNAPI run), with the op profile's count.
  log = ParseLines(
      "Use NNAPI: [1]\nThough NNAPI delegate is explicitly applied, the model graph will not be "
      "executed by the delegate.\nNumber of nodes executed: 12\n");
  EXPECT_EQ(log.delegate, "nnapi");
  p = BenchmarkRunnerOutput(log).placement;
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->nodes.size(), 12u);
}

TEST(BenchmarkLogTest, ReadsTheRunnersOwnLine) {
  runner::Metrics m;
  m.init_us = 1234.4;
  m.first_us = 880.6;
  m.warmup_mean_us = 512.25;
  m.mean_us = 498.125;
  const std::string line = runner::BenchmarkTimingsLine(m);
  EXPECT_EQ(line,
            "Inference timings in us: Init: 1234, First inference: 881, Warmup (avg): 512.25, "
            "Inference (avg): 498.125");
  auto log = ParseBenchmarkModelLog(line + "\n");
  ASSERT_TRUE(log.ok()) << log.message();
  EXPECT_EQ(log->metrics.init_us, 1234);
  EXPECT_EQ(log->metrics.first_us, 881);
  EXPECT_DOUBLE_EQ(log->metrics.warmup_mean_us, 512.25);
  EXPECT_DOUBLE_EQ(log->metrics.mean_us, 498.125);
}

TEST(InferenceDiffLogTest, Readme) {
  auto log = ParseInferenceDiffLog(Sample("inference_diff_readme.txt"));
  ASSERT_TRUE(log.ok()) << log.message();
  EXPECT_EQ(log->num_runs, 50);
  EXPECT_DOUBLE_EQ(log->reference.avg_us, 84364.2);
  EXPECT_DOUBLE_EQ(log->reference.std_us, 12525);
  EXPECT_DOUBLE_EQ(log->test.avg_us, 7281.64);
  EXPECT_DOUBLE_EQ(log->test.std_us, 2089);
  ASSERT_EQ(log->outputs.size(), 1u);
  EXPECT_EQ(log->outputs[0].index, 0);
  EXPECT_DOUBLE_EQ(log->outputs[0].mean_abs_error, 1.96277e-05);
  EXPECT_DOUBLE_EQ(log->outputs[0].std_abs_error, 6.95767e-06);
}

TEST(InferenceDiffLogTest, GpuIssue) {
  auto log = ParseInferenceDiffLog(Sample("inference_diff_gpu_issue42294.txt"));
  ASSERT_TRUE(log.ok()) << log.message();
  EXPECT_EQ(log->num_runs, 5);
  EXPECT_DOUBLE_EQ(log->reference.avg_us, 51505.2);
  EXPECT_DOUBLE_EQ(log->test.avg_us, 76189.3);
  EXPECT_DOUBLE_EQ(log->test.std_us, 21566);
  ASSERT_EQ(log->outputs.size(), 1u);
  EXPECT_DOUBLE_EQ(log->outputs[0].mean_abs_error, 5.65735e-08);
  EXPECT_DOUBLE_EQ(log->outputs[0].std_abs_error, 1.23668e-10);
  EXPECT_EQ(log->delegate, "gpu");  // "GPU delegate is created."
  log = ParseInferenceDiffLog(Sample("inference_diff_readme.txt"));
  ASSERT_TRUE(log.ok()) << log.message();
  EXPECT_EQ(log->delegate, "");  // the README's output names none
}

TEST(InferenceDiffLogTest, SeveralOutputsWithPrefixesAndErrors) {
  auto log = ParseInferenceDiffLog(
      "INFO: Num evaluation runs: 3\nINFO: Reference run latency: avg=10(us), std_dev=1(us)\n"
      "INFO: Test run latency: avg=5(us), std_dev=0.5(us)\n"
      "INFO: OutputDiff[0]: avg_error=0.1, std_dev=0\nINFO: OutputDiff[1]: avg_error=2, "
      "std_dev=0.25\n");
  ASSERT_TRUE(log.ok()) << log.message();
  ASSERT_EQ(log->outputs.size(), 2u);
  EXPECT_EQ(log->outputs[1].index, 1);
  EXPECT_DOUBLE_EQ(log->outputs[1].std_abs_error, 0.25);
  auto bad = ParseInferenceDiffLog(Sample("tflite_gpu_android_issue43541.txt"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("Test run latency"));
  bad = ParseInferenceDiffLog("Test run latency: avg=5(us), std_dev=1(us)\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("OutputDiff"));
}

// ToolRunnerOutput: a tool runner's log as the store keeps a job.

TEST(ToolRunnerOutputTest, BenchmarkModelXnnpackWithPeakMemoryAndPlacement) {
  auto out = ToolRunnerOutput("benchmark_model", Sample("tflite_xnnpack_cros_peak_memory.txt"));
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out->status, "ok");
  EXPECT_EQ(out->error, "");
  ASSERT_TRUE(out->metrics.has_value());
  EXPECT_EQ(out->metrics->init_us, 3337);
  EXPECT_EQ(out->metrics->first_us, 81913);
  EXPECT_DOUBLE_EQ(out->metrics->warmup_mean_us, 58984.7);
  EXPECT_DOUBLE_EQ(out->metrics->mean_us, 56265.8);
  EXPECT_EQ(out->metrics->std_us, 982);
  EXPECT_EQ(out->metrics->min_us, 54669);
  EXPECT_EQ(out->metrics->max_us, 60236);
  EXPECT_EQ(out->metrics->num_runs, 1061);
  EXPECT_EQ(out->metrics->peak_rss_bytes, 97767444);  // 93.2383 MiB
  EXPECT_EQ(out->metrics->threads_used, 0);           // the excerpt echoes no flag
  EXPECT_TRUE(out->samples_us.empty());               // the tool prints none
  EXPECT_FALSE(out->accuracy.has_value());
  // "Replacing 58 out of 58 node(s) with delegate (TfLiteXNNPackDelegate)
  // node, yielding 1 partitions".
  ASSERT_TRUE(out->placement.has_value());
  EXPECT_EQ(out->placement->partitions, 1);
  ASSERT_EQ(out->placement->nodes.size(), 58u);
  for (const store::PlacementNode& n : out->placement->nodes) EXPECT_EQ(n.delegate, "xnnpack");
  EXPECT_EQ(out->placement->nodes.back().index, 57);
}

TEST(ToolRunnerOutputTest, BenchmarkModelCpuNodesAreTheRestOfTheTotal) {
  auto out = ToolRunnerOutput(
      "benchmark_model",
      "INFO: Replacing 7 out of 10 node(s) with delegate (TfLiteGpuDelegateV2) node, yielding 2 "
      "partitions.\nINFO: Inference timings in us: Init: 5, First inference: 4, Warmup (avg): 3, "
      "Inference (avg): 2.5\n");
  ASSERT_TRUE(out.ok()) << out.message();
  ASSERT_TRUE(out->placement.has_value());
  EXPECT_EQ(out->placement->partitions, 2);
  ASSERT_EQ(out->placement->nodes.size(), 10u);
  int64_t gpu = 0;
  for (const store::PlacementNode& n : out->placement->nodes) gpu += n.delegate == "gpu";
  EXPECT_EQ(gpu, 7);
  EXPECT_EQ(out->placement->nodes[9].delegate, "cpu");
  EXPECT_DOUBLE_EQ(out->metrics->mean_us, 2.5);
}

TEST(ToolRunnerOutputTest, BenchmarkModelThreadsFromTheFlagEcho) {
  auto out = ToolRunnerOutput("benchmark_model", Sample("tflite_xnnpack_rpi_xnnpack_issue999.txt"));
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out->status, "ok");
  ASSERT_TRUE(out->metrics.has_value());
  EXPECT_DOUBLE_EQ(out->metrics->mean_us, 55043.2);
  EXPECT_EQ(out->metrics->init_us, 18777);
  EXPECT_EQ(out->metrics->num_runs, 50);
  EXPECT_EQ(out->metrics->std_us, 1562);
  EXPECT_EQ(out->metrics->threads_used, 4);    // "#threads used for CPU inference: [4]"
  EXPECT_EQ(out->metrics->peak_rss_bytes, 0);  // no --report_peak_memory_footprint
  EXPECT_FALSE(out->placement.has_value());    // no "Replacing ..." line
}

TEST(ToolRunnerOutputTest, BenchmarkModelFailureIsItsClass) {
  auto out = ToolRunnerOutput("benchmark_model", Sample("tflite_failure_xnnpack_issue56166.txt"));
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out->status, "delegate_error");
  EXPECT_EQ(out->error, "Failed to apply XNNPACK delegate.");
  EXPECT_FALSE(out->metrics.has_value());
  EXPECT_FALSE(out->placement.has_value());
}

TEST(ToolRunnerOutputTest, InferenceDiffLatencyAndAccuracy) {
  auto out = ToolRunnerOutput("inference_diff", Sample("inference_diff_gpu_issue42294.txt"));
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out->status, "ok");
  ASSERT_TRUE(out->metrics.has_value());
  EXPECT_DOUBLE_EQ(out->metrics->mean_us, 76189.3);  // the test run, not the reference's 51505.2
  EXPECT_DOUBLE_EQ(out->metrics->std_us, 21566);
  EXPECT_EQ(out->metrics->num_runs, 5);
  ASSERT_TRUE(out->accuracy.has_value());
  EXPECT_EQ(out->accuracy->reference, "cpu");
  ASSERT_EQ(out->accuracy->outputs.size(), 1u);
  const runner::OutputAccuracy& o = out->accuracy->outputs[0];
  EXPECT_EQ(o.index, 0);
  EXPECT_DOUBLE_EQ(o.mean_abs_error, 5.65735e-08);
  EXPECT_DOUBLE_EQ(o.std_abs_error, 1.23668e-10);
  EXPECT_TRUE(std::isnan(o.max_abs_error));  // not computed by the tool: NULL in the store
  EXPECT_TRUE(std::isnan(o.rmse));
  EXPECT_FALSE(out->placement.has_value());
}

TEST(ToolRunnerOutputTest, UnreadableLogsAndUnknownKindsNameTheFault) {
  auto bm = ToolRunnerOutput("benchmark_model", Sample("inference_diff_readme.txt"));
  ASSERT_FALSE(bm.ok());
  EXPECT_THAT(bm.message(), HasSubstr("benchmark_model log: no inference timing"));
  auto diff = ToolRunnerOutput("inference_diff", Sample("tflite_gpu_android_issue43541.txt"));
  ASSERT_FALSE(diff.ok());
  EXPECT_THAT(diff.message(), HasSubstr("inference_diff log: no 'Test run latency"));
  for (const char* kind : {"dfarm", "tflite", "", "benchmark-model"}) {
    auto other = ToolRunnerOutput(kind, Sample("inference_diff_readme.txt"));
    ASSERT_FALSE(other.ok()) << kind;
    EXPECT_THAT(other.message(), HasSubstr("runner kind '" + std::string(kind) + "'"));
  }
}

}  // namespace
}  // namespace dfarm::harness
