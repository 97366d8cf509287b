// The real-model corpus (models/, fetched by scripts/setup.sh) through the
// real dfarm-runner: every model that is present must run ("status":"ok"),
// report the model's declared output shapes (read here from the file with the
// loader, not from the runner), write finite outputs, and write the same bytes
// when run again with the same seed. A model that is absent is skipped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace dfarm::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct RunResult {
  int exit_code = -1;
  nlohmann::json doc;
  std::vector<std::string> outputs;  // output_<i>.bin contents
};

RunResult RunRunner(const std::string& model, const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path json = dir / "runner.json";
  const std::string cmd = std::string(DFARM_BINARY_DIR) + "/bin/dfarm-runner --model '" + model +
                          "' --warmup-runs 1 --num-runs 2 --seed 7 --json --dump-outputs '" +
                          dir.string() + "' > '" + json.string() + "' 2> '" +
                          (dir / "stderr.txt").string() + "'";
  RunResult r;
  int status = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.doc = nlohmann::json::parse(ReadFile(json), nullptr, /*allow_exceptions=*/false);
  for (int i = 0; fs::exists(dir / ("output_" + std::to_string(i) + ".bin")); ++i) {
    r.outputs.push_back(ReadFile(dir / ("output_" + std::to_string(i) + ".bin")));
  }
  return r;
}

class CorpusRunnerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CorpusRunnerTest, RunsWithDeclaredShapesFiniteAndDeterministicOutputs) {
  const std::string path = std::string(DFARM_MODELS_DIR) + "/" + GetParam();
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent (scripts/setup.sh fetches it)";
  const std::string runner = std::string(DFARM_BINARY_DIR) + "/bin/dfarm-runner";
  ASSERT_TRUE(fs::exists(runner)) << runner << " is not built";

  std::unique_ptr<runtime::Model> model;
  runtime::Status status = runtime::Model::Load(path, &model);
  ASSERT_TRUE(status.ok()) << status.message();
  const tflite::SubGraph* graph = model->subgraph();

  const fs::path dir = fs::path(::testing::TempDir()) / ("corpus_" + std::string(GetParam()));
  fs::remove_all(dir);
  RunResult first = RunRunner(path, dir / "a");
  RunResult second = RunRunner(path, dir / "b");
  ASSERT_EQ(first.exit_code, 0) << ReadFile(dir / "a" / "stderr.txt");
  ASSERT_TRUE(first.doc.is_object()) << ReadFile(dir / "a" / "runner.json");
  EXPECT_EQ(first.doc.value("status", ""), "ok");
  EXPECT_GT(first.doc["metrics"].value("arena_bytes", 0), 0);
  EXPECT_GT(first.doc["metrics"].value("mean_us", 0.0), 0.0);

  const auto& outputs = first.doc["outputs"];
  ASSERT_EQ(outputs.size(), graph->outputs()->size());
  ASSERT_EQ(first.outputs.size(), graph->outputs()->size());
  for (uint32_t i = 0; i < graph->outputs()->size(); ++i) {
    const tflite::Tensor* t = graph->tensors()->Get(graph->outputs()->Get(i));
    std::vector<int32_t> declared(t->shape()->begin(), t->shape()->end());
    EXPECT_EQ(outputs[i]["shape"].get<std::vector<int32_t>>(), declared) << "output " << i;
    ASSERT_EQ(outputs[i].value("dtype", ""), "float32");
    int64_t elements = 1;
    for (int32_t d : declared) elements *= d;
    const std::string& bytes = first.outputs[i];
    ASSERT_EQ(static_cast<int64_t>(bytes.size()), elements * 4) << "output " << i;
    std::vector<float> values(elements);
    std::memcpy(values.data(), bytes.data(), bytes.size());
    int64_t non_finite = 0;
    for (float v : values) non_finite += std::isfinite(v) ? 0 : 1;
    EXPECT_EQ(non_finite, 0) << "output " << i;
  }
  ASSERT_EQ(second.exit_code, 0) << ReadFile(dir / "b" / "stderr.txt");
  EXPECT_TRUE(second.outputs == first.outputs) << "two runs with the same seed differ";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusRunnerTest,
                         ::testing::Values("face_detection_short_range.tflite",
                                           "face_detection_full_range.tflite",
                                           "face_detection_full_range_sparse.tflite",
                                           "hand_landmark_lite.tflite", "hand_landmark_full.tflite",
                                           "selfie_segmentation.tflite",
                                           "selfie_segmentation_landscape.tflite"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = fs::path(info.param).stem().string();
                           for (char& c : name) c = std::isalnum(c) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace dfarm::testing
