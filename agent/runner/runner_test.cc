// Runs the built dfarm-runner binary as a subprocess, as the agent does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "agent/testing/run_process.h"
#include "flatbuffers/flexbuffers.h"
#include "tests/model_builder/crafted_models.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

using Process = agent::testing::ProcessOutput;
using agent::testing::ReadFile;

template <typename T>
void WriteValues(const fs::path& path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::vector<float> ReadFloats(const fs::path& path) {
  std::string bytes = ReadFile(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("dfarm_runner_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs dfarm-runner with `args` (each single-quoted for the shell); with
  // `kill_after_s`, SIGKILLs it after that many seconds (exit code 137).
  Process RunRunner(const std::vector<std::string>& args, int kill_after_s = 0) {
    std::vector<std::string> words{std::string(DFARM_BINARY_DIR) + "/bin/dfarm-runner"};
    words.insert(words.end(), args.begin(), args.end());
    return agent::testing::RunQuoted(
        words, dir_.string(),
        kill_after_s > 0 ? "timeout -s KILL " + std::to_string(kill_after_s) : "");
  }

  // input_0 [1,2,2,1] -> CONV_2D 1x1 (weights 2,-1; bias 0.5,0; RELU) -> output_0 [1,2,2,2]
  // input_0 + input_1 [1] -> output_1 [1,2,2,1]
  std::string SmallModel() {
    ModelBuilder b;
    int in0 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1}, "image");
    int in1 = b.AddTensor(tfl::TensorType::FLOAT32, {1}, "offset");
    int filter = b.AddConstFloat32({2, 1, 1, 1}, {2, -1}, "filter");
    int bias = b.AddConstFloat32({2}, {0.5f, 0}, "bias");
    int conv = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2}, "features");
    int sum = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1}, "shifted");
    Conv2DParams p;
    p.activation = tfl::ActivationFunctionType::RELU;
    b.AddConv2D(in0, filter, bias, conv, p);
    b.AddAdd(in0, in1, sum);
    b.SetInputs({in0, in1});
    b.SetOutputs({conv, sum});
    fs::path path = dir_ / "small.tflite";
    EXPECT_TRUE(b.WriteFile(path.string()));
    return path.string();
  }

  fs::path dir_;
};

TEST_F(RunnerTest, InputsAndDumpedOutputs) {
  std::string model = SmallModel();
  fs::create_directories(dir_ / "in");
  WriteValues<float>(dir_ / "in" / "input_0.bin", {1, -2, 3, 0.25f});
  WriteValues<float>(dir_ / "in" / "input_1.bin", {10});
  Process p = RunRunner({"--model", model, "--inputs", (dir_ / "in").string(), "--dump-outputs",
                         (dir_ / "out").string(), "--num-runs", "3"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  // Without --json, stdout holds benchmark_model's summary line only.
  EXPECT_THAT(p.out, MatchesRegex("Inference timings in us: Init: [0-9]+, First inference: "
                                  "[0-9]+, Warmup \\(avg\\): [0-9.e+-]+, Inference \\(avg\\): "
                                  "[0-9.e+-]+\n"));
  // (2v + 0.5, -v), clamped at 0, per pixel v.
  EXPECT_THAT(ReadFloats(dir_ / "out" / "output_0.bin"),
              ElementsAre(2.5f, 0.0f, 0.0f, 2.0f, 6.5f, 0.0f, 1.0f, 0.0f));
  EXPECT_THAT(ReadFloats(dir_ / "out" / "output_1.bin"), ElementsAre(11.0f, 8.0f, 13.0f, 10.25f));
  nlohmann::json index = nlohmann::json::parse(ReadFile(dir_ / "out" / "outputs.json"));
  EXPECT_EQ(index, nlohmann::json::parse(
                       R"([{"index":0,"name":"features","dtype":"float32","shape":[1,2,2,2]},
                           {"index":1,"name":"shifted","dtype":"float32","shape":[1,2,2,1]}])"));
  EXPECT_THAT(p.err, HasSubstr("3 runs: mean"));
}

TEST_F(RunnerTest, WronglySizedInputNamesTheExpectedSize) {
  std::string model = SmallModel();
  fs::create_directories(dir_ / "in");
  WriteValues<float>(dir_ / "in" / "input_0.bin", {1, 2, 3});
  WriteValues<float>(dir_ / "in" / "input_1.bin", {10});
  Process p = RunRunner({"--model", model, "--inputs", (dir_ / "in").string(), "--json"});
  EXPECT_EQ(p.exit_code, 1);
  std::string expected = "input file '" + (dir_ / "in" / "input_0.bin").string() +
                         "' has 12 bytes, expected 16 bytes for input 0 'image' (float32 "
                         "[1,2,2,1])";
  EXPECT_THAT(p.err, HasSubstr(expected));
  nlohmann::json doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["status"], "model_error");
  EXPECT_EQ(doc["error"], expected);
}

TEST_F(RunnerTest, MissingInputFile) {
  std::string model = SmallModel();
  fs::create_directories(dir_ / "in");
  WriteValues<float>(dir_ / "in" / "input_0.bin", {1, 2, 3, 4});
  Process p = RunRunner({"--model", model, "--inputs", (dir_ / "in").string()});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_THAT(p.err, HasSubstr("input_1.bin' is missing (expected 4 bytes for input 1 'offset'"));
}

// A FIFO given as --model is refused as a model_error at once; opening it must
// not wait for a writer (the 30 s kill is only a guard against a hang).
TEST_F(RunnerTest, FifoModelIsRefusedWithoutBlocking) {
  const std::string fifo = (dir_ / "model.tflite").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Process p = RunRunner({"--model", fifo, "--json"}, 30);
  ASSERT_NE(p.exit_code, 137) << "dfarm-runner blocked on a FIFO given as --model";
  EXPECT_EQ(p.exit_code, 1) << p.err;
  EXPECT_THAT(p.err, HasSubstr("'" + fifo + "' is not a regular file"));
  nlohmann::json doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["status"], "model_error");
}

TEST_F(RunnerTest, JsonDocument) {
  std::string model = SmallModel();
  Process p = RunRunner(
      {"--model", model, "--json", "--num-runs", "5", "--warmup-runs", "2", "--seed", "3"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json doc = nlohmann::json::parse(p.out);  // stdout is exactly one document
  EXPECT_EQ(doc["status"], "ok");
  EXPECT_EQ(doc["model"], "small.tflite");
  EXPECT_EQ(doc["delegate"], "cpu");
  EXPECT_EQ(doc["num_threads"], 1);
  const nlohmann::json& m = doc["metrics"];
  for (const char* key :
       {"init_us", "first_us", "warmup_mean_us", "mean_us", "std_us", "min_us", "max_us", "p50_us",
        "p90_us", "p99_us", "num_runs", "peak_rss_bytes", "arena_bytes"}) {
    ASSERT_TRUE(m.contains(key)) << key;
    EXPECT_TRUE(m[key].is_number()) << key;
    EXPECT_GE(m[key].get<double>(), 0) << key;
  }
  EXPECT_EQ(m["num_runs"], 5);
  EXPECT_GT(m["peak_rss_bytes"].get<double>(), 0);
  EXPECT_GT(m["arena_bytes"].get<double>(), 0);
  EXPECT_LE(m["min_us"].get<double>(), m["p50_us"].get<double>());
  EXPECT_LE(m["p50_us"].get<double>(), m["max_us"].get<double>());
  ASSERT_TRUE(doc["samples_us"].is_array());
  EXPECT_EQ(doc["samples_us"].size(), 5u);
  EXPECT_EQ(doc["inputs"], nlohmann::json::parse(
                               R"([{"index":0,"name":"image","dtype":"float32","shape":[1,2,2,1]},
                                   {"index":1,"name":"offset","dtype":"float32","shape":[1]}])"));
  EXPECT_EQ(doc["outputs"].size(), 2u);
  EXPECT_EQ(doc["outputs"][0]["shape"], nlohmann::json::parse("[1,2,2,2]"));
}

TEST_F(RunnerTest, SeededRandomInputsAreReproducible) {
  std::string model = SmallModel();
  auto run = [&](const std::string& seed, const std::string& out) {
    Process p = RunRunner({"--model", model, "--seed", seed, "--num-runs", "1", "--dump-outputs",
                           (dir_ / out).string()});
    EXPECT_EQ(p.exit_code, 0) << p.err;
    return ReadFile(dir_ / out / "output_1.bin");
  };
  std::string a = run("5", "a"), b = run("5", "b"), c = run("6", "c");
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // input_0 + input_1 with both in [-1, 1).
  for (float v : ReadFloats(dir_ / "a" / "output_1.bin")) {
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 2.0f);
  }
}

// Each output carries the sha256 of its bytes after the last
// measured run: the dumped bytes', the same for the same seed, else not.
TEST_F(RunnerTest, OutputsCarryTheSha256OfTheirBytes) {
  std::string model = SmallModel();
  auto run = [&](const std::string& seed, const std::string& out) {
    Process p = RunRunner({"--model", model, "--json", "--seed", seed, "--num-runs", "3",
                           "--dump-outputs", (dir_ / out).string()});
    EXPECT_EQ(p.exit_code, 0) << p.err;
    nlohmann::json doc = nlohmann::json::parse(p.out);
    std::vector<std::string> shas;
    for (const nlohmann::json& o : doc["outputs"]) {
      EXPECT_TRUE(o.contains("sha256")) << o.dump();
      shas.push_back(o.value("sha256", ""));
    }
    EXPECT_FALSE(doc["inputs"][0].contains("sha256"));
    return shas;
  };
  std::vector<std::string> a = run("5", "a"), b = run("5", "b"), c = run("6", "c");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a[1], c[1]);
  EXPECT_EQ(a[1].size(), 64u);
  EXPECT_EQ(a[1].find_first_not_of("0123456789abcdef"), std::string::npos);
  // The sha256 of the 16 bytes dumped, as sha256sum computes it.
  const fs::path sum = dir_ / "sum.txt";
  const std::string cmd =
      "sha256sum '" + (dir_ / "a" / "output_1.bin").string() + "' >'" + sum.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(ReadFile(sum).substr(0, 64), a[1]);
}

TEST_F(RunnerTest, ExitCodes) {
  std::string model = SmallModel();
  Process p = RunRunner({"--model", model, "--delegate", "npu", "--json"});
  EXPECT_EQ(p.exit_code, 3);
  const nlohmann::json doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["status"], "delegate_error");
  // The available list depends on the build (xnnpack, gpu: when found).
  EXPECT_THAT(doc["error"].get<std::string>(),
              MatchesRegex("unknown delegate 'npu' \\(available: cpu, external.*\\)"));

  p = RunRunner({"--model", model, "--bogus-flag", "--json"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(nlohmann::json::parse(p.out)["status"], "usage_error");
  EXPECT_EQ(RunRunner({}).exit_code, 2);
  EXPECT_EQ(RunRunner({"--model", model, "--num-runs", "0"}).exit_code, 2);

  std::ofstream((dir_ / "corrupt.tflite").string()) << "this is not a model at all";
  p = RunRunner({"--model", (dir_ / "corrupt.tflite").string(), "--json"});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_THAT(nlohmann::json::parse(p.out)["error"].get<std::string>(),
              HasSubstr("failed to load model 'corrupt.tflite': not a .tflite model"));

  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  // An op no kernel will ever have (TANH, used before, gained a kernel).
  b.AddCustomOperator("DfarmNoSuchOp", {in}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  ASSERT_TRUE(b.WriteFile((dir_ / "nosuch.tflite").string()));
  p = RunRunner({"--model", (dir_ / "nosuch.tflite").string(), "--json"});
  EXPECT_EQ(p.exit_code, 4);
  EXPECT_EQ(nlohmann::json::parse(p.out)["error"],
            "model 'nosuch.tflite' node 0 (DfarmNoSuchOp): op (custom) is not supported (no "
            "kernel registered)");

  p = RunRunner({"--help"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_THAT(p.out, HasSubstr("--delegate-options"));
}

TEST_F(RunnerTest, VersionAndRangeMessages) {
  Process p = RunRunner({"--version"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_THAT(p.out, ::testing::StartsWith("dfarm-runner "));
  p = RunRunner({"--model", SmallModel(), "--num-runs", "0", "--json"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(nlohmann::json::parse(p.out)["error"], "--num-runs: must be at least 1 (got 0)");
}

TEST_F(RunnerTest, PlacementOnCpu) {
  Process p = RunRunner({"--model", SmallModel(), "--json", "--num-runs", "1"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out)["placement"], nlohmann::json::parse(R"({"partitions":0,
      "nodes":[{"index":0,"op":"CONV_2D","delegate":"cpu"},{"index":1,"op":"ADD","delegate":"cpu"}]})"));
}

std::string PluginPath(const std::string& name) {
  return std::string(DFARM_BINARY_DIR) + "/lib/lib" + name + ".so";
}

TEST_F(RunnerTest, ExternalPluginDelegatesPartially) {
  std::string model = SmallModel();
  Process cpu =
      RunRunner({"--model", model, "--num-runs", "1", "--dump-outputs", (dir_ / "cpu").string()});
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  Process p = RunRunner({"--model", model, "--json", "--num-runs", "2", "--delegate", "external",
                         "--delegate-options", "path:" + PluginPath("dfarm_example_delegate"),
                         "--dump-outputs", (dir_ / "ext").string()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["delegate"], "external");
  EXPECT_EQ(doc["placement"], nlohmann::json::parse(R"json({"partitions":1,"nodes":[
      {"index":0,"op":"CONV_2D","delegate":"cpu",
       "reason":"example: CONV_2D is not supported (only ADD and SUB)"},
      {"index":1,"op":"ADD","delegate":"example","partition":0}]})json"));
  EXPECT_THAT(p.err, HasSubstr("placement: 1 partition(s), 1 of 2 nodes delegated"));
  EXPECT_EQ(ReadFile(dir_ / "ext" / "output_0.bin"), ReadFile(dir_ / "cpu" / "output_0.bin"));
  EXPECT_EQ(ReadFile(dir_ / "ext" / "output_1.bin"), ReadFile(dir_ / "cpu" / "output_1.bin"));
}

TEST_F(RunnerTest, ExternalPluginErrorsAreDelegateErrors) {
  std::string model = SmallModel();
  auto run = [&](const std::string& options) {
    Process p = RunRunner(
        {"--model", model, "--json", "--delegate", "external", "--delegate-options", options});
    EXPECT_EQ(p.exit_code, 3) << p.err;
    return nlohmann::json::parse(p.out);
  };
  nlohmann::json doc = run("path:/nonexistent/libx.so");
  EXPECT_EQ(doc["status"], "delegate_error");
  EXPECT_EQ(doc["error"], "external delegate plugin '/nonexistent/libx.so' does not exist");
  EXPECT_THAT(run("path:" + PluginPath("dfarm_bad_plugin_version"))["error"].get<std::string>(),
              HasSubstr("was built for plugin API version 2, but this runtime takes version 1"));
  EXPECT_THAT(run("path:" + PluginPath("dfarm_bad_plugin_nosymbol"))["error"].get<std::string>(),
              HasSubstr("has no symbol 'dfarm_delegate_plugin_get_api'"));
  EXPECT_THAT(run("k:v")["error"].get<std::string>(), HasSubstr("needs option 'path'"));
  Process p =
      RunRunner({"--model", model, "--json", "--delegate", "external", "--delegate-options",
                 "path:" + PluginPath("dfarm_example_delegate") + ";require_full_delegation:true"});
  EXPECT_EQ(p.exit_code, 4) << p.err;
  EXPECT_THAT(nlohmann::json::parse(p.out)["error"].get<std::string>(),
              HasSubstr("requires full delegation, but 1 node would fall back to the CPU"));
}

TEST_F(RunnerTest, CraftedPoolWindowIsAModelErrorWithinSeconds) {
  // MAX_POOL_2D with filter_height 2^31 - 1: the float pooling loop walked
  // every row of every window (a hang); now Prepare refuses it, on the CPU
  // and (the delegate declines it) with xnnpack alike.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1}, "image");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1}, "pooled");
  Pool2DParams p;
  p.padding = tfl::Padding::SAME;
  p.filter_h = 2147483647;
  b.AddPool2D(tfl::BuiltinOperator::MAX_POOL_2D, in, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  const fs::path model = dir_ / "crafted_pool.tflite";
  ASSERT_TRUE(b.WriteFile(model.string()));
  for (const char* delegate : {"cpu", "xnnpack"}) {
    const auto start = std::chrono::steady_clock::now();
    Process r = RunRunner(
        {"--model", model.string(), "--json", "--num-runs", "1", "--delegate", delegate}, 20);
    // Refused at once, not left to the 20 s timeout (a margin for a busy machine).
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15)) << delegate;
    ASSERT_EQ(r.exit_code, 1) << delegate << ": " << r.err;
    nlohmann::json doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["status"], "model_error") << delegate;
    EXPECT_THAT(doc["error"].get<std::string>(),
                HasSubstr("node 0 (MAX_POOL_2D): filter_height 2147483647 with stride_h 1 makes "
                          "the padded input height overflow"))
        << delegate;
  }
}

TEST_F(RunnerTest, CraftedShapesAreModelErrorsOrEmptyResultsOnEveryDelegate) {
  // Each crafted model (tests/model_builder/crafted_models.h) gives the CPU
  // path's answer on every delegate: model_error naming the node, or, for an
  // empty tensor, status ok with an empty output; never a crash (an empty
  // ADD aborted in XNNPACK, a RESHAPE to a larger declared shape read out of
  // bounds there).
  const std::vector<std::vector<std::string>> delegates = {
      {"--delegate", "cpu"},
      {"--delegate", "xnnpack"},
      {"--delegate", "gpu"},
      {"--delegate", "external", "--delegate-options",
       "path:" + PluginPath("dfarm_example_delegate")}};
  for (CraftedModel& crafted : CraftedShapeModels()) {
    const fs::path model = dir_ / (crafted.name + ".tflite");
    ASSERT_TRUE(crafted.builder.WriteFile(model.string()));
    for (const std::vector<std::string>& delegate : delegates) {
      SCOPED_TRACE(crafted.name + " on " + delegate[1]);
      std::vector<std::string> args = {"--model", model.string(), "--json", "--num-runs", "1"};
      args.insert(args.end(), delegate.begin(), delegate.end());
      Process r = RunRunner(args, 60);
      ASSERT_NE(r.exit_code, -1) << r.err;
      ASSERT_NE(r.exit_code, 137) << r.err;
      nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << "exit " << r.exit_code << ": " << r.err;
      if (delegate[1] == "gpu" && doc["status"] == "unsupported" &&
          doc.value("error", "").find("OpenCL") != std::string::npos) {
        continue;  // no OpenCL device here
      }
      if (crafted.error.empty()) {
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(doc["status"], "ok") << r.out;
        continue;
      }
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_EQ(doc["status"], "model_error") << r.out;
      EXPECT_THAT(doc.value("error", ""), HasSubstr(crafted.error));
    }
  }
}

// Runs dfarm-runner directly (no shell), killing it after `timeout_s`; returns
// the wait status.
int RunWithTimeout(const std::vector<std::string>& args, int timeout_s) {
  std::vector<std::string> argv = {std::string(DFARM_BINARY_DIR) + "/bin/dfarm-runner"};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> c;
    for (std::string& a : argv) c.push_back(a.data());
    c.push_back(nullptr);
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    execv(c[0], c.data());
    _exit(127);
  }
  int status = 0;
  for (int waited_ms = 0; waited_ms < timeout_s * 1000; waited_ms += 20) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

TEST_F(RunnerTest, CrashingPluginCostsOnlyTheRunnerProcess) {
  int status =
      RunWithTimeout({"--model", SmallModel(), "--delegate", "external", "--delegate-options",
                      "path:" + PluginPath("dfarm_bad_plugin_crash")},
                     20);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
}

TEST_F(RunnerTest, HangingPluginIsKilledByTheCallersTimeout) {
  auto start = std::chrono::steady_clock::now();
  int status = RunWithTimeout({"--model", SmallModel(), "--delegate", "external",
                               "--delegate-options", "path:" + PluginPath("dfarm_bad_plugin_hang")},
                              2);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(RunnerTest, FaceDetectionShortRange) {
  std::string model = std::string(DFARM_MODELS_DIR) + "/face_detection_short_range.tflite";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is absent";
  for (const char* out : {"a", "b"}) {
    Process p = RunRunner({"--model", model, "--num-runs", "2", "--warmup-runs", "0", "--json",
                           "--dump-outputs", (dir_ / out).string()});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    nlohmann::json doc = nlohmann::json::parse(p.out);
    EXPECT_EQ(doc["status"], "ok");
    EXPECT_EQ(doc["inputs"][0]["shape"], nlohmann::json::parse("[1,128,128,3]"));
  }
  nlohmann::json index = nlohmann::json::parse(ReadFile(dir_ / "a" / "outputs.json"));
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0]["shape"], nlohmann::json::parse("[1,896,16]"));
  EXPECT_EQ(index[1]["shape"], nlohmann::json::parse("[1,896,1]"));
  std::vector<float> boxes = ReadFloats(dir_ / "a" / "output_0.bin");
  std::vector<float> scores = ReadFloats(dir_ / "a" / "output_1.bin");
  ASSERT_EQ(boxes.size(), 896u * 16u);
  ASSERT_EQ(scores.size(), 896u);
  for (float v : boxes) ASSERT_TRUE(std::isfinite(v));
  for (float v : scores) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(ReadFile(dir_ / "a" / "output_0.bin"), ReadFile(dir_ / "b" / "output_0.bin"));
  EXPECT_EQ(ReadFile(dir_ / "a" / "output_1.bin"), ReadFile(dir_ / "b" / "output_1.bin"));
}

// input_0 [1,4] + input_1 [1] -> scores [1,4]: a class-score shaped output.
std::string ScoresModel(const fs::path& dir) {
  ModelBuilder b;
  int in0 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "logits");
  int in1 = b.AddTensor(tfl::TensorType::FLOAT32, {1}, "bias");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "scores");
  b.AddAdd(in0, in1, out);
  b.SetInputs({in0, in1});
  b.SetOutputs({out});
  fs::path path = dir / "scores.tflite";
  EXPECT_TRUE(b.WriteFile(path.string()));
  return path.string();
}

TEST_F(RunnerTest, MinSecsRunsAtLeastThatLong) {
  const auto start = std::chrono::steady_clock::now();
  Process p = RunRunner({"--model", SmallModel(), "--json", "--num-runs", "3", "--warmup-runs", "0",
                         "--min-secs", "0.2"});
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json doc = nlohmann::json::parse(p.out);
  const size_t runs = doc["metrics"]["num_runs"].get<size_t>();
  EXPECT_GT(runs, 3u);  // a tiny model runs far more than 3 times in 0.2 s
  EXPECT_EQ(doc["samples_us"].size(), runs);
  double total_us = 0;
  for (double us : doc["samples_us"]) total_us += us;
  // The loop's own cost (clock reads) is outside the samples, so only a bound.
  EXPECT_GT(total_us, 0);
  EXPECT_LE(total_us, 10e6);
  // num_runs still wins when it takes longer than min_secs.
  p = RunRunner({"--model", SmallModel(), "--json", "--num-runs", "7", "--min-secs", "0"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out)["metrics"]["num_runs"], 7);
}

TEST_F(RunnerTest, AccuracyAgainstItselfIsExact) {
  Process p = RunRunner(
      {"--model", SmallModel(), "--json", "--num-runs", "2", "--accuracy-reference", "cpu"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json acc = nlohmann::json::parse(p.out)["accuracy"];
  EXPECT_EQ(acc["reference"], "cpu");
  ASSERT_EQ(acc["outputs"].size(), 2u);
  EXPECT_EQ(acc["outputs"][0]["name"], "features");
  EXPECT_EQ(acc["outputs"][0]["compared"], 8);
  EXPECT_EQ(acc["outputs"][1]["compared"], 4);
  for (const nlohmann::json& o : acc["outputs"]) {
    for (const char* key : {"mean_abs_error", "std_abs_error", "max_abs_error", "rmse", "nan_count",
                            "inf_count", "reference_nan_count", "reference_inf_count"}) {
      EXPECT_EQ(o[key], 0) << key;
    }
    EXPECT_FALSE(o.contains("top1_agree"));  // not class-score shaped
  }
  EXPECT_THAT(p.err, HasSubstr("accuracy vs cpu, output 0: mean abs error 0"));
  // No key without the flag.
  p = RunRunner({"--model", SmallModel(), "--json", "--num-runs", "1"});
  EXPECT_FALSE(nlohmann::json::parse(p.out).contains("accuracy"));
}

TEST_F(RunnerTest, QuantizedInputsAreGaussianInTheTensorsRange) {
  // int8 input (scale 0.05, zero point -10: reals in [-5.9, 6.85]) -> RELU (int8)
  // and -> DEQUANTIZE (float32), so the dumped float output is the input in real units.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::INT8, {1, 1000}, "q_in");
  b.SetQuantization(in, 0.05f, -10);
  int relu = b.AddTensor(tfl::TensorType::INT8, {1, 1000}, "q_relu");
  b.SetQuantization(relu, 0.05f, -10);
  int real = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1000}, "real");
  b.AddUnary(tfl::BuiltinOperator::RELU, in, relu);
  b.AddDequantize(in, real);
  b.SetInputs({in});
  b.SetOutputs({relu, real});
  fs::path model = dir_ / "quant.tflite";
  ASSERT_TRUE(b.WriteFile(model.string()));
  Process p = RunRunner({"--model", model.string(), "--json", "--num-runs", "1",
                         "--accuracy-reference", "cpu", "--dump-outputs", (dir_ / "out").string()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["inputs"][0]["dtype"], "int8");
  const nlohmann::json& acc = doc["accuracy"]["outputs"];
  ASSERT_EQ(acc.size(), 2u);
  EXPECT_EQ(acc[0]["max_abs_error_lsb"], 0);           // int8 output: errors in LSB too
  EXPECT_FALSE(acc[1].contains("max_abs_error_lsb"));  // float32 output

  std::vector<float> values = ReadFloats(dir_ / "out" / "output_1.bin");
  ASSERT_EQ(values.size(), 1000u);
  double sum = 0, sum_sq = 0;
  for (float v : values) {
    EXPECT_GE(v, 0.05f * (-128 + 10) - 1e-4f);
    EXPECT_LE(v, 0.05f * (127 + 10) + 1e-4f);
    sum += v;
    sum_sq += double(v) * v;
  }
  // Gaussian with mean (-5.9 + 6.85) / 2 = 0.475 and std 12.75 / 6 = 2.125.
  const double mean = sum / 1000, std = std::sqrt(sum_sq / 1000 - mean * mean);
  EXPECT_NEAR(mean, 0.475, 0.3);
  EXPECT_NEAR(std, 2.125, 0.4);
}

// A quantized int8 model (per-channel CONV_2D, then ADD) on xnnpack: every
// node is delegated, inputs are int8, and the int8 output is within 2 LSB of
// the reference kernels (XNNPACK requantizes in float32, TFLite in fixed point).
TEST_F(RunnerTest, QuantizedModelOnXnnpackIsWithinTwoLsbOfTheReference) {
  ModelBuilder b;
  auto q = [&](std::vector<int32_t> shape, float scale, int64_t zp, std::string name = {}) {
    const int t = b.AddTensor(tfl::TensorType::INT8, std::move(shape), std::move(name));
    b.SetQuantization(t, scale, zp);
    return t;
  };
  const int in = q({1, 12, 12, 4}, 0.02f, 3, "q_in");
  std::vector<uint8_t> w(6 * 3 * 3 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>((i * 53 + 7) % 255 - 127);
  const int filter = b.AddConstRaw(tfl::TensorType::INT8, {6, 3, 3, 4}, w);
  const std::vector<float> scales = {0.003f, 0.004f, 0.005f, 0.006f, 0.007f, 0.008f};
  b.SetQuantization(filter, scales, std::vector<int64_t>(6, 0), 0);
  const int conv = q({1, 12, 12, 6}, 0.04f, -5);
  b.AddConv2D(in, filter, -1, conv, Conv2DParams{tfl::Padding::SAME});
  const int sum = q({1, 12, 12, 6}, 0.08f, 0, "q_out");
  b.AddBinary(tfl::BuiltinOperator::ADD, conv, conv, sum);
  b.SetInputs({in});
  b.SetOutputs({sum});
  const fs::path model = dir_ / "quantized_conv.tflite";
  ASSERT_TRUE(b.WriteFile(model.string()));
  Process p = RunRunner({"--model", model.string(), "--json", "--num-runs", "2", "--delegate",
                         "xnnpack", "--accuracy-reference", "cpu"});
  if (p.exit_code != 0 && p.out.find("unknown delegate") != std::string::npos) {
    GTEST_SKIP() << "this build has no xnnpack delegate";
  }
  ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
  const nlohmann::json doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["inputs"][0]["dtype"], "int8");
  EXPECT_EQ(doc["placement"]["partitions"], 1);
  for (const nlohmann::json& node : doc["placement"]["nodes"]) {
    EXPECT_EQ(node["delegate"], "xnnpack") << node.dump();
  }
  const nlohmann::json& acc = doc["accuracy"]["outputs"][0];
  EXPECT_LE(acc["max_abs_error_lsb"].get<double>(), 2.0) << acc.dump();
}

// --num-threads reaches our kernels on the cpu path (the interpreter's pool)
// and xnnpack as its threads option (threads_used says so), and may not
// contradict an explicit threads option.
TEST_F(RunnerTest, NumThreadsReachesXnnpackAndThreadsUsedTellsTheTruth) {
  const std::string model = SmallModel();
  Process p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--num-threads", "2"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["num_threads"], 2);
  EXPECT_EQ(doc["threads_used"], 2);
  EXPECT_THAT(p.err, Not(HasSubstr("runs on one thread")));
  p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--num-threads", "2", "--delegate",
                 "xnnpack"});
  if (p.exit_code != 0 && p.out.find("unknown delegate") != std::string::npos) {
    GTEST_SKIP() << "this build has no xnnpack delegate";
  }
  ASSERT_EQ(p.exit_code, 0) << p.err;
  doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["num_threads"], 2);
  EXPECT_EQ(doc["threads_used"], 2);
  p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--delegate", "xnnpack",
                 "--delegate-options", "threads:3"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out)["threads_used"], 3);
  p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--num-threads", "2", "--delegate",
                 "xnnpack", "--delegate-options", "threads:3"});
  EXPECT_EQ(p.exit_code, 3);
  doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["status"], "delegate_error");
  EXPECT_THAT(doc["error"].get<std::string>(),
              HasSubstr("--num-threads 2 disagrees with delegate option threads:3"));
}

TEST_F(RunnerTest, AccuracyOfTheExamplePluginWithClassScores) {
  std::string model = ScoresModel(dir_);
  fs::create_directories(dir_ / "in");
  WriteValues<float>(dir_ / "in" / "input_0.bin", {0.1f, 3.0f, -2.0f, 0.5f});
  WriteValues<float>(dir_ / "in" / "input_1.bin", {0.25f});
  Process p = RunRunner({"--model", model, "--json", "--num-runs", "2", "--delegate", "external",
                         "--delegate-options", "path:" + PluginPath("dfarm_example_delegate"),
                         "--accuracy-reference", "cpu", "--inputs", (dir_ / "in").string()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["placement"]["partitions"], 1);
  const nlohmann::json& o = doc["accuracy"]["outputs"][0];
  EXPECT_EQ(o["compared"], 4);
  EXPECT_LE(o["max_abs_error"].get<double>(), 1e-6);
  EXPECT_LE(o["rmse"].get<double>(), 1e-6);
  EXPECT_EQ(o["top1_agree"], true);
  EXPECT_EQ(o["top5_agree"], true);
}

// x -> ADD(c) x5 -> out: five delegable nodes in a row.
std::string AddChainModel(const fs::path& dir) {
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "x");
  int c = b.AddConstFloat32({1}, {0.5f}, "c");
  int prev = x;
  for (int i = 0; i < 5; ++i) {
    int t = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "t" + std::to_string(i));
    b.AddAdd(prev, c, t);
    prev = t;
  }
  b.SetInputs({x});
  b.SetOutputs({prev});
  fs::path path = dir / "chain.tflite";
  EXPECT_TRUE(b.WriteFile(path.string()));
  return path.string();
}

// --accuracy-reference layers with the planted bad node of
// libdfarm_perturb_delegate.so (node 2), delegated up to a node index.
TEST_F(RunnerTest, LayerErrorsFindTheFirstBadNode) {
  const std::string model = AddChainModel(dir_);
  auto layers_of_chain = [&](int last) {
    Process p = RunRunner(
        {"--model", model, "--json", "--num-runs", "1", "--delegate", "external",
         "--delegate-options",
         "path:" + PluginPath("dfarm_perturb_delegate") +
             ";perturb_node:2;delta:0.25;last_delegate_node_index:" + std::to_string(last),
         "--accuracy-reference", "layers"});
    EXPECT_EQ(p.exit_code, 0) << p.err;
    return nlohmann::json::parse(p.out);
  };
  nlohmann::json doc = layers_of_chain(2);
  EXPECT_EQ(doc["accuracy"]["reference"], "layers");
  EXPECT_NEAR(doc["accuracy"]["outputs"][0]["max_abs_error"].get<double>(), 0.25, 1e-6);
  const nlohmann::json& layers = doc["accuracy"]["layers"];
  ASSERT_EQ(layers.size(), 3u) << layers;  // the partition 0..2, then nodes 3 and 4 on the CPU
  EXPECT_EQ(layers[0]["node"], 0);
  EXPECT_EQ(layers[0]["op"], "DELEGATE");
  EXPECT_EQ(layers[0]["partition"], 0);
  EXPECT_EQ(layers[0]["name"], "t2");
  EXPECT_EQ(layers[1]["node"], 3);
  EXPECT_EQ(layers[1]["op"], "ADD");
  EXPECT_EQ(layers[1]["delegate"], "cpu");
  for (const nlohmann::json& l : layers) {
    EXPECT_NEAR(l["max_abs_error"].get<double>(), 0.25, 1e-6) << l;
  }
  // Delegated up to node 1 only, the bad node runs on the CPU: no error anywhere.
  doc = layers_of_chain(1);
  ASSERT_EQ(doc["accuracy"]["layers"].size(), 4u);
  for (const nlohmann::json& l : doc["accuracy"]["layers"]) EXPECT_EQ(l["max_abs_error"], 0) << l;
}

TEST_F(RunnerTest, AccuracyCountsNaNsOnBothSides) {
  std::string model = SmallModel();
  fs::create_directories(dir_ / "in");
  WriteValues<float>(dir_ / "in" / "input_0.bin", {1, -2, 3, 0.25f});
  WriteValues<float>(dir_ / "in" / "input_1.bin", {std::nanf("")});
  Process p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--delegate", "external",
                         "--delegate-options", "path:" + PluginPath("dfarm_example_delegate"),
                         "--accuracy-reference", "cpu", "--inputs", (dir_ / "in").string()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json outputs = nlohmann::json::parse(p.out)["accuracy"]["outputs"];
  EXPECT_EQ(outputs[0]["compared"], 8);
  EXPECT_EQ(outputs[0]["nan_count"], 0);
  EXPECT_EQ(outputs[0]["max_abs_error"], 0);
  EXPECT_EQ(outputs[1]["compared"], 0);  // image + NaN: every element is NaN
  EXPECT_EQ(outputs[1]["nan_count"], 4);
  EXPECT_EQ(outputs[1]["reference_nan_count"], 4);
  EXPECT_EQ(outputs[1]["rmse"], 0);
}

// --inputs twice: accuracy covers both sets (counts summed, "sets":2,
// agreement fractions); a set the model cannot read names its set.
TEST_F(RunnerTest, AccuracyAggregatesOverTwoInputSets) {
  std::string model = ScoresModel(dir_);
  for (const char* set : {"s0", "s1"}) fs::create_directories(dir_ / set);
  WriteValues<float>(dir_ / "s0" / "input_0.bin", {0.1f, 3.0f, -2.0f, 0.5f});
  WriteValues<float>(dir_ / "s0" / "input_1.bin", {0.25f});
  WriteValues<float>(dir_ / "s1" / "input_0.bin", {4.0f, 1.0f, -1.0f, 0.0f});
  WriteValues<float>(dir_ / "s1" / "input_1.bin", {std::nanf("")});
  Process p = RunRunner({"--model", model, "--json", "--num-runs", "2", "--delegate", "external",
                         "--delegate-options", "path:" + PluginPath("dfarm_example_delegate"),
                         "--accuracy-reference", "cpu", "--inputs", (dir_ / "s0").string(),
                         "--inputs", (dir_ / "s1").string()});
  ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
  nlohmann::json acc = nlohmann::json::parse(p.out)["accuracy"];
  EXPECT_EQ(acc["sets"], 2);
  const nlohmann::json& o = acc["outputs"][0];
  EXPECT_EQ(o["compared"], 4);  // set 1's scores are all NaN
  EXPECT_EQ(o["nan_count"], 4);
  EXPECT_EQ(o["reference_nan_count"], 4);
  EXPECT_LE(o["max_abs_error"].get<double>(), 1e-6);
  EXPECT_EQ(o["top1_agree"], true);  // NaN scores rank alike on both sides
  EXPECT_EQ(o["top1_agreement"], 1.0);
  EXPECT_EQ(o["top5_agreement"], 1.0);
  EXPECT_THAT(p.err, HasSubstr("top-1 agrees on 100%, top-5 on 100% of the sets"));
  EXPECT_THAT(p.err, HasSubstr("accuracy over 2 input set(s)"));
  fs::create_directories(dir_ / "s2");
  WriteValues<float>(dir_ / "s2" / "input_0.bin", {1.0f});
  p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--delegate", "external",
                 "--delegate-options", "path:" + PluginPath("dfarm_example_delegate"),
                 "--accuracy-reference", "cpu", "--inputs", (dir_ / "s0").string(), "--inputs",
                 (dir_ / "s2").string()});
  EXPECT_EQ(p.exit_code, 1) << p.out;  // model_error
  EXPECT_THAT(nlohmann::json::parse(p.out)["error"].get<std::string>(), HasSubstr("input set 1"));
}

// --task-outputs topk:K: per input set, the K best classes of the output,
// best first, ties in index order; with the delegate as with cpu.
TEST_F(RunnerTest, TaskOutputsListTheTopClassesOfEverySet) {
  std::string model = ScoresModel(dir_);
  for (const char* set : {"s0", "s1"}) fs::create_directories(dir_ / set);
  WriteValues<float>(dir_ / "s0" / "input_0.bin", {0.1f, 3.0f, -2.0f, 0.5f});
  WriteValues<float>(dir_ / "s0" / "input_1.bin", {0.25f});
  WriteValues<float>(dir_ / "s1" / "input_0.bin", {4.0f, 1.0f, 4.0f, 0.0f});
  WriteValues<float>(dir_ / "s1" / "input_1.bin", {0.0f});
  for (const char* delegate : {"cpu", "external"}) {
    SCOPED_TRACE(delegate);
    std::vector<std::string> args = {"--model",
                                     model,
                                     "--json",
                                     "--num-runs",
                                     "1",
                                     "--inputs",
                                     (dir_ / "s0").string(),
                                     "--inputs",
                                     (dir_ / "s1").string(),
                                     "--task-outputs",
                                     "topk:3",
                                     "--delegate",
                                     delegate};
    if (std::string(delegate) == "external") {
      args.insert(args.end(),
                  {"--delegate-options", "path:" + PluginPath("dfarm_example_delegate")});
    }
    Process p = RunRunner(args);
    ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
    const nlohmann::json task = nlohmann::json::parse(p.out)["task_outputs"];
    EXPECT_EQ(task["kind"], "topk");
    EXPECT_EQ(task["k"], 3);
    EXPECT_EQ(task["output"], 0);
    EXPECT_EQ(task["sets"], nlohmann::json::parse("[[1,3,0],[0,2,1]]"));
  }
  Process p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--inputs",
                         (dir_ / "s0").string(), "--task-outputs", "topk:3:1"});
  EXPECT_EQ(p.exit_code, 2) << p.out;  // usage: the model has one output
  EXPECT_THAT(nlohmann::json::parse(p.out)["error"].get<std::string>(),
              HasSubstr("names output 1 but the model has 1"));
}

// A detection post-process on two anchors, [0,0,.5,.5] and [.5,.5,1,1]
// (zero encodings, unit scales), one class after the background column;
// the encodings and class scores are the inputs.
std::string DetectionModel(const fs::path& dir) {
  ModelBuilder b;
  int enc = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 4}, "box_encodings");
  int cls = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2}, "class_scores");
  int anc =
      b.AddConstFloat32({2, 4}, {0.25f, 0.25f, 0.5f, 0.5f, 0.75f, 0.75f, 0.5f, 0.5f}, "anchors");
  int ob = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 4}, "boxes");
  int oc = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2}, "classes");
  int os = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2}, "scores");
  int on = b.AddTensor(tfl::TensorType::FLOAT32, {1}, "count");
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("max_detections", 2);
    fbb.Int("max_classes_per_detection", 1);
    fbb.Float("nms_score_threshold", 0.35f);
    fbb.Float("nms_iou_threshold", 0.5f);
    fbb.Int("num_classes", 1);
    for (const char* key : {"y_scale", "x_scale", "h_scale", "w_scale"}) fbb.Float(key, 1.0f);
  });
  fbb.Finish();
  b.AddCustomOperator("TFLite_Detection_PostProcess", {enc, cls, anc}, {ob, oc, os, on},
                      fbb.GetBuffer());
  b.SetInputs({enc, cls});
  b.SetOutputs({ob, oc, os, on});
  fs::path path = dir / "detect.tflite";
  EXPECT_TRUE(b.WriteFile(path.string()));
  return path.string();
}

// --task-outputs boxes: per set the post-process's first min(count, MAX)
// rows, [class, score, ymin, xmin, ymax, xmax].
TEST_F(RunnerTest, TaskOutputsListTheDetectionsOfEverySet) {
  const std::string model = DetectionModel(dir_);
  for (const char* set : {"s0", "s1"}) {
    fs::create_directories(dir_ / set);
    WriteValues<float>(dir_ / set / "input_0.bin", std::vector<float>(8, 0.0f));
  }
  WriteValues<float>(dir_ / "s0" / "input_1.bin", {0, 0.9f, 0, 0.6f});
  WriteValues<float>(dir_ / "s1" / "input_1.bin", {0, 0.1f, 0, 0.8f});
  std::vector<std::string> args = {"--model",
                                   model,
                                   "--json",
                                   "--num-runs",
                                   "1",
                                   "--inputs",
                                   (dir_ / "s0").string(),
                                   "--inputs",
                                   (dir_ / "s1").string(),
                                   "--task-outputs",
                                   "boxes:0,1,2,3"};
  Process p = RunRunner(args);
  ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
  nlohmann::json task = nlohmann::json::parse(p.out)["task_outputs"];
  EXPECT_EQ(task["kind"], "boxes");
  EXPECT_EQ(task["outputs"], nlohmann::json::parse("[0,1,2,3]"));
  EXPECT_EQ(task["max"], 100);
  EXPECT_EQ(task["sets"], nlohmann::json::parse(
                              "[[[0,0.9,0,0,0.5,0.5],[0,0.6,0.5,0.5,1,1]],[[0,0.8,0.5,0.5,1,1]]]"))
      << task.dump();
  args.back() = "boxes:0,1,2,3:1";
  p = RunRunner(args);
  ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
  task = nlohmann::json::parse(p.out)["task_outputs"];
  EXPECT_EQ(task["sets"], nlohmann::json::parse("[[[0,0.9,0,0,0.5,0.5]],[[0,0.8,0.5,0.5,1,1]]]"));
  args.back() = "boxes:0,1,3,2";  // count and scores swapped: not the post-process's layout
  p = RunRunner(args);
  EXPECT_EQ(p.exit_code, 2) << p.out;
  EXPECT_THAT(nlohmann::json::parse(p.out)["error"].get<std::string>(),
              HasSubstr("not a detection post-process's boxes"));
}

// Raw box regressors [1,2,4] and class scores [1,2,3] as inputs, passed
// through RESHAPE to the outputs.
std::string RawAnchorsModel(const fs::path& dir) {
  ModelBuilder b;
  int in_boxes = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 4}, "regressors_in");
  int in_scores = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 3}, "scores_in");
  int boxes = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 4}, "regressors");
  int scores = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 3}, "scores");
  b.AddReshape(in_boxes, boxes, {1, 2, 4});
  b.AddReshape(in_scores, scores, {1, 2, 3});
  b.SetInputs({in_boxes, in_scores});
  b.SetOutputs({boxes, scores});
  fs::path path = dir / "raw.tflite";
  EXPECT_TRUE(b.WriteFile(path.string()));
  return path.string();
}

// --task-outputs anchors: per set each (anchor, class >= OFFSET) whose
// activated score reaches THRESHOLD, best first, with the anchor's first
// four box values: [class, score, v0, v1, v2, v3, anchor].
TEST_F(RunnerTest, TaskOutputsListTheAnchorCandidatesOfEverySet) {
  const std::string model = RawAnchorsModel(dir_);
  fs::create_directories(dir_ / "s0");
  WriteValues<float>(dir_ / "s0" / "input_0.bin", {0.5f, -1, 2, 0.25f, 1, 2, 3, 4});
  // Anchor 0: logits 0, ln 3, -ln 3 (sigmoid 0.5, 0.75, 0.25); anchor 1: 0, 0, 0.
  const float ln3 = static_cast<float>(std::log(3.0));
  WriteValues<float>(dir_ / "s0" / "input_1.bin", {0, ln3, -ln3, 0, 0, 0});
  std::vector<std::string> args = {"--model",
                                   model,
                                   "--json",
                                   "--num-runs",
                                   "1",
                                   "--inputs",
                                   (dir_ / "s0").string(),
                                   "--task-outputs",
                                   "anchors:0,1:sigmoid:1:0.5"};
  Process p = RunRunner(args);
  ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
  nlohmann::json task = nlohmann::json::parse(p.out)["task_outputs"];
  EXPECT_EQ(task["kind"], "anchors");
  EXPECT_EQ(task["outputs"], nlohmann::json::parse("[0,1]"));
  EXPECT_EQ(task["anchors"], 2);
  EXPECT_EQ(task["offset"], 1);
  EXPECT_EQ(task["max"], 100);
  EXPECT_EQ(task["score"], "sigmoid");
  EXPECT_EQ(task["threshold"], 0.5);
  EXPECT_EQ(task["sets"], nlohmann::json::parse(
                              "[[[1,0.75,0.5,-1,2,0.25,0],[1,0.5,1,2,3,4,1],[2,0.5,1,2,3,4,1]]]"))
      << task.dump();
  // Softmax over an anchor's three scores: anchor 0 3/13, 9/13, 1/13, anchor
  // 1 1/3 each; at least 0.3 from class 1: three rows, MAX 2 keeps two.
  args.back() = "anchors:0,1:softmax:1:0.3:2";
  p = RunRunner(args);
  ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
  task = nlohmann::json::parse(p.out)["task_outputs"];
  ASSERT_EQ(task["sets"][0].size(), 2u) << task.dump();
  EXPECT_EQ(task["sets"][0][0][6], 0);
  EXPECT_NEAR(task["sets"][0][0][1].get<double>(), 9.0 / 13, 1e-6);
  EXPECT_EQ(task["sets"][0][1][0], 1);
  EXPECT_NEAR(task["sets"][0][1][1].get<double>(), 1.0 / 3, 1e-6);
  // Raw scores from class 0 above 1: none.
  args.back() = "anchors:0,1:raw:0:1.5";
  p = RunRunner(args);
  ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
  EXPECT_EQ(nlohmann::json::parse(p.out)["task_outputs"]["sets"], nlohmann::json::parse("[[]]"));
  args.back() = "anchors:1,0:raw:0:0";  // scores as boxes: 3 values an anchor
  p = RunRunner(args);
  EXPECT_EQ(p.exit_code, 2) << p.out;
  EXPECT_THAT(nlohmann::json::parse(p.out)["error"].get<std::string>(),
              HasSubstr("are not raw box regressors [1,N,K] (K >= 4)"));
  // MediaPipe's face detector: 896 anchors of 16 values and one score.
  const std::string face = std::string(DFARM_MODELS_DIR) + "/face_detection_short_range.tflite";
  if (!fs::exists(face)) return;
  fs::create_directories(dir_ / "face");
  WriteValues<float>(dir_ / "face" / "input_0.bin", std::vector<float>(128 * 128 * 3, 0.0f));
  p = RunRunner({"--model", face, "--json", "--num-runs", "1", "--inputs", (dir_ / "face").string(),
                 "--task-outputs", "anchors:0,1:sigmoid:0:0:5"});
  ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
  task = nlohmann::json::parse(p.out)["task_outputs"];
  EXPECT_EQ(task["anchors"], 896);
  ASSERT_EQ(task["sets"][0].size(), 5u);
  for (const auto& row : task["sets"][0]) EXPECT_LT(row[6].get<int>(), 896);
}

// --task-outputs classmap: the class of each pixel, run-length coded; one
// channel thresholded at 0 (logits) or 0.5 (probabilities), several by
// argmax (ties to the lower class).
TEST_F(RunnerTest, TaskOutputsListTheClassMapOfEverySet) {
  std::string model = ScoresModel(dir_);  // [1,4]: one row of four pixels
  fs::create_directories(dir_ / "s0");
  WriteValues<float>(dir_ / "s0" / "input_0.bin", {0.1f, 3.0f, -2.0f, 0.5f});
  WriteValues<float>(dir_ / "s0" / "input_1.bin", {0.25f});
  for (auto [activation, rle] :
       {std::pair{"logits", "[1,2,0,1,1,1]"}, std::pair{"probabilities", "[0,1,1,1,0,1,1,1]"}}) {
    Process p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--inputs",
                           (dir_ / "s0").string(), "--task-outputs",
                           std::string("classmap:0:") + activation});
    ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
    const nlohmann::json task = nlohmann::json::parse(p.out)["task_outputs"];
    EXPECT_EQ(task["kind"], "classmap");
    EXPECT_EQ(task["activation"], activation);
    EXPECT_EQ(task["sets"][0]["height"], 1);
    EXPECT_EQ(task["sets"][0]["width"], 4);
    EXPECT_EQ(task["sets"][0]["rle"], nlohmann::json::parse(rle)) << activation;
  }
  ModelBuilder b;
  int in0 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 3, 2}, "logits");
  int in1 = b.AddTensor(tfl::TensorType::FLOAT32, {1}, "bias");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 3, 2}, "classes");
  b.AddAdd(in0, in1, out);
  b.SetInputs({in0, in1});
  b.SetOutputs({out});
  ASSERT_TRUE(b.WriteFile((dir_ / "map.tflite").string()));
  WriteValues<float>(dir_ / "s0" / "input_0.bin", {1.0f, 2.0f, 5.0f, 3.0f, 2.0f, 2.0f});
  Process p = RunRunner({"--model", (dir_ / "map.tflite").string(), "--json", "--num-runs", "1",
                         "--inputs", (dir_ / "s0").string(), "--task-outputs", "classmap:0"});
  ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
  const nlohmann::json set = nlohmann::json::parse(p.out)["task_outputs"]["sets"][0];
  EXPECT_EQ(set["height"], 1);
  EXPECT_EQ(set["width"], 3);
  EXPECT_EQ(set["rle"], nlohmann::json::parse("[1,1,0,2]"));
}

// One set keeps today's figures and adds "sets":1.
TEST_F(RunnerTest, OneInputSetSaysSetsOne) {
  std::string model = ScoresModel(dir_);
  fs::create_directories(dir_ / "in");
  WriteValues<float>(dir_ / "in" / "input_0.bin", {0.1f, 3.0f, -2.0f, 0.5f});
  WriteValues<float>(dir_ / "in" / "input_1.bin", {0.25f});
  Process p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--delegate", "external",
                         "--delegate-options", "path:" + PluginPath("dfarm_example_delegate"),
                         "--accuracy-reference", "cpu", "--inputs", (dir_ / "in").string()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json acc = nlohmann::json::parse(p.out)["accuracy"];
  EXPECT_EQ(acc["sets"], 1);
  EXPECT_EQ(acc["outputs"][0]["compared"], 4);
  EXPECT_EQ(acc["outputs"][0]["top1_agreement"], 1.0);
}

TEST_F(RunnerTest, ProfileTimesNodesAndPartitions) {
  Process p = RunRunner({"--model", SmallModel(), "--json", "--num-runs", "3", "--delegate",
                         "external", "--delegate-options",
                         "path:" + PluginPath("dfarm_example_delegate"), "--profile"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  nlohmann::json prof = nlohmann::json::parse(p.out)["profile"];
  EXPECT_EQ(prof["runs"], 3);
  ASSERT_EQ(prof["nodes"].size(), 2u);
  EXPECT_EQ(prof["nodes"][0]["index"], 0);
  EXPECT_EQ(prof["nodes"][0]["op"], "CONV_2D");
  EXPECT_EQ(prof["nodes"][0]["delegate"], "cpu");
  EXPECT_EQ(prof["nodes"][1]["index"], 1);
  EXPECT_EQ(prof["nodes"][1]["op"], "DELEGATE");
  EXPECT_EQ(prof["nodes"][1]["delegate"], "example");
  EXPECT_EQ(prof["nodes"][1]["partition"], 0);
  EXPECT_EQ(prof["nodes"][1]["nodes"], nlohmann::json::parse("[1]"));
  double pct = 0;
  for (const nlohmann::json& n : prof["nodes"]) EXPECT_GE(n["mean_us"].get<double>(), 0);
  ASSERT_EQ(prof["by_op"].size(), 2u);
  for (const nlohmann::json& o : prof["by_op"]) {
    EXPECT_EQ(o["count"], 1);
    pct += o["pct"].get<double>();
  }
  EXPECT_NEAR(pct, 100.0, 1e-6);
  EXPECT_THAT(p.err, HasSubstr("profile over 3 run(s), by op type:"));

  p = RunRunner({"--model", SmallModel(), "--json", "--num-runs", "1", "--profile"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  prof = nlohmann::json::parse(p.out)["profile"];
  ASSERT_EQ(prof["nodes"].size(), 2u);
  EXPECT_EQ(prof["nodes"][1]["op"], "ADD");
  EXPECT_EQ(prof["nodes"][1]["delegate"], "cpu");
  EXPECT_FALSE(prof["nodes"][1].contains("partition"));
}

// A delegate that times the nodes inside its partitions (xnnpack) gives
// each delegated node an entry of its own after its partition's DELEGATE
// entry: the node's op, the delegate's name, the partition, no "nodes".
// by_op counts those nodes instead of DELEGATE. Structure only: no verdict
// on the times but that they are numbers >= 0.
// --accuracy-reference layers (the culprit finder's table) on xnnpack: the
// partition runs node by node (its per-node runtimes), so every delegated
// node has a row under its own op, not one "DELEGATE" row.
TEST_F(RunnerTest, LayerErrorsListTheNodesInsideXnnpackPartitions) {
  Process p = RunRunner({"--model", AddChainModel(dir_), "--json", "--num-runs", "1", "--delegate",
                         "xnnpack", "--accuracy-reference", "layers"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const nlohmann::json doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["placement"]["partitions"], 1);
  const nlohmann::json& layers = doc["accuracy"]["layers"];
  ASSERT_EQ(layers.size(), 5u) << layers;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(layers[i]["node"], i);
    EXPECT_EQ(layers[i]["op"], "ADD");
    EXPECT_EQ(layers[i]["delegate"], "xnnpack");
    EXPECT_EQ(layers[i]["partition"], 0);
    EXPECT_EQ(layers[i]["name"], "t" + std::to_string(i));
    EXPECT_LE(layers[i]["max_abs_error"].get<double>(), 1e-6);
  }
}

// testing::PadConvReluAdd(), written to `dir`.
std::string PadConvReluModel(const fs::path& dir) {
  ModelBuilder b = PadConvReluAdd();
  fs::path path = dir / "pad_conv_relu.tflite";
  EXPECT_TRUE(b.WriteFile(path.string()));
  return path.string();
}

// The nodes XNNPACK fuses run as one timed runtime on xnnpack: the PAD and
// the clamps read 0, the conv and the ADD carry the time; their outputs
// still reach the per-layer table.
TEST_F(RunnerTest, XnnpackFusedNodesReadZeroAndShowTheirOutputs) {
  const std::string model = PadConvReluModel(dir_);
  Process p = RunRunner(
      {"--model", model, "--json", "--num-runs", "2", "--delegate", "xnnpack", "--profile"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  std::vector<std::pair<std::string, double>> inside;
  const nlohmann::json doc = nlohmann::json::parse(p.out);
  for (const nlohmann::json& n : doc["profile"]["nodes"]) {
    if (n.contains("partition") && !n.contains("nodes")) {
      inside.emplace_back(n["op"].get<std::string>(), n["mean_us"].get<double>());
    }
  }
  ASSERT_EQ(inside.size(), 5u) << p.out;
  const char* ops[] = {"PAD", "CONV_2D", "RELU", "ADD", "RELU6"};
  const bool fused[] = {true, false, true, false, true};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(inside[i].first, ops[i]);
    if (fused[i]) {
      EXPECT_EQ(inside[i].second, 0.0) << ops[i];
    } else {
      EXPECT_GE(inside[i].second, 0.0) << ops[i];
    }
  }
  // The per-layer table: every node's outputs, those fusion keeps inside
  // XNNPACK made again, against a reference that folds nothing (its CPU
  // path would fold the same pairs and have no such tensors).
  p = RunRunner({"--model", model, "--json", "--num-runs", "1", "--delegate", "xnnpack",
                 "--accuracy-reference", "layers"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const nlohmann::json layers = nlohmann::json::parse(p.out)["accuracy"]["layers"];
  ASSERT_EQ(layers.size(), 5u) << layers;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(layers[i]["op"], ops[i]);
    EXPECT_EQ(layers[i]["delegate"], "xnnpack");
    EXPECT_LE(layers[i]["max_abs_error"].get<double>(), 1e-5) << layers[i];
  }
}

TEST_F(RunnerTest, ProfileTimesNodesInsideXnnpackPartitions) {
  Process p = RunRunner(
      {"--model", SmallModel(), "--json", "--num-runs", "2", "--delegate", "xnnpack", "--profile"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const nlohmann::json doc = nlohmann::json::parse(p.out);
  const nlohmann::json& prof = doc["profile"];
  std::map<int, nlohmann::json> inside;  // node -> its entry inside a partition
  int wholes = 0;
  for (const nlohmann::json& n : prof["nodes"]) {
    EXPECT_GE(n["mean_us"].get<double>(), 0);
    if (n["op"] == "DELEGATE") {
      ++wholes;
      EXPECT_FALSE(n["nodes"].empty());
    } else if (n.contains("partition")) {
      EXPECT_FALSE(n.contains("nodes"));
      inside[n["index"].get<int>()] = n;
    }
  }
  int delegated = 0;
  for (const nlohmann::json& n : doc["placement"]["nodes"]) {
    if (!n.contains("partition")) continue;
    ++delegated;
    const int index = n["index"].get<int>();
    ASSERT_EQ(inside.count(index), 1u) << "node " << index << " has no entry";
    EXPECT_EQ(inside[index]["op"], n["op"]);
    EXPECT_EQ(inside[index]["delegate"], "xnnpack");
    EXPECT_EQ(inside[index]["partition"], n["partition"]);
  }
  EXPECT_EQ(delegated, 2);
  EXPECT_EQ(static_cast<int>(inside.size()), delegated);
  EXPECT_EQ(wholes, doc["placement"]["partitions"].get<int>());
  for (const nlohmann::json& o : prof["by_op"]) EXPECT_NE(o["op"], "DELEGATE");
  // The partition's entry is its time in the profiled runs, which its
  // nodes' entries split: they add up to it but for rounding.
  for (size_t i = 0; i < prof["nodes"].size(); ++i) {
    const nlohmann::json& whole = prof["nodes"][i];
    if (whole["op"] != "DELEGATE") continue;
    double sum = 0;
    for (size_t k = i + 1; k < prof["nodes"].size() && !prof["nodes"][k].contains("nodes") &&
                           prof["nodes"][k].contains("partition");
         ++k) {
      sum += prof["nodes"][k]["mean_us"].get<double>();
    }
    EXPECT_NEAR(sum, whole["mean_us"].get<double>(), 1e-9 * whole["mean_us"].get<double>());
  }
  EXPECT_THAT(p.err, HasSubstr("partition 0 (xnnpack, "));
  EXPECT_THAT(p.err, HasSubstr(" us profiled (its nodes "));
  EXPECT_THAT(p.err, HasSubstr(" us run plainly ("));
}

TEST_F(RunnerTest, BadAccuracyReferenceIsAUsageError) {
  Process p = RunRunner({"--model", SmallModel(), "--json", "--accuracy-reference", "gpu"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(nlohmann::json::parse(p.out)["status"], "usage_error");
}

// --sustained-secs: the runs go on for the time asked, not --num-runs, and
// the curve's windows hold every run.
TEST_F(RunnerTest, SustainedModeGivesTheCurve) {
  const std::string model = SmallModel();
  Process p = RunRunner({"--model", model, "--json", "--num-runs", "3", "--sustained-secs", "0.4"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const nlohmann::json doc = nlohmann::json::parse(p.out);
  const nlohmann::json& s = doc["sustained"];
  EXPECT_DOUBLE_EQ(s["secs"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(s["window_ms"].get<double>(), 100);
  ASSERT_GE(s["windows"].size(), 3u);
  int64_t runs = 0;
  for (const nlohmann::json& w : s["windows"]) {
    runs += w["runs"].get<int64_t>();
    EXPECT_LE(w["p50_us"].get<double>(), w["max_us"].get<double>());
  }
  EXPECT_EQ(runs, doc["metrics"]["num_runs"].get<int64_t>());
  EXPECT_GT(runs, 3);
  EXPECT_THAT(p.err, HasSubstr("sustained 0.4 s in "));
  // Without it: no section.
  p = RunRunner({"--model", model, "--json", "--num-runs", "3"});
  EXPECT_FALSE(nlohmann::json::parse(p.out).contains("sustained"));
  p = RunRunner({"--model", model, "--sustained-secs", "-1"});
  EXPECT_EQ(p.exit_code, 2) << p.err;
}

// The gpu delegate's stats and the cold/warm init split. The first
// start with a serialization_dir compiles (init_us is init_cold_us) and the
// runner's own second start loads from the cache it wrote (init_warm_us); a
// later job with the same directory starts warm (init_us is init_warm_us).
TEST_F(RunnerTest, GpuDelegateStatsAndColdWarmInit) {
  const std::string model = SmallModel();
  const std::string cache = (dir_ / "cache").string();  // made by the runner
  auto run = [&](const std::string& options) {
    Process p = RunRunner({"--model", model, "--delegate", "gpu", "--delegate-options", options,
                           "--json", "--num-runs", "2"});
    return nlohmann::json::parse(p.out.empty() ? "{}" : p.out);
  };
  nlohmann::json cold = run("serialization_dir:" + cache + ";model_token:small");
  const std::string error = cold.value("error", "");
  if (error.find("no OpenCL") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_EQ(cold["status"], "ok") << cold.dump();
  const nlohmann::json& stats = cold["delegate_stats"];
  ASSERT_TRUE(stats.is_object()) << cold.dump();
  EXPECT_GE(stats["programs_compiled"].get<double>(), 1);
  EXPECT_EQ(stats["programs_loaded"].get<double>(), 0);
  const nlohmann::json& m = cold["metrics"];
  EXPECT_EQ(m["init_cold_us"], m["init_us"]);
  ASSERT_TRUE(m.contains("init_warm_us")) << m.dump();
  EXPECT_GT(m["init_warm_us"].get<double>(), 0);
  EXPECT_TRUE(m.contains("first_us"));
  EXPECT_FALSE(fs::is_empty(cache));

  nlohmann::json warm = run("serialization_dir:" + cache + ";model_token:small");
  ASSERT_EQ(warm["status"], "ok") << warm.dump();
  EXPECT_EQ(warm["delegate_stats"]["programs_compiled"].get<double>(), 0);
  EXPECT_GE(warm["delegate_stats"]["programs_loaded"].get<double>(), 1);
  EXPECT_EQ(warm["metrics"]["init_warm_us"], warm["metrics"]["init_us"]);
  EXPECT_FALSE(warm["metrics"].contains("init_cold_us"));

  // No serialization_dir: cold only, no second start.
  nlohmann::json plain = run("precision_loss_allowed:true");
  ASSERT_EQ(plain["status"], "ok") << plain.dump();
  EXPECT_TRUE(plain["metrics"].contains("init_cold_us"));
  EXPECT_FALSE(plain["metrics"].contains("init_warm_us"));
  EXPECT_EQ(plain["delegate_stats"]["fp16"].get<double>(), 1);

  // The cpu path has no delegate and no figures.
  Process p = RunRunner({"--model", model, "--json", "--num-runs", "2"});
  const nlohmann::json cpu = nlohmann::json::parse(p.out);
  EXPECT_FALSE(cpu.contains("delegate_stats"));
  EXPECT_FALSE(cpu["metrics"].contains("init_cold_us"));
  EXPECT_FALSE(cpu["metrics"].contains("init_warm_us"));
}

// A runner started through the dynamic loader (as a runner bundle starts it)
// makes its warm second start through the same loader.
TEST_F(RunnerTest, GpuWarmInitThroughTheLoader) {
  const char* loader = "/lib64/ld-linux-x86-64.so.2";
  if (::access(loader, X_OK) != 0) GTEST_SKIP() << loader << " is absent";
  const std::string model = SmallModel();
  std::string cmd =
      std::string("'") + loader + "' --library-path /usr/lib/x86_64-linux-gnu '" +
      DFARM_BINARY_DIR + "/bin/dfarm-runner' --model '" + model +
      "' --delegate gpu --delegate-options 'serialization_dir:" + (dir_ / "cache").string() +
      "' --json --num-runs 2 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ::pclose(pipe);
  const nlohmann::json doc = nlohmann::json::parse(out.empty() ? "{}" : out);
  const std::string error = doc.value("error", "");
  if (error.find("no OpenCL") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_EQ(doc.value("status", ""), "ok") << out;
  EXPECT_TRUE(doc["metrics"].contains("init_cold_us")) << out;
  EXPECT_TRUE(doc["metrics"].contains("init_warm_us")) << out;
}

}  // namespace
}  // namespace dfarm::testing
