// Runs the real `dfarm sweep` over a real model: dfarm starts dfarm-agent as
// its `local` device, pushes dfarm-runner and the model, and records the
// result in a SQLite file that this test then reads through the store API.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "reports/store/store.h"
#include "tests/e2e/e2e_shell.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kModel = "face_detection_short_range.tflite";

using dfarm::e2e::Outcome;
using dfarm::e2e::Slurp;

class SweepE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = fs::path(DFARM_MODELS_DIR) / kModel;
    bin_ = fs::path(DFARM_BINARY_DIR) / "bin";
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(bin_ / exe)) << (bin_ / exe) << " is not built";
    }
    dir_ = fs::temp_directory_path() /
           ("dfarm_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "tmp");
    db_ = (dir_ / "tmp" / "x.db").string();
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Runs bin/dfarm with `args` (each single-quoted; test paths hold no quotes).
  Outcome Dfarm(const std::vector<std::string>& args) {
    return dfarm::e2e::RunShell(dir_, dfarm::e2e::QuotedCommand(bin_ / "dfarm", args));
  }

  std::string WriteSpec(const std::string& model_path) {
    json spec = {{"name", "e2e"},
                 {"models", {model_path}},
                 {"delegates", {{{"name", "cpu"}}}},
                 {"devices", {"local"}},
                 {"benchmark", {{"warmup_runs", 1}, {"num_runs", 5}, {"timeout_s", 120}}}};
    fs::path p = dir_ / "spec.json";
    std::ofstream(p) << spec.dump(2);
    return p.string();
  }

  std::string AgentStore() const { return (dir_ / "agent-store").string(); }

  fs::path model_, bin_, dir_;
  std::string db_;
};

TEST_F(SweepE2eTest, SweepShowReport) {
  if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
  std::string spec = WriteSpec(model_.string());
  Outcome sweep = Dfarm({"sweep", spec, "--db", db_, "--json", "--agent-store", AgentStore()});
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  json summary = json::parse(sweep.out, nullptr, false);
  ASSERT_TRUE(summary.is_object()) << sweep.out;
  EXPECT_EQ(summary["jobs"], 1);
  EXPECT_EQ(summary["ok"], 1);
  EXPECT_EQ(summary["failed"], 0);
  EXPECT_GT(summary["bytes_pushed"].get<uint64_t>(), fs::file_size(model_));  // runner + model
  int64_t run_id = summary["run_id"].get<int64_t>();
  EXPECT_NE(sweep.err.find("[1/1] face_detection_short_range cpu local: ok mean "),
            std::string::npos)
      << sweep.err;

  {
    auto store = dfarm::store::OpenSqliteStore(db_);
    ASSERT_TRUE(store.ok()) << store.message();
    auto run = (*store)->GetRun(run_id);
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(run->name, "e2e");
    EXPECT_EQ(run->status, "finished");
    auto jobs = (*store)->ListJobs(run_id);
    ASSERT_TRUE(jobs.ok()) << jobs.message();
    ASSERT_EQ(jobs->size(), 1u);
    const dfarm::store::JobRow& job = (*jobs)[0];
    EXPECT_EQ(job.status, "ok") << job.error;
    EXPECT_EQ(job.model, kModel);
    EXPECT_EQ(job.delegate, "cpu");
    EXPECT_EQ(job.device, "local");
    ASSERT_TRUE(job.metrics.has_value());
    EXPECT_GT(job.metrics->mean_us, 0);
    EXPECT_GT(job.metrics->peak_rss_bytes, 0);
    EXPECT_EQ(job.metrics->num_runs, 5);
    auto samples = (*store)->GetSamples(job.id);
    ASSERT_TRUE(samples.ok()) << samples.message();
    EXPECT_EQ(samples->size(), 5u);
    auto devices = (*store)->ListDevices();
    ASSERT_TRUE(devices.ok());
    ASSERT_EQ(devices->size(), 1u);
    EXPECT_EQ((*devices)[0].name, "local");
  }

  Outcome show = Dfarm({"show", std::to_string(run_id), "--db", db_, "--json"});
  ASSERT_EQ(show.code, 0) << show.err;
  json doc = json::parse(show.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << show.out;
  EXPECT_EQ(doc["run"]["id"], run_id);
  ASSERT_EQ(doc["jobs"].size(), 1u);
  EXPECT_EQ(doc["jobs"][0]["model"], kModel);
  EXPECT_EQ(doc["jobs"][0]["status"], "ok");
  for (const char* key :
       {"init_us", "first_us", "mean_us", "p50_us", "p90_us", "p99_us", "peak_rss_bytes"}) {
    EXPECT_TRUE(doc["jobs"][0]["metrics"].contains(key)) << key;
  }
  EXPECT_GT(doc["jobs"][0]["metrics"]["mean_us"].get<double>(), 0);

  std::string html = (dir_ / "f.html").string();
  Outcome report =
      Dfarm({"report", std::to_string(run_id), "--db", db_, "--format", "html", "-o", html});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_NE(Slurp(html).find(kModel), std::string::npos);

  // A second sweep finds everything in the agent's store already.
  Outcome again = Dfarm({"sweep", spec, "--db", db_, "--json", "--agent-store", AgentStore()});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out, nullptr, false)["bytes_pushed"], 0);
}

// benchmark.repeats 3: each cell runs as 3 jobs, a fresh runner
// each, stored with trials 0..2 and the runner build; a tag names the run.
TEST_F(SweepE2eTest, RepeatsStoreOneOkJobPerTrial) {
  if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
  json spec = {{"name", "repeats"},
               {"models", {model_.string()}},
               {"delegates", {{{"name", "cpu"}}}},
               {"devices", {"local"}},
               {"benchmark",
                {{"warmup_runs", 0}, {"num_runs", 2}, {"num_threads", {1, 2}}, {"repeats", 3}}}};
  fs::path spec_path = dir_ / "repeats.json";
  std::ofstream(spec_path) << spec.dump(2);
  Outcome sweep =
      Dfarm({"sweep", spec_path.string(), "--db", db_, "--json", "--agent-store", AgentStore()});
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  json summary = json::parse(sweep.out, nullptr, false);
  ASSERT_TRUE(summary.is_object()) << sweep.out;
  EXPECT_EQ(summary["jobs"], 6);
  EXPECT_EQ(summary["ok"], 6);
  int64_t run_id = summary["run_id"].get<int64_t>();
  {
    auto store = dfarm::store::OpenSqliteStore(db_);
    ASSERT_TRUE(store.ok()) << store.message();
    auto jobs = (*store)->ListJobs(run_id);
    ASSERT_TRUE(jobs.ok()) << jobs.message();
    ASSERT_EQ(jobs->size(), 6u);
    std::map<uint32_t, std::set<int64_t>> trials;  // num_threads -> trials
    std::set<std::string> keys;
    for (size_t i = 0; i < jobs->size(); ++i) {
      const dfarm::store::JobRow& j = (*jobs)[i];
      EXPECT_EQ(j.status, "ok") << j.error;
      EXPECT_EQ(j.trial, static_cast<int64_t>(i / 2)) << "rounds run in order";
      EXPECT_EQ(j.runner_sha256.size(), 64u);
      trials[j.num_threads].insert(j.trial);
      keys.insert(j.job_key);
    }
    EXPECT_EQ(keys.size(), 6u);
    ASSERT_EQ(trials.size(), 2u);
    for (const auto& [cell, t] : trials) EXPECT_EQ(t, (std::set<int64_t>{0, 1, 2})) << cell;
  }
  ASSERT_EQ(Dfarm({"tag", std::to_string(run_id), "e2e-base", "--db", db_}).code, 0);
  Outcome show = Dfarm({"show", "tag:e2e-base", "--db", db_, "--json"});
  ASSERT_EQ(show.code, 0) << show.err;
  json doc = json::parse(show.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << show.out;
  EXPECT_EQ(doc["run"]["id"], run_id);
  ASSERT_EQ(doc["jobs"].size(), 6u);
  EXPECT_EQ(doc["jobs"][5]["trial"], 2);
}

TEST_F(SweepE2eTest, BrokenModelIsAJobFailure) {
  fs::path broken = dir_ / "broken.tflite";
  std::ofstream(broken) << "this is not a flatbuffer";
  Outcome sweep = Dfarm(
      {"sweep", WriteSpec(broken.string()), "--db", db_, "--json", "--agent-store", AgentStore()});
  ASSERT_EQ(sweep.code, 1) << sweep.out << sweep.err;
  json summary = json::parse(sweep.out, nullptr, false);
  EXPECT_EQ(summary["failed"], 1);
  auto store = dfarm::store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(summary["run_id"].get<int64_t>());
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].status, "model_error");
  EXPECT_FALSE((*jobs)[0].error.empty());
}

}  // namespace
