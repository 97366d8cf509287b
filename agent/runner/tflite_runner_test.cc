// dfarm-tflite-runner against dfarm-runner: both built programs run as
// subprocesses (as the agent runs them) on the corpus models and small built
// graphs, with TensorFlow Lite 2.9's C library (scripts/setup.sh puts it in
// .cache/tflite/<arch>/). Skips, naming the file, without it.
#include "agent/runner/tflite_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/runner/runner_json.h"
#include "agent/testing/run_process.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::runner {
namespace {

namespace fs = std::filesystem;
namespace tfl = ::dfarm::tflite;
using ::dfarm::testing::ModelBuilder;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const char* const kLib = DFARM_TFLITE_LIB;

struct Process : agent::testing::ProcessOutput {
  json doc;  // stdout parsed, when it is JSON
};
using agent::testing::ReadFile;

std::vector<float> ReadFloats(const fs::path& path) {
  const std::string bytes = ReadFile(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

template <typename T>
void WriteValues(const fs::path& path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

class TfliteRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kLib)) GTEST_SKIP() << "no TensorFlow Lite library at " << kLib;
    dir_ = fs::path(::testing::TempDir()) /
           ("dfarm_tflite_runner_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs bin/<program> with `args`; `env` is put before it (VAR=value ...),
  // with DFARM_TFLITE_LIB unset.
  Process Run(const std::string& program, const std::vector<std::string>& args,
              const std::string& env = "") {
    std::vector<std::string> words{std::string(DFARM_BINARY_DIR) + "/bin/" + program};
    words.insert(words.end(), args.begin(), args.end());
    Process p;
    static_cast<agent::testing::ProcessOutput&>(p) =
        agent::testing::RunQuoted(words, dir_.string(), "env -u DFARM_TFLITE_LIB " + env);
    p.doc = json::parse(p.out, nullptr, false);
    return p;
  }
  Process RunTflite(std::vector<std::string> args, const std::string& env = "") {
    args.insert(args.begin(), {"--tflite-lib", kLib});
    return Run(kTfliteRunnerName, args, env);
  }

  // input_0 [1,4] + input_1 [1,4] -> sum [1,4].
  std::string AddModel() {
    ModelBuilder b;
    const int a = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "a");
    const int c = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "b");
    const int sum = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "sum");
    b.AddAdd(a, c, sum);
    b.SetInputs({a, c});
    b.SetOutputs({sum});
    const fs::path path = dir_ / "add.tflite";
    EXPECT_TRUE(b.WriteFile(path.string()));
    return path.string();
  }

  fs::path dir_;
};

// Every float output of run `got` within 1e-4 abs + 1e-4 rel of `want`'s.
void ExpectOutputsNear(const fs::path& got, const fs::path& want, const std::string& what) {
  const json index = json::parse(ReadFile(want / "outputs.json"));
  ASSERT_FALSE(index.empty()) << what;
  EXPECT_EQ(json::parse(ReadFile(got / "outputs.json")), index) << what;
  for (const json& o : index) {
    if (o["dtype"] != "float32") continue;
    const std::string file = "output_" + std::to_string(o["index"].get<int>()) + ".bin";
    const std::vector<float> g = ReadFloats(got / file), w = ReadFloats(want / file);
    ASSERT_EQ(g.size(), w.size()) << what << " " << file;
    ASSERT_FALSE(w.empty());
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const double err = std::fabs(static_cast<double>(g[i]) - w[i]);
      worst = std::max(worst, err);
      if (!(err <= 1e-4 + 1e-4 * std::fabs(w[i]))) ++bad;
    }
    EXPECT_EQ(bad, 0u) << what << " " << file << ": worst abs error " << worst;
  }
}

TEST_F(TfliteRunnerTest, CorpusCpuOutputsMatchDfarmRunner) {
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(DFARM_MODELS_DIR)) {
    if (entry.path().extension() != ".tflite") continue;
    const std::string model = entry.path().string();
    const std::string name = entry.path().stem().string();
    const std::vector<std::string> common = {
        "--model", model, "--num-runs", "1", "--warmup-runs", "0", "--seed", "7", "--json"};
    auto with_dump = [&](const std::string& sub) {
      std::vector<std::string> a = common;
      a.insert(a.end(), {"--dump-outputs", (dir_ / sub).string()});
      return a;
    };
    Process tfl = RunTflite(with_dump(name + "_tflite"));
    if (name.rfind("selfie", 0) == 0) {
      // MediaPipe's Convolution2DTransposeBias, which TFLite lacks.
      EXPECT_EQ(tfl.exit_code, ExitCode(RunnerStatus::kUnsupported)) << name << tfl.err;
      EXPECT_EQ(tfl.doc["status"], "unsupported") << name;
      EXPECT_THAT(tfl.doc["error"].get<std::string>(), HasSubstr("Convolution2DTransposeBias"));
      continue;
    }
    ASSERT_EQ(tfl.exit_code, 0) << name << ": " << tfl.err;
    Process ours = Run("dfarm-runner", with_dump(name + "_dfarm"));
    ASSERT_EQ(ours.exit_code, 0) << name << ": " << ours.err;
    EXPECT_EQ(tfl.doc["inputs"], ours.doc["inputs"]) << name;
    ExpectOutputsNear(dir_ / (name + "_tflite"), dir_ / (name + "_dfarm"), name);
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "no corpus models in " << DFARM_MODELS_DIR;
}

// Seeded random inputs of quantized int8/uint8 and float16 tensors, seen
// through DEQUANTIZE: both runners must have made the same bytes.
TEST_F(TfliteRunnerTest, SeededQuantizedAndHalfInputsAreTheSameBytes) {
  ModelBuilder b;
  const int q8 = b.AddTensor(tfl::TensorType::INT8, {1, 64}, "q8");
  const int u8 = b.AddTensor(tfl::TensorType::UINT8, {1, 64}, "u8");
  const int f16 = b.AddTensor(tfl::TensorType::FLOAT16, {1, 64}, "f16");
  b.SetQuantization(q8, 0.25f, -3);
  b.SetQuantization(u8, 0.5f, 130);
  std::vector<int32_t> outs;
  for (int in : {q8, u8, f16}) {
    outs.push_back(b.AddTensor(tfl::TensorType::FLOAT32, {1, 64}, "out"));
    b.AddDequantize(in, outs.back());
  }
  b.SetInputs({q8, u8, f16});
  b.SetOutputs(outs);
  const fs::path model = dir_ / "dequantize.tflite";
  ASSERT_TRUE(b.WriteFile(model.string()));
  for (const char* program : {kTfliteRunnerName, "dfarm-runner"}) {
    std::vector<std::string> args = {
        "--model",        model.string(),           "--seed", "11", "--num-runs", "1",
        "--dump-outputs", (dir_ / program).string()};
    Process p = program == std::string("dfarm-runner") ? Run(program, args) : RunTflite(args);
    ASSERT_EQ(p.exit_code, 0) << program << p.err;
  }
  for (int i = 0; i < 3; ++i) {
    const std::string file = "output_" + std::to_string(i) + ".bin";
    const std::string got = ReadFile(dir_ / kTfliteRunnerName / file);
    EXPECT_EQ(got.size(), 64 * sizeof(float));
    EXPECT_EQ(got, ReadFile(dir_ / "dfarm-runner" / file)) << file;
  }
  // Not all one value: the inputs were filled.
  const std::vector<float> q = ReadFloats(dir_ / "dfarm-runner" / "output_0.bin");
  EXPECT_NE(*std::min_element(q.begin(), q.end()), *std::max_element(q.begin(), q.end()));
}

TEST_F(TfliteRunnerTest, XnnpackDocumentSaysTfliteAndMeasures) {
  const std::string model = std::string(DFARM_MODELS_DIR) + "/face_detection_short_range.tflite";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is absent";
  Process p = RunTflite({"--model", model, "--delegate", "xnnpack", "--num-threads", "2",
                         "--num-runs", "3", "--accuracy-reference", "cpu", "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.doc["status"], "ok");
  EXPECT_EQ(p.doc["runtime"]["kind"], "tflite");
  std::string error;
  std::unique_ptr<tflite::Library> lib = tflite::Library::Load(kLib, &error);
  ASSERT_NE(lib, nullptr) << error;
  EXPECT_EQ(p.doc["runtime"]["version"], lib->Version());
  EXPECT_EQ(p.doc["delegate"], "xnnpack");
  EXPECT_EQ(p.doc["threads_used"], 2);
  EXPECT_EQ(p.doc["metrics"]["num_runs"], 3);
  EXPECT_EQ(p.doc["samples_us"].size(), 3u);
  EXPECT_GT(p.doc["metrics"]["init_us"].get<double>(), 0);
  EXPECT_GT(p.doc["metrics"]["peak_rss_bytes"].get<double>(), 0);
  EXPECT_EQ(p.doc["outputs"][0]["shape"], json::parse("[1,896,16]"));
  EXPECT_EQ(p.doc["outputs"][0]["sha256"].get<std::string>().size(), 64u);
  EXPECT_FALSE(p.doc.contains("placement")) << "TFLite 2.9 logs no delegation line";
  ASSERT_TRUE(p.doc.contains("accuracy"));
  EXPECT_EQ(p.doc["accuracy"]["reference"], "cpu");
  ASSERT_EQ(p.doc["accuracy"]["outputs"].size(), 2u);
  for (const json& o : p.doc["accuracy"]["outputs"]) {
    EXPECT_GT(o["compared"].get<int64_t>(), 0);
    EXPECT_LT(o["max_abs_error"].get<double>(), 1e-3) << o.dump();
  }
  EXPECT_THAT(p.err, HasSubstr("runtime tflite"));

  // fp16 reaches TFLite (TFLITE_XNNPACK_DELEGATE_FLAG_FORCE_FP16): half-precision errors.
  p = RunTflite({"--model", model, "--delegate", "xnnpack", "--delegate-options", "fp16:true",
                 "--num-runs", "1", "--accuracy-reference", "cpu", "--json"});
  if (p.exit_code == ExitCode(RunnerStatus::kDelegateError)) {
    GTEST_SKIP() << "XNNPACK has no fp16 on this CPU: " << p.doc["error"];
  }
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const double fp16_error = p.doc["accuracy"]["outputs"][0]["max_abs_error"].get<double>();
  EXPECT_GT(fp16_error, 1e-3);
  EXPECT_LT(fp16_error, 1.0);
}

TEST_F(TfliteRunnerTest, DfarmRunnerDocumentSaysDfarm) {
  Process p = Run("dfarm-runner", {"--model", AddModel(), "--num-runs", "1", "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.doc["runtime"],
            json::parse(std::string(R"({"kind":"dfarm","version":")") + DFARM_VERSION + "\"}"));
}

TEST_F(TfliteRunnerTest, InputFilesAndSetsAreTheSameForBothRuntimes) {
  const std::string model = AddModel();
  for (int set = 0; set < 2; ++set) {
    const fs::path in = dir_ / ("set" + std::to_string(set));
    fs::create_directories(in);
    WriteValues<float>(in / "input_0.bin", {1.5f, -2, 3, 0.25f + set});
    WriteValues<float>(in / "input_1.bin", {10, 20, -30, 40});
  }
  for (const char* program : {kTfliteRunnerName, "dfarm-runner"}) {
    std::vector<std::string> args = {"--model",
                                     model,
                                     "--inputs",
                                     (dir_ / "set0").string(),
                                     "--inputs",
                                     (dir_ / "set1").string(),
                                     "--json",
                                     "--accuracy-reference",
                                     "cpu",
                                     "--dump-outputs",
                                     (dir_ / (std::string(program) + "_out")).string()};
    Process p = program == std::string("dfarm-runner") ? Run(program, args) : RunTflite(args);
    ASSERT_EQ(p.exit_code, 0) << program << p.err;
    EXPECT_EQ(p.doc["accuracy"]["sets"], 2) << program;
    EXPECT_EQ(p.doc["accuracy"]["outputs"][0]["max_abs_error"], 0.0) << program;
    EXPECT_EQ(ReadFloats(dir_ / (std::string(program) + "_out") / "output_0.bin"),
              (std::vector<float>{11.5f, 18, -27, 40.25f}))
        << program;
  }
  fs::remove(dir_ / "set1" / "input_1.bin");
  Process p = RunTflite({"--model", model, "--inputs", (dir_ / "set0").string(), "--inputs",
                         (dir_ / "set1").string(), "--accuracy-reference", "cpu", "--json"});
  EXPECT_EQ(p.exit_code, ExitCode(RunnerStatus::kModelError)) << p.err;
  EXPECT_THAT(p.doc["error"].get<std::string>(), StartsWith("input set 1: input file"));
}

// --task-outputs on TensorFlow Lite's runtime lists what dfarm-runner lists.
TEST_F(TfliteRunnerTest, TaskOutputsAreTheSameForBothRuntimes) {
  const std::string model = AddModel();
  const fs::path in = dir_ / "set0";
  fs::create_directories(in);
  WriteValues<float>(in / "input_0.bin", {1.5f, -2, 3, 0.25f});
  WriteValues<float>(in / "input_1.bin", {10, 20, -30, 40});  // sum 11.5, 18, -27, 40.25
  for (auto [arg, sets] :
       {std::pair{"topk:2", "[[3,1]]"},
        std::pair{"classmap:0:logits", R"([{"height":1,"rle":[1,2,0,1,1,1],"width":4}])"},
        // One anchor whose four box values are also its four raw class scores.
        std::pair{"anchors:0,0:raw:1:0",
                  "[[[3,40.25,11.5,18,-27,40.25,0],[1,18,11.5,18,-27,40.25,0]]]"}}) {
    for (const char* program : {kTfliteRunnerName, "dfarm-runner"}) {
      std::vector<std::string> args = {"--model",    model, "--inputs",       in.string(), "--json",
                                       "--num-runs", "1",   "--task-outputs", arg};
      Process p = program == std::string("dfarm-runner") ? Run(program, args) : RunTflite(args);
      ASSERT_EQ(p.exit_code, 0) << program << p.err;
      EXPECT_EQ(p.doc["task_outputs"]["sets"], json::parse(sets)) << program << " " << arg;
    }
  }
}

TEST_F(TfliteRunnerTest, ExternalDelegatePluginRunsAndReportsItsErrors) {
  const std::string model = std::string(DFARM_MODELS_DIR) + "/face_detection_short_range.tflite";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is absent";
  const std::string plugin = std::string("path:") + DFARM_TFLITE_TEST_PLUGIN;
  Process p =
      RunTflite({"--model", model, "--delegate", "external", "--delegate-options",
                 plugin + ";tflite_lib:" + kLib, "--num-runs", "2", "--json",
                 "--accuracy-reference", "cpu", "--dump-outputs", (dir_ / "external").string()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.doc["delegate"], "external");
  EXPECT_THAT(p.err, HasSubstr("Created TensorFlow Lite XNNPACK delegate"));
  for (const json& o : p.doc["accuracy"]["outputs"]) {
    EXPECT_LT(o["max_abs_error"].get<double>(), 1e-3) << o.dump();
  }
  p = RunTflite({"--model", model, "--json", "--dump-outputs", (dir_ / "cpu").string()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  ExpectOutputsNear(dir_ / "external", dir_ / "cpu", "external vs cpu");

  p = RunTflite({"--model", model, "--delegate", "external", "--delegate-options",
                 plugin + ";fail:the plugin says no", "--json"});
  EXPECT_EQ(p.exit_code, ExitCode(RunnerStatus::kDelegateError)) << p.err;
  EXPECT_THAT(p.doc["error"].get<std::string>(), HasSubstr("made no delegate: the plugin says no"));
}

TEST_F(TfliteRunnerTest, CorruptOrMissingModelIsAModelError) {
  const fs::path corrupt = dir_ / "corrupt.tflite";
  std::ofstream(corrupt) << "this is not a flatbuffer at all, just text";
  for (const fs::path& model : {corrupt, dir_ / "missing.tflite"}) {
    Process p = RunTflite({"--model", model.string(), "--json"});
    EXPECT_EQ(p.exit_code, ExitCode(RunnerStatus::kModelError)) << p.err;
    EXPECT_EQ(p.doc["status"], "model_error");
    EXPECT_THAT(p.doc["error"].get<std::string>(), HasSubstr(model.filename().string()));
    EXPECT_THAT(p.err, HasSubstr("dfarm-tflite-runner: model_error: failed to load model '"));
  }
  Process p = RunTflite({"--model", corrupt.string(), "--json"});
  EXPECT_THAT(p.doc["error"].get<std::string>(),
              HasSubstr("refused the model (TfLiteModelCreate): The model is not a valid"));
}

TEST_F(TfliteRunnerTest, MissingLibraryNamesEveryPlaceTried) {
  const std::string model = AddModel();
  Process p = Run(kTfliteRunnerName,
                  {"--tflite-lib", (dir_ / "nowhere.so").string(), "--model", model, "--json"});
  EXPECT_EQ(p.exit_code, ExitCode(RunnerStatus::kUsageError)) << p.err;
  EXPECT_EQ(p.doc["status"], "usage_error");
  EXPECT_THAT(p.doc["error"].get<std::string>(),
              HasSubstr("cannot find TensorFlow Lite's C library"));
  EXPECT_THAT(p.doc["error"].get<std::string>(), HasSubstr((dir_ / "nowhere.so").string()));
  // No flag, no variable: the loader's search, then <bin>/../lib.
  p = Run(kTfliteRunnerName, {"--model", model, "--json"}, "LD_LIBRARY_PATH=");
  EXPECT_EQ(p.exit_code, ExitCode(RunnerStatus::kUsageError)) << p.err;
  EXPECT_THAT(p.doc["error"].get<std::string>(),
              HasSubstr("tried libtensorflowlite_c.so: cannot open"));
  EXPECT_THAT(p.doc["error"].get<std::string>(),
              HasSubstr(std::string(DFARM_BINARY_DIR) + "/bin/../lib/libtensorflowlite_c.so"));
}

TEST_F(TfliteRunnerTest, LibraryFoundThroughTheVariableAndTheLoaderPath) {
  const std::string model = AddModel();
  const std::string lib_dir = fs::path(kLib).parent_path().string();
  for (const std::string& env : {"DFARM_TFLITE_LIB=" + agent::testing::ShellQuote(kLib),
                                 "LD_LIBRARY_PATH=" + agent::testing::ShellQuote(lib_dir)}) {
    Process p = Run(kTfliteRunnerName, {"--model", model, "--num-runs", "1", "--json"}, env);
    EXPECT_EQ(p.exit_code, 0) << env << ": " << p.err;
    EXPECT_EQ(p.doc["runtime"]["kind"], "tflite") << env;
  }
}

TEST_F(TfliteRunnerTest, DelegateAndUsageErrors) {
  const std::string model = AddModel();
  struct Case {
    std::vector<std::string> args;
    RunnerStatus status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--delegate", "gpu"}, RunnerStatus::kDelegateError, "unknown delegate 'gpu'"},
      {{"--delegate", "cpu", "--delegate-options", "threads:2"},
       RunnerStatus::kDelegateError,
       "takes no options"},
      {{"--delegate", "xnnpack", "--delegate-options", "threads:0"},
       RunnerStatus::kDelegateError,
       "'threads' has value '0'"},
      {{"--delegate", "xnnpack", "--delegate-options", "max_delegated_partitions:1"},
       RunnerStatus::kDelegateError,
       "no option 'max_delegated_partitions'"},
      {{"--delegate", "xnnpack", "--num-threads", "2", "--delegate-options", "threads:3"},
       RunnerStatus::kDelegateError,
       "disagrees"},
      {{"--delegate", "external"}, RunnerStatus::kDelegateError, "needs the option path:"},
      {{"--delegate", "external", "--delegate-options", "path:" + std::string(kLib)},
       RunnerStatus::kDelegateError,
       "exports no tflite_plugin_create_delegate"},
      {{"--delegate", "external", "--delegate-options", "path:/nonexistent/plugin.so"},
       RunnerStatus::kDelegateError,
       "cannot load delegate plugin '/nonexistent/plugin.so'"},
      {{"--profile"}, RunnerStatus::kUsageError, "--profile"},
      {{"--num-runs", "0"}, RunnerStatus::kUsageError, "--num-runs"},
      {{"--tflite-lib="}, RunnerStatus::kUsageError, "--tflite-lib: expected a path"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--model", model, "--json"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Process p = RunTflite(args);
    EXPECT_EQ(p.exit_code, ExitCode(c.status)) << c.says << ": " << p.err;
    EXPECT_EQ(p.doc["status"], RunnerStatusName(c.status)) << c.says;
    EXPECT_THAT(p.doc["error"].get<std::string>(), HasSubstr(c.says));
  }
}

TEST_F(TfliteRunnerTest, HelpVersionAndBenchmarkModelSpellings) {
  Process p = Run(kTfliteRunnerName, {"--version"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_EQ(p.out, std::string("dfarm-tflite-runner ") + DFARM_VERSION + "\n");
  p = Run(kTfliteRunnerName, {"--help"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_THAT(p.out, HasSubstr("--tflite-lib PATH"));
  EXPECT_THAT(p.out, HasSubstr("Usage: dfarm-tflite-runner"));
  // benchmark_model's spellings and its summary line, as dfarm-runner.
  p = RunTflite({"--graph", AddModel(), "--num_runs", "2", "--use_xnnpack", "true"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_THAT(p.out, StartsWith("Inference timings in us: Init: "));
  EXPECT_THAT(p.err, HasSubstr("delegate xnnpack"));
}

TEST(TfliteRunnerUnit, LibraryCandidatesInOrder) {
  EXPECT_EQ(TfliteLibraryCandidates("/a/lib.so", "/b/lib.so", "/x/bin"),
            std::vector<std::string>{"/a/lib.so"});
  EXPECT_EQ(TfliteLibraryCandidates("", "/b/lib.so", "/x/bin"),
            std::vector<std::string>{"/b/lib.so"});
  EXPECT_EQ(
      TfliteLibraryCandidates("", "", "/x/bin"),
      (std::vector<std::string>{"libtensorflowlite_c.so", "/x/bin/../lib/libtensorflowlite_c.so"}));
  EXPECT_EQ(TfliteLibraryCandidates("", nullptr, ""),
            std::vector<std::string>{"libtensorflowlite_c.so"});
}

TEST(TfliteRunnerUnit, PlacementFromTheDelegationLines) {
  EXPECT_FALSE(PlacementFromTfliteLog("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"));
  std::optional<JobPlacement> p = PlacementFromTfliteLog(
      "INFO: Replacing 100 node(s) with delegate (TfLiteXNNPackDelegate) node, yielding 2 "
      "partitions.\nINFO: Replacing 3 out of 5 node(s) with delegate (X) node, yielding 1 "
      "partitions for the whole graph.\n");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->partitions, 3);
  EXPECT_TRUE(p->nodes.empty());
}

// "runtime" is read back and written again as it was; older documents have none.
TEST(TfliteRunnerUnit, RuntimeRoundTripsThroughTheCodec) {
  RunOutcome outcome;
  outcome.runtime = "tflite";
  outcome.runtime_version = "2.9.0";
  const std::string text = ReportJson(outcome);
  EXPECT_THAT(text, HasSubstr(R"("runtime":{"kind":"tflite","version":"2.9.0"})"));
  Result<runner_json::Document> doc = runner_json::ParseRunnerJson(text);
  ASSERT_TRUE(doc.ok()) << doc.message();
  ASSERT_TRUE(doc->runtime);
  EXPECT_EQ(doc->runtime->kind, "tflite");
  EXPECT_EQ(doc->runtime->version, "2.9.0");
  EXPECT_EQ(runner_json::WriteRunnerJson(*doc), text);
  doc = runner_json::ParseRunnerJson(R"({"status":"ok","model":"m.tflite"})");
  ASSERT_TRUE(doc.ok());
  EXPECT_FALSE(doc->runtime);
  EXPECT_THAT(runner_json::WriteRunnerJson(*doc), Not(HasSubstr("runtime")));
}

}  // namespace
}  // namespace dfarm::runner
