// Stepped pairs (stepped_pair.h) with the built runners as real processes:
// dfarm-runner --partner-runner drives a partner that is another runner
// build, or a script that breaks the stepping.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agent/testing/run_process.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;

const std::string kBin = std::string(DFARM_BINARY_DIR) + "/bin/";

using Process = agent::testing::ProcessOutput;
using agent::testing::ReadFile;

class SteppedPairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("dfarm_stepped_pair_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // input [1,8,8,2] -> CONV_2D 1x1 (2 -> 2 channels) -> output
    ModelBuilder b;
    int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8, 8, 2}, "in");
    int filter = b.AddConstFloat32({2, 1, 1, 2}, {1, 2, 3, 4}, "filter");
    int bias = b.AddConstFloat32({2}, {0, 0}, "bias");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8, 8, 2}, "out");
    b.AddConv2D(in, filter, bias, out, Conv2DParams{});
    b.SetInputs({in});
    b.SetOutputs({out});
    model_ = (dir_ / "conv.tflite").string();
    ASSERT_TRUE(b.WriteFile(model_));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `program` with `args`.
  Process Run(const std::string& program, const std::vector<std::string>& args) {
    std::vector<std::string> words{program};
    words.insert(words.end(), args.begin(), args.end());
    return agent::testing::RunQuoted(words, dir_.string());
  }

  // The driver dfarm-runner with `partner` and `runs` measured runs.
  Process Drive(const std::string& partner, int runs, const std::string& seed = "7") {
    return Run(kBin + "dfarm-runner",
               {"--model", model_, "--num-runs", std::to_string(runs), "--json", "--partner-runner",
                partner, "--partner-seed", seed});
  }

  // A partner script: `body` runs after R and W are set from --step-fds.
  std::string Script(const std::string& name, const std::string& body) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << "#!/bin/sh\n"
                           "while [ $# -gt 0 ]; do\n"
                           "  if [ \"$1\" = --step-fds ]; then R=${2%,*}; W=${2#*,}; fi\n"
                           "  shift\n"
                           "done\n"
                        << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
  }

  fs::path dir_;
  std::string model_;
};

// The letters of both processes' measured runs in time order: "A" the
// driver's, "B" the partner's (their CLOCK_MONOTONIC starts merged).
std::string MergedOrder(const json& driver, const json& partner) {
  std::vector<std::pair<double, char>> runs;
  for (const json& t : driver["steps"]["starts_us"]) runs.emplace_back(t.get<double>(), 'A');
  for (const json& t : partner["steps"]["starts_us"]) runs.emplace_back(t.get<double>(), 'B');
  std::sort(runs.begin(), runs.end());
  std::string order;
  for (const auto& r : runs) order += r.second;
  return order;
}

TEST_F(SteppedPairTest, DriverAndPartnerTakeTurnsRunByRun) {
  Process p = Drive(kBin + "dfarm-runner", 8);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const json doc = json::parse(p.out);
  ASSERT_EQ(doc["status"], "ok");
  const json& steps = doc["steps"];
  EXPECT_EQ(steps["role"], "driver");
  EXPECT_FALSE(steps.contains("partner_error")) << steps.dump();
  EXPECT_EQ(steps["partner_steps"], 8);
  const std::string order = steps["order"];
  ASSERT_EQ(order.size(), 16u);
  // ABBA blocks: each block of two runs of each is "ABBA" or "BAAB".
  for (size_t b = 0; b < order.size(); b += 4) {
    const std::string block = order.substr(b, 4);
    EXPECT_TRUE(block == "ABBA" || block == "BAAB") << order;
  }
  ASSERT_TRUE(doc.contains("partner"));
  const json& partner = doc["partner"];
  EXPECT_EQ(partner["status"], "ok");
  EXPECT_EQ(partner["steps"]["role"], "partner");
  EXPECT_EQ(partner["metrics"]["num_runs"], 8);
  EXPECT_EQ(partner["samples_us"].size(), 8u);
  EXPECT_EQ(doc["samples_us"].size(), 8u);
  EXPECT_EQ(partner["outputs"][0]["sha256"], doc["outputs"][0]["sha256"]);
  // The runs really alternated in time as the driver's order says.
  EXPECT_EQ(MergedOrder(doc, partner), order);

  // The seed fixes the order.
  Process again = Drive(kBin + "dfarm-runner", 8);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["steps"]["order"], order);
}

TEST_F(SteppedPairTest, SlowdownRunnerStepsAsPartnerAndAsDriver) {
  Process p = Drive(kBin + "dfarm-runner-slowdown", 4);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  json doc = json::parse(p.out);
  ASSERT_EQ(doc["partner"]["status"], "ok") << p.out;
  EXPECT_EQ(MergedOrder(doc, doc["partner"]), doc["steps"]["order"].get<std::string>());

  p = Run(kBin + "dfarm-runner-slowdown", {"--model", model_, "--num-runs", "4", "--json",
                                           "--partner-runner", kBin + "dfarm-runner"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  doc = json::parse(p.out);
  ASSERT_EQ(doc["partner"]["status"], "ok") << p.out;
  EXPECT_EQ(MergedOrder(doc, doc["partner"]), doc["steps"]["order"].get<std::string>());
}

TEST_F(SteppedPairTest, MissingPartnerCostsOnlyThePairing) {
  Process p = Drive((dir_ / "no-such-runner").string(), 3);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const json doc = json::parse(p.out);
  EXPECT_EQ(doc["status"], "ok");
  EXPECT_EQ(doc["samples_us"].size(), 3u);
  EXPECT_FALSE(doc.contains("partner"));
  EXPECT_EQ(doc["steps"]["order"], "AAA");
  EXPECT_EQ(doc["steps"]["partner_steps"], 0);
  EXPECT_THAT(doc["steps"]["partner_error"].get<std::string>(),
              HasSubstr("cannot start partner runner '" + (dir_ / "no-such-runner").string() +
                        "': No such file or directory"));
}

TEST_F(SteppedPairTest, PartnerThatCrashesBeforeItIsReady) {
  Process p = Drive(Script("crash.sh", "kill -SEGV $$"), 3);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const json doc = json::parse(p.out);
  EXPECT_EQ(doc["status"], "ok");
  EXPECT_FALSE(doc.contains("partner"));
  EXPECT_EQ(doc["steps"]["order"], "AAA");
  const std::string error = doc["steps"]["partner_error"];
  EXPECT_THAT(error, HasSubstr("ended before it was ready"));
  EXPECT_THAT(error, HasSubstr("killed by signal 11 (SIGSEGV) without a readable result"));
}

TEST_F(SteppedPairTest, PartnerThatExitsAfterOneStep) {
  // Ready, one step, then gone without a document.
  const std::string partner = Script("one-step.sh",
                                     "eval \"exec 3<&$R 4>&$W\"\n"
                                     "printf r >&4\n"
                                     "dd bs=1 count=1 <&3 >/dev/null 2>&1\n"
                                     "printf d >&4\n"
                                     "exit 0");
  Process p = Drive(partner, 6);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const json doc = json::parse(p.out);
  EXPECT_EQ(doc["status"], "ok");
  EXPECT_EQ(doc["samples_us"].size(), 6u);
  EXPECT_FALSE(doc.contains("partner"));
  EXPECT_EQ(doc["steps"]["partner_steps"], 1);
  const std::string error = doc["steps"]["partner_error"];
  EXPECT_THAT(error, HasSubstr("partner runner stopped after 1 stepped run(s)"));
  EXPECT_THAT(error, HasSubstr("exited with code 0 without a readable result"));
}

TEST_F(SteppedPairTest, PartnerFailureDocumentIsKept) {
  // A partner that reports its own failure (here: a usage error, the real
  // runner given a bad --delegate) keeps its document; the pairing is lost.
  const std::string partner =
      Script("bad-delegate.sh", "exec '" + kBin + "dfarm-runner' --model '" + model_ +
                                    "' --delegate no_such_delegate --json --step-fds \"$R,$W\"");
  Process p = Drive(partner, 2);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const json doc = json::parse(p.out);
  ASSERT_TRUE(doc.contains("partner")) << p.out;
  EXPECT_EQ(doc["partner"]["status"], "delegate_error");
  EXPECT_THAT(doc["steps"]["partner_error"].get<std::string>(),
              HasSubstr("ended before it was ready"));
}

TEST_F(SteppedPairTest, UsageErrors) {
  Process p = Run(kBin + "dfarm-runner",
                  {"--model", model_, "--partner-runner", "x", "--sustained-secs", "1", "--json"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_THAT(p.out, HasSubstr("--partner-runner does not combine with --sustained-secs"));
  p = Run(kBin + "dfarm-runner", {"--model", model_, "--step-fds", "3", "--json"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_THAT(p.out, HasSubstr("--step-fds '3': expected R,W"));
  p = Run(kBin + "dfarm-runner",
          {"--model", model_, "--step-fds", "3,4", "--partner-runner", "x", "--json"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_THAT(p.out, HasSubstr("do not combine"));
}

}  // namespace
}  // namespace dfarm::testing
