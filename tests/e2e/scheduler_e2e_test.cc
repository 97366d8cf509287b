// The scheduler end to end, with the real dfarm, dfarm-agent and dfarm-runner:
// a sweep across three devices at once (local plus two tcp:// agents that the
// test starts on 127.0.0.1), killing an agent mid-sweep, and killing dfarm
// mid-sweep and finishing the run with --resume. Each test counts rows in the
// store: every job ends in exactly one terminal state, none lost, none doubled.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "reports/store/store.h"
#include "tests/e2e/e2e_util.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;
namespace tfl = ::dfarm::tflite;

const char* kFace = "face_detection_short_range.tflite";

class SchedulerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    face_ = fs::path(DFARM_MODELS_DIR) / kFace;
    if (!fs::exists(face_)) GTEST_SKIP() << face_ << " is absent (run scripts/setup.sh)";
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << exe << " is not built";
    }
    dir_ = fs::temp_directory_path() /
           ("dfarm_sched_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "x.db").string();
  }
  void TearDown() override {
    if (!dir_.empty() && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  std::vector<std::string> DfarmArgs(const std::vector<std::string>& args) const {
    std::vector<std::string> all = {(BinDir() / "dfarm").string()};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--db", db_, "--agent-store", (dir_ / "local-store").string()});
    return all;
  }

  // Runs dfarm to the end.
  Outcome Dfarm(const std::vector<std::string>& args) {
    return RunToEnd(DfarmArgs(args), dir_ / "out", dir_ / "err");
  }

  // A model of one ADD (input + constant): the cheapest job there is.
  std::string AddModel() {
    testing::ModelBuilder b;
    int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "in");
    int c = b.AddConstFloat32({1, 4}, {1, 2, 3, 4}, "c");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
    b.AddAdd(in, c, out);
    b.SetInputs({in});
    b.SetOutputs({out});
    std::string path = (dir_ / "add.tflite").string();
    EXPECT_TRUE(b.WriteFile(path));
    return path;
  }

  std::string WriteSpec(const json& spec) {
    fs::path p = dir_ / "spec.json";
    std::ofstream(p) << spec.dump(2);
    return p.string();
  }

  int64_t Count(const std::string& where) {
    return QueryInt(db_, "SELECT count(*) FROM jobs WHERE " + where);
  }

  // Every job of run 1 ended in one final status with one result row, and
  // its samples were stored once.
  void ExpectAllFinishedOnce(int64_t jobs, int64_t num_runs) {
    EXPECT_EQ(Count("run_id = 1"), jobs);
    EXPECT_EQ(Count(std::string("run_id = 1 AND status IN ") + kFinal), jobs);
    EXPECT_EQ(QueryInt(db_,
                       "SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id "
                       "WHERE j.run_id = 1"),
              jobs);
    EXPECT_EQ(
        QueryInt(db_, "SELECT count(DISTINCT job_key || moved_from) FROM jobs WHERE run_id = 1"),
        jobs);
    EXPECT_EQ(QueryInt(db_,
                       "SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job_id "
                       "WHERE j.run_id = 1 AND j.status = 'ok'"),
              Count("run_id = 1 AND status = 'ok'") * num_runs);
  }

  fs::path face_, dir_;
  std::string db_;
};

TEST_F(SchedulerE2eTest, ThreeDevicesTwoModels) {
  Agent a = StartAgent(dir_ / "store-a", dir_ / "agent-a.log");
  Agent b = StartAgent(dir_ / "store-b", dir_ / "agent-b.log");
  ASSERT_NE(a.port, 0) << Slurp(dir_ / "agent-a.log");
  ASSERT_NE(b.port, 0) << Slurp(dir_ / "agent-b.log");
  std::string spec =
      WriteSpec({{"name", "three"},
                 {"models", {face_.string(), AddModel()}},
                 {"delegates", {"cpu", "xnnpack"}},
                 {"devices", {"local", a.uri(), b.uri()}},
                 {"benchmark", {{"warmup_runs", 1}, {"num_runs", 3}, {"num_threads", {1, 2}}}}});
  Outcome o = Dfarm({"sweep", spec, "--json"});
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["jobs"], 24);  // 3 devices x 2 models x 2 delegates x 2 thread counts
  EXPECT_EQ(s["ok"], 24);
  EXPECT_GT(s["bytes_pushed"].get<uint64_t>(), 3 * fs::file_size(face_));
  ExpectAllFinishedOnce(24, 3);
  for (const std::string& device : {std::string("local"), a.uri(), b.uri()}) {
    for (const char* model : {kFace, "add.tflite"}) {
      for (const char* delegate : {"cpu", "xnnpack"}) {
        for (int threads : {1, 2}) {
          EXPECT_EQ(Count("device = '" + device + "' AND model = '" + model + "' AND delegate = '" +
                          delegate + "' AND num_threads = " + std::to_string(threads) +
                          " AND status = 'ok'"),
                    1)
              << device << " " << model << " " << delegate << " " << threads;
        }
      }
    }
  }
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM devices WHERE abi != ''"), 3);
  // Every xnnpack job compared its outputs with the cpu reference on the
  // device (benchmark.accuracy_reference defaults to "cpu"); cpu jobs did not.
  const std::string accuracy_of =
      "SELECT count(DISTINCT a.job_id) FROM output_accuracy a JOIN jobs j ON j.id = a.job_id "
      "WHERE j.run_id = 1 AND a.reference = 'cpu' AND j.delegate = ";
  EXPECT_EQ(QueryInt(db_, accuracy_of + "'xnnpack'"), 12);
  EXPECT_EQ(QueryInt(db_, accuracy_of + "'cpu'"), 0);
  EXPECT_EQ(QueryInt(db_,
                     "SELECT count(*) FROM output_accuracy WHERE compared = 0 OR "
                     "max_abs_error IS NULL OR max_abs_error > 1e-3"),
            0);

  // The same sweep again: every artifact is on every device already.
  Outcome again = Dfarm({"sweep", spec, "--json"});
  ASSERT_EQ(again.code, 0) << again.err;
  json s2 = json::parse(again.out, nullptr, false);
  EXPECT_EQ(s2["bytes_pushed"], 0);
  EXPECT_EQ(s2["ok"], 24);

  Outcome devices =
      Dfarm({"devices", "--json", "--device", a.uri(), "--device", "tcp://127.0.0.1:1"});
  ASSERT_EQ(devices.code, 0) << devices.err;
  json d = json::parse(devices.out, nullptr, false);
  ASSERT_EQ(d["devices"].size(), 2u) << devices.out;
  EXPECT_EQ(d["devices"][0]["state"], "online");
  EXPECT_EQ(d["devices"][0]["abi"], "x86_64");
  EXPECT_EQ(d["devices"][1]["state"], "offline");
  for (int64_t run : {1, 2}) {
    EXPECT_EQ(CheckRunInvariants(db_, run, dir_, {a.process->pid(), b.process->pid()}), "");
  }
}

TEST_F(SchedulerE2eTest, KilledAgentsJobsMove) {
  Agent a = StartAgent(dir_ / "store-a", dir_ / "agent-a.log");
  ASSERT_NE(a.port, 0) << Slurp(dir_ / "agent-a.log");
  std::string spec = WriteSpec(
      {{"name", "kill-agent"},
       {"models", {face_.string()}},
       {"devices", {"local", a.uri()}},
       {"benchmark", {{"warmup_runs", 1}, {"num_runs", 20}, {"num_threads", {1, 2, 3, 4, 5, 6}}}},
       {"scheduler",
        {{"retries", 1}, {"backoff_ms", 50}, {"quarantine_after", 1}, {"failover", "same_abi"}}}});
  Child dfarm = Child::Spawn(DfarmArgs({"sweep", spec, "--json"}), (dir_ / "out").string(),
                             (dir_ / "err").string());
  std::string on_a = "device = '" + a.uri() + "'";
  ASSERT_TRUE(
      WaitFor([&] { return Count(on_a + " AND status = 'ok'") >= 1; }, std::chrono::seconds(30)))
      << Slurp(dir_ / "err");
  int64_t pending_on_a = Count(on_a + " AND status IN ('queued','running')");
  a.Kill();
  int status = dfarm.Wait();
  std::string err = Slurp(dir_ / "err");
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;  // every job ended ok, some on local
  json s = json::parse(Slurp(dir_ / "out"), nullptr, false);
  EXPECT_EQ(s["jobs"], 12);
  EXPECT_EQ(s["quarantined"], json::array({a.uri()}));
  ExpectAllFinishedOnce(12, 20);
  EXPECT_EQ(Count("status = 'ok'"), 12);
  // What had not run on the agent when it died ran on local instead.
  EXPECT_GE(Count("moved_from = '" + a.uri() + "' AND device = 'local'"), pending_on_a > 0 ? 1 : 0);
  EXPECT_EQ(Count("moved_from = '" + a.uri() + "'"), s["moved"].get<int64_t>());
  EXPECT_NE(err.find("quarantined"), std::string::npos) << err;
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_, {a.process->pid()}), "");
}

TEST_F(SchedulerE2eTest, KilledDfarmResumes) {
  std::string spec = WriteSpec(
      {{"name", "resume"},
       {"models", {face_.string()}},
       {"devices", {"local"}},
       {"benchmark",
        {{"warmup_runs", 1}, {"num_runs", 20}, {"num_threads", {1, 2, 3, 4, 5, 6, 7, 8}}}}});
  Child dfarm = Child::Spawn(DfarmArgs({"sweep", spec, "--json"}), (dir_ / "out").string(),
                             (dir_ / "err").string());
  ASSERT_TRUE(WaitFor([&] { return Count(std::string("status IN ") + kFinal) >= 2; },
                      std::chrono::seconds(30)))
      << Slurp(dir_ / "err");
  dfarm.Kill(SIGKILL);
  int64_t done_before = Count(std::string("status IN ") + kFinal);
  ASSERT_LT(done_before, 8) << "the sweep ended before it could be killed";
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM runs WHERE status = 'running'"), 1);

  Outcome o = Dfarm({"sweep", "--resume", "1", "--json"});
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["run_id"], 1);
  EXPECT_EQ(s["jobs"], 8);
  EXPECT_EQ(s["ok"], 8);
  EXPECT_EQ(s["resumed"], 8 - done_before);
  EXPECT_EQ(s["status"], "finished");
  ExpectAllFinishedOnce(8, 20);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM runs"), 1);  // no second run
  // A job is started again only if it had no result: at most one extra start.
  EXPECT_LE(QueryInt(db_, "SELECT sum(attempts) FROM jobs"), 9);

  // Resuming a finished run does nothing and changes nothing.
  Outcome again = Dfarm({"sweep", "--resume", "last", "--json"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out, nullptr, false)["resumed"], 0);
  ExpectAllFinishedOnce(8, 20);
  EXPECT_EQ(CheckRunInvariants(db_, 1, dir_), "");
}

}  // namespace
}  // namespace dfarm::e2e
