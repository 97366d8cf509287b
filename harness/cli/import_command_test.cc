// `dfarm import benchmark-log` over the real samples of
// harness/testdata/benchmark_logs/, into a real SQLite store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/base/sha256.h"
#include "harness/cli/cli.h"
#include "harness/cli/cli_test_util.h"
#include "harness/test_util.h"
#include "reports/store/store.h"

namespace dfarm::cli {
namespace {

using test_util::Call;
using test_util::Outcome;
using ::testing::HasSubstr;

std::string SamplePath(const std::string& name) {
  return std::string(DFARM_SOURCE_DIR) + "/harness/testdata/benchmark_logs/" + name;
}

TEST(ImportCommandTest, ImportsAnOkLogWithItsMetrics) {
  harness::TempDir dir;
  const std::string db = (dir.path() / "x.db").string();
  const std::string model = (dir.path() / "yolo.tflite").string();
  std::ofstream(model) << "not really a model, hashed all the same";
  Outcome o = Call({"import", "benchmark-log", SamplePath("tflite_xnnpack_cros_peak_memory.txt"),
                    "--device", "chromebook", "--model", model, "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc["status"], "ok");
  auto store = store::OpenSqliteStore(db);
  ASSERT_TRUE(store.ok());
  auto run = (*store)->GetRun(doc["run_id"].get<int64_t>());
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->status, "finished");
  EXPECT_EQ(run->name, "import " + SamplePath("tflite_xnnpack_cros_peak_memory.txt"));
  EXPECT_EQ(nlohmann::json::parse(run->spec_json)["import"]["tool"], "benchmark_model");
  auto job = (*store)->GetJob(doc["job_id"].get<int64_t>());
  ASSERT_TRUE(job.ok()) << job.message();
  EXPECT_EQ(job->status, "ok");
  EXPECT_EQ(job->model, "yolo.tflite");
  EXPECT_EQ(job->model_sha256, *agent::Sha256File(model));
  EXPECT_EQ(job->delegate, "xnnpack");  // from the log's Replacing line
  EXPECT_EQ(job->device, "chromebook");
  EXPECT_EQ(job->runner, "benchmark_model");
  EXPECT_FALSE(job->job_key.empty());
  ASSERT_TRUE(job->metrics.has_value());
  EXPECT_EQ(job->metrics->init_us, 3337);
  EXPECT_DOUBLE_EQ(job->metrics->mean_us, 56265.8);
  EXPECT_EQ(job->metrics->num_runs, 1061);
  EXPECT_EQ(job->metrics->std_us, 982);
  EXPECT_EQ(job->metrics->peak_rss_bytes, 97767444);
  ASSERT_TRUE(job->placement.has_value());  // "Replacing 58 out of 58 node(s) ..."
  EXPECT_EQ(job->placement->delegated_nodes, 58);
  auto detail = (*store)->GetJobDetail(job->id);
  ASSERT_TRUE(detail.ok());
  EXPECT_THAT(detail->stderr_tail, HasSubstr("Inference timings in us"));
}

// TensorFlow Lite's default XNNPACK: its creation line is the log's only word on it.
TEST(ImportCommandTest, DelegateFromTheLogsOwnLines) {
  harness::TempDir dir;
  const std::string db = (dir.path() / "x.db").string();
  Outcome o =
      Call({"import", "benchmark-log", SamplePath("tflite_xnnpack_rpi_xnnpack_issue999.txt"),
            "--device", "rpi", "--model", "yolo.tflite", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  auto store = store::OpenSqliteStore(db);
  ASSERT_TRUE(store.ok());
  auto job = (*store)->GetJob(nlohmann::json::parse(o.out)["job_id"].get<int64_t>());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->delegate, "xnnpack");
  EXPECT_EQ(job->delegate_options, "");
  EXPECT_FALSE(job->placement.has_value());  // no Replacing line: the placement is unknown

  // NNAPI: the name a benchmark_model runner's jobs use; it took no node.
  const std::string nnapi = (dir.path() / "nnapi.log").string();
  std::ofstream(nnapi) << "Use NNAPI: [1]\nINFO: Created TensorFlow Lite delegate for NNAPI.\n"
                          "Though NNAPI delegate is explicitly applied, the model graph will not "
                          "be executed by the delegate.\nNumber of nodes executed: 9\n"
                          "count=50 first=9 curr=8 min=7 max=9 avg=8 std=1\n";
  o = Call({"import", "benchmark-log", nnapi, "--device", "pixel", "--model", "m.tflite", "--db",
            db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  job = (*store)->GetJob(nlohmann::json::parse(o.out)["job_id"].get<int64_t>());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->delegate, "nnapi");
  EXPECT_EQ(job->delegate_options, "");
  ASSERT_TRUE(job->placement.has_value());
  EXPECT_EQ(job->placement->delegated_nodes, 0);
  EXPECT_EQ(job->placement->cpu_nodes, 9);
  o = Call({"show", "2", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("\tnnapi\t"));
  EXPECT_THAT(o.out, HasSubstr("all 9 on cpu"));

  // The default XNNPACK's application failed: xnnpack, but nothing delegated.
  const std::string failed = (dir.path() / "failed.log").string();
  std::ofstream(failed) << "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
                           "ERROR: Ignoring failed application of the default TensorFlow Lite "
                           "delegate indexed at 0.\ncount=50 first=9 curr=8 min=7 max=9 avg=8 "
                           "std=1\n";
  o = Call(
      {"import", "benchmark-log", failed, "--device", "pixel", "--model", "m.tflite", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  o = Call({"show", "3", "--db", db});
  EXPECT_THAT(o.out, HasSubstr("\txnnpack\t"));
  EXPECT_THAT(o.out, HasSubstr("\tnone delegated\t"));
}

// A log without --report_peak_memory_footprint gives no peak memory: unknown
// everywhere it is shown, never 0.
TEST(ImportCommandTest, AnUnknownPeakMemoryIsNotZero) {
  harness::TempDir dir;
  const std::string db = (dir.path() / "x.db").string();
  Outcome o =
      Call({"import", "benchmark-log", SamplePath("tflite_xnnpack_rpi_xnnpack_issue999.txt"),
            "--device", "rpi", "--model", "yolo.tflite", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  o = Call({"show", "1", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("\tok\t55.04\t-\t-\t"));  // MEAN_MS P90_MS PEAK_RSS_MIB
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("0.0")));
  o = Call({"show", "1", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json metrics = nlohmann::json::parse(o.out)["jobs"][0]["metrics"];
  EXPECT_TRUE(metrics.contains("peak_rss_bytes"));
  EXPECT_TRUE(metrics["peak_rss_bytes"].is_null()) << metrics.dump();
  const std::string json = (dir.path() / "r.json").string();
  o = Call({"report", "1", "--db", db, "--format", "json", "-o", json});
  ASSERT_EQ(o.code, 0) << o.err;
  std::ifstream in(json);
  const nlohmann::json rows = nlohmann::json::parse(in);
  ASSERT_FALSE(rows.empty());
  const nlohmann::json& row = rows.is_array() ? rows[0] : rows["jobs"][0];
  EXPECT_TRUE(row["peak_rss_bytes"].is_null()) << row.dump();
  o = Call({"report", "1", "--db", db, "--format", "md", "-o", "-"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("| 0.0 |")));
  // A log that gives one keeps it.
  o = Call({"import", "benchmark-log", SamplePath("tflite_xnnpack_cros_peak_memory.txt"),
            "--device", "chromebook", "--model", "yolo.tflite", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  o = Call({"show", "2", "--db", db});
  EXPECT_THAT(o.out, HasSubstr("\t93.2\t"));
}

TEST(ImportCommandTest, TheSameBytesTwiceAreRefusedUnlessAgain) {
  harness::TempDir dir;
  const std::string db = (dir.path() / "x.db").string();
  const std::string log = SamplePath("tflite_gpu_android_issue43541.txt");
  Outcome o = Call(
      {"import", "benchmark-log", log, "--device", "pixel", "--model", "d.tflite", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "1\n");
  auto store = store::OpenSqliteStore(db);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(nlohmann::json::parse((*store)->GetRun(1)->spec_json)["import"]["sha256"],  // sha256sum
            "18affb9546e7fd490c7a046537fd4859a6ea4c4d0e4330b7e63e245cac542272");
  // A copy elsewhere is the same bytes; another device or model changes nothing.
  const std::string copy = (dir.path() / "copy.txt").string();
  std::filesystem::copy_file(log, copy);
  o = Call(
      {"import", "benchmark-log", copy, "--device", "other", "--model", "d.tflite", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr(copy + " was imported already, as run 1"));
  EXPECT_THAT(o.err, HasSubstr("--again"));
  EXPECT_EQ((*store)->ListRuns()->size(), 1u);
  o = Call({"import", "benchmark-log", copy, "--device", "other", "--model", "d.tflite", "--db", db,
            "--again"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "2\n");
}

TEST(ImportCommandTest, InferenceDiffLogs) {
  harness::TempDir dir;
  const std::string db = (dir.path() / "x.db").string();
  Outcome o = Call({"import", "inference-diff", SamplePath("inference_diff_gpu_issue42294.txt"),
                    "--device", "phone", "--model", "1_layer.tflite", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc["status"], "ok");
  auto store = store::OpenSqliteStore(db);
  ASSERT_TRUE(store.ok());
  auto run = (*store)->GetRun(doc["run_id"].get<int64_t>());
  ASSERT_TRUE(run.ok());
  const nlohmann::json spec = nlohmann::json::parse(run->spec_json)["import"];
  EXPECT_EQ(spec["tool"], "inference_diff");
  EXPECT_EQ(spec["reference_mean_us"], 51505.2);
  auto job = (*store)->GetJob(doc["job_id"].get<int64_t>());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->runner, "inference_diff");
  EXPECT_EQ(job->delegate, "gpu");  // "GPU delegate is created."
  ASSERT_TRUE(job->metrics.has_value());
  EXPECT_DOUBLE_EQ(job->metrics->mean_us, 76189.3);
  EXPECT_EQ(job->metrics->num_runs, 5);
  auto accuracy = (*store)->GetAccuracy(job->id);
  ASSERT_TRUE(accuracy.ok() && accuracy->has_value());
  EXPECT_EQ((*accuracy)->reference, "cpu");
  ASSERT_EQ((*accuracy)->outputs.size(), 1u);
  EXPECT_DOUBLE_EQ((*accuracy)->outputs[0].mean_abs_error, 5.65735e-08);
  // A benchmark_model log is not inference_diff output, and the reverse.
  const std::string bm = SamplePath("tflite_gpu_android_issue43541.txt");
  o = Call({"import", "inference-diff", bm, "--device", "d", "--model", "m", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr(bm + " is not inference_diff output"));
  EXPECT_THAT(o.err, HasSubstr("Test run latency"));
}

TEST(ImportCommandTest, FailureLogsAndOptions) {
  harness::TempDir dir;
  const std::string db = (dir.path() / "x.db").string();
  Outcome o = Call({"import", "benchmark-log", SamplePath("tflite_failure_xnnpack_issue56166.txt"),
                    "--device", "pixel", "--model", "pruning_model.tflite", "--threads", "2",
                    "--run-name", "old pixel logs", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "1\n");  // the run id
  auto store = store::OpenSqliteStore(db);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->ListJobs(1);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  const store::JobRow& job = jobs->front();
  EXPECT_EQ(job.status, "delegate_error");
  EXPECT_EQ(job.error, "Failed to apply XNNPACK delegate.");
  EXPECT_FALSE(job.metrics.has_value());
  EXPECT_EQ(job.model_sha256, "");  // not a readable file: a name only
  EXPECT_EQ(job.num_threads, 2u);
  EXPECT_EQ((*store)->GetRun(1)->name, "old pixel logs");
  // --delegate wins over the log's.
  o = Call({"import", "benchmark-log", SamplePath("tflite_gpu_android_issue43541.txt"), "--device",
            "pixel", "--model", "denoising_32bit.tflite", "--delegate", "gpu-fp16", "--db", db,
            "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  auto job2 = (*store)->GetJob(nlohmann::json::parse(o.out)["job_id"].get<int64_t>());
  ASSERT_TRUE(job2.ok());
  EXPECT_EQ(job2->delegate, "gpu-fp16");
  EXPECT_EQ(job2->num_threads, 4u);  // the log's "#threads used for CPU inference: [4]"
}

TEST(ImportCommandTest, UnreadableOrForeignFilesExit2) {
  harness::TempDir dir;
  const std::string db = (dir.path() / "x.db").string();
  const std::string missing = (dir.path() / "nosuch.log").string();
  Outcome o =
      Call({"import", "benchmark-log", missing, "--device", "d", "--model", "m", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("cannot read '" + missing + "'"));
  const std::string diff = SamplePath("inference_diff_readme.txt");
  o = Call({"import", "benchmark-log", diff, "--device", "d", "--model", "m", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr(diff + " is not benchmark_model output"));
  EXPECT_THAT(o.err, HasSubstr("Inference timings in us"));
  EXPECT_FALSE(std::filesystem::exists(db));  // nothing was created
  o = Call({"import", "benchmark-log", diff, "--model", "m", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);  // --device is required
}

}  // namespace
}  // namespace dfarm::cli
