// Runner kinds end to end: a sweep on `local` whose runners are
// our dfarm-runner and Google's benchmark_model / inference_diff, here the
// test-only stand-ins (benchmark_model_standin.cc) that take the tools' flags
// and print their recorded real output. The agent maps each job to the
// tool's flags and returns its log; the host parses it into the job's
// metrics, placement and accuracy. The last test runs the real
// benchmark_model when DFARM_BENCHMARK_MODEL names one.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/e2e_shell.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kModel = "face_detection_short_range.tflite";

// What the recordings the stand-ins print say (harness/testdata/benchmark_logs/).
// tflite1x_op_profiling_readme.txt (the CPU run): "Average inference timings
// in us: Warmup: 83235, Init: 38467, Inference: 79760.9".
constexpr double kCpuMeanUs = 79760.9;
// tflite_xnnpack_rpi_xnnpack_issue999.txt (--use_xnnpack=true): "Inference
// (avg): 55043.2", 50 measured runs, 4 threads.
constexpr double kXnnpackMeanUs = 55043.2;
// tflite_xnnpack_cros_peak_memory.txt (--use_xnnpack=true with
// --report_peak_memory_footprint=true): "Inference (avg): 56265.8", "Replacing
// 58 out of 58 node(s) ... yielding 1 partitions", peak 93.2383 MB.
constexpr double kXnnpackPeakMeanUs = 56265.8;
// inference_diff_readme.txt: "Test run latency: avg=7281.64(us)",
// "OutputDiff[0]: avg_error=1.96277e-05, std_dev=6.95767e-06".
constexpr double kDiffMeanUs = 7281.64;
constexpr double kDiffMeanAbsError = 1.96277e-05;

using dfarm::e2e::Outcome;
using dfarm::e2e::Slurp;

bool Has(const json& args, const std::string& arg) {
  for (const json& a : args) {
    if (a == arg) return true;
  }
  return false;
}

// The value of "--name=" in `args`, or "" when absent.
std::string FlagValue(const json& args, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (const json& a : args) {
    const std::string s = a.get<std::string>();
    if (s.rfind(prefix, 0) == 0) return s.substr(prefix.size());
  }
  return "";
}

// A job's runner in `dfarm show --json`: {"name","kind","sha256",...}.
std::string RunnerName(const json& job) {
  const json& r = job["runner"];
  return r.is_object() ? r.value("name", "") : r.get<std::string>();
}

class ToolRunnerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = fs::path(DFARM_MODELS_DIR) / kModel;
    bin_ = fs::path(DFARM_BINARY_DIR) / "bin";
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner", "dfarm-benchmark-model-standin",
                            "dfarm-inference-diff-standin"}) {
      ASSERT_TRUE(fs::exists(bin_ / exe)) << (bin_ / exe) << " is not built";
    }
    dir_ = fs::temp_directory_path() /
           ("dfarm_tool_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "results.db").string();
    argv_log_ = dir_ / "standin_argv.jsonl";
    // dfarm -> its local dfarm-agent -> the stand-in inherit it.
    ::setenv("DFARM_STANDIN_ARGV_LOG", argv_log_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("DFARM_STANDIN_ARGV_LOG");
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  // Runs bin/dfarm with `args` (each single-quoted; test paths hold no quotes).
  Outcome Dfarm(const std::vector<std::string>& args) {
    return dfarm::e2e::RunShell(dir_, dfarm::e2e::QuotedCommand(bin_ / "dfarm", args));
  }

  // Sweeps `spec` on local; returns the run id (0 after a failed assertion).
  int64_t Sweep(json spec) {
    spec["name"] = "tools";
    spec["models"] = {model_.string()};
    spec["devices"] = {"local"};
    spec["benchmark"] = {
        {"warmup_runs", 1}, {"num_runs", 5}, {"num_threads", 1}, {"timeout_s", 120}};
    const fs::path path = dir_ / "spec.json";
    std::ofstream(path) << spec.dump(2);
    Outcome sweep = Dfarm({"sweep", path.string(), "--db", db_, "--json", "--agent-store",
                           (dir_ / "agent-store").string()});
    EXPECT_EQ(sweep.code, 0) << sweep.out << sweep.err;
    json summary = json::parse(sweep.out, nullptr, false);
    if (!summary.is_object() || !summary.contains("run_id")) {
      ADD_FAILURE() << "no summary: " << sweep.out << sweep.err;
      return 0;
    }
    return summary["run_id"].get<int64_t>();
  }

  // `dfarm show RUN --json` (or one job's drill-down with `job_id`).
  json Show(int64_t run_id, int64_t job_id = 0) {
    std::vector<std::string> args = {"show", std::to_string(run_id), "--db", db_, "--json"};
    if (job_id != 0) {
      args.push_back("--job");
      args.push_back(std::to_string(job_id));
    }
    Outcome show = Dfarm(args);
    EXPECT_EQ(show.code, 0) << show.err;
    json doc = json::parse(show.out, nullptr, false);
    EXPECT_TRUE(doc.is_object() && doc.contains("jobs")) << show.out;
    return doc.is_object() ? doc : json::object();
  }

  // The stand-ins' arguments, one array per run, in run order.
  std::vector<json> StandinRuns() const {
    std::vector<json> runs;
    std::ifstream in(argv_log_);
    for (std::string line; std::getline(in, line);) runs.push_back(json::parse(line));
    return runs;
  }

  json Runner(const std::string& name, const std::string& kind, const std::string& exe) const {
    return {{"name", name}, {"kind", kind}, {"builds", {{"x86_64", (bin_ / exe).string()}}}};
  }

  fs::path model_, bin_, dir_, argv_log_;
  std::string db_;
};

// Our runner and benchmark_model side by side, over cpu and xnnpack.
TEST_F(ToolRunnerE2eTest, BenchmarkModelBesideOurRunner) {
  if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
  json spec;
  // json::array, not braces: a one-element brace list is a copy, not an array,
  // under some compilers (nlohmann's initializer-list rule).
  spec["delegates"] = json::array({{{"name", "cpu"}}, {{"name", "xnnpack"}}});
  spec["runners"] = json::array(
      {{{"name", "ours"}}, Runner("bm", "benchmark_model", "dfarm-benchmark-model-standin")});
  const int64_t run = Sweep(spec);
  ASSERT_GT(run, 0);

  // The stand-in ran once per bm job, with benchmark_model's flags.
  const std::vector<json> runs = StandinRuns();
  ASSERT_EQ(runs.size(), 2u) << "one run per bm job, no retry";
  json xnnpack_args, cpu_args;
  for (const json& args : runs) {
    (Has(args, "--use_xnnpack=true") ? xnnpack_args : cpu_args) = args;
  }
  ASSERT_FALSE(xnnpack_args.is_null()) << runs[0] << runs[1];
  ASSERT_FALSE(cpu_args.is_null())
      << "the cpu job ran without --use_xnnpack=true: " << runs[0] << runs[1];
  for (const json& args : {xnnpack_args, cpu_args}) {
    const std::string graph = FlagValue(args, "graph");
    EXPECT_FALSE(graph.empty()) << args;
    EXPECT_TRUE(fs::path(graph).is_absolute()) << args;
    EXPECT_EQ(FlagValue(args, "num_threads"), "1") << args;
    EXPECT_EQ(FlagValue(args, "num_runs"), "5") << args;
    EXPECT_EQ(FlagValue(args, "warmup_runs"), "1") << args;
  }
  const bool peak = Has(xnnpack_args, "--report_peak_memory_footprint=true");

  json doc = Show(run);
  ASSERT_EQ(doc["jobs"].size(), 4u) << doc.dump(2);
  int bm_jobs = 0;
  for (const json& job : doc["jobs"]) {
    const std::string runner = RunnerName(job);
    const std::string delegate = job.value("delegate", "");
    SCOPED_TRACE(runner + " " + delegate);
    EXPECT_EQ(job.value("status", ""), "ok") << job.dump(2);
    ASSERT_TRUE(job["metrics"].is_object()) << job.dump(2);
    if (job["runner"].is_object()) {
      EXPECT_EQ(job["runner"].value("kind", ""), runner == "bm" ? "benchmark_model" : "dfarm");
      EXPECT_EQ(job["runner"].value("sha256", "").size(), 64u);
    }
    const json& m = job["metrics"];
    if (runner == "ours") {
      EXPECT_EQ(m.value("num_runs", 0), 5);
      EXPECT_EQ(job.value("num_samples", 0), 5);
      continue;
    }
    ASSERT_EQ(runner, "bm");
    ++bm_jobs;
    EXPECT_EQ(job.value("num_samples", -1), 0) << "benchmark_model prints no samples";
    if (delegate == "cpu") {
      EXPECT_DOUBLE_EQ(m.value("mean_us", 0.0), kCpuMeanUs);
      EXPECT_EQ(m.value("num_runs", 0), 50);
      EXPECT_TRUE(job["placement"].is_null()) << job.dump(2);
    } else if (peak) {
      EXPECT_DOUBLE_EQ(m.value("mean_us", 0.0), kXnnpackPeakMeanUs);
      EXPECT_EQ(m.value("peak_rss_bytes", 0), 97767444);  // 93.2383 MiB
      ASSERT_TRUE(job["placement"].is_object()) << job.dump(2);
      EXPECT_EQ(job["placement"].value("partitions", 0), 1);
      EXPECT_EQ(job["placement"].value("delegated_nodes", 0), 58);
      EXPECT_EQ(job["placement"].value("cpu_nodes", -1), 0);
    } else {
      EXPECT_DOUBLE_EQ(m.value("mean_us", 0.0), kXnnpackMeanUs);
      EXPECT_EQ(m.value("num_runs", 0), 50);
      EXPECT_EQ(m.value("std_us", 0.0), 1562);
      EXPECT_EQ(m.value("init_us", 0.0), 18777);
    }
  }
  EXPECT_EQ(bm_jobs, 2);
}

// A failed run: the tool exits 1 with "Failed to apply XNNPACK delegate."
// (the recording of tensorflow/tensorflow issue 56166); the job takes the
// failure line's class.
TEST_F(ToolRunnerE2eTest, BenchmarkModelFailureIsItsClass) {
  if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
  ::setenv("DFARM_STANDIN_FAIL_XNNPACK", "1", 1);
  json spec;
  spec["delegates"] = json::array({{{"name", "xnnpack"}}});
  spec["runners"] = json::array({Runner("bm", "benchmark_model", "dfarm-benchmark-model-standin")});
  const fs::path path = dir_ / "spec.json";
  spec["name"] = "fails";
  spec["models"] = {model_.string()};
  spec["devices"] = {"local"};
  std::ofstream(path) << spec.dump(2);
  Outcome sweep = Dfarm({"sweep", path.string(), "--db", db_, "--json", "--agent-store",
                         (dir_ / "agent-store").string()});
  ::unsetenv("DFARM_STANDIN_FAIL_XNNPACK");
  json summary = json::parse(sweep.out, nullptr, false);
  ASSERT_TRUE(summary.is_object()) << sweep.out << sweep.err;
  EXPECT_EQ(summary.value("failed", 0), 1) << sweep.out << sweep.err;
  EXPECT_EQ(StandinRuns().size(), 1u) << "a delegate_error is not retried";
  json doc = Show(summary.value("run_id", int64_t{0}));
  ASSERT_EQ(doc["jobs"].size(), 1u) << doc.dump(2);
  const json& job = doc["jobs"][0];
  EXPECT_EQ(job.value("status", ""), "delegate_error") << job.dump(2);
  EXPECT_EQ(job.value("error", ""), "Failed to apply XNNPACK delegate.") << job.dump(2);
  EXPECT_TRUE(job["metrics"].is_null()) << job.dump(2);
}

// inference_diff's OutputDiff lines become the job's accuracy against the cpu.
TEST_F(ToolRunnerE2eTest, InferenceDiffStoresAccuracy) {
  if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
  json spec;
  spec["delegates"] = json::array({{{"name", "xnnpack"}}});
  spec["runners"] = json::array({Runner("diff", "inference_diff", "dfarm-inference-diff-standin")});
  const int64_t run = Sweep(spec);
  ASSERT_GT(run, 0);
  const std::vector<json> runs = StandinRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(FlagValue(runs[0], "model_file").empty()) << runs[0];
  EXPECT_EQ(FlagValue(runs[0], "num_interpreter_threads"), "1") << runs[0];
  EXPECT_EQ(FlagValue(runs[0], "num_runs"), "5") << runs[0];
  EXPECT_TRUE(Has(runs[0], "--delegate=xnnpack") || Has(runs[0], "--use_xnnpack=true")) << runs[0];

  json doc = Show(run);
  ASSERT_EQ(doc["jobs"].size(), 1u) << doc.dump(2);
  const json& job = doc["jobs"][0];
  EXPECT_EQ(job.value("status", ""), "ok") << job.dump(2);
  ASSERT_TRUE(job["metrics"].is_object()) << job.dump(2);
  EXPECT_DOUBLE_EQ(job["metrics"].value("mean_us", 0.0), kDiffMeanUs);
  EXPECT_EQ(job["metrics"].value("num_runs", 0), 50);

  json detail = Show(run, job.value("id", int64_t{0}));
  ASSERT_EQ(detail["jobs"].size(), 1u) << detail.dump(2);
  const json& accuracy = detail["jobs"][0]["accuracy"];
  ASSERT_TRUE(accuracy.is_object()) << detail.dump(2);
  EXPECT_EQ(accuracy.value("reference", ""), "cpu");
  ASSERT_EQ(accuracy["outputs"].size(), 1u) << accuracy.dump(2);
  EXPECT_EQ(accuracy["outputs"][0].value("index", -1), 0);
  EXPECT_DOUBLE_EQ(accuracy["outputs"][0].value("mean_abs_error", 0.0), kDiffMeanAbsError);
  EXPECT_TRUE(accuracy["outputs"][0]["max_abs_error"].is_null())
      << "inference_diff computes no maximum";
}

// The real benchmark_model, when DFARM_BENCHMARK_MODEL names one for this
// host (a linux_x86-64_benchmark_model from TensorFlow's nightly builds).
TEST_F(ToolRunnerE2eTest, RealBenchmarkModel) {
  const char* real = std::getenv("DFARM_BENCHMARK_MODEL");
  if (!real || !*real) {
    GTEST_SKIP() << "DFARM_BENCHMARK_MODEL is not set: set it to a benchmark_model binary for "
                    "this host to run the real tool as a runner";
  }
  if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
  ASSERT_TRUE(fs::exists(real)) << "DFARM_BENCHMARK_MODEL names '" << real << "', which is absent";
  json spec;
  spec["delegates"] = json::array({{{"name", "cpu"}}, {{"name", "xnnpack"}}});
  spec["runners"] = json::array(
      {{{"name", "real"}, {"kind", "benchmark_model"}, {"builds", {{"x86_64", real}}}}});
  const int64_t run = Sweep(spec);
  ASSERT_GT(run, 0);
  json doc = Show(run);
  ASSERT_EQ(doc["jobs"].size(), 2u) << doc.dump(2);
  for (const json& job : doc["jobs"]) {
    SCOPED_TRACE(job.value("delegate", ""));
    EXPECT_EQ(job.value("status", ""), "ok") << job.dump(2);
    ASSERT_TRUE(job["metrics"].is_object()) << job.dump(2);
    const json& m = job["metrics"];
    EXPECT_GT(m.value("mean_us", 0.0), 0);
    EXPECT_GT(m.value("init_us", 0.0), 0);
    // At least num_runs, more when --min_secs asks for more.
    EXPECT_GE(m.value("num_runs", 0), 5);
    EXPECT_LE(m.value("min_us", 0.0), m.value("mean_us", 0.0));
    EXPECT_GE(m.value("max_us", 0.0), m.value("mean_us", 0.0));
  }
}

}  // namespace
