// End to end: the real `dfarm sweep` over cpu, xnnpack, gpu and gpu
// with precision_loss_allowed on two corpus models, through the real agent
// (its `local` device) and the real protocol. The report's "Delegate init
// and fp16 cost" section has a cold and a warm init for every gpu cell and an
// fp16 cost per model; the rows and `dfarm devices` name the OpenCL device.
// Runs on whatever OpenCL the machine has (pocl in CI); skips without one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/e2e_shell.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

const std::vector<std::string> kModels = {"selfie_segmentation.tflite",
                                          "hand_landmark_lite.tflite"};

using dfarm::e2e::Outcome;
using dfarm::e2e::Slurp;

class GpuSweepE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = fs::path(DFARM_BINARY_DIR) / "bin";
    dir_ = fs::temp_directory_path() / ("dfarm_gpu_e2e_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Outcome Dfarm(const std::vector<std::string>& args) {
    return dfarm::e2e::RunShell(dir_, dfarm::e2e::QuotedCommand(bin_ / "dfarm", args));
  }

  fs::path bin_, dir_;
};

// The spec: every model x {cpu, xnnpack, gpu, gpu fp16}; the gpu cells keep
// compiled programs in a relative serialization_dir (fresh per job).
json Spec(const std::vector<std::string>& models) {
  json gpu = json::object();
  gpu["name"] = "gpu";
  gpu["options"] = json::object();
  gpu["options"]["serialization_dir"] = "programs";
  json fp16 = gpu;
  fp16["options"]["precision_loss_allowed"] = true;
  json cpu = json::object();
  cpu["name"] = "cpu";
  json xnnpack = json::object();
  xnnpack["name"] = "xnnpack";
  json benchmark = json::object();
  benchmark["warmup_runs"] = 1;
  benchmark["num_runs"] = 3;
  benchmark["accuracy_reference"] = "cpu";
  benchmark["timeout_s"] = 120;
  json spec = json::object();
  spec["name"] = "gpu-sweep";
  spec["models"] = models;
  spec["delegates"] = json::array({cpu, xnnpack, gpu, fp16});
  spec["devices"] = json::array({"local"});
  spec["benchmark"] = benchmark;
  return spec;
}

TEST_F(GpuSweepE2eTest, ReportShowsInitTimesAndFp16CostPerModel) {
  std::vector<std::string> models;
  for (const std::string& m : kModels) {
    const fs::path path = fs::path(DFARM_MODELS_DIR) / m;
    if (!fs::exists(path)) GTEST_SKIP() << path << " is absent (run scripts/setup.sh)";
    models.push_back(path.string());
  }
  std::ofstream(dir_ / "spec.json") << Spec(models).dump(2);
  const std::string db = (dir_ / "x.db").string();
  Outcome sweep = Dfarm({"sweep", "spec.json", "--db", db, "--json", "--agent-store",
                         (dir_ / "agent-store").string()});
  if (sweep.err.find("no OpenCL") != std::string::npos ||
      sweep.err.find("unknown delegate 'gpu'") != std::string::npos) {
    GTEST_SKIP() << "no OpenCL device here (or a build without the gpu delegate): " << sweep.err;
  }
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  const json summary = json::parse(sweep.out);
  EXPECT_EQ(summary["jobs"], 8);
  EXPECT_EQ(summary["ok"], 8) << sweep.err;
  const std::string run = std::to_string(summary["run_id"].get<int64_t>());

  Outcome md = Dfarm({"report", run, "--db", db, "--format", "md", "-o", "-"});
  ASSERT_EQ(md.code, 0) << md.err;
  const std::string text = md.out;
  ASSERT_THAT(text, HasSubstr("## Delegate init and fp16 cost"));
  const std::string section = text.substr(text.find("## Delegate init and fp16 cost"));
  EXPECT_THAT(section, HasSubstr("OpenCL device of **local**: "));
  for (const std::string& m : kModels) {
    std::string model = m;  // as Markdown escapes it
    for (size_t p = 0; (p = model.find('_', p)) != std::string::npos; p += 2) model.insert(p, "\\");
    int gpu_rows = 0, costs = 0;
    std::istringstream lines(section);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("| " + model + " | gpu\\[", 0) != 0) continue;  // gpu[options] x1
      ++gpu_rows;
      // | model | delegate | device | mean | first | init | cold | warm | max abs | cost |
      std::vector<std::string> cols;
      std::istringstream cells(line);
      for (std::string c; std::getline(cells, c, '|');) cols.push_back(c);
      ASSERT_GE(cols.size(), 11u) << line;
      EXPECT_NE(cols[7], " – ") << "no cold init: " << line;
      EXPECT_NE(cols[8], " – ") << "no warm init: " << line;
      if (cols[10].find(": +") != std::string::npos) ++costs;
    }
    EXPECT_EQ(gpu_rows, 2) << m << "\n" << section;
    EXPECT_EQ(costs, 1) << "no fp16 cost for " << m << "\n" << section;
  }

  Outcome rows = Dfarm({"report", run, "--db", db, "--format", "json", "-o", "-"});
  ASSERT_EQ(rows.code, 0) << rows.err;
  int gpu_jobs = 0;
  const json table = json::parse(rows.out);
  for (const json& row : table["jobs"]) {
    EXPECT_FALSE(row["gpu_device"].get<std::string>().empty());
    if (row["delegate"] != "gpu") continue;
    ++gpu_jobs;
    EXPECT_TRUE(row["init_cold_us"].is_number()) << row.dump();
    EXPECT_TRUE(row["init_warm_us"].is_number()) << row.dump();
  }
  EXPECT_EQ(gpu_jobs, 4);

  Outcome devices = Dfarm({"devices", "--db", db, "--json"});
  const json listed = json::parse(devices.out)["devices"];
  ASSERT_FALSE(listed.empty()) << devices.out;
  EXPECT_FALSE(listed[0]["opencl"].empty()) << devices.out;
}

}  // namespace
