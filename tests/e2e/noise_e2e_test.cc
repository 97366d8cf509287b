// Noise control end to end: a sweep whose spec asks for quiet CPUs
// (cooldown.max_cpu_busy_pct) runs while this test keeps every CPU busy; the
// job waits max_wait_s, runs anyway and is flagged noisy with the reading,
// in `dfarm show` (text and --json) and the JSON report.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_util.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;
namespace tfl = ::dfarm::tflite;

// Spins one thread per CPU until destroyed.
class CpuHog {
 public:
  CpuHog() {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < n; ++i) {
      threads_.emplace_back([this] {
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
      });
    }
  }
  ~CpuHog() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

class NoiseE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dfarm_noise_e2e_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "x.db").string();
    testing::ModelBuilder b;
    int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "x");
    int c = b.AddConstFloat32({1}, {1.0f}, "c");
    int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "y");
    b.AddAdd(x, c, y);
    b.SetInputs({x});
    b.SetOutputs({y});
    model_ = (dir_ / "add.tflite").string();
    ASSERT_TRUE(b.WriteFile(model_));
  }
  void TearDown() override {
    if (!std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  Outcome Dfarm(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {(BinDir() / "dfarm").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunToEnd(argv, dir_ / "out", dir_ / "err");
  }

  fs::path dir_;
  std::string db_, model_;
};

TEST_F(NoiseE2eTest, ABusyDeviceFlagsTheJobNoisy) {
  json spec = json::object();
  spec["name"] = "noise";
  spec["models"] = json::array({model_});
  json cpu = json::object();
  cpu["name"] = "cpu";
  spec["delegates"] = json::array({cpu});
  spec["devices"] = json::array({"local"});
  spec["benchmark"] = {{"warmup_runs", 0}, {"num_runs", 3}};
  spec["cooldown"] = {{"max_cpu_busy_pct", 20}, {"max_wait_s", 1}};
  std::ofstream(dir_ / "spec.json") << spec.dump();
  Outcome sweep;
  {
    CpuHog hog;
    sweep = Dfarm({"sweep", (dir_ / "spec.json").string(), "--db", db_, "--agent-store",
                   (dir_ / "agent-store").string()});
  }
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  EXPECT_NE(sweep.err.find("noisy: CPUs"), std::string::npos) << sweep.err;

  Outcome show = Dfarm({"show", "last", "--db", db_, "--json"});
  ASSERT_EQ(show.code, 0) << show.err;
  const json job = json::parse(show.out)["jobs"][0];
  EXPECT_EQ(job["status"], "ok");
  EXPECT_EQ(job["noisy"], true) << job.dump(2);
  EXPECT_NE(job["state_note"].get<std::string>().find("% busy > 20%"), std::string::npos)
      << job.dump(2);
  Outcome drill = Dfarm(
      {"show", "last", "--job", std::to_string(job["id"].get<int64_t>()), "--db", db_, "--json"});
  ASSERT_EQ(drill.code, 0) << drill.err;
  const json telemetry = json::parse(drill.out)["jobs"][0]["telemetry"];
  ASSERT_GE(telemetry.size(), 2u) << telemetry.dump();
  EXPECT_EQ(telemetry.front()["phase"], "before");
  EXPECT_EQ(telemetry.back()["phase"], "after");
  Outcome text = Dfarm({"show", "last", "--db", db_});
  EXPECT_NE(text.out.find("noisy"), std::string::npos) << text.out;
  Outcome report = Dfarm({"report", "last", "--db", db_, "--format", "json", "-o", "-"});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_EQ(json::parse(report.out)["jobs"][0]["noisy"], true);
}

// benchmark.cpu_affinity reaches the local agent, which pins the runner (the
// agent's own test checks the CPU mask); an impossible CPU fails the job.
TEST_F(NoiseE2eTest, PinnedJobsRunAndAnUnknownCpuIsRefused) {
  for (const auto& [affinity, status] :
       {std::pair{"0", "ok"}, std::pair{"big", "ok"}, std::pair{"1000", "infra"}}) {
    json spec = json::object();
    spec["models"] = json::array({model_});
    spec["devices"] = json::array({"local"});
    spec["benchmark"] = {{"warmup_runs", 0}, {"num_runs", 2}, {"cpu_affinity", affinity}};
    spec["scheduler"] = json::object();
    spec["scheduler"]["retries"] = 0;
    std::ofstream(dir_ / "spec.json") << spec.dump();
    Outcome sweep = Dfarm({"sweep", (dir_ / "spec.json").string(), "--db", db_, "--agent-store",
                           (dir_ / "agent-store").string()});
    Outcome show = Dfarm({"show", "last", "--db", db_, "--json"});
    ASSERT_EQ(show.code, 0) << show.err;
    const json job = json::parse(show.out)["jobs"][0];
    EXPECT_EQ(job["status"], status) << affinity << ": " << job.dump(2) << sweep.err;
  }
}

// benchmark.sustained_s: the job runs for the time asked and its latency
// curve reaches the store, `dfarm show --job` (text and JSON) and the
// Markdown and HTML reports; the timeout is the spec's plus that time.
TEST_F(NoiseE2eTest, SustainedModeStoresTheCurve) {
  json spec = json::object();
  spec["models"] = json::array({model_});
  spec["devices"] = json::array({"local"});
  spec["benchmark"] = {{"warmup_runs", 1}, {"num_runs", 2}, {"timeout_s", 1}, {"sustained_s", 1.5}};
  std::ofstream(dir_ / "spec.json") << spec.dump();
  Outcome sweep = Dfarm({"sweep", (dir_ / "spec.json").string(), "--db", db_, "--agent-store",
                         (dir_ / "agent-store").string()});
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  Outcome show = Dfarm({"show", "last", "--db", db_, "--json"});
  ASSERT_EQ(show.code, 0) << show.err;
  const std::string id = std::to_string(json::parse(show.out)["jobs"][0]["id"].get<int64_t>());
  Outcome drill = Dfarm({"show", "last", "--job", id, "--db", db_, "--json"});
  ASSERT_EQ(drill.code, 0) << drill.err;
  const json job = json::parse(drill.out)["jobs"][0];
  ASSERT_EQ(job["status"], "ok") << job.dump(2);
  const json& curve = job["sustained"];
  EXPECT_DOUBLE_EQ(curve["secs"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(curve["window_ms"].get<double>(), 100);
  ASSERT_GE(curve["windows"].size(), 10u) << curve.dump();
  int64_t runs = 0;
  for (const json& w : curve["windows"]) runs += w["runs"].get<int64_t>();
  EXPECT_EQ(runs, job["metrics"]["num_runs"].get<int64_t>());
  EXPECT_GT(runs, 2);  // the time, not num_runs
  // Sampled while it ran (the agent's 1 s interval).
  bool during = false;
  for (const json& t : job["telemetry"]) {
    during |= t["phase"].get<std::string>().rfind("during:", 0) == 0;
  }
  EXPECT_TRUE(during) << job["telemetry"].dump();
  Outcome text = Dfarm({"show", "last", "--job", id, "--db", db_});
  EXPECT_NE(text.out.find("sustained 1.5 s, "), std::string::npos) << text.out;
  Outcome md = Dfarm({"report", "last", "--db", db_, "--format", "md", "-o", "-"});
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_NE(md.out.find("## Sustained"), std::string::npos) << md.out;
  Outcome html = Dfarm({"report", "last", "--db", db_, "--format", "html", "-o", "-"});
  ASSERT_EQ(html.code, 0) << html.err;
  EXPECT_NE(html.out.find("<h2>Sustained</h2>"), std::string::npos);
  EXPECT_NE(html.out.find("<polyline"), std::string::npos);
}

}  // namespace
}  // namespace dfarm::e2e
