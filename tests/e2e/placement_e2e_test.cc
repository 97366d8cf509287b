// A real sweep keeps what the runner and the agent report beside the metrics:
// the runner's per-node placement and the device state the agent read before
// and after the runner, all in the store and in `dfarm show --json`.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/store/store.h"
#include "tests/e2e/e2e_util.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;

const std::string kModel = "face_detection_short_range.tflite";

class PlacementE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = fs::path(DFARM_MODELS_DIR) / kModel;
    if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << (BinDir() / exe) << " is not built";
    }
    dir_ = fs::temp_directory_path() / ("dfarm_placement_e2e_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "x.db").string();
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Runs `args` (argv[0] a path; each single-quoted, test paths hold no
  // quotes) with stdout and stderr to files; returns the exit code.
  int Exec(const std::vector<std::string>& args, std::string* out, std::string* err) {
    std::string cmd = "cd '" + dir_.string() + "' &&";
    for (const std::string& a : args) cmd += " '" + a + "'";
    cmd += " >'" + (dir_ / "stdout").string() + "' 2>'" + (dir_ / "stderr").string() + "'";
    int status = std::system(cmd.c_str());
    *out = Slurp(dir_ / "stdout");
    *err = Slurp(dir_ / "stderr");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  fs::path model_, dir_;
  std::string db_;
};

TEST_F(PlacementE2eTest, SweepKeepsPlacementAndDeviceState) {
  // What the runner says about the model on its own: one placement entry per node.
  std::string out, err;
  ASSERT_EQ(Exec({(BinDir() / "dfarm-runner").string(), "--model", model_.string(), "--warmup-runs",
                  "0", "--num-runs", "1", "--json"},
                 &out, &err),
            0)
      << err;
  json direct = json::parse(out, nullptr, false);
  ASSERT_TRUE(direct.is_object()) << out;
  ASSERT_TRUE(direct.contains("placement")) << out;
  const size_t model_nodes = direct["placement"]["nodes"].size();
  ASSERT_GT(model_nodes, 10u);

  json spec = {{"name", "placement"},
               {"models", {model_.string()}},
               {"delegates", {{{"name", "cpu"}}}},
               {"devices", {"local"}},
               {"benchmark", {{"warmup_runs", 0}, {"num_runs", 2}, {"timeout_s", 120}}}};
  std::ofstream(dir_ / "spec.json") << spec.dump(2);
  ASSERT_EQ(Exec({(BinDir() / "dfarm").string(), "sweep", (dir_ / "spec.json").string(), "--db",
                  db_, "--json", "--agent-store", (dir_ / "agent-store").string()},
                 &out, &err),
            0)
      << err;
  json summary = json::parse(out, nullptr, false);
  ASSERT_TRUE(summary.is_object()) << out;
  const int64_t run_id = summary["run_id"].get<int64_t>();

  int64_t job_id = 0;
  {
    auto store = store::OpenSqliteStore(db_);
    ASSERT_TRUE(store.ok()) << store.message();
    auto jobs = (*store)->ListJobs(run_id);
    ASSERT_TRUE(jobs.ok()) << jobs.message();
    ASSERT_EQ(jobs->size(), 1u);
    const store::JobRow& job = (*jobs)[0];
    job_id = job.id;
    ASSERT_EQ(job.status, "ok") << job.error;
    ASSERT_TRUE(job.placement.has_value());
    EXPECT_EQ(job.placement->nodes, static_cast<int64_t>(model_nodes));
    EXPECT_EQ(job.placement->partitions, 0);  // the cpu delegate makes no partitions
    EXPECT_EQ(job.placement->delegated_nodes, 0);
    EXPECT_EQ(job.placement->cpu_nodes, static_cast<int64_t>(model_nodes));

    auto placement = (*store)->GetPlacement(job.id);
    ASSERT_TRUE(placement.ok()) << placement.message();
    ASSERT_TRUE(placement->has_value());
    ASSERT_EQ((*placement)->nodes.size(), model_nodes);
    for (size_t i = 0; i < model_nodes; ++i) {
      const store::PlacementNode& n = (*placement)->nodes[i];
      EXPECT_EQ(n.index, static_cast<int64_t>(i));
      EXPECT_EQ(n.op, direct["placement"]["nodes"][i]["op"].get<std::string>()) << i;
      EXPECT_EQ(n.delegate, "cpu");
    }

    auto detail = (*store)->GetJobDetail(job.id);
    ASSERT_TRUE(detail.ok()) << detail.message();
    ASSERT_TRUE(detail->state_before_json.has_value()) << "the agent read no state before";
    ASSERT_TRUE(detail->state_after_json.has_value()) << "the agent read no state after";
    json before = json::parse(*detail->state_before_json, nullptr, false);
    json after = json::parse(*detail->state_after_json, nullptr, false);
    ASSERT_TRUE(before.is_object() && after.is_object());
    // Linux always has /proc/loadavg.
    ASSERT_TRUE(before.contains("load_avg_1m")) << before.dump();
    EXPECT_GE(before["load_avg_1m"].get<double>(), 0);
    ASSERT_TRUE(after.contains("load_avg_1m")) << after.dump();
    EXPECT_GT(before["unix_ms"].get<int64_t>(), 0);
    EXPECT_GE(after["unix_ms"].get<int64_t>(), before["unix_ms"].get<int64_t>());
    EXPECT_EQ(job.started_hot || job.throttled, !job.state_note.empty()) << job.state_note;
  }

  ASSERT_EQ(
      Exec({(BinDir() / "dfarm").string(), "show", std::to_string(run_id), "--db", db_, "--json"},
           &out, &err),
      0)
      << err;
  json show = json::parse(out, nullptr, false);
  ASSERT_TRUE(show.is_object()) << out;
  const json& j = show["jobs"][0];
  EXPECT_EQ(j["placement"]["cpu_nodes"], model_nodes);
  EXPECT_EQ(j["placement"]["delegated_nodes"], 0);
  EXPECT_FALSE(j["placement"].contains("nodes"));
  EXPECT_TRUE(j["started_hot"].is_boolean());
  EXPECT_TRUE(j["throttled"].is_boolean());
  EXPECT_TRUE(j["state_note"].is_string());

  ASSERT_EQ(Exec({(BinDir() / "dfarm").string(), "show", std::to_string(run_id), "--job",
                  std::to_string(job_id), "--db", db_, "--json"},
                 &out, &err),
            0)
      << err;
  json drill = json::parse(out, nullptr, false);
  ASSERT_TRUE(drill.is_object()) << out;
  EXPECT_EQ(drill["jobs"][0]["placement"]["nodes"].size(), model_nodes);
  EXPECT_TRUE(drill["jobs"][0]["state_before"].contains("load_avg_1m"));
}

}  // namespace
}  // namespace dfarm::e2e
