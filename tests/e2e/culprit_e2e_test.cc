// The culprit finder end to end: a sweep runs a 70-node model on
// libdfarm_perturb_delegate.so with one planted bad node; `dfarm culprit`
// re-runs it on the local agent with the delegate restricted to node ranges
// and must name that node in about log2(N) runs, with the per-layer error
// profile showing where the error starts.
#include <gtest/gtest.h>

#include <cmath>
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

constexpr int kNodes = 70;

class CulpritE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << exe << " is not built";
    }
    dir_ = fs::temp_directory_path() /
           ("dfarm_culprit_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "x.db").string();
    fs::copy_file(DFARM_PERTURB_DELEGATE, dir_ / "libdfarm_perturb_delegate.so");
  }
  void TearDown() override {
    if (!dir_.empty() && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  // x [1,8] -> 70 nodes: ADD/SUB of constants, every tenth a RELU (which the
  // plugin refuses, so the delegated nodes form seven partitions).
  std::string ChainModel() {
    testing::ModelBuilder b;
    int prev = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8}, "x");
    const int input = prev;
    for (int i = 0; i < kNodes; ++i) {
      int t = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8}, "t" + std::to_string(i));
      if (i % 10 == 9) {
        b.AddUnary(tfl::BuiltinOperator::RELU, prev, t);
      } else {
        int c =
            b.AddConstFloat32({1}, {0.01f * static_cast<float>(i % 7)}, "c" + std::to_string(i));
        if (i % 2 == 0) {
          b.AddAdd(prev, c, t);
        } else {
          b.AddBinary(tfl::BuiltinOperator::SUB, prev, c, t);
        }
      }
      prev = t;
    }
    b.SetInputs({input});
    b.SetOutputs({prev});
    std::string path = (dir_ / "chain70.tflite").string();
    EXPECT_TRUE(b.WriteFile(path));
    return path;
  }

  // A sweep of the model on the perturbing plugin with `options`; the job id.
  int64_t SweepJob(const std::string& model, const json& options, int64_t* run_id) {
    json delegate_options = options;
    delegate_options["path"] = "libdfarm_perturb_delegate.so";
    json spec = json::object();
    spec["name"] = "culprit";
    spec["models"] = json::array({model});
    spec["delegates"] = json::array({json{{"name", "external"}, {"options", delegate_options}}});
    spec["devices"] = json::array({"local"});
    spec["benchmark"] = {{"warmup_runs", 0}, {"num_runs", 1}, {"timeout_s", 60}};
    std::ofstream(dir_ / "spec.json") << spec.dump(2);
    Outcome o = RunToEnd({(BinDir() / "dfarm").string(), "sweep", (dir_ / "spec.json").string(),
                          "--db", db_, "--json", "--agent-store", AgentStore()},
                         dir_ / "out", dir_ / "err");
    EXPECT_LE(o.code, 1) << o.err;
    json summary = json::parse(o.out, nullptr, false);
    if (!summary.is_object() || !summary.contains("run_id")) {
      ADD_FAILURE() << "no summary: " << o.out << "\n" << o.err;
      return 0;
    }
    *run_id = summary["run_id"].get<int64_t>();
    auto store = store::OpenSqliteStore(db_);
    EXPECT_TRUE(store.ok());
    auto jobs = (*store)->ListJobs(*run_id);
    EXPECT_TRUE(jobs.ok() && jobs->size() == 1u);
    return jobs.ok() && jobs->size() == 1u ? jobs->front().id : 0;
  }

  Outcome Culprit(int64_t run_id, int64_t job_id, bool json_out = true) {
    return CulpritOf(run_id, {"--job", std::to_string(job_id)}, json_out);
  }

  // `which`: --job ID, or a cell's --model/--delegate/--device.
  Outcome CulpritOf(int64_t run_id, const std::vector<std::string>& which, bool json_out) {
    std::vector<std::string> argv = {(BinDir() / "dfarm").string(), "culprit",
                                     std::to_string(run_id)};
    argv.insert(argv.end(), which.begin(), which.end());
    for (const std::string& a :
         {std::string("--db"), db_, std::string("--agent-store"), AgentStore()}) {
      argv.push_back(a);
    }
    if (json_out) argv.push_back("--json");
    return RunToEnd(argv, dir_ / "culprit.out", dir_ / "culprit.err");
  }

  std::string AgentStore() const { return (dir_ / "agent-store").string(); }

  fs::path dir_;
  std::string db_;
};

TEST_F(CulpritE2eTest, FindsThePlantedNodeInAboutLog2Runs) {
  const std::string model = ChainModel();
  int64_t run_id = 0;
  json perturb = json::object();
  perturb["perturb_node"] = "37";
  const int64_t job = SweepJob(model, perturb, &run_id);
  ASSERT_GT(job, 0);
  Outcome o = Culprit(run_id, job);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json r = json::parse(o.out);
  EXPECT_EQ(r["node"], 37) << r.dump(2);
  EXPECT_EQ(r["op"], "SUB");
  EXPECT_EQ(r["candidates"], 63);
  // One run with every node, then a bisection over 63 candidates.
  const int runs = r["runs"].get<int>();
  EXPECT_LE(runs, 1 + static_cast<int>(std::ceil(std::log2(63.0))));
  EXPECT_GE(runs, 1 + static_cast<int>(std::floor(std::log2(63.0))));
  // The per-layer profile at the culprit: nothing before node 37's partition,
  // the error from there on.
  ASSERT_FALSE(r["layers"].empty());
  for (const json& l : r["layers"]) {
    const int node = l["node"].get<int>();
    const double err = l["max_abs_error"].get<double>();
    if (node < 30) EXPECT_EQ(err, 0) << l;
    if (node > 37) EXPECT_NEAR(err, 0.05, 1e-5) << l;
  }
  // The text form names the node too; a cell stands for its worst trial.
  Outcome text = CulpritOf(
      run_id, {"--model", "chain70.tflite", "--delegate", "external", "--device", "local"}, false);
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("job " + std::to_string(job) + ":"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("culprit: node 37 (SUB)"), std::string::npos) << text.out;
  Outcome none = CulpritOf(run_id, {"--model", "chain70.tflite", "--delegate", "xnnpack"}, false);
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("has no ok job of model 'chain70.tflite' on delegate 'xnnpack'"),
            std::string::npos)
      << none.err;
  EXPECT_EQ(CulpritOf(run_id, {}, false).code, 2);
}

TEST_F(CulpritE2eTest, ACorrectDelegateHasNoCulprit) {
  int64_t run_id = 0;
  const int64_t job = SweepJob(ChainModel(), json::object(), &run_id);
  ASSERT_GT(job, 0);
  Outcome o = Culprit(run_id, job);
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  json r = json::parse(o.out);
  EXPECT_TRUE(r["node"].is_null());
  EXPECT_EQ(r["runs"], 1);
  EXPECT_NE(r["note"].get<std::string>().find("nothing to find"), std::string::npos);
  // A job that does not exist is a usage error naming it.
  Outcome missing = Culprit(run_id, job + 100);
  EXPECT_EQ(missing.code, 2) << missing.err;
}

}  // namespace
}  // namespace dfarm::e2e
