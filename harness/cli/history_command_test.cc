// dfarm history and dfarm regressions through cli::Main, over a database with
// a planted step (harness/analysis/cell_history_test.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "harness/analysis/cell_history_test.h"
#include "harness/cli/cli.h"
#include "harness/cli/cli_test_util.h"

namespace dfarm::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using test_util::Call;
using test_util::Outcome;

TEST(HistoryCommand, JsonSeriesWithTheChangePoint) {
  harness::TempDir dir;
  const harness::PlantedHistory h = harness::FillHistory(dir);
  Outcome o = Call({"history", "--model", "a.tflite", "--delegate", "xnnpack", "--options",
                    "fp16:false", "--device", "local", "--threads", "1", "--db", h.db, "--json"});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const nlohmann::json doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc["cell"]["model"], "a.tflite");
  EXPECT_EQ(doc["cell"]["model_sha256"], h.sha_a);
  EXPECT_EQ(doc["cell"]["delegate"], "xnnpack");
  EXPECT_EQ(doc["cell"]["delegate_options"], "fp16:false");
  EXPECT_EQ(doc["cell"]["num_threads"], 1);
  EXPECT_EQ(doc["cell"]["runner"], "");
  EXPECT_EQ(doc["cell"]["device"], "local");
  EXPECT_EQ(doc["metric"], "p50");
  ASSERT_EQ(doc["points"].size(), harness::PlantedHistory::kRuns);
  EXPECT_EQ(doc["points"][0]["run_id"], h.runs[0]);
  EXPECT_EQ(doc["points"][0]["trials"], 2);
  EXPECT_TRUE(doc["points"][0]["created_at"].is_string());
  EXPECT_NEAR(doc["points"][0]["value"].get<double>(), 1000, 50);
  ASSERT_EQ(doc["change_points"].size(), 1u);
  const nlohmann::json& c = doc["change_points"][0];
  EXPECT_EQ(c["run_id"], h.runs[harness::PlantedHistory::kLatencyStepAt]);
  EXPECT_EQ(c["index"], harness::PlantedHistory::kLatencyStepAt);
  EXPECT_EQ(c["kind"], "regression");
  EXPECT_NEAR(c["change_pct"].get<double>(), 10, 2);
  EXPECT_LT(c["before"].get<double>(), c["after"].get<double>());
}

TEST(HistoryCommand, TextTableMarksTheChange) {
  harness::TempDir dir;
  const harness::PlantedHistory h = harness::FillHistory(dir);
  Outcome o = Call({"history", "--model", "b.tflite", "--delegate", "cpu", "--metric", "peak_rss",
                    "--db", h.db});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  EXPECT_THAT(o.out, HasSubstr("cell: b.tflite (bbbbbbbb) cpu x2 @local"));
  EXPECT_THAT(o.out, HasSubstr("metric: peak_rss (bytes)"));
  EXPECT_THAT(o.out, HasSubstr("-20.0% improvement"));
  EXPECT_THAT(o.out, HasSubstr("30 runs, 1 change point"));
}

TEST(HistoryCommand, AmbiguousOrMissingCellsExit2) {
  harness::TempDir dir;
  const harness::PlantedHistory h = harness::FillHistory(dir);
  Outcome o = Call({"history", "--model", "a.tflite", "--delegate", "xnnpack", "--db", h.db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, StartsWith("dfarm: error: 2 cells match"));
  EXPECT_THAT(o.err, HasSubstr("fp16:true"));
  o = Call({"history", "--model", "a.tflite", "--delegate", "gpu", "--db", h.db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("no cell matches --model a.tflite --delegate gpu"));
  o = Call(
      {"history", "--model", "a.tflite", "--delegate", "cpu", "--metric", "p77", "--db", h.db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("unknown --metric 'p77'"));
  o = Call({"history", "--delegate", "cpu", "--db", h.db});
  EXPECT_EQ(o.code, kExitUsage);
  o = Call({"history", "--model", "a.tflite", "--delegate", "cpu", "--db",
            (dir.path() / "none.db").string()});
  EXPECT_EQ(o.code, kExitInfra);  // no database
}

TEST(RegressionsCommand, NewestFirstWithKinds) {
  harness::TempDir dir;
  const harness::PlantedHistory h = harness::FillHistory(dir);
  Outcome o = Call({"regressions", "--db", h.db, "--json"});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  nlohmann::json doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc["metric"], "p50");
  ASSERT_EQ(doc["changes"].size(), 1u);
  EXPECT_EQ(doc["changes"][0]["kind"], "regression");
  EXPECT_EQ(doc["changes"][0]["cell"]["delegate_options"], "fp16:false");
  EXPECT_EQ(doc["changes"][0]["run_id"], h.runs[harness::PlantedHistory::kLatencyStepAt]);
  EXPECT_EQ(doc["changes"][0]["runs"], harness::PlantedHistory::kRuns);

  o = Call({"regressions", "--db", h.db, "--metric", "peak_rss"});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  EXPECT_THAT(o.out, HasSubstr("-20.0% improvement"));
  EXPECT_THAT(o.out, HasSubstr("0 regressions, 1 improvement"));

  o = Call({"regressions", "--db", h.db, "--since", "2999-01-01", "--json"});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  EXPECT_TRUE(nlohmann::json::parse(o.out)["changes"].empty());
  o = Call({"regressions", "--db", h.db, "--since", "yesterday"});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("--since must be a date"));
}

TEST(HistoryCommand, HelpListsTheExitCodes) {
  for (const char* cmd : {"history", "regressions"}) {
    Outcome o = Call({cmd, "--help"});
    EXPECT_EQ(o.code, 0) << cmd;
    EXPECT_THAT(o.out, HasSubstr("Exit codes: 0 ok")) << cmd;
  }
}

}  // namespace
}  // namespace dfarm::cli
