// Two ABIs in one farm, end to end: one sweep across `local`, two tcp://
// agents on 127.0.0.1 and `qemu-arm64` (the aarch64 dfarm-agent and
// dfarm-runner cross-built by scripts/build.sh into <build>/arm64, run under
// qemu-user), two models x two thread counts. Every cell must end ok, the
// arm64 device must have been given the arm64 runner build (and the others
// the host one), and a second identical sweep pushes nothing.
// Skipped when the cross build or qemu-aarch64 is missing.
#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_util.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;
namespace tfl = ::dfarm::tflite;

// sha256 of a file by the coreutils tool (independent of our own hashing).
std::string Sha256Sum(const fs::path& p) {
  std::string cmd = "sha256sum '" + p.string() + "'";
  std::FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return "";
  char buf[65] = {};
  size_t n = std::fread(buf, 1, 64, f);
  ::pclose(f);
  return std::string(buf, n);
}

bool OnPath(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

class QemuE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    arm64_ = fs::path(DFARM_BINARY_DIR) / "arm64" / "bin";
    for (const char* exe : {"dfarm-agent", "dfarm-runner"}) {
      if (!fs::exists(arm64_ / exe)) {
        GTEST_SKIP() << (arm64_ / exe) << " is absent (scripts/build.sh cross-builds it)";
      }
    }
    if (!OnPath("qemu-aarch64")) GTEST_SKIP() << "qemu-aarch64 is absent (qemu-user)";
    utsname u{};
    ASSERT_EQ(::uname(&u), 0);
    if (std::string(u.machine) != "x86_64") GTEST_SKIP() << "the host is not x86_64";
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << exe << " is not built";
    }
    dir_ = fs::temp_directory_path() / ("dfarm_qemu_e2e_" + std::to_string(::getpid()));
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
    all.insert(all.end(), {"--db", db_, "--agent-store", (dir_ / "store").string()});
    return RunToEnd(all, dir_ / "out", dir_ / "err");
  }

  // One elementwise op (ADD or SUB) of an input and a constant.
  std::string Model(const std::string& name, bool sub) {
    testing::ModelBuilder b;
    int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "in");
    int c = b.AddConstFloat32({1, 4}, {1, 2, 3, 4}, "c");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
    b.AddBinary(sub ? tfl::BuiltinOperator::SUB : tfl::BuiltinOperator::ADD, in, c, out);
    b.SetInputs({in});
    b.SetOutputs({out});
    std::string path = (dir_ / name).string();
    EXPECT_TRUE(b.WriteFile(path));
    return path;
  }

  // Whether a device's agent store holds an artifact with this sha256.
  static bool StoreHas(const fs::path& store, const std::string& sha) {
    return fs::exists(store / "artifacts" / sha);
  }

  fs::path arm64_, dir_;
  std::string db_;
};

TEST_F(QemuE2eTest, OneSweepAcrossTwoAbis) {
  Agent a = StartAgent(dir_ / "store-a", dir_ / "agent-a.log");
  Agent b = StartAgent(dir_ / "store-b", dir_ / "agent-b.log");
  ASSERT_NE(a.port, 0) << Slurp(dir_ / "agent-a.log");
  ASSERT_NE(b.port, 0) << Slurp(dir_ / "agent-b.log");
  json spec = {{"name", "two-abis"},
               {"models", {Model("add.tflite", false), Model("sub.tflite", true)}},
               {"devices", {"local", a.uri(), b.uri(), "qemu-arm64"}},
               {"benchmark", {{"warmup_runs", 0}, {"num_runs", 2}, {"num_threads", {1, 2}}}}};
  fs::path spec_path = dir_ / "spec.json";
  std::ofstream(spec_path) << spec.dump(2);

  Outcome o = Dfarm({"sweep", spec_path.string(), "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  json s = json::parse(o.out);
  const int64_t cells = 4 * 2 * 2;  // devices x models x thread counts
  EXPECT_EQ(s["jobs"], cells);
  EXPECT_EQ(s["ok"], cells);
  EXPECT_GT(s["bytes_pushed"].get<uint64_t>(), 0u);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM jobs WHERE run_id = 1 AND status = 'ok'"), cells);
  EXPECT_EQ(QueryInt(db_,
                     "SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id "
                     "WHERE j.run_id = 1"),
            cells);
  EXPECT_EQ(QueryInt(db_,
                     "SELECT count(*) FROM jobs WHERE run_id = 1 AND device = 'qemu-arm64' "
                     "AND status = 'ok'"),
            4);
  // The agents' own words: the emulated device is arm64, the others x86_64.
  EXPECT_EQ(QueryInt(db_,
                     "SELECT count(*) FROM devices WHERE name = 'qemu-arm64' AND "
                     "abi = 'arm64-v8a'"),
            1);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM devices WHERE abi = 'x86_64'"), 3);

  // Each device holds the runner build for its ABI, and only that one.
  // The arm64 runner travels as a bundle (its XNNPACK and loader) when it is
  // dynamically linked: the same bytes `dfarm bundle` makes of it.
  std::string host_runner = Sha256Sum(BinDir() / "dfarm-runner");
  std::string arm_runner = Sha256Sum(arm64_ / "dfarm-runner");
  Child bundler =
      Child::Spawn({(BinDir() / "dfarm").string(), "bundle", (arm64_ / "dfarm-runner").string(),
                    "-o", (dir_ / "arm.bundle").string(), "--json"},
                   (dir_ / "bundle.out").string(), (dir_ / "bundle.err").string());
  ASSERT_EQ(bundler.Wait(), 0) << Slurp(dir_ / "bundle.err");
  if (json::parse(Slurp(dir_ / "bundle.out"))["loader"] != "") {
    arm_runner = Sha256Sum(dir_ / "arm.bundle");
  }
  ASSERT_EQ(host_runner.size(), 64u);
  ASSERT_EQ(arm_runner.size(), 64u);
  ASSERT_NE(host_runner, arm_runner);
  fs::path qemu_store = dir_ / "store-qemu-arm64";
  EXPECT_TRUE(StoreHas(qemu_store, arm_runner));
  EXPECT_FALSE(StoreHas(qemu_store, host_runner));
  for (const fs::path& st : {dir_ / "store", dir_ / "store-a", dir_ / "store-b"}) {
    EXPECT_TRUE(StoreHas(st, host_runner)) << st;
    EXPECT_FALSE(StoreHas(st, arm_runner)) << st;
  }

  // A second identical sweep finds every artifact on every device.
  Outcome again = Dfarm({"sweep", spec_path.string(), "--json"});
  ASSERT_EQ(again.code, 0) << again.err;
  json s2 = json::parse(again.out);
  EXPECT_EQ(s2["ok"], cells);
  EXPECT_EQ(s2["bytes_pushed"], 0);
  // Same cells, same job keys.
  EXPECT_EQ(QueryInt(db_,
                     "SELECT count(*) FROM jobs j1 JOIN jobs j2 ON j1.job_key = j2.job_key "
                     "WHERE j1.run_id = 1 AND j2.run_id = 2"),
            cells);
}

}  // namespace
}  // namespace dfarm::e2e
