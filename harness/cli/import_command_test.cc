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
  auto detail = (*store)->GetJobDetail(job->id);
  ASSERT_TRUE(detail.ok());
  EXPECT_THAT(detail->stderr_tail, HasSubstr("Inference timings in us"));
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
