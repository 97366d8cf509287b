// Per-op profiles in a sweep, end to end: a spec's
// benchmark.profile makes every dfarm-runner job of the sweep also profile
// (--profile through the real dfarm-agent); the store keeps the times per
// node and per op type, `dfarm show --job ID --json` gives them as the
// job's "profile", the text drill-down prints the top op types, and the
// Markdown and HTML reports have a "Profiles" section.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/e2e_util.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;

const std::string kProfileModel = "face_detection_short_range.tflite";

class ProfileE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = fs::path(DFARM_MODELS_DIR) / kProfileModel;
    if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << (BinDir() / exe) << " is not built";
    }
    dir_ = fs::temp_directory_path() / ("dfarm_profile_e2e_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "x.db").string();
  }
  void TearDown() override {
    if (!dir_.empty() && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  Outcome Dfarm(const std::vector<std::string>& args) {
    std::vector<std::string> all = {(BinDir() / "dfarm").string()};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--db", db_});
    return RunToEnd(all, dir_ / "out", dir_ / "err");
  }

  fs::path model_, dir_;
  std::string db_;
};

// One profiled job's "profile" object: by_op shares summing to about 100%,
// one node entry per interpreter step. Returns the delegates of its nodes.
std::set<std::string> CheckProfile(const json& profile, const std::string& what) {
  std::set<std::string> delegates;
  EXPECT_TRUE(profile.is_object()) << what;
  if (!profile.is_object()) return delegates;
  EXPECT_EQ(profile["runs"], 2) << what;
  EXPECT_FALSE(profile["by_op"].empty()) << what;
  double pct = 0, total_us = 0;
  for (const json& o : profile["by_op"]) {
    EXPECT_TRUE(o["op"].is_string() && !o["op"].get<std::string>().empty()) << what;
    EXPECT_GE(o["count"].get<int64_t>(), 1) << what;
    EXPECT_GE(o["total_us"].get<double>(), 0) << what;
    pct += o["pct"].get<double>();
    total_us += o["total_us"].get<double>();
  }
  EXPECT_NEAR(pct, 100.0, 1.0) << what;
  EXPECT_GT(total_us, 0) << what;
  EXPECT_FALSE(profile["nodes"].empty()) << what;
  // A partition's DELEGATE entry lists its nodes; a delegate that times the
  // nodes inside (xnnpack, gpu) follows it with one entry per node, which has
  // a partition and no `nodes`. by_op counts such a partition as its nodes.
  std::set<int64_t> timed_by_node;
  for (const json& n : profile["nodes"]) {
    if (n.contains("partition") && !n.contains("nodes")) {
      timed_by_node.insert(n["partition"].get<int64_t>());
    }
  }
  double nodes_us = 0;
  for (const json& n : profile["nodes"]) {
    EXPECT_TRUE(n.contains("index") && n.contains("op") && n.contains("mean_us")) << what;
    delegates.insert(n["delegate"].get<std::string>());
    const bool whole = n.contains("nodes");
    if (whole) {
      EXPECT_EQ(n["op"], "DELEGATE") << what;
      EXPECT_FALSE(n["nodes"].empty()) << what;
    } else if (n.contains("partition")) {
      EXPECT_NE(n["op"], "DELEGATE") << what;
    }
    if (!(whole && timed_by_node.count(n["partition"].get<int64_t>()) > 0)) {
      nodes_us += n["mean_us"].get<double>();
    }
  }
  EXPECT_NEAR(nodes_us, total_us, 0.01 * total_us + 1) << what;  // by_op sums the steps
  return delegates;
}

TEST_F(ProfileE2eTest, SweepProfilesEveryJobOnCpuAndXnnpack) {
  json spec = {{"name", "profiles"},
               {"models", {model_.string()}},
               {"delegates", {"cpu", "xnnpack"}},
               {"devices", {"local"}},
               {"benchmark", {{"warmup_runs", 0}, {"num_runs", 2}, {"profile", true}}}};
  std::ofstream(dir_ / "spec.json") << spec.dump(2);
  Outcome o = Dfarm({"sweep", (dir_ / "spec.json").string(), "--json", "--agent-store",
                     (dir_ / "agent-store").string()});
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  json summary = json::parse(o.out);
  EXPECT_EQ(summary["jobs"], 2);
  EXPECT_EQ(summary["ok"], 2) << o.out;

  Outcome show = Dfarm({"show", "last", "--json"});
  ASSERT_EQ(show.code, 0) << show.err;
  json run = json::parse(show.out);
  ASSERT_EQ(run["jobs"].size(), 2u);
  std::set<std::string> seen;
  for (const json& job : run["jobs"]) {
    ASSERT_TRUE(job.contains("id"));
    EXPECT_FALSE(job.contains("profile"));  // the run's list stays a summary
    const std::string id = std::to_string(job["id"].get<int64_t>());
    const std::string delegate = job["delegate"];
    seen.insert(delegate);
    Outcome one = Dfarm({"show", "last", "--job", id, "--json"});
    ASSERT_EQ(one.code, 0) << one.err;
    json detail = json::parse(one.out)["jobs"][0];
    ASSERT_TRUE(detail.contains("profile")) << one.out.substr(0, 2000);
    std::set<std::string> delegates = CheckProfile(detail["profile"], delegate);
    if (delegate == "cpu") {
      EXPECT_EQ(delegates, std::set<std::string>{"cpu"});
    } else {
      EXPECT_EQ(delegates.count("xnnpack"), 1u) << "no step ran on xnnpack";
      bool partition = false;
      for (const json& n : detail["profile"]["nodes"]) partition |= n.contains("partition");
      EXPECT_TRUE(partition) << "no delegated partition in the xnnpack job's profile";
    }
    Outcome text = Dfarm({"show", "last", "--job", id});
    ASSERT_EQ(text.code, 0) << text.err;
    EXPECT_NE(text.out.find("profile over 2 run(s)"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("OP\tCOUNT\tTOTAL_MS\tPCT\n"), std::string::npos) << text.out;
  }
  EXPECT_EQ(seen, (std::set<std::string>{"cpu", "xnnpack"}));

  const fs::path md = dir_ / "report.md";
  Outcome report = Dfarm({"report", "last", "--format", "md", "-o", md.string()});
  ASSERT_EQ(report.code, 0) << report.err;
  const std::string text = Slurp(md);
  EXPECT_NE(text.find("## Profiles"), std::string::npos) << text;
  EXPECT_NE(text.find("face\\_detection\\_short\\_range.tflite (3bc182eb) xnnpack x1 @local"),
            std::string::npos)
      << text;
  const fs::path html = dir_ / "report.html";
  report = Dfarm({"report", "last", "--format", "html", "-o", html.string()});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_NE(Slurp(html).find("<h2>Profiles</h2>"), std::string::npos);
}

// Without benchmark.profile, jobs have no profile.
TEST_F(ProfileE2eTest, NoProfileUnlessAsked) {
  json spec = {{"name", "plain"},
               {"models", {model_.string()}},
               {"delegates", {"cpu"}},
               {"devices", {"local"}},
               {"benchmark", {{"warmup_runs", 0}, {"num_runs", 1}}}};
  std::ofstream(dir_ / "spec.json") << spec.dump(2);
  Outcome o = Dfarm({"sweep", (dir_ / "spec.json").string(), "--json", "--agent-store",
                     (dir_ / "agent-store").string()});
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  Outcome one = Dfarm({"show", "last", "--job", "1", "--json"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_FALSE(json::parse(one.out)["jobs"][0].contains("profile"));
  Outcome report = Dfarm({"report", "last", "--format", "md", "-o", "-"});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_EQ(report.out.find("## Profiles"), std::string::npos);
}

}  // namespace
}  // namespace dfarm::e2e
