// Our runtime and TensorFlow Lite side by side, end to end: one
// sweep holds our runner ({"name":"ours"}, default builds) and TensorFlow
// Lite's ({"name":"tflite","kind":"tflite"}), two real models x {cpu,
// xnnpack}, on `local` and on `qemu-arm64` (the arm64 runners travel as
// bundles with their own loader and libraries: XNNPACK's arm64 build, the
// arm64 libtensorflowlite_c.so). Every job must end ok, `show --json` and the
// report must tell the two runners apart, the gate must compare them cell by
// cell, and the arm64 xnnpack outputs must match the x86-64 ones within
// tolerance. Skipped when TensorFlow Lite's library, the cross build or
// qemu-aarch64 is missing (said in the skip message).
#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/protocol/bundle.h"
#include "tests/e2e/e2e_util.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;

// Builtin ops only (MediaPipe's custom ops are ours, not TensorFlow Lite's).
const char* const kModels[] = {"face_detection_short_range.tflite",
                               "face_detection_full_range.tflite"};

// The program's path as the shell finds it in PATH; "" when it is not there.
std::string FindOnPath(const std::string& program) {
  std::FILE* f = ::popen(("command -v " + program + " 2>/dev/null").c_str(), "r");
  if (!f) return "";
  char buf[4096] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  ::pclose(f);
  std::string path(buf, n);
  while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
  return path;
}

// Reads a float32 output file of --dump-outputs.
std::vector<float> ReadFloats(const fs::path& p) {
  std::string bytes = Slurp(p);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

class RunnersE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path tflite_dir = fs::path(DFARM_SOURCE_DIR) / ".cache" / "tflite";
    for (const char* arch : {"linux_amd64", "linux_arm64"}) {
      if (!fs::exists(tflite_dir / arch / "libtensorflowlite_c.so")) {
        GTEST_SKIP() << "TensorFlow Lite's library is absent from " << (tflite_dir / arch)
                     << " (scripts/setup.sh fetches it)";
      }
    }
    arm64_ = fs::path(DFARM_BINARY_DIR) / "arm64" / "bin";
    for (const char* exe : {"dfarm-agent", "dfarm-runner", "dfarm-tflite-runner"}) {
      if (!fs::exists(arm64_ / exe)) {
        GTEST_SKIP() << (arm64_ / exe) << " is absent (scripts/build.sh cross-builds it)";
      }
    }
    qemu_ = FindOnPath("qemu-aarch64");
    if (qemu_.empty()) GTEST_SKIP() << "qemu-aarch64 is absent (qemu-user)";
    utsname u{};
    ASSERT_EQ(::uname(&u), 0);
    if (std::string(u.machine) != "x86_64") GTEST_SKIP() << "the host is not x86_64";
    for (const char* m : kModels) {
      if (!fs::exists(fs::path(DFARM_MODELS_DIR) / m)) {
        GTEST_SKIP() << m << " is absent from " << DFARM_MODELS_DIR;
      }
    }
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner", "dfarm-tflite-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << exe << " is not built";
    }
    dir_ = fs::temp_directory_path() / ("dfarm_runners_e2e_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "x.db").string();
    ::setenv("DFARM_BUNDLE_CACHE", (dir_ / "bundles").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("DFARM_BUNDLE_CACHE");
    if (!dir_.empty() && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  Outcome Dfarm(const std::vector<std::string>& args) {
    std::vector<std::string> all = {(BinDir() / "dfarm").string()};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--db", db_});
    return RunToEnd(all, dir_ / "out", dir_ / "err");
  }

  // Runs `argv` to its end; its exit code (its stderr in run.err).
  int Run(const std::vector<std::string>& argv) {
    return RunToEnd(argv, dir_ / "run.out", dir_ / "run.err").code;
  }

  fs::path arm64_, dir_;
  std::string db_, qemu_;
};

TEST_F(RunnersE2eTest, OursAndTfliteOnX86AndArm64) {
  json models = json::array();
  for (const char* m : kModels) models.push_back((fs::path(DFARM_MODELS_DIR) / m).string());
  json spec = {
      {"name", "ours-vs-tflite"},
      {"models", models},
      {"delegates", {"cpu", "xnnpack"}},
      {"devices", {"local", "qemu-arm64"}},
      {"runners", json::array({{{"name", "ours"}}, {{"name", "tflite"}, {"kind", "tflite"}}})},
      {"benchmark", {{"warmup_runs", 0}, {"num_runs", 2}, {"accuracy_reference", "cpu"}}}};
  fs::path spec_path = dir_ / "spec.json";
  std::ofstream(spec_path) << spec.dump(2);
  const std::string store = (dir_ / "store").string();

  Outcome o = Dfarm({"sweep", spec_path.string(), "--json", "--agent-store", store});
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  json s = json::parse(o.out);
  const int64_t jobs = 2 * 2 * 2 * 2;  // devices x runners x models x delegates
  EXPECT_EQ(s["jobs"], jobs);
  EXPECT_EQ(s["ok"], jobs) << o.out;
  for (const auto& row : QueryRows(db_,
                                   "SELECT device || ' ' || runner || ' ' || delegate || ' ' "
                                   "|| status || ': ' || error FROM jobs WHERE status <> 'ok'")) {
    ADD_FAILURE() << row.front();
  }

  // show --json names each job's runner: name, kind, build, version.
  Outcome show = Dfarm({"show", "last", "--json"});
  ASSERT_EQ(show.code, 0) << show.err;
  json doc = json::parse(show.out);
  std::map<std::string, std::set<std::string>> shas;  // runner name -> builds (one per ABI)
  for (const json& j : doc["jobs"]) {
    ASSERT_TRUE(j["runner"].is_object()) << j.dump();
    const std::string name = j["runner"]["name"];
    EXPECT_EQ(j["status"], "ok") << j.dump();
    EXPECT_EQ(j["runner"]["kind"], name == "tflite" ? "tflite" : "dfarm") << j.dump();
    EXPECT_EQ(j["runner"]["sha256"].get<std::string>().size(), 64u);
    EXPECT_FALSE(j["runner"]["version"].get<std::string>().empty()) << j.dump();
    if (name == "tflite") {
      EXPECT_EQ(j["runner"]["version"].get<std::string>().rfind("2.", 0), 0u);
    }
    shas[name].insert(j["runner"]["sha256"]);
  }
  ASSERT_EQ(shas.size(), 2u);
  EXPECT_EQ(shas["ours"].size(), 2u);  // x86-64 and arm64 builds
  EXPECT_EQ(shas["tflite"].size(), 2u);

  // The text table has a RUNNER column; the report names both runners.
  Outcome text = Dfarm({"show", "last"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("RUNNER"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("tflite@"), std::string::npos) << text.out;
  const std::string html = (dir_ / "report.html").string();
  Outcome rep = Dfarm({"report", "last", "--format", "html", "-o", html});
  ASSERT_EQ(rep.code, 0) << rep.err;
  std::string page = Slurp(html);
  EXPECT_NE(page.find("(runner tflite)"), std::string::npos);
  EXPECT_NE(page.find("(runner ours)"), std::string::npos);

  // The gate compares ours with TensorFlow Lite cell by cell in one run.
  Outcome gate =
      Dfarm({"compare", "last", "last", "--runner-a", "tflite", "--runner-b", "ours", "--json"});
  ASSERT_EQ(gate.code, 0) << gate.err;
  json g = json::parse(gate.out);
  EXPECT_EQ(g["cells"].size(), 2u * 2u * 2u);  // devices x models x delegates
  for (const json& c : g["cells"]) {
    EXPECT_EQ(c["runner"], "ours vs tflite");
    EXPECT_EQ(c["candidate_jobs"].size(), 1u) << c.dump();
    EXPECT_EQ(c["baseline_jobs"].size(), 1u) << c.dump();
  }
}

// The arm64 bundle's xnnpack outputs against the x86-64 runner's, on the same
// seeded inputs: the same network within float tolerance.
TEST_F(RunnersE2eTest, Arm64XnnpackMatchesX86) {
  const fs::path bundle = dir_ / "runner-arm64.bundle";
  ASSERT_EQ(Run({(BinDir() / "dfarm").string(), "bundle", (arm64_ / "dfarm-runner").string(), "-o",
                 bundle.string()}),
            0)
      << Slurp(dir_ / "run.err");
  // The bundle unpacked by hand as the agent does, run with no host sysroot.
  const fs::path unpacked = dir_ / "unpacked";
  auto layout = agent::UnpackBundleFile(bundle.string(), unpacked.string());
  ASSERT_TRUE(layout) << layout.message();
  EXPECT_EQ(layout->exec, "bin/dfarm-runner");
  const std::string model = (fs::path(DFARM_MODELS_DIR) / kModels[0]).string();
  const fs::path x86_out = dir_ / "x86", arm_out = dir_ / "arm";
  ASSERT_EQ(Run({(BinDir() / "dfarm-runner").string(), "--model", model, "--delegate", "xnnpack",
                 "--num-runs", "1", "--dump-outputs", x86_out.string()}),
            0)
      << Slurp(dir_ / "run.err");
  ASSERT_FALSE(layout->loader.empty());
  const fs::path loader = unpacked / layout->loader;
  ASSERT_EQ(Run({qemu_, loader.string(), "--library-path", (unpacked / "lib").string(),
                 (unpacked / "bin" / "dfarm-runner").string(), "--model", model, "--delegate",
                 "xnnpack", "--num-runs", "1", "--dump-outputs", arm_out.string()}),
            0)
      << Slurp(dir_ / "run.err");
  json outs = json::parse(Slurp(x86_out / "outputs.json"));
  ASSERT_FALSE(outs.empty());
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string file = "output_" + std::to_string(i) + ".bin";
    std::vector<float> a = ReadFloats(x86_out / file), b = ReadFloats(arm_out / file);
    ASSERT_EQ(a.size(), b.size()) << file;
    ASSERT_FALSE(a.empty());
    double worst = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      worst = std::max(worst, std::abs(double(a[k]) - b[k]) / (1e-4 + 1e-3 * std::abs(a[k])));
    }
    EXPECT_LE(worst, 1.0) << file << ": beyond 1e-4 + 1e-3 relative";
  }
}

}  // namespace
}  // namespace dfarm::e2e
