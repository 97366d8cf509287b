// Remote agents with a token: a real
// dfarm-agent on 127.0.0.1 with --token-file, reached by the real `dfarm
// devices` and `dfarm sweep` with the token given by --token-file,
// DFARM_TOKEN_FILE or the spec's {"uri", "token_file"}; without one, with a
// wrong one, and with a loosely protected file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/e2e_util.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::e2e {
namespace {

namespace tfl = ::dfarm::tflite;
using nlohmann::json;

class TokenE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << (BinDir() / exe) << " is not built";
    }
    dir_ = fs::temp_directory_path() /
           ("dfarm_token_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "x.db").string();
    good_ = WriteToken("good.token", std::string(64, 'g'));
    wrong_ = WriteToken("wrong.token", std::string(64, 'w'));
    agent_ = StartTokenAgent(good_);
    ASSERT_NE(agent_.port, 0) << Slurp(dir_ / "agent.log");
  }
  void TearDown() override {
    agent_.process.reset();
    if (!dir_.empty() && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  std::string WriteToken(const std::string& name, const std::string& token,
                         fs::perms perms = fs::perms::owner_read | fs::perms::owner_write) {
    fs::path p = dir_ / name;
    std::ofstream(p) << token << "\n";
    fs::permissions(p, perms);
    return p.string();
  }

  Agent StartTokenAgent(const std::string& token_file) {
    agent::AgentProcessOptions options;
    options.agent_binary = (BinDir() / "dfarm-agent").string();
    options.store_dir = (dir_ / "agent-store").string();
    options.extra_args = {"--token-file", token_file};
    options.log_file = (dir_ / "agent.log").string();
    Agent a;
    auto started = agent::AgentProcess::Start(options);
    if (!started) return a;
    a.process = std::move(*started);
    a.port = a.process->port();
    return a;
  }

  // dfarm with `args`, the test's database and local store; `env` (NAME=value)
  // set through env(1).
  Outcome Dfarm(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> all = {"/usr/bin/env", "-u", "DFARM_TOKEN_FILE"};
    all.insert(all.end(), env.begin(), env.end());
    all.push_back((BinDir() / "dfarm").string());
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--db", db_, "--agent-store", (dir_ / "local-store").string()});
    return RunToEnd(all, dir_ / "out", dir_ / "err");
  }

  // A model of one ADD: the cheapest job there is.
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

  // A spec in its own folder (dir_/spec/NAME) with `device` as its one device.
  std::string WriteSpec(const std::string& name, const json& device) {
    fs::create_directories(dir_ / "spec");
    json spec = {{"name", "token"},
                 {"models", {AddModel()}},
                 {"devices", {device}},
                 {"benchmark", {{"warmup_runs", 0}, {"num_runs", 2}}},
                 {"scheduler", {{"retries", 0}, {"quarantine_after", 1}}}};
    fs::path p = dir_ / "spec" / name;
    std::ofstream(p) << spec.dump(2);
    return p.string();
  }

  // The one device of `dfarm devices --json` output.
  static json OnlyDevice(const Outcome& o) {
    json doc = json::parse(o.out, nullptr, false);
    if (!doc.is_object() || !doc["devices"].is_array() || doc["devices"].size() != 1) return {};
    return doc["devices"][0];
  }

  fs::path dir_;
  std::string db_, good_, wrong_;
  Agent agent_;
};

TEST_F(TokenE2eTest, DevicesWithTheRightTokenByFlagOrEnvironment) {
  Outcome o = Dfarm({"devices", "--device", agent_.uri(), "--json", "--token-file", good_});
  ASSERT_EQ(o.code, 0) << o.all();
  EXPECT_EQ(OnlyDevice(o).value("state", ""), "online") << o.out;

  o = Dfarm({"devices", "--device", agent_.uri(), "--json"}, {"DFARM_TOKEN_FILE=" + good_});
  ASSERT_EQ(o.code, 0) << o.all();
  EXPECT_EQ(OnlyDevice(o).value("state", ""), "online") << o.out;
}

TEST_F(TokenE2eTest, DevicesWithoutATokenNamesTheDeviceAndTheWaysToPassOne) {
  Outcome o = Dfarm({"devices", "--device", agent_.uri()});
  EXPECT_EQ(o.code, 3) << o.all();
  const std::string text = o.all();
  EXPECT_NE(text.find(agent_.uri()), std::string::npos) << text;
  EXPECT_NE(text.find("requires a token"), std::string::npos) << text;
  EXPECT_NE(text.find("--token-file FILE"), std::string::npos) << text;
  EXPECT_NE(text.find("DFARM_TOKEN_FILE"), std::string::npos) << text;
  EXPECT_NE(text.find("token_file"), std::string::npos) << text;
}

TEST_F(TokenE2eTest, DevicesWithAWrongTokenSaysTheAgentRefusedIt) {
  Outcome o = Dfarm({"devices", "--device", agent_.uri(), "--json", "--token-file", wrong_});
  EXPECT_EQ(o.code, 3) << o.all();
  const std::string reason = OnlyDevice(o).value("reason", "");
  EXPECT_NE(reason.find("device '" + agent_.uri() + "'"), std::string::npos) << o.all();
  EXPECT_NE(reason.find("the agent refused the token from '" + wrong_ + "'"), std::string::npos)
      << o.all();
}

TEST_F(TokenE2eTest, LooselyProtectedTokenFileIsRefusedWithTheFix) {
  const std::string loose =
      WriteToken("loose.token", std::string(64, 'g'),
                 fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  Outcome o = Dfarm({"devices", "--device", agent_.uri(), "--token-file", loose});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("--token-file: token file '" + loose +
                       "' is readable by others (mode "
                       "0640); chmod 600 " +
                       loose),
            std::string::npos)
      << o.err;
  o = Dfarm({"sweep", WriteSpec("s.json", agent_.uri())}, {"DFARM_TOKEN_FILE=" + loose});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("chmod 600 " + loose), std::string::npos) << o.err;
}

TEST_F(TokenE2eTest, SweepWithTheTokenFromTheFlagTheEnvironmentOrTheSpec) {
  Outcome o =
      Dfarm({"sweep", WriteSpec("flag.json", agent_.uri()), "--json", "--token-file", good_});
  ASSERT_EQ(o.code, 0) << o.all();
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["ok"], 1);

  o = Dfarm({"sweep", WriteSpec("env.json", agent_.uri()), "--json"},
            {"DFARM_TOKEN_FILE=" + good_});
  ASSERT_EQ(o.code, 0) << o.all();

  // The spec's token_file, relative to the spec's folder, wins over a wrong global one.
  fs::copy_file(good_, dir_ / "spec" / "lab.token");
  const std::string in_spec =
      WriteSpec("spec.json", {{"uri", agent_.uri()}, {"token_file", "lab.token"}});
  o = Dfarm({"sweep", in_spec, "--json", "--token-file", wrong_});
  ASSERT_EQ(o.code, 0) << o.all();
  s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["ok"], 1);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM jobs WHERE status = 'ok'"), 3);
}

TEST_F(TokenE2eTest, SweepWithoutOrWithAWrongTokenNamesTheDevice) {
  const std::string spec = WriteSpec("s.json", agent_.uri());
  Outcome o = Dfarm({"sweep", spec});
  EXPECT_EQ(o.code, 3) << o.all();
  std::string text = o.all();
  EXPECT_NE(text.find("device '" + agent_.uri() + "'"), std::string::npos) << text;
  EXPECT_NE(text.find("--token-file FILE"), std::string::npos) << text;

  o = Dfarm({"sweep", spec, "--token-file", wrong_});
  EXPECT_EQ(o.code, 3) << o.all();
  text = o.all();
  EXPECT_NE(
      text.find("device '" + agent_.uri() + "': the agent refused the token from '" + wrong_ + "'"),
      std::string::npos)
      << text;
}

}  // namespace
}  // namespace dfarm::e2e
