// External delegate plugins end to end, with the real dfarm, dfarm-agent and
// dfarm-runner: a sweep names a plugin file on the host, dfarm pushes it to the
// local agent by sha256, the agent gives the runner its own store path, and
// the stored placement shows which nodes the plugin took. A plugin that
// crashes the runner costs that job only.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/store/store.h"
#include "tests/e2e/e2e_util.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;
namespace tfl = ::dfarm::tflite;

class PluginE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << exe << " is not built";
    }
    dir_ = fs::temp_directory_path() /
           ("dfarm_plugin_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "specs");
    fs::create_directories(dir_ / "plugins");
    db_ = (dir_ / "x.db").string();
  }
  void TearDown() override {
    if (!dir_.empty() && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  // Copies a built plugin next to the specs, so the spec names it relatively.
  std::string CopyPlugin(const std::string& built) {
    EXPECT_TRUE(fs::exists(built)) << built << " is not built";
    fs::path to = dir_ / "plugins" / fs::path(built).filename();
    fs::copy_file(built, to, fs::copy_options::overwrite_existing);
    return "../plugins/" + fs::path(built).filename().string();
  }

  // in -> ADD(in, c) -> RELU -> out: the example plugin takes the ADD (float32,
  // same shapes) and refuses the RELU, which stays on the reference kernels.
  std::string AddReluModel() {
    testing::ModelBuilder b;
    int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "in");
    int c = b.AddConstFloat32({1, 4}, {1, -2, 3, -4}, "c");
    int sum = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "sum");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
    b.AddAdd(in, c, sum);
    b.AddUnary(tfl::BuiltinOperator::RELU, sum, out);
    b.SetInputs({in});
    b.SetOutputs({out});
    std::string path = (dir_ / "add_relu.tflite").string();
    EXPECT_TRUE(b.WriteFile(path));
    return path;
  }

  // Runs a sweep of `delegates` on `model` on the local device; returns the run id.
  int64_t Sweep(const std::string& model, const json& delegates) {
    json spec = {{"name", "plugins"},
                 {"models", {model}},
                 {"delegates", delegates},
                 {"devices", {"local"}},
                 {"benchmark", {{"warmup_runs", 1}, {"num_runs", 3}, {"timeout_s", 60}}},
                 {"scheduler", {{"retries", 0}}}};
    fs::path spec_path = dir_ / "specs" / "spec.json";
    std::ofstream(spec_path) << spec.dump(2);
    Child c = Child::Spawn({(BinDir() / "dfarm").string(), "sweep", spec_path.string(), "--db", db_,
                            "--json", "--agent-store", (dir_ / "agent-store").string()},
                           (dir_ / "out").string(), (dir_ / "err").string());
    int status = c.Wait();
    std::string out = Slurp(dir_ / "out");
    std::string err = Slurp(dir_ / "err");
    // Exit 1: some job failed; the run is still recorded.
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) <= 1) << status << "\n" << err;
    json summary = json::parse(out, nullptr, false);
    if (!summary.is_object() || !summary.contains("run_id")) {
      ADD_FAILURE() << "no summary: " << out << "\n" << err;
      return 0;
    }
    return summary["run_id"].get<int64_t>();
  }

  // Whether some artifact in the local agent's store has the bytes of `file`.
  bool AgentStores(const fs::path& file) {
    const std::string want = Slurp(file);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "agent-store" / "artifacts", ec)) {
      if (e.is_regular_file() && e.file_size() == want.size() && Slurp(e.path()) == want) {
        return true;
      }
    }
    return false;
  }

  fs::path dir_;
  std::string db_;
};

TEST_F(PluginE2eTest, ExamplePluginTakesTheAddAndLeavesTheRest) {
  const std::string model = AddReluModel();
  const std::string plugin = CopyPlugin(DFARM_EXAMPLE_PLUGIN);
  const int64_t run_id =
      Sweep(model, {{{"name", "cpu"}}, {{"name", "external"}, {"options", {{"path", plugin}}}}});
  ASSERT_GT(run_id, 0);

  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(run_id);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  ASSERT_EQ(jobs->size(), 2u);
  const store::JobRow& cpu = (*jobs)[0];
  const store::JobRow& ext = (*jobs)[1];
  ASSERT_EQ(cpu.delegate, "cpu");
  EXPECT_EQ(cpu.status, "ok") << cpu.error;
  ASSERT_EQ(ext.delegate, "external");
  ASSERT_EQ(ext.status, "ok") << ext.error;
  // Users see the plugin's file name, never a host or device path.
  EXPECT_EQ(ext.delegate_options, "path:libdfarm_example_delegate.so");
  EXPECT_TRUE(AgentStores(DFARM_EXAMPLE_PLUGIN)) << "the plugin was not pushed to the agent";

  ASSERT_TRUE(ext.placement.has_value());
  EXPECT_EQ(ext.placement->nodes, 2);
  EXPECT_EQ(ext.placement->partitions, 1);
  EXPECT_EQ(ext.placement->delegated_nodes, 1);
  EXPECT_EQ(ext.placement->cpu_nodes, 1);
  EXPECT_EQ(ext.placement->delegates, "example");

  auto placement = (*store)->GetPlacement(ext.id);
  ASSERT_TRUE(placement.ok()) << placement.message();
  ASSERT_TRUE(placement->has_value());
  const std::vector<store::PlacementNode>& nodes = (*placement)->nodes;
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].op, "ADD");
  EXPECT_EQ(nodes[0].delegate, "example");
  EXPECT_EQ(nodes[0].partition, 0);
  EXPECT_EQ(nodes[1].op, "RELU");
  EXPECT_EQ(nodes[1].delegate, "cpu");
  EXPECT_NE(nodes[1].reason.find("example: RELU is not supported"), std::string::npos)
      << nodes[1].reason;

  // The cpu job of the same sweep ran everything on the reference kernels.
  ASSERT_TRUE(cpu.placement.has_value());
  EXPECT_EQ(cpu.placement->delegated_nodes, 0);
  EXPECT_EQ(cpu.placement->cpu_nodes, 2);
}

#ifdef DFARM_CRASH_PLUGIN
TEST_F(PluginE2eTest, CrashingPluginCostsOnlyItsJob) {
  const std::string model = AddReluModel();
  const std::string plugin = CopyPlugin(DFARM_CRASH_PLUGIN);
  const int64_t run_id =
      Sweep(model, {{{"name", "external"}, {"options", {{"path", plugin}}}}, {{"name", "cpu"}}});
  ASSERT_GT(run_id, 0);

  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(run_id);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  ASSERT_EQ(jobs->size(), 2u);
  const store::JobRow& crashed = (*jobs)[0];
  const store::JobRow& next = (*jobs)[1];
  ASSERT_EQ(crashed.delegate, "external");
  EXPECT_EQ(crashed.status, "crashed") << crashed.error;
  EXPECT_NE(crashed.error.find("SIGSEGV"), std::string::npos) << crashed.error;
  EXPECT_EQ(crashed.delegate_options, "path:libdfarm_bad_plugin_crash.so");
  // The next job on the same device runs normally.
  ASSERT_EQ(next.delegate, "cpu");
  EXPECT_EQ(next.device, crashed.device);
  EXPECT_EQ(next.status, "ok") << next.error;
}
#endif

}  // namespace
}  // namespace dfarm::e2e
